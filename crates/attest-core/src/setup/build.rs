//! [`Settings::build`]: the settled settings → a fully built [`Attest`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{PolicyEngine, MAX_POLICY_BYTES};

use super::{Settings, LINK_TTL};
use crate::approvals::{ApprovalStore, LinkSigner, Notifier, Secret};
use crate::config::{ConfigError, NotifyBy};
use crate::detect::{OperationIds, Registry};
use crate::protected::ProtectedSet;
use crate::verification::ReadBack;
use crate::{Attest, Describer, Gate};

/// What only the door itself can add to what the configuration builds: each field's
/// default is the configuration's.
#[derive(Default)]
#[non_exhaustive]
pub struct DoorParts {
    /// The gate answering `ask`, instead of the approval store in [`Settings::ask`]'s
    /// mode (the hook: the person at Claude Code's prompt; the demo: a stand-in).
    pub gate: Option<Arc<dyn Gate>>,
    /// Notifiers told of each new request besides the configured ones (the CLI's
    /// stderr notice).
    pub notifiers: Vec<Arc<dyn Notifier>>,
    /// This door never asks (the approval commands, the inbox): no notifier is built, so
    /// their secrets need not be in its environment.
    pub never_asks: bool,
    /// Open an existing ledger only; never create one (`attest pending`).
    pub existing_ledger: bool,
    /// This build serves one session (a server's process): calls that name no run, and
    /// no run is configured, are recorded under one run made for it.
    pub session: bool,
    /// An ask finds the request an earlier attempt of the same call filed, in any
    /// process ([`crate::approvals::StoreGate::same_call`]): the bindings, whose
    /// programs are run again after a person approves.
    pub same_call: bool,
}

impl DoorParts {
    /// The configuration's parts, with `gate` answering `ask`.
    pub fn gate(gate: impl Gate + 'static) -> DoorParts {
        DoorParts {
            gate: Some(Arc::new(gate)),
            ..DoorParts::default()
        }
    }

    /// The configuration's parts for a server: one session, its own run.
    pub fn session() -> DoorParts {
        DoorParts {
            session: true,
            ..DoorParts::default()
        }
    }

    /// The configuration's parts, with `notifier` told of each new request as well.
    #[must_use]
    pub fn notifier(mut self, notifier: Arc<dyn Notifier>) -> DoorParts {
        self.notifiers.push(notifier);
        self
    }

    /// The configuration's parts for a door that never asks.
    pub fn never_asks(existing_ledger: bool) -> DoorParts {
        DoorParts {
            never_asks: true,
            existing_ledger,
            ..DoorParts::default()
        }
    }
}

impl Settings {
    /// Builds the pipeline: the policy, detection registry, OpenAPI operation ids,
    /// read-back drivers and notifiers first (a setting that does not load must not leave
    /// a ledger behind), then the ledger, its approval store and the gate.
    pub fn build(&self, parts: DoorParts) -> Result<Attest, ConfigError> {
        let policy = self.policy()?;
        let registry = Arc::new(self.registry()?);
        let operations = self.operations()?;
        let readback = self.readback_with(Arc::clone(&registry))?;
        let mut notifiers = if parts.never_asks || parts.gate.is_some() {
            Vec::new()
        } else {
            self.surface_notifiers()?
        };
        notifiers.extend(parts.notifiers);
        let ledger = Arc::new(self.open_ledger(!parts.existing_ledger)?);
        let store =
            Arc::new(
                ApprovalStore::open(&ledger).map_err(|source| ConfigError::Build {
                    what: "the approval store",
                    source: Box::new(source.into()),
                })?,
            );
        let gate: Arc<dyn Gate> = match parts.gate {
            Some(gate) => gate,
            None => Arc::new(self.ask.value.gate(
                Arc::clone(&store),
                self.wait.value,
                self.use_by.value,
                notifiers,
                parts.same_call,
            )),
        };
        // A server's session is one run unless one is named (a call may name its own).
        let run = match &self.run {
            Some(run) => Some(run.value.clone()),
            None if parts.session => Some(uuid::Uuid::new_v4().to_string()),
            None => None,
        };
        let mut builder = Attest::builder()
            .ledger(ledger)
            .policy(policy)
            .approvals(store)
            .registry(registry)
            .operations(operations)
            .readback(readback)
            .shared_gate(gate)
            .shadow(self.shadow)
            .personal(self.file.personal.clone())
            .inbox(self.inbox_url())
            .protected(self.protected_set())
            .idempotency(crate::IdempotencyOptions::new(
                self.key_lifetime.value,
                self.key_wait.value,
            ));
        if let Some(run) = run {
            builder = builder.run_id(run);
        }
        if let Some(agent) = &self.agent {
            builder = builder.agent(agent.value.clone());
        }
        if let Some(actor) = &self.actor {
            builder = builder.actor(actor.value.clone());
        }
        builder.build().map_err(|source| ConfigError::Build {
            what: "the pipeline",
            source: Box::new(source),
        })
    }

    /// The governor's protected files as this configuration uses them
    /// ([`crate::protected`]): the fixed names, and the configuration file, the policy
    /// file, the ledger (a file), the signing key and the hook's state directory,
    /// whatever their names.
    pub fn protected_set(&self) -> ProtectedSet {
        let home = self.env_var("HOME").map(PathBuf::from);
        let mut set = ProtectedSet::new(home);
        if let Some(file) = &self.file_path {
            set = set.file(&file.value);
        }
        set = match &self.policy_path {
            Some(policy) => set.file(&policy.value),
            None => set.file(Path::new("attest.yaml")),
        };
        if !super::is_url(&self.ledger_path.value) {
            set = set.file(&self.ledger_path.value);
        }
        set = set.file(&self.key_path());
        if let Some(state) = crate::state::state_dir(self.env().as_ref()) {
            set = set.dir(&state);
        }
        set
    }

    /// The policy: the file named, else `./attest.yaml` if it exists, else the built-in
    /// default. A file that does not load is an error, never a silent fallback.
    pub fn policy(&self) -> Result<PolicyEngine, ConfigError> {
        let local = Path::new("attest.yaml");
        let path = match &self.policy_path {
            Some(path) => Some(path.value.as_path()),
            None if local.exists() => Some(local),
            None => None,
        };
        let policy = match path {
            Some(path) => {
                let text = read_policy(path)?;
                PolicyEngine::from_yaml(&text, &path.display().to_string())
            }
            None => PolicyEngine::default_policy(),
        };
        policy.map_err(|source| ConfigError::Policy {
            source: Box::new(source),
        })
    }

    /// The detection registry: built-in, the file's `registry` files and
    /// `systems.*.base_url` hosts, then `ATTEST_BASE_URL_<SYSTEM>` hosts.
    pub fn registry(&self) -> Result<Registry, ConfigError> {
        self.file.registry(self.env.as_ref(), &self.origin())
    }

    /// The operation ids of the OpenAPI specs: what an HTTP call's operation is named.
    pub fn operations(&self) -> Result<OperationIds, ConfigError> {
        let mut operations = OperationIds::default();
        for path in &self.openapi.value {
            let spec = OperationIds::from_file(path).map_err(|source| ConfigError::ReadBack {
                origin: self.origin(),
                source: Box::new(source),
            })?;
            operations.extend(spec);
        }
        Ok(operations)
    }

    /// The read-back drivers: recipes (the file's `recipes` directories first), OpenAPI
    /// specs, and each system's base URL and credential variable.
    pub fn readback(&self) -> Result<ReadBack, ConfigError> {
        self.readback_with(Arc::new(self.registry()?))
    }

    /// [`Settings::readback`] over the configured `registry`, already built.
    fn readback_with(&self, registry: Arc<Registry>) -> Result<ReadBack, ConfigError> {
        let env = Arc::clone(&self.env);
        let env = move |name: &str| env.var(name);
        let mut file = self.file.clone();
        file.openapi.clone_from(&self.openapi.value);
        file.readback(env, &self.origin(), registry)
    }

    /// What describes calls as the pipeline [`Settings::build`] builds would, without
    /// opening the ledger: the configured registry, OpenAPI operation ids and read-back
    /// drivers. For a command that judges calls without making them (`attest policy
    /// test`, `policy explain`).
    pub fn describer(&self) -> Result<Describer, ConfigError> {
        let registry = Arc::new(self.registry()?);
        let readback = self.readback_with(Arc::clone(&registry))?;
        Ok(Describer::new(
            registry,
            self.operations()?,
            Some(Arc::new(readback)),
        ))
    }

    /// The notifiers a door that asks tells (none with `notify.by: inbox`: `attest
    /// serve` tells people then).
    pub fn surface_notifiers(&self) -> Result<Vec<Arc<dyn Notifier>>, ConfigError> {
        match self.file.notify.by {
            NotifyBy::Surfaces => self.notifiers(),
            NotifyBy::Inbox => Ok(Vec::new()),
        }
    }

    /// Every notifier the file configures, each with one-click links when the link key
    /// is set; their secrets come from the variables the file names.
    pub fn notifiers(&self) -> Result<Vec<Arc<dyn Notifier>>, ConfigError> {
        let links = self.link_signer();
        self.file
            .notifiers(self.env.as_ref(), links.as_ref(), &self.origin())
    }

    /// The Slack notifier, when configured: the inbox updates cards with it.
    #[cfg(feature = "http")]
    pub fn slack(&self) -> Result<Option<Arc<crate::approvals::SlackNotifier>>, ConfigError> {
        let links = self.link_signer();
        Ok(self
            .file
            .slack_notifier(self.env.as_ref(), links.as_ref(), &self.origin())?
            .map(Arc::new))
    }

    /// The Teams notifier, when configured: the inbox posts the decided card with it.
    #[cfg(feature = "http")]
    pub fn teams(&self) -> Result<Option<Arc<crate::approvals::TeamsNotifier>>, ConfigError> {
        let links = self.link_signer();
        Ok(self
            .file
            .teams_notifier(links.as_ref(), &self.origin())?
            .map(Arc::new))
    }

    /// The one-click link signer, when the link key's variable is set.
    pub fn link_signer(&self) -> Option<LinkSigner> {
        let key = self.env.var(self.file.link_key_var())?;
        Some(LinkSigner::new(
            Secret::new(key),
            self.inbox_url(),
            LINK_TTL,
        ))
    }

    /// Opens the ledger (on the tenant's chain), creating it and its directory if `create`.
    pub fn open_ledger(&self, create: bool) -> Result<Ledger, ConfigError> {
        let options = LedgerOptions {
            durability: self.durability.value,
            create,
            tenant: self.tenant.as_ref().map(|t| t.value.clone()),
            ..LedgerOptions::default()
        };
        Ledger::open(&self.ledger_path.value, options).map_err(|source| ConfigError::Ledger {
            location: self.ledger_display(),
            source: Box::new(source),
        })
    }
}

/// A policy file's text, with a size cap.
fn read_policy(path: &Path) -> Result<String, ConfigError> {
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_POLICY_BYTES as u64 {
        return Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_POLICY_BYTES as u64,
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

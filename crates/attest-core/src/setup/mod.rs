//! Configuration → [`Attest`]: the one place every door (the CLI's servers and hook,
//! the Python and TypeScript packages, the Rust API) turns the configuration file, the
//! environment and its own arguments into a fully built pipeline.
//!
//! Precedence, for each setting, lives here and nowhere else: what the door was given
//! ([`Overrides`]: a command-line flag, a Python keyword argument, a TypeScript option),
//! then its environment variable, then the configuration file, then the built-in
//! default. The file is [`Overrides::config`], else `$ATTEST_CONFIG`, else
//! `.attest/config.yaml` when it exists; a file that is named but does not load is an
//! error, never a silent fallback.
//!
//! [`Settings::resolve`] reads the file and settles every setting (and where it came
//! from, for `attest config check`); [`Settings::build`] opens the ledger and builds
//! the policy, registry, read-back drivers, OpenAPI operation ids, notifiers, approval
//! store and gate. [`attest`] does both.
//!
//! ```
//! use attest_core::setup::{self, Overrides};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let config = dir.path().join("config.yaml");
//! std::fs::write(&config, "ledger: audit.sqlite\nagent: claims-bot\n")?;
//! let overrides = Overrides {
//!     config: Some(config),
//!     actor: Some("alice@acme.com".to_owned()),
//!     ..Overrides::default()
//! };
//! let attest = setup::attest(&overrides)?;
//! assert!(attest.ledger().path().ends_with("audit.sqlite"));
//! # Ok(())
//! # }
//! ```

mod ask;
mod build;
mod describe;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::Durability;

pub use ask::{AskMode, TimeoutGate};
/// A URL as settings print it: the one redaction every printed value crosses.
pub use attest_policy::redact_url_credentials as redact_url;
pub use build::DoorParts;
pub use describe::{location_display, Shown};

use crate::approvals::DEFAULT_USE_BY;
use crate::config::{ConfigError, ConfigFile, CONFIG_VAR, DEFAULT_CONFIG_PATH};
use crate::verification::{Env, ProcessEnv};
use crate::Attest;

/// The ledger when nothing names one.
pub const DEFAULT_LEDGER: &str = ".attest/ledger.sqlite";
/// How long a blocking call waits for a person when nothing says.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The inbox's address when nothing says.
pub const DEFAULT_INBOX: &str = "127.0.0.1:8321";
/// How long one-click links stay valid.
pub const LINK_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The environment variables each setting is read from.
pub mod vars {
    /// The ledger.
    pub const LEDGER: &str = "ATTEST_LEDGER";
    /// The tenant.
    pub const TENANT: &str = "ATTEST_TENANT";
    /// The durability.
    pub const DURABILITY: &str = "ATTEST_DURABILITY";
    /// The policy file.
    pub const POLICY: &str = "ATTEST_POLICY";
    /// The signing key file.
    pub const SIGNING_KEY: &str = "ATTEST_SIGNING_KEY";
    /// The agent.
    pub const AGENT: &str = "ATTEST_AGENT";
    /// The actor.
    pub const ACTOR: &str = "ATTEST_ACTOR";
    /// The run.
    pub const RUN: &str = "ATTEST_RUN";
}

/// What a door was given directly: each field, when set, beats the environment and the
/// configuration file. A plain struct, so the CLI's flags, Python's keyword arguments
/// and a TypeScript options object all fill the same fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// The configuration file [env: `ATTEST_CONFIG`; default: `.attest/config.yaml` if
    /// present].
    pub config: Option<PathBuf>,
    /// The ledger: a file or a `postgres://` URL.
    pub ledger: Option<String>,
    /// The tenant whose chain to use.
    pub tenant: Option<String>,
    /// `full`, `normal` or `off`.
    pub durability: Option<String>,
    /// The policy file.
    pub policy: Option<PathBuf>,
    /// The checkpoint signing key file.
    pub key: Option<PathBuf>,
    /// The agent recorded for calls that name none.
    pub agent: Option<String>,
    /// The person recorded as acted for, for calls that name none.
    pub actor: Option<String>,
    /// The run recorded for calls that name none (without one, a server's session makes
    /// one; see [`DoorParts::session`]).
    pub run: Option<String>,
    /// The agent recorded when nothing else names one (a door's own name:
    /// `claude-code` for its hook), below the file and the environment.
    pub default_agent: Option<String>,
    /// How `ask` is answered [default: block].
    pub ask: Option<AskMode>,
    /// How long a blocking call waits for a person [file: `approvals.wait`; default: 300 s].
    pub wait: Option<Duration>,
    /// How long an approval may be used once given [file: `approvals.use_by`; default: 1 h].
    pub use_by: Option<Duration>,
    /// OpenAPI specs, instead of the file's `openapi` list.
    pub openapi: Vec<PathBuf>,
    /// Shadow mode (`--shadow`, `shadow=True`): can turn the file's `mode` to shadow,
    /// never back to enforcing.
    pub shadow: bool,
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The door's own argument (a command-line flag, a keyword argument).
    Flag,
    /// An environment variable.
    Env,
    /// The configuration file.
    File,
    /// The built-in default.
    Default,
}

impl Source {
    /// `flag`, `env`, `file`, `default`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Env => "env",
            Source::File => "file",
            Source::Default => "default",
        }
    }
}

/// A setting's value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

/// The first of given, environment, file that is set, with where it came from.
fn pick<T>(given: Option<T>, env: Option<T>, file: Option<T>) -> Option<Sourced<T>> {
    let sourced = |source| move |value| Sourced { value, source };
    given
        .map(sourced(Source::Flag))
        .or_else(|| env.map(sourced(Source::Env)))
        .or_else(|| file.map(sourced(Source::File)))
}

/// [`pick`], else the default.
fn pick_or<T>(given: Option<T>, env: Option<T>, file: Option<T>, default: T) -> Sourced<T> {
    pick(given, env, file).unwrap_or(Sourced {
        value: default,
        source: Source::Default,
    })
}

/// Every setting settled: what [`Settings::build`] builds from and `attest config
/// check` shows. Cheap to clone (a gateway clones it per tenant).
#[derive(Clone)]
#[non_exhaustive]
pub struct Settings {
    /// The configuration file's settings (empty when there is none).
    pub file: ConfigFile,
    /// The configuration file read, and how it was found.
    pub file_path: Option<Sourced<PathBuf>>,
    /// The ledger: a file or a database URL.
    pub ledger_path: Sourced<PathBuf>,
    /// The tenant whose chain to use.
    pub tenant: Option<Sourced<String>>,
    /// How hard appends work to survive a crash.
    pub durability: Sourced<Durability>,
    /// The policy file; `None`: `./attest.yaml` if present, else the built-in default.
    pub policy_path: Option<Sourced<PathBuf>>,
    /// The agent recorded for calls that name none.
    pub agent: Option<Sourced<String>>,
    /// The actor recorded for calls that name none.
    pub actor: Option<Sourced<String>>,
    /// The run recorded for calls that name none; `None`: one per server session.
    pub run: Option<Sourced<String>>,
    /// How `ask` is answered.
    pub ask: Sourced<AskMode>,
    /// How long a blocking call waits for a person.
    pub wait: Sourced<Duration>,
    /// How long an approval may be used once given.
    pub use_by: Sourced<Duration>,
    /// How long an idempotency key lasts [file: `idempotency.lifetime`; default: 24 h].
    pub key_lifetime: Sourced<Duration>,
    /// How long a retry waits for its key's running first call [file:
    /// `idempotency.wait`; default: 30 s].
    pub key_wait: Sourced<Duration>,
    /// The OpenAPI specs: operation ids for detection, and read-back of their writes.
    pub openapi: Sourced<Vec<PathBuf>>,
    /// The checkpoint signing key's file, when one is named (see [`Settings::key_path`]).
    pub key: Option<Sourced<PathBuf>>,
    /// Shadow mode: verdicts recorded, not enforced (the door's flag or `mode: shadow`).
    pub shadow: bool,
    /// Where secrets and `ATTEST_BASE_URL_*` are read from.
    env: Arc<dyn Env>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("file_path", &self.file_path)
            .field("ledger", &self.ledger_display())
            .field("tenant", &self.tenant)
            .field("policy_path", &self.policy_path)
            .finish_non_exhaustive()
    }
}

/// The configuration file → [`Attest`], in one call: [`Settings::resolve`] with the
/// process environment, then [`Settings::build`] with the default gate for
/// [`Overrides::ask`].
pub fn attest(overrides: &Overrides) -> Result<Attest, ConfigError> {
    Settings::resolve(overrides, Arc::new(ProcessEnv))?.build(DoorParts::default())
}

impl Settings {
    /// Reads the configuration file and settles every setting: `overrides`, then `env`,
    /// then the file, then the defaults. Opens nothing but the file.
    pub fn resolve(overrides: &Overrides, env: Arc<dyn Env>) -> Result<Settings, ConfigError> {
        let var = |name: &str| env.var(name);
        let file_path = pick(
            overrides.config.clone(),
            var(CONFIG_VAR).map(PathBuf::from),
            None,
        )
        .or_else(|| {
            let local = Path::new(DEFAULT_CONFIG_PATH);
            local.exists().then(|| Sourced {
                value: local.to_path_buf(),
                source: Source::Default,
            })
        });
        let file = match &file_path {
            Some(path) => ConfigFile::load(&path.value, env.as_ref())?,
            None => ConfigFile::default(),
        };
        let origin = origin_of(file_path.as_ref());
        let ledger = pick_or(
            overrides.ledger.clone(),
            var(vars::LEDGER),
            file.ledger.clone(),
            DEFAULT_LEDGER.to_owned(),
        );
        let durability = pick_or(
            overrides.durability.clone(),
            var(vars::DURABILITY),
            file.durability.clone(),
            "full".to_owned(),
        );
        let durability = Sourced {
            value: durability.value.parse().map_err(|_| ConfigError::Setting {
                origin: origin.clone(),
                setting: "durability",
                source_of: durability.source.as_str(),
                message: format!("{:?}: expected full, normal or off", durability.value),
            })?,
            source: durability.source,
        };
        let agent = pick(
            overrides.agent.clone(),
            var(vars::AGENT),
            file.agent.clone(),
        )
        .or_else(|| {
            overrides.default_agent.clone().map(|value| Sourced {
                value,
                source: Source::Default,
            })
        });
        let openapi = if overrides.openapi.is_empty() {
            Sourced {
                source: if file.openapi.is_empty() {
                    Source::Default
                } else {
                    Source::File
                },
                value: file.openapi.clone(),
            }
        } else {
            Sourced {
                value: overrides.openapi.clone(),
                source: Source::Flag,
            }
        };
        Ok(Settings {
            ledger_path: Sourced {
                value: PathBuf::from(ledger.value),
                source: ledger.source,
            },
            tenant: pick(overrides.tenant.clone(), var(vars::TENANT), None),
            durability,
            policy_path: pick(
                overrides.policy.clone(),
                var(vars::POLICY).map(PathBuf::from),
                file.policy.clone(),
            ),
            agent,
            actor: pick(
                overrides.actor.clone(),
                var(vars::ACTOR),
                file.actor.clone(),
            ),
            run: pick(overrides.run.clone(), var(vars::RUN), None),
            ask: pick_or(overrides.ask, None, None, AskMode::Block),
            wait: pick_or(overrides.wait, None, file.approvals.wait, DEFAULT_WAIT),
            use_by: pick_or(
                overrides.use_by,
                None,
                file.approvals.use_by,
                DEFAULT_USE_BY,
            ),
            key_lifetime: pick_or(
                None,
                None,
                file.idempotency.lifetime,
                crate::pipeline::keys::DEFAULT_LIFETIME,
            ),
            key_wait: pick_or(
                None,
                None,
                file.idempotency.wait,
                crate::pipeline::keys::DEFAULT_WAIT,
            ),
            openapi,
            key: pick(
                overrides.key.clone(),
                var(vars::SIGNING_KEY).map(PathBuf::from),
                file.key.clone(),
            ),
            shadow: file.shadow(overrides.shadow),
            file,
            file_path,
            env,
        })
    }

    /// The configuration file's name for error messages.
    pub fn origin(&self) -> String {
        origin_of(self.file_path.as_ref())
    }

    /// Where secrets and base URLs are read from.
    pub fn env(&self) -> &Arc<dyn Env> {
        &self.env
    }

    /// The same settings, reading secrets and base URLs from `env` when built (a demo's
    /// fake vendor, an embedding's own secret store).
    #[must_use]
    pub fn with_env(mut self, env: Arc<dyn Env>) -> Settings {
        self.env = env;
        self
    }

    /// The same settings on another tenant's chain (its own ledger rows, approvals and
    /// signing key).
    #[must_use]
    pub fn for_tenant(&self, tenant: &str) -> Settings {
        let mut settings = self.clone();
        settings.tenant = Some(Sourced {
            value: tenant.to_owned(),
            source: Source::Flag,
        });
        settings
    }

    /// Variable `name` of the environment these settings were resolved in, when set and
    /// not empty (a secret a door reads: `ATTEST_AGENT_TOKEN`).
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env.var(name)
    }

    /// The tenant's name, when one is set.
    pub fn tenant_name(&self) -> Option<&str> {
        self.tenant.as_ref().map(|t| t.value.as_str())
    }

    /// The ledger as messages name it: a URL without its password or options.
    pub fn ledger_display(&self) -> String {
        location_display(&self.ledger_path.value)
    }

    /// The signing key's path: the one named, else `signing.key` beside the ledger
    /// (`.attest/` for a PostgreSQL ledger); a tenant's is `signing.TENANT.key`, so each
    /// tenant signs with a key (and origin) of its own.
    pub fn key_path(&self) -> PathBuf {
        if let Some(key) = &self.key {
            return key.value.clone();
        }
        let ledger = &self.ledger_path.value;
        let dir = if is_url(ledger) {
            Path::new(".attest")
        } else {
            ledger.parent().unwrap_or_else(|| Path::new(""))
        };
        match self.tenant_name() {
            Some(tenant) => dir.join(format!("signing.{tenant}.key")),
            None => dir.join("signing.key"),
        }
    }

    /// The inbox's public base URL (for links): `inbox.public_url`, else `http://` and
    /// `inbox.listen`, else the default address.
    pub fn inbox_url(&self) -> String {
        match (&self.file.inbox.public_url, &self.file.inbox.listen) {
            (Some(url), _) => url.trim_end_matches('/').to_owned(),
            (None, Some(listen)) => format!("http://{listen}"),
            (None, None) => format!("http://{DEFAULT_INBOX}"),
        }
    }
}

/// Whether a ledger location is a PostgreSQL URL rather than a file.
pub fn is_url(location: &Path) -> bool {
    location
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

fn origin_of(file_path: Option<&Sourced<PathBuf>>) -> String {
    match file_path {
        Some(path) => path.value.display().to_string(),
        None => "(no configuration file)".to_owned(),
    }
}

#[cfg(test)]
mod tests;

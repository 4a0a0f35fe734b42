//! Authenticated agents: a door with `agents:` configured names each call's agent by
//! the credential it carries, never by a label.
//!
//! The credential is a per-agent token (`attest agents add NAME`, kept as its SHA-256 in
//! the approval store; revocable) or, with `agents.jwt`, a JWT from the organisation's
//! identity provider, checked by the one [`jwt::JwtValidator`] (signature against the
//! provider's JWKS, issuer, audience, expiry; the agent is the configured claim).
//! The gateway takes it in `X-Attest-Token`, `mcp-proxy --listen` in
//! `Authorization: Bearer`, `mcp-server` and the stdio proxy in `ATTEST_AGENT_TOKEN`, the
//! Python and TypeScript packages as `agent_token` / `agentToken` (else
//! `ATTEST_AGENT_TOKEN`). A label the caller also gives (`X-Attest-Agent`, `agent=`)
//! must name the same agent, else the call is refused; a call without a credential is
//! refused or, with `unauthenticated: record`, decided and recorded as agent
//! `unauthenticated`. The row's `agent_auth` says which (`token`, `jwt`,
//! `unauthenticated`). Policy's `match.agent` therefore only ever sees a proven name (or
//! `unauthenticated`).
//!
//! [`AgentAuth`] is what every door shares; [`CallerAgent`] is one caller's credential
//! at a door that serves a single agent (a binding's `Attest`), checked on every call so
//! that a revoked token or an expired JWT stops the next call, as on the gateway.
//! Checking credentials needs the identity provider's keys over HTTP: feature `http`.

#[cfg(feature = "http")]
pub mod jwt;

use attest_policy::Action;

/// The agent recorded for a call that carried no credential, when that is allowed.
pub const UNAUTHENTICATED: &str = "unauthenticated";

/// The variable holding the agent's own token or JWT for a door that serves one agent:
/// `mcp-server`, the stdio `mcp-proxy`, and the Python and TypeScript packages when they
/// are given none.
pub const AGENT_TOKEN_VAR: &str = "ATTEST_AGENT_TOKEN";

/// Who a call's credential proved its agent to be.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentIdentity {
    /// The agent's name.
    pub name: String,
    /// How it was proven: `token`, `jwt` or `unauthenticated`.
    pub how: &'static str,
    /// The person the agent acts for (`agents.owners`): its calls' requester.
    pub owner: Option<String>,
}

impl AgentIdentity {
    /// An identity proven `how` (`token`, `jwt` or `unauthenticated`).
    pub fn new(name: impl Into<String>, how: &'static str) -> AgentIdentity {
        AgentIdentity {
            name: name.into(),
            how,
            owner: None,
        }
    }

    /// The same identity, acting for `owner`.
    pub fn with_owner(mut self, owner: Option<String>) -> AgentIdentity {
        self.owner = owner;
        self
    }

    /// Names the action's agent, how it was proven and whom it acts for, from this
    /// identity (an owner the caller put on the action is replaced: only the credential
    /// says it).
    pub fn apply(&self, action: &mut Action) {
        action.agent = Some(self.name.clone());
        action.extra.agent_auth = Some(self.how.to_owned());
        action.extra.agent_owner.clone_from(&self.owner);
    }
}

/// What kind of refusal an [`AgentRefusal`] is (a door maps it to its own status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalKind {
    /// No credential, or one that proves nobody (unknown, revoked, expired, forged, for
    /// another audience): HTTP 401.
    Unauthenticated,
    /// The credential proves an agent other than the label names, or a held call was
    /// asked by another agent: HTTP 403.
    Forbidden,
    /// The agents' store could not be read: HTTP 500.
    Unavailable,
}

/// Why a call's agent is not accepted; nothing ran and nothing was recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
#[non_exhaustive]
pub struct AgentRefusal {
    /// What kind of refusal.
    pub kind: RefusalKind,
    /// The reason told to the caller (never the credential).
    pub reason: String,
    /// For [`RefusalKind::Unavailable`]: the store's error, for the door's own log
    /// (not told to a remote caller).
    pub detail: Option<String>,
}

impl AgentRefusal {
    /// A refusal of `kind`, telling the caller `reason`.
    pub fn new(kind: RefusalKind, reason: impl Into<String>) -> AgentRefusal {
        AgentRefusal {
            kind,
            reason: reason.into(),
            detail: None,
        }
    }

    /// The reason with the store's error, when there is one: for a caller in this
    /// process (a binding's), who may see it.
    pub fn with_detail(&self) -> String {
        match &self.detail {
            Some(detail) => format!("{}: {detail}", self.reason),
            None => self.reason.clone(),
        }
    }
}

#[cfg(feature = "http")]
pub use with_http::{handed_call, AgentAuth, AgentSetupError, CallerAgent};

#[cfg(feature = "http")]
mod with_http {
    use std::sync::Arc;

    use attest_policy::Action;

    use super::jwt::{JwtValidator, ProviderError};
    use super::{AgentIdentity, AgentRefusal, RefusalKind, AGENT_TOKEN_VAR, UNAUTHENTICATED};
    use crate::approvals::{ApprovalError, ApprovalStore, AGENT_TOKEN_PREFIX};
    use crate::config::{AgentSettings, Unauthenticated};
    use crate::setup::{Settings, Source};
    use crate::verification::{caller_check, CallerCheck, JudgementSlot};
    use crate::{handoff, Handoff};
    use crate::{Attest, AttestError, Start};

    /// Why agent authentication could not be set up: the door does not start (no call
    /// could be named).
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum AgentSetupError {
        /// The approval store, which keeps the agents' token hashes, does not open.
        #[error("agents: the approval store keeps the agent tokens")]
        Store(#[source] AttestError),
        /// The identity provider's keys could not be had (`agents.jwt`).
        #[error("agents.jwt: the identity provider's keys")]
        Provider(#[source] ProviderError),
    }

    /// The configured ways an agent proves itself, in one tenant: its tokens are looked
    /// up in that tenant's store, and the configured JWT issuer belongs to the tenant the
    /// door was started for (another tenant's [`AgentAuth::in_tenant`] trusts none).
    #[derive(Clone)]
    pub struct AgentAuth {
        store: Arc<ApprovalStore>,
        jwt: Option<Arc<JwtValidator>>,
        unauthenticated: Unauthenticated,
        owners: Arc<std::collections::BTreeMap<String, String>>,
    }

    impl std::fmt::Debug for AgentAuth {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("AgentAuth")
                .field("jwt", &self.jwt.as_ref().map(|jwt| jwt.issuer()))
                .field("unauthenticated", &self.unauthenticated)
                .finish_non_exhaustive()
        }
    }

    impl AgentAuth {
        /// The agent authentication `settings` configure over `attest`'s approval store
        /// (its agents table) and, with `jwt`, the identity provider's keys, fetched now: a
        /// door that cannot check JWTs does not start.
        pub async fn new(
            attest: &Attest,
            settings: &AgentSettings,
        ) -> Result<Self, AgentSetupError> {
            let store = attest.approvals().map_err(AgentSetupError::Store)?;
            let jwt = match &settings.jwt {
                Some(jwt) => Some(
                    JwtValidator::discover(
                        &jwt.issuer,
                        jwt.jwks_url.as_deref(),
                        &jwt.audience,
                        jwt.claim.as_deref().unwrap_or("sub"),
                    )
                    .await
                    .map_err(AgentSetupError::Provider)?,
                ),
                None => None,
            };
            Ok(AgentAuth {
                store,
                jwt: jwt.map(Arc::new),
                unauthenticated: settings.unauthenticated,
                owners: Arc::new(settings.owners.clone()),
            })
        }

        /// The same agents configuration in another tenant, `attest`'s: tokens are
        /// looked up in its own store only, and no JWT is accepted there (the configured
        /// issuer belongs to the door's own tenant), so a credential of one tenant never
        /// names an agent in another.
        pub fn in_tenant(&self, attest: &Attest) -> Result<AgentAuth, AgentRefusal> {
            let store = attest.approvals().map_err(|err| AgentRefusal {
                kind: RefusalKind::Unavailable,
                reason: "the agent store is not available".to_owned(),
                detail: Some(crate::error_chain(&err)),
            })?;
            Ok(AgentAuth {
                store,
                jwt: None,
                unauthenticated: self.unauthenticated,
                owners: Arc::clone(&self.owners),
            })
        }

        /// The person `agent` acts for, as `agents.owners` says (names match
        /// case-insensitively).
        fn owner_of(&self, agent: &str) -> Option<String> {
            self.owners
                .iter()
                .find(|(name, _)| name.trim().eq_ignore_ascii_case(agent.trim()))
                .map(|(_, owner)| owner.trim().to_owned())
                .filter(|owner| !owner.is_empty())
        }

        /// The agent `credential` proves, checked against the `label` the caller also
        /// gave. No credential: refused, or `unauthenticated` when so configured. A
        /// credential that proves nobody: [`RefusalKind::Unauthenticated`]. A label naming
        /// another agent: [`RefusalKind::Forbidden`]. A token is looked up in the store
        /// each time, so a revoked one names nobody from the next call on.
        pub async fn identify(
            &self,
            credential: Option<&str>,
            label: Option<&str>,
        ) -> Result<AgentIdentity, AgentRefusal> {
            let credential = credential.map(str::trim).filter(|c| !c.is_empty());
            let identity = match credential {
                None => match self.unauthenticated {
                    Unauthenticated::Refuse => {
                        return Err(AgentRefusal::new(
                            RefusalKind::Unauthenticated,
                            "this door names agents by credential: send the agent's token or JWT",
                        ))
                    }
                    Unauthenticated::Record => AgentIdentity::new(UNAUTHENTICATED, UNAUTHENTICATED),
                },
                Some(token) if token.starts_with(AGENT_TOKEN_PREFIX) => {
                    let store = Arc::clone(&self.store);
                    let token = token.to_owned();
                    let found =
                        tokio::task::spawn_blocking(move || store.authenticate_agent(&token))
                            .await
                            .map_err(|_| {
                                AgentRefusal::new(RefusalKind::Unavailable, "internal error")
                            })?;
                    match found {
                        Ok(agent) => AgentIdentity::new(agent.name, "token"),
                        Err(ApprovalError::BadCredential) => {
                            return Err(AgentRefusal::new(
                                RefusalKind::Unauthenticated,
                                "not a valid agent token (unknown or revoked)",
                            ))
                        }
                        Err(err) => {
                            return Err(AgentRefusal {
                                kind: RefusalKind::Unavailable,
                                reason: "the agent store is not available".to_owned(),
                                detail: Some(crate::error_chain(&err)),
                            })
                        }
                    }
                }
                Some(token) => {
                    let Some(jwt) = &self.jwt else {
                        return Err(AgentRefusal::new(
                            RefusalKind::Unauthenticated,
                            "not a valid agent token",
                        ));
                    };
                    let verified = jwt.validate(token).await.map_err(|why| {
                        AgentRefusal::new(
                            RefusalKind::Unauthenticated,
                            format!("agent JWT refused: {why}"),
                        )
                    })?;
                    AgentIdentity::new(verified.name, "jwt")
                }
            };
            let owner = self.owner_of(&identity.name);
            let identity = identity.with_owner(owner);
            match label.map(str::trim).filter(|l| !l.is_empty()) {
                Some(label) if !label.eq_ignore_ascii_case(&identity.name) => {
                    Err(AgentRefusal::new(
                        RefusalKind::Forbidden,
                        format!(
                            "the agent label {label:?} disagrees with the credential, which names {:?}",
                            identity.name
                        ),
                    ))
                }
                _ => Ok(identity),
            }
        }
    }

    /// One caller's credential at a door that serves a single agent (the Python and
    /// TypeScript packages' `Attest`): the token or JWT it was given, and the agent label
    /// it was configured with. Checked on every call ([`CallerAgent::identify`]), not
    /// once: a token revoked with `attest agents revoke` or a JWT that expires stops the
    /// next call without restarting the process, as on the gateway.
    pub struct CallerAgent {
        auth: AgentAuth,
        credential: Option<String>,
        label: Option<String>,
    }

    impl std::fmt::Debug for CallerAgent {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("CallerAgent")
                .field("auth", &self.auth)
                .field("credential", &self.credential.as_ref().map(|_| "…"))
                .field("label", &self.label)
                .finish()
        }
    }

    impl CallerAgent {
        /// With `agents:` configured in `settings`' file, the agent authentication of a
        /// door serving one caller whose credential is `credential` (else
        /// `ATTEST_AGENT_TOKEN`), labelled by `settings`' agent when one was set (by the
        /// door, the environment or the file). `None` when agents are not configured:
        /// calls are then named by the label, as before.
        pub async fn open(
            settings: &Settings,
            attest: &Attest,
            credential: Option<String>,
        ) -> Result<Option<CallerAgent>, AgentSetupError> {
            let Some(agents) = &settings.file.agents else {
                return Ok(None);
            };
            let auth = AgentAuth::new(attest, agents).await?;
            let credential = credential.or_else(|| settings.env_var(AGENT_TOKEN_VAR));
            let label = settings
                .agent
                .as_ref()
                .filter(|agent| agent.source != Source::Default)
                .map(|agent| agent.value.clone());
            Ok(Some(CallerAgent::new(auth, credential, label)))
        }

        /// A caller proving itself to `auth` with `credential`, labelled `label`: for a
        /// door that reads its one agent's credential itself (`mcp-server`, the stdio
        /// proxy) and checks it on every call.
        pub fn new(
            auth: AgentAuth,
            credential: Option<String>,
            label: Option<String>,
        ) -> CallerAgent {
            CallerAgent {
                auth,
                credential: credential
                    .map(|text| text.trim().to_owned())
                    .filter(|text| !text.is_empty()),
                label,
            }
        }

        /// The agent this caller's credential proves now, checked against its label.
        pub async fn identify(&self) -> Result<AgentIdentity, AgentRefusal> {
            self.auth
                .identify(self.credential.as_deref(), self.label.as_deref())
                .await
        }

        /// Names `action` by the proven agent, or refuses it.
        pub async fn name(&self, action: &mut Action) -> Result<(), AgentRefusal> {
            self.identify().await?.apply(action);
            Ok(())
        }

        /// `start`, named by the proven agent: a new or retried action is recorded under
        /// its name and `agent_auth`; a held call resumed by its token alone must have been
        /// asked by this agent (as the gateway's resume checks). Refused:
        /// [`AttestError::Agent`]; nothing runs and nothing is recorded.
        pub async fn name_start(
            &self,
            attest: &Attest,
            start: Start,
        ) -> Result<Start, AttestError> {
            let identity = self.identify().await?;
            Ok(match start {
                Start::Action(mut action) => {
                    identity.apply(&mut action);
                    Start::Action(action)
                }
                Start::Retry { token, mut action } => {
                    identity.apply(&mut action);
                    Start::Retry { token, action }
                }
                Start::Resume(token) => {
                    let store = attest.approvals()?;
                    let lookup = token.clone();
                    let request = tokio::task::spawn_blocking(move || store.get_by_token(&lookup))
                        .await
                        .map_err(|_| AttestError::Internal("the approval lookup stopped"))??;
                    let asked = request.action.agent.as_deref().unwrap_or_default();
                    if !asked.eq_ignore_ascii_case(&identity.name) {
                        return Err(AgentRefusal::new(
                            RefusalKind::Forbidden,
                            format!(
                                "this request was held for another agent ({asked:?}), not {:?}",
                                identity.name
                            ),
                        )
                        .into());
                    }
                    Start::Resume(token)
                }
            })
        }
    }

    /// The governed call a binding (the Python and TypeScript packages) hands off to run
    /// its tool itself: `start`, named by `agent` when agents are configured (or refused),
    /// with the caller's idempotency `key` ([`crate::Call::idempotency_key`]) and its own
    /// `check` of the result, whose judgement the caller leaves in the returned slot.
    pub fn handed_call(
        attest: &Attest,
        agent: Option<Arc<CallerAgent>>,
        start: Start,
        key: Option<String>,
        check: Option<&CallerCheck>,
    ) -> (Handoff, JudgementSlot) {
        let attest = attest.clone();
        let slot = JudgementSlot::default();
        let custom = check.map(|kind| caller_check(kind, &slot));
        let call = handoff(move |tool| async move {
            let start = match &agent {
                Some(agent) => agent.name_start(&attest, start).await?,
                None => start,
            };
            let mut call = attest.call(start);
            if let Some(key) = key {
                call = call.idempotency_key(key);
            }
            match &custom {
                Some(custom) => call.check(custom).run(tool).await,
                None => call.run(tool).await,
            }
        });
        (call, slot)
    }
}

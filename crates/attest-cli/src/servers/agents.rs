//! Authenticated agents: a door with `agents:` configured names each call's agent by
//! the credential it carries, never by a label.
//!
//! The credential is a per-agent token (`attest agents add NAME`, kept as its SHA-256 in
//! the approval store; revocable) or, with `agents.jwt`, a JWT from the organisation's
//! identity provider, checked by the one [`JwtValidator`] (signature against the
//! provider's JWKS, issuer, audience, expiry; the agent is the configured claim).
//! The gateway takes it in `X-Attest-Token`, `mcp-proxy --listen` in
//! `Authorization: Bearer`. A label the caller also sends (`X-Attest-Agent`) must name
//! the same agent, else the call is refused; a call without a credential is refused or,
//! with `unauthenticated: record`, decided and recorded as agent `unauthenticated`.
//! The row's `agent_auth` says which (`token`, `jwt`, `unauthenticated`). Policy's
//! `match.agent` therefore only ever sees a proven name (or `unauthenticated`).

use std::sync::Arc;

use anyhow::Context;
use attest_core::approvals::{ApprovalError, ApprovalStore, AGENT_TOKEN_PREFIX};
use attest_core::config::{AgentSettings, Unauthenticated};
use attest_core::Attest;
use attest_policy::Action;
use http::StatusCode;

use super::jwt::JwtValidator;
use super::mcp_resource::Authenticated;

/// The agent recorded for a call that carried no credential, when that is allowed.
pub(crate) const UNAUTHENTICATED: &str = "unauthenticated";

/// Who a call's credential proved its agent to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentIdentity {
    /// The agent's name.
    pub(crate) name: String,
    /// How it was proven: `token`, `jwt` or `unauthenticated`.
    pub(crate) how: &'static str,
}

impl AgentIdentity {
    /// Names the action's agent, and how it was proven, from this identity.
    pub(crate) fn apply(&self, action: &mut Action) {
        action.agent = Some(self.name.clone());
        action.extra.agent_auth = Some(self.how.to_owned());
    }
}

/// Why a call's agent is not accepted: the status and the reason told to the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentRefusal {
    pub(crate) status: StatusCode,
    pub(crate) reason: String,
}

impl AgentRefusal {
    fn new(status: StatusCode, reason: impl Into<String>) -> AgentRefusal {
        AgentRefusal {
            status,
            reason: reason.into(),
        }
    }
}

/// The configured ways an agent proves itself.
pub(crate) struct AgentAuth {
    store: Arc<ApprovalStore>,
    jwt: Option<JwtValidator>,
    unauthenticated: Unauthenticated,
}

impl std::fmt::Debug for AgentAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentAuth")
            .field("jwt", &self.jwt.as_ref().map(JwtValidator::issuer))
            .field("unauthenticated", &self.unauthenticated)
            .finish_non_exhaustive()
    }
}

impl AgentAuth {
    /// The agent authentication `settings` configure over `attest`'s approval store (its
    /// agents table) and, with `jwt`, the identity provider's keys, fetched now: a door
    /// that cannot check JWTs does not start.
    pub(crate) async fn new(attest: &Attest, settings: &AgentSettings) -> anyhow::Result<Self> {
        let store = attest
            .approvals()
            .context("agents: the approval store keeps the agent tokens")?;
        let jwt = match &settings.jwt {
            Some(jwt) => Some(
                JwtValidator::discover(
                    &jwt.issuer,
                    jwt.jwks_url.as_deref(),
                    &jwt.audience,
                    jwt.claim.as_deref().unwrap_or("sub"),
                )
                .await
                .context("agents.jwt: the identity provider's keys")?,
            ),
            None => None,
        };
        Ok(AgentAuth {
            store,
            jwt,
            unauthenticated: settings.unauthenticated,
        })
    }

    /// The agent `credential` proves, checked against the `label` the caller also gave.
    /// No credential: refused (401), or `unauthenticated` when so configured. A
    /// credential that proves nobody: 401. A label naming another agent: 403.
    pub(crate) async fn identify(
        &self,
        credential: Option<&str>,
        label: Option<&str>,
    ) -> Result<AgentIdentity, AgentRefusal> {
        let credential = credential.map(str::trim).filter(|c| !c.is_empty());
        let identity = match credential {
            None => match self.unauthenticated {
                Unauthenticated::Refuse => {
                    return Err(AgentRefusal::new(
                        StatusCode::UNAUTHORIZED,
                        "this door names agents by credential: send the agent's token or JWT",
                    ))
                }
                Unauthenticated::Record => AgentIdentity {
                    name: UNAUTHENTICATED.to_owned(),
                    how: UNAUTHENTICATED,
                },
            },
            Some(token) if token.starts_with(AGENT_TOKEN_PREFIX) => {
                let store = Arc::clone(&self.store);
                let token = token.to_owned();
                let found = tokio::task::spawn_blocking(move || store.authenticate_agent(&token))
                    .await
                    .map_err(|_| {
                        AgentRefusal::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
                    })?;
                match found {
                    Ok(agent) => AgentIdentity {
                        name: agent.name,
                        how: "token",
                    },
                    Err(ApprovalError::BadCredential) => {
                        return Err(AgentRefusal::new(
                            StatusCode::UNAUTHORIZED,
                            "not a valid agent token (unknown or revoked)",
                        ))
                    }
                    Err(err) => {
                        eprintln!("attest: checking an agent token: {}", super::chain(&err));
                        return Err(AgentRefusal::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "the agent store is not available",
                        ));
                    }
                }
            }
            Some(token) => {
                let Some(jwt) = &self.jwt else {
                    return Err(AgentRefusal::new(
                        StatusCode::UNAUTHORIZED,
                        "not a valid agent token",
                    ));
                };
                let verified = jwt.validate(token).await.map_err(|why| {
                    AgentRefusal::new(
                        StatusCode::UNAUTHORIZED,
                        format!("agent JWT refused: {why}"),
                    )
                })?;
                AgentIdentity {
                    name: verified.name,
                    how: "jwt",
                }
            }
        };
        match label.map(str::trim).filter(|l| !l.is_empty()) {
            Some(label) if !label.eq_ignore_ascii_case(&identity.name) => Err(AgentRefusal::new(
                StatusCode::FORBIDDEN,
                format!(
                    "the agent label {label:?} disagrees with the credential, which names {:?}",
                    identity.name
                ),
            )),
            _ => Ok(identity),
        }
    }
}

/// The middleware in front of `mcp-proxy --listen`'s `/mcp` when agents are configured:
/// the agent the `Authorization: Bearer` credential proves goes on in the request's
/// extensions (as the [`Authenticated`] caller the proxy records); a refusal is answered
/// here, and nothing reaches the upstream.
pub(crate) async fn listen_guard(
    axum::extract::State(agents): axum::extract::State<Arc<AgentAuth>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let bearer = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned());
    match agents.identify(bearer.as_deref(), None).await {
        Ok(identity) => {
            request.extensions_mut().insert(Authenticated {
                issuer: format!("attest-agents:{}", identity.how),
                subject: identity.name,
                how: identity.how,
            });
            next.run(request).await
        }
        Err(refusal) => {
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {"code": -32001, "message": refusal.reason},
            });
            let mut response = (refusal.status, axum::Json(body)).into_response();
            if refusal.status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static(r#"Bearer error="invalid_token""#),
                );
            }
            response
        }
    }
}

//! `--listen` as an OAuth protected resource (the MCP authorization spec's server side).
//!
//! With `--oauth-issuer`, the proxy publishes its protected resource metadata (RFC 9728)
//! at `/.well-known/oauth-protected-resource/mcp` (and at the root well-known path),
//! naming the configured authorization server, and every request to `/mcp` must carry an
//! access token that server issued for this resource: a JWT whose signature checks
//! against the server's published keys (JWKS, found through its RFC 8414 metadata unless
//! `--oauth-jwks` names them), whose `iss` is the issuer, whose `aud` is this resource,
//! and which has not expired. Anything else is answered `401` with a `WWW-Authenticate`
//! challenge pointing at the metadata, so a client can discover where to get a token.
//!
//! The token's subject (`sub`) is the call's authenticated agent. The token itself is
//! never passed to the upstream (it was issued for this resource, not the upstream's),
//! recorded, or logged; a `--url` upstream gets the proxy's own `--bearer-env` token.

use std::sync::Arc;

use anyhow::Context;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use serde_json::{json, Value};

use attest_core::agents::jwt::JwtValidator;

/// The metadata path (RFC 9728 §3.1: the well-known prefix before the resource's path).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Who a validated access token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authenticated {
    /// The token's issuer.
    pub(crate) issuer: String,
    /// The token's subject: the call's agent.
    pub(crate) subject: String,
    /// How the agent was proven (the row's `agent_auth`): `jwt`, `token`, or
    /// `unauthenticated` (an `agents:` door that records calls without a credential).
    pub(crate) how: &'static str,
    /// The person the agent acts for (`agents.owners`): its calls' requester.
    pub(crate) owner: Option<String>,
}

impl From<attest_core::agents::AgentIdentity> for Authenticated {
    fn from(identity: attest_core::agents::AgentIdentity) -> Authenticated {
        Authenticated {
            issuer: format!("attest-agents:{}", identity.how),
            subject: identity.name,
            how: identity.how,
            owner: identity.owner,
        }
    }
}

/// The protected resource: its identity and the validator of its authorization server's
/// tokens.
pub(crate) struct Resource {
    resource: String,
    tokens: JwtValidator,
}

impl Resource {
    /// Reaches the authorization server `issuer` (its keys at `jwks`, else from its
    /// metadata) for the resource `resource`. Fails, and the proxy does not start, when
    /// the keys cannot be had: no token could be checked.
    pub(crate) async fn discover(
        issuer: &str,
        jwks: Option<&str>,
        resource: &str,
    ) -> anyhow::Result<Resource> {
        let tokens = JwtValidator::discover(issuer, jwks, resource, "sub")
            .await
            .with_context(|| format!("--oauth-issuer {issuer}"))?;
        Ok(Resource {
            resource: resource.to_owned(),
            tokens,
        })
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub(crate) fn metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.tokens.issuer()],
            "bearer_methods_supported": ["header"],
        })
    }

    /// Where the metadata is: the resource's origin, the well-known path, its path.
    fn metadata_url(&self) -> String {
        match reqwest::Url::parse(&self.resource) {
            Ok(url) => {
                let path = url.path().trim_end_matches('/');
                format!(
                    "{}{METADATA_PATH}{path}",
                    url.origin().ascii_serialization()
                )
            }
            Err(_) => METADATA_PATH.to_owned(),
        }
    }

    /// Checks `token`: signature, issuer, audience, expiry, subject.
    pub(crate) async fn validate(&self, token: &str) -> Result<Authenticated, &'static str> {
        let verified = self.tokens.validate(token).await?;
        Ok(Authenticated {
            issuer: verified.issuer,
            subject: verified.name,
            how: "jwt",
            owner: None,
        })
    }
}

/// The metadata route's handler.
pub(crate) async fn metadata(State(resource): State<Arc<Resource>>) -> Response {
    axum::Json(resource.metadata()).into_response()
}

/// The middleware in front of `/mcp`: a valid access token, or `401` with the challenge.
/// The caller's identity goes on in the request's extensions ([`Authenticated`]).
pub(crate) async fn guard(
    State(resource): State<Arc<Resource>>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned());
    let Some(token) = token.filter(|token| !token.is_empty()) else {
        return challenge(&resource, None);
    };
    match resource.validate(&token).await {
        Ok(who) => {
            request.extensions_mut().insert(who);
            next.run(request).await
        }
        Err(reason) => challenge(&resource, Some(reason)),
    }
}

/// `401` with `WWW-Authenticate: Bearer … resource_metadata="…"` (RFC 9728 §5.1,
/// RFC 6750 §3).
fn challenge(resource: &Resource, error: Option<&'static str>) -> Response {
    let metadata = resource.metadata_url();
    let value = match error {
        Some(reason) => format!(
            r#"Bearer error="invalid_token", error_description="{reason}", resource_metadata="{metadata}""#
        ),
        None => format!(r#"Bearer resource_metadata="{metadata}""#),
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": error.unwrap_or("an access token is required")},
    });
    let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

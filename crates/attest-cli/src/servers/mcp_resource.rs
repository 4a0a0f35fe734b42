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

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};

/// The metadata path (RFC 9728 §3.1: the well-known prefix before the resource's path).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Signature algorithms accepted: asymmetric ones only (a JWKS holds public keys; an
/// HMAC "key" from one would be a secret anyone can read).
const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Clock skew allowed on `exp`.
const LEEWAY_SECS: u64 = 30;

/// How often an unknown key id may send the proxy back to the JWKS.
const REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// How long a fetch of the authorization server's metadata or keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest metadata or JWKS document read.
const MAX_DOCUMENT: usize = 1024 * 1024;

/// Who a validated access token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authenticated {
    /// The token's issuer.
    pub(crate) issuer: String,
    /// The token's subject: the call's agent.
    pub(crate) subject: String,
}

/// The protected resource: its identity, its authorization server and that server's keys.
pub(crate) struct Resource {
    issuer: String,
    resource: String,
    jwks_url: String,
    keys: RwLock<JwkSet>,
    refreshed: Mutex<Instant>,
    http: reqwest::Client,
}

#[derive(serde::Deserialize)]
struct Claims {
    sub: String,
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
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .context("an HTTP client for the authorization server")?;
        let jwks_url = match jwks {
            Some(url) => url.to_owned(),
            None => jwks_uri(&http, issuer).await?,
        };
        let keys = fetch_keys(&http, &jwks_url).await?;
        Ok(Resource {
            issuer: issuer.to_owned(),
            resource: resource.to_owned(),
            jwks_url,
            keys: RwLock::new(keys),
            refreshed: Mutex::new(Instant::now()),
            http,
        })
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub(crate) fn metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
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
        let header = jsonwebtoken::decode_header(token).map_err(|_| "not a JWT")?;
        if !ACCEPTED.contains(&header.alg) {
            return Err("signature algorithm not accepted");
        }
        let key = match self.key(header.kid.as_deref()) {
            Some(key) => key,
            None if self.refresh().await => self.key(header.kid.as_deref()).ok_or("unknown key")?,
            None => return Err("unknown key"),
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|err| {
            use jsonwebtoken::errors::ErrorKind;
            match err.kind() {
                ErrorKind::ExpiredSignature => "the token has expired",
                ErrorKind::InvalidIssuer => "the token is from another issuer",
                ErrorKind::InvalidAudience => "the token is for another resource",
                ErrorKind::InvalidSignature => "the token's signature does not check",
                _ => "the token is not valid",
            }
        })?;
        if data.claims.sub.is_empty() {
            return Err("the token names no subject");
        }
        Ok(Authenticated {
            issuer: self.issuer.clone(),
            subject: data.claims.sub,
        })
    }

    /// The key `kid` names (or the only key, for a token that names none).
    fn key(&self, kid: Option<&str>) -> Option<DecodingKey> {
        let keys = self
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let jwk = match kid {
            Some(kid) => keys.find(kid)?,
            None => match keys.keys.as_slice() {
                [only] => only,
                _ => return None,
            },
        };
        DecodingKey::from_jwk(jwk).ok()
    }

    /// Fetches the keys again (rotated keys), at most once per [`REFRESH_INTERVAL`].
    async fn refresh(&self) -> bool {
        {
            let mut last = self
                .refreshed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.elapsed() < REFRESH_INTERVAL {
                return false;
            }
            *last = Instant::now();
        }
        match fetch_keys(&self.http, &self.jwks_url).await {
            Ok(keys) => {
                *self
                    .keys
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = keys;
                true
            }
            Err(_) => false,
        }
    }
}

/// The `jwks_uri` of `issuer`'s RFC 8414 metadata (OpenID Connect discovery as the
/// fallback), checking that the metadata names the same issuer.
async fn jwks_uri(http: &reqwest::Client, issuer: &str) -> anyhow::Result<String> {
    let base = reqwest::Url::parse(issuer).with_context(|| format!("--oauth-issuer {issuer:?}"))?;
    let path = base.path().trim_end_matches('/');
    let origin = base.origin().ascii_serialization();
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ];
    for url in candidates {
        let Ok(metadata) = fetch_json(http, &url).await else {
            continue;
        };
        anyhow::ensure!(
            metadata.get("issuer").and_then(Value::as_str) == Some(issuer),
            "the authorization server's metadata at {url} names another issuer"
        );
        if let Some(jwks) = metadata.get("jwks_uri").and_then(Value::as_str) {
            return Ok(jwks.to_owned());
        }
    }
    anyhow::bail!("--oauth-issuer {issuer}: no authorization server metadata with a jwks_uri")
}

async fn fetch_keys(http: &reqwest::Client, url: &str) -> anyhow::Result<JwkSet> {
    let value = fetch_json(http, url).await?;
    serde_json::from_value(value).with_context(|| format!("the JWKS at {url}"))
}

async fn fetch_json(http: &reqwest::Client, url: &str) -> anyhow::Result<Value> {
    let response = http
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?
        .error_for_status()
        .with_context(|| format!("GET {url}"))?;
    let bytes = response
        .bytes()
        .await
        .with_context(|| format!("GET {url}"))?;
    anyhow::ensure!(
        bytes.len() <= MAX_DOCUMENT,
        "GET {url}: the document is too long"
    );
    serde_json::from_slice(&bytes).with_context(|| format!("GET {url}: not JSON"))
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

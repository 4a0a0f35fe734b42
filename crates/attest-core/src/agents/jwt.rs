//! The one JWT validator: tokens an identity provider signed, checked against its
//! published keys (JWKS).
//!
//! Three callers: `mcp-proxy --listen --oauth-issuer` (access tokens for the proxy as an
//! OAuth protected resource), authenticated agents (`agents: {jwt: …}`, on the gateway
//! and `--listen`) and approvers signing in to the inbox (the OpenID Connect ID token).
//! Each gets a validator for one issuer and one audience: a token is accepted when its
//! signature checks against one of the issuer's keys with an asymmetric algorithm, its
//! `iss` is the issuer, its `aud` names the audience, it has not expired and is not
//! before its `nbf` (both with [`LEEWAY_SECS`] of clock skew), its protected header marks
//! nothing critical (`crit`: no extension is understood here, so any is refused, RFC 7515
//! §4.1.11), and the configured claim (`sub`, `email`, …) is a non-empty string: who the
//! caller is. An `email` claim names the caller only when the provider says it verified
//! the address (`email_verified: true`), unless the operator guarantees the claim
//! ([`JwtValidator::claim_guaranteed`]).
//!
//! In attest-core (feature `http`) so that the binary's doors and the Python and
//! TypeScript packages check agents' JWTs with the same code.

use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

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

/// Clock skew allowed on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 30;

/// The longest token read: far above any provider's, and a bound on the header decoded
/// here before the signature is checked.
const MAX_TOKEN: usize = 16 * 1024;

/// How often an unknown key id may send the validator back to the JWKS.
const REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// How long a fetch of the issuer's metadata or keys may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest metadata or JWKS document read.
const MAX_DOCUMENT: usize = 1024 * 1024;

/// What a valid token says.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Verified {
    /// The token's issuer.
    pub issuer: String,
    /// The configured claim's value: who the caller is.
    pub name: String,
    /// Every claim, for a caller that checks more (the ID token's `nonce`).
    pub claims: Map<String, Value>,
}

/// Why an identity provider's metadata or keys could not be had: what was fetched, and
/// why it failed. No token can be checked without them.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct ProviderError {
    what: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ProviderError {
    fn new(what: impl Into<String>) -> ProviderError {
        ProviderError {
            what: what.into(),
            source: None,
        }
    }

    fn because(
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> ProviderError {
        ProviderError {
            what: what.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// A validator for one issuer's tokens for one audience.
pub struct JwtValidator {
    issuer: String,
    audience: String,
    claim: String,
    claim_guaranteed: bool,
    jwks_url: String,
    keys: RwLock<JwkSet>,
    refreshed: Mutex<Instant>,
    http: reqwest::Client,
}

impl JwtValidator {
    /// Reaches `issuer` (its keys at `jwks`, else from its metadata) for tokens whose
    /// audience is `audience` and whose `claim` names the caller. Fails when the keys
    /// cannot be had: no token could be checked.
    pub async fn discover(
        issuer: &str,
        jwks: Option<&str>,
        audience: &str,
        claim: &str,
    ) -> Result<JwtValidator, ProviderError> {
        let http = http_client()?;
        let jwks_url = match jwks {
            Some(url) => url.to_owned(),
            None => {
                let metadata = issuer_metadata(&http, issuer).await?;
                metadata
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        ProviderError::new(format!("the metadata of {issuer} names no jwks_uri"))
                    })?
            }
        };
        let keys = fetch_keys(&http, &jwks_url).await?;
        Ok(JwtValidator {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            claim: claim.to_owned(),
            claim_guaranteed: false,
            jwks_url,
            keys: RwLock::new(keys),
            refreshed: Mutex::new(Instant::now()),
            http,
        })
    }

    /// The issuer this validator trusts.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Takes the configured claim as the provider's guarantee of who the caller is, with
    /// no `email_verified` asked of an `email` claim: for a provider the operator knows
    /// issues only addresses it owns (a directory's own domain).
    pub fn claim_guaranteed(mut self, guaranteed: bool) -> JwtValidator {
        self.claim_guaranteed = guaranteed;
        self
    }

    /// Checks `token`: signature, issuer, audience, expiry, not-before, critical header
    /// parameters, and the caller's claim.
    pub async fn validate(&self, token: &str) -> Result<Verified, &'static str> {
        if token.len() > MAX_TOKEN {
            return Err("the token is too long");
        }
        nothing_critical(token)?;
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
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        // jsonwebtoken leaves `nbf` unchecked unless asked; a token for later is not one
        // for now.
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(
            |err| {
                use jsonwebtoken::errors::ErrorKind;
                match err.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet (its nbf)",
                    ErrorKind::InvalidIssuer => "the token is from another issuer",
                    ErrorKind::InvalidAudience => {
                        "the token is for another resource (its audience is not this one)"
                    }
                    ErrorKind::InvalidSignature => "the token's signature does not check",
                    _ => "the token is not valid",
                }
            },
        )?;
        // jsonwebtoken skips an `nbf` it cannot read as a time (a string, null, a negative
        // number): such a token states a start nobody can check, so it is refused.
        if data
            .claims
            .get("nbf")
            .is_some_and(|nbf| nbf.as_f64().is_none_or(|nbf| nbf < 0.0))
        {
            return Err("the token's nbf is not a time");
        }
        let name = self.caller(&data.claims)?.to_owned();
        Ok(Verified {
            issuer: self.issuer.clone(),
            name,
            claims: data.claims,
        })
    }

    /// The configured claim's value, when it names the caller: a non-empty string, and for
    /// `email` an address the provider verified (OpenID Connect Core §5.1: an unverified
    /// address is whatever the account's holder typed), unless the claim is guaranteed.
    fn caller<'a>(&self, claims: &'a Map<String, Value>) -> Result<&'a str, &'static str> {
        let name = claims
            .get(&self.claim)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .ok_or("the token does not name the caller in its configured claim")?;
        if self.claim == "email" && !self.claim_guaranteed {
            match claims.get("email_verified") {
                Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => {
                    return Err("the provider has not verified this e-mail address \
                                (email_verified is false)")
                }
                Some(_) => return Err("the token's email_verified is not true or false"),
                None => {
                    return Err("the provider does not say it verified this e-mail address \
                                (no email_verified)")
                }
            }
        }
        Ok(name)
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

/// Refuses a token whose protected header has `crit` (RFC 7515 §4.1.11): the listed
/// extensions must be understood or the token rejected, and none is understood here; an
/// empty list is itself forbidden. jsonwebtoken's `Header` drops unknown members, `crit`
/// among them, so the header's JSON is read here (the caller bounds the token's length).
fn nothing_critical(token: &str) -> Result<(), &'static str> {
    let (encoded, _) = token.split_once('.').ok_or("not a JWT")?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(|_| "not a JWT")?;
    let header: Map<String, Value> = serde_json::from_slice(&json).map_err(|_| "not a JWT")?;
    match header.get("crit") {
        None => Ok(()),
        Some(Value::Array(names)) if names.is_empty() => {
            Err("the token's header has an empty crit list (RFC 7515 forbids it)")
        }
        Some(_) => {
            Err("the token's header marks as critical (crit) an extension not understood here")
        }
    }
}

/// An HTTP client for an issuer's documents and endpoints: bounded time, no redirects.
pub fn http_client() -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| ProviderError::because("an HTTP client for the identity provider", err))
}

/// `issuer`'s metadata: RFC 8414 authorization server metadata, else OpenID Connect
/// discovery; it must name the same issuer.
pub async fn issuer_metadata(http: &reqwest::Client, issuer: &str) -> Result<Value, ProviderError> {
    let base = reqwest::Url::parse(issuer)
        .map_err(|err| ProviderError::because(format!("issuer {issuer:?}"), err))?;
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
        if metadata.get("issuer").and_then(Value::as_str) != Some(issuer) {
            return Err(ProviderError::new(format!(
                "the identity provider's metadata at {url} names another issuer"
            )));
        }
        return Ok(metadata);
    }
    Err(ProviderError::new(format!(
        "issuer {issuer}: no authorization server or OpenID Connect metadata"
    )))
}

async fn fetch_keys(http: &reqwest::Client, url: &str) -> Result<JwkSet, ProviderError> {
    let value = fetch_json(http, url).await?;
    serde_json::from_value(value)
        .map_err(|err| ProviderError::because(format!("the JWKS at {url}"), err))
}

async fn fetch_json(http: &reqwest::Client, url: &str) -> Result<Value, ProviderError> {
    let get = |err: reqwest::Error| ProviderError::because(format!("GET {url}"), err);
    let response = http
        .get(url)
        .send()
        .await
        .map_err(get)?
        .error_for_status()
        .map_err(get)?;
    let bytes = response.bytes().await.map_err(get)?;
    if bytes.len() > MAX_DOCUMENT {
        return Err(ProviderError::new(format!(
            "GET {url}: the document is too long"
        )));
    }
    serde_json::from_slice(&bytes)
        .map_err(|err| ProviderError::because(format!("GET {url}: not JSON"), err))
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::nothing_critical;

    /// A token whose protected header is `header` (the rest is never read here).
    fn token(header: &str) -> String {
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header);
        format!("{encoded}.e30.c2ln")
    }

    #[test]
    fn any_crit_is_refused_and_a_header_that_does_not_parse_is_not_a_jwt() {
        assert_eq!(
            nothing_critical(&token(r#"{"alg":"RS256","kid":"k1"}"#)),
            Ok(())
        );
        for critical in [
            r#"{"alg":"RS256","crit":["exp"],"exp":1}"#,
            r#"{"alg":"RS256","crit":"b64","b64":false}"#,
            r#"{"alg":"RS256","crit":{"b64":true}}"#,
            r#"{"alg":"RS256","crit":null}"#,
            // RFC 7515 §4: the last of duplicate members counts; either one is refused.
            r#"{"alg":"RS256","crit":["x"],"crit":[]}"#,
        ] {
            let why = nothing_critical(&token(critical)).unwrap_err();
            assert!(why.contains("crit"), "{critical}: {why}");
        }
        assert_eq!(
            nothing_critical(&token(r#"{"alg":"RS256","crit":[]}"#)),
            Err("the token's header has an empty crit list (RFC 7515 forbids it)")
        );
        for garbled in ["", "no dots", "!!!.e30.c2ln", &token("[1]"), &token("{")] {
            assert_eq!(nothing_critical(garbled), Err("not a JWT"), "{garbled}");
        }
    }
}

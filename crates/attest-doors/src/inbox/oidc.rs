//! Approvers sign in to the inbox and dashboard with the organisation's OpenID Connect
//! provider (`inbox.oidc`): the authorization code flow with PKCE.
//!
//! - `GET /login` makes a fresh `state`, `nonce` and PKCE verifier (kept in this process,
//!   for ten minutes, once), binds the flow to this browser with an `HttpOnly` cookie
//!   holding the state, and redirects to the provider's authorization endpoint.
//! - `GET /login/callback?code&state` takes the state only from the browser that began the
//!   flow (cookie and query must agree), exchanges the code at the token endpoint (with
//!   the verifier, and the client secret when there is one), and checks the ID token with
//!   the one [`JwtValidator`]: the provider's signature, its issuer, this client as the
//!   audience, not expired nor before its `nbf`, no critical header extension, and the
//!   nonce of this flow. The configured claim must be a registered, active approver's
//!   name, and one the provider vouches for: `email` only with `email_verified: true`,
//!   `sub` (unique and never reassigned, OpenID Connect Core §2), or a claim the operator
//!   declares guaranteed (`claim_guaranteed`); any other claim stops the inbox at start,
//!   since a display name or username is whatever the account's holder chose. Then a session
//!   cookie is set: `HttpOnly`, `SameSite=Strict`, `Secure` when the inbox's public URL
//!   is `https`; only its SHA-256 is kept, with the approver and an expiry.
//! - `POST /logout` ends the session.
//!
//! A session is a credential the browser attaches by itself, so the inbox's origin check
//! applies to every state-changing request made with one (no cross-site request forgery),
//! besides `SameSite=Strict`. Sessions live in the serving process: a restarted inbox
//! signs everyone out, and several inboxes behind one name need sticky routing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, StandardRevocableToken,
    StandardTokenResponse, TokenResponse as _, TokenUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use attest_core::agents::jwt::{http_client, issuer_metadata, JwtValidator};

/// The cookie holding the session.
pub const SESSION_COOKIE: &str = "attest_session";
/// The cookie binding a sign-in in progress to the browser that began it.
const LOGIN_COOKIE: &str = "attest_login";
/// How long a sign-in may take, from `/login` to the callback.
const LOGIN_TTL: Duration = Duration::from_secs(600);
/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The most sign-ins in progress at once (older ones are dropped first).
const MAX_PENDING: usize = 10_000;
/// The largest token endpoint answer read.
const MAX_TOKEN_RESPONSE: usize = 256 * 1024;

/// The token endpoint's answer: OAuth's, and the ID token.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IdTokenField {
    #[serde(default)]
    id_token: Option<String>,
}
impl oauth2::ExtraTokenFields for IdTokenField {}

type OidcClient = oauth2::Client<
    BasicErrorResponse,
    StandardTokenResponse<IdTokenField, BasicTokenType>,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// A sign-in in progress.
struct Pending {
    verifier: String,
    nonce: String,
    started: Instant,
    /// The inbox page to go on to once signed in (a request's own page).
    next: Option<String>,
}

/// A signed-in approver.
struct Session {
    approver: String,
    expires: Instant,
}

/// The inbox as an OpenID Connect client.
pub struct Oidc {
    client: OidcClient,
    id_tokens: JwtValidator,
    http: reqwest::Client,
    secure: bool,
    pending: Mutex<HashMap<String, Pending>>,
    sessions: Mutex<HashMap<[u8; 32], Session>>,
}

/// What `inbox.oidc` says, with the secret read.
pub struct OidcOptions {
    /// The provider's issuer URL (discovery reads its `/.well-known/openid-configuration`).
    pub issuer: String,
    /// The inbox's client id at the provider.
    pub client_id: String,
    /// The client secret, if the provider gave one (never printed).
    pub client_secret: Option<String>,
    /// The ID token claim that names the approver.
    pub claim: String,
    /// The operator's word that the provider guarantees `claim` names one person.
    pub claim_guaranteed: bool,
    /// The inbox's public base URL: the redirect URI is its `/login/callback`.
    pub public_url: String,
}

impl Oidc {
    /// Reads the provider's discovery document and keys; fails (and the inbox does not
    /// start) when either cannot be had.
    pub async fn discover(options: OidcOptions) -> anyhow::Result<Oidc> {
        let claim = &options.claim;
        if !options.claim_guaranteed && claim != "email" && claim != "sub" {
            anyhow::bail!(
                "inbox.oidc.claim {claim}: OpenID Connect promises only `sub` (and `email` with \
                 email_verified) name one person; set inbox.oidc.claim_guaranteed: true if the \
                 provider guarantees {claim}"
            );
        }
        let http = http_client()?;
        let issuer = &options.issuer;
        let metadata = issuer_metadata(&http, issuer)
            .await
            .with_context(|| format!("inbox.oidc.issuer {issuer}"))?;
        let endpoint = |name: &str| {
            metadata
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .with_context(|| format!("inbox.oidc: {issuer}'s metadata names no {name}"))
        };
        let jwks = endpoint("jwks_uri")?;
        let id_tokens = JwtValidator::discover(issuer, Some(&jwks), &options.client_id, claim)
            .await
            .context("inbox.oidc: the provider's keys")?
            .claim_guaranteed(options.claim_guaranteed);
        let redirect = format!(
            "{}/login/callback",
            options.public_url.trim_end_matches('/')
        );
        let mut client = oauth2::Client::new(ClientId::new(options.client_id.clone()))
            .set_auth_uri(AuthUrl::new(endpoint("authorization_endpoint")?)?)
            .set_token_uri(TokenUrl::new(endpoint("token_endpoint")?)?)
            .set_redirect_uri(RedirectUrl::new(redirect)?);
        if let Some(secret) = &options.client_secret {
            client = client.set_client_secret(ClientSecret::new(secret.clone()));
        }
        Ok(Oidc {
            client,
            id_tokens,
            http,
            secure: options.public_url.starts_with("https://"),
            pending: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// Begins a sign-in: the provider's authorization URL to redirect to, and the
    /// `Set-Cookie` value that binds the flow to this browser. `next`: the inbox page
    /// [`Oidc::finish`] goes on to, kept here (never in the browser's hands).
    pub fn begin(&self, next: Option<String>) -> (String, String) {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let nonce = CsrfToken::new_random();
        let (url, state) = self
            .client
            .authorize_url(CsrfToken::new_random)
            .add_scope(Scope::new("openid".to_owned()))
            .add_scope(Scope::new("email".to_owned()))
            .add_scope(Scope::new("profile".to_owned()))
            .add_extra_param("nonce", nonce.secret())
            .set_pkce_challenge(challenge)
            .url();
        let mut pending = lock(&self.pending);
        pending.retain(|_, p| p.started.elapsed() < LOGIN_TTL);
        if pending.len() >= MAX_PENDING {
            if let Some(oldest) = pending
                .iter()
                .min_by_key(|(_, p)| p.started)
                .map(|(k, _)| k.clone())
            {
                pending.remove(&oldest);
            }
        }
        pending.insert(
            state.secret().clone(),
            Pending {
                verifier: verifier.secret().clone(),
                nonce: nonce.secret().clone(),
                started: Instant::now(),
                next,
            },
        );
        let cookie = self.cookie(
            LOGIN_COOKIE,
            state.secret(),
            "Lax",
            "/login",
            LOGIN_TTL.as_secs(),
        );
        (url.to_string(), cookie)
    }

    /// Finishes a sign-in: the claim's value (the approver's name) once the code is
    /// exchanged and the ID token checks, and the page [`Oidc::begin`] was given to go
    /// on to. `cookies` is the callback's `Cookie` header.
    pub async fn finish(
        &self,
        cookies: Option<&str>,
        state: &str,
        code: &str,
    ) -> Result<(String, Option<String>), String> {
        let bound = cookie_value(cookies, LOGIN_COOKIE)
            .is_some_and(|value| bool::from(value.as_bytes().ct_eq(state.as_bytes())));
        if !bound {
            return Err(
                "this sign-in was not started in this browser (start again at /login)".into(),
            );
        }
        let pending = lock(&self.pending)
            .remove(state)
            .filter(|p| p.started.elapsed() < LOGIN_TTL)
            .ok_or("this sign-in is unknown, used or too old (start again at /login)")?;
        let http = self.http.clone();
        let send = move |request: oauth2::HttpRequest| {
            let http = http.clone();
            async move { exchange(&http, request).await }
        };
        let answer = self
            .client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier))
            .request_async(&send)
            .await
            .map_err(|err| format!("the provider refused the code: {}", crate::chain(&err)))?;
        let _ = answer.access_token();
        let id_token = answer
            .extra_fields()
            .id_token
            .as_deref()
            .ok_or("the provider's answer has no ID token")?;
        let verified = self
            .id_tokens
            .validate(id_token)
            .await
            .map_err(|why| format!("ID token refused: {why}"))?;
        let nonce = verified
            .claims
            .get("nonce")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !bool::from(nonce.as_bytes().ct_eq(pending.nonce.as_bytes())) {
            return Err("ID token refused: its nonce is not this sign-in's".into());
        }
        Ok((verified.name, pending.next))
    }

    /// Starts a session for `approver`: the `Set-Cookie` values (the session, and the
    /// sign-in cookie cleared).
    pub fn start_session(&self, approver: String) -> anyhow::Result<[String; 2]> {
        let mut bytes = [0u8; 32];
        getrandom(&mut bytes)?;
        let id = hex::encode(bytes);
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| s.expires > Instant::now());
        sessions.insert(
            Sha256::digest(id.as_bytes()).into(),
            Session {
                approver,
                expires: Instant::now() + SESSION_TTL,
            },
        );
        Ok([
            self.cookie(SESSION_COOKIE, &id, "Strict", "/", SESSION_TTL.as_secs()),
            self.cookie(LOGIN_COOKIE, "", "Lax", "/login", 0),
        ])
    }

    /// The approver whose unexpired session the `Cookie` header carries.
    pub fn session(&self, cookies: Option<&str>) -> Option<String> {
        let id = cookie_value(cookies, SESSION_COOKIE)?;
        let key: [u8; 32] = Sha256::digest(id.as_bytes()).into();
        let sessions = lock(&self.sessions);
        let session = sessions.get(&key)?;
        (session.expires > Instant::now()).then(|| session.approver.clone())
    }

    /// Ends the session the `Cookie` header carries: the `Set-Cookie` that clears it.
    pub fn end_session(&self, cookies: Option<&str>) -> String {
        if let Some(id) = cookie_value(cookies, SESSION_COOKIE) {
            let key: [u8; 32] = Sha256::digest(id.as_bytes()).into();
            lock(&self.sessions).remove(&key);
        }
        self.cookie(SESSION_COOKIE, "", "Strict", "/", 0)
    }

    fn cookie(&self, name: &str, value: &str, same_site: &str, path: &str, max_age: u64) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!("{name}={value}; HttpOnly; SameSite={same_site}; Path={path}; Max-Age={max_age}{secure}")
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn getrandom(bytes: &mut [u8]) -> anyhow::Result<()> {
    use rand_core::{OsRng, RngCore};
    OsRng
        .try_fill_bytes(bytes)
        .context("the operating system's random number generator")
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// One token endpoint request, sent with the inbox's own HTTP client (bounded time, no
/// redirects, a capped answer).
async fn exchange(
    http: &reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, std::io::Error> {
    let io = |err: &dyn std::fmt::Display| std::io::Error::other(err.to_string());
    let (parts, body) = request.into_parts();
    let url = reqwest::Url::parse(&parts.uri.to_string()).map_err(|e| io(&e))?;
    let response = http
        .request(parts.method, url)
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|e| io(&crate::chain(&e)))?;
    let mut builder = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    let bytes = response.bytes().await.map_err(|e| io(&e))?;
    if bytes.len() > MAX_TOKEN_RESPONSE {
        return Err(io(&"the token endpoint's answer is too long"));
    }
    builder.body(bytes.to_vec()).map_err(|e| io(&e))
}

#[cfg(test)]
mod tests {
    use super::cookie_value;

    #[test]
    fn a_cookie_is_found_by_its_whole_name_only() {
        let header = Some("a=1; attest_session_x=forged; attest_session=s3 ;b=2");
        assert_eq!(cookie_value(header, "attest_session"), Some("s3"));
        assert_eq!(cookie_value(header, "b"), Some("2"));
        assert_eq!(
            cookie_value(Some("attest_session="), "attest_session"),
            None
        );
        assert_eq!(
            cookie_value(Some("xattest_session=1"), "attest_session"),
            None
        );
        assert_eq!(cookie_value(None, "attest_session"), None);
    }
}

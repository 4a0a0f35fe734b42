//! Attest as the OAuth client of a remote MCP server (`mcp-proxy --url … --oauth`, and the
//! first-run `attest mcp-login URL`), per the MCP authorization spec's client side, done by
//! rmcp's `auth` feature: protected resource metadata (RFC 9728) and authorization server
//! discovery (RFC 8414 / OpenID), the client from a configured ID, a client ID metadata
//! document or dynamic registration (RFC 7591), PKCE, scopes from `WWW-Authenticate` or
//! metadata, step-up on `403 insufficient_scope`, and refresh.
//!
//! What is Attest's here: where the tokens live (one file per server URL, mode 0600, in a
//! directory of its own, never the ledger), how a person signs in (the authorization URL
//! printed, the redirect awaited on a loopback port), and failing closed: without a token
//! and a way to get one, the upstream is not reached. Tokens go into the `Authorization`
//! header and that file only; never into a row, a log line or an error message.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    ClientCredentialsConfig, CredentialRefreshGuard, CredentialStore, OAuthClientConfig,
    StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// How long a person has to finish signing in in the browser.
pub(crate) const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// How many times one request may send the person back to sign in (a server that keeps
/// asking for more scope is not followed forever).
const MAX_AUTHORIZATIONS_PER_REQUEST: u32 = 2;

/// How a missing or insufficient token is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LoginMode {
    /// Print the authorization URL and wait for the browser's redirect to a loopback port.
    Browser,
    /// Request the authorization URL itself and take the code from the redirect: for
    /// authorization servers that approve without a person (test servers, CI).
    Headless,
    /// No sign-in: without a usable token the upstream is not reached (run `attest mcp-login`).
    Never,
}

/// How Attest gets a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Grant {
    /// A person signs in (the authorization code with PKCE), the token refreshed after.
    AuthorizationCode,
    /// Attest is the client itself: its ID and secret get a token, no person involved
    /// (the MCP client credentials extension, SEP-1046).
    ClientCredentials,
}

/// Who Attest is to the authorization server, and how it signs in.
#[derive(Clone)]
pub(crate) struct OAuthClientOptions {
    /// The MCP server's URL (the protected resource).
    pub(crate) url: String,
    /// The token file for that URL.
    pub(crate) token_file: PathBuf,
    /// A client registered out of band (else a metadata document, else registration).
    pub(crate) client_id: Option<String>,
    /// That client's secret (never printed).
    pub(crate) client_secret: Option<String>,
    /// An HTTPS URL of Attest's client ID metadata document, for servers that take one.
    pub(crate) client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: from the challenge or the metadata.
    pub(crate) scopes: Vec<String>,
    /// How a token is obtained when there is none or it falls short.
    pub(crate) login: LoginMode,
    /// The grant that gets a token.
    pub(crate) grant: Grant,
    /// The loopback port the browser is sent back to (0: any free one).
    pub(crate) redirect_port: u16,
}

impl std::fmt::Debug for OAuthClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClientOptions")
            .field("url", &self.url)
            .field("token_file", &self.token_file)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("login", &self.login)
            .field("grant", &self.grant)
            .finish()
    }
}

/// The directory of token files: `--oauth-tokens`, else `$XDG_STATE_HOME/attest/oauth`,
/// else `~/.local/state/attest/oauth`.
pub(crate) fn token_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_owned());
    }
    if let Some(state) = crate::config::env_var("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        return Ok(Path::new(&state).join("attest/oauth"));
    }
    let home = crate::config::env_var("HOME")
        .filter(|h| !h.is_empty())
        .context("no --oauth-tokens directory, and neither XDG_STATE_HOME nor HOME is set")?;
    Ok(Path::new(&home).join(".local/state/attest/oauth"))
}

/// The token file of one server URL in `dir`: named by a hash of the URL, so a URL's
/// path or query never becomes a file name.
pub(crate) fn token_file(dir: &Path, url: &str) -> PathBuf {
    let digest = sha2::Sha256::digest(url.as_bytes());
    let name: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{name}.json"))
}

/// What a token file holds: rmcp's credentials (client ID, token response, scopes), the
/// client's secret when it has one (rmcp keeps it in memory only, and a refresh after a
/// restart needs it), and the URL, for a person reading the directory.
#[derive(Default, Serialize, Deserialize)]
struct TokenFileContents {
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    redirect_uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    credentials: Option<StoredCredentials>,
}

/// rmcp's credential store as a file of mode 0600 (its directory 0700), replaced
/// atomically on every save.
#[derive(Clone)]
pub(crate) struct TokenFile {
    path: PathBuf,
    url: String,
    /// This file's locks, shared by every store on it in this process.
    locks: Arc<FileLocks>,
}

/// A token file's locks. The sessions of one `--listen` each have a manager on the same
/// file: one read-modify-write at a time, and one refresh at a time, so that a rotated
/// refresh token is used once (the second refresh starts from the first one's token).
#[derive(Default)]
struct FileLocks {
    write: tokio::sync::Mutex<()>,
    refresh: Arc<tokio::sync::Mutex<()>>,
}

fn file_locks(path: &Path) -> Arc<FileLocks> {
    static LOCKS: std::sync::Mutex<std::collections::BTreeMap<PathBuf, Arc<FileLocks>>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut locks = LOCKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    locks.entry(path.to_owned()).or_default().clone()
}

impl TokenFile {
    pub(crate) fn new(path: PathBuf, url: &str) -> TokenFile {
        TokenFile {
            locks: file_locks(&path),
            path,
            url: url.to_owned(),
        }
    }

    fn read(&self) -> Result<TokenFileContents, AuthError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| {
                AuthError::CredentialStoreError(format!(
                    "{}: not a token file ({err})",
                    self.path.display()
                ))
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(TokenFileContents {
                url: self.url.clone(),
                ..TokenFileContents::default()
            }),
            Err(err) => Err(AuthError::CredentialStoreError(format!(
                "{}: {err}",
                self.path.display()
            ))),
        }
    }

    fn write(&self, contents: &TokenFileContents) -> Result<(), AuthError> {
        let fail = |err: &dyn std::fmt::Display| {
            AuthError::CredentialStoreError(format!("{}: {err}", self.path.display()))
        };
        let dir = self.path.parent().ok_or_else(|| fail(&"no directory"))?;
        create_private_dir(dir).map_err(|err| fail(&err))?;
        // A temporary file is created 0600 and renamed over: never a moment with the
        // token in a file others may read, nor a half-written one.
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|err| fail(&err))?;
        let bytes = serde_json::to_vec_pretty(contents).map_err(|err| fail(&err))?;
        file.write_all(&bytes).map_err(|err| fail(&err))?;
        set_mode(file.path(), 0o600).map_err(|err| fail(&err))?;
        file.persist(&self.path).map_err(|err| fail(&err.error))?;
        Ok(())
    }

    /// The stored client secret and redirect URI, when there are.
    fn client(&self) -> Result<(Option<String>, Option<String>), AuthError> {
        let contents = self.read()?;
        Ok((contents.client_secret, contents.redirect_uri))
    }

    async fn remember_client(
        &self,
        secret: Option<String>,
        redirect_uri: &str,
    ) -> Result<(), AuthError> {
        let _guard = self.locks.write.lock().await;
        let mut contents = self.read()?;
        contents.client_secret = secret;
        contents.redirect_uri = Some(redirect_uri.to_owned());
        self.write(&contents)
    }
}

#[async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.read()?.credentials)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let _guard = self.locks.write.lock().await;
        let mut contents = self.read()?;
        contents.credentials = Some(credentials);
        self.write(&contents)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let _guard = self.locks.write.lock().await;
        let mut contents = self.read()?;
        contents.credentials = None;
        self.write(&contents)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let guard = self.locks.refresh.clone().lock_owned().await;
        Ok(Some(CredentialRefreshGuard::new(guard)))
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    set_mode(dir, 0o700)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// A manager for `options.url` keeping its credentials in the URL's token file. Metadata
/// may name loopback or private hosts when the server's own URL does (rmcp's rule).
async fn manager(options: &OAuthClientOptions) -> Result<AuthorizationManager, AuthError> {
    let mut manager = AuthorizationManager::new(options.url.as_str()).await?;
    manager.set_credential_store(TokenFile::new(options.token_file.clone(), &options.url));
    Ok(manager)
}

/// A manager with the stored token, its client configured again (with its secret); or
/// `None` when the file holds no token.
async fn stored_manager(
    options: &OAuthClientOptions,
) -> Result<Option<AuthorizationManager>, AuthError> {
    let mut manager = manager(options).await?;
    if !manager.initialize_from_store().await? {
        return Ok(None);
    }
    let file = TokenFile::new(options.token_file.clone(), &options.url);
    let (secret, redirect_uri) = file.client()?;
    if let (Some(secret), Some(stored)) = (secret, file.load().await?) {
        let redirect = redirect_uri.unwrap_or_else(|| "http://127.0.0.1/callback".to_owned());
        manager.configure_client(
            OAuthClientConfig::new(stored.client_id, redirect).with_client_secret(secret),
        )?;
    }
    Ok(Some(manager))
}

/// Signs in: discovery from `challenge` (a `WWW-Authenticate` value) or the server's
/// metadata, the client chosen (configured, metadata document, stored from an earlier
/// registration, or newly registered), then the authorization code with PKCE, exchanged
/// for a token that the manager's store (the token file) keeps.
async fn authorize(
    mut manager: AuthorizationManager,
    challenge: Option<&str>,
    options: &OAuthClientOptions,
) -> anyhow::Result<AuthorizationManager> {
    let resolution = manager
        .resolve_metadata_from_challenge(challenge)
        .await
        .context("OAuth discovery")?;
    manager.set_metadata(resolution.metadata);
    if options.grant == Grant::ClientCredentials {
        return client_credentials(manager, options).await;
    }
    let file = TokenFile::new(options.token_file.clone(), &options.url);
    let (stored_secret, stored_redirect) = file.client()?;

    // The port of the last sign-in when none is given: the client registered for that
    // redirect is used again (step-up, a new login), not registered twice.
    let earlier_port = stored_redirect
        .as_deref()
        .and_then(|uri| reqwest::Url::parse(uri).ok())
        .and_then(|uri| uri.port());
    let redirect = match (options.redirect_port, earlier_port) {
        (0, Some(port)) => match Redirect::bind(port).await {
            Ok(redirect) => redirect,
            Err(_) => Redirect::bind(0).await?,
        },
        (port, _) => Redirect::bind(port).await?,
    };
    let redirect_uri = redirect.uri.clone();
    let mut request = AuthorizationRequest::new(redirect_uri.clone())
        .with_client_name("Attest")
        .with_initial_scope_selection();
    if !options.scopes.is_empty() {
        request = request.with_scopes(options.scopes.clone());
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    if let Some(url) = &options.client_metadata_url {
        request = request.with_client_metadata_url(url);
    }
    let stored_client = file.load().await?.map(|stored| stored.client_id);
    let client_secret = match (&options.client_id, stored_client) {
        (Some(id), _) => {
            request = request.with_preregistered_client(id);
            options.client_secret.clone()
        }
        (None, Some(id)) if stored_redirect.as_deref() == Some(redirect_uri.as_str()) => {
            request = request.with_preregistered_client(id);
            stored_secret
        }
        (None, _) => None,
    };
    if let Some(secret) = &client_secret {
        request = request.with_client_secret(secret);
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, err)| anyhow::Error::new(err))
        .context("OAuth client registration")?;
    let url = session.get_authorization_url().to_owned();
    let callback = match options.login {
        LoginMode::Headless => follow_headless(&url, &redirect_uri).await?,
        LoginMode::Browser | LoginMode::Never => {
            // One write, and no panic when nobody reads stderr any more.
            let message = format!(
                "attest: sign in to {} in a browser:\n  {url}\nwaiting for the redirect to {redirect_uri} …\n",
                options.url
            );
            let _ = std::io::stderr().write_all(message.as_bytes());
            redirect.wait().await?
        }
    };
    session
        .handle_callback_url(&callback)
        .await
        .context("OAuth token exchange")?;
    file.remember_client(client_secret, &redirect_uri).await?;
    Ok(session.auth_manager)
}

/// A token for Attest's own client ID and secret (`client_secret_basic` when that is all
/// the server takes, else `client_secret_post`), for the MCP server as the resource.
async fn client_credentials(
    mut manager: AuthorizationManager,
    options: &OAuthClientOptions,
) -> anyhow::Result<AuthorizationManager> {
    let (Some(client_id), Some(client_secret)) = (&options.client_id, &options.client_secret)
    else {
        anyhow::bail!(
            "the client credentials grant needs --oauth-client-id and --oauth-client-secret-env"
        );
    };
    let config = ClientCredentialsConfig::ClientSecret {
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scopes: options.scopes.clone(),
        resource: Some(options.url.clone()),
    };
    manager
        .configure_client_credentials(&config)
        .context("OAuth client credentials")?;
    manager
        .exchange_client_credentials(&config)
        .await
        .context("OAuth client credentials token request")?;
    Ok(manager)
}

/// The authorization server's redirect, taken without a browser: the URL is requested
/// and the `Location` it sends back must be the redirect URI.
async fn follow_headless(url: &str, redirect_uri: &str) -> anyhow::Result<String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let response = client
        .get(url)
        .send()
        .await
        .context("authorization request")?;
    let status = response.status();
    let location = response
        .headers()
        .get(http::header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    match location {
        Some(location) if location.starts_with(redirect_uri) => Ok(location),
        _ => anyhow::bail!(
            "the authorization server answered {status} without redirecting back: a headless \
             login needs one that approves without a person (sign in with --login browser)"
        ),
    }
}

/// The loopback listener the browser is sent back to.
struct Redirect {
    uri: String,
    listener: tokio::net::TcpListener,
}

impl Redirect {
    async fn bind(port: u16) -> anyhow::Result<Redirect> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("the loopback redirect port {port}"))?;
        let port = listener.local_addr()?.port();
        Ok(Redirect {
            uri: format!("http://127.0.0.1:{port}/callback"),
            listener,
        })
    }

    /// The first `/callback` request's full URL; the page tells the person to go back.
    async fn wait(self) -> anyhow::Result<String> {
        let (sender, mut received) = tokio::sync::mpsc::channel::<String>(1);
        let base = self.uri.clone();
        let app = axum::Router::new().route(
            "/callback",
            axum::routing::get(move |uri: axum::http::Uri| {
                let sender = sender.clone();
                let base = base.clone();
                async move {
                    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
                    let _ = sender.send(format!("{base}{query}")).await;
                    axum::response::Html(
                        "<p>Attest: signed in. You can close this tab.</p>".to_owned(),
                    )
                }
            }),
        );
        let server = tokio::spawn(async move { axum::serve(self.listener, app).await });
        let got = tokio::time::timeout(LOGIN_TIMEOUT, received.recv()).await;
        // Let the page reach the browser before the listener goes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.abort();
        match got {
            Ok(Some(url)) => Ok(url),
            _ => anyhow::bail!(
                "no redirect within {} s: sign-in not finished",
                LOGIN_TIMEOUT.as_secs()
            ),
        }
    }
}

/// The challenge of a server that answered an unauthenticated `initialize`: `None` when
/// it needs no token.
async fn probe(url: &str) -> anyhow::Result<Option<String>> {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "attest", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = reqwest::Client::new()
        .post(url)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .with_context(|| format!("{url}: unreachable"))?;
    if !matches!(response.status().as_u16(), 401 | 403) {
        return Ok(None);
    }
    Ok(Some(
        response
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("Bearer")
            .to_owned(),
    ))
}

/// `attest mcp-login URL`: signs in and stores the token. Says whether the server needed
/// one.
pub(crate) async fn login(options: &OAuthClientOptions) -> anyhow::Result<bool> {
    crate::servers::mcp_transport::install_tls_provider();
    let Some(challenge) = probe(&options.url).await? else {
        return Ok(false);
    };
    let manager = manager(options).await?;
    authorize(manager, Some(&challenge), options).await?;
    Ok(true)
}

/// The HTTP client for an OAuth upstream: rmcp's (the stored token on every request,
/// refreshed when it expires or is refused once) inside Attest's, which signs in again
/// on a `401` or a `403 insufficient_scope` when `options.login` allows, then retries.
pub(crate) async fn client(options: OAuthClientOptions) -> Result<OAuthHttpClient, String> {
    let manager = match stored_manager(&options).await {
        Ok(Some(manager)) => manager,
        Ok(None) => manager(&options).await.map_err(|err| err.to_string())?,
        Err(err) => return Err(format!("the stored OAuth token: {}", super::chain(&err))),
    };
    Ok(OAuthHttpClient {
        inner: AuthClient::new(reqwest_rmcp::Client::new(), manager),
        options: Arc::new(options),
    })
}

/// rmcp's authorized client, signing in again when the server asks.
#[derive(Clone)]
pub(crate) struct OAuthHttpClient {
    inner: AuthClient<reqwest_rmcp::Client>,
    options: Arc<OAuthClientOptions>,
}

impl OAuthHttpClient {
    /// Replaces the manager with one that went through `authorize`.
    async fn sign_in(&self, challenge: &str) -> Result<(), String> {
        let mut guard = self.inner.auth_manager.lock().await;
        let placeholder = manager(&self.options)
            .await
            .map_err(|err| err.to_string())?;
        let current = std::mem::replace(&mut *guard, placeholder);
        match authorize(current, Some(challenge), &self.options).await {
            Ok(manager) => {
                *guard = manager;
                Ok(())
            }
            Err(err) => Err(format!("{err:#}")),
        }
    }

    /// The refusal, with its reason and the way out (no token in it).
    fn refused(&self, why: &str) -> StreamableHttpError<reqwest_rmcp::Error> {
        StreamableHttpError::Auth(AuthError::AuthorizationFailed(format!(
            "the upstream refused the OAuth token ({why}); sign in again: attest mcp-login {}",
            self.options.url
        )))
    }
}

impl StreamableHttpClient for OAuthHttpClient {
    type Error = reqwest_rmcp::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut authorizations = 0;
        loop {
            let sent = self
                .inner
                .post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    custom_headers.clone(),
                    limits,
                )
                .await;
            let (challenge, why) = match &sent {
                Err(StreamableHttpError::AuthRequired(err)) => {
                    (err.www_authenticate_header.clone(), "401")
                }
                Err(StreamableHttpError::InsufficientScope(err)) => (
                    err.www_authenticate_header.clone(),
                    "403, insufficient scope",
                ),
                _ => return sent,
            };
            // A client credentials token is replaced without a person; any other only
            // when a sign-in is allowed.
            let may_sign_in = self.options.grant == Grant::ClientCredentials
                || self.options.login != LoginMode::Never;
            if !may_sign_in || authorizations >= MAX_AUTHORIZATIONS_PER_REQUEST {
                return Err(self.refused(why));
            }
            authorizations += 1;
            if let Err(err) = self.sign_in(&challenge).await {
                return Err(StreamableHttpError::Auth(AuthError::AuthorizationFailed(
                    format!("signing in to {} failed: {err}", self.options.url),
                )));
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_are_named_by_a_hash_of_the_url_and_secrets_are_not_printed() {
        let dir = Path::new("/tokens");
        let file = token_file(dir, "https://mcp.example.com/mcp?team=secret-team");
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with(".json") && !name.contains("team"), "{name}");
        assert_eq!(
            file,
            token_file(dir, "https://mcp.example.com/mcp?team=secret-team")
        );
        assert_ne!(file, token_file(dir, "https://mcp.example.com/other"));

        let options = OAuthClientOptions {
            url: "https://mcp.example.com/mcp".to_owned(),
            token_file: file,
            client_id: Some("attest".to_owned()),
            client_secret: Some("s3cret".to_owned()),
            client_metadata_url: None,
            scopes: Vec::new(),
            login: LoginMode::Never,
            grant: Grant::AuthorizationCode,
            redirect_port: 0,
        };
        assert!(!format!("{options:?}").contains("s3cret"));
    }

    #[tokio::test]
    async fn the_token_file_is_private_and_keeps_the_secret_beside_the_credentials() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oauth/one.json");
        let store = TokenFile::new(path.clone(), "https://mcp.example.com/mcp");
        assert!(store.load().await.unwrap().is_none());
        store
            .remember_client(Some("s3cret".to_owned()), "http://127.0.0.1:1/callback")
            .await
            .unwrap();
        store
            .save(StoredCredentials::new(
                "client-1".to_owned(),
                None,
                Vec::new(),
                Some(7),
            ))
            .await
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "client-1");
        assert_eq!(store.client().unwrap().0.as_deref(), Some("s3cret"));
        store.clear().await.unwrap();
        assert!(store.load().await.unwrap().is_none());
        // The client survives a cleared token: a new sign-in reuses it.
        assert_eq!(store.client().unwrap().0.as_deref(), Some("s3cret"));

        std::fs::write(&path, "not json").unwrap();
        let err = store.load().await.unwrap_err().to_string();
        assert!(
            err.contains("one.json") && err.contains("not a token file"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn stores_on_one_file_refresh_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.json");
        let one = TokenFile::new(path.clone(), "https://mcp.example.com/mcp");
        let other = TokenFile::new(path, "https://mcp.example.com/mcp");
        let held = one.acquire_refresh_guard().await.unwrap();
        let mut waiting = Box::pin(other.acquire_refresh_guard());
        // Never ready while the first refresh holds the file's guard.
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        drop(held);
        assert!(waiting.await.unwrap().is_some());
        let elsewhere = TokenFile::new(dir.path().join("other.json"), "https://b.example/mcp");
        assert!(futures_util::poll!(Box::pin(elsewhere.acquire_refresh_guard())).is_ready());
    }
}

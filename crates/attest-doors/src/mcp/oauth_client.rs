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
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, ClientCredentialsConfig, CredentialRefreshGuard, CredentialStore,
    OAuthClientConfig, StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// How long a person has to finish signing in in the browser.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// How many times one request may send the person back to sign in (a server that keeps
/// asking for more scope is not followed forever).
const MAX_AUTHORIZATIONS_PER_REQUEST: u32 = 2;

/// How a missing or insufficient token is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LoginMode {
    /// Print the authorization URL and wait for the browser's redirect to a loopback port.
    Browser,
    /// Request the authorization URL itself and take the code from the redirect: for
    /// authorization servers that approve without a person (test servers, CI).
    Headless,
    /// No sign-in: without a usable token the upstream is not reached (run `attest mcp-login`).
    Never,
}

/// How Attest gets a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Grant {
    /// A person signs in (the authorization code with PKCE), the token refreshed after.
    AuthorizationCode,
    /// Attest is the client itself: its ID and secret get a token, no person involved
    /// (the MCP client credentials extension, SEP-1046).
    ClientCredentials,
}

/// The algorithm of Attest's client assertion (`--oauth-client-key-alg`), by its JOSE name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
// The JOSE names say what each is; a doc comment on a variant would also become its help
// text in `attest mcp-proxy --help`.
#[allow(missing_docs)]
pub enum KeyAlgorithm {
    #[cfg_attr(feature = "clap", value(name = "RS256"))]
    Rs256,
    #[cfg_attr(feature = "clap", value(name = "RS384"))]
    Rs384,
    #[cfg_attr(feature = "clap", value(name = "RS512"))]
    Rs512,
    #[cfg_attr(feature = "clap", value(name = "ES256"))]
    Es256,
    #[cfg_attr(feature = "clap", value(name = "ES384"))]
    Es384,
}

/// Attest's private key for `private_key_jwt` client authentication (RFC 7523), used by
/// the client credentials grant instead of a secret.
#[derive(Clone)]
pub struct ClientKey {
    /// The PEM private key (PKCS#8, or PKCS#1 for RSA; never printed).
    pub pem: String,
    /// The assertion's signing algorithm (`--oauth-client-key-alg`).
    pub algorithm: KeyAlgorithm,
}

/// A client assertion (RFC 7523 §3): `iss` and `sub` the client ID, `aud` the
/// authorization server's issuer, five minutes to live from `now`, a fresh `jti`.
/// Signed with the JWT library Attest already builds (jsonwebtoken 9 on ring), not
/// rmcp's `auth-client-credentials-jwt` feature, whose jsonwebtoken 11 builds aws-lc.
fn client_assertion(
    client_id: &str,
    audience: &str,
    key: &ClientKey,
    now: u64,
) -> anyhow::Result<String> {
    use jsonwebtoken::{Algorithm, EncodingKey};
    let (algorithm, ec) = match key.algorithm {
        KeyAlgorithm::Rs256 => (Algorithm::RS256, false),
        KeyAlgorithm::Rs384 => (Algorithm::RS384, false),
        KeyAlgorithm::Rs512 => (Algorithm::RS512, false),
        KeyAlgorithm::Es256 => (Algorithm::ES256, true),
        KeyAlgorithm::Es384 => (Algorithm::ES384, true),
    };
    let pem = key.pem.as_bytes();
    let encoding = if ec {
        EncodingKey::from_ec_pem(pem)
    } else {
        EncodingKey::from_rsa_pem(pem)
    }
    .map_err(|err| {
        anyhow::anyhow!("--oauth-client-key: not a PEM private key for {algorithm:?} ({err})")
    })?;
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": audience,
        "iat": now, "exp": now + 300, "jti": uuid::Uuid::new_v4().to_string(),
    });
    jsonwebtoken::encode(&jsonwebtoken::Header::new(algorithm), &claims, &encoding).map_err(|err| {
        anyhow::anyhow!("signing the client assertion with --oauth-client-key: {err}")
    })
}

/// Who Attest is to the authorization server, and how it signs in.
#[derive(Clone)]
pub struct OAuthClientOptions {
    /// The MCP server's URL (the protected resource).
    pub url: String,
    /// The token file for that URL.
    pub token_file: PathBuf,
    /// A client registered out of band (else a metadata document, else registration).
    pub client_id: Option<String>,
    /// That client's secret (never printed).
    pub client_secret: Option<String>,
    /// Or its private key, for the client credentials grant (never printed).
    pub client_key: Option<ClientKey>,
    /// An HTTPS URL of Attest's client ID metadata document, for servers that take one.
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: from the challenge or the metadata.
    pub scopes: Vec<String>,
    /// How a token is obtained when there is none or it falls short.
    pub login: LoginMode,
    /// The grant that gets a token.
    pub grant: Grant,
    /// The loopback port the browser is sent back to (0: any free one).
    pub redirect_port: u16,
}

impl std::fmt::Debug for OAuthClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClientOptions")
            .field("url", &self.url)
            .field("token_file", &self.token_file)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field(
                "client_key",
                &self.client_key.as_ref().map(|key| key.algorithm),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("login", &self.login)
            .field("grant", &self.grant)
            .finish()
    }
}

/// The directory of token files: `--oauth-tokens`, else `$XDG_STATE_HOME/attest/oauth`,
/// else `~/.local/state/attest/oauth`.
pub fn token_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_owned());
    }
    if let Some(state) = env_var("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
        return Ok(Path::new(&state).join("attest/oauth"));
    }
    let home = env_var("HOME")
        .filter(|h| !h.is_empty())
        .context("no --oauth-tokens directory, and neither XDG_STATE_HOME nor HOME is set")?;
    Ok(Path::new(&home).join(".local/state/attest/oauth"))
}

/// The token file of one server URL in `dir`: named by a hash of the URL, so a URL's
/// path or query never becomes a file name.
pub fn token_file(dir: &Path, url: &str) -> PathBuf {
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
pub struct TokenFile {
    path: PathBuf,
    url: String,
    /// This file's locks, shared by every store on it in this process.
    locks: Arc<FileLocks>,
}

/// A token file's locks in this process. The sessions of one `--listen` each have a
/// manager on the same file: one read-modify-write at a time, and one refresh at a time
/// (then, across processes, [`RefreshLock`]'s file lock).
#[derive(Default)]
struct FileLocks {
    write: tokio::sync::Mutex<()>,
    refresh: Arc<tokio::sync::Mutex<()>>,
}

/// Held across one refresh (read, refresh, write): this process's sessions on the file
/// wait on the mutex, other processes on an advisory lock of `FILE.lock` beside it (the
/// token file itself is replaced by a rename, so it cannot carry the lock). Released
/// when dropped, or when the process dies. Whoever takes it reads the file again, so a
/// refresh another process just made is used, not repeated: a refresh token is spent
/// once, as an authorization server that rotates them requires (a second use would be
/// refused, and may revoke the grant).
struct RefreshLock {
    _file: std::fs::File,
    _in_process: tokio::sync::OwnedMutexGuard<()>,
}

tokio::task_local! {
    /// Set while a task holds its token file's [`RefreshLock`] and lets rmcp refresh:
    /// rmcp's refresh asks the store for its guard, which is then already held.
    static REFRESH_LOCK_HELD: ();
}

/// How long before its expiry a token is refreshed ahead of a request (at most half its
/// lifetime). rmcp refreshes 30 s ahead; starting earlier makes this lock's path, not
/// rmcp's, the one that refreshes.
const REFRESH_AHEAD_SECS: u64 = 60;

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

    /// Whether the stored token (if any) expires within [`REFRESH_AHEAD_SECS`] and can be
    /// refreshed (it has a refresh token).
    fn expiring(&self, now: u64) -> bool {
        use oauth2::TokenResponse as _;
        let Ok(TokenFileContents {
            credentials: Some(stored),
            ..
        }) = self.read()
        else {
            return false;
        };
        let (Some(token), Some(received_at)) = (&stored.token_response, stored.token_received_at)
        else {
            return false;
        };
        let (Some(lifetime), Some(_)) = (token.expires_in(), token.refresh_token()) else {
            return false;
        };
        let lifetime = lifetime.as_secs();
        let remaining = lifetime.saturating_sub(now.saturating_sub(received_at));
        remaining < REFRESH_AHEAD_SECS.min(lifetime / 2).max(1)
    }

    /// Takes this file's [`RefreshLock`], waiting for this process's sessions and for
    /// other processes.
    async fn lock_refresh(&self) -> Result<RefreshLock, AuthError> {
        let in_process = self.locks.refresh.clone().lock_owned().await;
        let mut name = self.path.file_name().unwrap_or_default().to_owned();
        name.push(".lock");
        let path = self.path.with_file_name(name);
        let shown = path.display().to_string();
        let fail = move |err: &dyn std::fmt::Display| {
            AuthError::CredentialStoreError(format!("{shown}: {err}"))
        };
        let dir = self.path.parent().ok_or_else(|| fail(&"no directory"))?;
        create_private_dir(dir).map_err(|err| fail(&err))?;
        let locked = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            set_mode(&path, 0o600)?;
            file.lock()?;
            Ok(file)
        })
        .await;
        match locked {
            Ok(Ok(file)) => Ok(RefreshLock {
                _file: file,
                _in_process: in_process,
            }),
            Ok(Err(err)) => Err(fail(&err)),
            Err(err) => Err(fail(&err)),
        }
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

    /// rmcp takes this around its refresh (and reads the file again inside it).
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        if REFRESH_LOCK_HELD.try_with(|_| ()).is_ok() {
            return Ok(None);
        }
        Ok(Some(CredentialRefreshGuard::new(
            self.lock_refresh().await?,
        )))
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

/// Seconds since the Unix epoch (rmcp's clock for `token_received_at`).
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
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
) -> anyhow::Result<Option<AuthorizationManager>> {
    let mut manager = manager(options).await?;
    let file = TokenFile::new(options.token_file.clone(), &options.url);
    if file
        .load()
        .await?
        .is_some_and(|stored| stored.token_response.is_some())
    {
        // Discovered here, not by rmcp's store initialization, so that a token from a
        // legacy same-origin server (see `discover`) is usable after a restart.
        let metadata = discover(&manager, None, &options.url).await?;
        manager.set_metadata(metadata);
    }
    if !manager.initialize_from_store().await? {
        return Ok(None);
    }
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
    let metadata = discover(&manager, challenge, &options.url).await?;
    manager.set_metadata(metadata.clone());
    if options.grant == Grant::ClientCredentials {
        return client_credentials(manager, &metadata, options).await;
    }
    advertises_s256(&metadata, &options.url)?;
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

/// Refuses an authorization server whose metadata does not list S256 among its
/// `code_challenge_methods_supported`: the MCP authorization spec has the client refuse
/// to proceed, since a server that ignores the challenge leaves an intercepted code
/// usable by whoever holds it. rmcp refuses a list without S256 but goes on when the
/// list is absent; both stop here, before registration or the authorization request.
fn advertises_s256(metadata: &AuthorizationMetadata, url: &str) -> anyhow::Result<()> {
    let said = match metadata.code_challenge_methods_supported.as_deref() {
        Some(methods) if methods.iter().any(|method| method == "S256") => return Ok(()),
        None => "does not advertise PKCE (its metadata has no code_challenge_methods_supported)",
        Some(_) => "does not advertise S256 PKCE (its code_challenge_methods_supported lacks S256)",
    };
    anyhow::bail!(
        "the authorization server of {url} {said}; the MCP authorization spec requires a \
         client to refuse a server without S256 PKCE, so Attest does not sign in to it"
    )
}

/// The authorization server's metadata: rmcp's discovery (from the challenge, protected
/// resource metadata, then the server's own), and where rmcp refuses an issuer, the
/// 2025-03-26 revision's same-origin case ([`legacy_metadata`]).
async fn discover(
    manager: &AuthorizationManager,
    challenge: Option<&str>,
    url: &str,
) -> anyhow::Result<AuthorizationMetadata> {
    match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => Ok(resolution.metadata),
        Err(err @ AuthError::AuthorizationServerMismatch { .. }) => {
            match legacy_metadata(url, challenge).await? {
                Some(metadata) => Ok(metadata),
                None => Err(anyhow::Error::new(err).context("OAuth discovery")),
            }
        }
        Err(err) => Err(anyhow::Error::new(err).context("OAuth discovery")),
    }
}

/// The 2025-03-26 revision's discovery, for a server from before protected resource
/// metadata: the MCP server's origin is its own authorization server, with its metadata
/// at `ORIGIN/.well-known/oauth-authorization-server`. Such servers may name an `issuer`
/// under a path of that origin (where their endpoints are), not the origin itself, which
/// RFC 8414 §3.3 refuses and rmcp with it; the TypeScript SDK checks no issuer at all.
/// Taken here only on that legacy path: no protected resource metadata (neither in the
/// challenge nor at its well-known URLs), the metadata fetched from the MCP server's own
/// origin without following redirects, its issuer and every endpoint on that origin.
/// `None` otherwise: an issuer or endpoint on another origin (the mix-up RFC 8414's
/// check guards against) is refused as rmcp refused it.
async fn legacy_metadata(
    url: &str,
    challenge: Option<&str>,
) -> anyhow::Result<Option<AuthorizationMetadata>> {
    if challenge.is_some_and(|challenge| challenge.contains("resource_metadata")) {
        return Ok(None);
    }
    let server = reqwest::Url::parse(url).context("the MCP server's URL")?;
    let at = |path: &str| {
        let mut at = server.clone();
        at.set_query(None);
        at.set_fragment(None);
        at.set_path(path);
        at
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let path = server.path().trim_end_matches('/');
    for resource_metadata in [
        format!("/.well-known/oauth-protected-resource{path}"),
        "/.well-known/oauth-protected-resource".to_owned(),
    ] {
        let answer = client.get(at(&resource_metadata)).send().await;
        if answer.is_ok_and(|answer| answer.status().is_success()) {
            return Ok(None);
        }
    }
    let answer = client
        .get(at("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .context("OAuth discovery")?;
    if !answer.status().is_success() {
        return Ok(None);
    }
    let Ok(metadata) = answer.json::<AuthorizationMetadata>().await else {
        return Ok(None);
    };
    Ok(on_origin_of(&server, &metadata).then_some(metadata))
}

/// Whether the metadata's issuer and all its endpoints are on `server`'s origin
/// (scheme, host and port).
fn on_origin_of(server: &reqwest::Url, metadata: &AuthorizationMetadata) -> bool {
    let origin = server.origin();
    let same = |url: &str| reqwest::Url::parse(url).is_ok_and(|url| url.origin() == origin);
    metadata.issuer.as_deref().is_some_and(same)
        && same(&metadata.authorization_endpoint)
        && same(&metadata.token_endpoint)
        && metadata.registration_endpoint.as_deref().is_none_or(same)
}

/// A token for Attest's own client ID and secret (`client_secret_basic` when that is all
/// the server takes, else `client_secret_post`), for the MCP server as the resource.
async fn client_credentials(
    mut manager: AuthorizationManager,
    metadata: &AuthorizationMetadata,
    options: &OAuthClientOptions,
) -> anyhow::Result<AuthorizationManager> {
    if let (Some(client_id), Some(key)) = (&options.client_id, &options.client_key) {
        return private_key_jwt(manager, metadata, client_id, key, options).await;
    }
    let (Some(client_id), Some(client_secret)) = (&options.client_id, &options.client_secret)
    else {
        anyhow::bail!(
            "the client credentials grant needs --oauth-client-id and --oauth-client-secret-env \
             or --oauth-client-key"
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

/// A token for Attest's own client authenticated by a signed assertion
/// (`private_key_jwt`, RFC 7523 §2.2, [`client_assertion`]), for the MCP server as the
/// resource: the request names no `client_id` (the assertion does), goes only to an
/// HTTPS (or loopback) token endpoint, and follows no redirect. The token is kept in the
/// token file as rmcp keeps its own, so rmcp's client sends it.
async fn private_key_jwt(
    mut manager: AuthorizationManager,
    metadata: &AuthorizationMetadata,
    client_id: &str,
    key: &ClientKey,
    options: &OAuthClientOptions,
) -> anyhow::Result<AuthorizationManager> {
    use oauth2::TokenResponse as _;
    let endpoint = reqwest::Url::parse(&metadata.token_endpoint).context("the token endpoint")?;
    let loopback = endpoint.host_str().is_some_and(|host| {
        host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    anyhow::ensure!(
        endpoint.scheme() == "https" || loopback,
        "the token endpoint {endpoint} is not HTTPS: a client assertion goes only over TLS"
    );
    let audience = metadata.issuer.as_deref().context(
        "the authorization server's metadata names no issuer (the client assertion's audience)",
    )?;
    let now = now_secs();
    let assertion = client_assertion(client_id, audience, key, now)?;
    let scope = options.scopes.join(" ");
    let mut form = vec![
        ("grant_type", "client_credentials"),
        (
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        ),
        ("client_assertion", assertion.as_str()),
        ("resource", options.url.as_str()),
    ];
    if !scope.is_empty() {
        form.push(("scope", scope.as_str()));
    }
    let answer = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?
        .post(endpoint)
        .form(&form)
        .send()
        .await
        .context("OAuth client credentials token request")?;
    let status = answer.status();
    let body = answer
        .bytes()
        .await
        .context("the token endpoint's answer")?;
    if !status.is_success() {
        let said: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let field = |name: &str| said[name].as_str().unwrap_or_default().to_owned();
        anyhow::bail!(
            "the token endpoint refused the client assertion ({status}): {} {}",
            field("error"),
            field("error_description")
        );
    }
    let token: rmcp::transport::auth::OAuthTokenResponse =
        serde_json::from_slice(&body).context("the token endpoint's answer is not a token")?;
    let granted = token
        .scopes()
        .map(|scopes| scopes.iter().map(|scope| scope.to_string()).collect())
        .unwrap_or_else(|| options.scopes.clone());
    TokenFile::new(options.token_file.clone(), &options.url)
        .save(
            StoredCredentials::new(client_id.to_owned(), Some(token), granted, Some(now))
                .with_issuer(metadata.issuer.clone()),
        )
        .await?;
    manager.configure_client_id(client_id)?;
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
pub async fn login(options: &OAuthClientOptions) -> anyhow::Result<bool> {
    crate::mcp::transport::install_tls_provider();
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
pub async fn client(options: OAuthClientOptions) -> Result<OAuthHttpClient, String> {
    let manager = match stored_manager(&options).await {
        Ok(Some(manager)) => manager,
        Ok(None) => manager(&options).await.map_err(|err| err.to_string())?,
        Err(err) => return Err(format!("the stored OAuth token: {err:#}")),
    };
    Ok(OAuthHttpClient {
        inner: AuthClient::new(reqwest_rmcp::Client::new(), manager),
        options: Arc::new(options),
    })
}

/// rmcp's authorized client, signing in again when the server asks.
#[derive(Clone)]
pub struct OAuthHttpClient {
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

    /// Refreshes a token about to expire before a request is sent, under the token
    /// file's [`RefreshLock`] and only if the file, read again under it, still holds an
    /// expiring token: when another process (or session) has just refreshed, its token
    /// is used and the refresh token is not spent twice. Anything that goes wrong here
    /// is left to rmcp's own path (its refresh, then a sign-in or the refusal).
    async fn refresh_if_expiring(&self) {
        let file = TokenFile::new(self.options.token_file.clone(), &self.options.url);
        if !file.expiring(now_secs()) {
            return;
        }
        // The manager first, then the file lock: the order rmcp's own refresh takes them.
        let manager = self.inner.auth_manager.lock().await;
        let Ok(_lock) = file.lock_refresh().await else {
            return;
        };
        if !file.expiring(now_secs()) {
            return;
        }
        if let Err(err) = REFRESH_LOCK_HELD.scope((), manager.refresh_token()).await {
            tracing::debug!("refreshing the OAuth token ahead of a request: {err}");
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
        self.refresh_if_expiring().await;
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

/// A variable of the process environment, unset when empty.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
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
            client_key: None,
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

    #[test]
    fn the_client_assertion_names_the_client_and_the_issuer_and_verifies_with_its_key() {
        // A P-256 key made for this test (openssl ecparam -name prime256v1 -genkey).
        let key = ClientKey {
            pem: "-----BEGIN PRIVATE KEY-----\n\
                MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg3MZaQBbNiiqFNQHi\n\
                C0aJFoavlhtcLPCuKmMF30r24JmhRANCAASYxE3JWvEyJu534Z3zbZh1/kJhNYJ1\n\
                8e/cj62/163XVObr2I/cJK11GfiSeFjbkPQCJ9hxVnxdNi/+ANFTYaGs\n\
                -----END PRIVATE KEY-----\n"
                .to_owned(),
            algorithm: KeyAlgorithm::Es256,
        };
        let public = "-----BEGIN PUBLIC KEY-----\n\
            MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmMRNyVrxMibud+Gd822Ydf5CYTWC\n\
            dfHv3I+tv9et11Tm69iP3CStdRn4knhY25D0AifYcVZ8XTYv/gDRU2GhrA==\n\
            -----END PUBLIC KEY-----\n";
        let now = now_secs();
        let one = client_assertion("attest-client", "https://as.example", &key, now).unwrap();
        let other = client_assertion("attest-client", "https://as.example", &key, now).unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.set_audience(&["https://as.example"]);
        validation.set_issuer(&["attest-client"]);
        let decoding = jsonwebtoken::DecodingKey::from_ec_pem(public.as_bytes()).unwrap();
        let claims = |token: &str| {
            jsonwebtoken::decode::<serde_json::Value>(token, &decoding, &validation)
                .unwrap()
                .claims
        };
        let (one, other) = (claims(&one), claims(&other));
        assert_eq!(one["sub"], "attest-client");
        assert_eq!(one["exp"].as_u64(), Some(now + 300));
        assert_ne!(one["jti"], other["jti"]);
        // Another audience does not verify; nor does a key of another kind.
        validation.set_audience(&["https://other.example"]);
        let signed = client_assertion("attest-client", "https://as.example", &key, now).unwrap();
        assert!(
            jsonwebtoken::decode::<serde_json::Value>(&signed, &decoding, &validation).is_err()
        );
        let rsa = ClientKey {
            algorithm: KeyAlgorithm::Rs256,
            ..key
        };
        let err = client_assertion("attest-client", "https://as.example", &rsa, now)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--oauth-client-key") && !err.contains("MIGH"),
            "{err}"
        );
    }

    #[test]
    fn legacy_metadata_is_taken_only_on_the_mcp_servers_own_origin() {
        let server = reqwest::Url::parse("http://127.0.0.1:8080/mcp").unwrap();
        let metadata = |issuer: &str, token: &str| -> AuthorizationMetadata {
            serde_json::from_value(serde_json::json!({
                "issuer": issuer,
                "authorization_endpoint": "http://127.0.0.1:8080/oauth/authorize",
                "token_endpoint": token,
                "registration_endpoint": "http://127.0.0.1:8080/oauth/register",
            }))
            .unwrap()
        };
        let here = "http://127.0.0.1:8080/oauth/token";
        assert!(on_origin_of(
            &server,
            &metadata("http://127.0.0.1:8080/oauth", here)
        ));
        for (issuer, token) in [
            ("http://127.0.0.1:9090/oauth", here),
            ("https://127.0.0.1:8080/oauth", here),
            ("http://localhost:8080/oauth", here),
            ("http://127.0.0.1:8080/oauth", "http://127.0.0.1:9090/token"),
            ("not a url", here),
        ] {
            assert!(
                !on_origin_of(&server, &metadata(issuer, token)),
                "{issuer} {token}"
            );
        }
        let mut no_issuer = metadata("http://127.0.0.1:8080/oauth", here);
        no_issuer.issuer = None;
        assert!(!on_origin_of(&server, &no_issuer));
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
        let second = waiting.await.unwrap();
        assert!(second.is_some());
        // Another file's lock is not this one's: taken while this one is held (a hang
        // here is the failure; the bound only ends it).
        let elsewhere = TokenFile::new(dir.path().join("other.json"), "https://b.example/mcp");
        let other_file =
            tokio::time::timeout(Duration::from_secs(60), elsewhere.acquire_refresh_guard()).await;
        assert!(matches!(other_file, Ok(Ok(Some(_)))));
        // The lock lives beside the token file, which a save replaces by a rename.
        assert!(dir.path().join("shared.json.lock").exists());
        drop(second);
    }
}

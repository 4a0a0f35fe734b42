//! The MCP proxy's transports: how it reaches the upstream server (a child process on
//! stdio, or a remote server over streamable HTTP), and where the client's bearer token
//! comes from.
//!
//! A remote upstream gets the client's bearer token (`Authorization: Bearer …`) on every
//! request: taken from the HTTP request of a client that reached the proxy over
//! streamable HTTP (`--listen`), else from the variable `--bearer-env` names. The token
//! goes into that header and nowhere else: never into an action, a row or a log line.
//!
//! An upstream that answers `401`/`403` with a `WWW-Authenticate` challenge fails
//! `initialize` with that challenge in the error's data, which `--listen` hands to its
//! client as HTTP (`super::sessions`).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::ErrorData;
use rmcp::service::{
    ClientInitializeError, RequestContext, RoleClient, RoleServer, RunningService, Service,
    ServiceExt,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpClientTransportConfig,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

use super::http_streams::{default_client, Posted, StreamKey};
use super::oauth_client::{self, LoginMode, OAuthClientOptions};
use super::order::{InFlight, Ordered};
use super::sessions::upstream_challenge;
use crate::chain;

/// How long the upstream may take to answer `initialize`.
const UPSTREAM_INIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the upstream MCP server is.
#[derive(Clone)]
pub enum UpstreamSpec {
    /// A command started as a child, spoken to on its stdio.
    Command(Vec<String>),
    /// A remote server's streamable-HTTP endpoint (`https://…/mcp`).
    Url {
        /// The endpoint.
        url: String,
        /// The bearer token for a client on stdio (from `--bearer-env`).
        bearer: Option<String>,
        /// Attest signs in to the server itself (`--oauth`), instead of a fixed bearer.
        oauth: Option<Box<OAuthClientOptions>>,
    },
}

impl std::fmt::Debug for UpstreamSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is never printed.
        match self {
            UpstreamSpec::Command(command) => f.debug_tuple("Command").field(command).finish(),
            UpstreamSpec::Url { url, bearer, oauth } => f
                .debug_struct("Url")
                .field("url", url)
                .field("bearer", &bearer.as_ref().map(|_| "…"))
                .field("oauth", oauth)
                .finish(),
        }
    }
}

impl UpstreamSpec {
    /// What error messages call the upstream: the program, or the URL's origin.
    pub fn label(&self) -> String {
        match self {
            UpstreamSpec::Command(command) => command.first().cloned().unwrap_or_default(),
            UpstreamSpec::Url { url, .. } => match reqwest::Url::parse(url) {
                Ok(parsed) => format!(
                    "{}://{}{}",
                    parsed.scheme(),
                    parsed.host_str().unwrap_or(""),
                    parsed.port().map(|p| format!(":{p}")).unwrap_or_default()
                ),
                Err(_) => "the upstream URL".to_owned(),
            },
        }
    }

    /// Checks the spec before anything starts: a command, or an http(s) URL without
    /// userinfo (credentials go in the bearer, not the URL).
    pub fn validate(&self) -> anyhow::Result<()> {
        match self {
            UpstreamSpec::Command(command) if command.is_empty() => anyhow::bail!(
                "no upstream: give a command after `--` (`attest mcp-proxy -- npx server`) or --url"
            ),
            UpstreamSpec::Command(_) => Ok(()),
            UpstreamSpec::Url { url, .. } => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|err| anyhow::anyhow!("--url: not a URL ({err})"))?;
                anyhow::ensure!(
                    matches!(parsed.scheme(), "http" | "https"),
                    "--url: an http:// or https:// URL, not {}:",
                    parsed.scheme()
                );
                anyhow::ensure!(
                    parsed.username().is_empty() && parsed.password().is_none(),
                    "--url: no credentials in the URL; pass the token with --bearer-env"
                );
                Ok(())
            }
        }
    }
}

/// The bearer token of the HTTP request that carried this MCP request, when the client
/// reached the proxy over streamable HTTP.
pub fn request_bearer(context: &RequestContext<RoleServer>) -> Option<String> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    let value = parts
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// Starts (or reaches) the upstream and runs `service` as its client. `bearer` (the
/// client's own token) beats the spec's. The link counts the upstream's notifications
/// into `in_flight` (`super::order`); a remote upstream's are marked under `key`
/// with the request whose stream they came on (`super::http_streams`).
pub async fn connect<S: Service<RoleClient>>(
    spec: &UpstreamSpec,
    service: S,
    bearer: Option<String>,
    in_flight: InFlight,
    key: &StreamKey,
) -> Result<RunningService<RoleClient, S>, ErrorData> {
    let label = spec.label();
    let started = match spec {
        UpstreamSpec::Command(command) => {
            let Some((program, args)) = command.split_first() else {
                return Err(ErrorData::internal_error("no upstream command", None));
            };
            let mut child = tokio::process::Command::new(program);
            child.args(args);
            let (transport, _) = TokioChildProcess::builder(child)
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|err| {
                    ErrorData::internal_error(
                        format!("cannot start upstream `{program}`: {err}"),
                        None,
                    )
                })?;
            let transport = Ordered::new(transport, in_flight);
            tokio::time::timeout(UPSTREAM_INIT_TIMEOUT, Box::pin(service.serve(transport))).await
        }
        UpstreamSpec::Url {
            url,
            oauth: Some(oauth),
            ..
        } => {
            install_tls_provider();
            // The client's own token is not sent: Attest holds the upstream's.
            let client = oauth_client::client((**oauth).clone())
                .await
                .map_err(|err| {
                    ErrorData::internal_error(format!("upstream `{label}`: {err}"), None)
                })?;
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let client = Posted::new(client, key.clone());
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let transport = Ordered::new(transport, in_flight);
            // A person signing in in a browser takes longer than a server's answer.
            let timeout = match oauth.login {
                LoginMode::Browser => UPSTREAM_INIT_TIMEOUT + oauth_client::LOGIN_TIMEOUT,
                LoginMode::Headless | LoginMode::Never => UPSTREAM_INIT_TIMEOUT,
            };
            tokio::time::timeout(timeout, Box::pin(service.serve(transport))).await
        }
        UpstreamSpec::Url {
            url, bearer: own, ..
        } => {
            install_tls_provider();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = bearer.or_else(|| own.clone()) {
                config = config.auth_header(token);
            }
            let client = default_client().map_err(|err| {
                ErrorData::internal_error(format!("upstream `{label}`: {}", chain(&err)), None)
            })?;
            let client = Posted::new(client, key.clone());
            let transport = StreamableHttpClientTransport::with_client(client, config);
            let transport = Ordered::new(transport, in_flight);
            tokio::time::timeout(UPSTREAM_INIT_TIMEOUT, Box::pin(service.serve(transport))).await
        }
    };
    started
        .map_err(|_| {
            ErrorData::internal_error(
                format!(
                    "upstream `{label}` did not answer initialize within {} s",
                    UPSTREAM_INIT_TIMEOUT.as_secs()
                ),
                None,
            )
        })?
        .map_err(|err| {
            ErrorData::internal_error(
                format!("upstream `{label}` failed to initialize: {}", chain(&err)),
                challenge(&err).map(|(status, header)| upstream_challenge(status, header)),
            )
        })
}

/// The status (401 or 403) and `WWW-Authenticate` challenge of an upstream that refused
/// the proxy's `initialize` for want of authorization. Found by type along the error's
/// sources (the HTTP error around it is generic over rmcp's own HTTP client).
fn challenge(err: &ClientInitializeError) -> Option<(u16, &str)> {
    let ClientInitializeError::TransportError { error, .. } = err else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error.error.as_ref());
    while let Some(err) = cause {
        if let Some(auth) = err.downcast_ref::<AuthRequiredError>() {
            return Some((401, &auth.www_authenticate_header));
        }
        if let Some(scope) = err.downcast_ref::<InsufficientScopeError>() {
            return Some((403, &scope.www_authenticate_header));
        }
        cause = err.source();
    }
    None
}

/// The `--listen` address: an IP address and port on this machine's loopback. Remote
/// clients reach it through a TLS-terminating reverse proxy on the same host.
pub fn listen_address(text: &str) -> anyhow::Result<SocketAddr> {
    let address: SocketAddr = text
        .parse()
        .map_err(|_| anyhow::anyhow!("--listen {text:?}: not IP:PORT (127.0.0.1:8765)"))?;
    anyhow::ensure!(
        address.ip().is_loopback(),
        "--listen {address}: only a loopback address (put a TLS-terminating reverse proxy in front for other hosts)"
    );
    Ok(address)
}

/// A name for a remote server from its URL: the host's main label without `mcp.`/`api.`
/// (`https://mcp.notion.com/mcp` → `notion`); `mcp` for an IP address or `localhost`.
/// Only a hint for detection, as a name guessed from a command is.
pub fn server_name_from_url(url: &str) -> String {
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.domain().map(str::to_owned))
        .unwrap_or_default();
    let labels: Vec<&str> = host.split('.').filter(|l| !l.is_empty()).collect();
    let name = match labels.as_slice() {
        [] | [_] => None,
        [.., main, _tld] => Some(*main),
    };
    name.filter(|n| !matches!(*n, "mcp" | "api" | "www"))
        .map(str::to_owned)
        .unwrap_or_else(|| "mcp".to_owned())
}

/// rmcp's HTTP client uses the process's rustls provider: ring, as reqwest's own.
pub fn install_tls_provider() {
    // Fails only when one is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_credentials_is_refused_and_tokens_are_not_printed() {
        let spec = UpstreamSpec::Url {
            url: "https://user:pw@mcp.example.com/mcp".to_owned(),
            bearer: Some("s3cret".to_owned()),
            oauth: None,
        };
        assert!(spec.validate().is_err());
        assert!(!format!("{spec:?}").contains("s3cret"));
        let spec = UpstreamSpec::Url {
            url: "https://mcp.example.com:8443/mcp?key=1".to_owned(),
            bearer: None,
            oauth: None,
        };
        assert!(spec.validate().is_ok());
        assert_eq!(spec.label(), "https://mcp.example.com:8443");
        assert!(UpstreamSpec::Command(Vec::new()).validate().is_err());
    }
}

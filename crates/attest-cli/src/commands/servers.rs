//! `attest mcp-proxy`, `attest mcp-server`, `attest gateway`: settings in, server out.

use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_core::approvals::Notifier;
use attest_core::setup::{AskMode, DoorParts, Overrides};
use attest_core::Attest;

use crate::cli::{GatewayArgs, McpLoginArgs, McpProxyArgs, ModeArgs, OAuthClientArgs};
use crate::config::Config;
use attest_doors::gateway::tenants::Tenants;
use attest_doors::mcp::oauth_client::{
    self as mcp_oauth_client, Grant, LoginMode, OAuthClientOptions,
};
use attest_doors::mcp::transport::{self as mcp_transport, UpstreamSpec};
use attest_doors::mcp::{proxy as mcp_proxy, server as mcp_server};
use attest_doors::{gateway, WaitNotice};

/// The pipeline a server runs: everything the configuration builds (core's
/// [`attest_core::setup::Settings::build`]), and a notice on stderr for each call that
/// waits for a person.
pub(crate) fn pipeline(config: &Config) -> anyhow::Result<Attest> {
    let wait = match config.ask.value {
        AskMode::Pending => Duration::ZERO,
        AskMode::Block | AskMode::Auto => config.wait.value,
    };
    let notice: Arc<dyn Notifier> = Arc::new(WaitNotice { wait });
    Ok(config.build(DoorParts::session().notifier(notice))?)
}

impl ModeArgs {
    /// The mode flags as core's overrides, on top of `overrides`.
    pub(crate) fn overrides(&self, overrides: Overrides) -> Overrides {
        Overrides {
            ask: Some(self.mode.into()),
            wait: self.timeout.map(Duration::from_secs),
            use_by: self.use_by.map(Duration::from_secs),
            agent: self.agent.clone(),
            actor: self.actor.clone(),
            run: self.run.clone(),
            shadow: self.shadow,
            ..overrides
        }
    }
}

/// One client on stdio: a single-threaded runtime keeps each hop on one thread.
fn stdio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub(crate) fn mcp_proxy(config: &Config, args: McpProxyArgs) -> anyhow::Result<ExitCode> {
    if !args.oauth {
        let client = &args.oauth_client;
        let given = [
            ("--oauth-client-id", client.oauth_client_id.is_some()),
            (
                "--oauth-client-secret-env",
                client.oauth_client_secret_env.is_some(),
            ),
            ("--oauth-client-key", client.oauth_client_key.is_some()),
            (
                "--oauth-client-metadata-url",
                client.oauth_client_metadata_url.is_some(),
            ),
            ("--oauth-scope", !client.oauth_scopes.is_empty()),
            (
                "--oauth-grant",
                client.oauth_grant != Grant::AuthorizationCode,
            ),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            anyhow::bail!("{flag} is for an OAuth upstream: add --oauth (with --url)");
        }
    }
    let upstream = match &args.url {
        Some(url) => UpstreamSpec::Url {
            url: url.clone(),
            bearer: match &args.bearer_env {
                Some(var) => Some(
                    crate::config::env_var(var)
                        .with_context(|| format!("--bearer-env {var}: the variable is not set"))?,
                ),
                None => None,
            },
            oauth: if args.oauth {
                Some(Box::new(oauth_options(
                    url,
                    &args.oauth_client,
                    args.login,
                    0,
                )?))
            } else {
                None
            },
        },
        None => UpstreamSpec::Command(args.command.clone()),
    };
    upstream.validate()?;
    let listen = match &args.listen {
        Some(text) => Some(mcp_transport::listen_address(text)?),
        None => None,
    };
    let attest = pipeline(config)?;
    // Beside the proxy for as long as it serves; dropped, it stops and gives its lease up.
    let _stream = super::stream::beside(config, attest.ledger())?;
    let server_named = args.server.is_some();
    let server = match (args.server, &upstream) {
        (Some(server), _) => server,
        (None, UpstreamSpec::Command(command)) => server_name(command),
        (None, UpstreamSpec::Url { url, .. }) => mcp_transport::server_name_from_url(url),
    };
    let options = mcp_proxy::ProxyOptions {
        server,
        server_named,
        mode: args.serve.mode,
        upstream,
        // A token issued for this proxy as a protected resource, or an agent's own
        // credential, is not the upstream's.
        pass_bearer: args.oauth_issuer.is_none() && config.file.agents.is_none(),
        agent: None,
    };
    if let Some(address) = listen {
        anyhow::ensure!(
            args.oauth_issuer.is_none() || config.file.agents.is_none(),
            "--oauth-issuer and agents: both name the caller from its bearer token; \
             configure the identity provider under agents.jwt instead"
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let agents = agent_auth(config, &attest, &runtime)?;
        let listen = attest_doors::mcp::listen::ListenOptions {
            address,
            origins: args.allow_origin.clone(),
            metrics: crate::secrets::scrape_access(args.metrics_token_file.as_deref())?,
            oauth: args.oauth_issuer.clone().map(|issuer| {
                attest_doors::mcp::listen::OAuthOptions {
                    issuer,
                    jwks: args.oauth_jwks.clone(),
                    resource: args.resource.clone(),
                }
            }),
            agents,
        };
        runtime.block_on(attest_doors::mcp::listen::serve_http(
            attest, options, listen,
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = stdio_runtime()?;
    let options = mcp_proxy::ProxyOptions {
        agent: process_agent(config, &attest, &runtime)?,
        ..options
    };
    let outcome = runtime.block_on(mcp_proxy::serve(attest, options));
    // A read of stdin may still be parked on a blocking thread; do not wait for it.
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// The OAuth client settings of `--url`, from the flags.
fn oauth_options(
    url: &str,
    args: &OAuthClientArgs,
    login: LoginMode,
    redirect_port: u16,
) -> anyhow::Result<OAuthClientOptions> {
    let dir = mcp_oauth_client::token_dir(args.oauth_tokens.as_deref())?;
    let client_secret = match &args.oauth_client_secret_env {
        Some(var) => Some(crate::config::env_var(var).with_context(|| {
            format!("--oauth-client-secret-env {var}: the variable is not set")
        })?),
        None => None,
    };
    if let Some(metadata) = &args.oauth_client_metadata_url {
        let parsed = reqwest::Url::parse(metadata)
            .map_err(|err| anyhow::anyhow!("--oauth-client-metadata-url: not a URL ({err})"))?;
        anyhow::ensure!(
            parsed.scheme() == "https" && parsed.path() != "/",
            "--oauth-client-metadata-url: an https:// URL with a path (the document's own URL)"
        );
    }
    let client_key = match &args.oauth_client_key {
        Some(path) => Some(mcp_oauth_client::ClientKey {
            pem: crate::secrets::read_secret(Some(path), "")?
                .with_context(|| format!("--oauth-client-key {}: empty", path.display()))?,
            algorithm: args
                .oauth_client_key_alg
                .unwrap_or(mcp_oauth_client::KeyAlgorithm::Es256),
        }),
        None => None,
    };
    anyhow::ensure!(
        args.oauth_grant != Grant::ClientCredentials
            || (args.oauth_client_id.is_some()
                && (client_secret.is_some() || client_key.is_some())),
        "--oauth-grant client-credentials: give --oauth-client-id and --oauth-client-secret-env \
         or --oauth-client-key"
    );
    anyhow::ensure!(
        client_key.is_none() || args.oauth_grant == Grant::ClientCredentials,
        "--oauth-client-key is for --oauth-grant client-credentials"
    );
    Ok(OAuthClientOptions {
        url: url.to_owned(),
        token_file: mcp_oauth_client::token_file(&dir, url),
        client_id: args.oauth_client_id.clone(),
        client_secret,
        client_key,
        client_metadata_url: args.oauth_client_metadata_url.clone(),
        scopes: args.oauth_scopes.clone(),
        login,
        grant: args.oauth_grant,
        redirect_port,
    })
}

/// `attest mcp-login URL`.
pub(crate) fn mcp_login(args: &McpLoginArgs) -> anyhow::Result<ExitCode> {
    let spec = UpstreamSpec::Url {
        url: args.url.clone(),
        bearer: None,
        oauth: None,
    };
    spec.validate()?;
    anyhow::ensure!(
        args.login != LoginMode::Never,
        "--login never: nothing to do (sign in with browser or headless)"
    );
    let options = oauth_options(
        &args.url,
        &args.oauth_client,
        args.login,
        args.redirect_port,
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let signed_in = runtime
        .block_on(mcp_oauth_client::login(&options))
        .with_context(|| format!("mcp-login {}", args.url))?;
    let file = options.token_file.display().to_string();
    if args.json {
        println!(
            "{}",
            serde_json::json!({"url": args.url, "token_file": file, "signed_in": signed_in})
        );
    } else if signed_in {
        println!("signed in to {}; token stored in {file}", args.url);
    } else {
        println!(
            "{} needs no OAuth token (it answered without one)",
            args.url
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn mcp_server(config: &Config) -> anyhow::Result<ExitCode> {
    let attest = pipeline(config)?;
    let _stream = super::stream::beside(config, attest.ledger())?;
    let runtime = stdio_runtime()?;
    let agent = process_agent(config, &attest, &runtime)?;
    let outcome = runtime.block_on(mcp_server::serve(attest, agent));
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn gateway(config: &Config, args: &GatewayArgs) -> anyhow::Result<ExitCode> {
    let upstream = match args
        .upstream
        .as_ref()
        .or(config.file.gateway.upstream.as_ref())
    {
        Some(text) => Some(reqwest::Url::parse(text).with_context(|| format!("upstream {text}"))?),
        None => None,
    };
    let allow_upstream = if args.allow_upstream.is_empty() {
        config.file.gateway.allow_upstream.clone()
    } else {
        args.allow_upstream.clone()
    };
    let host: IpAddr = args
        .host
        .parse()
        .with_context(|| format!("--host {}: not an IP address", args.host))?;
    let token = gateway_token(args)?;
    if !host.is_loopback() {
        anyhow::ensure!(
            token.is_some() || config.file.agents.is_some(),
            "--host {host} is beyond this machine: give the gateway a token (--token-file FILE or ATTEST_GATEWAY_TOKEN) that callers send in X-Attest-Token, or configure authenticated agents (agents: in the configuration)"
        );
        eprintln!("attest: warning: the gateway listens on {host}, beyond this machine");
    }
    if token.is_some() && config.file.agents.is_some() {
        eprintln!(
            "attest: note: agents are configured, so each caller's own agent token or JWT in \
             X-Attest-Token replaces the shared gateway token"
        );
    }
    let attest = pipeline(config)?;
    // The default tenant's ledger; other tenants' are streamed by `attest stream run
    // --tenant NAME`.
    let _stream = super::stream::beside(config, attest.ledger())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let agents = agent_auth(config, &attest, &runtime)?;
    let tenants = {
        let base = config.clone();
        let open = move |tenant: &str| {
            pipeline(&Config {
                settings: base.for_tenant(tenant),
            })
        };
        Tenants::new(
            config.tenant().map(str::to_owned),
            args.allow_tenant.clone(),
            Arc::new(open),
        )?
    };
    let options = gateway::GatewayOptions {
        upstream,
        record_reads: args.record_reads,
        max_body: args.max_body,
        upstream_timeout: Duration::from_secs(args.upstream_timeout),
        allow_upstream,
        token,
        agents,
        metrics: crate::secrets::scrape_access(args.metrics_token_file.as_deref())?,
    };
    let state = gateway::GatewayState::with_tenants(attest, tenants, options)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind((host, args.port))
            .await
            .with_context(|| format!("cannot listen on {host}:{}", args.port))?;
        let address = listener.local_addr()?;
        println!("attest gateway listening on http://{address}");
        use std::io::Write;
        std::io::stdout().flush()?;
        gateway::serve(listener, state).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The configured agent authentication (`agents:`), its identity provider's keys
/// fetched: `None` when agents are not configured.
fn agent_auth(
    config: &Config,
    attest: &attest_core::Attest,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<Arc<attest_core::agents::AgentAuth>>> {
    let Some(settings) = &config.file.agents else {
        return Ok(None);
    };
    let auth = runtime.block_on(attest_core::agents::AgentAuth::new(attest, settings))?;
    Ok(Some(Arc::new(auth)))
}

/// For a door on stdio (`mcp-server`, `mcp-proxy` without `--listen`), started by one
/// agent's own client: with agents configured, that agent proves who it is with its token
/// or JWT in `ATTEST_AGENT_TOKEN`, now (a credential that proves nobody, or none unless
/// `unauthenticated: record`, stops the door) and again on every call, so a token revoked
/// or rotated in the store, or a JWT that expired, stops the next call.
fn process_agent(
    config: &Config,
    attest: &attest_core::Attest,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<Arc<attest_core::agents::CallerAgent>>> {
    let Some(agents) = agent_auth(config, attest, runtime)? else {
        return Ok(None);
    };
    use attest_core::agents::AGENT_TOKEN_VAR;
    let credential = crate::secrets::read_secret(None, AGENT_TOKEN_VAR)?;
    let agent =
        attest_core::agents::CallerAgent::new(Arc::unwrap_or_clone(agents), credential, None);
    runtime.block_on(agent.identify()).map_err(|refusal| {
        anyhow::anyhow!(
            "{AGENT_TOKEN_VAR}: {} (agents: is configured)",
            refusal.reason
        )
    })?;
    Ok(Some(Arc::new(agent)))
}

/// The variable that holds the gateway's token (never a command-line flag: `ps` shows those).
const GATEWAY_TOKEN_VAR: &str = "ATTEST_GATEWAY_TOKEN";

/// The gateway's token from `--token-file`, else `ATTEST_GATEWAY_TOKEN`; an empty one is
/// an error, not "no token".
fn gateway_token(args: &GatewayArgs) -> anyhow::Result<Option<gateway::GatewayToken>> {
    let from = args
        .token_file
        .as_ref()
        .map_or_else(|| GATEWAY_TOKEN_VAR.to_owned(), |p| p.display().to_string());
    let given = args.token_file.is_some() || std::env::var_os(GATEWAY_TOKEN_VAR).is_some();
    let text = crate::secrets::read_secret(args.token_file.as_deref(), GATEWAY_TOKEN_VAR)?;
    match text {
        Some(text) => gateway::GatewayToken::new(&text)
            .map(Some)
            .with_context(|| format!("{from}: the gateway token is empty")),
        None if given => anyhow::bail!("{from}: the gateway token is empty"),
        None => Ok(None),
    }
}

/// A server's name from its command: `@scope/server-NAME`, `mcp-server-NAME`,
/// `NAME-mcp(-server)`, else the program's file name.
fn server_name(command: &[String]) -> String {
    for word in command.iter().rev() {
        let base = word.rsplit('/').next().unwrap_or(word);
        let base = base.split('@').next().unwrap_or(base);
        let base = base
            .strip_suffix(".js")
            .or_else(|| base.strip_suffix(".py"))
            .unwrap_or(base);
        for prefix in ["mcp-server-", "server-"] {
            if let Some(name) = base.strip_prefix(prefix).filter(|n| !n.is_empty()) {
                return name.to_owned();
            }
        }
        for suffix in ["-mcp-server", "-mcp"] {
            if let Some(name) = base.strip_suffix(suffix).filter(|n| !n.is_empty()) {
                return name.to_owned();
            }
        }
    }
    command
        .first()
        .map(|program| program.rsplit('/').next().unwrap_or(program).to_owned())
        .unwrap_or_else(|| "mcp".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_commands() {
        let name =
            |cmd: &[&str]| server_name(&cmd.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            name(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/tmp"
            ]),
            "filesystem"
        );
        assert_eq!(name(&["uvx", "mcp-server-git"]), "git");
        assert_eq!(name(&["node", "/x/github-mcp-server"]), "github");
        assert_eq!(name(&["/usr/bin/python3", "notes.py"]), "python3");
        assert_eq!(name(&["npx", "@scope/server-slack@1.2.0"]), "slack");
    }
}

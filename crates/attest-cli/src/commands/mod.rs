//! One module per command; each returns the exit code its outcome means.

mod anchor;
mod approvals;
mod bundle;
mod checkpoint;
mod config;
mod copy;
mod demo;
mod detect;
mod erase;
mod eu_ai_act;
mod export;
mod grants;
mod hook;
mod import;
mod intents;
mod keys;
mod ledger;
mod monitor;
pub(crate) mod policy;
mod prove;
mod prune;
mod publish;
mod recipes;
mod release;
mod sandbox;
mod servers;
mod stream;
pub(crate) mod tiles;
mod verify;
mod witness;

use std::process::ExitCode;
use std::time::Duration;

use attest_core::setup::{AskMode, Overrides};

use crate::cli::{Cli, Command};
use crate::config::Config;

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        // Need no ledger, policy or configuration.
        Command::Completions(args) => return release::completions(args.shell),
        Command::Man => return release::man(),
        Command::VerifySums(args) => return release::verify_sums(args),
        _ => {}
    }
    if let Command::Recipes(command) = &cli.command {
        // Needs no ledger settings.
        return recipes::run(&cli.global, command);
    }
    if let Command::Config(command) = &cli.command {
        // Reports a file that does not load instead of failing on it.
        return config::run(&cli.global, command);
    }
    if let Command::McpLogin(args) = &cli.command {
        // Needs no ledger or policy: it only signs in and stores a token.
        return servers::mcp_login(args);
    }
    if let Command::Sandbox(args) = &cli.command {
        // Before anything starts a thread: a new user namespace needs a process with one.
        return sandbox::run(&cli.global, args);
    }
    if let Command::Hook(command) = &cli.command {
        // Loads its settings in the agent's project directory, and answers a file that
        // does not load with the agent's deny instead of failing.
        return hook::run(&cli.global, command);
    }
    // Pipeline spans feed the metrics histograms of the processes that serve metrics
    // (serve, gateway, mcp-proxy --listen), and OTLP traces when configured.
    let serves_metrics = match &cli.command {
        Command::Serve(_) | Command::Gateway(_) => true,
        Command::McpProxy(args) => args.listen.is_some(),
        _ => false,
    };
    let _telemetry = crate::review::telemetry::init(serves_metrics);
    let config = Config::resolve(&overrides(&cli))?;
    match cli.command {
        Command::Demo => demo::run(&config),
        Command::Ledger(args) => ledger::run(&config, &args),
        Command::Verify(args) => verify::run(&config, &args),
        Command::Export(args) => export::run(&config, &args),
        Command::Copy(args) => copy::run(&config, &args),
        Command::Keygen(args) => keys::keygen(&config, &args),
        Command::Key(command) => keys::key(&config, &command),
        Command::Checkpoint(args) => checkpoint::run(&config, &args),
        Command::Anchor(args) => anchor::run(&config, &args),
        Command::Publish(args) => publish::run(&config, &args),
        Command::Monitor(args) => monitor::run(&config, &args),
        Command::Witness(args) => witness::run(&args),
        Command::Prove(args) => prove::prove(&config, &args),
        Command::VerifyProof(args) => prove::verify_proof(&args),
        Command::VerifyBundle(args) => bundle::verify(&args),
        Command::Detect(args) => detect::run(&config, &args),
        Command::Import(args) => import::run(&config, &args),
        Command::Policy(command) => policy::run(&config, &command),
        Command::Prune(args) => prune::run(&config, &args),
        Command::Erase(args) => erase::run(&config, &args),
        Command::Recipes(command) => recipes::run(&cli.global, &command),
        Command::Config(command) => config::run(&cli.global, &command),
        // approvals (issue 7)
        Command::Pending(args) => approvals::pending(&config, &args),
        Command::Confirm(args) => approvals::confirm(&config, &args),
        Command::Approvers(command) => approvals::approvers(&config, &command),
        Command::Agents(command) => approvals::agents(&config, &command),
        Command::Grants(command) => grants::run(&config, &command),
        Command::Intents(args) => intents::run(&config, &args),
        Command::Serve(args) => approvals::serve(&config, &args),
        // servers (issue 8)
        Command::McpProxy(args) => servers::mcp_proxy(&config, *args),
        Command::McpServer(_) => servers::mcp_server(&config),
        Command::McpLogin(args) => servers::mcp_login(&args),
        Command::Gateway(args) => servers::gateway(&config, &args),
        Command::Stream(command) => stream::run(&config, &command),
        Command::Hook(command) => hook::run(&cli.global, &command),
        Command::Sandbox(args) => sandbox::run(&cli.global, &args),
        // review (issue 17)
        Command::Digest(args) => crate::review::digest_command(&config, &args),
        Command::Completions(args) => release::completions(args.shell),
        Command::Man => release::man(),
        Command::VerifySums(args) => release::verify_sums(&args),
    }
}

/// The command line as core's overrides: the global flags, and the flags of the doors
/// that build a pipeline (one translation, so each door's flags mean what they say).
fn overrides(cli: &Cli) -> Overrides {
    let global = cli.global.overrides();
    match &cli.command {
        Command::McpProxy(args) => args.serve.overrides(global),
        Command::Gateway(args) => Overrides {
            openapi: args.openapi.iter().cloned().collect(),
            ..args.serve.overrides(global)
        },
        // The MCP server's asks are held at once (`attest_ask`): an agent asks and comes
        // back for the answer, then makes the call itself.
        Command::McpServer(args) => Overrides {
            agent: args.agent.clone(),
            actor: args.actor.clone(),
            ask: Some(AskMode::Pending),
            wait: Some(Duration::ZERO),
            shadow: args.shadow,
            ..global
        },
        _ => global,
    }
}

/// `1 entry`, `2 entries`.
pub(crate) fn entries(count: u64) -> String {
    if count == 1 {
        "1 entry".to_owned()
    } else {
        format!("{count} entries")
    }
}

/// Cuts a hex hash to its first 12 digits for tables.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

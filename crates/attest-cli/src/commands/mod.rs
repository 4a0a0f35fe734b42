//! One module per command; each returns the exit code its outcome means.

mod checkpoint;
mod demo;
mod detect;
mod export;
mod keys;
mod ledger;
mod policy;
mod prove;
mod prune;
mod servers;
mod verify;

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::config::Config;

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = Config::from_global(&cli.global)?;
    match cli.command {
        Command::Demo => demo::run(&config),
        Command::Ledger(args) => ledger::run(&config, &args),
        Command::Verify(args) => verify::run(&config, &args),
        Command::Export(args) => export::run(&config, &args),
        Command::Keygen(args) => keys::keygen(&config, &args),
        Command::Key(command) => keys::key(&config, &command),
        Command::Checkpoint(args) => checkpoint::run(&config, &args),
        Command::Anchor(args) => checkpoint::anchor(&config, &args),
        Command::Prove(args) => prove::prove(&config, &args),
        Command::VerifyProof(args) => prove::verify_proof(&args),
        Command::Detect(args) => detect::run(&args),
        Command::Policy(command) => policy::run(&config, &command),
        Command::Prune(args) => prune::run(&config, &args),
        Command::McpProxy(args) => servers::mcp_proxy(&config, args),
        Command::McpServer(args) => servers::mcp_server(&config, &args),
        Command::Gateway(args) => servers::gateway(&config, &args),
    }
}

/// Cuts a hex hash to its first 12 digits for tables.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

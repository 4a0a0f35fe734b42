//! One module per command; each returns the exit code its outcome means.

mod demo;
mod export;
mod ledger;
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
    }
}

/// Cuts a hex hash to its first 12 digits for tables.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

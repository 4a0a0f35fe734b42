//! `attest`: the command-line face of Attest. Parses arguments, calls into
//! `attest-core`, and maps outcomes to exit codes:
//!
//! - 0: done (for `verify`: the ledger is intact);
//! - 1: the answer is "no" (verification failed, an action was not allowed);
//! - 2: usage or I/O error (bad arguments, unreadable ledger).
//!
//! A closed stdout (`attest ledger | head`) is not an error.

mod cli;
mod cli_tiles;
mod commands;
mod config;
mod progress;
mod review;
mod secrets;

use std::process::ExitCode;

// The doors name these for the binary too: one escape for what reaches a terminal, one
// way of counting in prose.
use attest_doors::{count, terminal};

/// `attest --version`: the workspace version and the commit it was built from (see build.rs).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ATTEST_COMMIT"),
    ")"
);

fn main() -> ExitCode {
    let cli = cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("attest: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

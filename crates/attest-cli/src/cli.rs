//! The command line, as clap structs. Nothing here decides anything.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Attest: the layer between an AI agent and the tools it calls. Every call is
/// decided by policy, run, verified, and recorded in a hash-chained ledger that
/// anyone can check.
#[derive(Debug, Parser)]
#[command(name = "attest", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// The ledger file (SQLite).
    #[arg(
        long,
        global = true,
        env = "ATTEST_LEDGER",
        default_value = ".attest/ledger.sqlite"
    )]
    pub(crate) ledger: PathBuf,
    /// How hard appends work to survive a crash: full (survives power loss), normal, off.
    #[arg(long, global = true, env = "ATTEST_DURABILITY", default_value = "full")]
    pub(crate) durability: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a scripted agent session on the embedded defaults and show the ledger it leaves.
    ///
    /// Four actions: a read that acts, an update that acts, an external email that asks
    /// and is approved by a stand-in approver, and a payment that asks and is rejected.
    /// The tools are simulated; the ledger rows are real. The demo appends to the ledger
    /// it is pointed at and never deletes one.
    Demo,
    /// List the newest ledger rows.
    Ledger(LedgerArgs),
    /// Check the whole ledger: seq order, the hash chain, every body and column.
    ///
    /// Exit 0: intact. Exit 1: broken (the first bad seq is named). Exit 2: could not run.
    Verify(VerifyArgs),
    /// Write every entry out.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub(crate) struct LedgerArgs {
    /// How many rows, newest first.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Print JSON (one array of rows) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// Print `{"ok","checked","broken_at","problems":[…]}` instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// `jsonl`: one stored canonical body per line, exactly the bytes that were hashed.
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub(crate) format: ExportFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ExportFormat {
    /// One canonical entry per line.
    Jsonl,
}

//! Turns the command line and environment into validated settings, once.

use std::path::{Path, PathBuf};

use anyhow::Context;
use attest_ledger::{Durability, Ledger, LedgerOptions};

use crate::cli::Global;

/// Settings every command shares, validated.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) ledger_path: PathBuf,
    pub(crate) durability: Durability,
}

impl Config {
    pub(crate) fn from_global(global: &Global) -> anyhow::Result<Config> {
        let durability = global
            .durability
            .parse()
            .context("bad --durability (or ATTEST_DURABILITY)")?;
        Ok(Config {
            ledger_path: global.ledger.clone(),
            durability,
        })
    }

    /// Opens the ledger, creating it (and its directory) if `create`.
    pub(crate) fn open_ledger(&self, create: bool) -> anyhow::Result<Ledger> {
        let options = LedgerOptions {
            durability: self.durability,
            create,
            ..LedgerOptions::default()
        };
        Ledger::open(&self.ledger_path, options)
            .with_context(|| format!("cannot open ledger {}", display(&self.ledger_path)))
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

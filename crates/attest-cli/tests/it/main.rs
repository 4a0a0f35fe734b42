//! Integration tests for the `attest` binary: the real executable, in a temporary
//! directory, with a scrubbed environment.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod bad_input;
mod demo;
mod evidence;
mod export;
mod gateway;
mod import;
mod inbox_browser;
mod mcp;
mod policy;
mod recipes;
mod tamper;

use std::path::Path;
use std::process::{Command, Output};

/// `attest` with `args`, run in `dir` with no inherited environment.
pub(crate) fn attest(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .output()
        .unwrap()
}

/// Standard output as text.
pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Standard error as text.
pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A temporary directory holding a ledger that one demo run wrote.
pub(crate) fn demo_ledger() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["demo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    dir
}

/// The default ledger file inside `dir`.
pub(crate) fn ledger_file(dir: &Path) -> std::path::PathBuf {
    dir.join(".attest/ledger.sqlite")
}

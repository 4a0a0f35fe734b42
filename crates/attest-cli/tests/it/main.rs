//! Integration tests for the `attest` binary: the real executable, in a temporary
//! directory, with a scrubbed environment.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod alerts;
pub(crate) mod approvals;
mod bad_input;
mod config;
mod dashboard_browser;
mod demo;
pub(crate) mod digest;
mod evidence;
mod export;
mod fail_closed;
mod gateway;
mod hook;
mod import;
mod inbox_browser;
pub(crate) mod mcp;
mod mcp_frames;
mod mcp_remote;
pub(crate) mod notify;
mod ocsf;
mod policy;
mod postgres;
mod readme;
mod recipes;
pub(crate) mod review;
mod surfaces;
mod tamper;
mod tiles;
mod verify_claims;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// `attest` with `args`, run in `dir` with no inherited environment.
pub(crate) fn attest(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .output()
        .unwrap()
}

/// Reports a test peer that is missing (a Debian package, an npm MCP server, a Python
/// module). On a developer's machine the test says so and skips; `.ci/run` sets
/// `ATTEST_REQUIRE_PEERS`, because it installs every peer, so there a missing one fails.
pub(crate) fn peer_missing(reason: &str) {
    assert!(
        std::env::var_os("ATTEST_REQUIRE_PEERS").is_none(),
        "{reason} (ATTEST_REQUIRE_PEERS is set, and .ci/run installs every peer)"
    );
    eprintln!("SKIPPED: {reason}");
}

/// The Python interpreter for the client tests: `.ci/run`'s virtualenv when it exists
/// (Debian's system Python refuses `pip install`), else `python3` from `PATH`.
pub(crate) fn python() -> std::path::PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// Every entry of `dir`'s `ledger.sqlite`, in ledger order, from `attest export`.
pub(crate) fn exported_entries(dir: &Path) -> Vec<serde_json::Value> {
    let output = attest(dir, &["--ledger", "ledger.sqlite", "export"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The entries of `dir`'s `ledger.sqlite` that record how an action ended: every row
/// but the intents written before each write ran.
pub(crate) fn outcome_entries(dir: &Path) -> Vec<serde_json::Value> {
    exported_entries(dir)
        .into_iter()
        .filter(|entry| entry["execution"]["status"] != "intent")
        .collect()
}

/// Standard output as text, after checking the command exited 0 (else both streams are
/// shown).
pub(crate) fn expect_ok(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(output),
        stderr(output)
    );
    stdout(output)
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

/// A child process (a server the test started), killed when dropped.
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` with its standard output piped; returns it running, with the first
/// line it printed (a server's address).
pub(crate) fn start_first_line(command: &mut Command) -> (Running, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (Running(child), line.trim().to_owned())
}

/// A free port on 127.0.0.1 (bound, then released for a server to take).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A PostgreSQL database of its own for one test (dropped at the end), or `None` with
/// a note when no server answers and peers are not required.
pub(crate) struct PgDb {
    /// `postgres://postgres@127.0.0.1:5432/NAME`.
    pub(crate) url: String,
    admin: String,
    name: String,
}

impl PgDb {
    /// The same database through another connection string (as a second host has).
    pub(crate) fn other_url(&self) -> String {
        self.url.replacen("127.0.0.1", "localhost", 1)
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = ::postgres::Client::connect(&self.admin, ::postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

pub(crate) fn pg_db(test: &str) -> Option<PgDb> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let server = std::env::var("ATTEST_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let admin = format!("{server}/test");
    let mut client = match ::postgres::Client::connect(&admin, ::postgres::NoTls) {
        Ok(client) => client,
        Err(err) => {
            peer_missing(&format!("{test}: no PostgreSQL at {server} ({err})"));
            return None;
        }
    };
    let name = format!(
        "attest_cli_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .unwrap();
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    Some(PgDb {
        url: format!("{server}/{name}"),
        admin,
        name,
    })
}

//! Integration tests for the `attest` binary: the real executable, in a temporary
//! directory, with a scrubbed environment.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent_runs;
mod alerts;
pub(crate) mod approvals;
mod bad_input;
mod budgets;
mod bundle;
mod config;
mod dashboard_browser;
mod demo;
mod differential;
pub(crate) mod digest;
pub(crate) mod doors;
mod erase;
mod evidence;
mod export;
mod fail_closed;
pub(crate) mod gateway;
mod grants;
mod held_probes;
mod history;
pub(crate) mod hook;
pub(crate) mod hook_agents;
mod hook_approvals;
mod hook_doctor;
mod hook_install;
mod hook_protected;
mod hook_rows;
mod idempotency;
pub(crate) mod identity;
mod import;
mod inbox_browser;
mod intents;
mod jwt_checks;
pub(crate) mod mcp;
pub(crate) mod mcp_conformance;
pub(crate) mod mcp_frames;
pub(crate) mod mcp_http;
pub(crate) mod mcp_oauth;
pub(crate) mod mcp_remote;
mod mcp_streams;
mod metrics_doors;
pub(crate) mod notify;
mod ocsf;
mod pkcs11;
mod policy;
mod postgres;
mod principals;
mod quorum;
mod readme;
pub(crate) mod real_agents;
mod real_claude;
mod real_codex;
mod real_copilot;
mod real_gemini;
mod recipes;
mod replay;
pub(crate) mod review;
mod sandbox;
pub(crate) mod security;
mod shadow;
mod skips;
mod stream;
mod surfaces;
mod tamper;
mod tiles;
pub(crate) mod unreadable;
mod verify_claims;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// `attest` with `args`, run in `dir` with no inherited environment (`--ledger
/// ledger.sqlite` is [`test_ledger`]).
pub(crate) fn attest(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(store_args(dir, args))
        .current_dir(dir)
        .env_clear()
        .output()
        .unwrap()
}

#[path = "../../../attest-ledger/tests/it/peers.rs"]
mod peers;
pub(crate) use peers::{peer_missing, peer_missing_because};

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

/// The switch that runs the ledger-touching tests on PostgreSQL: `ATTEST_TEST_STORE=postgres`
/// (`.ci/run` runs those modules a second time with it).
pub(crate) fn on_postgres() -> bool {
    std::env::var("ATTEST_TEST_STORE").is_ok_and(|store| store == "postgres")
}

/// The ledger a test in `dir` means by `ledger.sqlite`: that file, or under
/// [`on_postgres`] a database of its own on the test server, the same one for every
/// command the test runs in `dir` (kept to the end of the run; `.ci/run` drops them).
pub(crate) fn test_ledger(dir: &Path) -> String {
    static DATABASES: std::sync::Mutex<Vec<(std::path::PathBuf, PgDb)>> =
        std::sync::Mutex::new(Vec::new());
    if !on_postgres() {
        return "ledger.sqlite".to_owned();
    }
    let mut databases = DATABASES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, db)) = databases.iter().find(|(d, _)| d == dir) {
        return db.url.clone();
    }
    let db = pg_db_named("ATTEST_TEST_STORE=postgres", "attest_store")
        .expect("ATTEST_TEST_STORE=postgres needs the test server");
    let url = db.url.clone();
    databases.push((dir.to_path_buf(), db));
    url
}

/// [`test_ledger`] for a command run elsewhere: the file's absolute path, or the URL.
pub(crate) fn test_ledger_at(dir: &Path) -> String {
    match on_postgres() {
        true => test_ledger(dir),
        false => dir.join("ledger.sqlite").display().to_string(),
    }
}

/// `args` with `--ledger ledger.sqlite` made [`test_ledger`]'s location.
pub(crate) fn store_args(dir: &Path, args: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
    for i in 1..out.len() {
        if out[i] == "ledger.sqlite" && out[i - 1] == "--ledger" {
            out[i] = test_ledger(dir);
        }
    }
    out
}

/// Under [`on_postgres`], skips a test that is SQLite's by nature (it reads or alters
/// the file itself), saying so; returns whether it skipped.
pub(crate) fn sqlite_only(test: &str, why: &str) -> bool {
    if on_postgres() {
        eprintln!("SKIPPED on PostgreSQL: {test}: {why}");
    }
    on_postgres()
}

/// A free port on 127.0.0.1 (bound, then released for a server to take).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[path = "../../../attest-ledger/tests/it/pg_db.rs"]
mod pg_db;
pub(crate) use pg_db::{pg_db, pg_db_named, PgDb};

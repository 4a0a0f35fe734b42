//! Integration tests for attest-ledger: real SQLite files, real threads and processes.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod chain;
mod concurrency;
mod crash;
mod fuzz;
mod pg_restart;
mod postgres;
mod tamper;
mod tiles;
mod tree;
mod upgrade;

use attest_ledger::{Execution, Ledger, LedgerOptions, Record, Verification};

/// A realistic record; `n` varies the fields so bodies differ.
pub(crate) fn sample_record(n: u64) -> Record {
    Record {
        action_id: format!("action-{n}"),
        run_id: Some("run-1".into()),
        agent: Some(format!("agent-{}", n % 3)),
        actor: Some("alice@acme.com".into()),
        call: None,
        owner: None,
        system: if n % 2 == 0 { "gmail" } else { "stripe" }.into(),
        verb: if n % 2 == 0 { "send" } else { "pay" }.into(),
        target: Some(format!("target-{n}")),
        target_class: "external".into(),
        source: "manual".into(),
        decision: "act".into(),
        tier: "high".into(),
        reasons: vec!["high risk".into()],
        rules_fired: vec!["R4".into()],
        params_hash: "ab".repeat(32),
        params_preview: serde_json::Map::new(),
        result_ids: Vec::new(),
        confirm: None,
        execution: Execution {
            status: "ok".into(),
            result_hash: Some("cd".repeat(32)),
            error_hash: None,
        },
        verification: Some(Verification {
            level: "acknowledged".into(),
            method: "ack".into(),
            matched: None,
            evidence: serde_json::Map::new(),
        }),
        imported: None,
    }
}

/// A ledger in a fresh temporary directory, with `rows` records appended.
pub(crate) fn ledger_with(rows: u64) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default()).unwrap();
    let records: Vec<Record> = (1..=rows).map(sample_record).collect();
    ledger.append_batch(&records).unwrap();
    (dir, ledger)
}

/// A PostgreSQL database of its own for one test, dropped at the end.
pub(crate) struct PgDb {
    /// `postgres://…/NAME`.
    pub(crate) url: String,
    admin: String,
    name: String,
}

impl PgDb {
    /// The same database through another connection string (a second "host").
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

/// The server tests run against: `ATTEST_TEST_PG`, else 127.0.0.1:5432 with trust auth.
pub(crate) fn pg_server() -> String {
    std::env::var("ATTEST_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// A fresh database, or `None` (with a note) when no server answers and
/// `ATTEST_REQUIRE_PEERS` is unset; with it set, a missing server fails the test.
pub(crate) fn pg_db(test: &str) -> Option<PgDb> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let server = pg_server();
    let admin = format!("{server}/test");
    let mut client = match ::postgres::Client::connect(&admin, ::postgres::NoTls) {
        Ok(client) => client,
        Err(err) if std::env::var_os("ATTEST_REQUIRE_PEERS").is_some() => {
            panic!("{test}: PostgreSQL is required (ATTEST_REQUIRE_PEERS) but {server} does not answer: {err}")
        }
        Err(err) => {
            eprintln!("skipped {test}: no PostgreSQL at {server} ({err}); set ATTEST_REQUIRE_PEERS=1 to fail instead");
            return None;
        }
    };
    let name = format!(
        "attest_t_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    Some(PgDb {
        url: format!("{server}/{name}"),
        admin,
        name,
    })
}

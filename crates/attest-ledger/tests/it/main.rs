//! Integration tests for attest-ledger: real SQLite files, real threads and processes.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod both;
mod calls;
mod chain;
mod concurrency;
mod crash;
mod filing;
mod fuzz;
mod idempotency;
mod intents;
mod peers;
mod pg_db;
mod pg_restart;
mod pg_runtime;
mod postgres;
mod stream;
mod tamper;
mod tiles;
mod tree;
mod upgrade;
mod windows;

use attest_ledger::{Execution, Ledger, LedgerOptions, Record, Verification};

/// A clock tests move by hand: seconds since the epoch.
pub(crate) struct ManualClock(pub(crate) std::sync::atomic::AtomicU64);

impl attest_ledger::Clock for ManualClock {
    fn now(&self) -> std::time::SystemTime {
        std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// A realistic record; `n` varies the fields so bodies differ.
pub(crate) fn sample_record(n: u64) -> Record {
    Record {
        action_id: format!("action-{n}"),
        run_id: Some("run-1".into()),
        agent: Some(format!("agent-{}", n % 3)),
        agent_auth: None,
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
        idempotency_key: None,
        replay_of: None,
        imported: None,
        shadow: None,
        grant: None,
        sealed: None,
        erasure: None,
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

pub(crate) use pg_db::{pg_db, pg_server};

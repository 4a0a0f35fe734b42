//! The crash table's cells ([`super`]), each on both stores: a store that fails one
//! step of one append where it is told to, over a real store, under the one append
//! algorithm ([`crate::group`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../tests/it/pg_db.rs"]
mod pg_db;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{Build, Cut, Extended, Read, Sign, Store};
use crate::calls::Riding;
use crate::chain::Built;
use crate::erasure::Forget;
use crate::query::{Counts, Filter};
use crate::source::Source;
use crate::{
    Execution, Ledger, LedgerError, LedgerOptions, Record, RowSummary, StoredCheckpoint, StoredRow,
    SystemClock,
};

/// Where the next append fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Reading the edge fails: nothing is built or written.
    EdgeRead,
    /// Inserting the built rows fails: the transaction rolls back.
    Insert,
    /// The commit fails and did not hold.
    Commit,
    /// The commit held but its acknowledgement was lost.
    CommitPersisted,
}

/// A store that fails the next append once, at `fault`.
struct Faulty {
    inner: Box<dyn Store>,
    fault: Fault,
    armed: Arc<AtomicBool>,
}

fn injected(step: &'static str) -> LedgerError {
    LedgerError::Internal(step)
}

impl Store for Faulty {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn extend(
        &self,
        records: &[Record],
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
        fresh: bool,
        build: &mut Build<'_>,
    ) -> Extended {
        if !self.armed.swap(false, Ordering::SeqCst) {
            return self.inner.extend(records, calls, forget, fresh, build);
        }
        match self.fault {
            Fault::EdgeRead => Extended::Failed(injected("injected: reading the edge failed")),
            Fault::Insert | Fault::Commit => {
                // The rows are built on the store's real edge, then the write fails
                // before anything reaches the store.
                let mut built: Option<Built> = None;
                let outcome = self
                    .inner
                    .extend(records, calls, forget, fresh, &mut |edge| {
                        built = Some(build(edge)?);
                        Err(injected("injected: the insert failed"))
                    });
                assert!(matches!(outcome, Extended::Failed(_)), "{outcome:?}");
                let built = built.expect("the rows were built").appended();
                if self.fault == Fault::Insert {
                    Extended::Failed(injected("injected: the insert failed"))
                } else {
                    Extended::Unknown {
                        built,
                        error: injected("injected: the commit failed"),
                    }
                }
            }
            Fault::CommitPersisted => match self.inner.extend(records, calls, forget, fresh, build)
            {
                Extended::Committed(built) => Extended::Unknown {
                    built,
                    error: injected("injected: the commit's acknowledgement was lost"),
                },
                other => other,
            },
        }
    }

    fn late_commits(&self) -> bool {
        self.inner.late_commits()
    }

    fn attempts(&self) -> u32 {
        self.inner.attempts()
    }

    fn recover(&self, _attempt: u32) -> Result<(), LedgerError> {
        // Nothing broke for real: no connection to wait for.
        Ok(())
    }

    fn save_checkpoint(
        &self,
        sign: &mut Sign<'_>,
    ) -> Result<(StoredCheckpoint, bool), LedgerError> {
        self.inner.save_checkpoint(sign)
    }

    fn prune(&self, cut: &mut Cut<'_>) -> Result<Option<u64>, LedgerError> {
        self.inner.prune(cut)
    }

    fn read(&self, read: &mut Read<'_>) -> Result<(), LedgerError> {
        self.inner.read(read)
    }

    fn list(&self, filter: &Filter, limit: usize) -> Result<Vec<RowSummary>, LedgerError> {
        self.inner.list(filter, limit)
    }

    fn rows_at(
        &self,
        seqs: &[u64],
        visit: &mut dyn FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        self.inner.rows_at(seqs, visit)
    }

    fn counts(&self) -> Result<Counts, LedgerError> {
        self.inner.counts()
    }

    fn windows(
        &self,
        now_ms: i64,
        action_id: &str,
        claims: &[crate::windows::StoredClaim],
        settle: Option<&mut crate::windows::Settle<'_>>,
    ) -> Result<Vec<crate::windows::Figure>, LedgerError> {
        self.inner.windows(now_ms, action_id, claims, settle)
    }

    fn release_windows(&self, action_id: &str, keys: &[[u8; 32]]) -> Result<(), LedgerError> {
        self.inner.release_windows(action_id, keys)
    }

    fn claim_key(
        &self,
        now_ms: i64,
        claim: &crate::idempotency::StoredKey<'_>,
    ) -> Result<crate::idempotency::KeyState, LedgerError> {
        self.inner.claim_key(now_ms, claim)
    }

    fn change_key(
        &self,
        key: Option<&[u8; 32]>,
        action_id: &str,
        change: crate::idempotency::KeyChange<'_>,
    ) -> Result<(), LedgerError> {
        self.inner.change_key(key, action_id, change)
    }

    fn purge_keys(&self, now_ms: i64) -> Result<crate::idempotency::KeysPurged, LedgerError> {
        self.inner.purge_keys(now_ms)
    }

    fn key_secret(&self, fresh: &str) -> Result<String, LedgerError> {
        self.inner.key_secret(fresh)
    }

    fn subject_key(
        &self,
        index: &[u8; 32],
        fresh: Option<&[u8; 32]>,
    ) -> Result<Option<[u8; 32]>, LedgerError> {
        self.inner.subject_key(index, fresh)
    }

    fn subject_keys(&self) -> Result<Vec<crate::erasure::KeptKey>, LedgerError> {
        self.inner.subject_keys()
    }

    fn calls(
        &self,
        digest: [u8; 32],
        settle: Option<&mut crate::calls::SettleCall<'_>>,
    ) -> Result<Option<crate::calls::StoredCall>, LedgerError> {
        self.inner.calls(digest, settle)
    }

    fn forget_calls(&self, action_id: &str) -> Result<u64, LedgerError> {
        self.inner.forget_calls(action_id)
    }

    fn copy_in(&self, source: &dyn Source) -> Result<u64, LedgerError> {
        self.inner.copy_in(source)
    }

    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.inner.meta(key)
    }

    fn swap_meta(&self, key: &str, old: Option<&str>, new: &str) -> Result<bool, LedgerError> {
        self.inner.swap_meta(key, old, new)
    }
}

fn record(n: u64) -> Record {
    Record {
        action_id: format!("fault-{n}"),
        run_id: Some("run-faults".into()),
        agent: Some("bot".into()),
        agent_auth: None,
        actor: None,
        call: None,
        owner: None,
        system: "gmail".into(),
        verb: "send".into(),
        target: None,
        target_class: "none".into(),
        source: "manual".into(),
        decision: "act".into(),
        tier: "high".into(),
        reasons: vec![],
        rules_fired: vec![],
        params_hash: "00".repeat(32),
        params_preview: Default::default(),
        result_ids: vec![],
        confirm: None,
        execution: Execution {
            status: "ok".into(),
            result_hash: None,
            error_hash: None,
        },
        verification: None,
        idempotency_key: None,
        replay_of: None,
        imported: None,
        shadow: None,
        grant: None,
        sealed: None,
        erasure: None,
    }
}

/// Where a cell runs: a SQLite file, or a PostgreSQL database of its own.
enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(pg_db::PgDb),
}

impl Place {
    fn location(&self) -> String {
        match self {
            Place::Sqlite(dir) => dir.path().join("ledger.sqlite").display().to_string(),
            Place::Postgres(db) => db.url.clone(),
        }
    }

    fn store(&self) -> Box<dyn Store> {
        let location = self.location();
        match self {
            Place::Sqlite(_) => Box::new(
                crate::sqlite::SqliteStore::open(Path::new(&location), &LedgerOptions::default())
                    .unwrap(),
            ),
            Place::Postgres(_) => Box::new(
                crate::pg::PgStore::open(&location, None, crate::Durability::Full, false).unwrap(),
            ),
        }
    }
}

/// The places a cell runs in: SQLite always, PostgreSQL when a server answers (with
/// `ATTEST_REQUIRE_PEERS=1`, a missing server fails the test; otherwise it says
/// `SKIPPED`).
fn places(test: &str) -> Vec<Place> {
    let mut places = vec![Place::Sqlite(tempfile::tempdir().unwrap())];
    if let Some(db) = pg_db::pg_db(test) {
        places.push(Place::Postgres(db));
    }
    places
}

/// Appends 3 rows, arms `fault`, appends 2 more in one batch, and checks what the
/// crash table says: `lands` (the batch's rows are in, once each) or not, then that
/// the next append continues the chain and the ledger verifies.
fn cell(test: &str, fault: Fault, lands: bool) {
    for place in places(test) {
        let armed = Arc::new(AtomicBool::new(false));
        let store = Faulty {
            inner: place.store(),
            fault,
            armed: armed.clone(),
        };
        let ledger = Ledger::over(Box::new(store), Arc::new(SystemClock));
        ledger
            .append_batch(&[record(1), record(2), record(3)])
            .unwrap();
        armed.store(true, Ordering::SeqCst);
        let batch = ledger.append_batch(&[record(4), record(5)]);
        let where_ = place.location();
        match (lands, &batch) {
            (true, Ok(appended)) => {
                assert_eq!(
                    appended.iter().map(|a| a.seq).collect::<Vec<_>>(),
                    [4, 5],
                    "{where_}"
                );
            }
            (false, Err(_)) => {}
            _ => panic!("{where_}: {fault:?}: {batch:?}"),
        }
        let expected = if lands { 5 } else { 3 };
        assert_eq!(ledger.tip().unwrap().unwrap().0, expected, "{where_}");
        // Each record once: none was written twice.
        let mut ids = Vec::new();
        ledger
            .for_each_row(1, |row| {
                let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
                ids.push(body["action_id"].as_str().unwrap().to_owned());
                Ok(true)
            })
            .unwrap();
        let want: Vec<String> = (1..=expected).map(|n| format!("fault-{n}")).collect();
        assert_eq!(ids, want, "{where_}");
        let next = ledger.append(&record(9)).unwrap();
        assert_eq!(next.seq, expected + 1, "{where_}");
        assert!(ledger.verify().unwrap().is_intact(), "{where_}");
    }
}

#[test]
fn edge_read_failed_writes_nothing_and_says_so() {
    cell(
        "edge_read_failed_writes_nothing_and_says_so",
        Fault::EdgeRead,
        false,
    );
}

#[test]
fn edge_read_failed_but_persisted_is_the_same_as_failed() {
    // A read persists nothing: the same cell, kept so the table has a test for it.
    cell(
        "edge_read_failed_but_persisted_is_the_same_as_failed",
        Fault::EdgeRead,
        false,
    );
}

#[test]
fn insert_failed_rolls_back_and_says_so() {
    cell("insert_failed_rolls_back_and_says_so", Fault::Insert, false);
}

#[test]
fn insert_failed_but_persisted_is_the_same_as_failed() {
    // An insert persists only with its commit: rolled back with the transaction.
    cell(
        "insert_failed_but_persisted_is_the_same_as_failed",
        Fault::Insert,
        false,
    );
}

#[test]
fn commit_failed_is_written_again_on_a_fresh_edge() {
    cell(
        "commit_failed_is_written_again_on_a_fresh_edge",
        Fault::Commit,
        true,
    );
}

#[test]
fn commit_failed_but_persisted_is_found_and_not_written_twice() {
    cell(
        "commit_failed_but_persisted_is_found_and_not_written_twice",
        Fault::CommitPersisted,
        true,
    );
}

//! Helpers the test modules share: reading rows and scanning the files a ledger leaves.

use std::path::Path;

use std::sync::Arc;

use attest_core::{Attest, AutoGate, ReadBack};
use attest_ledger::{Ledger, LedgerOptions};
use serde_json::Value;

/// A pipeline on a fresh `l.sqlite` in `dir` that approves everything and reads back with
/// `readback`; the ledger too, for reading its rows.
pub(crate) fn attest_reading_back(dir: &Path, readback: ReadBack) -> (Arc<Ledger>, Attest) {
    let ledger = Arc::new(Ledger::open(dir.join("l.sqlite"), LedgerOptions::default()).unwrap());
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .gate(AutoGate::approve("ops"))
        .readback(readback)
        .build()
        .unwrap();
    (ledger, attest)
}

/// Row `seq`'s stored body, parsed.
pub(crate) fn row(ledger: &Ledger, seq: u64) -> Value {
    let mut body = None;
    blocking(|| {
        ledger.for_each_row(seq, |r| {
            body = Some(serde_json::from_slice::<Value>(r.body).unwrap());
            Ok(false)
        })
    })
    .unwrap();
    body.expect("no such row")
}

/// Runs `work` on a thread of its own: a PostgreSQL ledger's synchronous client may not
/// block a test's runtime thread (the pipeline itself calls the ledger from blocking
/// tasks).
pub(crate) use crate::pg_db::off_runtime as blocking;

/// Every byte of every file in `dir` (the database, its WAL and shared memory).
pub(crate) fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    bytes
}

/// Whether `haystack` holds `needle`'s bytes anywhere.
pub(crate) fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Test shorthand: the receipt of a call that must have run its tool and returned.
pub(crate) trait Ran {
    /// The receipt of `Outcome::Ran`; any other outcome fails the test.
    fn expect_ran(self) -> attest_core::Receipt;
}

impl<T: std::fmt::Debug, E: std::fmt::Debug> Ran for attest_core::Outcome<T, E> {
    fn expect_ran(self) -> attest_core::Receipt {
        match self {
            attest_core::Outcome::Ran { receipt, .. } => receipt,
            other => panic!("expected the tool to run, got {other:?}"),
        }
    }
}

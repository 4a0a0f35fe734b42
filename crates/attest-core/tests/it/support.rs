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
pub(crate) fn blocking<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(work).join().unwrap())
}

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

/// A PostgreSQL database of its own for one test (dropped at the end), or `None` with a
/// note when no server answers and `ATTEST_REQUIRE_PEERS` is not set.
pub(crate) struct PgDb {
    /// `postgres://postgres@127.0.0.1:5432/NAME`.
    pub(crate) url: String,
    admin: String,
    name: String,
}

impl Drop for PgDb {
    fn drop(&mut self) {
        blocking(|| self.drop_database());
    }
}

impl PgDb {
    fn drop_database(&self) {
        if let Ok(mut admin) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A fresh database on `ATTEST_TEST_PG` (default postgres://postgres@127.0.0.1:5432).
pub(crate) fn pg_db(test: &str) -> Option<PgDb> {
    blocking(|| new_pg_db(test))
}

fn new_pg_db(test: &str) -> Option<PgDb> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let server = std::env::var("ATTEST_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let admin = format!("{server}/test");
    let mut client = match postgres::Client::connect(&admin, postgres::NoTls) {
        Ok(client) => client,
        Err(err) => {
            let reason = format!("{test}: no PostgreSQL at {server} ({err})");
            assert!(
                std::env::var_os("ATTEST_REQUIRE_PEERS").is_none(),
                "{reason}"
            );
            eprintln!("SKIPPED: {reason}");
            return None;
        }
    };
    let name = format!(
        "attest_core_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
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

//! Helpers the test modules share: reading rows and scanning the files a ledger leaves.

use std::path::Path;

use attest_ledger::Ledger;
use serde_json::Value;

/// Row `seq`'s stored body, parsed.
pub(crate) fn row(ledger: &Ledger, seq: u64) -> Value {
    let mut body = None;
    ledger
        .for_each_row(seq, |r| {
            body = Some(serde_json::from_slice::<Value>(r.body).unwrap());
            Ok(false)
        })
        .unwrap();
    body.expect("no such row")
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

//! Several threads and several processes appending to one file keep one linear chain.

use std::process::Command;

use attest_ledger::{Ledger, LedgerOptions};

use crate::both::StoreTester;
use crate::sample_record;

/// Set in a child process: the ledger path to append to.
const WORKER_LEDGER: &str = "ATTEST_TEST_WORKER_LEDGER";
/// Set in a child process: how many rows to append.
const WORKER_ROWS: &str = "ATTEST_TEST_WORKER_ROWS";

#[test]
fn threads_appending_at_once_keep_one_chain() {
    StoreTester::new("threads_appending_at_once_keep_one_chain", 0).run(|case| {
        let ledger = &case.ledger;
        let mut seqs: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|t| {
                    scope.spawn(move || {
                        (0..50)
                            .map(|i| ledger.append(&sample_record(t * 100 + i)).unwrap().seq)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=400).collect::<Vec<_>>(), "{}", case.name());
        let report = ledger.verify().unwrap();
        assert!(report.is_intact(), "{}: {:?}", case.name(), report.problems);
        assert_eq!(report.checked, 400);
        assert_eq!(ledger.counts().unwrap().total, 400, "{}", case.name());
    });
}

#[test]
fn four_processes_appending_at_once_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    // Create the file first so the children race on appends, not on the schema.
    drop(Ledger::open(&path, LedgerOptions::default()).unwrap());
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrency::append_worker",
                    "--ignored",
                    "--nocapture",
                ])
                .env(WORKER_LEDGER, &path)
                .env(WORKER_ROWS, "500")
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let report = ledger.verify().unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    assert_eq!(report.checked, 2000);
    assert_eq!(ledger.tip().unwrap().map(|(seq, _)| seq), Some(2000));
}

/// Processes that open a new ledger together race to switch the file to WAL; SQLite
/// answers a switch that finds another writer busy at once, without waiting. An open
/// that meets a file another connection is writing in rollback mode waits for it and
/// succeeds.
#[test]
fn opening_a_file_another_connection_is_writing_in_rollback_mode_waits_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer
        .execute_batch("PRAGMA journal_mode = DELETE; BEGIN IMMEDIATE;")
        .unwrap();
    let opened = std::thread::scope(|scope| {
        let opening = scope.spawn(|| Ledger::open(&path, LedgerOptions::default()));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !opening.is_finished(),
            "the open waits while the file is being written"
        );
        writer.execute_batch("COMMIT").unwrap();
        opening.join().unwrap()
    });
    let ledger = opened.unwrap();
    ledger.append(&sample_record(1)).unwrap();
    assert!(ledger.verify().unwrap().is_intact());
    drop(writer);
    let mode: String = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

/// The child half of the process test: run only by the test above, through env vars.
#[test]
#[ignore = "a child process of four_processes_appending_at_once_keep_one_chain"]
fn append_worker() {
    let path = std::env::var(WORKER_LEDGER).expect("run by the parent test");
    let rows: u64 = std::env::var(WORKER_ROWS).unwrap().parse().unwrap();
    let ledger = Ledger::open(path, LedgerOptions::default()).unwrap();
    for i in 0..rows {
        ledger.append(&sample_record(i)).unwrap();
    }
}

/// Each handle keeps the tip and the tree's edge in memory; the other handle's commits
/// must be seen inside the next write transaction, or the chain would fork.
#[test]
fn two_handles_taking_turns_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let first = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let second = Ledger::open(&path, LedgerOptions::default()).unwrap();
    for i in 0..40u64 {
        // Runs of different lengths, so every tree shape is crossed by both handles.
        let ledger = if (i / (1 + i % 3)) % 2 == 0 {
            &first
        } else {
            &second
        };
        assert_eq!(ledger.append(&sample_record(i)).unwrap().seq, i + 1);
    }
    let report = second.verify().unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    assert_eq!(report.checked, 40);
    assert_eq!(first.root_at(40).unwrap(), second.root_at(40).unwrap());
}

/// A row removed by another connection (here: the tip) is noticed before the next
/// append: it chains onto what the file holds, not onto the remembered tip.
#[test]
fn a_change_by_another_connection_is_seen_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    for i in 0..5 {
        ledger.append(&sample_record(i)).unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("DELETE FROM entries WHERE seq = 5", [])
        .unwrap();
    // Leaves 0..=3 have 7 stored hashes; any row for leaf 4 (if written yet) goes too.
    conn.execute("DELETE FROM tree_hashes WHERE idx >= 7", [])
        .unwrap();
    drop(conn);
    assert_eq!(ledger.append(&sample_record(9)).unwrap().seq, 5);
    let report = ledger.verify().unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
}

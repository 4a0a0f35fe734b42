//! Crash safety with real processes: a writer appending in a loop is killed with
//! SIGKILL at arbitrary moments; after each kill the ledger verifies, and every receipt
//! the writer printed before it died names a row that is there with that hash.
//!
//! Crash table (write point × outcome), and where each case is exercised:
//! - killed before `BEGIN IMMEDIATE` or while reading the tip: nothing written, nothing
//!   printed; the next writer reads the same tip.
//! - killed between INSERT and COMMIT: SQLite rolls the WAL frames back on the next
//!   open (no commit record); no receipt was printed for those rows.
//! - killed after COMMIT returned but before the receipt was printed: the row is
//!   there without a receipt, which is allowed (the ledger may know more than the caller).
//! - killed while printing: a torn last line is ignored by the parent.
//! - killed with the tip and the tree's right edge cached in memory: the cache dies
//!   with the process; the next writer (another process, or a new one) finds
//!   `PRAGMA data_version` changed or has no cache, and reads the edge from the file.
//!   With two writer processes, each one's cache goes stale at every commit of the
//!   other, so every append crosses that path.
//! - killed with tree hashes still in memory (appends write them 64 leaves at a time):
//!   they were derived data; verify, proofs and the next writer compute them from the
//!   entries' hash column, and the next bulk write or checkpoint stores them.
//! - killed during a WAL checkpoint (on the ledger's checkpoint thread): SQLite's own
//!   recovery; the WAL still holds every committed frame.
//!
//! The recovery path is the normal open: SQLite's WAL recovery, nothing of ours.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::{to_hex, Ledger, LedgerOptions};

use crate::sample_record;

const CRASH_LEDGER: &str = "ATTEST_TEST_CRASH_LEDGER";
const CRASH_THREADS: &str = "ATTEST_TEST_CRASH_THREADS";
const CRASH_OFFSET: &str = "ATTEST_TEST_CRASH_OFFSET";

/// Kills `rounds` × `processes` writers at pseudo-random moments and checks the
/// ledger after each round.
fn crash_rounds(processes: usize, threads: usize, rounds: u64, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    crash_rounds_at(
        &[path.display().to_string()],
        processes,
        threads,
        rounds,
        seed,
    );
}

/// [`crash_rounds`] on any ledger location; writer `p` uses `locations[p % len]` (two
/// connection strings stand for two hosts). Also checks that no record was written
/// twice (every writer appends records of its own).
fn crash_rounds_at(locations: &[String], processes: usize, threads: usize, rounds: u64, seed: u64) {
    let path = locations[0].clone();
    drop(Ledger::open(&path, LedgerOptions::default()).unwrap());
    let exe = std::env::current_exe().unwrap();
    let mut state = seed;
    let mut total_receipts = 0;
    for round in 0..rounds {
        let mut children: Vec<_> = (0..processes)
            .map(|p| {
                let mut child = Command::new(&exe)
                    .args([
                        "--exact",
                        "crash::crash_writer",
                        "--ignored",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env(CRASH_LEDGER, &locations[p % locations.len()])
                    .env(CRASH_THREADS, threads.to_string())
                    .env(
                        CRASH_OFFSET,
                        (round * processes as u64 + p as u64).to_string(),
                    )
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let stdout = child.stdout.take().unwrap();
                let reader = std::thread::spawn(move || {
                    BufReader::new(stdout)
                        .split(b'\n')
                        .map_while(Result::ok)
                        .collect::<Vec<_>>()
                });
                (child, reader)
            })
            .collect();
        // xorshift: reproducible "random" moments between 5 and 60 ms.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        std::thread::sleep(Duration::from_millis(5 + state % 56));
        let mut lines = Vec::new();
        for (child, _) in &mut children {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        for (_, reader) in children {
            lines.extend(reader.join().unwrap());
        }

        let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
        let report = ledger.verify().unwrap();
        assert!(report.is_intact(), "round {round}: {:?}", report.problems);
        let mut stored = std::collections::HashMap::new();
        let mut actions = std::collections::HashSet::new();
        ledger
            .for_each_row(1, |row| {
                stored.insert(row.seq, to_hex(&attest_ledger::entry_hash(row.body)));
                let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
                let action = body["action_id"].as_str().unwrap().to_owned();
                assert!(
                    actions.insert(action.clone()),
                    "round {round}: {action} written twice"
                );
                Ok(true)
            })
            .unwrap();
        for line in lines {
            let Ok(text) = String::from_utf8(line) else {
                continue;
            };
            let mut parts = text.split(' ');
            let (Some(seq), Some(hash), None) = (parts.next(), parts.next(), parts.next()) else {
                continue; // the torn last line of a killed writer
            };
            let (Ok(seq), 64) = (seq.parse::<u64>(), hash.len()) else {
                continue;
            };
            assert_eq!(
                stored.get(&seq).map(String::as_str),
                Some(hash),
                "round {round}: receipt for seq {seq} lost"
            );
            total_receipts += 1;
        }
    }
    assert!(
        total_receipts > 0,
        "no writer printed a receipt before being killed"
    );
}

#[test]
fn a_writer_killed_at_random_moments_loses_no_receipt() {
    crash_rounds(1, 1, 25, 0x5eed_0001);
}

#[test]
fn writers_killed_in_the_middle_of_group_commits_lose_no_receipt() {
    crash_rounds(1, 8, 25, 0x5eed_0008);
}

#[test]
fn two_writer_processes_killed_at_random_moments_lose_no_receipt() {
    crash_rounds(2, 2, 25, 0x5eed_0202);
}

/// Four writer processes on two connection strings (two "hosts"), four threads each,
/// killed mid group commit at `full`: one chain, verified, every receipt there, no
/// record twice.
#[test]
fn postgres_writers_on_two_hosts_killed_mid_group_commit_lose_no_receipt() {
    let Some(db) =
        crate::pg_db("postgres_writers_on_two_hosts_killed_mid_group_commit_lose_no_receipt")
    else {
        return;
    };
    crash_rounds_at(&[db.url.clone(), db.other_url()], 4, 4, 10, 0x5eed_0404);
}

/// The child half: appends forever (at `full`), printing `seq hash` after each
/// append returns, until it is killed.
#[test]
#[ignore = "a child process of the crash tests"]
fn crash_writer() {
    let path = std::env::var(CRASH_LEDGER).expect("run by a crash test");
    let threads: usize = std::env::var(CRASH_THREADS).unwrap().parse().unwrap();
    let offset: u64 = std::env::var(CRASH_OFFSET).map_or(0, |o| o.parse().unwrap());
    let ledger = Arc::new(Ledger::open(path, LedgerOptions::default()).unwrap());
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let ledger = Arc::clone(&ledger);
            std::thread::spawn(move || {
                let mut n = offset * 100_000_000 + t as u64 * 1_000_000;
                loop {
                    n += 1;
                    let appended = ledger.append(&sample_record(n)).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{} {}", appended.seq, to_hex(&appended.hash)).unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
}

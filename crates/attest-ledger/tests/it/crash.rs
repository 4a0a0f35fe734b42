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
//!   entries' hash column, and the next bulk write or checkpoint stores them. After
//!   every kill, each row of that tail proves its inclusion in a root computed here
//!   from the bodies alone ([`tail_proves_inclusion`]), and the next round appends more.
//! - killed with entries not yet filed (the counters and the run / action id lookups
//!   are written 64 entries at a time): the extent (`filed_through`) moves in the same
//!   transaction as what it covers, readers take in the unfiled tail themselves, and
//!   the next writer files it. After every kill the counts equal a tally of the rows,
//!   and the newest rows, filed or not, are found by their action and run ids
//!   ([`filed_matches_the_rows`]).
//! - a process holding a cached tip while another process appends (and is killed):
//!   its next append chains onto the other's last row, not its own stale tip
//!   (`a_cached_tip_is_not_chained_onto_after_another_process_appended`).
//! - killed during a WAL checkpoint (on the ledger's checkpoint thread): SQLite's own
//!   recovery; the WAL still holds every committed frame.
//!
//! The recovery path is the normal open: SQLite's WAL recovery, nothing of ours.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::{
    leaf_hash, sign_checkpoint, to_hex, CompactRange, Hash, Ledger, LedgerOptions, SigningKey,
};

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
    let mut state = seed;
    let mut total_receipts = 0;
    for round in 0..rounds {
        let mut children: Vec<_> = (0..processes)
            .map(|p| {
                let mut child = spawn_writer(
                    &locations[p % locations.len()],
                    threads,
                    round * processes as u64 + p as u64,
                );
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
        let mut hashes = Vec::new();
        ledger
            .for_each_row(1, |row| {
                let hash = attest_ledger::entry_hash(row.body);
                hashes.push(hash);
                stored.insert(row.seq, to_hex(&hash));
                let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
                let action = body["action_id"].as_str().unwrap().to_owned();
                assert!(
                    actions.insert(action.clone()),
                    "round {round}: {action} written twice"
                );
                Ok(true)
            })
            .unwrap();
        tail_proves_inclusion(&ledger, &hashes, round);
        filed_matches_the_rows(&ledger, round);
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

/// The newest 64 rows (among them any whose tree hashes a killed writer left
/// unwritten) each prove their inclusion in the tree of all `hashes`, whose root is
/// computed here from the bodies, not read from the ledger.
fn tail_proves_inclusion(ledger: &Ledger, hashes: &[Hash], round: u64) {
    let size = hashes.len() as u64;
    if size == 0 {
        return;
    }
    let mut range = CompactRange::new();
    for hash in hashes {
        range.push(leaf_hash(hash));
    }
    let (key, _) = SigningKey::generate("attest.test/crash").unwrap();
    let note = sign_checkpoint(&key, size, &range.root()).unwrap();
    for seq in size.saturating_sub(63).max(1)..=size {
        let mut proof = ledger.prove_inclusion(seq, Some(size)).unwrap();
        proof.checkpoint = Some(note.clone());
        proof
            .check(std::slice::from_ref(key.verifier()))
            .unwrap_or_else(|err| panic!("round {round}: seq {seq} of {size}: {err}"));
    }
}

/// The counters equal a tally of the rows' columns, and each of the newest 80 rows
/// (some filed in bulk, some not yet) is what a listing by its action id finds, and
/// is among what a listing by its run finds.
fn filed_matches_the_rows(ledger: &Ledger, round: u64) {
    let mut tally = attest_ledger::Counts::default();
    let mut newest = std::collections::VecDeque::new();
    ledger
        .for_each_row(1, |row| {
            tally.total += 1;
            *tally
                .by_decision
                .entry(row.decision.to_owned())
                .or_default() += 1;
            *tally.by_system.entry(row.system.to_owned()).or_default() += 1;
            let agent = row.agent.unwrap_or("none").to_owned();
            *tally.by_agent.entry(agent).or_default() += 1;
            newest.push_back((row.seq, row.action_id.map(str::to_owned)));
            if newest.len() > 80 {
                newest.pop_front();
            }
            Ok(true)
        })
        .unwrap();
    let counts = ledger.counts().unwrap();
    assert_eq!(counts.total, tally.total, "round {round}: total");
    assert_eq!(counts.by_decision, tally.by_decision, "round {round}");
    assert_eq!(counts.by_system, tally.by_system, "round {round}");
    assert_eq!(counts.by_agent, tally.by_agent, "round {round}");
    let run_rows: std::collections::HashSet<u64> = ledger
        .list_filtered(
            &attest_ledger::Filter {
                run: sample_record(0).run_id,
                ..Default::default()
            },
            usize::MAX,
        )
        .unwrap()
        .into_iter()
        .map(|row| row.seq)
        .collect();
    for (seq, action_id) in newest {
        let found = ledger
            .list_filtered(
                &attest_ledger::Filter {
                    action_id: action_id.clone(),
                    ..Default::default()
                },
                10,
            )
            .unwrap();
        assert_eq!(
            found.iter().map(|row| row.seq).collect::<Vec<_>>(),
            [seq],
            "round {round}: action {action_id:?}"
        );
        assert!(
            run_rows.contains(&seq),
            "round {round}: seq {seq} not in its run"
        );
    }
}

/// A child writer: appends at `full` from `threads` threads, printing `seq hash` per
/// receipt, until it is killed; records numbered from `offset`.
fn spawn_writer(location: &str, threads: usize, offset: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::crash_writer",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_LEDGER, location)
        .env(CRASH_THREADS, threads.to_string())
        .env(CRASH_OFFSET, offset.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// This process holds the tip and tree edge in memory between two appends while
/// another process appends and is killed; the second append must see the other's
/// rows (`PRAGMA data_version` moved) and chain onto them: one chain, no fork, every
/// tail row provable.
#[test]
fn a_cached_tip_is_not_chained_onto_after_another_process_appended() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let mut n = 9_000_000_000;
    ledger.append(&crate::sample_record(n)).unwrap();
    for round in 0..5 {
        let mut child = spawn_writer(&path.display().to_string(), 1, 50 + round);
        let stdout = child.stdout.take().unwrap();
        // Wait for a few of the child's receipts, then kill it mid-append.
        let receipts = BufReader::new(stdout)
            .split(b'\n')
            .take(3 + round as usize)
            .count();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(receipts, 3 + round as usize, "round {round}");
        let (other_tip, other_hash) = ledger.tip().unwrap().unwrap();
        n += 1;
        let appended = ledger.append(&crate::sample_record(n)).unwrap();
        assert_eq!(appended.seq, other_tip + 1, "round {round}");
        let mut prev = None;
        ledger
            .for_each_row(appended.seq, |row| {
                let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
                prev = body["prev"].as_str().map(str::to_owned);
                Ok(false)
            })
            .unwrap();
        assert_eq!(prev, Some(to_hex(&other_hash)), "round {round}: forked");
        let report = ledger.verify().unwrap();
        assert!(report.is_intact(), "round {round}: {:?}", report.problems);
        let mut hashes = Vec::new();
        ledger
            .for_each_row(1, |row| {
                hashes.push(attest_ledger::entry_hash(row.body));
                Ok(true)
            })
            .unwrap();
        tail_proves_inclusion(&ledger, &hashes, round);
    }
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

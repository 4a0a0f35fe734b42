//! Each way of editing the SQLite file directly, and the finding verify must report.

use attest_ledger::{ProblemKind, VerifyReport};
use rusqlite::Connection;

use crate::ledger_with;

fn tampered(rows: u64, edit: &str) -> VerifyReport {
    let (dir, ledger) = ledger_with(rows);
    let conn = Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    conn.execute_batch(edit).unwrap();
    drop(conn);
    ledger.verify().unwrap()
}

fn first(report: &VerifyReport) -> (u64, ProblemKind) {
    let problem = report.problems.first().expect("verify found nothing");
    (problem.seq, problem.kind)
}

#[test]
fn an_edited_body_is_a_hash_mismatch_at_its_seq() {
    let report = tampered(
        10,
        "UPDATE entries SET body = replace(body, 'target-4', 'target-X') WHERE seq = 4",
    );
    assert_eq!(first(&report), (4, ProblemKind::HashMismatch));
    assert_eq!(report.broken_at(), Some(4));
}

#[test]
fn an_edited_body_with_a_recomputed_hash_breaks_the_tree_and_the_next_prev() {
    // 64 rows: appends write tree hashes 64 leaves at a time (until then they are
    // computed from the entries, and only a checkpoint pins them).
    let (dir, ledger) = ledger_with(64);
    let conn = Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    let body: String = conn
        .query_row("SELECT body FROM entries WHERE seq = 4", [], |r| r.get(0))
        .unwrap();
    let forged = body.replace("target-4", "target-X");
    let hash = attest_ledger::entry_hash(forged.as_bytes());
    conn.execute(
        "UPDATE entries SET body = ?1, hash = ?2 WHERE seq = 4",
        rusqlite::params![forged, &hash[..]],
    )
    .unwrap();
    drop(conn);
    let report = ledger.verify().unwrap();
    // The stored tree still holds the old leaf, and the next row links to the old hash.
    assert_eq!(first(&report), (4, ProblemKind::TreeMismatch));
    assert!(report
        .problems
        .iter()
        .any(|p| (p.seq, p.kind) == (5, ProblemKind::PrevMismatch)));
}

#[test]
fn an_edited_column_disagrees_with_the_body() {
    let report = tampered(10, "UPDATE entries SET decision = 'refuse' WHERE seq = 6");
    assert_eq!(first(&report), (6, ProblemKind::ColumnMismatch));
    assert!(report.problems[0].detail.contains("decision"));
}

#[test]
fn an_edited_level_column_disagrees_with_the_body() {
    let report = tampered(10, "UPDATE entries SET level = 'verified' WHERE seq = 2");
    assert_eq!(first(&report), (2, ProblemKind::ColumnMismatch));
}

#[test]
fn a_deleted_middle_row_is_a_gap_at_the_missing_seq() {
    let report = tampered(10, "DELETE FROM entries WHERE seq = 5");
    assert_eq!(first(&report), (5, ProblemKind::SeqGap));
    // The row after the gap no longer links to its predecessor either.
    assert!(report
        .problems
        .iter()
        .any(|p| p.seq == 6 && p.kind == ProblemKind::PrevMismatch));
}

#[test]
fn swapped_bodies_are_caught_at_the_first_swapped_seq() {
    let report = tampered(
        10,
        "UPDATE entries SET body = (SELECT body FROM entries WHERE seq = 7), \
                            hash = (SELECT hash FROM entries WHERE seq = 7) WHERE seq = 3;",
    );
    assert_eq!(first(&report), (3, ProblemKind::BodyAltered));
}

#[test]
fn a_changed_hash_is_caught() {
    let report = tampered(10, "UPDATE entries SET hash = zeroblob(32) WHERE seq = 8");
    assert_eq!(first(&report), (8, ProblemKind::HashMismatch));
}

#[test]
fn a_short_hash_is_caught() {
    let report = tampered(10, "UPDATE entries SET hash = x'00' WHERE seq = 1");
    assert_eq!(first(&report), (1, ProblemKind::HashMismatch));
}

#[test]
fn a_body_that_is_not_json_is_caught() {
    let report = tampered(3, "UPDATE entries SET body = 'garbage' WHERE seq = 2");
    assert!(report
        .problems
        .iter()
        .any(|p| p.seq == 2 && p.kind == ProblemKind::BodyAltered));
}

#[test]
fn an_inserted_row_is_caught() {
    // Make room at seq 3, then insert a copy of seq 2 there.
    let report = tampered(
        5,
        "UPDATE entries SET seq = seq + 100 WHERE seq >= 3;
         UPDATE entries SET seq = seq - 99 WHERE seq >= 103;
         INSERT INTO entries (seq, hash, ts, system, verb, agent, decision, level, body)
             SELECT 3, hash, ts, system, verb, agent, decision, level, body FROM entries WHERE seq = 2;",
    );
    assert_eq!(first(&report), (3, ProblemKind::BodyAltered));
    // The real seq 3, now at 4, still names its own seq and its link is broken.
    assert!(report.problems.iter().any(|p| p.seq == 4));
}

#[test]
fn an_edited_run_column_disagrees_with_the_body() {
    let report = tampered(10, "UPDATE entries SET run = 'run-2' WHERE seq = 5");
    assert_eq!(first(&report), (5, ProblemKind::ColumnMismatch));
    assert!(report.problems[0].detail.contains("column run"));
}

#[test]
fn a_cleared_run_column_disagrees_with_the_body() {
    let report = tampered(10, "UPDATE entries SET run = NULL WHERE seq = 7");
    assert_eq!(first(&report), (7, ProblemKind::ColumnMismatch));
    assert!(report.problems[0].detail.contains("column run"));
}

#[test]
fn an_edited_action_id_column_disagrees_with_the_body() {
    let report = tampered(
        10,
        "UPDATE entries SET action_id = 'action-9' WHERE seq = 3",
    );
    assert_eq!(first(&report), (3, ProblemKind::ColumnMismatch));
    assert!(report.problems[0].detail.contains("column action_id"));
}

#[test]
fn an_edited_action_id_column_deep_in_a_long_ledger_is_reported_at_its_seq() {
    // Long enough for the two-thread walk, whose batches are reused.
    let report = tampered(
        3000,
        "UPDATE entries SET action_id = 'action-1' WHERE seq = 2500",
    );
    assert_eq!(report.checked, 3000);
    assert_eq!(first(&report), (2500, ProblemKind::ColumnMismatch));
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
}

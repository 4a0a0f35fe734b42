//! Editing the SQLite file directly: `attest verify` exits 1 and names the seq.

use rusqlite::Connection;
use serde_json::Value;

use crate::{attest, demo_ledger, ledger_file, stdout};

/// Runs a demo, applies `edit` to the file, and returns verify's JSON report.
fn verify_after(edit: &str) -> (Value, String) {
    let dir = demo_ledger();
    // Twice: twelve rows, so there are middle rows to break.
    assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    let conn = Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute_batch(edit).unwrap();
    drop(conn);
    let json = attest(dir.path(), &["verify", "--json"]);
    assert_eq!(json.status.code(), Some(1), "{}", stdout(&json));
    let text = attest(dir.path(), &["verify"]);
    assert_eq!(text.status.code(), Some(1));
    (serde_json::from_slice(&json.stdout).unwrap(), stdout(&text))
}

#[test]
fn an_edited_body_is_named() {
    let (report, text) = verify_after(
        "UPDATE entries SET body = replace(body, 'buyer@customer.example', 'evil@x.example') WHERE seq = 4",
    );
    assert_eq!(report["ok"], false);
    assert_eq!(report["broken_at"], 4);
    assert_eq!(report["problems"][0]["kind"], "hash_mismatch");
    assert!(text.contains("BROKEN at seq 4"), "{text}");
}

#[test]
fn an_edited_column_is_named() {
    let (report, text) = verify_after("UPDATE entries SET decision = 'act' WHERE seq = 4");
    assert_eq!(report["broken_at"], 4);
    assert_eq!(report["problems"][0]["kind"], "column_mismatch");
    assert!(text.contains("column decision"), "{text}");
}

#[test]
fn a_deleted_middle_row_is_named() {
    let (report, _) = verify_after("DELETE FROM entries WHERE seq = 5");
    assert_eq!(report["broken_at"], 5);
    assert_eq!(report["problems"][0]["kind"], "seq_gap");
}

#[test]
fn swapped_bodies_are_named() {
    let (report, _) = verify_after(
        "UPDATE entries SET body = CASE seq WHEN 2 THEN (SELECT body FROM entries WHERE seq = 6)
                                           ELSE (SELECT body FROM entries WHERE seq = 2) END
         WHERE seq IN (2, 6);",
    );
    assert_eq!(report["broken_at"], 2);
}

#[test]
fn a_changed_hash_is_named() {
    let (report, _) = verify_after("UPDATE entries SET hash = randomblob(32) WHERE seq = 7");
    assert_eq!(report["broken_at"], 7);
    assert_eq!(report["problems"][0]["kind"], "hash_mismatch");
}

#[test]
fn an_edited_agent_column_is_quoted_not_debug_text() {
    let (report, text) = verify_after("UPDATE entries SET agent = 'mallory' WHERE seq = 4");
    assert_eq!(report["broken_at"], 4);
    assert!(
        text.contains("column agent is \"mallory\" but the body says \"demo-agent\""),
        "{text}"
    );
    assert!(!text.contains("Some("), "{text}");
    let (_, text) = verify_after("UPDATE entries SET agent = NULL WHERE seq = 4");
    assert!(text.contains("column agent is absent"), "{text}");
}

#[test]
fn a_ledger_file_cut_short_is_broken_not_an_error() {
    let dir = demo_ledger();
    for _ in 0..20 {
        assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    }
    let file = ledger_file(dir.path());
    let size = std::fs::metadata(&file).unwrap().len();
    let cut = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    cut.set_len(size / 2).unwrap();
    drop(cut);
    let text = attest(dir.path(), &["verify"]);
    assert_eq!(
        text.status.code(),
        Some(1),
        "{}{}",
        stdout(&text),
        crate::stderr(&text)
    );
    assert!(
        stdout(&text).starts_with("BROKEN: the ledger"),
        "{}",
        stdout(&text)
    );
    assert!(stdout(&text).contains("is damaged"), "{}", stdout(&text));
    let json = attest(dir.path(), &["verify", "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["ok"], false);
}

/// A copy of a ledger someone edited is refused before anything is written: the target
/// stays absent, so a broken chain never gains a clean-looking twin (issue 28's held probe).
#[test]
fn a_tampered_source_is_not_copied() {
    let dir = demo_ledger();
    let conn = Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute_batch("UPDATE entries SET body = body || ' ' WHERE seq = 4")
        .unwrap();
    drop(conn);
    let target = dir.path().join("copy.sqlite");
    let copy = attest(
        dir.path(),
        &[
            "copy",
            "--from",
            ".attest/ledger.sqlite",
            "--to",
            "copy.sqlite",
        ],
    );
    assert_eq!(copy.status.code(), Some(1), "{}", stdout(&copy));
    let said = String::from_utf8_lossy(&copy.stderr);
    assert!(said.contains("does not verify"), "{said}");
    assert!(
        !target.exists(),
        "a copy was written from a tampered source"
    );
}

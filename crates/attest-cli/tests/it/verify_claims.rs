//! `attest verify`, `prove`, `verify-proof` and `prune` say yes only to what they
//! checked, and say what to do when they cannot.

use std::path::Path;
use std::process::Command;

use rusqlite::Connection;
use serde_json::Value;

use crate::{attest, ledger_file, stderr, stdout};

/// A ledger with a signing key and `demos` demo runs (six rows each); returns the
/// verifier key.
fn keyed(demos: usize) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let keygen = attest(dir.path(), &["keygen", "--name", "attest.test/cli"]);
    assert_eq!(keygen.status.code(), Some(0), "{}", stderr(&keygen));
    for _ in 0..demos {
        let demo = attest(dir.path(), &["demo"]);
        assert_eq!(demo.status.code(), Some(0), "{}", stderr(&demo));
    }
    (dir, stdout(&keygen).trim().to_owned())
}

/// The verifier key of a fresh key pair that did not sign anything here.
fn stranger(dir: &Path) -> String {
    let keygen = attest(
        dir,
        &["keygen", "--name", "attest.test/cli", "--out", "other.key"],
    );
    assert_eq!(keygen.status.code(), Some(0), "{}", stderr(&keygen));
    stdout(&keygen).trim().to_owned()
}

fn run_ok(dir: &Path, args: &[&str]) -> String {
    crate::expect_ok(&attest(dir, args))
}

fn verify_json(dir: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let output = attest(dir, &[&["verify", "--json"], args].concat());
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("{}{}", stdout(&output), stderr(&output)));
    (output.status.code(), report)
}

fn kinds(report: &Value) -> Vec<String> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn sql(dir: &Path, statements: &str) {
    let conn = Connection::open(ledger_file(dir)).unwrap();
    conn.execute_batch(statements).unwrap();
}

#[test]
fn a_key_with_no_checkpoint_it_signed_is_not_intact() {
    let (dir, vkey) = keyed(2);
    run_ok(dir.path(), &["checkpoint"]);
    // The attack from the review: every checkpoint and the rows after seq 2 deleted,
    // tree hashes too, so what is left is a consistent two-row ledger.
    sql(
        dir.path(),
        "DELETE FROM checkpoints; DELETE FROM entries WHERE seq > 2; DELETE FROM tree_hashes WHERE idx >= 3;",
    );
    let (code, report) = verify_json(dir.path(), &["--vkey", &vkey]);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["ok"], false);
    assert!(kinds(&report).contains(&"unsigned".to_owned()), "{report}");
    assert_eq!(report["signatures_checked"], false, "{report}");
    // Without a key nothing claims more than the chain: intact, signatures not checked.
    let (code, report) = verify_json(dir.path(), &[]);
    assert_eq!(
        (code, report["signatures_checked"].clone()),
        (Some(0), Value::Bool(false))
    );
}

/// Issue 53: during a key rotation (checkpoints signed by the old key, only the new key's
/// verifier given) the ledger is not proven, and said so, not called BROKEN: nothing in it
/// was altered. Both verifiers together prove it.
#[test]
fn a_key_rotation_is_not_proven_rather_than_broken() {
    let (dir, old) = keyed(1);
    run_ok(dir.path(), &["checkpoint"]);
    let new = stranger(dir.path());
    let output = attest(dir.path(), &["verify", "--vkey", &new]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.starts_with("NOT PROVEN: the 6 entries here chain intact"),
        "{text}"
    );
    assert!(!text.contains("BROKEN"), "{text}");
    assert!(text.contains("another --vkey"), "{text}");
    let both = run_ok(dir.path(), &["verify", "--vkey", &old, "--vkey", &new]);
    assert!(both.starts_with("intact: 6 entries"), "{both}");
}

#[test]
fn tree_hashes_beyond_the_tip_are_flagged() {
    let (dir, _) = keyed(2);
    // A checkpoint writes every tree hash (the newest are otherwise written in bulk later);
    // then the checkpoint goes, and the last two entries are cut off, their tree hashes
    // left behind.
    run_ok(dir.path(), &["checkpoint"]);
    sql(dir.path(), "DELETE FROM checkpoints;");
    let tip: u64 = Connection::open(ledger_file(dir.path()))
        .unwrap()
        .query_row("SELECT MAX(seq) FROM entries", [], |row| row.get(0))
        .unwrap();
    sql(
        dir.path(),
        &format!("DELETE FROM entries WHERE seq > {};", tip - 2),
    );
    let (code, report) = verify_json(dir.path(), &[]);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(report["broken_at"], tip - 1, "{report}");
    assert_eq!(kinds(&report), ["tree_mismatch"], "{report}");
}

#[test]
fn signatures_checked_names_the_key_that_verified_and_the_env_key_does_not_add() {
    let (dir, vkey) = keyed(1);
    run_ok(dir.path(), &["checkpoint"]);
    let (code, report) = verify_json(dir.path(), &["--vkey", &vkey]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["signatures_checked"], true);
    assert_eq!(report["verified_by"], serde_json::json!([vkey]));
    let text = run_ok(dir.path(), &["verify", "--vkey", &vkey]);
    assert!(text.contains(&format!("verified by {vkey}")), "{text}");

    // ATTEST_VKEY holds the right key, --vkey a wrong one: the explicit key alone counts.
    let wrong = stranger(dir.path());
    let output = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["verify", "--json", "--vkey", &wrong])
        .current_dir(dir.path())
        .env_clear()
        .env("ATTEST_VKEY", &vkey)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(kinds(&report)[0], "bad_signature", "{report}");
    assert!(report["problems"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("wrong --vkey"));
}

#[test]
fn an_empty_or_foreign_file_is_not_a_ledger_and_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign.sqlite");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes (text) VALUES ('x');")
        .unwrap();
    std::fs::write(dir.path().join("empty.sqlite"), b"").unwrap();
    std::fs::write(dir.path().join("text.sqlite"), b"not a database at all\n").unwrap();
    for name in ["empty.sqlite", "foreign.sqlite", "text.sqlite"] {
        let path = dir.path().join(name);
        let before = std::fs::read(&path).unwrap();
        for args in [&["verify"][..], &["verify", "--json"]] {
            let output = attest(dir.path(), &[&["--ledger", name][..], args].concat());
            assert_eq!(
                output.status.code(),
                Some(1),
                "{name}: {}{}",
                stdout(&output),
                stderr(&output)
            );
            assert!(
                !stdout(&output).contains("intact"),
                "{name}: {}",
                stdout(&output)
            );
        }
        let text = stdout(&attest(dir.path(), &["--ledger", name, "verify"]));
        assert!(text.starts_with("NOT A LEDGER"), "{name}: {text}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{name} was written to"
        );
        for suffix in ["-wal", "-shm", "-journal"] {
            assert!(
                !dir.path().join(format!("{name}{suffix}")).exists(),
                "{name}{suffix}"
            );
        }
    }
}

#[test]
fn a_checkpoint_file_without_a_key_checks_the_roots_and_says_signatures_were_not_checked() {
    let (dir, _) = keyed(1);
    run_ok(dir.path(), &["checkpoint"]);
    run_ok(dir.path(), &["anchor", "--file", "anchors.txt"]);
    run_ok(dir.path(), &["demo"]);
    let text = run_ok(dir.path(), &["verify", "--checkpoint", "anchors.txt"]);
    assert!(text.starts_with("intact: 12 entries"), "{text}");
    assert!(text.contains("NOT checked"), "{text}");
    assert!(!text.contains("BROKEN"), "{text}");
    // Broken means broken: a checkpoint of another ledger at the same size.
    let (other, _) = keyed(1);
    run_ok(other.path(), &["checkpoint"]);
    run_ok(other.path(), &["anchor", "--file", "anchors.txt"]);
    std::fs::copy(
        other.path().join("anchors.txt"),
        dir.path().join("anchors.txt"),
    )
    .unwrap();
    let (code, report) = verify_json(dir.path(), &["--checkpoint", "anchors.txt"]);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(kinds(&report)[0], "checkpoint_mismatch", "{report}");
}

#[test]
fn consistency_proofs_check_both_signatures_and_a_file_holds_one_kind() {
    let (dir, vkey) = keyed(1);
    run_ok(dir.path(), &["checkpoint"]);
    run_ok(dir.path(), &["demo"]);
    run_ok(dir.path(), &["checkpoint"]);
    let proof = run_ok(dir.path(), &["prove", "--consistency", "6", "--json"]);
    std::fs::write(dir.path().join("c.json"), &proof).unwrap();
    let ok = run_ok(dir.path(), &["verify-proof", "c.json", "--vkey", &vkey]);
    assert!(ok.contains(&format!("signed by {vkey}")), "{ok}");
    // Under any other key, or from an unrelated ledger, it fails.
    let wrong = stranger(dir.path());
    let output = attest(dir.path(), &["verify-proof", "c.json", "--vkey", &wrong]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let (other, other_vkey) = keyed(2);
    run_ok(other.path(), &["checkpoint"]);
    let foreign = run_ok(other.path(), &["prove", "--consistency", "6", "--json"]);
    std::fs::write(dir.path().join("f.json"), &foreign).unwrap();
    let output = attest(dir.path(), &["verify-proof", "f.json", "--vkey", &vkey]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stdout(&output).contains("no signed checkpoint for the tree of 6"),
        "{}",
        stdout(&output)
    );
    let _ = other_vkey;
    // Stripped of its checkpoints (the unrelated-ledger attack): refused, not "ok".
    let mut stripped: Value = serde_json::from_str(&proof).unwrap();
    stripped.as_object_mut().unwrap().remove("old_checkpoint");
    std::fs::write(dir.path().join("s.json"), stripped.to_string()).unwrap();
    let output = attest(dir.path(), &["verify-proof", "s.json", "--vkey", &vkey]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    // A file mixing an inclusion proof into a consistency proof is neither.
    let inclusion: Value =
        serde_json::from_str(&run_ok(dir.path(), &["prove", "3", "--json"])).unwrap();
    let mut mixed: Value = serde_json::from_str(&proof).unwrap();
    for (key, value) in inclusion.as_object().unwrap() {
        mixed[key] = value.clone();
    }
    std::fs::write(dir.path().join("m.json"), mixed.to_string()).unwrap();
    let output = attest(dir.path(), &["verify-proof", "m.json", "--vkey", &vkey]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("one kind of proof"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn prove_beyond_the_newest_checkpoint_says_what_to_run() {
    let (dir, vkey) = keyed(1);
    run_ok(dir.path(), &["checkpoint"]);
    run_ok(dir.path(), &["demo"]);
    let output = attest(dir.path(), &["prove", "9"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("run `attest checkpoint`"),
        "{}",
        stderr(&output)
    );
    // Against a size no checkpoint signs: prove says so, and verify-proof says why.
    let output = attest(dir.path(), &["prove", "9", "--size", "11", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("no signed checkpoint covers exactly 11"),
        "{}",
        stderr(&output)
    );
    std::fs::write(dir.path().join("p.json"), &output.stdout).unwrap();
    let check = attest(dir.path(), &["verify-proof", "p.json", "--vkey", &vkey]);
    assert_eq!(check.status.code(), Some(1));
    assert!(
        stdout(&check).contains("attest checkpoint"),
        "{}",
        stdout(&check)
    );
    // As told: sign, prove again, check.
    run_ok(dir.path(), &["checkpoint"]);
    std::fs::write(
        dir.path().join("p.json"),
        run_ok(dir.path(), &["prove", "9", "--json"]),
    )
    .unwrap();
    run_ok(dir.path(), &["verify-proof", "p.json", "--vkey", &vkey]);
}

#[test]
fn prune_confirms_and_a_pruned_ledger_checks_from_its_prune_checkpoint() {
    let (dir, vkey) = keyed(1);
    // No terminal and no --yes: refused, with the count, nothing removed.
    let output = attest(dir.path(), &["prune", "--older-than-days", "0"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("would remove 5 entries"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("--yes"), "{}", stderr(&output));
    assert_eq!(verify_json(dir.path(), &[]).1["checked"], 6);
    let pruned = run_ok(dir.path(), &["prune", "--older-than-days", "0", "--yes"]);
    assert!(pruned.contains("removed 5 entries"), "{pruned}");

    let (code, report) = verify_json(dir.path(), &["--vkey", &vkey]);
    assert_eq!(
        (code, report["checked"].clone()),
        (Some(0), Value::from(1)),
        "{report}"
    );
    // A wrong key: the key does not match; not "no checkpoint covers them".
    let wrong = stranger(dir.path());
    let output = attest(dir.path(), &["verify", "--vkey", &wrong]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("wrong --vkey"), "{text}");
    assert!(!text.contains("no checkpoint covers"), "{text}");
}

#[test]
fn prune_on_a_terminal_asks_and_removes_only_on_yes() {
    use std::io::Write;
    if Command::new("script").arg("--version").output().is_err() {
        crate::peer_missing("`script` (util-linux) is missing: it gives prune a terminal");
        return;
    }
    let (dir, _) = keyed(1);
    // `script` runs prune on a pseudo-terminal and types the answer.
    let on_a_terminal = |answer: &str| {
        let command = format!("{} prune --older-than-days 0", env!("CARGO_BIN_EXE_attest"));
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(dir.path())
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let no = on_a_terminal("n\n");
    assert_eq!(no.status.code(), Some(1), "{}", stdout(&no));
    assert!(
        stdout(&no).contains("remove 5 entries older than 0 days"),
        "{}",
        stdout(&no)
    );
    assert!(stdout(&no).contains("not pruned"), "{}", stdout(&no));
    assert_eq!(verify_json(dir.path(), &[]).1["checked"], 6);
    let yes = on_a_terminal("y\n");
    assert_eq!(yes.status.code(), Some(0), "{}", stdout(&yes));
    assert!(
        stdout(&yes).contains("removed 5 entries"),
        "{}",
        stdout(&yes)
    );
    assert_eq!(verify_json(dir.path(), &[]).1["checked"], 1);
}

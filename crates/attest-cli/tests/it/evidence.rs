//! Keys, checkpoints, proofs, anchors and prune through the real binary.

use std::path::Path;
use std::process::Command;

use rusqlite::Connection;
use serde_json::Value;

use crate::{attest, demo_ledger, ledger_file, stderr, stdout};

/// A demo ledger with a signing key; returns the directory and the verifier key.
fn keyed_ledger() -> (tempfile::TempDir, String) {
    let dir = demo_ledger();
    let keygen = attest(dir.path(), &["keygen", "--name", "attest.test/cli"]);
    assert_eq!(keygen.status.code(), Some(0), "{}", stderr(&keygen));
    (dir, stdout(&keygen).trim().to_owned())
}

fn checkpoint(dir: &Path) -> String {
    let output = attest(dir, &["checkpoint"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output)
}

fn verify_json(dir: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["verify", "--json"];
    all.extend_from_slice(args);
    let output = attest(dir, &all);
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code(), report)
}

#[test]
fn keygen_writes_a_private_key_and_prints_the_verifier_key() {
    let (dir, vkey) = keyed_ledger();
    assert!(vkey.starts_with("attest.test/cli+"), "{vkey}");
    let key = dir.path().join(".attest/signing.key");
    let text = std::fs::read_to_string(&key).unwrap();
    assert!(text.starts_with("PRIVATE+KEY+attest.test/cli+"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let again = attest(dir.path(), &["keygen"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("already exists"));
    assert_eq!(std::fs::read_to_string(&key).unwrap(), text);
    let show = attest(dir.path(), &["key", "show"]);
    assert_eq!(stdout(&show).trim(), vkey);
}

#[test]
fn checkpoint_prints_exactly_the_signed_note() {
    let (dir, vkey) = keyed_ledger();
    let note = checkpoint(dir.path());
    let lines: Vec<&str> = note.lines().collect();
    assert_eq!(lines[0], "attest.test/cli");
    assert_eq!(lines[1], "6");
    assert_eq!(lines[3], "");
    assert!(lines[4].starts_with("\u{2014} attest.test/cli "));
    let latest = attest(dir.path(), &["checkpoint", "--latest"]);
    assert_eq!(stdout(&latest), note);
    let body = attest_ledger::open_checkpoint(
        note.as_bytes(),
        &[attest_ledger::VerifierKey::parse(&vkey, "test").unwrap()],
    )
    .unwrap();
    assert_eq!(body.size, 6);
}

#[test]
fn checkpoint_of_an_empty_ledger_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(attest(dir.path(), &["keygen"]).status.code(), Some(0));
    // An empty ledger file.
    attest_ledger::Ledger::open(ledger_file(dir.path()), Default::default()).unwrap();
    let output = attest(dir.path(), &["checkpoint"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("is empty"), "{}", stderr(&output));
}

#[test]
fn checkpoint_refuses_to_sign_a_broken_ledger() {
    let (dir, _) = keyed_ledger();
    let conn = Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute("UPDATE entries SET decision = 'act' WHERE seq = 4", [])
        .unwrap();
    let output = attest(dir.path(), &["checkpoint"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("not signing"),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).is_empty());
}

#[test]
fn verify_since_checkpoint_needs_a_key_and_checks_the_new_rows() {
    let (dir, vkey) = keyed_ledger();
    checkpoint(dir.path());
    assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    let (code, report) = verify_json(dir.path(), &["--since-checkpoint", "--vkey", &vkey]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["checked"], 6);
    assert_eq!(report["checkpoint"]["size"], 6);
    assert_eq!(report["signatures_checked"], true);
    let no_key = attest(dir.path(), &["verify", "--since-checkpoint"]);
    assert_eq!(no_key.status.code(), Some(2));
    assert!(stderr(&no_key).contains("no trusted verifier key"));
}

#[test]
fn a_truncated_tail_is_exit_1() {
    let (dir, vkey) = keyed_ledger();
    assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    checkpoint(dir.path());
    let conn = Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute("DELETE FROM entries WHERE seq >= 7", [])
        .unwrap();
    let (code, report) = verify_json(dir.path(), &["--vkey", &vkey]);
    assert_eq!(code, Some(1));
    assert_eq!(report["broken_at"], 7);
    assert_eq!(report["problems"][0]["kind"], "truncated");
}

#[test]
fn a_checkpoint_signed_by_another_key_is_exit_1() {
    let (dir, _) = keyed_ledger();
    checkpoint(dir.path());
    let other = tempfile::tempdir().unwrap();
    let other_key = stdout(&attest(
        other.path(),
        &["keygen", "--name", "attest.test/cli"],
    ));
    let (code, report) = verify_json(dir.path(), &["--vkey", other_key.trim()]);
    assert_eq!(code, Some(1));
    assert_eq!(report["problems"][0]["kind"], "bad_signature");
}

#[test]
fn a_deleted_checkpoint_is_caught_with_an_anchor_kept_elsewhere() {
    let (dir, vkey) = keyed_ledger();
    checkpoint(dir.path());
    let anchor = dir.path().join("elsewhere/anchors.note");
    std::fs::create_dir_all(anchor.parent().unwrap()).unwrap();
    let output = attest(dir.path(), &["anchor", "--file", anchor.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let anchor_arg = anchor.to_str().unwrap();
    assert_eq!(
        verify_json(dir.path(), &["--vkey", &vkey, "--checkpoint", anchor_arg]).0,
        Some(0)
    );
    let conn = Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute("DELETE FROM checkpoints", []).unwrap();
    let (code, report) = verify_json(dir.path(), &["--vkey", &vkey, "--checkpoint", anchor_arg]);
    assert_eq!(code, Some(1));
    assert_eq!(report["problems"][0]["kind"], "checkpoint_missing");
}

#[test]
fn a_proof_checks_offline_and_a_tampered_one_does_not() {
    let (dir, vkey) = keyed_ledger();
    checkpoint(dir.path());
    let proof = attest(dir.path(), &["prove", "3", "--json"]);
    assert_eq!(proof.status.code(), Some(0), "{}", stderr(&proof));
    let parsed: Value = serde_json::from_slice(&proof.stdout).unwrap();
    assert_eq!(parsed["seq"], 3);
    assert_eq!(parsed["index"], 2);
    assert_eq!(parsed["tree_size"], 6);
    assert!(parsed["checkpoint"]
        .as_str()
        .unwrap()
        .starts_with("attest.test/cli\n6\n"));
    // Offline: no ledger in the directory the proof is checked from.
    let offline = tempfile::tempdir().unwrap();
    std::fs::write(offline.path().join("p.json"), &proof.stdout).unwrap();
    let ok = attest(offline.path(), &["verify-proof", "p.json", "--vkey", &vkey]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    let mut bad = parsed.clone();
    bad["entry_hash"] = Value::String("00".repeat(32));
    std::fs::write(offline.path().join("bad.json"), bad.to_string()).unwrap();
    let fails = attest(
        offline.path(),
        &["verify-proof", "bad.json", "--vkey", &vkey],
    );
    assert_eq!(fails.status.code(), Some(1));
}

#[test]
fn prune_then_verify_then_prove() {
    let (dir, vkey) = keyed_ledger();
    assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    let pruned = attest(dir.path(), &["prune", "--older-than-days", "0", "--yes"]);
    assert_eq!(pruned.status.code(), Some(0), "{}", stderr(&pruned));
    assert!(
        stdout(&pruned).contains("removed 11 entries"),
        "{}",
        stdout(&pruned)
    );
    let (code, report) = verify_json(dir.path(), &["--vkey", &vkey]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["checked"], 1);
    let proof = attest(dir.path(), &["prove", "12", "--json"]);
    assert_eq!(proof.status.code(), Some(0));
    std::fs::write(dir.path().join("p.json"), &proof.stdout).unwrap();
    assert_eq!(
        attest(dir.path(), &["verify-proof", "p.json", "--vkey", &vkey])
            .status
            .code(),
        Some(0)
    );
    let gone = attest(dir.path(), &["prove", "2"]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(stderr(&gone).contains("pruned"));
}

#[test]
fn prune_refuses_without_a_signing_key() {
    let dir = demo_ledger();
    let output = attest(dir.path(), &["prune", "--older-than-days", "0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no signing key"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn exports_in_every_format_agree_on_the_entries() {
    let dir = demo_ledger();
    let jsonl = stdout(&attest(dir.path(), &["export", "--format", "jsonl"]));
    let json: Vec<Value> =
        serde_json::from_slice(&attest(dir.path(), &["export", "--format", "json"]).stdout)
            .unwrap();
    let csv = stdout(&attest(dir.path(), &["export", "--format", "csv"]));
    let ietf = stdout(&attest(dir.path(), &["export", "--format", "ietf"]));
    assert_eq!(jsonl.lines().count(), 6);
    assert_eq!(json.len(), 6);
    assert_eq!(csv.lines().count(), 7);
    assert!(csv.starts_with("seq,ts,action_id"));
    let records: Vec<Value> = ietf
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Rows 1 and 3 are the intents of the two writes that ran.
    assert_eq!(records[5]["outcome"], "denied");
    assert_eq!(records[4]["outcome"], "escalated");
    for (i, line) in jsonl.lines().enumerate() {
        let entry: Value = serde_json::from_str(line).unwrap();
        assert_eq!(entry, json[i]);
        assert_eq!(records[i]["record_id"], entry["action_id"]);
        assert_eq!(records[i]["prev_hash"], entry["prev"]);
    }
}

/// Go's own `sumdb/note` and `sumdb/tlog` check our note and proofs.
#[test]
fn go_sumdb_note_and_tlog_accept_our_checkpoint_and_proofs() {
    let go = Command::new("go").arg("version").output();
    let gopath = Path::new("/usr/share/gocode/src/golang.org/x/mod/sumdb/note");
    if go.is_err() || !gopath.exists() {
        crate::peer_missing(
            "Go interop needs `go` and golang.org/x/mod (Debian: golang-go, \
             golang-golang-x-mod-dev; .ci/run installs them)",
        );
        return;
    }
    let (dir, vkey) = keyed_ledger();
    for _ in 0..3 {
        assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    }
    let note = checkpoint(dir.path());
    std::fs::write(dir.path().join("cp.note"), &note).unwrap();
    let inclusion = attest(dir.path(), &["prove", "6", "--json"]);
    std::fs::write(dir.path().join("inclusion.json"), &inclusion.stdout).unwrap();
    let consistency = attest(dir.path(), &["prove", "--consistency", "5", "--json"]);
    std::fs::write(dir.path().join("consistency.json"), &consistency.stdout).unwrap();
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/interop.go");
    let run = |note_file: &str| {
        Command::new("go")
            .arg("run")
            .arg(&program)
            .args([&vkey, note_file, "inclusion.json", "consistency.json"])
            .current_dir(dir.path())
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", dir.path().join("gocache"))
            .env("GOFLAGS", "-mod=mod")
            .output()
            .unwrap()
    };
    let output = run("cp.note");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).starts_with("ok: note signed by attest.test/cli")
    );
    // A forged size makes Go's note.Open refuse it.
    std::fs::write(
        dir.path().join("forged.note"),
        note.replacen("\n24\n", "\n23\n", 1),
    )
    .unwrap();
    let forged = run("forged.note");
    assert!(!forged.status.success());
    assert!(String::from_utf8_lossy(&forged.stdout).contains("note.Open"));
}

#[test]
fn a_rotated_key_continues_the_chain_and_verify_names_each_signer() {
    let (dir, old) = keyed_ledger();
    let d = dir.path();
    checkpoint(d);
    std::fs::rename(d.join(".attest/signing.key"), d.join("retired.key")).unwrap();
    let new = stdout(&attest(d, &["keygen", "--name", "attest.test/cli"]))
        .trim()
        .to_owned();
    assert_ne!(new, old);
    assert_eq!(attest(d, &["demo"]).status.code(), Some(0));
    // The new key alone does not vouch for the old checkpoint: no signing on its word.
    let refused = attest(d, &["checkpoint"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("--vkey OLD_KEY"),
        "{}",
        stderr(&refused)
    );
    let signed = attest(d, &["checkpoint", "--vkey", &old]);
    assert_eq!(signed.status.code(), Some(0), "{}", stderr(&signed));
    let (code, report) = verify_json(d, &["--vkey", &old, "--vkey", &new]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        report["verified_by"],
        serde_json::json!([old, new]),
        "{report:#}"
    );
    let notes = report["notes"].to_string();
    assert!(
        notes.contains(&format!("key {old} signed the checkpoint(s) at size 6")),
        "{notes}"
    );
    assert!(
        notes.contains(&format!("key {new} signed the checkpoint(s) at size 12")),
        "{notes}"
    );
    // Trusting only one of them: the other's checkpoint does not verify.
    let (code, report) = verify_json(d, &["--vkey", &new]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["problems"][0]["kind"], "bad_signature", "{report:#}");
    // The same through ATTEST_VKEY, a comma-separated list.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["verify"])
        .current_dir(d)
        .env_clear()
        .env("ATTEST_VKEY", format!("{old},{new}"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn checkpoint_of_a_ledger_that_does_not_exist_says_so_before_keys() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["--ledger", "books/q4.sqlite", "checkpoint"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(err.contains("no ledger at books/q4.sqlite"), "{err}");
    assert!(!err.contains("signing key"), "{err}");
    assert!(!dir.path().join("books").exists());
}

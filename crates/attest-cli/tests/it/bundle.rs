//! The auditor's bundle (issue 52): `attest export --bundle`, checked offline by
//! `attest verify-bundle` and by the Python script shipped in docs/.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::{expect_ok, exported_entries, stderr, stdout};

/// `attest` on the test's ledger (`ledger.sqlite`, or its PostgreSQL database under
/// `ATTEST_TEST_STORE=postgres`).
fn attest(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--ledger", "ledger.sqlite"];
    all.extend_from_slice(args);
    crate::attest(dir, &all)
}

/// A ledger of two demo runs, a checkpoint after each (sizes 6 and 12); returns the
/// directory, the verifier key and the first run's id.
fn two_signed_runs() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    expect_ok(&attest(dir.path(), &["demo"]));
    let vkey = expect_ok(&attest(
        dir.path(),
        &["keygen", "--name", "attest.test/bundle"],
    ))
    .trim()
    .to_owned();
    expect_ok(&attest(dir.path(), &["checkpoint"]));
    expect_ok(&attest(dir.path(), &["demo"]));
    expect_ok(&attest(dir.path(), &["checkpoint"]));
    let run = exported_entries(dir.path())[0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (dir, vkey, run)
}

/// `attest export --bundle FILE --run RUN`, which must succeed.
fn bundle_run(dir: &Path, file: &str, run: &str) {
    expect_ok(&attest(dir, &["export", "--bundle", file, "--run", run]));
}

/// Asserts `out` exited with `code`, showing `what` and both streams if not.
fn exits(out: &Output, code: i32, what: &str) {
    let shown = format!("{what}: {}{}", stdout(out), stderr(out));
    assert_eq!(out.status.code(), Some(code), "{shown}");
}

/// `attest verify-bundle FILE --vkey KEY` run in `dir`, where no ledger is.
fn verify_bundle(dir: &Path, file: &str, vkey: &str) -> Output {
    attest(dir, &["verify-bundle", file, "--vkey", vkey])
}

/// The shipped Python checker on `file`, or `None` (after saying so) without Python's
/// `cryptography` package.
fn python_check(dir: &Path, file: &str, vkey: &str) -> Option<Output> {
    let python = crate::python();
    let has = Command::new(&python)
        .args(["-c", "import cryptography"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !has {
        crate::peer_missing(
            "the bundle's Python checker needs python3 with `cryptography` (.ci/run installs it in .ci/venv)",
        );
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/verify_bundle.py");
    Some(
        Command::new(python)
            .arg(script)
            .args([file, vkey])
            .current_dir(dir)
            .env_clear()
            .output()
            .unwrap(),
    )
}

/// Replaces the byte after the first `marker` in `bytes` (which must hold it once) by
/// another one of the same class, so lengths and the tar headers stay as they were.
fn flip_after(bytes: &[u8], marker: &[u8]) -> Vec<u8> {
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .unwrap_or_else(|| panic!("{} not in the bundle", String::from_utf8_lossy(marker)))
        + marker.len();
    let mut out = bytes.to_vec();
    out[at] = if out[at] == b'A' { b'B' } else { b'A' };
    out
}

#[test]
fn a_fresh_bundle_checks_offline_with_attest_and_with_the_python_script() {
    let (dir, vkey, run) = two_signed_runs();
    bundle_run(dir.path(), "b.tar", &run);
    // The same ledger and selection give the same bytes.
    bundle_run(dir.path(), "again.tar", &run);
    let bytes = std::fs::read(dir.path().join("b.tar")).unwrap();
    assert_eq!(bytes, std::fs::read(dir.path().join("again.tar")).unwrap());
    // Offline: a directory with the bundle and nothing else.
    let offline = tempfile::tempdir().unwrap();
    std::fs::write(offline.path().join("b.tar"), &bytes).unwrap();
    let ok = verify_bundle(offline.path(), "b.tar", &vkey);
    let text = expect_ok(&ok);
    assert!(
        text.starts_with("ok: 6 rows of attest.test/bundle, each in the signed tree of 12 entries"),
        "{text}"
    );
    assert!(text.contains("1 older checkpoint(s) consistent"), "{text}");
    let json = attest(
        offline.path(),
        &["verify-bundle", "b.tar", "--vkey", &vkey, "--json"],
    );
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["rows"], 6);
    assert_eq!(report["older_checkpoints"], serde_json::json!([6]));
    assert_eq!(report["signers"][0], vkey.as_str());
    if let Some(out) = python_check(offline.path(), "b.tar", &vkey) {
        exits(&out, 0, "python");
        assert!(
            stdout(&out).starts_with("ok: 6 rows of attest.test/bundle in the signed tree of 12")
        );
    }
    // --since selects by time: every row here.
    expect_ok(&attest(
        dir.path(),
        &[
            "export",
            "--bundle",
            "all.tar",
            "--since",
            "2000-01-01T00:00:00Z",
        ],
    ));
    let all = verify_bundle(dir.path(), "all.tar", &vkey);
    assert!(
        expect_ok(&all).starts_with("ok: 12 rows"),
        "{}",
        stdout(&all)
    );
}

#[test]
fn a_flipped_byte_in_a_row_a_proof_or_a_checkpoint_fails_both_checkers() {
    let (dir, vkey, run) = two_signed_runs();
    bundle_run(dir.path(), "b.tar", &run);
    let bytes = std::fs::read(dir.path().join("b.tar")).unwrap();
    let cases: [(&str, &[u8], &str); 3] = [
        (
            "a row",
            b"\"system\":\"",
            "rows.jsonl line 1 (seq 1): the row hashes to",
        ),
        ("a proof", b"\"proof\":[\"", "proofs.jsonl line "),
        (
            "the checkpoint",
            b"attest.test/bundle\n12\n",
            "checkpoint.note: ",
        ),
    ];
    for (what, marker, named) in cases {
        let offline = tempfile::tempdir().unwrap();
        std::fs::write(offline.path().join("bad.tar"), flip_after(&bytes, marker)).unwrap();
        let out = verify_bundle(offline.path(), "bad.tar", &vkey);
        exits(&out, 1, what);
        assert!(stdout(&out).contains(named), "{what}: {}", stdout(&out));
        if let Some(out) = python_check(offline.path(), "bad.tar", &vkey) {
            exits(&out, 1, what);
            assert!(
                stdout(&out).starts_with("FAILED: "),
                "{what}: {}",
                stdout(&out)
            );
        }
    }
}

#[test]
fn verify_bundle_trusts_only_the_key_it_is_given_and_refuses_what_is_not_a_bundle() {
    let (dir, vkey, run) = two_signed_runs();
    bundle_run(dir.path(), "b.tar", &run);
    let no_key = attest(dir.path(), &["verify-bundle", "b.tar"]);
    assert_eq!(no_key.status.code(), Some(2));
    assert!(
        stderr(&no_key).contains("no trusted verifier key"),
        "{}",
        stderr(&no_key)
    );
    // Another key of the same name: the bundle's own keys.txt is not trusted.
    let other = tempfile::tempdir().unwrap();
    let other_key = expect_ok(&attest(
        other.path(),
        &["keygen", "--name", "attest.test/bundle"],
    ));
    let wrong = verify_bundle(dir.path(), "b.tar", other_key.trim());
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stdout(&wrong).contains("checkpoint.note: "),
        "{}",
        stdout(&wrong)
    );
    // Not a bundle, and a bundle cut short: exit 2 or 1 with a message, never a panic.
    let bytes = std::fs::read(dir.path().join("b.tar")).unwrap();
    std::fs::write(dir.path().join("junk.tar"), b"not a tar archive at all").unwrap();
    std::fs::write(dir.path().join("cut.tar"), &bytes[..bytes.len() / 2]).unwrap();
    for file in ["junk.tar", "cut.tar"] {
        let out = verify_bundle(dir.path(), file, &vkey);
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{file}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "{file}: {}",
            stderr(&out)
        );
        assert!(!stdout(&out).starts_with("ok"), "{file}");
    }
}

#[test]
fn export_bundle_refuses_rows_no_checkpoint_covers_and_needs_a_selection() {
    let (dir, _, _) = two_signed_runs();
    expect_ok(&attest(dir.path(), &["demo"]));
    let out = attest(
        dir.path(),
        &[
            "export",
            "--bundle",
            "b.tar",
            "--since",
            "2000-01-01T00:00:00Z",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("seq 18 is newer than the newest checkpoint (size 12)"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("b.tar").exists());
    let none = attest(dir.path(), &["export", "--bundle", "b.tar"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        stderr(&none).contains("--since TIME or --run ID"),
        "{}",
        stderr(&none)
    );
}

#[test]
fn eu_ai_act_export_maps_each_row_to_article_12_fields() {
    let (dir, _, _) = two_signed_runs();
    let bodies = expect_ok(&attest(dir.path(), &["export"]));
    let records = expect_ok(&attest(dir.path(), &["export", "--format", "eu-ai-act"]));
    let entries: Vec<Value> = bodies
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: Vec<Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 12);
    for ((record, entry), body) in records.iter().zip(&entries).zip(bodies.lines()) {
        assert_eq!(record["record_id"], entry["action_id"]);
        assert_eq!(record["event_time"], entry["ts"]);
        assert_eq!(record["risk_situation"]["risk_tier"], entry["tier"]);
        assert_eq!(record["risk_situation"]["decision"], entry["decision"]);
        assert_eq!(record["operation_monitoring"]["system"], entry["system"]);
        assert_eq!(record["input_data"]["params_sha256"], entry["params_hash"]);
        assert_eq!(record["integrity"]["prev_hash"], entry["prev"]);
        assert_eq!(
            record["integrity"]["record_hash"],
            attest_ledger::to_hex(&attest_ledger::entry_hash(body.as_bytes()))
        );
    }
    // The demo's approved e-mail names its approver under human oversight.
    assert!(records
        .iter()
        .any(|r| r["human_oversight"]["outcome"] == "approved"
            && r["human_oversight"]["approver"].is_string()));
}

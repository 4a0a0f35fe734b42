//! `attest import`: JSON lines of past actions, one transaction, all or nothing.

use serde_json::Value;

use crate::{attest, ledger_file, stderr, stdout};

#[test]
fn import_records_every_line_in_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..250)
        .map(|i| {
            format!(
                "{{\"system\":\"slack\",\"verb\":\"send\",\"target\":\"#ops\",\"agent\":\"bot\",\"params\":{{\"channel\":\"#ops\",\"text\":\"secret {i}\"}},\"result\":{{\"ok\":true,\"ts\":\"{i}.1\"}}}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("past.jsonl"), lines).unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("imported 250 actions as seq 1..=250"),
        "{}",
        stdout(&output)
    );
    let verify = attest(dir.path(), &["verify", "--json"]);
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(
        (report["ok"].clone(), report["checked"].clone()),
        (Value::Bool(true), Value::from(250))
    );
    let export = stdout(&attest(dir.path(), &["export"]));
    let first: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(first["decision"], "recorded");
    assert_eq!(first["verification"]["level"], "acknowledged");
    assert!(
        !export.contains("secret 1"),
        "params text reached the ledger"
    );
}

#[test]
fn a_bad_line_imports_nothing_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("past.jsonl"),
        "{\"system\":\"gmail\",\"verb\":\"send\"}\n{\"system\":\"gmail\",\"verb\":\"sned\"}\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("past.jsonl:2"),
        "{}",
        stderr(&output)
    );
    assert!(!ledger_file(dir.path()).exists());
}

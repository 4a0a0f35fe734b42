use serde_json::Value;

use crate::{attest, demo_ledger, stdout};

#[test]
fn demo_runs_the_four_actions_and_verifies() {
    let dir = demo_ledger();
    let ledger = attest(dir.path(), &["ledger", "--json"]);
    assert_eq!(ledger.status.code(), Some(0));
    let rows: Vec<Value> = serde_json::from_slice(&ledger.stdout).unwrap();
    let summary: Vec<(String, String, Option<String>)> = rows
        .iter()
        .rev()
        .map(|r| {
            (
                format!(
                    "{}.{}",
                    r["system"].as_str().unwrap(),
                    r["verb"].as_str().unwrap()
                ),
                r["decision"].as_str().unwrap().to_owned(),
                r["level"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "gmail.list".into(),
                "act".into(),
                Some("attested-only".into())
            ),
            // Each write: its intent row, then its outcome.
            ("hubspot.update".into(), "act".into(), None),
            // Read back from the demo's own fake of HubSpot's API.
            (
                "hubspot.update".into(),
                "act".into(),
                Some("verified".into())
            ),
            ("gmail.send".into(), "ask".into(), None),
            (
                "gmail.send".into(),
                "ask".into(),
                Some("acknowledged".into())
            ),
            ("stripe.pay".into(), "ask".into(), None),
        ]
    );
    let verify = attest(dir.path(), &["verify"]);
    assert_eq!(verify.status.code(), Some(0));
    assert!(
        stdout(&verify).contains("intact: 6 entries"),
        "{}",
        stdout(&verify)
    );
}

#[test]
fn demo_prints_receipts_ledger_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["demo"]);
    let text = stdout(&output);
    assert!(
        text.contains("rejected, not run (by demo-approver)"),
        "{text}"
    );
    assert!(text.contains("ran (by demo-approver)"), "{text}");
    assert!(text.contains("stripe.pay"), "{text}");
    assert!(text.contains("intact: 6 entries"), "{text}");
}

#[test]
fn demo_run_again_and_in_parallel_grows_one_chain() {
    let dir = demo_ledger();
    let children: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
                .arg("demo")
                .current_dir(dir.path())
                .env_clear()
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let verify = attest(dir.path(), &["verify", "--json"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["checked"], 24);
}

#[test]
fn ledger_limit_and_table() {
    let dir = demo_ledger();
    let output = attest(dir.path(), &["ledger", "--limit", "2"]);
    let text = stdout(&output);
    assert!(
        text.contains("stripe.pay") && text.contains("gmail.send"),
        "{text}"
    );
    assert!(!text.contains("gmail.list"), "{text}");
}

#[test]
fn ledger_shows_each_outcome_and_level() {
    let dir = demo_ledger();
    let text = stdout(&attest(dir.path(), &["ledger"]));
    let line = |action: &str| {
        text.lines()
            .find(|line| line.contains(action))
            .unwrap_or_else(|| panic!("no {action} row:\n{text}"))
            .to_owned()
    };
    assert!(
        line("stripe.pay").ends_with("  rejected by demo-approver"),
        "{text}"
    );
    assert!(
        line("gmail.send").ends_with("  approved by demo-approver, ran"),
        "{text}"
    );
    assert!(line("gmail.send").contains(" acknowledged "), "{text}");
    assert!(line("hubspot.update").ends_with("  ran"), "{text}");
    let rows: Vec<Value> =
        serde_json::from_str(&stdout(&attest(dir.path(), &["ledger", "--json"]))).unwrap();
    let outcomes: Vec<&str> = rows
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "rejected by demo-approver",
            "approved by demo-approver, ran",
            "approved by demo-approver, intent",
            "ran",
            "intent",
            "ran",
        ]
    );
}

#[test]
fn counts_say_entry_for_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.jsonl"),
        "{\"system\":\"slack\",\"verb\":\"send\",\"result\":{\"ok\":true}}\n",
    )
    .unwrap();
    let imported = attest(dir.path(), &["import", "one.jsonl"]);
    assert_eq!(
        imported.status.code(),
        Some(0),
        "{}",
        crate::stderr(&imported)
    );
    let exported = attest(dir.path(), &["export"]);
    assert!(
        crate::stderr(&exported).contains("exported 1 entry\n"),
        "{}",
        crate::stderr(&exported)
    );
    let verified = stdout(&attest(dir.path(), &["verify"]));
    assert!(verified.contains("intact: 1 entry checked"), "{verified}");
}

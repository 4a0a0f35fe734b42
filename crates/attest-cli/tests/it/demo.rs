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
            (
                "hubspot.update".into(),
                "act".into(),
                Some("acknowledged".into())
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

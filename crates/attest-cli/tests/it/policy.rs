//! `attest policy check|test` and the `--policy` option.

use crate::{attest, stderr, stdout};

const BROKEN: &str = "policies:\n  - name: a\n    match: {verb: sned}\n    decision: act\n  - name: b\n    match: {system: x}\n    decision: maybe\n";

#[test]
fn check_prints_every_problem_with_its_line_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.yaml"), BROKEN).unwrap();
    let output = attest(dir.path(), &["policy", "check", "p.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("p.yaml:3:"), "{text}");
    assert!(text.contains("p.yaml:7:"), "{text}");
}

#[test]
fn check_of_the_default_policy_passes() {
    let dir = tempfile::tempdir().unwrap();
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/default.yaml");
    let output = attest(dir.path(), &["policy", "check", default]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn policy_test_runs_cases_and_fails_on_a_wrong_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/examples");
    let ok = attest(
        dir.path(),
        &[
            "policy",
            "test",
            &format!("{examples}/refunds.yaml"),
            &format!("{examples}/refunds.cases.yaml"),
        ],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    std::fs::write(
        dir.path().join("wrong.cases.yaml"),
        "cases:\n  - name: a read must ask (it does not)\n    action: {system: gmail, verb: list}\n    expect: {decision: ask}\n",
    )
    .unwrap();
    let wrong = attest(
        dir.path(),
        &[
            "policy",
            "test",
            &format!("{examples}/refunds.yaml"),
            "wrong.cases.yaml",
        ],
    );
    assert_eq!(
        wrong.status.code(),
        Some(1),
        "{}{}",
        stdout(&wrong),
        stderr(&wrong)
    );
    assert!(stdout(&wrong).contains("FAIL"), "{}", stdout(&wrong));
}

#[test]
fn a_policy_that_does_not_load_stops_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("attest.yaml"), BROKEN).unwrap();
    let output = attest(dir.path(), &["demo"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("attest.yaml:3"),
        "{}",
        stderr(&output)
    );
    assert!(!dir.path().join(".attest/ledger.sqlite").exists());
}

#[test]
fn a_policy_that_refuses_is_used_by_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("strict.yaml"),
        "org:\n  blocked: ['gmail.*']\npolicies:\n  - name: reads\n    match: {verb: list}\n    decision: act\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["--policy", "strict.yaml", "demo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("(gmail.list)\n      decision refuse -> refused, not run"),
        "{text}"
    );
}

#[test]
fn explain_prints_detection_tier_decision_and_each_rule() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(
        dir.path(),
        &[
            "policy",
            "explain",
            "--tool",
            "gmail_send_email",
            "--params",
            r#"{"to": "buyer@rival.example", "body": "Dear [NAME]"}"#,
            "--actor",
            "me@acme.example",
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["system"], "gmail");
    assert_eq!(report["verb"], "send");
    assert_eq!(report["decision"], "ask");
    assert_eq!(report["target_class"], "external");
    assert_eq!(report["hold"], true);
    assert_eq!(
        report["rules_fired"],
        serde_json::json!(["R2", "R3", "external-send"])
    );
    let text = stdout(&attest(
        dir.path(),
        &[
            "policy",
            "explain",
            "--method",
            "GET",
            "--url",
            "https://api.github.com/repos/o/r/issues",
        ],
    ));
    assert!(
        text.contains("system github  verb list") && text.contains("decision act"),
        "{text}"
    );
}

#[test]
fn detect_names_system_verb_and_target() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(
        dir.path(),
        &[
            "detect",
            "--method",
            "POST",
            "--url",
            "https://api.stripe.com/v1/refunds",
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let detection: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(detection["system"], "stripe");
    assert_eq!(detection["verb"], "pay");
    assert_eq!(detection["source"], "url");
    assert_eq!(detection["recognised"], true);
    let unknown = attest(
        dir.path(),
        &["detect", "--function", "frobnicate_widget", "--json"],
    );
    let detection: serde_json::Value = serde_json::from_slice(&unknown.stdout).unwrap();
    assert_eq!(detection["system"], "unknown");
    assert_eq!(detection["recognised"], false);
    let nothing = attest(dir.path(), &["detect"]);
    assert_eq!(nothing.status.code(), Some(2));
}

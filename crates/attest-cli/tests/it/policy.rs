//! `attest policy check|test` and the `--policy` option.

use crate::{attest, stderr, stdout};

const BROKEN: &str = "policies:\n  - name: a\n    match: {verb: sned}\n    decision: act\n  - name: b\n    match: {system: x}\n    decision: maybe\n";

/// `attest policy check p.yaml` of `policy`, which must fail (exit 1): what it printed.
fn check_fails(policy: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.yaml"), policy).unwrap();
    let output = attest(dir.path(), &["policy", "check", "p.yaml"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    stdout(&output)
}

#[test]
fn check_prints_every_problem_with_its_line_and_exits_1() {
    let text = check_fails(BROKEN);
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

/// Issue 53: a tool its server annotates `destructiveHint: true` is judged by `detect` and
/// `policy explain` as `mcp-proxy` judges it (core's one `apply_hints`), and the reason
/// names the annotation.
#[test]
fn detect_and_explain_take_a_tools_annotations_as_the_proxy_does() {
    let dir = tempfile::tempdir().unwrap();
    let call = ["--tool", "frobnicate", "--server", "widgets"];
    let json = |output: &std::process::Output| -> serde_json::Value {
        assert_eq!(output.status.code(), Some(0), "{}", crate::stderr(output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let explain = |extra: &[&str]| {
        let mut args = vec!["policy", "explain"];
        args.extend(call);
        args.extend(extra);
        args.push("--json");
        json(&attest(dir.path(), &args))
    };
    let plain = explain(&[]);
    assert_ne!(plain["tier"], "very_high", "{plain}");
    let annotated = explain(&[
        "--annotations",
        r#"{"destructiveHint": true, "title": "F"}"#,
    ]);
    assert_eq!(annotated["tier"], "very_high", "{annotated}");
    assert_eq!(annotated["decision"], "ask", "{annotated}");
    let reasons = annotated["reasons"].to_string();
    assert!(reasons.contains("destructiveHint: true"), "{reasons}");
    assert_eq!(
        explain(&["--annotations", "destructive"])["tier"],
        "very_high"
    );

    let mut args = vec!["detect"];
    args.extend(call);
    args.extend(["--annotations", "destructive", "--json"]);
    let detected = json(&attest(dir.path(), &args));
    assert_eq!(detected["risk"], "very_high", "{detected}");
    assert_eq!(detected["risk_hint"], "destructiveHint: true", "{detected}");
    let mut args = vec!["detect"];
    args.extend(call);
    args.extend(["--annotations", "destructive"]);
    let said = crate::stdout(&attest(dir.path(), &args));
    assert!(
        said.contains("risk very_high: the tool's own annotation destructiveHint: true"),
        "{said}"
    );

    for (bad, named) in [
        (
            r#"{"destructiveHint": "yes"}"#,
            "destructiveHint must be true or false",
        ),
        (
            r#"{"destructive": true}"#,
            "unknown annotation \"destructive\"",
        ),
        ("dangerous", "unknown hint \"dangerous\""),
    ] {
        let mut args = vec!["detect"];
        args.extend(call);
        args.extend(["--annotations", bad]);
        let output = attest(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert!(
            crate::stderr(&output).contains(named),
            "{}",
            crate::stderr(&output)
        );
    }
}

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/examples");

#[test]
fn every_example_policy_passes_its_cases_through_detection() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["refunds", "acme-mail", "agents", "org"] {
        let cases_file = format!("{EXAMPLES}/{name}.cases.yaml");
        // Every case gives a real call, so detection is what the policy is tested against.
        let cases = std::fs::read_to_string(&cases_file).unwrap();
        assert!(
            !cases.contains("action:") && cases.matches("call:").count() >= 4,
            "{name}: every case gives a call"
        );
        let output = attest(
            dir.path(),
            &[
                "policy",
                "test",
                &format!("{EXAMPLES}/{name}.yaml"),
                &cases_file,
            ],
        );
        let text = stdout(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}:\n{text}{}",
            stderr(&output)
        );
        assert!(!text.contains("FAIL"), "{text}");
        assert!(
            text.ends_with(&format!("cases passed ({cases_file})\n")),
            "{text:?}"
        );
    }
}

#[test]
fn a_case_call_goes_through_detection_and_a_wrong_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        concat!(
            "cases:\n",
            "  - name: the hr server is blocked\n",
            "    call: {tool: list_employees, server: hr}\n",
            "    expect: {decision: refuse, rules: [R0]}\n",
            "  - name: without the server it is some unknown tool, so this fails\n",
            "    call: {tool: list_employees}\n",
            "    expect: {decision: refuse}\n",
            "  - name: a call with both a tool and a url is a mistake\n",
            "    call: {tool: x, method: GET, url: /x}\n",
            "    expect: {decision: act}\n",
        ),
    )
    .unwrap();
    let output = attest(
        dir.path(),
        &["policy", "test", &format!("{EXAMPLES}/org.yaml"), "c.yaml"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("c.yaml:8:5: cases[2]: a call gives either tool"),
        "{}",
        stderr(&output)
    );
    let text = std::fs::read_to_string(dir.path().join("c.yaml")).unwrap();
    let cut = text.find("  - name: a call with both").unwrap();
    std::fs::write(dir.path().join("c.yaml"), &text[..cut]).unwrap();
    let output = attest(
        dir.path(),
        &["policy", "test", &format!("{EXAMPLES}/org.yaml"), "c.yaml"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("ok   the hr server is blocked\nFAIL "),
        "{text}"
    );
    assert!(text.ends_with("1 of 2 cases passed (c.yaml)\n"), "{text:?}");
}

#[test]
fn explain_takes_a_named_server_and_a_target() {
    let dir = tempfile::tempdir().unwrap();
    let org = format!("{EXAMPLES}/org.yaml");
    let explain = |extra: &[&str]| {
        let mut args = vec!["--policy", org.as_str(), "policy", "explain", "--json"];
        args.extend_from_slice(extra);
        let output = attest(dir.path(), &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let hr = explain(&["--tool", "get_employee", "--server", "hr"]);
    assert_eq!(
        (hr["system"].as_str(), hr["decision"].as_str()),
        (Some("hr"), Some("refuse"))
    );
    let board = explain(&[
        "--tool",
        "gmail_send_message",
        "--params",
        r#"{"to": "chair@board.acme.com"}"#,
    ]);
    assert_eq!(board["target"], "message");
    assert_eq!(board["decision"], "ask");
    let refunds = format!("{EXAMPLES}/refunds.yaml");
    let output = attest(
        dir.path(),
        &[
            "--policy",
            &refunds,
            "policy",
            "explain",
            "--method",
            "POST",
            "--url",
            "https://api.stripe.com/v1/refunds",
            "--body",
            r#"{"amount": 1200, "currency": "usd"}"#,
            "--target",
            "refund_9",
            "--json",
        ],
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["target"], "refund_9");
    assert_eq!(report["rules_fired"], serde_json::json!(["small-refund"]));
}

#[test]
fn check_lists_every_mistake_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("eight.yaml"),
        concat!(
            "domains: {internal: [bob@acme.com]}\n",
            "org:\n",
            "  blocked: [\"gmail\"]\n",
            "  approval_required: [\"github.frob\"]\n",
            "policies:\n",
            "  - name: a\n",
            "    match: {verb: sned, target: outside}\n",
            "    decision: maybe\n",
            "  - name: b\n",
            "    match: {params: {/to: {regex: '('}}}\n",
            "    decision: act\n",
            "    approvers: [ann@acme.com]\n",
        ),
    )
    .unwrap();
    let output = attest(dir.path(), &["policy", "check", "eight.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let places: Vec<String> = text
        .lines()
        .map(|line| line.splitn(4, ':').take(3).collect::<Vec<_>>().join(":"))
        .collect();
    assert_eq!(
        places,
        [
            "eight.yaml:1:22",
            "eight.yaml:3:13",
            "eight.yaml:4:23",
            "eight.yaml:7:19",
            "eight.yaml:7:33",
            "eight.yaml:8:15",
            "eight.yaml:9:5",
            "eight.yaml:10:35",
        ],
        "{text}"
    );
    std::fs::write(dir.path().join("empty.yaml"), "").unwrap();
    let output = attest(dir.path(), &["policy", "check", "empty.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output),
        "empty.yaml: empty policy (write `policies: []` for the built-in rules alone)\n"
    );
}

#[test]
fn a_yaml_syntax_error_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.yaml"),
        "version: 1\npolicies:\n  - name: a\n    match: {system: gmail\n    decision: ask\n",
    )
    .unwrap();
    let out = attest(dir.path(), &["policy", "check", "bad.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let text = crate::stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("bad.yaml:5:13: "), "{text}");
}

#[test]
fn explain_shows_a_writes_dedupe_window_and_check_names_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let policy =
        "dedupe: {window: 60s}\npolicies:\n  - name: all\n    match: {}\n    decision: act\n";
    std::fs::write(dir.path().join("p.yaml"), policy).unwrap();
    let explain = |tool: &str, json: bool| {
        let mut args = vec!["--policy", "p.yaml", "policy", "explain", "--tool", tool];
        if json {
            args.push("--json");
        }
        let output = attest(dir.path(), &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output)
    };
    let report: serde_json::Value =
        serde_json::from_str(&explain("gmail_send_email", true)).unwrap();
    assert_eq!(
        report["dedupe"],
        serde_json::json!({"rule": "dedupe", "window": "60s", "decision": "ask"})
    );
    let text = explain("gmail_send_email", false);
    assert!(
        text.contains("dedupe dedupe: the same call again within 60s is asked about"),
        "{text}"
    );
    // A read has no window.
    let read: serde_json::Value =
        serde_json::from_str(&explain("gmail_search_emails", true)).unwrap();
    assert!(read.get("dedupe").is_none(), "{read}");

    std::fs::write(
        dir.path().join("bad.yaml"),
        "dedupe: {window: 60s, decision: act}\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["policy", "check", "bad.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.contains("bad.yaml:1:") && text.contains("expected ask or refuse"),
        "{text}"
    );
}

#[test]
fn check_names_the_line_and_the_expressions_column_of_a_bad_when() {
    let text = check_fails(
        "policies:\n  - name: a\n    match: {}\n    when: \"params.amount >> 5\"\n    decision: ask\n",
    );
    assert!(
        text.contains("p.yaml:4:11:") && text.contains("column 16 of the expression"),
        "{text}"
    );
}

#[test]
fn policy_test_runs_the_conditions_example_at_the_times_its_cases_set() {
    let dir = tempfile::tempdir().unwrap();
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/examples");
    let ok = attest(
        dir.path(),
        &[
            "policy",
            "test",
            &format!("{examples}/conditions.yaml"),
            &format!("{examples}/conditions.cases.yaml"),
        ],
    );
    assert_eq!(ok.status.code(), Some(0), "{}{}", stdout(&ok), stderr(&ok));
    assert!(
        stdout(&ok).contains("15 of 15 cases passed"),
        "{}",
        stdout(&ok)
    );
}

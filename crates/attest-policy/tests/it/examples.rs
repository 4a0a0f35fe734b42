//! The example policies load and lint clean. Their cases give real tool calls, which need
//! detection: `attest policy test` runs them (`attest-cli/tests/it/policy.rs`).

use attest_policy::{lint, run_cases, PolicyEngine};

const EXAMPLES: &[(&str, &str, &str)] = &[
    (
        "refunds",
        include_str!("../../../../policies/examples/refunds.yaml"),
        include_str!("../../../../policies/examples/refunds.cases.yaml"),
    ),
    (
        "acme-mail",
        include_str!("../../../../policies/examples/acme-mail.yaml"),
        include_str!("../../../../policies/examples/acme-mail.cases.yaml"),
    ),
    (
        "agents",
        include_str!("../../../../policies/examples/agents.yaml"),
        include_str!("../../../../policies/examples/agents.cases.yaml"),
    ),
    (
        "org",
        include_str!("../../../../policies/examples/org.yaml"),
        include_str!("../../../../policies/examples/org.cases.yaml"),
    ),
    (
        "conditions",
        include_str!("../../../../policies/examples/conditions.yaml"),
        include_str!("../../../../policies/examples/conditions.cases.yaml"),
    ),
];

#[test]
fn the_conditions_examples_cases_pass_at_the_times_they_set() {
    let (name, policy, cases) = EXAMPLES[4];
    let engine = PolicyEngine::from_yaml(policy, name).unwrap();
    let report = run_cases(&engine, cases, name).unwrap();
    assert!(report.all_passed(), "{report}");
    assert_eq!(report.results.len(), 15);
}

#[test]
fn examples_lint_clean_and_their_call_cases_need_a_resolver() {
    for (name, policy, cases) in EXAMPLES {
        assert_eq!(lint(policy, name), [], "{name}");
        let engine = PolicyEngine::from_yaml(policy, name).unwrap();
        // Without detection a call cannot be decided: such a case fails and says so.
        let report = run_cases(&engine, cases, name).unwrap();
        assert!(report.results.len() >= 4, "{name}");
        for result in report.results.iter().filter(|r| !r.passed) {
            assert!(
                result.failures[0].contains("needs detection"),
                "{name}: {result:?}"
            );
        }
    }
}

#[test]
fn the_refunds_example_names_finance() {
    let engine = PolicyEngine::from_yaml(EXAMPLES[0].1, "refunds").unwrap();
    let action = attest_policy::Action::new("stripe", attest_policy::Verb::Pay)
        .with_target("refund")
        .with_params(serde_json::json!({"amount": 90000, "currency": "usd"}));
    let v = attest_policy::Policy::evaluate(&engine, &action).unwrap();
    assert_eq!(v.approvers, ["finance"]);
    assert_eq!(v.approver_members, ["ann@acme.com", "raj@acme.com"]);
}

#[test]
fn a_failing_case_reports_why() {
    let engine = PolicyEngine::default_policy().unwrap();
    let cases = "cases:\n  - name: sends act\n    action: {system: gmail, verb: send, target: a@b.io}\n    expect: {decision: act, rules: [external-send]}\n";
    let report = run_cases(&engine, cases, "c.yaml").unwrap();
    assert_eq!(report.failed(), 1);
    let failure = &report.results[0].failures[0];
    assert!(failure.contains("expected act, got ask"), "{failure}");
    assert!(
        failure.contains("reaches an external recipient (b.io)"),
        "{failure}"
    );
}

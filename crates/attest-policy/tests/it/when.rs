//! `when:` conditions (CEL) and `calendars:` through the public API: load errors with
//! file, line and the expression's column; the riskiest reading of an expression that
//! fails for a call; time rules across Berlin's summer-time changes; replays that cannot
//! see what a condition reads.

use std::time::SystemTime;

use attest_policy::{lint, Action, Decision, Policy, PolicyEngine, Recorded, Replayed, Verb};
use serde_json::json;

fn at(text: &str) -> SystemTime {
    // A mistyped time reads as 1970 (a Thursday), which the assertions would catch.
    humantime::parse_rfc3339(text).unwrap_or(SystemTime::UNIX_EPOCH)
}

const REFUNDS: &str = r#"
policies:
  - name: risky-refunds
    match: {system: stripe, verb: pay}
    when: "(params.amount > 500 || params.customer_age_days < 30) && agent != 'finance'"
    decision: ask
    reason: big refunds or refunds to new customers ask
  - name: refunds
    match: {system: stripe, verb: pay}
    decision: act
"#;

#[test]
fn a_bad_expression_names_file_line_and_the_expressions_column() {
    let text = "policies:\n  - name: x\n    match: {}\n    when: \"params.amount >> 5\"\n    decision: ask\n";
    let err = PolicyEngine::from_yaml(text, "p.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("p.yaml:4:11: "), "{err}");
    assert!(
        err.contains("column 16 of the expression") && err.contains("params.amount >> 5"),
        "{err}"
    );
    // `policy check` lists it with the others.
    let problems = lint(
        &format!("{text}  - name: y\n    match: {{}}\n    when: \"nope(\"\n    decision: ask\n"),
        "p.yaml",
    );
    assert_eq!(
        problems.iter().map(|p| p.line).collect::<Vec<_>>(),
        [4, 8],
        "{problems:?}"
    );
    // An unknown variable and an unknown calendar are load errors, not run-time surprises.
    let err = PolicyEngine::from_yaml(
        "policies:\n  - name: x\n    match: {}\n    when: \"amount > 5\"\n    decision: ask\n",
        "p.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("unknown variable \"amount\""), "{err}");
    let text =
        "policies:\n  - name: x\n    match: {}\n    when: calendar.office\n    decision: ask\n";
    let err = PolicyEngine::from_yaml(text, "p.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reads calendar.office, which calendars: does not define"),
        "{err}"
    );
    assert_eq!(lint(text, "p.yaml").len(), 1);
}

#[test]
fn or_not_and_two_params_decide_and_the_reason_says_which_when_held() {
    let policy = PolicyEngine::from_yaml(REFUNDS, "refunds.yaml").unwrap();
    let now = SystemTime::now();
    let refund = |amount: i64, age: i64, agent: &str| {
        Action::new("stripe", Verb::Pay)
            .with_agent(agent)
            .with_params(json!({"amount": amount, "customer_age_days": age}))
    };
    let v = policy
        .evaluate_at(&refund(900, 400, "support"), now)
        .unwrap();
    assert_eq!(
        (v.decision, v.rules_fired.as_slice()),
        (Decision::Ask, &["risky-refunds".to_owned()][..])
    );
    assert!(
        v.reasons[0].contains("(when: (params.amount > 500"),
        "{:?}",
        v.reasons
    );
    let v = policy.evaluate_at(&refund(20, 3, "support"), now).unwrap();
    assert_eq!(v.decision, Decision::Ask);
    let v = policy
        .evaluate_at(&refund(20, 400, "support"), now)
        .unwrap();
    assert_eq!(
        (v.decision, v.rules_fired.as_slice()),
        (Decision::Act, &["refunds".to_owned()][..])
    );
    let v = policy.evaluate_at(&refund(900, 3, "finance"), now).unwrap();
    assert_eq!(v.decision, Decision::Act);
}

#[test]
fn an_expression_that_fails_for_a_call_takes_the_riskiest_reading() {
    let policy = PolicyEngine::from_yaml(
        &format!(
            "{REFUNDS}  - name: small-sends-act\n    match: {{verb: send}}\n    when: params.size < 10\n    decision: act\n"
        ),
        "refunds.yaml",
    )
    .unwrap();
    let now = SystemTime::now();
    // No amount, and an amount that is text: the ask rule applies, and says why.
    for params in [
        json!({"customer_age_days": 400}),
        json!({"amount": "lots", "customer_age_days": 400}),
    ] {
        let pay = Action::new("stripe", Verb::Pay)
            .with_agent("support")
            .with_params(params.clone());
        let v = policy.evaluate_at(&pay, now).unwrap();
        assert_eq!(v.decision, Decision::Ask, "{params}");
        assert_eq!(v.rules_fired, ["risky-refunds"]);
        assert!(
            v.reasons[0].contains("could not be judged")
                && v.reasons[0].contains("the riskiest reading, the rule applies"),
            "{:?}",
            v.reasons
        );
    }
    // An act rule whose condition fails does not apply: R4 asks for the send.
    let send = Action::new("gmail", Verb::Send).with_params(json!({"body": "hi"}));
    let v = policy.evaluate_at(&send, now).unwrap();
    assert_eq!(
        (v.decision, v.rules_fired.last().map(String::as_str)),
        (Decision::Ask, Some("R4"))
    );
    let small = Action::new("gmail", Verb::Send).with_params(json!({"size": 3}));
    assert_eq!(
        policy.evaluate_at(&small, now).unwrap().decision,
        Decision::Act
    );
}

const DEPLOYS: &str = r#"
calendars:
  office_hours: {zone: Europe/Berlin, days: [mon, tue, wed, thu, fri], hours: "09:00-17:00"}
policies:
  - name: no-friday-or-weekend-deploys
    match: {system: github, verb: execute}
    when: >-
      now.getDayOfWeek('Europe/Berlin') in [0, 6] ||
      (now.getDayOfWeek('Europe/Berlin') == 5 && now.getHours('Europe/Berlin') >= 16)
    decision: refuse
    reason: no deploys on Friday after 16:00 or at weekends
  - name: deploys
    match: {system: github, verb: execute}
    decision: act
  - name: sends-outside-office-hours
    match: {verb: send}
    when: "!calendar.office_hours"
    decision: ask
  - name: sends
    match: {verb: send}
    decision: act
"#;

#[test]
fn time_rules_follow_berlin_across_the_summer_time_change() {
    let policy = PolicyEngine::from_yaml(DEPLOYS, "deploys.yaml").unwrap();
    let deploy = Action::new("github", Verb::Execute);
    let send = Action::new("gmail", Verb::Send);
    let decide =
        |action: &Action, when: &str| policy.evaluate_at(action, at(when)).unwrap().decision;
    // Friday 2026-03-27, winter time (UTC+1): 14:30 UTC is 15:30 in Berlin, 15:30 UTC is 16:30.
    assert_eq!(decide(&deploy, "2026-03-27T14:30:00Z"), Decision::Act);
    assert_eq!(decide(&deploy, "2026-03-27T15:30:00Z"), Decision::Refuse);
    // Friday 2026-04-03, summer time (UTC+2): 14:30 UTC is already 16:30 in Berlin.
    assert_eq!(decide(&deploy, "2026-04-03T13:30:00Z"), Decision::Act);
    assert_eq!(decide(&deploy, "2026-04-03T14:30:00Z"), Decision::Refuse);
    // Sunday 2026-03-29 01:30 UTC is 03:30 Berlin summer time, a weekend; Thursday 22:30
    // UTC on 2026-03-26 is 23:30 Thursday in Berlin, and 23:30 UTC is Friday 00:30.
    assert_eq!(decide(&deploy, "2026-03-29T01:30:00Z"), Decision::Refuse);
    assert_eq!(decide(&deploy, "2026-03-26T22:30:00Z"), Decision::Act);
    // Office hours: 16:30 UTC is 17:30 in summer (asks) and 17:30 in winter too, but
    // 15:30 UTC is inside in winter (16:30) and inside in summer (17:30 is not).
    assert_eq!(decide(&send, "2026-03-27T15:30:00Z"), Decision::Act);
    assert_eq!(decide(&send, "2026-03-30T15:30:00Z"), Decision::Ask);
    assert_eq!(decide(&send, "2026-03-30T07:30:00Z"), Decision::Act);
    assert_eq!(decide(&send, "2026-03-27T07:30:00Z"), Decision::Ask);
}

#[test]
fn a_replay_cannot_judge_what_the_row_does_not_keep() {
    let policy = PolicyEngine::from_yaml(REFUNDS, "refunds.yaml").unwrap();
    let pay = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 900}));
    let partial = Recorded {
        params_complete: false,
        placeholders: Some(false),
        at: Some(at("2026-03-27T10:00:00Z")),
    };
    assert_eq!(
        policy.replay(&pay, partial),
        Replayed::Undecidable {
            rule: "risky-refunds".to_owned()
        }
    );
    let complete = Recorded {
        params_complete: true,
        ..partial
    };
    let Replayed::Decided(v) = policy.replay(&pay, complete) else {
        panic!("the params are known")
    };
    assert_eq!(v.decision, Decision::Ask);
    // A time rule over a row without a time is undecidable; with the row's time, decided.
    let deploys = PolicyEngine::from_yaml(DEPLOYS, "deploys.yaml").unwrap();
    let deploy = Action::new("github", Verb::Execute);
    let timeless = Recorded {
        at: None,
        ..complete
    };
    assert_eq!(
        deploys.replay(&deploy, timeless),
        Replayed::Undecidable {
            rule: "no-friday-or-weekend-deploys".to_owned()
        }
    );
    let friday_evening = Recorded {
        at: Some(at("2026-03-27T17:00:00Z")),
        ..complete
    };
    let Replayed::Decided(v) = deploys.replay(&deploy, friday_evening) else {
        panic!("the row's time is known")
    };
    assert_eq!(v.decision, Decision::Refuse);
}

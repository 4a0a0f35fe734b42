//! What happened earlier in the run (`run.did`, `run.touched`, `agent.…` over a period)
//! and `labels:`, through the public API: the reads a call needs (none unless a rule
//! that asks history matches it), the marks an action leaves, the answers handed back,
//! the riskiest reading when they are missing, and the load errors.

use std::time::SystemTime;

use attest_policy::{
    lint, Action, Decision, History, Policy, PolicyEngine, Recorded, Replayed, Verb,
};
use serde_json::json;

use crate::engine;

const FLOW: &str = r#"
labels:
  sensitive: {paths: ["*/secrets/*", "secrets/*"], tables: [customers]}
policies:
  - name: no-sends-after-sensitive-reads
    match: {verb: send}
    when: "run.touched('sensitive') || agent.did('stripe.pay', '1h')"
    decision: ask
    reason: this run read something sensitive
  - name: sends
    match: {verb: send}
    decision: act
"#;

fn in_run(mut action: Action, run: &str) -> Action {
    action.run_id = Some(run.to_owned());
    action
}

fn read(path: &str) -> Action {
    let read = Action::new("files", Verb::Read)
        .with_target("file")
        .with_params(json!({"file_path": path}))
        .with_agent("bot");
    in_run(read, "run-1")
}

fn send() -> Action {
    let send = Action::new("gmail", Verb::Send)
        .with_params(json!({"to": "x@rival.io"}))
        .with_agent("bot");
    in_run(send, "run-1")
}

/// The verdict on `action` after the run did `earlier`, answered from their marks.
#[cfg(test)] // Lets clippy see a test helper, which may panic.
fn after(policy: &PolicyEngine, earlier: &[Action], action: &Action) -> attest_policy::Verdict {
    let marks: Vec<_> = earlier.iter().flat_map(|a| policy.marks(a)).collect();
    let history = History::from_marks(&policy.history_reads(action), &marks);
    policy
        .evaluate_with(action, SystemTime::now(), &history)
        .unwrap()
}

#[test]
fn a_send_after_a_sensitive_read_in_the_same_run_asks() {
    let policy = engine(FLOW);
    let v = after(&policy, &[read("/app/secrets/x")], &send());
    assert_eq!(v.decision, Decision::Ask, "{v:?}");
    assert_eq!(v.rules_fired, ["R2", "no-sends-after-sensitive-reads"]);
    assert!(v.reasons[1].contains("held"), "{:?}", v.reasons);
    // A read of something else, or the sensitive read in another run: the send acts.
    let v = after(&policy, &[read("/app/src/main.rs")], &send());
    assert_eq!(
        (v.decision, v.rules_fired.last().map(String::as_str)),
        (Decision::Act, Some("sends"))
    );
    let other_run = in_run(read("/app/secrets/x"), "run-2");
    let v = after(&policy, &[other_run], &send());
    assert_eq!(v.decision, Decision::Act, "{v:?}");
    // The agent's own payment within the hour counts in any run.
    let paid = in_run(Action::new("stripe", Verb::Pay).with_agent("bot"), "run-9");
    assert_eq!(after(&policy, &[paid], &send()).decision, Decision::Ask);
}

#[test]
fn only_a_call_a_history_rule_matches_needs_a_read() {
    let policy = engine(FLOW);
    assert!(policy.asks_history());
    let reads = policy.history_reads(&send());
    let questions: Vec<&str> = reads.iter().map(|r| r.question.as_str()).collect();
    assert_eq!(
        questions,
        [
            "run.touched(\"sensitive\")",
            "agent.did(\"stripe.pay\", 3600s)"
        ]
    );
    assert!(reads[0].key.as_deref().is_some_and(|k| k.contains("run-1")));
    assert_eq!(reads[1].per_secs, 3600);
    // A read matches no rule that asks history: nothing to read.
    assert!(policy.history_reads(&read("/app/secrets/x")).is_empty());
    // A policy without history questions reads nothing, ever.
    let plain = engine("policies:\n  - name: s\n    match: {verb: send}\n    decision: act\n");
    assert!(!plain.asks_history());
    assert!(plain.history_reads(&send()).is_empty());
    assert!(plain.marks(&read("/app/secrets/x")).is_empty());
    // A send without a run is asked about nothing under a run: answered no.
    let mut no_run = send();
    no_run.run_id = None;
    let reads = policy.history_reads(&no_run);
    assert_eq!(reads[0].key, None);
}

#[test]
fn marks_name_the_run_and_the_agent_only_for_what_was_asked() {
    let policy = engine(FLOW);
    let marks = policy.marks(&read("/app/secrets/x"));
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert!(marks[0].key.contains("run-1") && marks[0].key.contains("sensitive"));
    assert!(policy.marks(&read("/app/src/x")).is_empty());
    let paid = Action::new("stripe", Verb::Pay).with_agent("bot");
    let marks = policy.marks(&paid);
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(marks[0].per_secs, 3600);
}

#[test]
fn unanswered_history_is_the_riskiest_reading_and_replay_calls_it_undecidable() {
    let policy = engine(FLOW);
    // Decided without the answers (a caller that did not gather them): the ask applies.
    let v = policy.evaluate(&send()).unwrap();
    assert_eq!(v.decision, Decision::Ask);
    assert!(
        v.reasons[1].contains("could not be judged") && v.reasons[1].contains("history"),
        "{:?}",
        v.reasons
    );
    let recorded = Recorded {
        params_complete: true,
        placeholders: Some(false),
        at: Some(SystemTime::now()),
    };
    assert_eq!(
        policy.replay(&send(), recorded),
        Replayed::Undecidable {
            rule: "no-sends-after-sensitive-reads".to_owned()
        }
    );
    let none = History::from_marks(&policy.history_reads(&send()), &[]);
    let Replayed::Decided(v) = policy.replay_with(&send(), recorded, Some(&none)) else {
        panic!("decidable with the run's history")
    };
    assert_eq!(v.decision, Decision::Act);
}

#[test]
fn bad_history_questions_and_undefined_labels_are_load_errors() {
    for (when, wanted) in [
        ("run.did(params.x)", "literal strings"),
        ("actor.did('x.read')", "literal strings"),
        ("run.did('nopattern')", "names no verb"),
        ("agent.touched('sensitive', 'soon')", "not a duration"),
        (
            "run.touched('secret')",
            "labels: does not define \\\"secret\\\"",
        ),
    ] {
        let text = format!(
            "labels:\n  sensitive: {{systems: [hr]}}\npolicies:\n  - name: r\n    match: {{}}\n    when: \"{when}\"\n    decision: ask\n"
        );
        let problems = lint(&text, "p.yaml");
        assert_eq!(problems.len(), 1, "{when}: {problems:?}");
        let shown = format!("{:?}", problems[0]);
        assert!(shown.contains(wanted), "{when}: {shown}");
    }
    let problems = lint("labels:\n  sensitive: {}\n", "p.yaml");
    assert!(problems.len() == 1 && problems[0].line == 2, "{problems:?}");
}

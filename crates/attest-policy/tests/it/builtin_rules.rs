//! Each built-in rule alone, then in combination.

use attest_policy::{Action, Decision, Policy, PolicyEngine, Risk, TargetClass, Verb};
use serde_json::json;

use crate::{decide, engine};

fn fired(v: &attest_policy::Verdict) -> Vec<&str> {
    v.rules_fired.iter().map(String::as_str).collect()
}

#[test]
fn r0_blocked_refuses_even_reads() {
    let policy = engine("org: {blocked: [\"hr.*\"]}\n");
    let v = decide(&policy, &Action::new("hr", Verb::Read));
    assert_eq!(v.decision, Decision::Refuse);
    assert_eq!(fired(&v), ["R0"]);
    assert!(
        v.reasons[0].contains("blocks hr.read (org rule hr.*)"),
        "{:?}",
        v.reasons
    );
}

#[test]
fn r0_approval_required_asks() {
    let policy = engine("org: {approval_required: [\"github.approve\"]}\n");
    let v = decide(&policy, &Action::new("github", Verb::Approve));
    assert_eq!(v.decision, Decision::Ask);
    // R4 agrees (approve is high risk), so it is listed too.
    assert_eq!(fired(&v), ["R0", "R4"]);
    let read = decide(
        &engine("org: {approval_required: [\"github.*\"]}\n"),
        &Action::new("github", Verb::List),
    );
    assert_eq!(read.decision, Decision::Ask);
    // R4 would act on a read: it did not decide, so it is not listed.
    assert_eq!(fired(&read), ["R0"]);
}

#[test]
fn r0_target_globs() {
    let policy = engine("org: {blocked: [\"gmail.send:*@rival.io\"]}\n");
    let to_rival = Action::new("gmail", Verb::Send).with_target("ceo@rival.io");
    assert_eq!(decide(&policy, &to_rival).decision, Decision::Refuse);
    let to_friend = Action::new("gmail", Verb::Send).with_target("ceo@friend.io");
    assert_eq!(decide(&policy, &to_friend).decision, Decision::Ask);
}

#[test]
fn r0_blocked_beats_everything() {
    let policy = engine(concat!(
        "org: {blocked: [\"stripe.pay\"], approval_required: [\"stripe.*\"]}\n",
        "agents:\n",
        "  bot: [{name: bot-pays, match: {}, decision: act}]\n",
        "policies: [{name: all-act, match: {}, decision: act}]\n",
    ));
    let action = Action::new("stripe", Verb::Pay)
        .with_agent("bot")
        .with_risk(Risk::Low)
        .with_params(json!({"note": "for [Client]"}));
    let v = decide(&policy, &action);
    assert_eq!(v.decision, Decision::Refuse);
    assert_eq!(fired(&v), ["R0"]);
    assert!(!v.hold);
}

#[test]
fn r1_notes_someone_elses_connection() {
    let policy = engine("policies: []\n");
    let action = Action::new("gmail", Verb::List)
        .with_owner("ann@acme.com")
        .with_actor("bob@acme.com");
    let v = decide(&policy, &action);
    assert_eq!(fired(&v), ["R1", "R4"]);
    assert_eq!(
        v.reasons[0],
        "runs on ann@acme.com's connection on behalf of bob@acme.com"
    );
    assert_eq!(v.decision, Decision::Act);
    let own = decide(
        &policy,
        &Action::new("gmail", Verb::List)
            .with_owner("Ann@Acme.com")
            .with_actor("ann@acme.com"),
    );
    assert_eq!(fired(&own), ["R4"]);
}

#[test]
fn r2_classifies_recipients_and_the_worst_wins() {
    let policy = engine("domains: {internal: [acme.com], known: [partner.io]}\n");
    let class = |params: serde_json::Value| {
        let v = decide(
            &policy,
            &Action::new("gmail", Verb::Send).with_params(params),
        );
        (
            v.target_class,
            v.reasons.first().cloned().unwrap_or_default(),
        )
    };
    assert_eq!(class(json!({"to": "a@acme.com"})).0, TargetClass::Internal);
    assert_eq!(
        class(json!({"to": "a@eu.acme.com"})).0,
        TargetClass::Internal
    );
    assert_eq!(
        class(json!({"to": "a@partner.io", "cc": ["b@acme.com"]})).0,
        TargetClass::Known
    );
    let (worst, reason) =
        class(json!({"to": "a@acme.com", "bcc": "x@evil.io", "cc": "k@partner.io"}));
    assert_eq!(worst, TargetClass::External);
    assert_eq!(reason, "reaches an external recipient (evil.io)");
    assert_eq!(class(json!({"body": "no one"})).0, TargetClass::None);
    assert_eq!(
        class(json!({"event": {"attendees": [{"email": "x@evil.io"}]}})).0,
        TargetClass::External
    );
    for key in [
        "email",
        "emails",
        "recipients",
        "share_with",
        "invitees",
        "members",
    ] {
        assert_eq!(
            class(json!({ key: ["z@elsewhere.org"] })).0,
            TargetClass::External,
            "{key}"
        );
    }
}

#[test]
fn r2_the_actors_domain_is_internal() {
    let policy = engine("policies: []\n");
    let action = Action::new("gmail", Verb::Send)
        .with_actor("ann@home.co.uk")
        .with_target("bob@mail.home.co.uk");
    let v = decide(&policy, &action);
    assert_eq!(v.target_class, TargetClass::Internal);
    assert_eq!(v.reasons[0], "reaches internal recipients only");
}

#[test]
fn r2_only_classifies_writes_and_respects_a_given_class() {
    let policy = engine("policies: []\n");
    let read = decide(
        &policy,
        &Action::new("gmail", Verb::Search).with_target("x@evil.io"),
    );
    assert_eq!(read.target_class, TargetClass::None);
    assert_eq!(fired(&read), ["R4"]);
    let mut given = Action::new("gmail", Verb::Send).with_target("x@evil.io");
    given.target_class = Some(TargetClass::Internal);
    let v = decide(&policy, &given);
    assert_eq!(v.target_class, TargetClass::Internal);
    assert_eq!(
        v.reasons[0],
        "target class internal, as given by the caller"
    );
}

#[test]
fn r3_placeholders_ask_and_hold() {
    let policy = engine("policies: []\n");
    for body in [
        "Dear [Client Name],",
        "Hi {{first_name}}",
        "Regards, <SENDER NAME>",
    ] {
        let action = Action::new("docs", Verb::Update).with_params(json!({ "body": body }));
        let v = decide(&policy, &action);
        assert_eq!(v.decision, Decision::Ask, "{body}");
        assert!(v.hold, "{body}");
        assert_eq!(fired(&v), ["R3"], "{body}");
        assert!(
            v.reasons[0].ends_with("in /body: fill before it leaves"),
            "{:?}",
            v.reasons
        );
    }
}

#[test]
fn r3_hold_beats_a_yaml_act() {
    let policy = engine(
        "policies: [{name: mail-acts, match: {verb: send}, decision: act, reason: mail acts}]\n",
    );
    let action = Action::new("gmail", Verb::Send).with_params(json!({"body": "Hello {{name}}"}));
    let v = decide(&policy, &action);
    assert_eq!(v.decision, Decision::Ask);
    assert!(v.hold);
    assert_eq!(fired(&v), ["R3", "mail-acts"]);
    assert_eq!(v.reasons[1], "mail acts (but R3 makes it ask)");
}

#[test]
fn r3_under_a_yaml_refuse_refuses_without_hold() {
    let policy = engine("policies: [{name: no, match: {}, decision: refuse}]\n");
    let action = Action::new("gmail", Verb::Send).with_params(json!({"body": "Hello {{name}}"}));
    let v = decide(&policy, &action);
    assert_eq!(v.decision, Decision::Refuse);
    assert!(!v.hold);
}

#[test]
fn r4_by_tier() {
    let policy = engine("policies: []\n");
    let cases = [
        (Verb::Read, Decision::Act),
        (Verb::Update, Decision::Act),
        (Verb::Upload, Decision::Act),
        (Verb::Create, Decision::Ask),
        (Verb::Execute, Decision::Ask),
        (Verb::Delete, Decision::Ask),
        (Verb::Pay, Decision::Ask),
    ];
    for (verb, want) in cases {
        let v = decide(&policy, &Action::new("x", verb));
        assert_eq!(v.decision, want, "{verb}");
        assert_eq!(fired(&v), ["R4"]);
    }
    let mut unrecognised = Action::new("unknown", Verb::Update);
    unrecognised.recognised = false;
    let v = decide(&policy, &unrecognised);
    assert_eq!((v.tier, v.decision), (Risk::High, Decision::Ask));
}

#[test]
fn tier_explicit_wins_over_overrides() {
    let policy = engine("risk: {\"crm.update\": very_high}\n");
    let v = decide(&policy, &Action::new("crm", Verb::Update));
    assert_eq!((v.tier, v.decision), (Risk::VeryHigh, Decision::Ask));
    let v = decide(
        &policy,
        &Action::new("crm", Verb::Update).with_risk(Risk::Low),
    );
    assert_eq!((v.tier, v.decision), (Risk::Low, Decision::Act));
}

#[test]
fn per_agent_rules_come_before_global_rules() {
    let policy = engine(concat!(
        "agents:\n",
        "  support-*:\n",
        "    - {name: support-acts, match: {system: zendesk}, decision: act}\n",
        "policies:\n",
        "  - {name: zendesk-asks, match: {system: zendesk}, decision: ask}\n",
    ));
    let action = Action::new("zendesk", Verb::Reply);
    let support = decide(&policy, &action.clone().with_agent("support-eu"));
    assert_eq!(
        (support.decision, fired(&support)),
        (Decision::Act, vec!["support-acts"])
    );
    let other = decide(&policy, &action.clone().with_agent("sales"));
    assert_eq!(
        (other.decision, fired(&other)),
        (Decision::Ask, vec!["zendesk-asks"])
    );
    let anonymous = decide(&policy, &action);
    assert_eq!(fired(&anonymous), ["zendesk-asks"]);
}

#[test]
fn agent_rules_that_do_not_match_fall_through_to_global() {
    let policy = engine(concat!(
        "agents: {bot: [{name: bot-slack, match: {system: slack}, decision: act}]}\n",
        "policies: [{name: global, match: {}, decision: ask}]\n",
    ));
    let v = decide(&policy, &Action::new("gmail", Verb::List).with_agent("bot"));
    assert_eq!(fired(&v), ["global"]);
}

#[test]
fn the_first_matching_rule_wins() {
    let policy = engine(concat!(
        "policies:\n",
        "  - {name: first, match: {verb: send}, decision: act}\n",
        "  - {name: second, match: {verb: send}, decision: refuse}\n",
        "  - {name: third, match: {}, decision: ask}\n",
    ));
    let v = decide(&policy, &Action::new("gmail", Verb::Send));
    assert_eq!((v.decision, fired(&v)), (Decision::Act, vec!["first"]));
    let v = decide(&policy, &Action::new("gmail", Verb::List));
    assert_eq!((v.decision, fired(&v)), (Decision::Ask, vec!["third"]));
}

#[test]
fn groups_resolve_to_members() {
    let policy = engine(concat!(
        "groups: {finance: [ann@acme.com, raj@acme.com], legal: [lee@acme.com, ann@acme.com]}\n",
        "policies:\n",
        "  - {name: pay, match: {verb: pay}, decision: ask, approvers: [finance, legal, cfo@acme.com]}\n",
    ));
    let v = decide(&policy, &Action::new("stripe", Verb::Pay));
    assert_eq!(v.approvers, ["finance", "legal", "cfo@acme.com"]);
    assert_eq!(
        v.approver_members,
        [
            "ann@acme.com",
            "raj@acme.com",
            "lee@acme.com",
            "cfo@acme.com"
        ]
    );
}

#[test]
fn approvers_are_kept_when_r0_also_asks() {
    let policy = engine(concat!(
        "org: {approval_required: [\"stripe.*\"]}\n",
        "policies: [{name: pay, match: {verb: pay}, decision: ask, approvers: [cfo@acme.com]}]\n",
    ));
    let v = decide(&policy, &Action::new("stripe", Verb::Pay));
    assert_eq!(fired(&v), ["R0", "pay"]);
    assert_eq!(v.approver_members, ["cfo@acme.com"]);
}

#[test]
fn every_rule_in_one_verdict() {
    let policy = engine(concat!(
        "domains: {internal: [acme.com]}\n",
        "org: {approval_required: [\"gmail.send\"]}\n",
        "policies: [{name: external, match: {target: external}, decision: ask}]\n",
    ));
    let action = Action::new("gmail", Verb::Send)
        .with_owner("ann@acme.com")
        .with_actor("bob@acme.com")
        .with_params(json!({"to": "x@evil.io", "body": "Dear [Name]"}));
    let v = decide(&policy, &action);
    assert_eq!(fired(&v), ["R0", "R1", "R2", "R3", "external"]);
    assert_eq!(v.reasons.len(), v.rules_fired.len());
    assert_eq!(
        (v.decision, v.hold, v.target_class),
        (Decision::Ask, true, TargetClass::External)
    );
}

#[test]
fn the_engine_is_a_policy_object() {
    let policy: Box<dyn Policy> = Box::new(PolicyEngine::default_policy().unwrap());
    assert_eq!(
        policy
            .evaluate(&Action::new("x", Verb::Get))
            .unwrap()
            .decision,
        Decision::Act
    );
}

//! The default policy on a table of realistic actions.

use attest_policy::{
    lint, Action, Decision, PolicyEngine, Risk, TargetClass, Verb, DEFAULT_POLICY_YAML,
};
use serde_json::{json, Value};

use crate::decide;

struct Row {
    what: &'static str,
    system: &'static str,
    verb: Verb,
    target: Option<&'static str>,
    params: Value,
    recognised: bool,
    decision: Decision,
    rule: &'static str,
}

fn row(
    what: &'static str,
    system: &'static str,
    verb: Verb,
    target: Option<&'static str>,
    params: Value,
    decision: Decision,
    rule: &'static str,
) -> Row {
    Row {
        what,
        system,
        verb,
        target,
        params,
        recognised: true,
        decision,
        rule,
    }
}

fn table() -> Vec<Row> {
    use Decision::{Act, Ask};
    let none = json!({});
    let mut rows = vec![
        row(
            "read an email",
            "gmail",
            Verb::Read,
            Some("msg_1"),
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "search the inbox",
            "gmail",
            Verb::Search,
            None,
            json!({"q": "invoice"}),
            Act,
            "reads",
        ),
        row(
            "list calendar events",
            "google_calendar",
            Verb::List,
            None,
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "get a stripe customer",
            "stripe",
            Verb::Get,
            Some("cus_1"),
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "list github issues",
            "github",
            Verb::List,
            Some("acme/app"),
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "read a notion page",
            "notion",
            Verb::Read,
            Some("page_1"),
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "search slack",
            "slack",
            Verb::Search,
            None,
            json!({"query": "deploy"}),
            Act,
            "reads",
        ),
        row(
            "get a drive file",
            "google_drive",
            Verb::Get,
            Some("file_9"),
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "read from an unknown system",
            "unknown",
            Verb::Read,
            None,
            none.clone(),
            Act,
            "reads",
        ),
        row(
            "send mail outside",
            "gmail",
            Verb::Send,
            None,
            json!({"to": "client@bigcorp.com", "subject": "Quote"}),
            Ask,
            "external-send",
        ),
        row(
            "reply outside",
            "gmail",
            Verb::Reply,
            Some("thread_1"),
            json!({"to": ["x@vendor.io"]}),
            Ask,
            "external-send",
        ),
        row(
            "share a doc outside",
            "google_drive",
            Verb::Share,
            Some("file_1"),
            json!({"share_with": "auditor@kpmg.com", "role": "reader"}),
            Ask,
            "external-send",
        ),
        row(
            "upload to a customer's dropbox",
            "dropbox",
            Verb::Upload,
            None,
            json!({"recipients": ["ops@customer.org"], "path": "/q3.pdf"}),
            Ask,
            "external-send",
        ),
        row(
            "invite an outsider",
            "google_calendar",
            Verb::Send,
            None,
            json!({"attendees": [{"email": "guest@gmail.com"}]}),
            Ask,
            "external-send",
        ),
        row(
            "outlook mail with a cc outside",
            "outlook",
            Verb::Send,
            None,
            json!({"to": "a@acme.com", "cc": "b@other.net"}),
            Ask,
            "external-send",
        ),
        row(
            "delete an email",
            "gmail",
            Verb::Delete,
            Some("msg_1"),
            none.clone(),
            Ask,
            "delete-and-pay",
        ),
        row(
            "delete a repo",
            "github",
            Verb::Delete,
            Some("acme/old"),
            none.clone(),
            Ask,
            "delete-and-pay",
        ),
        row(
            "delete a calendar event",
            "google_calendar",
            Verb::Delete,
            Some("evt_1"),
            none.clone(),
            Ask,
            "delete-and-pay",
        ),
        row(
            "pay an invoice",
            "stripe",
            Verb::Pay,
            Some("in_1"),
            json!({"amount": 1200}),
            Ask,
            "delete-and-pay",
        ),
        row(
            "refund a charge",
            "stripe",
            Verb::Pay,
            Some("re_1"),
            json!({"amount": 100, "currency": "usd"}),
            Ask,
            "delete-and-pay",
        ),
        row(
            "wire money",
            "bank",
            Verb::Pay,
            None,
            json!({"amount": 99}),
            Ask,
            "delete-and-pay",
        ),
        row(
            "write to an unknown system",
            "unknown",
            Verb::Write,
            None,
            json!({"x": 1}),
            Ask,
            "unknown-system-write",
        ),
        row(
            "update on an unknown system",
            "unknown",
            Verb::Update,
            None,
            none.clone(),
            Ask,
            "unknown-system-write",
        ),
        row(
            "create on an unknown system",
            "unknown",
            Verb::Create,
            None,
            none.clone(),
            Ask,
            "unknown-system-write",
        ),
        row(
            "update a notion page",
            "notion",
            Verb::Update,
            Some("page_1"),
            json!({"title": "Plan"}),
            Act,
            "R4",
        ),
        row(
            "upload a file internally",
            "google_drive",
            Verb::Upload,
            None,
            json!({"path": "/notes.txt"}),
            Act,
            "R4",
        ),
        row(
            "create a github issue",
            "github",
            Verb::Create,
            Some("acme/app"),
            json!({"title": "Bug"}),
            Ask,
            "R4",
        ),
        row(
            "post in slack",
            "slack",
            Verb::Send,
            Some("#general"),
            json!({"text": "Deployed"}),
            Ask,
            "R4",
        ),
        row(
            "run a deploy",
            "github",
            Verb::Execute,
            Some("deploy.yml"),
            none.clone(),
            Ask,
            "R4",
        ),
        row(
            "approve a pull request",
            "github",
            Verb::Approve,
            Some("acme/app#3"),
            none.clone(),
            Ask,
            "R4",
        ),
        row(
            "a template email",
            "gmail",
            Verb::Send,
            None,
            json!({"to": "a@x.io", "body": "Dear [Client Name],"}),
            Ask,
            "R3",
        ),
        row(
            "a template doc update",
            "notion",
            Verb::Update,
            None,
            json!({"text": "Hello {{name}}"}),
            Ask,
            "R3",
        ),
    ];
    let mut unrecognised = row(
        "an unrecognised write",
        "acme_erp",
        Verb::Update,
        None,
        none,
        Ask,
        "R4",
    );
    unrecognised.recognised = false;
    rows.push(unrecognised);
    rows
}

#[test]
fn the_default_policy_on_realistic_actions() {
    let policy = PolicyEngine::default_policy().unwrap();
    let rows = table();
    assert!(rows.len() >= 30);
    for r in rows {
        let mut action = Action::new(r.system, r.verb).with_params(r.params);
        action.target = r.target.map(str::to_owned);
        action.recognised = r.recognised;
        let v = decide(&policy, &action);
        assert_eq!(v.decision, r.decision, "{}: {:?}", r.what, v);
        assert!(
            v.rules_fired.iter().any(|f| f == r.rule),
            "{}: expected {} in {:?}",
            r.what,
            r.rule,
            v.rules_fired
        );
    }
}

#[test]
fn internal_mail_still_asks_by_risk() {
    // The default knows no internal domains but the actor's own: mail to a colleague
    // is internal, and send is high risk, so R4 asks.
    let policy = PolicyEngine::default_policy().unwrap();
    let action = Action::new("gmail", Verb::Send)
        .with_actor("ann@acme.com")
        .with_params(json!({"to": "bob@acme.com"}));
    let v = decide(&policy, &action);
    assert_eq!(v.target_class, TargetClass::Internal);
    assert_eq!(v.decision, Decision::Ask);
    assert_eq!(v.rules_fired, ["R2", "R4"]);
}

#[test]
fn a_read_raised_to_high_risk_is_not_a_plain_read() {
    let mut action = Action::new("hr", Verb::Read);
    action.risk = Some(Risk::High);
    let v = decide(&PolicyEngine::default_policy().unwrap(), &action);
    assert_eq!(
        (v.decision, v.rules_fired.as_slice()),
        (Decision::Ask, ["R4".to_owned()].as_slice())
    );
}

#[test]
fn the_default_policy_lints_clean() {
    assert_eq!(lint(DEFAULT_POLICY_YAML, "default.yaml"), []);
}

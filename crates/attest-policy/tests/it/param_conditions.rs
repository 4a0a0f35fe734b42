//! `params:` conditions through a whole policy, one operator at a time.

use attest_policy::{Action, Decision, Verb};
use serde_json::{json, Value};

use crate::{decide, engine};

/// Whether a policy whose only rule has `condition` on `path` matches `params`.
fn matches(path: &str, condition: &str, params: Value) -> bool {
    let policy = engine(&format!(
        "policies:\n  - name: r\n    match:\n      params:\n        {path}: {condition}\n    decision: refuse\n"
    ));
    let v = decide(
        &policy,
        &Action::new("crm", Verb::Update).with_params(params),
    );
    v.decision == Decision::Refuse
}

#[test]
fn eq() {
    assert!(matches("/status", "{eq: paid}", json!({"status": "paid"})));
    assert!(!matches("/status", "{eq: paid}", json!({"status": "open"})));
    assert!(matches("/n", "{eq: 3}", json!({"n": 3})));
    assert!(matches("/ok", "{eq: false}", json!({"ok": false})));
    assert!(!matches("/status", "{eq: paid}", json!({})));
}

#[test]
fn ne() {
    assert!(matches("/status", "{ne: paid}", json!({"status": "open"})));
    assert!(!matches("/status", "{ne: paid}", json!({"status": "paid"})));
    assert!(matches("/status", "{ne: paid}", json!({})));
}

#[test]
fn gt_gte_lt_lte() {
    assert!(matches("/amount", "{gt: 50000}", json!({"amount": 50001})));
    assert!(!matches("/amount", "{gt: 50000}", json!({"amount": 50000})));
    assert!(matches("/amount", "{gte: 50000}", json!({"amount": 50000})));
    assert!(!matches(
        "/amount",
        "{gte: 50000}",
        json!({"amount": 49999})
    ));
    assert!(matches("/amount", "{lt: 0.5}", json!({"amount": 0.25})));
    assert!(!matches("/amount", "{lt: 0.5}", json!({"amount": 0.5})));
    assert!(matches("/amount", "{lte: 0.5}", json!({"amount": "0.5"})));
    assert!(!matches("/amount", "{lte: 0.5}", json!({"amount": true})));
    assert!(matches(
        "/amount",
        "{gt: -10, lt: 10}",
        json!({"amount": -3})
    ));
}

#[test]
fn in_list() {
    assert!(matches(
        "/currency",
        "{in: [usd, eur]}",
        json!({"currency": "usd"})
    ));
    assert!(!matches(
        "/currency",
        "{in: [usd, eur]}",
        json!({"currency": "jpy"})
    ));
    assert!(matches("/code", "{in: [1, 2, 3]}", json!({"code": 2})));
    assert!(matches(
        "/currency",
        "{in: [usd, eur]}",
        json!({"currency": ["usd", "eur"]})
    ));
}

#[test]
fn regex() {
    let acme = r"{regex: '@acme\.com$'}";
    assert!(matches("/to", acme, json!({"to": "bob@acme.com"})));
    assert!(!matches("/to", acme, json!({"to": "bob@acme.com.evil.io"})));
    assert!(matches(
        "/to",
        acme,
        json!({"to": ["a@acme.com", "b@acme.com"]})
    ));
    assert!(!matches(
        "/to",
        acme,
        json!({"to": ["a@acme.com", "b@evil.io"]})
    ));
    assert!(matches(
        "/title",
        "{regex: '(?i)^urgent'}",
        json!({"title": "URGENT: fix"})
    ));
}

#[test]
fn exists() {
    assert!(matches("/cc", "{exists: true}", json!({"cc": "a@b.io"})));
    assert!(!matches("/cc", "{exists: true}", json!({})));
    assert!(matches("/cc", "{exists: false}", json!({"to": "a@b.io"})));
    assert!(matches("/cc", "{exists: false}", json!({"cc": null})));
}

#[test]
fn nested_pointers_and_arrays() {
    assert!(matches(
        "/refund/amount",
        "{gt: 100}",
        json!({"refund": {"amount": 500}})
    ));
    assert!(matches(
        "/items/1/qty",
        "{gte: 10}",
        json!({"items": [{"qty": 1}, {"qty": 10}]})
    ));
    assert!(!matches(
        "/items/2/qty",
        "{gte: 10}",
        json!({"items": [{"qty": 1}]})
    ));
    assert!(matches("/a~1b", "{eq: x}", json!({"a/b": "x"})));
}

#[test]
fn several_paths_all_hold() {
    let policy = engine(concat!(
        "policies:\n",
        "  - name: big-usd\n",
        "    match:\n",
        "      params:\n",
        "        /amount: {gt: 100}\n",
        "        /currency: {eq: usd}\n",
        "    decision: refuse\n",
    ));
    let run =
        |p: Value| decide(&policy, &Action::new("stripe", Verb::Update).with_params(p)).decision;
    assert_eq!(
        run(json!({"amount": 200, "currency": "usd"})),
        Decision::Refuse
    );
    assert_eq!(
        run(json!({"amount": 200, "currency": "eur"})),
        Decision::Act
    );
    assert_eq!(run(json!({"amount": 50, "currency": "usd"})), Decision::Act);
}

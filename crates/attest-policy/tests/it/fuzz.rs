//! The fuzz campaign's policy part (issue 14): policy files shaped like real ones but
//! scrambled, and actions with any params, never panic; no secret in a URL survives
//! redaction. Bounded in cases so that it runs in `cargo test` in a few seconds.

use attest_policy::{
    lint, params_preview, redact_url, redact_urls_in, Action, Policy, PolicyEngine, Verb,
    DEFAULT_POLICY_YAML,
};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Pieces policy files are made of, to build documents a parser gets deep into.
fn policy_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("version: 1\n".to_owned()),
        Just("policies:\n".to_owned()),
        Just("  - name: r\n".to_owned()),
        Just("    match: {verb: [delete, send], system: gmail}\n".to_owned()),
        Just("    match:\n      params: {amount: {gt: 100}}\n".to_owned()),
        Just("    decision: ask\n".to_owned()),
        Just("    decision: refuse\n".to_owned()),
        Just("    approvers: [alice]\n".to_owned()),
        Just("    reason: x\n".to_owned()),
        Just("agents:\n  bot:\n    policies: []\n".to_owned()),
        Just("risk_tiers: {send: low}\n".to_owned()),
        Just("&a [*a, *a]\n".to_owned()),
        Just("!!binary x\n".to_owned()),
        "[ -~]{0,30}\n",
        "[{}\\[\\]:,\"' -]{0,12}\n",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        ".{0,30}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn policy_files_never_panic(pieces in proptest::collection::vec(policy_piece(), 0..16)) {
        let text: String = pieces.concat();
        let _ = PolicyEngine::from_yaml(&text, "fuzz.yaml");
        let _ = lint(&text, "fuzz.yaml");
    }

    #[test]
    fn any_text_as_a_policy_never_panics(text in ".{0,400}") {
        let _ = PolicyEngine::from_yaml(&text, "fuzz.yaml");
        let _ = lint(&text, "fuzz.yaml");
    }

    #[test]
    fn deciding_any_params_never_panics(
        params in json_value(),
        verb in proptest::sample::select(Verb::ALL.to_vec()),
        system in "[a-z]{0,10}",
    ) {
        let engine = PolicyEngine::from_yaml(DEFAULT_POLICY_YAML, "default.yaml").unwrap();
        let action = Action::new(system, verb).with_params(params.clone());
        let _ = engine.evaluate(&action);
        let _ = params_preview(&params);
    }

    #[test]
    fn no_secret_in_a_url_survives_redaction(
        scheme in prop_oneof![Just("https://"), Just("http://"), Just("//"), Just("HTTPS://")],
        host in "[a-z0-9.-]{1,20}",
        path in proptest::collection::vec("[A-Za-z0-9._~-]{0,12}", 0..5),
        secret in "[A-Za-z0-9]{8,16}",
        place in 0usize..5,
    ) {
        let secret = format!("S3cret{secret}");
        let path = path.join("/");
        let url = match place {
            0 => format!("{scheme}user:{secret}@{host}/{path}"),
            1 => format!("{scheme}{host}/{path}?token={secret}&a=1"),
            2 => format!("{scheme}{host}/{path}#access_token={secret}"),
            3 => format!("{scheme}{host}/{path}/token/{secret}"),
            _ => format!("{scheme}{host}/{path}/{secret}{secret}X9"),
        };
        let redacted = redact_url(&url);
        prop_assert!(!redacted.contains(&secret), "{} -> {}", url, redacted);
        let text = redact_urls_in(&format!("see {url} now"));
        prop_assert!(!text.contains(&secret), "{} -> {}", url, text);
        let preview = params_preview(&json!({"url": url}));
        prop_assert!(!Value::Object(preview).to_string().contains(&secret));
    }

    #[test]
    fn redaction_never_panics(text in ".{0,200}") {
        let _ = redact_url(&text);
        let _ = redact_urls_in(&text);
    }
}

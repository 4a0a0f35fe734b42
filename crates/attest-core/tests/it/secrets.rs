//! Raw params and results never reach the ledger file: only their hashes and the
//! allow-listed preview do.

use std::sync::Arc;

use attest_core::{Attest, AutoGate, ToolError};
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, Verb};
use serde_json::json;

use crate::support::{all_bytes, contains, Ran};

const SECRET: &str = "sk_live_51HUSHHUSHdoNotLeak";

#[tokio::test]
async fn a_secret_in_params_or_results_never_reaches_the_ledger_file() {
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .gate(AutoGate::approve("ops"))
        .build()
        .unwrap();
    let params = json!({
        "to": "bob@example.com",
        "api_key": SECRET,
        "body": format!("the key is {SECRET}"),
        "headers": {"Authorization": format!("Bearer {SECRET}")},
        "subject": {"nested": SECRET},
    });
    let action = Action::new("gmail", Verb::Send).with_params(params);
    attest
        .call(action)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "m1", "echo": SECRET})) })
        .await
        .unwrap()
        .expect_ran();
    attest
        .record(
            Action::new("stripe", Verb::Pay).with_params(json!({"token": SECRET})),
            Some(&json!({"secret": SECRET})),
        )
        .await
        .unwrap();
    let _ = attest
        .call(Action::new("crm", Verb::Update))
        .run(|_| async {
            Err::<serde_json::Value, attest_core::ToolError>(format!("401 for {SECRET}").into())
        })
        .await;
    // The allow-listed part did arrive, so the scan reads the right files.
    let bytes = all_bytes(dir.path());
    assert!(contains(&bytes, "bob@example.com"));
    assert!(
        !contains(&bytes, SECRET),
        "the secret reached the ledger file"
    );
    drop(attest);
    drop(ledger);
    let bytes = all_bytes(dir.path());
    assert!(
        !contains(&bytes, SECRET),
        "the secret reached the ledger file"
    );
}

/// Issue 14 item 7: a real read-back against a vendor on 127.0.0.1 compares secret params
/// (a `password`, a `signing_secret`, a `private_key`, a Slack webhook URL); the ledger
/// file keeps fingerprints and redacted URLs, never the values.
#[tokio::test]
async fn a_read_back_of_secret_params_keeps_fingerprints_not_values() {
    use attest_core::verification::ConventionDriver;
    use attest_core::ReadBack;

    use crate::fake::{Answer, Fake};
    use crate::recipes::{fast_http, test_env};
    use crate::support::row;

    let password = "pw-HUNTER2-do-not-leak";
    let signing = "whsec_SIGNING_do_not_leak";
    let private_key = "-----BEGIN PRIVATE KEY-----MIIEvQ_do_not_leak";
    let hook_secret = "HOOKSECRETdoNotLeak00000";
    let hook = format!("https://hooks.slack.com/services/T01/B02/{hook_secret}?token=qTOKENq");
    let fake = Fake::start().await;
    let record = json!({"id": "w1", "name": "gear", "password": password,
        "signing_secret": signing, "private_key": private_key, "url": hook});
    fake.route("GET", "/v1/widgets/w1", vec![Answer::json(&record)]);
    let dir = tempfile::tempdir().unwrap();
    let readback = ReadBack::new()
        .unwrap()
        .driver(ConventionDriver::new().allow(format!("{}/v1/", fake.base)))
        .env(test_env)
        .http(fast_http())
        .unwrap();
    let (ledger, attest) = crate::support::attest_reading_back(dir.path(), readback);
    let mut action = Action::new("widgets", Verb::Create).with_params(json!({
        "name": "gear", "password": password, "signing_secret": signing,
        "private_key": private_key, "url": hook,
    }));
    action.extra.method = Some("POST".to_owned());
    action.extra.url = Some(format!("{}/v1/widgets?api_key=qAPIKEYq", fake.base));
    let receipt = attest
        .call(action)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "w1"})) })
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(receipt.level, Some(attest_core::Level::Verified));
    assert_eq!(fake.hits().len(), 1, "the read-back ran");
    let fields = row(&ledger, receipt.seq)["verification"]["evidence"]["fields"].clone();
    let by_name = |name: &str| {
        fields
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {fields}"))
    };
    for name in ["password", "signing_secret", "private_key"] {
        let field = by_name(name);
        assert!(
            field["want"].as_str().unwrap().starts_with("sha256:"),
            "{field}"
        );
        assert_eq!(field["ok"], true);
    }
    assert_eq!(by_name("name")["want"], "gear");
    assert_eq!(
        by_name("url")["want"],
        "https://hooks.slack.com/services/T01/B02/[redacted]"
    );
    drop(attest);
    drop(ledger);
    let bytes = all_bytes(dir.path());
    assert!(contains(&bytes, "gear"), "the scan reads the ledger");
    for secret in [
        password,
        signing,
        private_key,
        hook_secret,
        "qTOKENq",
        "qAPIKEYq",
    ] {
        assert!(
            !contains(&bytes, secret),
            "{secret} reached the ledger file"
        );
    }
}

//! Raw params and results never reach the ledger file: only their hashes and the
//! allow-listed preview do.

use std::sync::Arc;

use attest_core::{Attest, AutoGate};
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, Verb};
use serde_json::json;

use crate::support::{all_bytes, contains};

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
        .run(action, |_| async {
            Ok(json!({"id": "m1", "echo": SECRET}))
        })
        .await
        .unwrap();
    attest
        .record(
            Action::new("stripe", Verb::Pay).with_params(json!({"token": SECRET})),
            Some(&json!({"secret": SECRET})),
        )
        .await
        .unwrap();
    let _ = attest
        .run(Action::new("crm", Verb::Update), |_| async {
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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use attest_core::{
    Attest, AttestError, AutoGate, CustomCheck, FunctionCall, Level, Outcome, ProtocolCall,
    RejectGate, Tool, ToolError,
};
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, Decision, Policy, PolicyError, Verb, Verdict};
use serde_json::{json, Value};

use crate::support::{row, Ran};

struct Fixture {
    _dir: tempfile::TempDir,
    ledger: Arc<Ledger>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    Fixture { _dir: dir, ledger }
}

/// A tool that counts its calls and returns `result`.
fn counting(
    calls: &Arc<AtomicUsize>,
    result: Value,
) -> impl FnOnce(Value) -> std::future::Ready<Result<Value, ToolError>> {
    let calls = Arc::clone(calls);
    move |_params| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(result))
    }
}

struct Refuser;
impl Policy for Refuser {
    fn evaluate(&self, action: &Action) -> Result<Verdict, PolicyError> {
        Ok(Verdict::new(
            Decision::Refuse,
            action.base_risk(),
            "test",
            "nothing runs here",
        ))
    }
}

struct Broken;
impl Policy for Broken {
    fn evaluate(&self, _action: &Action) -> Result<Verdict, PolicyError> {
        Err(PolicyError::Internal("rules unreadable"))
    }
}

#[tokio::test]
async fn a_low_risk_action_acts_and_is_acknowledged() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .agent("bot")
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let action =
        Action::new("hubspot", Verb::Update).with_params(json!({"id": "42", "stage": "won"}));
    let receipt = attest
        .call(action)
        .run(counting(&calls, json!({"id": "42"})))
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(receipt.decision, Decision::Act);
    assert_eq!(receipt.level, Some(Level::Acknowledged));
    // A write: its intent row first, durable before the tool ran, then the outcome.
    assert_eq!(receipt.seq, 2);
    let intent = row(&f.ledger, 1);
    assert_eq!(intent["execution"]["status"], "intent");
    assert_eq!(intent["decision"], "act");
    assert_eq!(intent["verification"], Value::Null);
    let body = row(&f.ledger, 2);
    assert_eq!(body["action_id"], intent["action_id"]);
    assert_eq!(body["decision"], "act");
    assert_eq!(body["agent"], "bot");
    assert_eq!(body["execution"]["status"], "ok");
    assert_eq!(body["verification"]["level"], "acknowledged");
    assert_eq!(body["params_preview"], json!({"id": "42"}));
    assert_eq!(
        receipt.entry_hash,
        attest_ledger::to_hex(&f.ledger.tip().unwrap().unwrap().1)
    );
}

#[tokio::test]
async fn a_result_without_an_id_is_attested_only() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let receipt = attest
        .call(Action::new("crm", Verb::Update))
        .run(counting(&calls, json!("done")))
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(receipt.level, Some(Level::AttestedOnly));
}

#[tokio::test]
async fn ask_approved_runs_and_records_the_approver() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .gate(AutoGate::approve("maria"))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let action = Action::new("gmail", Verb::Send).with_target("bob@other.io");
    let receipt = attest
        .call(action)
        .run(counting(&calls, json!({"id": "m1"})))
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(receipt.decision, Decision::Ask);
    assert_eq!(receipt.approver.as_deref(), Some("maria"));
    let body = row(&f.ledger, 1);
    assert_eq!(body["decision"], "ask");
    assert_eq!(
        body["confirm"],
        json!({"outcome": "approved", "approver": "maria", "channel": "auto"})
    );
}

#[tokio::test]
async fn ask_rejected_never_runs_the_tool() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .gate(AutoGate::reject("cfo"))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let outcome = attest
        .call(Action::new("stripe", Verb::Pay))
        .run(counting(&calls, json!({"id": "re_1"})))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let Outcome::Rejected { approver, receipt } = outcome else {
        panic!("expected a rejection, got {outcome:?}")
    };
    assert_eq!(approver, "cfo");
    assert_eq!(receipt.seq, 1);
    let body = row(&f.ledger, 1);
    assert_eq!(body["execution"]["status"], "not_run");
    assert_eq!(body["confirm"]["outcome"], "rejected");
    assert!(body.get("verification").is_none());
}

#[tokio::test]
async fn the_default_gate_rejects_because_nobody_is_there_to_ask() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .gate(RejectGate)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let outcome = attest
        .call(Action::new("gmail", Verb::Send))
        .run(counting(&calls, json!({"id": "1"})))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_refused_action_never_runs_and_is_recorded() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .policy(Refuser)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let outcome = attest
        .call(Action::new("crm", Verb::List))
        .run(counting(&calls, json!({"id": "1"})))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let receipt = outcome.receipt();
    assert_eq!(receipt.decision, Decision::Refuse);
    assert_eq!(receipt.reasons, vec!["nothing runs here".to_owned()]);
    let body = row(&f.ledger, 1);
    assert_eq!(body["decision"], "refuse");
    assert_eq!(body["rules_fired"], json!(["test"]));
}

#[tokio::test]
async fn a_policy_that_cannot_decide_refuses() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .policy(Broken)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let outcome = attest
        .call(Action::new("crm", Verb::List))
        .run(counting(&calls, json!({"id": "1"})))
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Refused { .. }), "{outcome:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let body = row(&f.ledger, 1);
    assert_eq!(body["rules_fired"], json!(["policy-error"]));
    assert!(body["reasons"][0]
        .as_str()
        .unwrap()
        .contains("rules unreadable"));
}

#[tokio::test]
async fn a_failing_tool_is_recorded_without_its_message() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let outcome = attest
        .call(Action::new("crm", Verb::Update))
        .run(|_| async { Err::<Value, ToolError>("upstream said 500 for token tok_SECRET".into()) })
        .await
        .unwrap();
    let Outcome::Failed {
        receipt,
        error: source,
    } = outcome
    else {
        panic!("expected a tool failure")
    };
    assert!(source.to_string().contains("500"));
    let body = row(&f.ledger, receipt.seq);
    assert_eq!(body["execution"]["status"], "failed");
    assert!(body["execution"]["error_hash"].is_string());
    assert!(!body.to_string().contains("tok_SECRET"));
}

#[tokio::test]
async fn an_output_without_a_json_form_is_recorded_as_failed_and_is_an_error() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    // A map with non-string keys has no JSON form to hash or check.
    let output: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
    let err = attest
        .call(Action::new("crm", Verb::Update))
        .run(|_| async move { Ok::<_, ToolError>(output) })
        .await
        .unwrap_err();
    let AttestError::OutputNotJson { receipt, .. } = err else {
        panic!("expected an output without a JSON form, got {err:?}")
    };
    // The tool ran: its intent, then the outcome row, which says it could not be recorded.
    assert_eq!(receipt.seq, 2);
    let body = row(&f.ledger, 2);
    assert_eq!(body["execution"]["status"], "failed");
    assert!(f.ledger.verify().unwrap().is_intact());
}

#[tokio::test]
async fn a_custom_check_that_passes_is_verified_custom() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let check = CustomCheck::sync(|action, result| Ok(result["id"] == action.params["id"]));
    let action = Action::new("crm", Verb::Update).with_params(json!({"id": "7"}));
    let receipt = attest
        .call(action)
        .check(&check)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "7"})) })
        .await
        .unwrap()
        .into_receipt();
    assert_eq!(receipt.level, Some(Level::VerifiedCustom));
    let body = row(&f.ledger, 2);
    assert_eq!(
        body["verification"],
        json!({"level": "verified-custom", "method": "custom", "matched": true})
    );
}

#[tokio::test]
async fn a_custom_check_that_fails_is_unverified() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let check = CustomCheck::future(|_action, _result| async { Ok(false) });
    let receipt = attest
        .call(Action::new("crm", Verb::Update))
        .check(&check)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "7"})) })
        .await
        .unwrap()
        .into_receipt();
    assert_eq!(receipt.level, Some(Level::Unverified));
    assert_eq!(row(&f.ledger, 2)["verification"]["matched"], false);
}

#[tokio::test]
async fn a_custom_check_that_errors_degrades_and_is_never_unverified() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let check = CustomCheck::future(|_action, _result| async {
        Err::<bool, ToolError>("timeout reading https://api/x?token=abc".into())
    });
    let receipt = attest
        .call(Action::new("crm", Verb::Update))
        .check(&check)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "7"})) })
        .await
        .unwrap()
        .into_receipt();
    assert_eq!(receipt.level, Some(Level::Acknowledged));
    let body = row(&f.ledger, 2);
    assert_eq!(body["verification"]["method"], "custom");
    assert_eq!(
        body["verification"]["evidence"]["degraded"],
        "custom check could not run"
    );
    assert!(!body.to_string().contains("token=abc"));
}

#[tokio::test]
async fn record_appends_an_action_that_already_happened() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .actor("ann")
        .build()
        .unwrap();
    let receipt = attest
        .record(
            Action::new("slack", Verb::Send),
            Some(&json!({"ok": true, "ts": "1.2"})),
        )
        .await
        .unwrap();
    assert_eq!(receipt.decision, Decision::Recorded);
    assert_eq!(receipt.level, Some(Level::Acknowledged));
    let body = row(&f.ledger, 1);
    assert_eq!(body["decision"], "recorded");
    assert_eq!(body["actor"], "ann");
    assert_eq!(body["execution"]["status"], "recorded");
}

struct Crm {
    calls: AtomicUsize,
}

#[async_trait]
impl Tool for Crm {
    fn describe(&self, params: Value) -> ProtocolCall<'_> {
        ProtocolCall::Function(FunctionCall {
            name: "crm",
            arguments: params,
            system: Some("crm"),
            verb: Some(Verb::Update),
            ..FunctionCall::default()
        })
    }
    async fn call(&self, params: Value) -> Result<Value, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"id": params["id"].clone()}))
    }
}

#[tokio::test]
async fn a_wrapped_tool_is_governed_on_every_call() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let crm = attest.wrap(Crm {
        calls: AtomicUsize::new(0),
    });
    for i in 0..3 {
        let receipt = crm
            .call(json!({"id": i.to_string()}))
            .await
            .unwrap()
            .expect_ran();
        // Each call: an intent row, then the outcome row the receipt names.
        assert_eq!(receipt.seq, 2 * (i + 1));
    }
    assert_eq!(crm.tool().calls.load(Ordering::SeqCst), 3);
    assert!(f.ledger.verify().unwrap().is_intact());
}

#[tokio::test]
async fn concurrent_runs_keep_one_chain() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let attest = attest.clone();
            tokio::spawn(async move {
                let action = Action::new("crm", Verb::Update).with_params(json!({"id": i}));
                attest
                    .call(action)
                    .run(|_| async move { Ok::<_, ToolError>(json!({"id": i})) })
                    .await
                    .unwrap()
                    .expect_ran()
                    .seq
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for task in tasks {
        seqs.push(task.await.unwrap());
    }
    seqs.sort_unstable();
    seqs.dedup();
    // 32 outcome rows, each after its intent: 64 rows in one chain.
    assert_eq!(seqs.len(), 32);
    assert_eq!(f.ledger.tip().unwrap().unwrap().0, 64);
    assert!(f.ledger.verify().unwrap().is_intact());
}

#[tokio::test]
async fn a_write_runs_only_after_its_intent_row_is_durable() {
    let f = fixture();
    let attest = Attest::builder()
        .ledger(Arc::clone(&f.ledger))
        .build()
        .unwrap();
    // The tool looks at the ledger from another connection while it runs.
    let path = f.ledger.path().to_path_buf();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen_in_tool = Arc::clone(&seen);
    let receipt = attest
        .call(Action::new("crm", Verb::Update))
        .run(move |_| async move {
            let other = Ledger::open_read_only(&path).unwrap();
            *seen_in_tool.lock().unwrap() = Some(row(&other, 1));
            Ok::<_, ToolError>(json!({"id": "1"}))
        })
        .await
        .unwrap()
        .expect_ran();
    let intent = seen.lock().unwrap().take().expect("the tool ran");
    assert_eq!(intent["execution"]["status"], "intent");
    assert_eq!(intent["action_id"], receipt.action_id.as_str());
    assert_eq!(receipt.seq, 2);
    assert!(receipt.warning.is_none());
    assert!(attest_core::open_intents(&f.ledger, 1).unwrap().is_empty());
}

#[tokio::test]
async fn a_write_whose_intent_cannot_be_recorded_does_not_run() {
    let f = fixture();
    // A ledger that refuses every append (opened read-only, as on a read-only disk).
    let read_only = Ledger::open_read_only(f.ledger.path()).unwrap();
    let attest = Attest::builder().ledger(read_only).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let err = attest
        .call(Action::new("crm", Verb::Update))
        .run(counting(&calls, json!({"id": "1"})))
        .await
        .unwrap_err();
    assert!(matches!(err, AttestError::NotRecorded(_)), "{err:?}");
    assert!(err.to_string().contains("did not run"), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(f.ledger.tip().unwrap().is_none());
}

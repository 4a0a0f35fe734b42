//! Read-back against fake vendors: checks that could not run degrade (404, retries
//! spent, timeout, huge or non-JSON bodies, missing credential), the ladder's order, the
//! OpenAPI and convention drivers, and the pipeline end to end with the ledger file
//! scanned for the token and the vendor's body.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_core::verification::{ConventionDriver, OpenApiDriver};
use attest_core::{Attest, AutoGate, CustomCheck, Evidence, Finding, Level, ReadBack, ToolError};
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, Verb};
use serde_json::{json, Value};

use crate::fake::{Answer, Fake};
use crate::recipes::{fast_http, test_env};

use crate::support::{all_bytes, attest_reading_back, contains, row, Ran};

const REFUND_PATH: &str = "/v1/refunds/re_1";

fn refund_action() -> (Action, Value) {
    let action = Action::new("stripe", Verb::Pay)
        .with_params(json!({"payment_intent": "pi_1", "amount": 1500}));
    let result = json!({"id": "re_1", "object": "refund", "amount": 1500, "status": "succeeded"});
    (action, result)
}

fn refund(amount: u64) -> Value {
    json!({"id": "re_1", "object": "refund", "amount": amount, "currency": "usd",
        "payment_intent": "pi_1", "charge": "ch_1", "status": "succeeded",
        "balance_transaction": "txn_VENDOR_BODY_MARKER"})
}

fn readback(fake: &Fake) -> ReadBack {
    ReadBack::builtin()
        .unwrap()
        .env(test_env)
        .base_url("stripe", fake.base.clone())
        .http(fast_http())
        .unwrap()
}

/// Runs the stripe refund read-back against `answers` and returns the finding.
async fn refund_finding(answers: Vec<Answer>) -> (Finding, Fake) {
    let fake = Fake::start().await;
    fake.route("GET", REFUND_PATH, answers);
    let (action, result) = refund_action();
    let (driver, finding) = readback(&fake).check(&action, &result).await.unwrap();
    assert_eq!(driver, "recipe");
    (finding, fake)
}

fn degraded_reason(finding: &Finding) -> &str {
    match finding {
        Finding::Degraded { reason, .. } => reason,
        other => panic!("expected a degraded finding, got {other:?}"),
    }
}

#[tokio::test]
async fn not_found_degrades_to_acknowledged() {
    let (finding, _fake) = refund_finding(vec![Answer::raw(
        404,
        r#"{"error":{"type":"invalid_request_error"}}"#,
    )])
    .await;
    assert_eq!(finding.level(Level::Acknowledged), Level::Acknowledged);
    assert_eq!(degraded_reason(&finding), "not found (404)");
    assert_eq!(finding.matched(), None);
}

#[tokio::test]
async fn server_errors_are_retried_then_verified() {
    let answers = vec![
        Answer::raw(500, "{}"),
        Answer::raw(503, "{}").header("retry-after", "0"),
        Answer::json(&refund(1500)),
    ];
    let (finding, fake) = refund_finding(answers).await;
    assert_eq!(
        finding.level(Level::Acknowledged),
        Level::Verified,
        "{finding:?}"
    );
    assert_eq!(fake.hits().len(), 3);
    let Finding::Compared(evidence) = finding else {
        unreachable!()
    };
    assert_eq!(evidence.attempts, Some(3));
    assert_eq!(evidence.status, Some(200));
}

#[tokio::test]
async fn rate_limits_are_retried_honouring_retry_after() {
    let answers = vec![
        Answer::raw(429, "{}").header("retry-after", "1"),
        Answer::json(&refund(1500)),
    ];
    let started = Instant::now();
    let (finding, _fake) = refund_finding(answers).await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "retry-after ignored"
    );
    assert_eq!(finding.level(Level::Acknowledged), Level::Verified);
    // A wait longer than allowed ends the read instead of stalling the pipeline.
    let (finding, fake) =
        refund_finding(vec![Answer::raw(429, "{}").header("retry-after", "60")]).await;
    assert!(degraded_reason(&finding).contains("retry-after 60"));
    assert_eq!(fake.hits().len(), 1);
}

#[tokio::test]
async fn retries_are_bounded_then_degrade() {
    let (finding, fake) = refund_finding(vec![Answer::raw(502, "{}")]).await;
    assert_eq!(
        degraded_reason(&finding),
        "http status 502 after 3 attempt(s)"
    );
    assert_eq!(fake.hits().len(), 3);
    assert_eq!(finding.level(Level::Acknowledged), Level::Acknowledged);
}

#[tokio::test]
async fn a_slow_vendor_times_out_and_degrades() {
    let started = Instant::now();
    let (finding, _fake) = refund_finding(vec![
        Answer::json(&refund(1500)).delayed(Duration::from_secs(3))
    ])
    .await;
    assert!(
        degraded_reason(&finding).starts_with("timed out"),
        "{finding:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(finding.level(Level::Acknowledged), Level::Acknowledged);
}

#[tokio::test]
async fn a_huge_body_is_capped_and_degrades() {
    let huge = json!({"id": "re_1", "object": "refund", "pad": "x".repeat(1 << 20)});
    let (finding, _fake) = refund_finding(vec![Answer::json(&huge)]).await;
    assert_eq!(
        degraded_reason(&finding),
        "response larger than 65536 bytes"
    );
}

#[tokio::test]
async fn non_json_and_empty_bodies_degrade() {
    let (finding, _fake) = refund_finding(vec![Answer::raw(200, "<html>maintenance</html>")]).await;
    assert_eq!(degraded_reason(&finding), "response is not json");
    let (finding, _fake) = refund_finding(vec![Answer::raw(200, "")]).await;
    assert_eq!(degraded_reason(&finding), "empty response: nothing fetched");
}

#[tokio::test]
async fn a_missing_credential_degrades_with_a_clear_note_and_reads_nothing() {
    let fake = Fake::start().await;
    fake.route("GET", REFUND_PATH, vec![Answer::json(&refund(1500))]);
    let readback = ReadBack::builtin()
        .unwrap()
        .env(HashMap::<String, String>::new())
        .base_url("stripe", fake.base.clone())
        .http(fast_http())
        .unwrap();
    let (action, result) = refund_action();
    let (_, finding) = readback.check(&action, &result).await.unwrap();
    assert_eq!(
        degraded_reason(&finding),
        "missing credential: STRIPE_API_KEY is not set, so stripe cannot be read back"
    );
    assert!(fake.hits().is_empty());
}

#[tokio::test]
async fn credentials_from_code_and_base_url_from_the_environment() {
    let fake = Fake::start().await;
    fake.route("GET", REFUND_PATH, vec![Answer::json(&refund(1500))]);
    let env: HashMap<String, String> =
        [("ATTEST_BASE_URL_STRIPE".to_owned(), fake.base.clone())].into();
    let readback = ReadBack::builtin()
        .unwrap()
        .env(env)
        .credentials(|system: &str, name: &str| {
            (system == "stripe" && name == "STRIPE_API_KEY").then(|| "rk_from_code".to_owned())
        })
        .http(fast_http())
        .unwrap();
    let (action, result) = refund_action();
    let (_, finding) = readback.check(&action, &result).await.unwrap();
    assert_eq!(finding.level(Level::Acknowledged), Level::Verified);
    assert_eq!(
        fake.hits()[0]
            .headers
            .get("authorization")
            .map(String::as_str),
        Some("Bearer rk_from_code")
    );
}

#[tokio::test]
async fn an_api_level_refusal_degrades() {
    let fake = Fake::start().await;
    fake.route(
        "GET",
        "/conversations.history",
        vec![Answer::json(
            &json!({"ok": false, "error": "channel_not_found"}),
        )],
    );
    let readback = ReadBack::builtin()
        .unwrap()
        .env(test_env)
        .base_url("slack", fake.base.clone())
        .http(fast_http())
        .unwrap();
    let action =
        Action::new("slack", Verb::Send).with_params(json!({"channel": "C1", "text": "hi"}));
    let result = json!({"ok": true, "channel": "C1", "ts": "1.2"});
    let (_, finding) = readback.check(&action, &result).await.unwrap();
    assert_eq!(
        degraded_reason(&finding),
        "the api answered not ok: channel_not_found"
    );
    let query = &fake.hits()[0].query;
    assert!(
        query.starts_with("channel=C1&latest=1.2&oldest=1.2"),
        "{query}"
    );
}

#[tokio::test]
async fn degrading_without_an_acknowledgement_is_attested_only() {
    let fake = Fake::start().await; // no routes: every read is a 404
    let readback = ReadBack::builtin()
        .unwrap()
        .env(test_env)
        .base_url("jira", fake.base.clone())
        .http(fast_http())
        .unwrap();
    let action = Action::new("jira", Verb::Update)
        .with_params(json!({"issue_key": "ENG-1", "transition": {"id": "31"}, "status": "Done"}));
    let result = json!({});
    let (_, finding) = readback.check(&action, &result).await.unwrap();
    let ack = if attest_core::acknowledges(&result) {
        Level::Acknowledged
    } else {
        Level::AttestedOnly
    };
    assert_eq!(finding.level(ack), Level::AttestedOnly);
}

#[tokio::test]
async fn found_but_nothing_comparable_is_acknowledged() {
    let fake = Fake::start().await;
    fake.route(
        "GET",
        "/rest/api/3/issue/ENG-1",
        vec![Answer::json(
            &json!({"id": "1", "key": "ENG-1", "fields": {"status": {"name": "Done"}}}),
        )],
    );
    let readback = ReadBack::builtin()
        .unwrap()
        .env(test_env)
        .base_url("jira", fake.base.clone())
        .http(fast_http())
        .unwrap();
    // No target status named: nothing intended to compare.
    let action = Action::new("jira", Verb::Update)
        .with_params(json!({"issue_key": "ENG-1", "transition": {"id": "31"}}));
    let (_, finding) = readback.check(&action, &json!({})).await.unwrap();
    assert_eq!(finding.level(Level::AttestedOnly), Level::Acknowledged);
    assert_eq!(finding.matched(), None);
}

#[tokio::test]
async fn no_base_url_for_a_self_hosted_system_degrades() {
    let readback = ReadBack::builtin()
        .unwrap()
        .env(test_env)
        .http(fast_http())
        .unwrap();
    let action = Action::new("salesforce", Verb::Create)
        .with_params(json!({"sobject": "Account", "fields": {"Name": "Acme"}}));
    let (_, finding) = readback
        .check(&action, &json!({"id": "001", "success": true}))
        .await
        .unwrap();
    assert_eq!(
        degraded_reason(&finding),
        "no base url for salesforce: set ATTEST_BASE_URL_SALESFORCE or configure one"
    );
}

fn api_action(method: &str, url: String, params: Value) -> Action {
    let mut action = Action::new("widgets", Verb::Create).with_params(params);
    action.extra.method = Some(method.to_owned());
    action.extra.url = Some(url);
    action
}

#[tokio::test]
async fn the_convention_driver_guesses_but_never_verifies_a_wrong_guess() {
    let fake = Fake::start().await;
    fake.route(
        "GET",
        "/v1/widgets/w1",
        vec![Answer::json(
            &json!({"id": "w1", "name": "gear", "size": 5}),
        )],
    );
    fake.route(
        "GET",
        "/v1/widgets/w2",
        vec![Answer::json(&json!({"id": "other", "name": "gear"}))],
    );
    fake.route(
        "GET",
        "/v1/widgets/w3",
        vec![Answer::json(&json!({"id": "w3", "colour": "red"}))],
    );
    let readback = ReadBack::new()
        .unwrap()
        .driver(ConventionDriver::new().allow(format!("{}/v1/", fake.base)))
        .env(test_env)
        .http(fast_http())
        .unwrap();
    let post = api_action(
        "POST",
        format!("{}/v1/widgets", fake.base),
        json!({"name": "gear", "size": "5"}),
    );
    let check = |id: &str| {
        let readback = readback.clone();
        let post = post.clone();
        let result = json!({"id": id});
        async move { readback.check(&post, &result).await.unwrap() }
    };
    let (driver, finding) = check("w1").await;
    assert_eq!(driver, "convention");
    assert_eq!(finding.level(Level::Acknowledged), Level::Verified);
    // The record answering is not the one created: unverified, never verified.
    assert_eq!(
        check("w2").await.1.level(Level::Acknowledged),
        Level::Unverified
    );
    // Nothing overlaps: acknowledged.
    assert_eq!(
        check("w3").await.1.level(Level::AttestedOnly),
        Level::Acknowledged
    );
    // Outside the allowed prefix: not read at all.
    let elsewhere = api_action(
        "POST",
        "https://api.example.com/v1/widgets".to_owned(),
        json!({"name": "x"}),
    );
    assert!(readback
        .check(&elsewhere, &json!({"id": "w1"}))
        .await
        .is_none());
}

#[tokio::test]
async fn the_openapi_driver_reads_the_get_its_spec_describes() {
    let fake = Fake::start().await;
    fake.route(
        "GET",
        "/api/pets/7",
        vec![Answer::json(&json!({"id": 7, "name": "Rex", "tag": "dog"}))],
    );
    let spec = r#"{"openapi": "3.0.0", "servers": [{"url": "https://petstore.example.com/api"}],
        "paths": {"/pets": {"post": {}}, "/pets/{petId}": {"get": {}, "put": {}}, "/orders": {"post": {}}}}"#;
    let driver = OpenApiDriver::from_spec(spec, "petstore.json")
        .unwrap()
        .base_url(format!("{}/api", fake.base));
    let readback = ReadBack::new()
        .unwrap()
        .driver(driver)
        .driver(ConventionDriver::new().allow(fake.base.clone()))
        .http(fast_http())
        .unwrap();
    let post = api_action(
        "POST",
        format!("{}/api/pets", fake.base),
        json!({"name": "Rex", "tag": "dog"}),
    );
    let (driver, finding) = readback.check(&post, &json!({"id": 7})).await.unwrap();
    assert_eq!(
        driver, "openapi",
        "the OpenAPI driver runs before the convention driver"
    );
    assert_eq!(finding.level(Level::Acknowledged), Level::Verified);
    let wrong = api_action(
        "PUT",
        format!("{}/api/pets/7", fake.base),
        json!({"name": "Max"}),
    );
    let (_, finding) = readback.check(&wrong, &json!({"id": 7})).await.unwrap();
    assert_eq!(finding.level(Level::Acknowledged), Level::Unverified);
    // No GET for orders in the spec: the OpenAPI driver does not guess.
    let order = api_action(
        "POST",
        format!("{}/api/orders", fake.base),
        json!({"qty": 1}),
    );
    let (driver, _) = readback.check(&order, &json!({"id": 1})).await.unwrap();
    assert_eq!(driver, "convention");
}

#[tokio::test]
async fn the_pipeline_reads_back_and_the_ledger_keeps_evidence_not_bodies_or_tokens() {
    let fake = Fake::start().await;
    fake.route("GET", REFUND_PATH, vec![Answer::json(&refund(1500))]);
    fake.route(
        "GET",
        "/v1/refunds/re_2",
        vec![Answer::json(
            &json!({"id": "re_2", "object": "refund", "amount": 99, "status": "succeeded"}),
        )],
    );
    let dir = tempfile::tempdir().unwrap();
    let token = "sk_test_TOKEN_MUST_NOT_LEAK";
    let env: HashMap<String, String> = [("STRIPE_API_KEY".to_owned(), token.to_owned())].into();
    let readback = ReadBack::builtin()
        .unwrap()
        .env(env)
        .base_url("stripe", fake.base.clone())
        .http(fast_http())
        .unwrap();
    let (ledger, attest) = attest_reading_back(dir.path(), readback);
    // A custom check that would contradict: read-back comes first and wins.
    let never = CustomCheck::sync(|_, _| Ok(false));
    let (action, result) = refund_action();
    let receipt = attest
        .call(action)
        .check(&never)
        .run(move |_| async move { Ok::<_, ToolError>(result) })
        .await
        .unwrap()
        .into_receipt();
    assert_eq!(receipt.level, Some(Level::Verified));
    let body = row(&ledger, 2);
    let v = &body["verification"];
    assert_eq!(v["level"], "verified");
    assert_eq!(v["method"], "read-back:recipe");
    assert_eq!(v["matched"], true);
    assert_eq!(v["evidence"]["source"], "stripe.refund");
    assert_eq!(v["evidence"]["ids"], json!({"id": "re_1"}));
    assert_eq!(v["evidence"]["status"], 200);
    assert!(v["evidence"]["fields"]
        .as_array()
        .unwrap()
        .contains(&json!({"field": "amount", "want": 1500, "got": 1500, "ok": true})));

    // A refund of the wrong amount: unverified, with the numbers as evidence.
    let (action, _) = refund_action();
    let result = json!({"id": "re_2", "object": "refund", "amount": 1500, "status": "succeeded"});
    let receipt = attest
        .call(action)
        .run(move |_| async move { Ok::<_, ToolError>(result) })
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(receipt.level, Some(Level::Unverified));
    let v = &row(&ledger, 4)["verification"];
    assert_eq!(v["level"], "unverified");
    assert_eq!(v["matched"], false);
    assert!(v["evidence"]["fields"]
        .as_array()
        .unwrap()
        .contains(&json!({"field": "amount", "want": 1500, "got": 99, "ok": false})));

    // A system no driver knows: the custom check runs.
    let always = CustomCheck::sync(|_, _| Ok(true));
    let receipt = attest
        .call(Action::new("crm", Verb::Update))
        .check(&always)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "1"})) })
        .await
        .unwrap()
        .into_receipt();
    assert_eq!(receipt.level, Some(Level::VerifiedCustom));

    assert_eq!(
        fake.hits()[0].headers["authorization"],
        format!("Bearer {token}")
    );
    drop(attest);
    let bytes = all_bytes(dir.path());
    assert!(
        !contains(&bytes, token),
        "the token reached the ledger file"
    );
    assert!(
        !contains(&bytes, "tok-"),
        "a credential reached the ledger file"
    );
    assert!(
        !contains(&bytes, "VENDOR_BODY_MARKER"),
        "the vendor's body reached the ledger file"
    );
}

#[tokio::test]
async fn the_callers_own_read_back_comes_before_the_drivers_and_is_recorded_as_read_back() {
    let fake = Fake::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    fake.route("GET", REFUND_PATH, vec![Answer::json(&refund(1500))]);
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .gate(AutoGate::approve("ops"))
        .readback(readback(&fake))
        .build()
        .unwrap();
    // Reads "the record" from a session only the caller holds; here, a fixed record.
    let session = CustomCheck::read_back("session", |action, _result| {
        let params = action.params.clone();
        async move {
            let mut evidence = Evidence::new("session get");
            evidence.id("id", "re_1");
            let record = json!({"id": "re_1", "amount": 1400});
            Finding::from_record(evidence, &params, &record, Some("re_1"))
        }
    });
    let (action, result) = refund_action();
    let receipt = attest
        .call(action)
        .check(&session)
        .run(move |_| async move { Ok::<_, ToolError>(result) })
        .await
        .unwrap()
        .into_receipt();
    assert_eq!(receipt.level, Some(Level::Unverified));
    let v = &row(&ledger, 2)["verification"];
    assert_eq!(v["method"], "read-back:session");
    assert_eq!(v["evidence"]["source"], "session get");
    assert!(v["evidence"]["fields"]
        .as_array()
        .unwrap()
        .contains(&json!({"field": "amount", "want": 1500, "got": 1400, "ok": false})));
    // The recipe driver, which also knows Stripe refunds, was never asked.
    assert!(fake.hits().is_empty());
}

/// Issue 14 item 8: a read-back redirected to another origin (another port on 127.0.0.1)
/// is not followed, so the caller's `Authorization`, cookies and API key never reach it;
/// a redirect within the origin is still followed.
#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed_with_the_credentials() {
    use attest_core::verification::FetchError;
    use attest_core::{HttpReader, ReadMethod, ReadRequest};

    let first = Fake::start().await;
    let second = Fake::start().await;
    first.route(
        "GET",
        "/v1/notes/1",
        vec![Answer::raw(302, "").header("location", &format!("{}/v1/notes/1", second.base))],
    );
    first.route(
        "GET",
        "/v1/notes/2",
        vec![Answer::raw(307, "").header("location", "/v1/notes/3")],
    );
    first.route(
        "GET",
        "/v1/notes/3",
        vec![Answer::json(&json!({"id": "3"}))],
    );
    second.route(
        "GET",
        "/v1/notes/1",
        vec![Answer::json(&json!({"id": "1"}))],
    );
    let reader = HttpReader::new(fast_http()).unwrap();
    let request = |path: &str| ReadRequest {
        method: ReadMethod::Get,
        url: format!("{}{path}", first.base),
        headers: vec![
            ("authorization".to_owned(), "Bearer tok-SECRET".to_owned()),
            ("cookie".to_owned(), "session=tok-COOKIE".to_owned()),
            ("x-api-key".to_owned(), "tok-APIKEY".to_owned()),
        ],
        body: None,
    };
    let err = reader.fetch(&request("/v1/notes/1")).await.unwrap_err();
    assert_eq!(err, FetchError::CrossOriginRedirect);
    assert!(
        second.hits().is_empty(),
        "the other origin was called with: {:?}",
        second.hits()
    );
    // Within the origin: followed, credentials and all.
    let fetched = reader.fetch(&request("/v1/notes/2")).await.unwrap();
    assert_eq!(fetched.body["id"], "3");
    let hits = first.hits();
    assert_eq!(hits.last().unwrap().headers["x-api-key"], "tok-APIKEY");
}

/// An action reported after the fact (`Attest::record`, what `attest_record`, the hook's
/// after-call and Python's `record()` use) is read back like a governed call: the
/// vendor's record decides `verified` or `unverified`. An import reads no vendor.
#[tokio::test]
async fn a_recorded_action_is_read_back_and_an_imported_one_is_not() {
    let fake = Fake::start().await;
    fake.route("GET", REFUND_PATH, vec![Answer::json(&refund(1500))]);
    fake.route("GET", "/v1/refunds/re_2", vec![Answer::json(&refund(99))]);
    let dir = tempfile::tempdir().unwrap();
    let (ledger, attest) = attest_reading_back(dir.path(), readback(&fake));
    let (action, result) = refund_action();
    let receipt = attest.record(action, Some(&result)).await.unwrap();
    assert_eq!(receipt.level, Some(Level::Verified));
    let body = row(&ledger, receipt.seq);
    assert_eq!(body["decision"], "recorded", "{body}");
    assert_eq!(body["verification"]["method"], "read-back:recipe", "{body}");
    // The vendor holds another amount than the one reported: unverified.
    let (action, _) = refund_action();
    let lied = json!({"id": "re_2", "object": "refund", "amount": 1500, "status": "succeeded"});
    let receipt = attest.record(action, Some(&lied)).await.unwrap();
    assert_eq!(receipt.level, Some(Level::Unverified));
    // Without a result there is nothing to read back by.
    let (action, _) = refund_action();
    let receipt = attest.record(action, None).await.unwrap();
    assert_eq!(receipt.level, Some(Level::AttestedOnly));
    let reads_before = fake.hits().len();
    let (action, result) = refund_action();
    let mut batch = attest.import();
    batch
        .push(attest_core::ImportItem::new(action, Some(result)))
        .unwrap();
    let receipts = batch.commit().await.unwrap();
    assert_eq!(receipts[0].level, Some(Level::Acknowledged));
    assert_eq!(fake.hits().len(), reads_before, "an import read the vendor");
}

//! `attest pending`, `attest confirm` and `attest serve`: the real binary against a
//! ledger where a pipeline (this test process) left requests pending.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use attest_core::approvals::{Choice, LinkSigner, Secret};
use attest_core::{ApprovalStore, Attest, AttestError, ResumeToken, StoreGate};
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, PolicyEngine, Verb};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::{attest, ledger_file, stderr, stdout};

/// Payments ask finance; everything else follows the built-in rules.
pub(crate) const POLICY: &str = "version: 1
groups:
  finance: [ann@acme.com, raj@acme.com]
policies:
  - name: payments
    match: {verb: pay}
    decision: ask
    approvers: [finance]
    reason: payments need finance
";

/// A pipeline on `dir`'s ledger whose gate stores requests and waits up to `wait`.
pub(crate) fn pipeline(dir: &Path, wait: Duration) -> Attest {
    std::fs::write(dir.join("attest.yaml"), POLICY).unwrap();
    let ledger = Arc::new(Ledger::open(ledger_file(dir), LedgerOptions::default()).unwrap());
    let store = Arc::new(ApprovalStore::open(&ledger).unwrap());
    Attest::builder()
        .ledger(ledger)
        .policy(PolicyEngine::from_yaml(POLICY, "attest.yaml").unwrap())
        .gate(
            StoreGate::new(Arc::clone(&store))
                .wait(wait)
                .poll_interval(Duration::from_millis(50)),
        )
        .approvals(store)
        .agent("billing-bot")
        .build()
        .unwrap()
}

pub(crate) fn payment() -> Action {
    Action::new("stripe", Verb::Pay)
        .with_target("acct_42")
        .with_params(json!({"amount": 25000, "currency": "usd", "customer": "cus_9"}))
}

/// Leaves one payment pending; returns its id and token.
async fn pend(dir: &Path) -> (String, ResumeToken) {
    let attest = pipeline(dir, Duration::ZERO);
    match attest
        .run(payment(), |_| async { Ok(json!({"id": "py_1"})) })
        .await
    {
        Err(AttestError::Pending { id, token, .. }) => (id, token),
        other => panic!("expected pending, got {other:?}"),
    }
}

fn rows(dir: &Path) -> u64 {
    let ledger = Ledger::open(ledger_file(dir), LedgerOptions::default()).unwrap();
    ledger.tip().unwrap().map_or(0, |(seq, _)| seq)
}

#[tokio::test]
async fn pending_lists_a_request_and_confirm_approves_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let (id, token) = pend(dir.path()).await;
    let out = attest(dir.path(), &["pending"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(&id), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("ann@acme.com, raj@acme.com"),
        "{}",
        stdout(&out)
    );
    let out = attest(dir.path(), &["pending", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["params_preview"]["amount"], 25000);
    assert!(list[0].get("params").is_none());

    let out = attest(
        dir.path(),
        &["confirm", &id, "approve", "--approver", "bob@acme.com"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a listed approver"),
        "{}",
        stderr(&out)
    );
    let out = attest(
        dir.path(),
        &[
            "confirm",
            &id,
            "approve",
            "--approver",
            "ann@acme.com",
            "--note",
            "ok for Q3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("approved by ann@acme.com"),
        "{}",
        stdout(&out)
    );
    let out = attest(
        dir.path(),
        &["confirm", &id, "reject", "--approver", "raj@acme.com"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already decided"), "{}", stderr(&out));

    // The agent resumes: the action runs once and the outcome row names the approver.
    let attest_ = pipeline(dir.path(), Duration::ZERO);
    let receipt = attest_
        .resume(&token, |_| async { Ok(json!({"id": "py_1"})) })
        .await
        .unwrap();
    // The ask, the intent, then the outcome.
    assert_eq!(receipt.seq, 3);
    assert_eq!(receipt.approver.as_deref(), Some("ann@acme.com"));
    let out = attest(dir.path(), &["pending"]);
    assert!(
        stdout(&out).contains("nothing is waiting"),
        "{}",
        stdout(&out)
    );
    let out = attest(dir.path(), &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[tokio::test]
async fn confirm_by_token_rejects_and_records_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_id, token) = pend(dir.path()).await;
    let out = attest(
        dir.path(),
        &[
            "confirm",
            token.expose(),
            "reject",
            "--approver",
            "raj@acme.com",
            "--note",
            "no",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("ledger seq 2"), "{}", stdout(&out));
    assert_eq!(rows(dir.path()), 2);
    let out = attest(dir.path(), &["export"]);
    let last: Value = serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(
        last["confirm"],
        json!({"outcome": "rejected", "approver": "raj@acme.com", "channel": "cli", "note": "no"})
    );
    // Neither the token nor the raw params are in the ledger.
    assert!(!stdout(&out).contains(token.expose()));
    assert!(!stdout(&out).contains("cus_9"));
}

#[tokio::test]
async fn confirm_says_no_for_unknown_ids_and_usage_errors_for_bad_edits() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let out = attest(
        dir.path(),
        &["confirm", "nope", "approve", "--approver", "ann@acme.com"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no approval request"),
        "{}",
        stderr(&out)
    );
    let out = attest(
        dir.path(),
        &[
            "confirm",
            &id,
            "approve",
            "--approver",
            "ann@acme.com",
            "--edits",
            "{not json",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = attest(dir.path(), &["confirm", &id, "approve"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--approver"), "{}", stderr(&out));
    let out = attest(
        dir.path(),
        &[
            "confirm",
            &id,
            "approve",
            "--approver",
            "ann@acme.com",
            "--edits",
            r#"{"amount": 100}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("edited by ann@acme.com"),
        "{}",
        stdout(&out)
    );
}

/// `attest serve` running in `dir`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `attest serve --port 0 …` and waits for the address it prints.
pub(crate) fn serve(dir: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["serve", "--port", "0"])
        .args(extra)
        .current_dir(dir)
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("attest: approval inbox on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    Server { child, url }
}

async fn call(
    method: reqwest::Method,
    url: impl reqwest::IntoUrl,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test]
async fn the_inbox_api_lists_shows_and_decides_with_fixed_status_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let server = serve(dir.path(), &[]);
    let base = &server.url;
    let get = |path: String| call(reqwest::Method::GET, format!("{base}{path}"), None, None);
    assert_eq!(get("/healthz".into()).await, (200, json!({"ok": true})));
    let (status, body) = get("/api/pending".into()).await;
    assert_eq!(status, 200);
    assert_eq!(body["requests"][0]["id"], id.as_str());
    assert_eq!(
        body["requests"][0]["approver_members"],
        json!(["ann@acme.com", "raj@acme.com"])
    );
    let (status, body) = get(format!("/api/requests/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(body["params"]["customer"], "cus_9");
    assert_eq!(get("/api/requests/unknown".into()).await.0, 404);

    let decide = |body: Value| {
        call(
            reqwest::Method::POST,
            format!("{base}/api/requests/{id}/decision"),
            None,
            Some(body),
        )
    };
    assert_eq!(
        decide(json!({"decision": "maybe", "approver": "ann@acme.com"}))
            .await
            .0,
        400
    );
    assert_eq!(decide(json!({"approver": "ann@acme.com"})).await.0, 400);
    assert_eq!(
        decide(json!({"decision": "approve", "approver": "ann@acme.com", "extra": 1}))
            .await
            .0,
        400
    );
    assert_eq!(
        decide(json!({"decision": "approve", "approver": "ann@acme.com", "edits": [1]}))
            .await
            .0,
        400
    );
    let (status, body) = decide(json!({"decision": "approve", "approver": "eve@evil.io"})).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) =
        decide(json!({"decision": "reject", "approver": "raj@acme.com", "note": "not now"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["request"]["status"], "rejected");
    assert_eq!(body["seq"], 2);
    let (status, _) = decide(json!({"decision": "approve", "approver": "ann@acme.com"})).await;
    assert_eq!(status, 409);
    let (status, _) = call(
        reqwest::Method::POST,
        format!("{base}/api/requests/nope/decision"),
        None,
        Some(json!({"decision": "approve", "approver": "ann@acme.com"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, body) = get("/api/ledger?limit=5".into()).await;
    assert_eq!(status, 200);
    assert_eq!(body["rows"][0]["seq"], 2);
    assert_eq!(get("/api/ledger?limit=x".into()).await.0, 400);
}

#[tokio::test]
async fn a_token_guards_the_api_and_the_page_never_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_id, _token) = pend(dir.path()).await;
    let server = serve(dir.path(), &["--token", "inbox-secret-7"]);
    let url = format!("{}/api/pending", server.url);
    assert_eq!(call(reqwest::Method::GET, &url, None, None).await.0, 401);
    assert_eq!(
        call(reqwest::Method::GET, &url, Some("wrong"), None)
            .await
            .0,
        401
    );
    assert_eq!(
        call(reqwest::Method::GET, &url, Some("inbox-secret-7"), None)
            .await
            .0,
        200
    );
    let page = reqwest::get(format!("{}/", server.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("approval inbox"));
    assert!(!page.contains("inbox-secret-7"));
    let health = call(
        reqwest::Method::GET,
        format!("{}/healthz", server.url),
        None,
        None,
    )
    .await;
    assert_eq!(health.0, 200);
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = attest(dir.path(), &["serve", "--host", "0.0.0.0", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("token is required"),
        "{}",
        stderr(&out)
    );
}

fn slack_signature(secret: &str, ts: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{ts}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn slack_button_presses_are_checked_then_decided() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let secret = "slack-signing-secret";
    let server = serve(dir.path(), &["--slack-signing-secret", secret]);
    let url = format!("{}/slack/interactions", server.url);
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U1", "username": "ann@acme.com"},
        "actions": [{"action_id": "attest_approve", "value": id}],
    });
    let body: String = form_urlencoded_body(&payload.to_string());
    let post = |ts: String, sig: String, body: String| {
        let url = url.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .header("x-slack-request-timestamp", ts)
                .header("x-slack-signature", sig)
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    let now = unix_now().to_string();
    let bad = post(
        now.clone(),
        slack_signature("wrong", &now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(bad.status().as_u16(), 401);
    let old = (unix_now() - 600).to_string();
    let stale = post(
        old.clone(),
        slack_signature(secret, &old, &body),
        body.clone(),
    )
    .await;
    assert_eq!(stale.status().as_u16(), 401);
    assert!(stale.text().await.unwrap().contains("stale"));
    let store_pending = attest(dir.path(), &["pending", "--json"]);
    assert!(stdout(&store_pending).contains(&id));
    let ok = post(
        now.clone(),
        slack_signature(secret, &now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(ok.status().as_u16(), 200);
    let text: Value = ok.json().await.unwrap();
    assert!(
        text["text"]
            .as_str()
            .unwrap()
            .contains("approved by ann@acme.com"),
        "{text}"
    );
    let again = post(now.clone(), slack_signature(secret, &now, &body), body).await;
    let text: Value = again.json().await.unwrap();
    assert!(
        text["text"].as_str().unwrap().contains("already decided"),
        "{text}"
    );
}

fn form_urlencoded_body(payload: &str) -> String {
    let mut out = String::from("payload=");
    for byte in payload.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[tokio::test]
async fn one_click_links_are_signed_expire_and_only_post_decides() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let server = serve(dir.path(), &["--link-key", "link-key-1"]);
    let signer = LinkSigner::new(
        Secret::new("link-key-1"),
        &server.url,
        Duration::from_secs(600),
    );
    let now = SystemTime::now();
    let approve = signer
        .link(&id, Choice::Approve, "raj@acme.com", now)
        .unwrap();
    let client = reqwest::Client::new();
    // Opening the link only shows what it would do.
    let page = client.get(&approve).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("stripe.pay"), "{html}");
    assert!(html.contains("<form method=\"post\""), "{html}");
    assert!(stdout(&attest(dir.path(), &["pending"])).contains(&id));
    // A forged signature, another approver, or an expired link is refused.
    let forged = format!("{}0", approve);
    assert_eq!(
        client.post(&forged).send().await.unwrap().status().as_u16(),
        403
    );
    let swapped = approve.replace("raj%40acme.com", "eve%40evil.io");
    assert_ne!(swapped, approve);
    assert_eq!(
        client
            .post(&swapped)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    let expired = LinkSigner::new(Secret::new("link-key-1"), &server.url, Duration::ZERO)
        .link(&id, Choice::Approve, "raj@acme.com", now)
        .unwrap();
    assert_eq!(
        client
            .post(&expired)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    // The real link decides.
    let done = client.post(&approve).send().await.unwrap();
    assert_eq!(done.status().as_u16(), 200);
    assert!(done.text().await.unwrap().contains("approved"));
    let again = client.post(&approve).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 409);
}

//! `attest pending`, `attest confirm` and `attest serve`: the real binary against a
//! ledger where a pipeline (this test process) left requests pending.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use attest_core::approvals::{Choice, LinkSigner, Secret};
use attest_core::{ApprovalStore, Attest, Outcome, ResumeToken, StoreGate, ToolError};
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
pub(crate) async fn pend(dir: &Path) -> (String, ResumeToken) {
    let attest = pipeline(dir, Duration::ZERO);
    match attest
        .call(payment())
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
        .await
    {
        Ok(Outcome::Held { id, token, .. }) => (id, token),
        other => panic!("expected pending, got {other:?}"),
    }
}

fn rows(dir: &Path) -> u64 {
    let ledger = Ledger::open(ledger_file(dir), LedgerOptions::default()).unwrap();
    ledger.tip().unwrap().map_or(0, |(seq, _)| seq)
}

/// `attest` with `args` in `dir` and only the environment `env`.
pub(crate) fn attest_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(dir, args))
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Registers `name` with `attest approvers add` (and `extra` flags); returns the token.
pub(crate) fn add_approver(dir: &Path, name: &str, extra: &[&str]) -> String {
    let mut args = vec!["approvers", "add", name, "--json"];
    args.extend_from_slice(extra);
    let out = attest(dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(added["name"], name);
    added["token"].as_str().unwrap().to_owned()
}

/// `attest confirm ARGS` as the approver holding `token` (in `ATTEST_APPROVER_TOKEN`).
fn confirm_as(dir: &Path, token: &str, args: &[&str]) -> Output {
    let mut all = vec!["confirm"];
    all.extend_from_slice(args);
    attest_env(dir, &all, &[("ATTEST_APPROVER_TOKEN", token)])
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

    let ann = add_approver(dir.path(), "ann@acme.com", &[]);
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let bob = add_approver(dir.path(), "bob@acme.com", &[]);
    let out = confirm_as(dir.path(), &bob, &[&id, "approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a listed approver"),
        "{}",
        stderr(&out)
    );
    let out = confirm_as(dir.path(), &ann, &[&id, "approve", "--note", "ok for Q3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("approved by ann@acme.com"),
        "{}",
        stdout(&out)
    );
    let out = confirm_as(dir.path(), &raj, &[&id, "reject"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("already decided"), "{}", stderr(&out));

    // The agent resumes: the action runs once and the outcome row names the approver.
    let attest_ = pipeline(dir.path(), Duration::ZERO);
    let receipt = attest_
        .call(&token)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
        .await
        .unwrap()
        .into_receipt();
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
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let out = confirm_as(
        dir.path(),
        &raj,
        &[token.expose(), "reject", "--note", "no"],
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
    let ann = add_approver(dir.path(), "ann@acme.com", &[]);
    let out = confirm_as(dir.path(), &ann, &["nope", "approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no approval request"),
        "{}",
        stderr(&out)
    );
    let out = confirm_as(dir.path(), &ann, &[&id, "approve", "--edits", "{not json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = confirm_as(
        dir.path(),
        &ann,
        &[&id, "approve", "--edits", r#"{"amount": 100}"#],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("edited by ann@acme.com"),
        "{}",
        stdout(&out)
    );
}

#[tokio::test]
async fn a_decision_needs_an_approver_token_never_a_typed_name() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    // A name on the command line is no credential: the flag is gone.
    let out = attest(
        dir.path(),
        &["confirm", &id, "approve", "--approver", "ann@acme.com"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // No token, whatever $USER or $ATTEST_APPROVER say: not recorded, exit 1.
    let out = attest_env(
        dir.path(),
        &["confirm", &id, "approve"],
        &[
            ("USER", "ann@acme.com"),
            ("ATTEST_APPROVER", "ann@acme.com"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("approver token"), "{}", stderr(&out));
    // A token nobody was issued: exit 1.
    let forged = format!("ata_{}", "0".repeat(64));
    let out = confirm_as(dir.path(), &forged, &[&id, "approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&attest(dir.path(), &["pending"])).contains(&id));

    // A token file: written 0600 by `approvers add`, refused when others may read it.
    let out = attest(
        dir.path(),
        &[
            "approvers",
            "add",
            "ann@acme.com",
            "--token-file",
            "ann.token",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).contains("ata_"), "{}", stdout(&out));
    let token_file = dir.path().join("ann.token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = attest(
            dir.path(),
            &["confirm", &id, "approve", "--token-file", "ann.token"],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("chmod 600"), "{}", stderr(&out));
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let out = attest(
        dir.path(),
        &["confirm", &id, "approve", "--token-file", "ann.token"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("approved by ann@acme.com"),
        "{}",
        stdout(&out)
    );
}

#[tokio::test]
async fn approvers_are_added_listed_and_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let out = attest(dir.path(), &["approvers", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no approvers"), "{}", stdout(&out));
    let out = attest(dir.path(), &["approvers", "add", "raj@acme.com"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let raj = stdout(&out).trim().to_owned();
    assert!(raj.starts_with("ata_") && raj.len() == 68, "{raj}");
    assert!(stderr(&out).contains("shown only once"), "{}", stderr(&out));
    add_approver(dir.path(), "ann@acme.com", &["--slack-user", "U0ANN"]);
    // The same name twice is refused (usage error); the token is never listed.
    let out = attest(dir.path(), &["approvers", "add", "RAJ@acme.com"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already registered"),
        "{}",
        stderr(&out)
    );
    let out = attest(dir.path(), &["approvers", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    assert_eq!(list[0]["name"], "ann@acme.com");
    assert_eq!(list[0]["slack_user"], "U0ANN");
    assert_eq!(list[1]["revoked_at"], Value::Null);
    assert!(!stdout(&out).contains(&raj[4..]));

    let out = attest(dir.path(), &["approvers", "revoke", "raj@acme.com"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = attest(dir.path(), &["approvers", "revoke", "raj@acme.com"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = attest(dir.path(), &["approvers", "list"]);
    assert!(stdout(&out).contains("revoked"), "{}", stdout(&out));
    // A revoked token decides nothing.
    let out = confirm_as(dir.path(), &raj, &[&id, "approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&attest(dir.path(), &["pending"])).contains(&id));
}

/// `attest serve` running in `dir`, killed when dropped.
pub(crate) struct Server {
    _running: crate::Running,
    pub(crate) url: String,
}

/// Starts `attest serve --port 0 …` and waits for the address it prints.
/// Makes the ledger `serve` in `dir` (with `extra`'s `--ledger`, if any) reads: `serve`
/// reads an existing ledger and makes none (issue 53 item 6). Registering an agent makes
/// one without registering an approver.
pub(crate) fn make_ledger(dir: &Path, extra: &[&str]) {
    let mut args = vec![
        "agents",
        "add",
        "ledger-maker",
        "--token-file",
        "ledger-maker.token",
    ];
    args.extend_from_slice(extra);
    let out = attest(dir, &args);
    assert!(out.status.success(), "{}", stderr(&out));
}

pub(crate) fn serve(dir: &Path, extra: &[&str]) -> Server {
    serve_env(dir, extra, &[])
}

/// Like [`serve`], with only the environment `env`.
pub(crate) fn serve_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let (running, line) = crate::start_first_line(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(["serve", "--port", "0"])
            .args(crate::store_args(dir, extra))
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().copied()),
    );
    let url = line
        .strip_prefix("attest: approval inbox on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    Server {
        _running: running,
        url,
    }
}

/// An API call as the inbox's own page makes it: same origin, JSON, with a bearer token.
async fn call(
    method: reqwest::Method,
    url: impl reqwest::IntoUrl,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let url = url.into_url().unwrap();
    let origin = url.origin().ascii_serialization();
    let client = reqwest::Client::new();
    let mut request = client.request(method, url).header("origin", origin);
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
async fn the_inbox_api_lists_shows_and_decides_as_the_token_owner() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let ann = add_approver(dir.path(), "ann@acme.com", &[]);
    let eve = add_approver(dir.path(), "eve@evil.io", &[]);
    let server = serve(dir.path(), &[]);
    let base = &server.url;
    let get = |path: String, token: Option<&str>| {
        let (url, token) = (format!("{base}{path}"), token.map(str::to_owned));
        async move { call(reqwest::Method::GET, url, token.as_deref(), None).await }
    };
    assert_eq!(
        get("/healthz".into(), None).await,
        (200, json!({"ok": true}))
    );
    // Every API call needs an approver credential.
    for path in [
        "/api/pending",
        "/api/decided",
        "/api/me",
        "/api/ledger",
        &format!("/api/requests/{id}"),
    ] {
        assert_eq!(get(path.into(), None).await.0, 401, "{path}");
        assert_eq!(get(path.into(), Some("ata_forged")).await.0, 401, "{path}");
    }
    assert_eq!(
        get("/api/me".into(), Some(&raj)).await,
        (200, json!({"approver": "raj@acme.com"}))
    );
    let (status, body) = get("/api/pending".into(), Some(&raj)).await;
    assert_eq!(status, 200);
    assert_eq!(body["requests"][0]["id"], id.as_str());
    let (_, history) = get("/api/decided".into(), Some(&raj)).await;
    assert_eq!(history, json!({"requests": []}));
    assert_eq!(
        body["requests"][0]["approver_members"],
        json!(["ann@acme.com", "raj@acme.com"])
    );
    let (status, body) = get(format!("/api/requests/{id}"), Some(&raj)).await;
    assert_eq!(status, 200);
    assert_eq!(body["params"]["customer"], "cus_9");
    assert_eq!(get("/api/requests/unknown".into(), Some(&raj)).await.0, 404);

    let decide = |token: &str, body: Value| {
        let (url, token) = (
            format!("{base}/api/requests/{id}/decision"),
            token.to_owned(),
        );
        async move { call(reqwest::Method::POST, url, Some(&token), Some(body)).await }
    };
    assert_eq!(decide(&raj, json!({"decision": "maybe"})).await.0, 400);
    assert_eq!(decide(&raj, json!({})).await.0, 400);
    // The approver is the token's owner: a name in the body is refused, never used.
    assert_eq!(
        decide(
            &eve,
            json!({"decision": "approve", "approver": "ann@acme.com"})
        )
        .await
        .0,
        400
    );
    assert_eq!(
        decide(&raj, json!({"decision": "approve", "edits": [1]}))
            .await
            .0,
        400
    );
    assert_eq!(
        call(
            reqwest::Method::POST,
            format!("{base}/api/requests/{id}/decision"),
            None,
            Some(json!({"decision": "approve"}))
        )
        .await
        .0,
        401
    );
    let (status, body) = decide(&eve, json!({"decision": "approve"})).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = decide(&raj, json!({"decision": "reject", "note": "not now"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["request"]["status"], "rejected");
    assert_eq!(body["request"]["approver"], "raj@acme.com");
    assert_eq!(body["seq"], 2);
    // Before the decision the history was empty; now it leads with it.
    let (status, body) = get("/api/decided?limit=5".into(), Some(&ann)).await;
    assert_eq!(status, 200, "{body}");
    let decided = body["requests"].as_array().unwrap();
    assert_eq!(decided.len(), 1, "{body}");
    assert_eq!(decided[0]["id"], id.as_str());
    assert_eq!(
        (
            &decided[0]["status"],
            &decided[0]["approver"],
            &decided[0]["note"]
        ),
        (
            &json!("rejected"),
            &json!("raj@acme.com"),
            &json!("not now")
        )
    );
    assert_eq!(get("/api/decided?limit=x".into(), Some(&ann)).await.0, 400);
    let (status, _) = decide(&ann, json!({"decision": "approve"})).await;
    assert_eq!(status, 409);
    let (status, _) = call(
        reqwest::Method::POST,
        format!("{base}/api/requests/nope/decision"),
        Some(&ann),
        Some(json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, body) = get("/api/ledger?limit=5".into(), Some(&raj)).await;
    assert_eq!(status, 200);
    assert_eq!(body["rows"][0]["seq"], 2);
    assert_eq!(get("/api/ledger?limit=x".into(), Some(&raj)).await.0, 400);
}

#[tokio::test]
async fn the_inbox_is_a_browser_app_that_refuses_rebinding_csrf_and_framing() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let server = serve(dir.path(), &[]);
    let base = &server.url;
    let port = base.rsplit(':').next().unwrap().to_owned();
    let client = reqwest::Client::new();
    let decision = format!("{base}/api/requests/{id}/decision");
    // DNS rebinding: a page on evil.example whose name now points at 127.0.0.1.
    for host in [format!("evil.example:{port}"), "127.0.0.1".to_owned()] {
        let answer = client
            .get(format!("{base}/api/pending"))
            .header("host", host.as_str())
            .bearer_auth(&raj)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 421, "{host}");
    }
    let local = client
        .get(format!("{base}/healthz"))
        .header("host", format!("localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(local.status().as_u16(), 200);
    // CSRF: a state-changing request from another origin, or not JSON (a bearer token
    // with no Origin at all is a script: `scripts_decide_with_a_bearer_token_and_no_origin`).
    let post = |origin: Option<String>, content_type: &'static str| {
        let mut request = client
            .post(&decision)
            .bearer_auth(&raj)
            .header("content-type", content_type)
            .body(r#"{"decision":"approve"}"#);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let same = format!("http://127.0.0.1:{port}");
    for (origin, content_type, status) in [
        (
            Some("http://evil.example".to_owned()),
            "application/json",
            403,
        ),
        (Some("null".to_owned()), "application/json", 403),
        (None, "text/plain", 415),
        (Some(same.clone()), "text/plain", 415),
        (Some(same.clone()), "application/x-www-form-urlencoded", 415),
    ] {
        let answer = post(origin.clone(), content_type).await.unwrap();
        assert_eq!(
            answer.status().as_u16(),
            status,
            "{origin:?} {content_type}"
        );
    }
    assert!(stdout(&attest(dir.path(), &["pending"])).contains(&id));
    // Framing: the page and the API forbid it, the page loads nothing from elsewhere.
    for path in ["/", "/api/pending", "/healthz"] {
        let answer = client
            .get(format!("{base}{path}"))
            .bearer_auth(&raj)
            .send()
            .await
            .unwrap();
        let headers = answer.headers();
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
    }
    let page = client
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("approval inbox"));
    assert!(page.contains("Approver token"));
    assert!(!page.contains(&raj));
    // The page's own decision, as a browser sends it, is accepted.
    let answer = post(Some(same), "application/json; charset=utf-8")
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
}

#[tokio::test]
async fn the_api_shows_an_approver_the_call_but_not_its_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let attest_ = pipeline(dir.path(), Duration::ZERO);
    let action = payment().with_params(json!({
        "amount": 25000, "customer": "cus_9", "api_key": "sk_live_SECRET", "card": {"cvc_token": "tok_SECRET"}
    }));
    let Ok(Outcome::Held { id, .. }) = attest_
        .call(action)
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
        .await
    else {
        panic!("expected pending")
    };
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let server = serve(dir.path(), &[]);
    let (status, body) = call(
        reqwest::Method::GET,
        format!("{}/api/requests/{id}", server.url),
        Some(&raj),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["params"]["customer"], "cus_9");
    assert!(!body.to_string().contains("SECRET"), "{body}");
    assert!(body["params"]["api_key"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
}

#[tokio::test]
async fn a_request_has_a_page_and_its_view_says_where_the_call_goes() {
    let dir = tempfile::tempdir().unwrap();
    let attest_ = pipeline(dir.path(), Duration::ZERO);
    let held = |action: Action| {
        let attest_ = attest_.clone();
        async move {
            match attest_
                .call(action)
                .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
                .await
            {
                Ok(Outcome::Held { id, .. }) => id,
                other => panic!("expected pending, got {other:?}"),
            }
        }
    };
    // Through the gateway: a method and a URL (whose password is never shown).
    let mut http = payment();
    http.extra.method = Some("POST".to_owned());
    http.extra.url =
        Some("https://bot:hunter2@api.stripe.com/v1/charges?expand=customer".to_owned());
    let http = held(http).await;
    // Through MCP: a server and a tool.
    let mut mcp = payment().with_params(json!({"amount": 7}));
    mcp.extra.server = Some("payments".to_owned());
    mcp.extra.tool_name = Some("create_charge".to_owned());
    let mcp = held(mcp).await;
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let server = serve(dir.path(), &[]);
    let view = |id: String| {
        let url = format!("{}/api/requests/{id}", server.url);
        let raj = raj.clone();
        async move { call(reqwest::Method::GET, url, Some(&raj), None).await }
    };
    let (status, body) = view(http.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(body["method"], "POST");
    let url = body["url"].as_str().unwrap();
    assert!(url.starts_with("https://bot:"), "{url}");
    assert!(
        url.ends_with("@api.stripe.com/v1/charges?expand=customer"),
        "{url}"
    );
    assert!(!body.to_string().contains("hunter2"), "{body}");
    let (status, body) = view(mcp).await;
    assert_eq!(status, 200);
    assert_eq!(
        (&body["server"], &body["tool"]),
        (&json!("payments"), &json!("create_charge"))
    );
    assert_eq!(body["method"], Value::Null);

    // The link a held call hands out is a page a browser opens (it signs in there),
    // not the API's 401.
    let page = reqwest::get(format!("{}/requests/{http}", server.url))
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/html")));
    let html = page.text().await.unwrap();
    assert!(
        html.contains("/api/requests/"),
        "the page reads the request"
    );
    assert!(
        html.contains("Goes to "),
        "the page says where the call goes"
    );
}

#[tokio::test]
async fn dashboard_runs_name_every_agent_and_an_approved_call_is_not_waiting_for_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let attest_ = pipeline(dir.path(), Duration::ZERO);
    let mut ids = Vec::new();
    for (agent, amount) in [("agent-a", 10), ("agent-b", 20)] {
        let mut action = payment().with_params(json!({"amount": amount}));
        action.agent = Some(agent.to_owned());
        action.run_id = Some("run-9".to_owned());
        match attest_
            .call(action)
            .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
            .await
        {
            Ok(Outcome::Held { id, .. }) => ids.push(id),
            other => panic!("expected pending, got {other:?}"),
        }
    }
    let ann = add_approver(dir.path(), "ann@acme.com", &[]);
    attest_
        .decide(&ids[0], attest_core::Answer::approve("ann@acme.com", "cli"))
        .await
        .unwrap();
    let server = serve(dir.path(), &[]);
    let get = |path: &str| {
        let url = format!("{}{path}", server.url);
        let ann = ann.clone();
        async move { call(reqwest::Method::GET, url, Some(&ann), None).await }
    };
    let (status, runs) = get("/api/review/runs").await;
    assert_eq!(status, 200, "{runs}");
    assert_eq!(runs["runs"][0]["run_id"], "run-9");
    assert_eq!(runs["runs"][0]["agents"], json!(["agent-a", "agent-b"]));
    let (status, run) = get("/api/review/runs/run-9").await;
    assert_eq!(status, 200, "{run}");
    let status_of = |id: &str| {
        run["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["action_id"] == id)
            .map(|row| (row["status"].clone(), row["approver"].clone()))
            .unwrap()
    };
    assert_eq!(
        status_of(&ids[0]),
        (json!("approved"), json!("ann@acme.com"))
    );
    assert_eq!(status_of(&ids[1]).0, json!("pending"));
}

#[test]
fn listening_on_every_address_needs_the_public_url() {
    let dir = tempfile::tempdir().unwrap();
    make_ledger(dir.path(), &[]);
    let out = attest(dir.path(), &["serve", "--host", "0.0.0.0", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--public-url"), "{}", stderr(&out));
}

pub(crate) fn slack_signature(secret: &str, ts: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{ts}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

pub(crate) fn unix_now() -> u64 {
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
    add_approver(dir.path(), "ann@acme.com", &["--slack-user", "U1ANN"]);
    let server = serve_env(dir.path(), &[], &[("ATTEST_SLACK_SIGNING_SECRET", secret)]);
    let url = format!("{}/slack/interactions", server.url);
    let press = |user: Value| {
        form_urlencoded_body(
            &json!({
                "type": "block_actions",
                "user": user,
                "actions": [{"action_id": "attest_approve", "value": id}],
            })
            .to_string(),
        )
    };
    let body = press(json!({"id": "U1ANN", "username": "someone-else"}));
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
    // A Slack user who renamed themselves "ann@acme.com" is not ann: only the user id counts.
    let impostor =
        press(json!({"id": "U9EVE", "username": "ann@acme.com", "name": "ann@acme.com"}));
    let answer = post(
        now.clone(),
        slack_signature(secret, &now, &impostor),
        impostor,
    )
    .await;
    assert_eq!(answer.status().as_u16(), 200);
    let text: Value = answer.json().await.unwrap();
    assert!(
        text["text"].as_str().unwrap().contains("not recorded"),
        "{text}"
    );
    assert!(stdout(&attest(dir.path(), &["pending"])).contains(&id));
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

pub(crate) fn form_urlencoded_body(payload: &str) -> String {
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
async fn scripts_decide_with_a_bearer_token_and_no_origin() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    let raj = add_approver(dir.path(), "raj@acme.com", &[]);
    let server = serve(
        dir.path(),
        &["--trusted-identity-header", "X-Forwarded-User"],
    );
    let decision = format!("{}/api/requests/{id}/decision", server.url);
    let client = reqwest::Client::new();
    // A session the browser adds by itself (the proxy's header) still needs the Origin.
    let header_session = client
        .post(&decision)
        .header("x-forwarded-user", "raj@acme.com")
        .header("content-type", "application/json")
        .body(r#"{"decision":"approve"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(header_session.status().as_u16(), 403);
    assert!(stdout(&attest(dir.path(), &["pending"])).contains(&id));
    // curl or a ChatOps bot: the approver's own token, no Origin header; decided.
    let curl = std::process::Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", "POST"])
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", &format!("Authorization: Bearer {raj}")])
        .args([
            "-d",
            r#"{"decision": "approve", "note": "from a script"}"#,
            &decision,
        ])
        .output();
    let Ok(curl) = curl else {
        crate::peer_missing("curl is missing");
        return;
    };
    let out = stdout(&curl);
    assert!(out.ends_with("\n200"), "{out}{}", crate::stderr(&curl));
    assert!(out.contains("\"approved\""), "{out}");
    assert!(!stdout(&attest(dir.path(), &["pending"])).contains(&id));
}

#[tokio::test]
async fn one_click_links_are_signed_expire_and_only_post_decides() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    add_approver(dir.path(), "raj@acme.com", &[]);
    std::fs::write(dir.path().join("link.key"), "link-key-1\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = dir.path().join("link.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let server = serve(dir.path(), &["--link-key-file", "link.key"]);
    let origin = server.url.clone();
    let signer = LinkSigner::new(
        Secret::new("link-key-1"),
        &server.url,
        Duration::from_secs(600),
    );
    let now = SystemTime::now();
    let approve = signer
        .link(&id, Choice::Approve, "raj@acme.com", now)
        .unwrap();
    let client = reqwest::Client::builder()
        .default_headers(
            [(reqwest::header::ORIGIN, origin.parse().unwrap())]
                .into_iter()
                .collect(),
        )
        .build()
        .unwrap();
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
    // A link signed with the real key for someone who is not a registered approver.
    let stranger = signer
        .link(&id, Choice::Approve, "eve@evil.io", now)
        .unwrap();
    assert_eq!(
        client
            .post(&stranger)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    // A link posted from another site is refused.
    let cross = reqwest::Client::new()
        .post(&approve)
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status().as_u16(), 403);
    // The real link decides.
    let done = client.post(&approve).send().await.unwrap();
    assert_eq!(done.status().as_u16(), 200);
    assert!(done.text().await.unwrap().contains("approved"));
    let again = client.post(&approve).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 409);
}

#[tokio::test]
async fn the_pending_table_stays_aligned_with_long_approver_lists() {
    let dir = tempfile::tempdir().unwrap();
    let many: Vec<String> = (0..6)
        .map(|i| format!("approver-{i}@finance.acme.com"))
        .collect();
    let policy = format!(
        "policies:\n  - name: payments\n    match: {{verb: pay}}\n    decision: ask\n    approvers: [{}]\n  - name: sends\n    match: {{verb: send}}\n    decision: ask\n",
        many.join(", ")
    );
    std::fs::write(dir.path().join("attest.yaml"), &policy).unwrap();
    let ledger = Arc::new(Ledger::open(ledger_file(dir.path()), LedgerOptions::default()).unwrap());
    let store = Arc::new(ApprovalStore::open(&ledger).unwrap());
    let attest_api = Attest::builder()
        .ledger(ledger)
        .policy(PolicyEngine::from_yaml(&policy, "attest.yaml").unwrap())
        .gate(StoreGate::new(Arc::clone(&store)))
        .approvals(store)
        .build()
        .unwrap();
    for action in [payment(), Action::new("gmail", Verb::Send)] {
        let held = attest_api
            .call(action)
            .run(|_| async { Ok::<_, ToolError>(json!({})) })
            .await;
        assert!(matches!(held, Ok(Outcome::Held { .. })), "{held:?}");
    }
    let out = attest(dir.path(), &["pending"]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    // The last column ("why") starts at the same place on every line.
    let why = lines[0].find("why").unwrap();
    for line in &lines[1..] {
        assert!(line[..why].ends_with("  "), "{text}");
        assert!(!line[why..].starts_with(' '), "{text}");
    }
    assert!(text.contains(&many.join(", ")), "{text}");
}

#[cfg(unix)]
#[tokio::test]
async fn the_ledger_its_directory_and_keys_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    // A fresh ledger (which also holds held params) in a fresh .attest directory.
    let out = attest(dir.path(), &["demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    add_approver(dir.path(), "ann@acme.com", &[]);
    let ledger = dir.path().join(".attest/ledger.sqlite");
    assert_eq!(mode(&dir.path().join(".attest")), 0o700);
    assert_eq!(mode(&ledger), 0o600);
    for companion in ["ledger.sqlite-wal", "ledger.sqlite-shm"] {
        let path = dir.path().join(".attest").join(companion);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{companion}");
        }
    }
    // A signing key others may read is refused, naming the file and the fix.
    let out = attest(dir.path(), &["keygen", "--name", "attest.test/files"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let key = dir.path().join(".attest/signing.key");
    assert_eq!(mode(&key), 0o600);
    let out = attest(dir.path(), &["checkpoint"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = attest(dir.path(), &["checkpoint"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("chmod 600") && stderr(&out).contains("signing.key"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    make_ledger(dir.path(), &[]);
    let server = serve(dir.path(), &[]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // Half a request, then silence (slowloris).
    slow.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .await
        .unwrap();
    let mut rest = Vec::new();
    // The inbox allows 10 s for headers; the bound here only keeps a broken build from hanging.
    let read = tokio::time::timeout(Duration::from_secs(60), slow.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection was still open after 60 s");
    assert!(
        !String::from_utf8_lossy(&rest).contains("\"ok\""),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    // Others are served meanwhile and after.
    let (status, _) = call(
        reqwest::Method::GET,
        format!("{}/healthz", server.url),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn behind_an_authenticating_proxy_its_identity_header_names_the_approver() {
    let dir = tempfile::tempdir().unwrap();
    let (id, _token) = pend(dir.path()).await;
    add_approver(dir.path(), "raj@acme.com", &[]);
    let server = serve(
        dir.path(),
        &["--trusted-identity-header", "X-Forwarded-User"],
    );
    let client = reqwest::Client::new();
    let decide = |who: &'static str| {
        client
            .post(format!("{}/api/requests/{id}/decision", server.url))
            .header("origin", &server.url)
            .header("x-forwarded-user", who)
            .json(&json!({"decision": "approve"}))
            .send()
    };
    // A name the proxy vouches for must still be a registered approver.
    assert_eq!(
        decide("mallory@acme.com").await.unwrap().status().as_u16(),
        401
    );
    let answer = decide("raj@acme.com").await.unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["request"]["approver"], "raj@acme.com");
    // Without the option, the header means nothing.
    drop(server);
    let (other, _) = pend(dir.path()).await;
    let plain = serve(dir.path(), &[]);
    let answer = client
        .post(format!("{}/api/requests/{other}/decision", plain.url))
        .header("origin", &plain.url)
        .header("x-forwarded-user", "raj@acme.com")
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 401);
}

/// `attest serve`'s standard error up to its dashboard line.
fn serve_notices(dir: &Path) -> String {
    use std::io::{BufRead, BufReader};
    let child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["serve", "--port", "0"])
        .args(crate::store_args(dir, &[]))
        .current_dir(dir)
        .env_clear()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = crate::Running(child);
    let stderr = running.0.stderr.take().unwrap();
    let mut shown = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        shown.push_str(&line);
        shown.push('\n');
        if line.contains("dashboard on") {
            break;
        }
    }
    shown
}

#[test]
fn serve_with_no_approvers_says_nobody_can_sign_in_and_how_to_add_one() {
    let dir = tempfile::tempdir().unwrap();
    make_ledger(dir.path(), &[]);
    let shown = serve_notices(dir.path());
    assert!(
        shown.contains("no approvers are registered")
            && shown.contains("attest approvers add NAME"),
        "{shown}"
    );
    add_approver(dir.path(), "ann@acme.com", &[]);
    let shown = serve_notices(dir.path());
    assert!(shown.contains("dashboard on"), "{shown}");
    assert!(!shown.contains("no approvers"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_says_a_waiting_call_runs_now_and_a_held_one_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let ann = add_approver(dir.path(), "ann@acme.com", &[]);
    // Block mode: the agent's call waits in this process while a person approves.
    let agent = pipeline(dir.path(), Duration::from_secs(60));
    let waiting = tokio::spawn(async move {
        agent
            .call(payment())
            .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
            .await
    });
    let id = loop {
        let out = attest(dir.path(), &["pending", "--json"]);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
        if let Some(id) = list[0]["id"].as_str() {
            break id.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let out = confirm_as(dir.path(), &ann, &[&id, "approve"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains("a call still waiting for it runs now"),
        "{said}"
    );
    assert!(
        !said.contains("it runs when the agent resumes it"),
        "{said}"
    );
    // And it did: the waiting call ran without being made again.
    let ran = tokio::time::timeout(Duration::from_secs(30), waiting).await;
    assert!(matches!(ran, Ok(Ok(Ok(Outcome::Ran { .. })))), "{ran:?}");
    // A held call (pending mode, or after its wait): it runs when made again or resumed.
    let (id, _) = pend(dir.path()).await;
    let out = confirm_as(dir.path(), &ann, &[&id, "approve"]);
    let said = stdout(&out);
    assert!(
        said.contains("a held call runs when the agent resumes it or makes it again"),
        "{said}"
    );
}

/// Issue 53: every command that reads the approvals says which ledger it uses, and one run
/// where there is no ledger names the path and where a ledger comes from instead of
/// serving, listing or deciding on an empty one it made.
#[test]
fn commands_name_their_ledger_and_make_none_where_one_is_expected() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join(".attest/ledger.sqlite");
    let no_ledger = |output: &std::process::Output, what: &str| {
        assert_eq!(output.status.code(), Some(2), "{what}: {}", stderr(output));
        let said = stderr(output);
        assert!(
            said.contains("no ledger at .attest/ledger.sqlite") && said.contains("ATTEST_LEDGER"),
            "{what}: {said}"
        );
        assert!(!ledger.exists(), "{what} made a ledger");
    };
    let serve = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["serve", "--port", "0"])
        .current_dir(dir.path())
        .env_clear()
        .output()
        .unwrap();
    no_ledger(&serve, "serve");
    no_ledger(&attest(dir.path(), &["pending"]), "pending");
    no_ledger(
        &attest(dir.path(), &["approvers", "list"]),
        "approvers list",
    );
    let confirm = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["confirm", "r1", "approve"])
        .current_dir(dir.path())
        .env_clear()
        .env("ATTEST_APPROVER_TOKEN", "not-a-token")
        .output()
        .unwrap();
    no_ledger(&confirm, "confirm");

    // An administrator's first `approvers add` makes the ledger, and says so.
    let added = attest(
        dir.path(),
        &[
            "approvers",
            "add",
            "ann@acme.com",
            "--token-file",
            "ann.token",
        ],
    );
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    assert!(
        stderr(&added)
            .contains("no ledger was at .attest/ledger.sqlite, so this made an empty one"),
        "{}",
        stderr(&added)
    );
    assert!(ledger.exists());
    let listed = attest(dir.path(), &["pending"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(
        stderr(&listed).contains("attest: ledger .attest/ledger.sqlite"),
        "{}",
        stderr(&listed)
    );
}

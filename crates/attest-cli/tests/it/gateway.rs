//! `attest gateway` between a real HTTP client (curl) and a fake vendor API (axum on
//! 127.0.0.1, in this process).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::{attest, stderr, stdout};

const TOKEN: &str = "Bearer sekret-token-42";

#[derive(Default)]
pub(crate) struct Vendor {
    notes: HashMap<String, Value>,
    /// Every request that reached the vendor: `METHOD /path`.
    pub(crate) hits: Vec<String>,
}

pub(crate) type Shared = Arc<Mutex<Vendor>>;

fn authorised(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(TOKEN)
}

async fn create(
    State(v): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> impl IntoResponse {
    let mut v = v.lock().unwrap();
    v.hits.push("POST /v1/notes".into());
    if !authorised(&headers) {
        return (
            StatusCode::UNAUTHORIZED,
            HeaderMap::new(),
            Json(json!({"error": "no"})),
        );
    }
    let id = format!("n{}", v.notes.len() + 1);
    let mut note = body;
    note["id"] = json!(id);
    v.notes.insert(id.clone(), note);
    let mut headers = HeaderMap::new();
    headers.insert("location", format!("/v1/notes/{id}").parse().unwrap());
    (StatusCode::CREATED, headers, Json(json!({"id": id})))
}

async fn read(
    State(v): State<Shared>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> impl IntoResponse {
    let mut v = v.lock().unwrap();
    v.hits.push(format!("GET /v1/notes/{id}"));
    if !authorised(&headers) {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "no"})));
    }
    match v.notes.get(&id) {
        Some(note) => (StatusCode::OK, Json(note.clone())),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "no such note"})),
        ),
    }
}

/// Stores the title, except that a title starting with `!` is stored changed.
async fn patch(
    State(v): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Json(body): Json<Value>,
) -> impl IntoResponse {
    let mut v = v.lock().unwrap();
    v.hits.push(format!("PATCH /v1/notes/{id}"));
    let title = body["title"].as_str().unwrap_or_default().to_owned();
    let stored = if title.starts_with('!') {
        format!("{title} (mangled)")
    } else {
        title
    };
    if let Some(note) = v.notes.get_mut(&id) {
        note["title"] = json!(stored);
    }
    (StatusCode::OK, Json(json!({"id": id, "ok": true})))
}

async fn delete(State(v): State<Shared>, UrlPath(id): UrlPath<String>) -> StatusCode {
    v.lock()
        .unwrap()
        .hits
        .push(format!("DELETE /v1/notes/{id}"));
    StatusCode::NO_CONTENT
}

/// Starts the vendor on 127.0.0.1 on its own runtime; returns its base URL.
pub(crate) fn start_vendor(vendor: Shared) -> String {
    serve_app(move || {
        Router::new()
            .route("/v1/notes", post(create))
            .route("/v1/notes/{id}", get(read).patch(patch).delete(delete))
            .with_state(vendor)
    })
}

/// Serves the router `app` builds on 127.0.0.1, on its own thread and runtime; returns
/// its base URL.
pub(crate) fn serve_app(app: impl FnOnce() -> Router + Send + 'static) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let app = app();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// Kills the gateway when the test ends, pass or fail.
pub(crate) struct Gateway(Child);

impl Gateway {
    /// SIGKILLs the gateway now, and reaps it (a zombie would still look alive).
    pub(crate) fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn start_gateway(dir: &Path, upstream: &str, extra: &[&str]) -> (Gateway, String) {
    start_gateway_with(dir, upstream, extra, &[])
}

/// [`start_gateway`] with `env` (its only environment).
pub(crate) fn start_gateway_with(
    dir: &Path,
    upstream: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Gateway, String) {
    start_gateway_on(dir, "ledger.sqlite", upstream, extra, env)
}

/// [`start_gateway_with`] on the ledger at `ledger` (a file in `dir`, or a URL).
pub(crate) fn start_gateway_on(
    dir: &Path,
    ledger: &str,
    upstream: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Gateway, String) {
    start_gateway_logging(dir, ledger, upstream, extra, env, Stdio::inherit())
}

/// [`start_gateway_on`] with the gateway's standard error (its log) sent to `log`.
pub(crate) fn start_gateway_logging(
    dir: &Path,
    ledger: &str,
    upstream: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    log: Stdio,
) -> (Gateway, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir,
            &[
                "--ledger",
                ledger,
                "--policy",
                "policy.yaml",
                "gateway",
                "--port",
                "0",
            ],
        ))
        .args(["--upstream", upstream])
        .args(extra)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("attest gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    (Gateway(child), address)
}

/// One request with curl: (status, lower-case headers, body).
pub(crate) fn curl(
    method: &str,
    url: &str,
    body: Option<&Value>,
    extra: &[&str],
) -> (u16, HashMap<String, String>, String) {
    let mut command = Command::new("curl");
    command
        .args([
            "-s",
            "-i",
            "-X",
            method,
            "-H",
            &format!("Authorization: {TOKEN}"),
        ])
        .args(extra);
    if let Some(body) = body {
        command.args([
            "-H",
            "Content-Type: application/json",
            "--data",
            &body.to_string(),
        ]);
    }
    let output = command.arg(url).output().unwrap();
    assert!(output.status.success(), "curl failed: {}", stderr(&output));
    let text = stdout(&output);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

/// Registers the approver `ann`, her token in `dir/ann.token`.
fn add_ann(dir: &Path) {
    add_ann_on(dir, "ledger.sqlite");
}

/// [`add_ann`] beside the ledger at `ledger`.
pub(crate) fn add_ann_on(dir: &Path, ledger: &str) {
    let added = attest(
        dir,
        &[
            "--ledger",
            ledger,
            "approvers",
            "add",
            "ann",
            "--token-file",
            "ann.token",
        ],
    );
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
}

/// `ann` approves request `id` with her token file.
fn confirm_as_ann(dir: &Path, id: &str) {
    confirm_as_ann_on(dir, "ledger.sqlite", id);
}

/// [`confirm_as_ann`] beside the ledger at `ledger`.
pub(crate) fn confirm_as_ann_on(dir: &Path, ledger: &str, id: &str) {
    let confirm = attest(
        dir,
        &[
            "--ledger",
            ledger,
            "confirm",
            id,
            "approve",
            "--token-file",
            "ann.token",
        ],
    );
    assert_eq!(confirm.status.code(), Some(0), "{}", stderr(&confirm));
}

pub(crate) fn curl_missing() -> bool {
    let missing = Command::new("curl").arg("--version").output().is_err();
    if missing {
        crate::peer_missing("curl is missing");
    }
    missing
}

pub(crate) const POLICY: &str = r#"
version: 1
policies:
  - name: no-deletes
    match: {verb: delete}
    decision: refuse
    reason: notes are never deleted by agents
  - name: sandbox-writes
    match: {verb: [create, update, write]}
    decision: act
    reason: the test vendor is a sandbox
"#;

#[test]
fn gateway_verifies_contradicts_and_refuses_writes() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (gateway, address) = start_gateway(dir.path(), &upstream, &[]);

    // A write, read back with the caller's own credentials: verified.
    let (status, headers, body) = curl(
        "POST",
        &format!("{address}/v1/notes"),
        Some(&json!({"title": "plan", "body": "ship it"})),
        &[],
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(headers["x-attest-decision"], "act");
    assert_eq!(headers["x-attest-level"], "verified");
    // Seq 1 is the intent, durable before the request went upstream.
    assert_eq!(headers["x-attest-seq"], "2");
    assert_eq!(headers["location"], "/v1/notes/n1");

    // A write the vendor acknowledges but stores differently: unverified.
    let (status, headers, _) = curl(
        "PATCH",
        &format!("{address}/v1/notes/n1"),
        Some(&json!({"title": "!plan b"})),
        &[],
    );
    assert_eq!(status, 200);
    assert_eq!(headers["x-attest-level"], "unverified");
    assert_eq!(headers["x-attest-seq"], "4");

    // A refused delete: 403, and the vendor never sees it.
    let (status, headers, body) = curl("DELETE", &format!("{address}/v1/notes/n1"), None, &[]);
    assert_eq!(status, 403, "{body}");
    assert_eq!(headers["x-attest-decision"], "refuse");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(error["reasons"][0]
        .as_str()
        .unwrap()
        .contains("never deleted"));
    assert!(!vendor
        .lock()
        .unwrap()
        .hits
        .iter()
        .any(|h| h.starts_with("DELETE")));

    // A read passes through without a record; the upstream may also be named in the
    // path or in X-Attest-Upstream.
    let (status, headers, body) = curl(
        "GET",
        &format!("{address}/{upstream}/v1/notes/n1"),
        None,
        &[],
    );
    assert_eq!(status, 200, "{body}");
    assert!(!headers.contains_key("x-attest-seq"));
    let header = format!("X-Attest-Upstream: {upstream}");
    let (status, _, _) = curl(
        "GET",
        &format!("{address}/v1/notes/n1"),
        None,
        &["-H", &header],
    );
    assert_eq!(status, 200);

    // A bad upstream is the caller's error, named.
    let (status, _, body) = curl(
        "GET",
        &format!("{address}/v1/x"),
        None,
        &["-H", "X-Attest-Upstream: ftp://x"],
    );
    assert_eq!(status, 400);
    assert!(
        body.contains("X-Attest-Upstream") || body.contains("x-attest-upstream"),
        "{body}"
    );
    drop(gateway);

    let verify = attest(dir.path(), &["--ledger", "ledger.sqlite", "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    let export = attest(dir.path(), &["--ledger", "ledger.sqlite", "export"]);
    let jsonl = stdout(&export);
    // Two writes (an intent and an outcome each) and the refused delete.
    assert_eq!(jsonl.lines().count(), 5, "{jsonl}");
    assert!(!jsonl.contains("sekret"), "a credential reached the ledger");
    assert!(jsonl.contains("\"decision\":\"refuse\""));
    // Both writes were read back through the gateway with the caller's credentials.
    let checks: Vec<Value> = crate::outcome_entries(dir.path())
        .into_iter()
        .map(|entry| entry["verification"].clone())
        .collect();
    assert_eq!(checks[0]["method"], "read-back:gateway", "{}", checks[0]);
    assert_eq!(
        checks[0]["evidence"]["source"],
        format!("GET {upstream}/v1/notes/n1")
    );
    assert_eq!(checks[0]["evidence"]["status"], 200);
    assert_eq!(checks[1]["method"], "read-back:gateway", "{}", checks[1]);
    assert_eq!(
        checks[1]["evidence"]["fields"][0]["ok"], false,
        "{}",
        checks[1]
    );
}

#[test]
fn gateway_requests_example_runs() {
    if !crate::mcp::python_with("requests") || curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &[]);
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/python/gateway_requests.py");
    let output = Command::new(crate::python())
        .arg(example)
        .env("ATTEST_GATEWAY", &address)
        .env("VENDOR_TOKEN", "sekret-token-42")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    let text = stdout(&output);
    assert!(text.contains("decision=act level=verified "), "{text}");
    assert!(text.contains("403"), "{text}");
}

#[test]
fn gateway_holds_a_write_then_resumes_it_after_confirm() {
    let dir = tempfile::tempdir().unwrap();
    holds_then_resumes(dir.path(), "ledger.sqlite");
}

#[test]
fn gateway_on_postgres_holds_a_write_then_resumes_it_after_confirm() {
    let Some(db) = crate::pg_db("gateway_on_postgres_holds_a_write") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    holds_then_resumes(dir.path(), &db.url);
}

/// Ask → 202 → `attest approvers add` and `attest confirm` from other processes → resume
/// runs it once, on the ledger at `ledger`.
fn holds_then_resumes(dir: &Path, ledger: &str) {
    if curl_missing() {
        return;
    }
    let policy = "version: 1\npolicies:\n  - name: notes-ask\n    match: {verb: create}\n    decision: ask\n    reason: a person reviews new notes\n";
    std::fs::write(dir.join("policy.yaml"), policy).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, address) = start_gateway_on(dir, ledger, &upstream, &["--mode", "pending"], &[]);

    let (status, headers, body) = curl(
        "POST",
        &format!("{address}/v1/notes"),
        Some(&json!({"title": "held", "body": "until approved"})),
        &[],
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(headers["x-attest-decision"], "ask");
    let held: Value = serde_json::from_str(&body).unwrap();
    // The agent is told to wait, never how to approve.
    assert!(!body.contains("attest confirm"), "{body}");
    let (id, resume) = (
        held["id"].as_str().unwrap(),
        held["resume"].as_str().unwrap(),
    );
    assert!(
        vendor.lock().unwrap().hits.is_empty(),
        "a held write reached the vendor"
    );

    add_ann_on(dir, ledger);
    confirm_as_ann_on(dir, ledger, id);

    let (status, headers, body) = curl("POST", &format!("{address}{resume}"), None, &[]);
    assert_eq!(status, 201, "{body}");
    assert_eq!(headers["x-attest-level"], "verified");
    assert_eq!(vendor.lock().unwrap().notes["n1"]["title"], "held");
    // The token is used once.
    let (status, _, _) = curl("POST", &format!("{address}{resume}"), None, &[]);
    assert_eq!(status, 409);
    let verify = attest(dir, &["--ledger", ledger, "verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
}

#[test]
fn two_tenants_through_one_gateway_keep_two_chains() {
    let dir = tempfile::tempdir().unwrap();
    tenants_through_one_gateway(dir.path(), "ledger.sqlite");
}

#[test]
fn two_tenants_through_one_gateway_keep_two_chains_on_postgres() {
    let Some(db) = crate::pg_db("two_tenants_through_one_gateway") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    tenants_through_one_gateway(dir.path(), &db.url);
}

/// `X-Attest-Tenant` picks the chain; a bad, unknown or (with `--tenant`) other tenant
/// never reaches the vendor.
fn tenants_through_one_gateway(dir: &Path, ledger: &str) {
    if curl_missing() {
        return;
    }
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let allow = ["--allow-tenant", "acme", "--allow-tenant", "globex"];
    let (gateway, address) = start_gateway_on(dir, ledger, &upstream, &allow, &[]);
    let post = |tenant: Option<&str>| {
        let header = tenant.map(|t| format!("X-Attest-Tenant: {t}"));
        let extra: Vec<&str> = header.iter().flat_map(|h| ["-H", h.as_str()]).collect();
        curl(
            "POST",
            &format!("{address}/v1/notes"),
            Some(&json!({"title": "t", "body": "b"})),
            &extra,
        )
    };
    for tenant in [Some("acme"), Some("globex"), Some("acme"), None] {
        let (status, headers, body) = post(tenant);
        assert_eq!(status, 201, "{tenant:?}: {body}");
        assert_eq!(headers["x-attest-decision"], "act");
    }
    let hits = vendor.lock().unwrap().hits.len();
    for (bad, status) in [("Acme!", 400), ("other", 400), ("-x", 400)] {
        let (got, _, body) = post(Some(bad));
        assert_eq!(got, status, "{bad:?}: {body}");
    }
    assert_eq!(
        vendor.lock().unwrap().hits.len(),
        hits,
        "a refused tenant reached the vendor"
    );
    drop(gateway);

    // Each tenant's chain holds its own writes (an intent and an outcome each) and
    // verifies on its own.
    let rows = |tenant: Option<&str>| {
        let mut args = vec!["--ledger", ledger];
        if let Some(tenant) = tenant {
            args.extend(["--tenant", tenant]);
        }
        let verify = attest(dir, &[args.as_slice(), &["verify"]].concat());
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{tenant:?}: {}{}",
            stdout(&verify),
            stderr(&verify)
        );
        let export = attest(dir, &[args.as_slice(), &["export"]].concat());
        assert_eq!(export.status.code(), Some(0), "{}", stderr(&export));
        stdout(&export).lines().count()
    };
    assert_eq!(rows(Some("acme")), 4);
    assert_eq!(rows(Some("globex")), 2);
    assert_eq!(rows(None), 2);

    // A gateway pinned to one tenant serves that one and refuses any other.
    let (_gateway, address) = start_gateway_on(dir, ledger, &upstream, &["--tenant", "acme"], &[]);
    let pinned = |tenant: &str| {
        curl(
            "POST",
            &format!("{address}/v1/notes"),
            Some(&json!({"title": "t", "body": "b"})),
            &["-H", &format!("X-Attest-Tenant: {tenant}")],
        )
        .0
    };
    assert_eq!(pinned("acme"), 201);
    let hits = vendor.lock().unwrap().hits.len();
    assert_eq!(pinned("globex"), 403);
    assert_eq!(vendor.lock().unwrap().hits.len(), hits);
    assert_eq!(rows(Some("acme")), 6);
    assert_eq!(rows(Some("globex")), 2);
}

/// A vendor whose `/v1/log` sends a first part, then waits for `release` before the
/// rest; `/v1/sized` declares a 5,000-byte body; `/v1/endless` streams 5,000 bytes
/// without declaring them.
fn start_streaming_vendor(release: Arc<tokio::sync::Notify>) -> String {
    serve_app(move || {
        let log = move || {
            let release = Arc::clone(&release);
            async move {
                let parts = futures_util::stream::unfold(0, move |part| {
                    let release = Arc::clone(&release);
                    async move {
                        match part {
                            0 => Some((Ok::<_, std::io::Error>("first-part;"), 1)),
                            1 => {
                                release.notified().await;
                                Some((Ok("second-part"), 2))
                            }
                            _ => None,
                        }
                    }
                });
                axum::body::Body::from_stream(parts)
            }
        };
        let endless = || async {
            let chunk = "x".repeat(500);
            let chunks = futures_util::stream::iter(
                (0..10).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
            );
            axum::body::Body::from_stream(chunks)
        };
        Router::new()
            .route("/v1/log", get(log))
            .route("/v1/sized", get(|| async { "y".repeat(5_000) }))
            .route("/v1/endless", get(endless))
    })
}

#[test]
fn gateway_streams_unrecorded_reads_and_cuts_them_at_the_cap() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let release = Arc::new(tokio::sync::Notify::new());
    let upstream = start_streaming_vendor(Arc::clone(&release));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &["--max-body", "1000"]);

    // The first part arrives while the vendor is still holding the rest back: the
    // gateway forwards as it reads, it does not wait for the whole body.
    let host = address.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET /v1/log HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("first-part;") {
        let n = stream
            .read(&mut buffer)
            .expect("the first part never arrived: the gateway buffered the answer");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buffer[..n]);
    }
    assert!(!String::from_utf8_lossy(&seen).contains("second-part"));
    release.notify_one();
    stream.read_to_end(&mut seen).unwrap();
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("second-part"), "{text}");

    // A body declared over the cap is refused before any of it is sent.
    let (status, _, body) = curl("GET", &format!("{address}/v1/sized"), None, &[]);
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("larger than 1000 bytes"), "{body}");

    // An undeclared one is cut off at the cap: curl sees the transfer end early.
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{size_download}"])
        .arg(format!("{address}/v1/endless"))
        .output()
        .unwrap();
    assert!(!output.status.success(), "the transfer completed");
    let received: u64 = stdout(&output).trim().parse().unwrap();
    assert!(received <= 1000, "{received} bytes got through");

    // Unrecorded reads leave the ledger empty.
    assert!(crate::exported_entries(dir.path()).is_empty());
}

#[test]
fn with_record_reads_a_read_is_decided_and_recorded() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let vendor = Shared::default();
    vendor
        .lock()
        .unwrap()
        .notes
        .insert("n1".into(), json!({"id": "n1", "title": "kept"}));
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &["--record-reads"]);
    let (status, headers, body) = curl("GET", &format!("{address}/v1/notes/n1"), None, &[]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("kept"), "{body}");
    assert_eq!(headers["x-attest-decision"], "act");
    assert_eq!(headers["x-attest-seq"], "1");
    let entries = crate::exported_entries(dir.path());
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert_eq!(
        (
            &entry["verb"],
            &entry["decision"],
            &entry["execution"]["status"]
        ),
        (&json!("get"), &json!("act"), &json!("ok"))
    );
}

/// A vendor that answers every request with `{"ok": true}` and records `METHOD path` and
/// the headers it got.
type Recorded = Arc<Mutex<Vec<(String, HeaderMap)>>>;

fn start_recording_vendor(seen: Recorded) -> String {
    serve_app(move || {
        Router::new().fallback(
            move |method: axum::http::Method, uri: axum::http::Uri, headers: HeaderMap| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock()
                        .unwrap()
                        .push((format!("{method} {}", uri.path()), headers));
                    Json(json!({"ok": true}))
                }
            },
        )
    })
}

/// Issue 14 item 4: a write method is never passed through as a read, and a method
/// override is judged as the riskier method, through the real gateway.
#[test]
fn gateway_judges_a_request_by_its_riskiest_reading() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let seen = Recorded::default();
    let upstream = start_recording_vendor(Arc::clone(&seen));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &[]);
    for path in ["/v1/notes;list", "/v1/notes:get", "/v1/delete_all/search"] {
        let (status, headers, body) = curl(
            "POST",
            &format!("{address}{path}"),
            Some(&json!({"title": "x"})),
            &[],
        );
        assert!(
            headers.contains_key("x-attest-seq"),
            "POST {path} went by unrecorded: {status} {body}"
        );
    }
    let verbs: Vec<Value> = crate::exported_entries(dir.path())
        .iter()
        .map(|e| e["verb"].clone())
        .collect();
    assert!(
        verbs
            .iter()
            .all(|v| !["list", "get", "search", "read"].contains(&v.as_str().unwrap())),
        "{verbs:?}"
    );
    // A GET that asks to be a DELETE is refused as a delete; the vendor never sees it.
    let before = seen.lock().unwrap().len();
    for header in [
        "X-HTTP-Method-Override: DELETE",
        "X-HTTP-Method: DELETE",
        "X-Method-Override: DELETE",
    ] {
        let (status, headers, body) = curl(
            "GET",
            &format!("{address}/v1/notes/n1"),
            None,
            &["-H", header],
        );
        assert_eq!(status, 403, "{header}: {body}");
        assert_eq!(headers["x-attest-decision"], "refuse");
    }
    let (status, _, body) = curl(
        "GET",
        &format!("{address}/v1/notes/n1?_method=DELETE"),
        None,
        &[],
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        seen.lock().unwrap().len(),
        before,
        "a refused request reached the vendor"
    );
}

/// Issue 14 item 6: with --upstream set the gateway forwards only to it and to
/// allow-listed hosts; `/_attest/*` is never forwarded.
#[test]
fn gateway_is_not_an_open_forwarder() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let upstream_seen = Recorded::default();
    let upstream = start_recording_vendor(Arc::clone(&upstream_seen));
    let other_seen = Recorded::default();
    let other = start_recording_vendor(Arc::clone(&other_seen));
    let (gateway, address) = start_gateway(dir.path(), &upstream, &[]);
    let (status, _, body) = curl("GET", &format!("{address}/{other}/v1/notes"), None, &[]);
    assert_eq!(status, 403, "{body}");
    let header = format!("X-Attest-Upstream: {other}");
    let (status, _, body) = curl(
        "GET",
        &format!("{address}/v1/notes"),
        None,
        &["-H", &header],
    );
    assert_eq!(status, 403, "{body}");
    for path in [
        "/_attest/x",
        "/_attest/resume",
        "/%5Fattest/x",
        "/_ATTEST/pending",
    ] {
        let (status, _, body) = curl("GET", &format!("{address}{path}"), None, &[]);
        assert_eq!(status, 404, "{path}: {body}");
    }
    assert!(other_seen.lock().unwrap().is_empty());
    assert!(
        upstream_seen.lock().unwrap().is_empty(),
        "{:?}",
        upstream_seen.lock().unwrap()
    );
    drop(gateway);

    // Allow-listed: forwarded.
    let other_host = other.trim_start_matches("http://").to_owned();
    let (_gateway, address) =
        start_gateway(dir.path(), &upstream, &["--allow-upstream", &other_host]);
    let (status, _, body) = curl("GET", &format!("{address}/{other}/v1/notes"), None, &[]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(other_seen.lock().unwrap().len(), 1);
}

/// Issue 14 item 6: beyond loopback the gateway needs a token; with one, every request
/// carries it, and it never goes upstream.
#[test]
fn gateway_beyond_loopback_needs_a_token_and_checks_it() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let refused = attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "--policy",
            "policy.yaml",
            "gateway",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--upstream",
            "http://127.0.0.1:9",
        ],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("token"), "{}", stderr(&refused));

    let seen = Recorded::default();
    let upstream = start_recording_vendor(Arc::clone(&seen));
    let token_file = dir.path().join("gateway.token");
    std::fs::write(&token_file, "tok-GATEWAY-42\n").unwrap();
    // A token file others may read is refused, like every secret file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let shared = attest(
            dir.path(),
            &[
                "--ledger",
                "ledger.sqlite",
                "gateway",
                "--token-file",
                "gateway.token",
                "--upstream",
                "http://127.0.0.1:9",
            ],
        );
        assert_eq!(shared.status.code(), Some(2), "{}", stderr(&shared));
        assert!(stderr(&shared).contains("chmod 600"), "{}", stderr(&shared));
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let (_gateway, address) =
        start_gateway(dir.path(), &upstream, &["--token-file", "gateway.token"]);
    let (status, _, body) = curl("GET", &format!("{address}/v1/notes"), None, &[]);
    assert_eq!(status, 401, "{body}");
    let (status, _, body) = curl(
        "GET",
        &format!("{address}/v1/notes"),
        None,
        &["-H", "X-Attest-Token: wrong"],
    );
    assert_eq!(status, 401, "{body}");
    let (status, _, body) = curl(
        "GET",
        &format!("{address}/v1/notes"),
        None,
        &["-H", "X-Attest-Token: tok-GATEWAY-42"],
    );
    assert_eq!(status, 200, "{body}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(
        !seen[0].1.contains_key("x-attest-token"),
        "the token went upstream"
    );
}

#[test]
fn a_client_that_goes_away_cancels_its_waiting_request() {
    if crate::sqlite_only(
        "a_client_that_goes_away_cancels_its_waiting_request",
        "it watches the approvals table in the SQLite file",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = "version: 1\npolicies:\n  - name: notes-ask\n    match: {verb: create}\n    decision: ask\n";
    std::fs::write(dir.path().join("policy.yaml"), policy).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    // Block mode: the call waits up to a minute for a person.
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &["--timeout", "60"]);
    let host = address.trim_start_matches("http://");
    let body = r#"{"title": "never mind", "body": "x"}"#;
    let mut client = std::net::TcpStream::connect(host).unwrap();
    write!(
        client,
        "POST /v1/notes HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let status = |dir: &Path| -> Option<String> {
        let conn = rusqlite::Connection::open(dir.join("ledger.sqlite")).ok()?;
        conn.query_row("SELECT status FROM approvals", [], |row| row.get(0))
            .ok()
    };
    let waited = std::time::Instant::now();
    while status(dir.path()).as_deref() != Some("pending") {
        assert!(
            waited.elapsed().as_secs() < 30,
            "the request was never stored"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The client goes away while the call waits.
    drop(client);
    let gone = std::time::Instant::now();
    while status(dir.path()).as_deref() != Some("cancelled") {
        assert!(
            gone.elapsed().as_secs() < 30,
            "still {:?}",
            status(dir.path())
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pending = attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "pending", "--json"],
    );
    assert_eq!(stdout(&pending).trim(), "[]");
    assert!(
        vendor.lock().unwrap().notes.is_empty(),
        "the API was called"
    );
}

/// What reached the form vendor: `(content type, body bytes)` per request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A vendor taking form-encoded charges at `/v1/charges`.
fn start_form_vendor(received: Received) -> String {
    serve_app(move || {
        Router::new()
            .route(
                "/v1/charges",
                post(
                    |State(received): State<Received>,
                     headers: HeaderMap,
                     body: axum::body::Bytes| async move {
                        let content_type = headers
                            .get("content-type")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        received.lock().unwrap().push((content_type, body.to_vec()));
                        Json(json!({"id": "ch_1"}))
                    },
                ),
            )
            .with_state(received)
    })
}

#[test]
fn a_held_form_body_is_shown_and_forwarded_byte_for_byte_and_policy_sees_its_fields() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = "version: 1
policies:
  - name: big-charges
    match: {params: {/amount: {gt: 1000}}}
    decision: refuse
    reason: charges over 1000 are refused
  - name: charges-ask
    match: {verb: create}
    decision: ask
    reason: a person reviews charges
";
    std::fs::write(dir.path().join("policy.yaml"), policy).unwrap();
    let received = Received::default();
    let upstream = start_form_vendor(Arc::clone(&received));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &["--mode", "pending"]);
    let form = |body: &str| {
        curl(
            "POST",
            &format!("{address}/v1/charges"),
            None,
            &[
                "-H",
                "Content-Type: application/x-www-form-urlencoded",
                "--data-binary",
                body,
            ],
        )
    };
    // Policy sees the form's fields.
    let (status, _, body) = form("amount=5000&currency=usd");
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("over 1000"), "{body}");
    assert!(received.lock().unwrap().is_empty());

    let sent = "amount=250&currency=usd&memo=caf%C3%A9+%26+co&tag=a&tag=b";
    let (status, _, body) = form(sent);
    assert_eq!(status, 202, "{body}");
    let held: Value = serde_json::from_str(&body).unwrap();
    let (id, resume) = (
        held["id"].as_str().unwrap(),
        held["resume"].as_str().unwrap(),
    );

    // The approver sees the body as it was sent, and its fields.
    add_ann(dir.path());
    let token = std::fs::read_to_string(dir.path().join("ann.token")).unwrap();
    let inbox = crate::approvals::serve(dir.path(), &["--ledger", "ledger.sqlite"]);
    let shown = Command::new("curl")
        .args([
            "-s",
            "-H",
            &format!("Authorization: Bearer {}", token.trim()),
        ])
        .arg(format!("{}/api/requests/{id}", inbox.url))
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["params"]["memo"], "café & co", "{shown}");
    assert_eq!(shown["params"]["$raw_body"]["text"], sent, "{shown}");

    confirm_as_ann(dir.path(), id);
    let (status, _, body) = curl("POST", &format!("{address}{resume}"), None, &[]);
    assert_eq!(status, 200, "{body}");
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert!(
        got[0].0.starts_with("application/x-www-form-urlencoded"),
        "{:?}",
        got[0].0
    );
    assert_eq!(got[0].1, sent.as_bytes());
    // The ledger has neither the body nor its fields beyond the preview.
    let exported = stdout(&attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "export"],
    ));
    // (the memo's text, not "caf" alone: a hash may hold those letters)
    for memo in ["café", "caf%C3%A9", "caf\\u00e9"] {
        assert!(!exported.contains(memo), "{memo}: {exported}");
    }
}

//! Idempotency keys at the doors: a retried write with the same key reaches the vendor
//! once, and every retry gets the first answer again, marked a replay.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, start_gateway_on, start_vendor, Gateway, Shared, POLICY};

/// How many times a POST reached the vendor.
fn posts(vendor: &Shared) -> usize {
    let vendor = vendor.lock().unwrap();
    vendor
        .hits
        .iter()
        .filter(|h| *h == "POST /v1/notes")
        .count()
}

/// One keyed POST: (status, whether it was marked a replay, body).
fn keyed_post(gateway: &str, key: &str, body: &Value) -> (u16, bool, String) {
    let header = format!("Idempotency-Key: {key}");
    let (status, headers, text) = curl(
        "POST",
        &format!("{gateway}/v1/notes"),
        Some(body),
        &["-H", &header],
    );
    (status, replay_mark(&headers), text)
}

fn replay_mark(headers: &HashMap<String, String>) -> bool {
    match headers.get("idempotent-replayed").map(String::as_str) {
        None => false,
        Some("true") => true,
        Some(other) => panic!("idempotent-replayed: {other}"),
    }
}

/// The side store's rows: each one's replay bytes (`None` while none is kept).
fn side_rows(dir: &Path, ledger: &str) -> Vec<Option<Vec<u8>>> {
    if ledger.starts_with("postgres") {
        let mut client = ::postgres::Client::connect(ledger, ::postgres::NoTls).unwrap();
        client
            .query("SELECT replay FROM idempotency_keys", &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    } else {
        let conn = rusqlite::Connection::open(dir.join(ledger)).unwrap();
        let mut rows = conn.prepare("SELECT replay FROM idempotency_keys").unwrap();
        rows.query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

fn gateways(dir: &Path, ledger: &str, upstream: &str, n: usize) -> (Vec<Gateway>, Vec<String>) {
    (0..n)
        .map(|_| start_gateway_on(dir, ledger, upstream, &[], &[]))
        .unzip()
}

#[test]
fn through_the_gateway_a_keyed_post_reaches_the_vendor_once() {
    let dir = tempfile::tempdir().unwrap();
    keyed_posts_act_once(dir.path(), &crate::test_ledger(dir.path()));
}

#[test]
fn through_the_gateway_on_postgres_a_keyed_post_reaches_the_vendor_once() {
    let Some(db) = crate::pg_db("through_the_gateway_on_postgres_a_keyed_post") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    keyed_posts_act_once(dir.path(), &db.url);
}

/// 20 sequential and 20 concurrent POSTs with one key each, through 4 gateway
/// processes on one ledger: one reaches the vendor, all get its answer.
fn keyed_posts_act_once(dir: &Path, ledger: &str) {
    if curl_missing() {
        return;
    }
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_running, addresses) = gateways(dir, ledger, &upstream, 4);
    let note = json!({"title": "hello"});

    // Sequentially, each through the next gateway process.
    let answers: Vec<_> = (0..20)
        .map(|i| keyed_post(&addresses[i % 4], "key-sequential-1", &note))
        .collect();
    assert_eq!(posts(&vendor), 1, "{answers:?}");
    let (status, replayed, body) = answers[0].clone();
    assert_eq!((status, replayed), (201, false), "{body}");
    let sequential = body.clone();
    for (i, answer) in answers.iter().enumerate().skip(1) {
        assert_eq!(answer, &(201, true, body.clone()), "retry {i}");
    }

    // Concurrently: 20 callers, five on each of the 4 processes.
    let answers: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let (address, note) = (&addresses[i % 4], &note);
                scope.spawn(move || keyed_post(address, "key-concurrent-2", note))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(posts(&vendor), 2, "{answers:?}");
    let first: Vec<_> = answers
        .iter()
        .filter(|(_, replayed, _)| !replayed)
        .collect();
    assert_eq!(first.len(), 1, "exactly one ran: {answers:?}");
    let (status, _, body) = first[0].clone();
    assert_eq!(status, 201, "{body}");
    assert_ne!(body, sequential, "another key: a new note");
    for answer in &answers {
        assert_eq!((answer.0, &answer.2), (201, &body), "{answers:?}");
    }

    // The same key with another body is refused, and nothing reaches the vendor.
    let (status, replayed, text) = keyed_post(
        &addresses[1],
        "key-sequential-1",
        &json!({"title": "other"}),
    );
    assert_eq!((status, replayed), (422, false), "{text}");
    assert!(text.contains("different call"), "{text}");
    assert_eq!(posts(&vendor), 2);

    // A key that is not a key is a 400.
    let (status, _, text) = keyed_post(&addresses[0], "\"\"", &note);
    assert_eq!(status, 400, "{text}");
    assert_eq!(posts(&vendor), 2);

    // The side store holds the two responses, and no credential.
    let rows = side_rows(dir, ledger);
    assert_eq!(rows.len(), 2);
    for replay in rows {
        let replay = String::from_utf8(replay.expect("a kept response")).unwrap();
        assert!(replay.contains("\"id\":\"n"), "{replay}");
        assert!(!replay.contains("sekret"), "{replay}");
    }
    if !ledger.starts_with("postgres") {
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join(ledger)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        // The keys are on the two intent rows, and only there.
        let conn = rusqlite::Connection::open(dir.join(ledger)).unwrap();
        let keyed: Vec<String> = conn
            .prepare("SELECT json_extract(body, '$.idempotency_key') FROM entries WHERE json_extract(body, '$.idempotency_key') IS NOT NULL")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(keyed, ["key-sequential-1", "key-concurrent-2"]);
    }
}

#[test]
fn after_its_lifetime_a_key_is_free_again_and_its_response_gone() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    std::fs::write(dir.join("attest.yaml"), "idempotency: {lifetime: 2s}\n").unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, address) = start_gateway_on(
        dir,
        "ledger.sqlite",
        &upstream,
        &[],
        &[("ATTEST_CONFIG", "attest.yaml")],
    );
    let note = json!({"title": "hello"});
    let first = keyed_post(&address, "key-expiring", &note);
    assert_eq!(first.0, 201);
    let replay = keyed_post(&address, "key-expiring", &note);
    assert_eq!(replay, (201, true, first.2.clone()));
    assert_eq!(posts(&vendor), 1);
    let ledger = crate::test_ledger(dir);
    let held = side_rows(dir, &ledger);
    assert_eq!(held.len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // The key is free: the call runs again, and the first response is gone.
    let again = keyed_post(&address, "key-expiring", &note);
    assert_eq!((again.0, again.1), (201, false), "{}", again.2);
    assert_ne!(again.2, first.2);
    assert_eq!(posts(&vendor), 2);
    let held = side_rows(dir, &ledger);
    assert_eq!(held.len(), 1, "only the new call's row");
    let kept = String::from_utf8(held[0].clone().unwrap()).unwrap();
    assert!(kept.ends_with(&again.2), "{kept}");
}

/// The policy the notes server's writes run under.
const NOTES_POLICY: &str = r#"
version: 1
policies:
  - name: notes
    match: {verb: [create, update]}
    decision: act
    reason: the notes server is a sandbox
"#;

/// A directory holding [`NOTES_POLICY`], and the notes server's command (Python, the
/// script); `None` without Python's `mcp` (the test is skipped).
fn notes_dir() -> Option<(tempfile::TempDir, [String; 2])> {
    if !crate::mcp::python_with("mcp") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), NOTES_POLICY).unwrap();
    let command = [crate::python(), crate::mcp::py("notes_server.py")];
    Some((dir, command.map(|path| path.display().to_string())))
}

/// How many `create_note` calls reached the notes server.
fn creates(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("notes.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"create_note\""))
        .count()
}

#[test]
fn through_the_mcp_proxy_a_call_with_a_meta_key_runs_once() {
    if !crate::mcp::python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), NOTES_POLICY).unwrap();
    let note = json!({"title": "plan", "body": "ship it"});
    let keyed = |args: &Value, key: Value| json!({"tool": "create_note", "args": args, "meta": {"idempotencyKey": key}});
    let plan = json!({"calls": [
        keyed(&note, json!("mcp-key-1")),
        keyed(&note, json!("mcp-key-1")),
        keyed(&note, json!("mcp-key-1")),
        keyed(&json!({"title": "other", "body": "x"}), json!("mcp-key-1")),
        keyed(&note, json!(7)),
    ]});
    let server = crate::mcp::py("notes_server.py");
    let python = crate::python();
    let report = crate::mcp::drive(
        dir.path(),
        &plan,
        &[
            "--mode",
            "auto",
            "--server",
            "notes",
            "--policy",
            "policy.yaml",
        ],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
    );
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(creates(dir.path()), 1, "{calls:?}");
    let first = &calls[0];
    assert_eq!(first["is_error"], false, "{first}");
    assert!(first["meta"].get("attest/replayed").is_none(), "{first}");
    for retry in &calls[1..3] {
        assert_eq!(retry["meta"]["attest/replayed"], true, "{retry}");
        assert_eq!(
            (&retry["is_error"], &retry["text"]),
            (&first["is_error"], &first["text"])
        );
        assert_eq!(
            retry["meta"]["_attest"]["seq"],
            first["meta"]["_attest"]["seq"]
        );
    }
    assert_eq!(calls[3]["is_error"], true, "{}", calls[3]);
    assert!(
        calls[3]["text"]
            .as_str()
            .unwrap()
            .contains("different call"),
        "{}",
        calls[3]
    );
    assert_eq!(calls[4]["is_error"], true, "{}", calls[4]);
    assert!(
        calls[4]["text"]
            .as_str()
            .unwrap()
            .contains("idempotency key"),
        "{}",
        calls[4]
    );
    assert_eq!(creates(dir.path()), 1);
}

#[test]
fn through_the_mcp_proxy_a_sep_3182_params_key_runs_once() {
    let Some((dir, [python, server])) = notes_dir() else {
        return;
    };
    let ledger = crate::test_ledger_at(dir.path());
    let log = dir.path().join("notes.log");
    let mut session = crate::mcp_frames::Session::start_with(
        dir.path(),
        &[
            "--ledger",
            &ledger,
            "--policy",
            "policy.yaml",
            "mcp-proxy",
            "--mode",
            "auto",
            "--server",
            "notes",
            "--",
            &python,
            &server,
        ],
        &[("NOTES_LOG", &log)],
    );
    session.initialize();
    let call = |id: u64, params: Value| {
        crate::mcp_frames::frame(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
        )
    };
    let args = json!({"title": "plan", "body": "ship it"});
    let mut results = Vec::new();
    for id in 2..5 {
        session.send(&call(
            id,
            json!({"name": "create_note", "arguments": args, "idempotencyKey": "sep-key-1"}),
        ));
        let answer = session.answer("tools/call");
        assert_eq!(answer["id"], id, "{answer}");
        results.push(answer["result"].clone());
    }
    assert_eq!(creates(dir.path()), 1, "{results:?}");
    assert!(
        results[0]["_meta"].get("attest/replayed").is_none(),
        "{}",
        results[0]
    );
    for retry in &results[1..] {
        assert_eq!(retry["_meta"]["attest/replayed"], true, "{retry}");
        assert_eq!(retry["structuredContent"], results[0]["structuredContent"]);
        assert_eq!(retry["_meta"]["_attest"], results[0]["_meta"]["_attest"]);
    }
    // Two different keys in one call: refused, never run under either.
    session.send(&call(
        9,
        json!({"name": "create_note", "arguments": {"title": "t2", "body": "b"},
               "idempotencyKey": "sep-key-2", "_meta": {"idempotencyKey": "sep-key-3"}}),
    ));
    let answer = session.answer("tools/call");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(creates(dir.path()), 1);
}

/// Over `mcp-proxy --listen` (streamable HTTP) too, SEP-3182's params key runs a call
/// once: the body is read as the stdio front reads a frame.
#[tokio::test]
async fn through_mcp_proxy_listen_a_sep_3182_params_key_runs_once() {
    if !crate::mcp::python_with("mcp") || !crate::mcp::python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), NOTES_POLICY).unwrap();
    let (_server, url) = crate::mcp_remote::remote_notes(dir.path());
    let (_proxy, endpoint) = crate::mcp_remote::listening_proxy_with(
        dir.path(),
        &url,
        "127.0.0.1:0",
        &[],
        &[("ATTEST_POLICY", "policy.yaml")],
    );
    let bearer = format!("Bearer {}", crate::mcp_remote::TOKEN);
    let mut session =
        crate::mcp_http::Session::open(&endpoint, &[("authorization", bearer.as_str())]).await;
    let args = json!({"title": "plan", "body": "ship it"});
    let mut results = Vec::new();
    for _ in 0..3 {
        let params =
            json!({"name": "create_note", "arguments": args, "idempotencyKey": "http-key-1"});
        let answer = session.request("tools/call", params).await;
        results.push(answer["result"].clone());
    }
    assert_eq!(creates(dir.path()), 1, "{results:?}");
    assert!(
        results[0]["_meta"].get("attest/replayed").is_none(),
        "{}",
        results[0]
    );
    for retry in &results[1..] {
        assert_eq!(retry["_meta"]["attest/replayed"], true, "{retry}");
        assert_eq!(retry["_meta"]["_attest"], results[0]["_meta"]["_attest"]);
    }
}

/// A keyed POST of `body` sent with `authorization` alone: (status, whether it was
/// marked a replay, `x-attest-seq`, body).
fn keyed_post_as(
    gateway: &str,
    authorization: &str,
    key: &str,
    body: &Value,
) -> (u16, bool, Option<u64>, String) {
    let (authorization, key) = (
        format!("Authorization: {authorization}"),
        format!("Idempotency-Key: {key}"),
    );
    let (status, headers, text) =
        crate::unreadable::post_raw(gateway, &[&authorization, &key], &body.to_string());
    let seq = headers.get("x-attest-seq").and_then(|v| v.parse().ok());
    (status, replay_mark(&headers), seq, text)
}

/// The ledger's rows that name a first call (`replay_of`), as exported.
fn replay_rows(dir: &Path) -> Vec<Value> {
    crate::exported_entries(dir)
        .into_iter()
        .filter(|entry| entry.get("replay_of").is_some())
        .collect()
}

/// Caller B, with another bearer, sending caller A's `Idempotency-Key` and body is
/// never shown A's response: its call is its own, and reaches the vendor (which refuses
/// B's bearer). A's own retry still replays A's response.
#[test]
fn through_the_gateway_another_bearer_with_the_same_key_is_its_own_call() {
    let Some(under) = crate::unreadable::gateway_under(POLICY) else {
        return;
    };
    let (dir, vendor, address) = (under.dir.path(), &under.vendor, &under.address);
    let note = json!({"title": "payroll"});
    let alice = "Bearer sekret-token-42";
    let (status, replayed, _, first) = keyed_post_as(address, alice, "key-shared-1", &note);
    assert_eq!((status, replayed), (201, false), "{first}");
    assert_eq!(posts(vendor), 1);

    let (status, replayed, _, text) =
        keyed_post_as(address, "Bearer mallory", "key-shared-1", &note);
    assert!(
        !replayed,
        "another bearer was given the stored response: {text}"
    );
    assert_ne!(text, first, "another bearer was shown A's response");
    assert_eq!(status, 401, "B's own call, answered by the vendor: {text}");
    assert_eq!(posts(vendor), 2, "B's call reached the vendor itself");

    // The same bearer retrying: A's response, once more, from the store.
    let again = keyed_post_as(address, alice, "key-shared-1", &note);
    assert_eq!(
        (again.0, again.1, again.3.as_str()),
        (201, true, first.as_str())
    );
    assert_eq!(posts(vendor), 2);
    // Neither bearer reached the ledger.
    let all = serde_json::to_string(&crate::exported_entries(dir)).unwrap();
    assert!(!all.contains("mallory") && !all.contains("sekret"), "{all}");
}

/// Over `mcp-proxy --listen` (no agents, no OAuth): a session opened with another
/// bearer and the first session's `_meta` key runs its own call.
#[tokio::test]
async fn through_mcp_proxy_listen_another_bearer_with_the_same_key_is_its_own_call() {
    let Some((dir, [python, server])) = notes_dir() else {
        return;
    };
    let log = dir.path().join("notes.log");
    let args = [
        "--ledger",
        "ledger.sqlite",
        "--policy",
        "policy.yaml",
        "mcp-proxy",
        "--server",
        "notes",
        "--mode",
        "auto",
        "--listen",
        "127.0.0.1:0",
        "--",
        &python,
        &server,
    ];
    let (_proxy, line) = crate::start_first_line(
        std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(crate::store_args(dir.path(), &args))
            .current_dir(dir.path())
            .env_clear()
            .env("NOTES_LOG", &log),
    );
    let endpoint = line
        .strip_prefix("attest mcp-proxy listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let call = json!({
        "name": "create_note",
        "arguments": {"title": "plan", "body": "ship it"},
        "_meta": {"idempotencyKey": "listen-shared-1"},
    });
    let mut alice =
        crate::mcp_http::Session::open(&endpoint, &[("authorization", "Bearer alice")]).await;
    let first = alice.request("tools/call", call.clone()).await["result"].clone();
    assert!(first["_meta"].get("attest/replayed").is_none(), "{first}");
    assert_eq!(creates(dir.path()), 1);

    let mut mallory =
        crate::mcp_http::Session::open(&endpoint, &[("authorization", "Bearer mallory")]).await;
    let other = mallory.request("tools/call", call.clone()).await["result"].clone();
    assert!(
        other["_meta"].get("attest/replayed").is_none(),
        "another bearer was given the stored result: {other}"
    );
    assert_ne!(other["_meta"]["_attest"], first["_meta"]["_attest"]);
    assert_eq!(creates(dir.path()), 2, "B's call ran itself: {other}");

    let again = alice.request("tools/call", call).await["result"].clone();
    assert_eq!(again["_meta"]["attest/replayed"], true, "{again}");
    assert_eq!(creates(dir.path()), 2);
}

/// A retry is decided again under today's policy: once policy refuses everything, a key
/// that replayed yesterday gets a 403, and every retry leaves a row naming the first call.
#[test]
fn a_replay_after_the_policy_changes_to_refuse_is_refused_with_a_row_naming_the_first() {
    let Some(under) = crate::unreadable::gateway_under(POLICY) else {
        return;
    };
    let (dir, vendor, address) = (under.dir.path(), &under.vendor, &under.address);
    let token = "Bearer sekret-token-42";
    let note = json!({"title": "refund"});
    let (status, replayed, seq, first) = keyed_post_as(address, token, "key-policy-1", &note);
    assert_eq!((status, replayed), (201, false), "{first}");
    let first_seq = seq.expect("the first call's seq");
    // Under the same policy, a replay: the first response, and a row naming it.
    let again = keyed_post_as(address, token, "key-policy-1", &note);
    assert_eq!(
        (again.0, again.1, again.3.as_str()),
        (201, true, first.as_str())
    );
    drop(under.gateway);
    let rows = replay_rows(dir);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["replay_of"]["seq"], first_seq, "{}", rows[0]);
    assert_eq!(rows[0]["decision"], "act");
    assert_eq!(rows[0]["execution"]["status"], "not_run");

    std::fs::write(
        dir.join("policy.yaml"),
        "version: 1\npolicies:\n  - name: nothing\n    match: {}\n    decision: refuse\n    reason: everything is refused now\n",
    )
    .unwrap();
    let ledger = crate::test_ledger(dir);
    let (_gateway, address) = start_gateway_on(dir, &ledger, &under.upstream, &[], &[]);
    let (status, replayed, _, text) = keyed_post_as(&address, token, "key-policy-1", &note);
    assert_eq!(status, 403, "a refused call was replayed: {text}");
    assert!(!replayed && !text.contains(&first), "{text}");
    assert_eq!(posts(vendor), 1);
    let rows = replay_rows(dir);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1]["replay_of"]["seq"], first_seq, "{}", rows[1]);
    assert_eq!(rows[1]["decision"], "refuse", "{}", rows[1]);
}

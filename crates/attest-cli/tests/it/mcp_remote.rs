//! Remote MCP: `attest mcp-proxy --url` governs a server that speaks streamable HTTP (the
//! Python SDK's, behind a bearer-token check), and `--listen` serves a remote client over
//! streamable HTTP; the client's bearer token reaches the upstream and never the ledger.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mcp::{drive_with, py, python_with};
use crate::mcp_http::Session;
use crate::{exported_entries, free_port, start_first_line, stderr, stdout, Running};

pub(crate) const TOKEN: &str = "remote-bearer-token-42";

/// The notes server over streamable HTTP on a free port, requiring [`TOKEN`]; returns it
/// with its `/mcp` URL once it accepts connections.
pub(crate) fn remote_notes(dir: &std::path::Path) -> (Running, String) {
    let port = free_port();
    let child = Command::new(crate::python())
        .arg(py("remote_notes.py"))
        .arg(port.to_string())
        .arg(TOKEN)
        .env("NOTES_LOG", dir.join("notes.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let running = Running(child);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the remote server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (running, format!("http://127.0.0.1:{port}/mcp"))
}

fn assert_no_token_in_ledger(dir: &std::path::Path) {
    let all = exported_entries(dir);
    assert!(!serde_json::to_string(&all).unwrap().contains(TOKEN));
}

#[test]
fn a_remote_streamable_http_server_is_governed_with_the_bearer_passed_through() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = remote_notes(dir.path());
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "remote", "body": "b"}},
        {"tool": "get_note", "args": {"id": "n1"}},
    ]});
    let report = drive_with(
        dir.path(),
        &plan,
        &[
            "--server",
            "notes",
            "--mode",
            "auto",
            "--url",
            &url,
            "--bearer-env",
            "NOTES_TOKEN",
        ],
        &[],
        &[("NOTES_TOKEN", TOKEN)],
    );
    assert!(report["tools"]
        .as_array()
        .unwrap()
        .contains(&json!("create_note")));
    let created = &report["calls"][0];
    assert_eq!(created["is_error"], false, "{report}");
    // Asked, approved by `--mode auto`, run upstream and read back through get_note.
    assert_eq!(created["meta"]["_attest"]["approver"], "auto", "{report}");
    assert_eq!(created["meta"]["_attest"]["level"], "verified", "{report}");
    assert!(report["calls"][1]["text"]
        .as_str()
        .unwrap()
        .contains("remote"));
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(log.contains("create_note"), "{log}");
    let rows = crate::outcome_entries(dir.path());
    assert!(rows
        .iter()
        .any(|row| row["system"] == "notes" && row["verb"] == "create"));
    assert_no_token_in_ledger(dir.path());

    // Without the token the remote server refuses, and the proxy says so.
    let plan = json!({"calls": []});
    let plan_file = dir.path().join("plan0.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let output = Command::new(crate::python())
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir.path(),
            &["--ledger", "ledger.sqlite", "mcp-proxy", "--url", &url],
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", stdout(&output));
}

/// `attest mcp-proxy --listen` in `dir` in front of the remote server at `url`, every
/// `ask` approved: running, with its `/mcp` endpoint.
fn listening_proxy(dir: &std::path::Path, url: &str) -> (Running, String) {
    listening_proxy_with(dir, url, "127.0.0.1:0", &[], &[])
}

/// [`listening_proxy`] on `listen`, with `extra` arguments and `env` for the proxy.
pub(crate) fn listening_proxy_with(
    dir: &std::path::Path,
    url: &str,
    listen: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Running, String) {
    let mut args = vec![
        "--ledger",
        "ledger.sqlite",
        "mcp-proxy",
        "--server",
        "notes",
        "--mode",
        "auto",
        "--url",
        url,
        "--listen",
        listen,
    ];
    args.extend_from_slice(extra);
    let (proxy, line) = start_first_line(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(crate::store_args(dir, &args))
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().copied()),
    );
    let endpoint = line
        .strip_prefix("attest mcp-proxy listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (proxy, endpoint)
}

#[test]
fn a_remote_client_reaches_the_proxy_over_streamable_http_with_its_own_token() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = remote_notes(dir.path());
    let (proxy, endpoint) = listening_proxy(dir.path(), &url);
    let call = |token: &str| {
        Command::new(crate::python())
            .arg(py("http_driver.py"))
            .args([
                endpoint.as_str(),
                token,
                "create_note",
                r#"{"title": "over http", "body": "b"}"#,
            ])
            .output()
            .unwrap()
    };
    let output = call(TOKEN);
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["is_error"], false, "{report}");
    assert_eq!(report["meta"]["_attest"]["approver"], "auto", "{report}");
    assert_eq!(report["meta"]["_attest"]["level"], "verified", "{report}");
    // A client with the wrong token gets nowhere: the upstream refuses it.
    let output = call("wrong-token");
    assert!(!output.status.success(), "{}", stdout(&output));
    drop(proxy);
    let rows = crate::outcome_entries(dir.path());
    assert_eq!(
        rows.iter()
            .filter(|row| row["system"] == "notes" && row["verb"] == "create")
            .count(),
        1
    );
    assert_no_token_in_ledger(dir.path());
}

const BEARER: (&str, &str) = ("authorization", "Bearer remote-bearer-token-42");

/// The notes server behind `attest mcp-proxy --listen`, both running while this lives.
struct RemoteBehindProxy {
    dir: tempfile::TempDir,
    endpoint: String,
    _server: Running,
    _proxy: Running,
}

impl RemoteBehindProxy {
    fn start() -> Option<RemoteBehindProxy> {
        if !python_with("mcp") || !python_with("uvicorn") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let (server, url) = remote_notes(dir.path());
        let (proxy, endpoint) = listening_proxy(dir.path(), &url);
        Some(RemoteBehindProxy {
            dir,
            endpoint,
            _server: server,
            _proxy: proxy,
        })
    }
}

#[tokio::test]
async fn a_session_is_bound_to_the_credential_that_opened_it() {
    let Some(remote) = RemoteBehindProxy::start() else {
        return;
    };
    let (dir, endpoint) = (&remote.dir, remote.endpoint.clone());
    let mut owner = Session::open(&endpoint, &[BEARER]).await;
    let listed = owner.request("tools/list", json!({})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // Someone who learned the session id, with a token of their own or none: refused
    // before anything reaches the upstream with the owner's token.
    let call = json!({"name": "create_note", "arguments": {"title": "stolen", "body": "b"}});
    for headers in [vec![("authorization", "Bearer someone-else")], vec![]] {
        let mut other = Session::new(&endpoint, &headers);
        other.id = owner.id.clone();
        let answer = other.send("tools/call", call.clone()).await;
        assert_eq!(answer.status, 403, "{headers:?}: {}", answer.response());
        assert!(answer.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another credential"));
    }
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap_or_default();
    assert!(!log.contains("create_note"), "{log}");
    // The owner's session goes on.
    let answer = owner
        .request(
            "tools/call",
            json!({"name": "create_note", "arguments": {"title": "mine", "body": "b"}}),
        )
        .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let rows = crate::outcome_entries(dir.path());
    let created: Vec<_> = rows.iter().filter(|row| row["verb"] == "create").collect();
    assert_eq!(created.len(), 1, "{rows:?}");
    assert_no_token_in_ledger(dir.path());
}

#[tokio::test]
async fn an_initialize_from_another_origin_gets_no_session() {
    let Some(remote) = RemoteBehindProxy::start() else {
        return;
    };
    let endpoint = remote.endpoint.clone();
    let mut evil = Session::new(&endpoint, &[BEARER, ("origin", "https://evil.example")]);
    let answer = evil.initialize().await;
    assert_eq!(answer.status, 403);
    assert!(answer.headers.get("mcp-session-id").is_none());
    assert!(evil.id.is_none());
    // A page served from the proxy's own loopback origin, and a client sending no Origin
    // (not a browser), get sessions.
    let own = endpoint.trim_end_matches("/mcp").to_owned();
    let mut local = Session::new(&endpoint, &[BEARER, ("origin", own.as_str())]);
    assert_eq!(local.initialize().await.status, 200);
    assert!(local.id.is_some());
    let mut plain = Session::new(&endpoint, &[BEARER]);
    assert_eq!(plain.initialize().await.status, 200);
}

/// A page on a rebound DNS name (`evil.example` resolving to 127.0.0.1) reaches the
/// proxy with its own `Host`: it gets no session (issue 28's held probe).
#[tokio::test]
async fn an_initialize_naming_another_host_gets_no_session() {
    let Some(remote) = RemoteBehindProxy::start() else {
        return;
    };
    let endpoint = remote.endpoint.clone();
    let port = endpoint
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let rebound = format!("evil.example:{port}");
    let mut evil = Session::new(&endpoint, &[BEARER, ("host", rebound.as_str())]);
    let answer = evil.initialize().await;
    assert!(answer.status.is_client_error(), "{}", answer.status);
    assert!(answer.headers.get("mcp-session-id").is_none());
    assert!(evil.id.is_none());
    let mut plain = Session::new(&endpoint, &[BEARER]);
    assert_eq!(plain.initialize().await.status, 200);
}

#[tokio::test]
async fn an_upstream_401_and_its_challenge_reach_the_client() {
    let Some(remote) = RemoteBehindProxy::start() else {
        return;
    };
    let endpoint = remote.endpoint.clone();
    for headers in [vec![("authorization", "Bearer wrong-token")], vec![]] {
        let mut client = Session::new(&endpoint, &headers);
        let answer = client.initialize().await;
        assert_eq!(answer.status, 401, "{headers:?}: {}", answer.response());
        let challenge = answer.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains(r#"resource_metadata="http://127.0.0.1:"#)
                && challenge.contains("/.well-known/oauth-protected-resource/mcp"),
            "{challenge}"
        );
        assert!(answer.response()["error"]["message"].is_string());
    }
    // With the right token the same proxy opens a session.
    let mut client = Session::new(&endpoint, &[BEARER]);
    assert_eq!(client.initialize().await.status, 200);
}

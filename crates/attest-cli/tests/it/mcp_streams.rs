//! Which stream a message takes through `attest mcp-proxy`, with the conformance
//! reference server (`js/reference_server.cjs`) upstream, over HTTP (`--url`) and stdio:
//! `subscriptions/listen` relayed through both fronts; a tool call's log lines kept on
//! its stream when the client resumes it with `Last-Event-ID`; and, with several calls
//! in flight, each call's log lines on that call's stream.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::mcp_conformance::{node_modules, peers, proxy, reference_server, Peers};
use crate::mcp_http::{log_lines, Event, Session};
use crate::Running;

/// The reference server over HTTP, and the proxy in front of it both ways: the server's
/// URL, then each shape's name and `--listen` URL (the processes and dirs kept alive).
struct Shapes {
    url: String,
    shapes: Vec<(&'static str, String)>,
    _running: Vec<Running>,
    _dirs: Vec<tempfile::TempDir>,
}

fn shapes(peers: &Peers) -> Shapes {
    let (server, url) = reference_server(peers);
    let remote_dir = tempfile::tempdir().unwrap();
    let (remote, remote_url) = proxy(remote_dir.path(), &["--url", &url]);
    let stdio_dir = tempfile::tempdir().unwrap();
    let node = peers.node.to_string_lossy().into_owned();
    let script = peers.server.to_string_lossy().into_owned();
    let (stdio, stdio_url) = proxy(stdio_dir.path(), &["--", &node, &script, "--stdio"]);
    Shapes {
        url,
        shapes: vec![("--url", remote_url), ("stdio", stdio_url)],
        _running: vec![server, remote, stdio],
        _dirs: vec![remote_dir, stdio_dir],
    }
}

const LISTEN: &str = "subscriptions/listen";

fn listen_params() -> Value {
    json!({"notifications": {"toolsListChanged": true}})
}

/// What a client must get for its `subscriptions/listen` with id `id`: the upstream's
/// acknowledgment and notification, naming the client's request, then the upstream's
/// answer (which says what it was asked, so the request reached it).
fn assert_listened(messages: &[Value], id: u64, shape: &str) {
    let ours = json!({"io.modelcontextprotocol/subscriptionId": id});
    let methods: Vec<&str> = messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("(answer)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/subscriptions/acknowledged",
            "notifications/tools/list_changed",
            "(answer)"
        ],
        "{shape}: {messages:?}"
    );
    assert_eq!(
        messages[0]["params"]["_meta"], ours,
        "{shape}: {messages:?}"
    );
    assert_eq!(
        messages[0]["params"]["notifications"],
        listen_params()["notifications"]
    );
    assert_eq!(
        messages[1]["params"]["_meta"], ours,
        "{shape}: {messages:?}"
    );
    assert_eq!(messages[2]["id"], id, "{shape}: {messages:?}");
    assert_eq!(
        messages[2]["result"]["listened"],
        listen_params()["notifications"],
        "{shape}: {messages:?}"
    );
}

#[tokio::test]
async fn subscriptions_listen_is_relayed_to_the_upstream_through_both_fronts() {
    let Some(peers) = peers() else { return };
    let shapes = shapes(&peers);
    // Directly, as the reference: on the request's own stream.
    let mut direct = Session::open(&shapes.url, &[]).await;
    let answer = direct.send(LISTEN, listen_params()).await;
    assert_listened(&answer.messages, 2, "direct");
    // Through `--listen`, with either upstream.
    for (shape, url) in &shapes.shapes {
        let mut session = Session::open(url, &[]).await;
        let answer = session.send(LISTEN, listen_params()).await;
        assert_listened(&answer.messages, 2, shape);
    }
    // Through the stdio front.
    let messages = listen_on_stdio(&peers);
    assert_listened(&messages, 2, "the stdio front");
}

/// `subscriptions/listen` (id 2) sent to `attest mcp-proxy` on its stdio; what came back
/// after the handshake up to its answer.
fn listen_on_stdio(peers: &Peers) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let args = crate::store_args(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "mcp-proxy",
            "--server",
            "reference",
            "--mode",
            "auto",
            "--",
            &peers.node.to_string_lossy(),
            &peers.server.to_string_lossy(),
            "--stdio",
        ],
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(args)
        .current_dir(dir.path())
        .env_clear()
        .env("NODE_PATH", node_modules())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let _running = Running(child);
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "attest-tests", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": LISTEN, "params": listen_params()}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut messages = Vec::new();
    for line in stdout.lines() {
        let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if message["id"] == 1 {
            continue;
        }
        let done = message["id"] == 2;
        messages.push(message);
        if done {
            break;
        }
    }
    drop(stdin);
    messages
}

/// Reading a stream for a line the proxy put elsewhere would wait for the call's end,
/// which waits for a gate the test opens only after: bounded, so such a test fails
/// instead of hanging.
async fn bounded<T>(shape: &str, read: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(60), read)
        .await
        .unwrap_or_else(|_| panic!("{shape}: the line never came on this stream"))
}

fn is_answer(message: &Value) -> bool {
    message.get("id").is_some() && message.get("method").is_none()
}

fn logged(text: &str) -> impl Fn(&Value) -> bool + '_ {
    move |message| message["method"] == "notifications/message" && message["params"]["data"] == text
}

fn gated(name: &str, gates: &[&str]) -> Value {
    json!({"name": "test_tool_with_gated_logging", "arguments": {"name": name, "gates": gates}})
}

/// Opens a gate of `test_tool_with_gated_logging`: answered once the call waiting there
/// has logged past it.
async fn open_gate(session: &mut Session, gate: &str) {
    let answer = session
        .request(
            "resources/read",
            json!({"uri": format!("test://gate/{gate}")}),
        )
        .await;
    assert_eq!(
        answer["result"]["contents"][0]["text"], "passed",
        "{answer}"
    );
}

#[tokio::test]
async fn a_call_stream_resumed_with_last_event_id_replays_the_log_lines_the_client_missed() {
    let Some(peers) = peers() else { return };
    let shapes = shapes(&peers);
    for (shape, url) in &shapes.shapes {
        let mut session = Session::open(url, &[]).await;
        let mut call = session
            .stream("tools/call", gated("resumed", &["one", "two"]))
            .await;
        let read = call.read_until(logged("resumed: started")).await;
        let last = read
            .last()
            .and_then(|event| event.id.clone())
            .unwrap_or_else(|| panic!("{shape}: no event id on the call's stream: {read:?}"));
        // The client goes away mid-call; the upstream logs once more meanwhile.
        drop(call);
        open_gate(&mut session, "one").await;
        let mut resumed = session.resume(&last).await;
        let mut events: Vec<Event> =
            bounded(shape, resumed.read_until(logged("resumed: passed one"))).await;
        open_gate(&mut session, "two").await;
        events.extend(resumed.read_until(is_answer).await);
        // What came after the last event the client had, and only that.
        assert_eq!(
            log_lines(&events),
            ["resumed: passed one", "resumed: passed two"],
            "{shape}: {events:?}"
        );
        assert!(events
            .iter()
            .all(|event| event.id.as_deref() != Some(&last)));
        let answer = events.last().and_then(|event| event.message.clone());
        assert_eq!(
            answer
                .as_ref()
                .map(|a| a["result"]["content"][0]["text"].clone()),
            Some(json!("resumed: done")),
            "{shape}: {events:?}"
        );
    }
}

#[tokio::test]
async fn concurrent_calls_each_get_only_their_own_log_lines() {
    let Some(peers) = peers() else { return };
    let shapes = shapes(&peers);
    for (shape, url) in &shapes.shapes {
        let mut session = Session::open(url, &[]).await;
        let mut first = session.stream("tools/call", gated("a", &["a"])).await;
        let mut events_a = bounded(shape, first.read_until(logged("a: started"))).await;
        let mut second = session.stream("tools/call", gated("b", &["b"])).await;
        // Over stdio `b: started` is not on b's stream (both calls are open by then).
        let mut events_b = match *shape {
            "--url" => bounded(shape, second.read_until(logged("b: started"))).await,
            _ => Vec::new(),
        };
        // Both calls are in flight now; each logs once more, then answers.
        open_gate(&mut session, "a").await;
        events_a.extend(first.read_until(is_answer).await);
        open_gate(&mut session, "b").await;
        events_b.extend(second.read_until(is_answer).await);
        let (lines_a, lines_b) = (log_lines(&events_a), log_lines(&events_b));
        if *shape == "--url" {
            // The upstream said on which call's stream it sent each: so they come here.
            assert_eq!(lines_a, ["a: started", "a: passed a"], "{shape}");
            assert_eq!(lines_b, ["b: started", "b: passed b"], "{shape}");
        } else {
            // A stdio upstream's log line names no call: while both run, it goes to the
            // standalone stream — never to the other call's.
            assert!(
                lines_a.iter().all(|line| line.starts_with("a: ")),
                "{lines_a:?}"
            );
            assert!(
                lines_b.iter().all(|line| line.starts_with("b: ")),
                "{lines_b:?}"
            );
            assert_eq!(lines_a.first().map(String::as_str), Some("a: started"));
        }
    }
}

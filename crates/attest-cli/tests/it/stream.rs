//! The audit stream: every row a door appends reaches a local OTLP/HTTP receiver (the
//! `opentelemetry-proto` decoder) as one log record, from the ledger's cursor; an outage
//! delays rows and loses none, and no row arrives twice.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::gateway::{curl, curl_missing, start_gateway_with, start_vendor, Shared, POLICY};
use crate::mcp::{drive_with, py, python_with};
use crate::{attest, expect_ok, python, stderr, Running};

/// One log record as received: its attributes as text, and its body.
#[derive(Debug, Clone)]
struct Got {
    attributes: BTreeMap<String, String>,
    body: String,
}

impl Got {
    fn seq(&self) -> u64 {
        self.attributes["attest.seq"].parse().unwrap()
    }
}

#[derive(Default)]
struct Inbox {
    records: Vec<Got>,
    /// Every request body and header value, to check no secret travels.
    raw: Vec<u8>,
    authorization: Vec<String>,
}

/// An OTLP/HTTP logs receiver on 127.0.0.1 that can go down (its port then refuses
/// connections) and come back on the same port.
struct Receiver {
    port: u16,
    inbox: Arc<Mutex<Inbox>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Receiver {
        let mut receiver = Receiver {
            port: 0,
            inbox: Arc::default(),
            stop: None,
            thread: None,
        };
        receiver.up();
        receiver
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn up(&mut self) {
        use axum::routing::post;
        let inbox = Arc::clone(&self.inbox);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, port) = std::sync::mpsc::channel();
        let want = self.port;
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let app = axum::Router::new().route(
                    "/v1/logs",
                    post(
                        move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                            let inbox = Arc::clone(&inbox);
                            async move {
                                let request =
                                    ExportLogsServiceRequest::decode(body.clone()).unwrap();
                                let mut inbox = inbox.lock().unwrap();
                                inbox.raw.extend_from_slice(&body);
                                if let Some(auth) = headers.get("authorization") {
                                    inbox.authorization.push(auth.to_str().unwrap().to_owned());
                                }
                                for resource in request.resource_logs {
                                    for scope in resource.scope_logs {
                                        assert_eq!(scope.scope.unwrap().name, "attest.ledger");
                                        for record in scope.log_records {
                                            inbox.records.push(got(record));
                                        }
                                    }
                                }
                                (
                                    [("content-type", "application/x-protobuf")],
                                    ExportLogsServiceResponse::default().encode_to_vec(),
                                )
                            }
                        },
                    ),
                );
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", want))
                    .await
                    .unwrap();
                bound.send(listener.local_addr().unwrap().port()).unwrap();
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
            // The runtime goes with its connections: the port refuses from here on.
        });
        self.port = port.recv().unwrap();
        self.stop = Some(stop);
        self.thread = Some(thread);
    }

    fn down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }

    fn records(&self) -> Vec<Got> {
        self.inbox.lock().unwrap().records.clone()
    }

    /// Waits (at most 60 s) until every seq `1..=head` has arrived.
    fn wait_for(&self, head: u64) -> Vec<Got> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let records = self.records();
            let seen: std::collections::BTreeSet<u64> = records.iter().map(Got::seq).collect();
            if (1..=head).all(|seq| seen.contains(&seq)) {
                return records;
            }
            assert!(
                Instant::now() < deadline,
                "rows 1..={head} did not all arrive: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.down();
    }
}

fn got(record: opentelemetry_proto::tonic::logs::v1::LogRecord) -> Got {
    let text = |value: Option<Any>| match value {
        Some(Any::StringValue(s)) => s,
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    };
    Got {
        attributes: record
            .attributes
            .into_iter()
            .map(|kv| (kv.key, text(kv.value.and_then(|v| v.value))))
            .collect(),
        body: text(record.body.and_then(|b| b.value)),
    }
}

/// Writes `dir/.attest/config.yaml` streaming to `endpoint`, paced for a test.
fn configure(dir: &Path, endpoint: &str, extra: &str) {
    std::fs::create_dir_all(dir.join(".attest")).unwrap();
    std::fs::write(
        dir.join(".attest/config.yaml"),
        format!(
            "stream:\n  otlp:\n    endpoint: {endpoint}\n    headers_env: TEST_OTLP_HEADERS\n  \
             poll: 100ms\n  lease: 2s\n  timeout: 1s\n  max_backoff: 1s\n{extra}"
        ),
    )
    .unwrap();
}

const HEADERS: (&str, &str) = ("TEST_OTLP_HEADERS", "Authorization=Bearer otlp-secret-77");

/// The ledger's stored bodies, one per line (`attest export`), on `ledger`.
fn bodies(dir: &Path, ledger: &str) -> Vec<String> {
    expect_ok(&attest(dir, &["--ledger", ledger, "export"]))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each row arrived exactly once, as the record the ledger holds: body byte for byte,
/// its hash, and its fields as attributes; and neither the receiver's token nor the
/// caller's credentials travelled in a record.
fn assert_each_row_once(records: &[Got], bodies: &[String], secrets: &[&str]) {
    let mut by_seq: HashMap<u64, usize> = HashMap::new();
    for record in records {
        *by_seq.entry(record.seq()).or_default() += 1;
    }
    assert_eq!(by_seq.len(), bodies.len(), "{by_seq:?}");
    assert!(
        by_seq.values().all(|&n| n == 1),
        "a row arrived twice: {by_seq:?}"
    );
    for record in records {
        let seq = record.seq();
        let body = &bodies[usize::try_from(seq).unwrap() - 1];
        assert_eq!(&record.body, body, "seq {seq}");
        let entry: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            record.attributes["attest.hash"],
            hex::encode(Sha256::digest(body.as_bytes()))
        );
        assert_eq!(
            record.attributes["attest.prev"],
            entry["prev"].as_str().unwrap()
        );
        assert_eq!(
            record.attributes["attest.system"],
            entry["system"].as_str().unwrap()
        );
        assert_eq!(
            record.attributes["attest.decision"],
            entry["decision"].as_str().unwrap()
        );
        assert_eq!(
            record.attributes["attest.execution.status"],
            entry["execution"]["status"].as_str().unwrap()
        );
        for secret in secrets {
            assert!(
                !record.body.contains(secret)
                    && !record.attributes.values().any(|v| v.contains(secret)),
                "{secret} travelled in seq {seq}"
            );
        }
    }
}

fn status(dir: &Path, ledger: &str) -> Vec<Value> {
    let out = expect_ok(&attest(
        dir,
        &["--ledger", ledger, "stream", "status", "--json"],
    ));
    serde_json::from_str(&out).unwrap()
}

/// Waits (at most 30 s) until the cursor is at the head: the streamer wrote it after the
/// receiver's acknowledgement.
fn wait_caught_up(dir: &Path, ledger: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = status(dir, ledger);
        if status[0]["lag"] == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{status:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `attest stream run --once` on `dir`'s ledger, with `env` its only variable.
fn stream_once(dir: &Path, env: (&str, &str)) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir,
            &["--ledger", "ledger.sqlite", "stream", "run", "--once"],
        ))
        .current_dir(dir)
        .env_clear()
        .env(env.0, env.1)
        .output()
        .unwrap()
}

/// `attest stream run` following the ledger until killed.
fn start_streamer(dir: &Path, ledger: &str) -> Running {
    Running(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(crate::store_args(
                dir,
                &["--ledger", ledger, "stream", "run"],
            ))
            .current_dir(dir)
            .env_clear()
            .env(HEADERS.0, HEADERS.1)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn gateway_rows_reach_an_otlp_receiver_once_each_with_their_fields_seq_and_hash() {
    if curl_missing() {
        return;
    }
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &receiver.endpoint(), "");
    std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
    let upstream = start_vendor(Shared::default());
    let (_gateway, address) = start_gateway_with(dir.path(), &upstream, &[], &[HEADERS]);
    let (status_code, _, body) = curl(
        "POST",
        &format!("{address}/v1/notes"),
        Some(&json!({"title": "plan", "body": "ship it"})),
        &[],
    );
    assert_eq!(status_code, 201, "{body}");
    curl("GET", &format!("{address}/v1/notes/n1"), None, &[]);
    let (refused, _, _) = curl("DELETE", &format!("{address}/v1/notes/n1"), None, &[]);
    assert_eq!(refused, 403);
    let bodies = bodies(dir.path(), "ledger.sqlite");
    assert!(bodies.len() >= 3, "{bodies:?}");
    let records = receiver.wait_for(bodies.len() as u64);
    // The caller's bearer token and the receiver's own never travel in a record.
    assert_each_row_once(&records, &bodies, &["sekret-token-42", "otlp-secret-77"]);
    let refusal = records
        .iter()
        .find(|r| r.attributes["attest.decision"] == "refuse")
        .unwrap();
    assert_eq!(refusal.attributes["attest.verb"], "delete");
    // The receiver's header was sent as configured.
    assert!(receiver
        .inbox
        .lock()
        .unwrap()
        .authorization
        .iter()
        .all(|a| a == "Bearer otlp-secret-77"));
    wait_caught_up(dir.path(), "ledger.sqlite");
    let status = status(dir.path(), "ledger.sqlite");
    assert_eq!(status[0]["sink"], "otlp");
    assert_eq!(status[0]["cursor"], bodies.len());
    assert_eq!(status[0]["lag"], 0);
}

#[test]
fn mcp_proxy_rows_reach_the_receiver_before_the_proxy_exits() {
    if !python_with("mcp") {
        return;
    }
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &receiver.endpoint(), "");
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "plan", "body": "ship it"}},
        {"tool": "get_note", "args": {"id": "n1"}},
        {"tool": "update_note", "args": {"id": "n1", "title": "plan b"}},
    ]});
    let server = py("notes_server.py");
    let python = python();
    drive_with(
        dir.path(),
        &plan,
        &["--mode", "auto", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
        &[HEADERS],
    );
    // The proxy has exited: what it appended was sent on its way out.
    let bodies = bodies(dir.path(), "ledger.sqlite");
    assert!(bodies.len() >= 3, "{bodies:?}");
    let records = receiver.records();
    assert_each_row_once(&records, &bodies, &["otlp-secret-77"]);
    assert!(records
        .iter()
        .any(|r| r.attributes.get("attest.call.server").map(String::as_str) == Some("notes")));
}

#[test]
fn a_receiver_down_for_30_seconds_loses_no_row_and_gets_none_twice() {
    let mut receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &receiver.endpoint(), "");
    expect_ok(&attest(dir.path(), &["--ledger", "ledger.sqlite", "demo"]));
    let mut streamer = start_streamer(dir.path(), "ledger.sqlite");
    let first = bodies(dir.path(), "ledger.sqlite").len() as u64;
    receiver.wait_for(first);

    // Down: the port refuses connections while the doors keep appending.
    receiver.down();
    assert!(std::net::TcpStream::connect(("127.0.0.1", receiver.port)).is_err());
    expect_ok(&attest(dir.path(), &["--ledger", "ledger.sqlite", "demo"]));
    let during = bodies(dir.path(), "ledger.sqlite").len() as u64;
    assert!(during > first);
    std::thread::sleep(Duration::from_secs(30));
    let status_down = status(dir.path(), "ledger.sqlite");
    assert_eq!(status_down[0]["cursor"], first, "{status_down:?}");
    assert_eq!(status_down[0]["lag"], during - first);

    // Up again on the same port: the backlog arrives.
    receiver.up();
    receiver.wait_for(during);

    // A streamer killed outright once its cursor holds (a kill between the receiver's
    // acknowledgement and the cursor's write resends that batch: at-least-once), more
    // rows, a new streamer: it resumes at the cursor.
    wait_caught_up(dir.path(), "ledger.sqlite");
    let _ = streamer.0.kill();
    let _ = streamer.0.wait();
    expect_ok(&attest(dir.path(), &["--ledger", "ledger.sqlite", "demo"]));
    streamer = start_streamer(dir.path(), "ledger.sqlite");
    let bodies = bodies(dir.path(), "ledger.sqlite");
    let records = receiver.wait_for(bodies.len() as u64);
    wait_caught_up(dir.path(), "ledger.sqlite");
    drop(streamer);
    assert_each_row_once(&records, &bodies, &["otlp-secret-77"]);
}

#[test]
fn two_streamers_on_one_postgres_ledger_send_each_row_once() {
    let Some(db) = crate::pg_db("two_streamers_on_one_postgres_ledger_send_each_row_once") else {
        return;
    };
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &receiver.endpoint(), "  batch: 3\n");
    let streamers = [
        start_streamer(dir.path(), &db.url),
        start_streamer(dir.path(), &db.url),
    ];
    for _ in 0..3 {
        expect_ok(&attest(dir.path(), &["--ledger", &db.url, "demo"]));
    }
    let bodies = bodies(dir.path(), &db.url);
    let records = receiver.wait_for(bodies.len() as u64);
    wait_caught_up(dir.path(), &db.url);
    // Past the cursor nothing more comes: give a duplicate a moment to show.
    std::thread::sleep(Duration::from_millis(500));
    drop(streamers);
    assert_eq!(receiver.records().len(), records.len());
    assert_each_row_once(&receiver.records(), &bodies, &["otlp-secret-77"]);
    let status = status(dir.path(), &db.url);
    assert_eq!(status[0]["cursor"], bodies.len());
    assert_eq!(status[0]["lag"], 0);
}

#[test]
fn once_with_the_receiver_down_fails_and_leaves_the_cursor_for_the_next_run() {
    let mut receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    configure(dir.path(), &receiver.endpoint(), "");
    expect_ok(&attest(dir.path(), &["--ledger", "ledger.sqlite", "demo"]));
    receiver.down();
    let run = |dir: &Path| stream_once(dir, HEADERS);
    let failed = run(dir.path());
    assert_eq!(failed.status.code(), Some(2), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("cannot reach the receiver"),
        "{}",
        stderr(&failed)
    );
    // Neither the endpoint's header value nor the URL is printed.
    assert!(!stderr(&failed).contains("otlp-secret-77"));
    assert_eq!(status(dir.path(), "ledger.sqlite")[0]["cursor"], 0);
    receiver.up();
    let done = run(dir.path());
    let rows = bodies(dir.path(), "ledger.sqlite").len();
    assert_eq!(crate::stdout(&done).trim(), format!("streamed {rows} rows"));
    assert_each_row_once(
        &receiver.records(),
        &bodies(dir.path(), "ledger.sqlite"),
        &[],
    );
}

/// One OCSF request as received: its timestamp and signature headers, and its body.
type Signed = (String, String, Vec<u8>);

#[test]
fn ocsf_events_arrive_signed_like_the_webhook_once_each() {
    use hmac::{Hmac, Mac};
    let received: Arc<Mutex<Vec<Signed>>> = Arc::default();
    let store = Arc::clone(&received);
    let url = crate::gateway::serve_app(move || {
        axum::Router::new().route(
            "/events",
            axum::routing::post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let store = Arc::clone(&store);
                    async move {
                        let header = |name: &str| {
                            headers
                                .get(name)
                                .map(|v| v.to_str().unwrap().to_owned())
                                .unwrap_or_default()
                        };
                        store.lock().unwrap().push((
                            header("x-attest-timestamp"),
                            header("x-attest-signature"),
                            body.to_vec(),
                        ));
                        axum::http::StatusCode::NO_CONTENT
                    }
                },
            ),
        )
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        format!("stream:\n  ocsf:\n    url: {url}/events\n  batch: 2\n"),
    )
    .unwrap();
    expect_ok(&attest(dir.path(), &["--ledger", "ledger.sqlite", "demo"]));
    let out = stream_once(dir.path(), ("ATTEST_STREAM_SECRET", "stream-key-9"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let bodies = bodies(dir.path(), "ledger.sqlite");
    let mut seqs = Vec::new();
    for (ts, signature, body) in received.lock().unwrap().iter() {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"stream-key-9").unwrap();
        mac.update(ts.as_bytes());
        mac.update(b".");
        mac.update(body);
        let expected = format!("v1={}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(signature, &expected);
        let events: Vec<Value> = serde_json::from_slice(body).unwrap();
        assert!(events.len() <= 2);
        for event in events {
            assert_eq!(event["class_uid"], 6003);
            let seq = event["metadata"]["sequence"].as_u64().unwrap();
            let line = &bodies[usize::try_from(seq).unwrap() - 1];
            assert_eq!(
                event["metadata"]["uid"],
                hex::encode(Sha256::digest(line.as_bytes()))
            );
            seqs.push(seq);
        }
    }
    assert_eq!(seqs, (1..=bodies.len() as u64).collect::<Vec<_>>());
    // Without its secret the sink is not started: an error naming the variable.
    let missing = attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "stream", "run", "--once"],
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("ATTEST_STREAM_SECRET"),
        "{}",
        stderr(&missing)
    );
}

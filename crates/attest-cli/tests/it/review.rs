//! The dashboard's API, `/metrics` and the background verifier on `attest serve`, and
//! OpenTelemetry traces reaching a local OTLP receiver. The ledger's content is known:
//! it is written through the ledger's API before the server starts.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use attest_ledger::{Confirm, Ledger, LedgerOptions, Record};
use serde_json::Value;

use crate::approvals::{add_approver, serve, Server};
use crate::digest::Act;
use crate::{ledger_file, python};

/// What the known ledger holds, and what the dashboard must count.
pub(crate) struct Known {
    /// Entries, stage rows included (the counters count each once).
    pub(crate) entries: u64,
    /// Actions: an intent and its outcome are one; an open intent or ask is one too.
    pub(crate) actions: u64,
    pub(crate) refused: u64,
    pub(crate) rejected: u64,
    pub(crate) unverified: u64,
    pub(crate) failed: u64,
    pub(crate) held: u64,
    pub(crate) intents: u64,
}

/// Writes a ledger of known content into `dir`'s default ledger file: a run of three
/// actions (`run-7`), and one row for each list a reviewer works through.
pub(crate) fn known_ledger(dir: &Path) -> Known {
    let ledger = Ledger::open(ledger_file(dir), LedgerOptions::default()).unwrap();
    let mut n = 0;
    let mut id = || {
        n += 1;
        format!("a{n}")
    };
    let mut rows: Vec<Record> = Vec::new();
    // The run: a read, an update, a send, in that order.
    for (verb, system) in [("list", "gmail"), ("update", "hubspot"), ("send", "gmail")] {
        let mut r = Act {
            verb,
            system,
            ..Act::normal("sales-bot")
        }
        .record(id());
        r.run_id = Some("run-7".into());
        rows.push(r);
    }
    let mut refused = Act {
        system: "stripe",
        verb: "pay",
        ..Act::normal("billing-bot")
    }
    .record(id());
    refused.decision = "refuse".into();
    refused.reasons = vec!["payments need a person's approval over $500".into()];
    refused.execution.status = "not_run".into();
    refused.verification = None;
    rows.push(refused);
    let mut rejected = Act {
        system: "stripe",
        verb: "refund",
        ..Act::normal("billing-bot")
    }
    .record(id());
    rejected.decision = "ask".into();
    rejected.reasons = vec!["refunds need finance".into()];
    rejected.confirm = Some(Confirm {
        outcome: "rejected".into(),
        approver: Some("ann@acme.com".into()),
        channel: Some("inbox".into()),
        note: None,
        approvers: Vec::new(),
    });
    rejected.execution.status = "not_run".into();
    rejected.verification = None;
    rows.push(rejected);
    rows.push(
        Act {
            level: "unverified",
            ..Act::normal("sales-bot")
        }
        .record(id()),
    );
    rows.push(
        Act {
            status: "failed",
            system: "hubspot",
            verb: "update",
            ..Act::normal("sales-bot")
        }
        .record(id()),
    );
    // Held for edits: an ask with unfilled placeholders, still pending.
    let mut held = Act::normal("sales-bot").record(id());
    held.decision = "ask".into();
    held.rules_fired = vec!["R3".into()];
    held.execution.status = "pending".into();
    held.verification = None;
    rows.push(held);
    // An intent whose outcome never came.
    let mut intent = Act {
        system: "github",
        verb: "delete",
        ..Act::normal("ops-bot")
    }
    .record(id());
    intent.execution.status = "intent".into();
    intent.verification = None;
    rows.push(intent);
    // An intent that did get its outcome: neither is listed as open.
    let closed = id();
    let mut opened = Act::normal("ops-bot").record(closed.clone());
    opened.execution.status = "intent".into();
    opened.verification = None;
    rows.push(opened);
    rows.push(Act::normal("ops-bot").record(closed));
    for row in &rows {
        ledger.append(row).unwrap();
    }
    Known {
        // Eight finished actions and three stage rows (the pending ask, the two intents),
        // one of which its outcome completes: ten actions, two of them still open.
        entries: 11,
        actions: 10,
        refused: 1,
        rejected: 1,
        unverified: 1,
        failed: 1,
        held: 1,
        intents: 1,
    }
}

async fn get(
    server: &Server,
    path: &str,
    token: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new().get(format!("{}{path}", server.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

async fn get_json(server: &Server, path: &str, token: &str) -> Value {
    let (status, _, body) = get(server, path, Some(token)).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn the_dashboard_api_counts_lists_and_shows_a_run_and_a_row_with_its_proof() {
    let dir = tempfile::tempdir().unwrap();
    let known = known_ledger(dir.path());
    let token = add_approver(dir.path(), "ann@acme.com", &[]);
    let server = serve(dir.path(), &[]);
    // Same authentication as the inbox.
    for path in [
        "/api/review/summary",
        "/api/review/lists/refused",
        "/api/review/runs/run-7",
        "/api/review/rows/1",
    ] {
        assert_eq!(get(&server, path, None).await.0, 401, "{path}");
        assert_eq!(
            get(&server, path, Some("ata_forged")).await.0,
            401,
            "{path}"
        );
    }
    let summary = get_json(&server, "/api/review/summary?hours=24", &token).await;
    assert_eq!(summary["totals"]["entries"], known.entries, "{summary:#}");
    assert_eq!(summary["totals"]["decision"]["refuse"], 1);
    assert_eq!(summary["totals"]["decision"]["ask"], 2);
    assert_eq!(summary["totals"]["decision"]["act"], 8);
    assert_eq!(summary["totals"]["level"]["unverified"], 1);
    assert_eq!(summary["totals"]["system"]["stripe"], 2);
    assert_eq!(summary["hours"].as_array().unwrap().len(), 24);
    // Actions, not rows: an intent and its outcome are one; the open intent and the
    // held ask are in progress, not a verification level of `none`.
    let actions = &summary["actions"];
    assert_eq!(actions["total"], known.actions, "{summary:#}");
    assert_eq!(actions["rows"], known.entries);
    assert_eq!(
        actions["decision"],
        serde_json::json!({"act": 7, "ask": 2, "refuse": 1})
    );
    assert_eq!(actions["level"]["running"], 1, "{summary:#}");
    assert_eq!(actions["level"]["awaiting decision"], 1, "{summary:#}");
    assert_eq!(actions["level"]["verified"], 4, "{summary:#}");
    // Refused, rejected, failed: did not run or nothing checked it.
    assert_eq!(actions["level"]["not checked"], 3, "{summary:#}");
    assert!(actions["level"].get("none").is_none(), "{summary:#}");
    assert_eq!(actions["in_progress"], 2);
    let agents: Vec<(String, u64)> = summary["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["agent"].as_str().unwrap().to_owned(),
                a["actions"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        agents,
        [
            ("sales-bot".into(), 6),
            ("billing-bot".into(), 2),
            ("ops-bot".into(), 2)
        ]
    );
    let refused = get_json(&server, "/api/review/lists/refused", &token).await;
    assert_eq!(
        refused["rows"][0]["reasons"][0],
        "payments need a person's approval over $500"
    );
    let runs = get_json(&server, "/api/review/runs", &token).await;
    assert_eq!(runs["runs"][0]["run_id"], "run-7");
    assert_eq!(runs["runs"][0]["actions"], 3);
    assert_eq!(runs["runs"][0]["agent"], "sales-bot");
    let this_hour = summary["hours"].as_array().unwrap().last().unwrap();
    assert_eq!(this_hour["counts"]["entries"], known.entries, "{summary:#}");
    for (list, total) in [
        ("refused", known.refused),
        ("rejected", known.rejected),
        ("unverified", known.unverified),
        ("failed", known.failed),
        ("held", known.held),
        ("intents", known.intents),
    ] {
        assert_eq!(summary["lists"][list], total, "{list}");
        let page = get_json(&server, &format!("/api/review/lists/{list}"), &token).await;
        assert_eq!(page["total"], total, "{list}: {page:#}");
        assert_eq!(
            page["rows"].as_array().unwrap().len() as u64,
            total,
            "{list}"
        );
    }
    let intents = get_json(&server, "/api/review/lists/intents", &token).await;
    assert_eq!(intents["rows"][0]["system"], "github");
    assert_eq!(intents["rows"][0]["verb"], "delete");
    // The run view: every action of the run, in order, with its receipt.
    let run = get_json(&server, "/api/review/runs/run-7", &token).await;
    let verbs: Vec<&str> = run["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verb"].as_str().unwrap())
        .collect();
    assert_eq!(verbs, ["list", "update", "send"]);
    assert_eq!(run["rows"][0]["seq"], 1);
    assert_eq!(run["rows"][0]["hash"].as_str().unwrap().len(), 64);
    assert_eq!(
        get(&server, "/api/review/runs/run-8", Some(&token)).await.0,
        404
    );
    // A row's detail carries its inclusion proof against the current tree.
    let row = get_json(&server, "/api/review/rows/2", &token).await;
    assert_eq!(row["entry"]["seq"], 2);
    assert_eq!(row["proof"]["tree_size"], 11, "{row:#}");
    assert_eq!(row["proof"]["entry_hash"], row["hash"]);
    assert_eq!(
        get(&server, "/api/review/rows/99", Some(&token)).await.0,
        404
    );
    assert_eq!(
        get(&server, "/api/review/lists/nope", Some(&token)).await.0,
        404
    );

    // Cached per write generation: the same answer until a row is written.
    let (_, headers, first) = get(&server, "/api/review/summary?hours=24", Some(&token)).await;
    let (_, _, again) = get(&server, "/api/review/summary?hours=24", Some(&token)).await;
    assert_eq!(first, again);
    assert_eq!(headers["x-attest-generation"], "11");
    let ledger = Ledger::open(ledger_file(dir.path()), LedgerOptions::default()).unwrap();
    ledger
        .append(&Act::normal("sales-bot").record("late".into()))
        .unwrap();
    let later = get_json(&server, "/api/review/summary?hours=24", &token).await;
    assert_eq!(later["generation"], 12);
    assert_eq!(later["totals"]["entries"], known.entries + 1);
}

/// Parses `text` with the Prometheus client's parsers (OpenMetrics, and the classic
/// text format) and returns `{family: {sample name + labels: value}}`.
pub(crate) fn parse_metrics(text: &str) -> Option<Value> {
    let script = r##"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
from prometheus_client.parser import text_string_to_metric_families as classic
text = sys.stdin.read()
out = {}
for family in om(text):
    samples = out.setdefault(family.name, {"type": family.type, "samples": []})
    for s in family.samples:
        samples["samples"].append({"name": s.name, "labels": s.labels, "value": s.value})
# The classic parser reads it too (what older scrapers use).
assert {f.name for f in classic(text.replace("# EOF\n", ""))}
print(json.dumps(out))
"##;
    let python = python();
    let probe = Command::new(&python)
        .args(["-c", "import prometheus_client"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        crate::peer_missing("no prometheus_client for Python (.ci/run installs it into .ci/venv)");
        return None;
    }
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[tokio::test]
async fn metrics_parse_with_the_prometheus_client_and_count_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let known = known_ledger(dir.path());
    let token = add_approver(dir.path(), "ann@acme.com", &[]);
    let server = serve(dir.path(), &[]);
    let (status, headers, text) = get(&server, "/metrics", Some(&token)).await;
    assert_eq!(status, 200, "{text}");
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let Some(families) = parse_metrics(&text) else {
        return;
    };
    let actions = &families["attest_entries"];
    assert_eq!(actions["type"], "counter", "{families:#}");
    let samples = actions["samples"].as_array().unwrap();
    let total: f64 = samples
        .iter()
        .filter(|s| s["name"] == "attest_entries_total")
        .map(|s| s["value"].as_f64().unwrap())
        .sum();
    // From the ledger's counters: every entry, stage rows included.
    assert_eq!(total, known.entries as f64);
    assert!(
        samples
            .iter()
            .any(|s| s["labels"] == serde_json::json!({"decision": "refuse"}) && s["value"] == 1.0),
        "{samples:#?}"
    );
    // Actions as the dashboard counts them: an intent and its outcome are one.
    let actions = &families["attest_actions"];
    assert_eq!(actions["type"], "counter", "{families:#}");
    let by_decision = |name: &str| -> f64 {
        actions["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["name"] == "attest_actions_total")
            .filter(|s| name.is_empty() || s["labels"] == serde_json::json!({"decision": name}))
            .map(|s| s["value"].as_f64().unwrap())
            .sum()
    };
    assert_eq!(by_decision(""), known.actions as f64, "{actions:#}");
    assert!(known.actions < known.entries, "the ledger has stage rows");
    assert_eq!(by_decision("refuse"), 1.0, "{actions:#}");
    let systems = &families["attest_entries_by_system"]["samples"];
    assert!(
        systems
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["labels"] == serde_json::json!({"system": "stripe"}) && s["value"] == 2.0),
        "{systems:#?}"
    );
    assert_eq!(families["attest_pipeline_seconds"]["type"], "histogram");
    assert_eq!(families["attest_append_seconds"]["type"], "histogram");
    assert_eq!(
        families["attest_pending_approvals"]["samples"][0]["value"],
        0.0
    );
    assert_eq!(families["attest_ledger_seq"]["samples"][0]["value"], 11.0);
    assert_eq!(families["attest_chain_broken"]["samples"][0]["value"], 0.0);
    // The first full pass has run by the time a scrape sees it (or soon after).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, _, text) = get(&server, "/metrics", Some(&token)).await;
        let families = parse_metrics(&text).unwrap();
        let at = families["attest_last_full_verify_timestamp_seconds"]["samples"][0]["value"]
            .as_f64()
            .unwrap();
        if at > 1.6e9 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no full verify pass in the metrics"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_background_verifier_finds_an_edited_row_and_healthz_turns_unhealthy() {
    let dir = tempfile::tempdir().unwrap();
    known_ledger(dir.path());
    let token = add_approver(dir.path(), "ann@acme.com", &[]);
    let server = serve(
        dir.path(),
        &["--verify-interval", "200ms", "--full-verify-interval", "5s"],
    );
    let (status, _, body) = get(&server, "/healthz", None).await;
    assert_eq!((status, body.as_str()), (200, r#"{"ok":true}"#));
    // Wait for a first full pass, then edit an old row behind the server's back.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let chain = get_json(&server, "/api/review/chain", &token).await;
        if chain["last_full_pass"].is_string() && chain["checked_through"] == 11 {
            assert!(chain["first_broken_seq"].is_null());
            break;
        }
        assert!(Instant::now() < deadline, "no full pass: {chain}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let conn = rusqlite::Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute(
        "UPDATE entries SET body = replace(body, 'hubspot', 'hubspoT') WHERE seq = 2",
        [],
    )
    .unwrap();
    drop(conn);
    // The next full pass (within 5 s) finds it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _, body) = get(&server, "/healthz", None).await;
        if status == 503 {
            let health: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(health["ok"], false);
            assert_eq!(health["chain"]["first_broken_seq"], 2, "{health}");
            break;
        }
        assert!(Instant::now() < deadline, "healthz stayed healthy: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let chain = get_json(&server, "/api/review/chain", &token).await;
    assert_eq!(chain["first_broken_seq"], 2);
    assert!(
        chain["problem"].as_str().unwrap().contains("hash"),
        "{chain}"
    );
    let (_, _, text) = get(&server, "/metrics", Some(&token)).await;
    assert!(text.contains("attest_chain_broken 1"), "{text}");
    assert!(text.contains("attest_chain_first_broken_seq 2"), "{text}");
}

/// The spans an OTLP receiver got: (name, span id, parent id, attributes as text).
type Received = Arc<Mutex<Vec<Span>>>;

/// One received span: (name, span id, parent id, attributes as text).
type Span = (String, Vec<u8>, Vec<u8>, Vec<(String, String)>);

/// A tiny OTLP/HTTP receiver on 127.0.0.1: decodes each `POST /v1/traces` protobuf body.
async fn otlp_receiver() -> (String, Received) {
    use axum::routing::post;
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message;
    let received: Received = Arc::default();
    let store = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: axum::body::Bytes| {
            let store = Arc::clone(&store);
            async move {
                let request = ExportTraceServiceRequest::decode(body).unwrap();
                let mut store = store.lock().unwrap();
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            let attributes = span
                                .attributes
                                .iter()
                                .map(|kv| {
                                    let value =
                                        match kv.value.as_ref().and_then(|v| v.value.clone()) {
                                            Some(Any::StringValue(s)) => s,
                                            Some(Any::IntValue(i)) => i.to_string(),
                                            Some(Any::BoolValue(b)) => b.to_string(),
                                            Some(Any::DoubleValue(d)) => d.to_string(),
                                            other => format!("{other:?}"),
                                        };
                                    (kv.key.clone(), value)
                                })
                                .collect();
                            store.push((span.name, span.span_id, span.parent_span_id, attributes));
                        }
                    }
                }
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_an_otlp_receiver_with_a_child_per_step_and_no_params() {
    let (endpoint, received) = otlp_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_attest");
    let out = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || {
            Command::new(bin)
                .arg("demo")
                .current_dir(dir)
                .env_clear()
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
                .env("OTEL_BSP_SCHEDULE_DELAY", "100")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = received.lock().unwrap().clone();
    let actions: Vec<_> = spans.iter().filter(|s| s.0 == "attest.action").collect();
    // The demo's four actions.
    assert_eq!(actions.len(), 4, "{spans:#?}");
    for action in &actions {
        assert!(action.2.is_empty(), "an action span is a root: {action:?}");
        let children: Vec<&str> = spans
            .iter()
            .filter(|s| s.2 == action.1)
            .map(|s| s.0.as_str())
            .collect();
        assert!(children.contains(&"policy"), "{children:?}");
        assert!(children.contains(&"append"), "{children:?}");
        let attr = |key: &str| {
            action
                .3
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        assert!(
            attr("attest.system").is_some() && attr("attest.verb").is_some(),
            "{action:?}"
        );
    }
    // An action that ran has run and verify children, and its append names the row.
    let gmail_list = actions
        .iter()
        .find(|a| a.3.iter().any(|(k, v)| k == "attest.verb" && v == "list"))
        .unwrap();
    let children: Vec<&Span> = spans.iter().filter(|s| s.2 == gmail_list.1).collect();
    let names: Vec<&str> = children.iter().map(|s| s.0.as_str()).collect();
    assert!(
        names.contains(&"run") && names.contains(&"verify"),
        "{names:?}"
    );
    let append = children.iter().find(|s| s.0 == "append").unwrap();
    assert!(
        append.3.iter().any(|(k, v)| k == "attest.seq" && v == "1"),
        "{append:?}"
    );
    assert!(
        append
            .3
            .iter()
            .any(|(k, v)| k == "attest.level" && !v.is_empty()),
        "{append:?}"
    );
    assert!(
        append
            .3
            .iter()
            .any(|(k, v)| k == "attest.hash" && v.len() == 64),
        "{append:?}"
    );
    // An action that asked has a gate child.
    assert!(spans.iter().any(|s| s.0 == "gate"), "{spans:#?}");
    // No param value leaves the process: the demo's params hold these.
    let all = format!("{spans:?}");
    for secret in ["is:unread", "closedwon", "ch_3Nx", "12500"] {
        assert!(!all.contains(secret), "{secret} in the spans");
    }
}

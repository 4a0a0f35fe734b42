//! Each door started from the library in this process, with no `attest` binary: the
//! gateway and the inbox on 127.0.0.1 over one pipeline, Attest's MCP server over an
//! in-process stream pair.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use attest_core::approvals::{ApprovalStore, StoreGate};
use attest_core::Attest;
use attest_doors::gateway::tenants::Tenants;
use attest_doors::gateway::{GatewayOptions, GatewayState};
use attest_doors::inbox::{allowed_origins, InboxState};
use attest_doors::scrape::ScrapeAccess;
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::PolicyEngine;
use serde_json::{json, Value};

/// A pipeline on a fresh ledger in `dir` with the default policy (a write to a system
/// nobody configured asks) whose asks are held at once in the approval store.
fn pipeline(dir: &tempfile::TempDir) -> (Attest, Arc<ApprovalStore>) {
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    let store = Arc::new(ApprovalStore::open(&ledger).unwrap());
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .policy(PolicyEngine::from_yaml("{}\n", "attest.yaml").unwrap())
        .approvals(Arc::clone(&store))
        .gate(StoreGate::new(Arc::clone(&store)).wait(Duration::ZERO))
        .agent("bot")
        .build()
        .unwrap();
    (attest, store)
}

/// Serves `router` on a fresh 127.0.0.1 port; its base URL.
async fn spawn(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_and_the_inbox_run_in_process_over_one_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let (attest, store) = pipeline(&dir);
    let (approver, token) = store.add_approver("ana", None).unwrap();
    assert_eq!(approver.name, "ana");

    // The vendor: answers every call with what it was asked.
    let upstream = spawn(
        axum::Router::new().fallback(|method: axum::http::Method| async move {
            axum::Json(json!({"vendor": "saw", "method": method.as_str()}))
        }),
    )
    .await;

    let options = GatewayOptions {
        upstream: None,
        record_reads: true,
        max_body: 64 * 1024,
        upstream_timeout: Duration::from_secs(5),
        allow_upstream: Vec::new(),
        token: None,
        agents: None,
        metrics: ScrapeAccess::default(),
    };
    let tenants = Tenants::new(
        None,
        Vec::new(),
        Arc::new(|_: &str| anyhow::bail!("no tenants here")),
    )
    .unwrap();
    let gateway_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway = format!("http://{}", gateway_listener.local_addr().unwrap());
    let state = GatewayState::with_tenants(attest.clone(), tenants, options).unwrap();
    tokio::spawn(attest_doors::gateway::serve(gateway_listener, state));

    let client = reqwest::Client::new();
    // A read is let through, forwarded and recorded.
    let read = client
        .get(format!("{gateway}/v1/notes"))
        .header("x-attest-upstream", &upstream)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let body: Value = read.json().await.unwrap();
    assert_eq!(body, json!({"vendor": "saw", "method": "GET"}));
    // A write nobody configured asks: held at once, never forwarded.
    let write = client
        .post(format!("{gateway}/v1/notes"))
        .header("x-attest-upstream", &upstream)
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), 202);
    let held: Value = write.json().await.unwrap();
    assert_eq!(held["status"], "pending", "{held}");
    let id = held["id"].as_str().unwrap().to_owned();

    // The inbox over the same pipeline lists the held call to a registered approver.
    let inbox_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = inbox_listener.local_addr().unwrap();
    let inbox = InboxState {
        attest: Arc::new(attest.clone()),
        origins: allowed_origins(address, None).unwrap(),
        trusted_identity_header: None,
        slack_signing_secret: None,
        links: None,
        slack_updates: None,
        teams_updates: None,
        clock: Arc::new(attest_ledger::SystemClock),
        review: None,
        metrics: ScrapeAccess::default(),
        oidc: None,
    };
    tokio::spawn(attest_doors::inbox::serve(inbox_listener, inbox));
    let pending = client
        .get(format!("http://{address}/api/pending"))
        .bearer_auth(token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(pending.status(), 200);
    let pending: Value = pending.json().await.unwrap();
    let ids: Vec<&str> = pending["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{pending}");
    // Without the approver's credential the inbox says nothing.
    let anonymous = client
        .get(format!("http://{address}/api/pending"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // Both calls left rows: the read's, and the held write's ask.
    let rows = attest.ledger().list(10).unwrap();
    assert!(rows.len() >= 2, "{} rows", rows.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_server_runs_in_process_and_answers_a_verdict() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::ServiceExt;

    let dir = tempfile::tempdir().unwrap();
    let (attest, _store) = pipeline(&dir);
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(attest_doors::mcp::server::serve_on(
        attest.clone(),
        None,
        server_io,
    ));
    let client = ().serve(client_io).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"attest_decide"), "{names:?}");
    let params = CallToolRequestParams::new("attest_decide").with_arguments(
        json!({"system": "crm", "verb": "delete"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let answer = client.call_tool(params).await.unwrap();
    let text = serde_json::to_string(&answer).unwrap();
    assert!(text.contains("\\\"decision\\\":\\\"ask\\\""), "{text}");
    // Deciding records nothing.
    assert!(attest.ledger().list(10).unwrap().is_empty());
    client.cancel().await.unwrap();
}

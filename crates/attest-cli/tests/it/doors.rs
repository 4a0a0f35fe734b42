//! One scenario through every door, with one configuration file (`.attest/config.yaml`):
//! a registry entry maps the in-house tool `frobnicate_widget` to `acmecrm.list`; a
//! recipe reads deals back from a fake of the CRM's API on 127.0.0.1 (the file's
//! `systems.acmecrm.base_url`, its credential in the variable the file names); a webhook
//! on 127.0.0.1 is told of each ask; the policy blocks `acmecrm.search` organisation-wide;
//! a coding agent's hook turns an ask into an Attest approval request (`hook.approvals`).
//!
//! Each door is a row: a function that plays the scenario through it and reports what it
//! [`Saw`]; [`check`] holds every row to the same promises. The Python doors are added as
//! rows the same way.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, serve_app};
use crate::mcp::{py, python_with};
use crate::{exported_entries, python, stderr, stdout};

const ACME_TOKEN: &str = "acme-test-token";
const HOOK_SECRET: &str = "whsec-doors";

/// The fake CRM: its deals, every request it saw, and whether it lies (stores another
/// stage than it was sent, while answering as if it had stored the one sent).
#[derive(Default)]
pub(crate) struct Vendor {
    deals: Vec<Value>,
    pub(crate) seen: Vec<String>,
    lying: bool,
}

type Shared = Arc<Mutex<Vendor>>;

fn start_vendor(vendor: Shared) -> String {
    async fn widgets(State(v): State<Shared>) -> Json<Value> {
        v.lock().unwrap().seen.push("GET /v1/widgets".to_owned());
        Json(json!([{"id": "w1", "kind": "sprocket"}]))
    }
    async fn search(State(v): State<Shared>) -> Json<Value> {
        v.lock()
            .unwrap()
            .seen
            .push("GET /v1/widgets/search".to_owned());
        Json(json!([]))
    }
    async fn create(State(v): State<Shared>, Json(sent): Json<Value>) -> (StatusCode, Json<Value>) {
        let mut v = v.lock().unwrap();
        v.seen.push("POST /v1/deals".to_owned());
        let id = format!("d{}", v.deals.len() + 1);
        let answered = json!({"id": id, "name": sent["name"], "stage": sent["stage"]});
        let mut stored = answered.clone();
        if v.lying {
            stored["stage"] = json!("lost");
        }
        v.deals.push(stored);
        (StatusCode::CREATED, Json(answered))
    }
    async fn read(
        State(v): State<Shared>,
        UrlPath(id): UrlPath<String>,
        headers: HeaderMap,
    ) -> (StatusCode, Json<Value>) {
        let mut v = v.lock().unwrap();
        v.seen.push(format!("GET /v1/deals/{id}"));
        let authorised = headers.get("authorization").and_then(|h| h.to_str().ok())
            == Some(&format!("Bearer {ACME_TOKEN}"));
        if !authorised {
            return (StatusCode::UNAUTHORIZED, Json(json!({"error": "no"})));
        }
        match v.deals.iter().find(|d| d["id"] == id.as_str()) {
            Some(deal) => (StatusCode::OK, Json(deal.clone())),
            None => (StatusCode::NOT_FOUND, Json(json!({"error": "not found"}))),
        }
    }
    async fn remove(State(v): State<Shared>, UrlPath(id): UrlPath<String>) -> StatusCode {
        v.lock()
            .unwrap()
            .seen
            .push(format!("DELETE /v1/deals/{id}"));
        StatusCode::NO_CONTENT
    }
    serve_app(move || {
        Router::new()
            .route("/v1/widgets", get(widgets))
            .route("/v1/widgets/search", get(search))
            .route("/v1/deals", post(create))
            .route("/v1/deals/{id}", get(read))
            .route("/v1/deals/{id}", delete(remove))
            .with_state(vendor)
    })
}

/// A webhook receiver on 127.0.0.1; returns its URL and the bodies it was sent.
fn start_webhook() -> (String, Arc<Mutex<Vec<Value>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&bodies);
    let base = serve_app(move || {
        Router::new().route(
            "/hook",
            post(move |Json(body): Json<Value>| {
                let kept = Arc::clone(&kept);
                async move {
                    kept.lock().unwrap().push(body);
                    "ok"
                }
            }),
        )
    });
    (format!("{base}/hook"), bodies)
}

/// The scenario's world: a directory holding the configuration, the vendor, the webhook.
pub(crate) struct Scenario {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) vendor: Shared,
    pub(crate) vendor_url: String,
    pub(crate) hooks: Arc<Mutex<Vec<Value>>>,
}

impl Scenario {
    pub(crate) fn new(lying: bool) -> Scenario {
        let vendor = Arc::new(Mutex::new(Vendor {
            lying,
            ..Vendor::default()
        }));
        let vendor_url = start_vendor(Arc::clone(&vendor));
        let (hook_url, hooks) = start_webhook();
        let dir = tempfile::tempdir().unwrap();
        let attest_dir = dir.path().join(".attest");
        std::fs::create_dir_all(attest_dir.join("recipes")).unwrap();
        let write = |name: &str, text: &str| std::fs::write(attest_dir.join(name), text).unwrap();
        write(
            "config.yaml",
            &format!(
                "ledger: '{ledger}'
policy: policy.yaml
registry: [in-house.yaml]
recipes: [recipes]
systems:
  acmecrm: {{base_url: '{vendor_url}', credential: ACME_TOKEN}}
notify:
  webhook: {{url: '{hook_url}', secret_env: HOOK_SECRET}}
hook: {{approvals: attest, wait: 1s}}
",
                ledger = crate::test_ledger_at(dir.path()),
            ),
        );
        write(
            "in-house.yaml",
            "overrides:
  - {tool: frobnicate_widget, system: acmecrm, verb: list}
  - {tool: search_widgets, system: acmecrm, verb: search}
",
        );
        write(
            "policy.yaml",
            "version: 1
org:
  blocked: [acmecrm.search]
policies:
  - name: deals
    match: {system: acmecrm, verb: create}
    decision: act
    reason: deals are made by the sales agent
",
        );
        write(
            "recipes/acmecrm.yaml",
            "recipes:
  - name: acmecrm.deal
    system: acmecrm
    verbs: [create]
    when: {params: [/stage], result: [/id]}
    base_url: http://127.0.0.1:9
    auth: {env: ACME_DEFAULT_TOKEN}
    read:
      url: \"{base}/v1/deals/{id}\"
      id: [result:/id]
    compare:
      fields:
        - {name: stage, want: params:/stage, got: /stage}
",
        );
        Scenario {
            dir,
            vendor,
            vendor_url,
            hooks,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The only environment each door gets: the vendor's token, the webhook's secret.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ACME_TOKEN", ACME_TOKEN.to_owned()),
            ("HOOK_SECRET", HOOK_SECRET.to_owned()),
            ("ACME_API", self.vendor_url.clone()),
        ]
    }

    fn vendor_saw(&self, request: &str) -> bool {
        self.vendor
            .lock()
            .unwrap()
            .seen
            .iter()
            .any(|r| r == request)
    }

    /// The ledger row that records how the `acmecrm` action with `verb` ended.
    fn outcome(&self, verb: &str) -> Option<Value> {
        exported_entries(self.path()).into_iter().rev().find(|e| {
            e["system"] == "acmecrm" && e["verb"] == verb && e["execution"]["status"] != "intent"
        })
    }
}

/// What a door did with the scenario's four calls.
#[derive(Debug, Default)]
pub(crate) struct Saw {
    /// `frobnicate_widget`: its system.verb and decision.
    pub(crate) frobnicate: (String, String),
    /// The created deal's verification level.
    pub(crate) created: Option<String>,
    /// The blocked search's decision.
    pub(crate) blocked: String,
    /// Whether the webhook was told of the delete that asks.
    pub(crate) notified: Option<bool>,
}

/// The promises every door keeps.
pub(crate) fn check(scenario: &Scenario, door: &str, saw: &Saw, lying: bool) {
    assert_eq!(
        saw.frobnicate,
        ("acmecrm.list".to_owned(), "act".to_owned()),
        "{door}: the registry entry decides"
    );
    // Every door reads the created deal back and announces the ask: no cell is "not from here".
    {
        let level = saw
            .created
            .as_deref()
            .unwrap_or_else(|| panic!("{door}: no level for the created deal"));
        let want = if lying { "unverified" } else { "verified" };
        assert_eq!(level, want, "{door}: the created deal, read back");
        let row = scenario.outcome("create").expect("a create row");
        assert_eq!(row["verification"]["level"], want, "{door}: {row}");
        assert_eq!(
            row["verification"]["method"], "read-back:recipe",
            "{door}: {row}"
        );
        assert!(!row.to_string().contains(ACME_TOKEN), "{door}: {row}");
    }
    assert_eq!(
        saw.blocked, "refuse",
        "{door}: the organisation-blocked read"
    );
    assert!(
        !scenario.vendor_saw("GET /v1/widgets/search"),
        "{door}: the blocked read reached the vendor"
    );
    {
        let notified = saw
            .notified
            .unwrap_or_else(|| panic!("{door}: the ask was not announced"));
        assert!(notified, "{door}: the webhook was not told of the ask");
        let hooks = scenario.hooks.lock().unwrap();
        assert!(
            hooks
                .iter()
                .any(|h| h["type"] == "approval.requested" && h["request"]["system"] == "acmecrm"),
            "{door}: {hooks:?}"
        );
    }
}

/// Runs `door` on an honest vendor and on a lying one.
fn through(door: &str, play: fn(&Scenario) -> Option<Saw>) {
    for lying in [false, true] {
        let scenario = Scenario::new(lying);
        let Some(saw) = play(&scenario) else {
            return;
        };
        check(&scenario, door, &saw, lying);
    }
}

// --- the Rust API ---

fn rust_api(scenario: &Scenario) -> Option<Saw> {
    use attest_core::setup::{AskMode, DoorParts, Overrides, Settings};
    use attest_core::{FunctionCall, Outcome, ProtocolCall};

    let env: std::collections::HashMap<String, String> = scenario
        .env()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let overrides = Overrides {
        config: Some(scenario.path().join(".attest/config.yaml")),
        ask: Some(AskMode::Pending),
        ..Overrides::default()
    };
    let attest = Settings::resolve(&overrides, Arc::new(env))
        .unwrap()
        .build(DoorParts::default())
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let function = |name: &'static str, arguments: Value| {
        attest.action(ProtocolCall::Function(FunctionCall {
            framework: Some("rust"),
            name,
            arguments,
            system: Some("acmecrm"),
            ..FunctionCall::default()
        }))
    };
    let vendor = scenario.vendor_url.clone();
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: String, body: Option<Value>| {
        let (http, vendor) = (http.clone(), vendor.clone());
        move |_params: Value| async move {
            let mut request = http
                .request(method, format!("{vendor}{path}"))
                .bearer_auth(ACME_TOKEN);
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = request.send().await?;
            let text = response.text().await?;
            Ok::<Value, reqwest::Error>(serde_json::from_str(&text).unwrap_or(json!({})))
        }
    };
    let decided = |outcome: &Outcome<Value, reqwest::Error>| outcome.receipt().decision.to_string();

    let frobnicate = function("frobnicate_widget", json!({}));
    let label = format!("{}.{}", frobnicate.system, frobnicate.verb.as_str());
    let outcome = runtime
        .block_on(attest.call(frobnicate).run(call(
            reqwest::Method::GET,
            "/v1/widgets".into(),
            None,
        )))
        .unwrap();
    let frobnicate = (label, decided(&outcome));

    let deal = json!({"name": "Globex", "stage": "won"});
    let created = runtime
        .block_on(attest.call(function("create_deal", deal.clone())).run(call(
            reqwest::Method::POST,
            "/v1/deals".into(),
            Some(deal),
        )))
        .unwrap();
    let created = created.receipt().level.map(|l| l.as_str().to_owned());

    let blocked = runtime
        .block_on(
            attest
                .call(function("search_widgets", json!({"q": "x"})))
                .run(call(
                    reqwest::Method::GET,
                    "/v1/widgets/search?q=x".into(),
                    None,
                )),
        )
        .unwrap();
    let blocked = decided(&blocked);

    let asked = runtime
        .block_on(
            attest
                .call(function("delete_deal", json!({"id": "d1"})))
                .run(call(reqwest::Method::DELETE, "/v1/deals/d1".into(), None)),
        )
        .unwrap();
    assert!(matches!(asked, Outcome::Held { .. }), "{asked:?}");
    Some(Saw {
        frobnicate,
        created,
        blocked,
        notified: Some(!scenario.hooks.lock().unwrap().is_empty()),
    })
}

#[test]
fn the_rust_api_gets_all_of_attest() {
    through("Rust API", rust_api);
}

// --- attest mcp-proxy ---

fn mcp_proxy(scenario: &Scenario) -> Option<Saw> {
    if !python_with("mcp") {
        return None;
    }
    let plan = json!({"calls": [
        {"tool": "frobnicate_widget", "args": {}},
        {"tool": "create_deal", "args": {"name": "Globex", "stage": "won"}},
        {"tool": "search_widgets", "args": {"q": "x"}},
        {"tool": "delete_deal", "args": {"id": "d1"}},
    ]});
    let env = scenario.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = py("acme_server.py");
    let python = python();
    let report = crate::mcp::drive_with(
        scenario.path(),
        &plan,
        &["--server", "acmecrm", "--mode", "pending"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
        &env,
    );
    let meta = |n: usize| report["calls"][n]["meta"]["_attest"].clone();
    let frobnicate = scenario.outcome("list").expect("a list row");
    let blocked = scenario.outcome("search").expect("a search row");
    assert_eq!(report["calls"][2]["is_error"], true, "{report}");
    Some(Saw {
        frobnicate: row_decision(&frobnicate),
        created: meta(1)["level"].as_str().map(str::to_owned),
        blocked: blocked["decision"].as_str().unwrap().to_owned(),
        notified: Some(!scenario.hooks.lock().unwrap().is_empty()),
    })
}

/// A row's `system.verb` and decision.
fn row_decision(row: &Value) -> (String, String) {
    (
        format!(
            "{}.{}",
            row["system"].as_str().unwrap(),
            row["verb"].as_str().unwrap()
        ),
        row["decision"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn the_mcp_proxy_gets_all_of_attest() {
    through("mcp-proxy", mcp_proxy);
}

// --- attest gateway ---

fn gateway(scenario: &Scenario) -> Option<Saw> {
    if curl_missing() {
        return None;
    }
    let (_gateway, address) = start_gateway(scenario, &scenario.env());
    let record = ["-H", "X-Attest-Agent: sales-bot"];
    let (status, _, body) = curl("GET", &format!("{address}/v1/widgets"), None, &record);
    assert_eq!(status, 200, "{body}");
    let deal = json!({"name": "Globex", "stage": "won"});
    let (status, headers, body) =
        curl("POST", &format!("{address}/v1/deals"), Some(&deal), &record);
    assert_eq!(status, 201, "{body}");
    let created = headers.get("x-attest-level").cloned();
    let (status, headers, body) = curl(
        "GET",
        &format!("{address}/v1/widgets/search?q=x"),
        None,
        &record,
    );
    assert_eq!(status, 403, "{body}");
    let blocked = headers["x-attest-decision"].clone();
    let (status, _, body) = curl("DELETE", &format!("{address}/v1/deals/d1"), None, &record);
    assert_eq!(status, 202, "{body}");
    assert!(scenario.vendor_saw("GET /v1/widgets"));
    let listed = scenario.outcome("list").expect("a list row");
    assert_eq!(listed["agent"], "sales-bot", "{listed}");
    Some(Saw {
        // HTTP names no tool: the file's base URL makes the vendor's host `acmecrm`.
        frobnicate: row_decision(&listed),
        created,
        blocked,
        notified: Some(!scenario.hooks.lock().unwrap().is_empty()),
    })
}

#[test]
fn the_gateway_gets_all_of_attest() {
    through("gateway", gateway);
}

// --- attest mcp-server (attest_decide, attest_ask, attest_record) ---

/// The agent consults Attest and makes its calls itself: it decides each call, creates the
/// deal at the vendor and reports it (`attest_record`, read back by the recipe), asks a
/// person about the delete (`attest_ask`: the webhook is told), and once a registered
/// approver said yes reports the delete with the request's token.
fn mcp_server(scenario: &Scenario) -> Option<Saw> {
    if !python_with("mcp") || curl_missing() {
        return None;
    }
    let deal = json!({"name": "Globex", "stage": "won"});
    let (status, _, created) = curl(
        "POST",
        &format!("{}/v1/deals", scenario.vendor_url),
        Some(&deal),
        &[],
    );
    assert_eq!(status, 201, "{created}");
    let created: Value = serde_json::from_str(&created).unwrap();
    let token_file = scenario.path().join("ann.token");
    let added = crate::attest(
        scenario.path(),
        &[
            "approvers",
            "add",
            "ann",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let delete = json!({"tool": "delete_deal", "server": "acmecrm", "params": {"id": "d1"}});
    let mut record_delete = delete.clone();
    record_delete["token"] = json!("{token}");
    record_delete["result"] = json!({"deleted": true});
    let plan = json!({"calls": [
        {"tool": "attest_decide", "args": {"tool": "frobnicate_widget"}},
        {"tool": "attest_decide", "args": {"tool": "create_deal", "server": "acmecrm", "params": deal}},
        {"tool": "attest_record", "args": {"tool": "create_deal", "server": "acmecrm", "params": deal, "result": created}},
        {"tool": "attest_decide", "args": {"tool": "search_widgets", "server": "acmecrm"}},
        {"tool": "attest_decide", "args": delete},
        {"tool": "attest_ask", "args": delete},
        {"tool": "attest_confirm_status", "args": {"token": "{token}"}},
        {"run": [env!("CARGO_BIN_EXE_attest"), "confirm", "{id}", "approve", "--token-file", token_file]},
        {"tool": "attest_record", "args": record_delete},
    ]});
    let plan_file = scenario.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let output = Command::new(python())
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .arg("mcp-server")
        .current_dir(scenario.path())
        .env_clear()
        .envs(scenario.env())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let answer = |n: usize| -> Value {
        let call = &report["calls"][n];
        assert_eq!(call["is_error"], false, "call {n}: {report}");
        serde_json::from_str(call["text"].as_str().unwrap()).unwrap()
    };
    let (frobnicate, blocked) = (answer(0), answer(3));
    assert_eq!(answer(1)["decision"], "act", "{report}");
    let recorded = answer(2);
    assert_eq!(answer(4)["decision"], "ask", "{report}");
    // Asking files a request and records the ask, but nothing the agent could approve with.
    let asked = answer(5);
    assert_eq!(asked["requested"], true, "{asked}");
    assert!(
        !report["calls"][5].to_string().contains("attest confirm"),
        "{report}"
    );
    assert_eq!(answer(6)["status"], "pending", "{report}");
    assert_eq!(report["calls"][7]["run"], 0, "{report}");
    // The approved delete is the call asked about, the approver named on its row.
    let deleted = answer(8);
    assert_eq!(deleted["decision"], "ask", "{deleted}");
    assert_eq!(deleted["approver"], "ann", "{deleted}");
    assert!(deleted.get("warning").is_none(), "{deleted}");
    let row = scenario.outcome("delete").expect("a delete row");
    assert_eq!(row["execution"]["status"], "ok", "{row}");
    assert_eq!(row["confirm"]["outcome"], "approved", "{row}");
    Some(Saw {
        frobnicate: (
            format!(
                "{}.{}",
                frobnicate["system"].as_str().unwrap(),
                frobnicate["verb"].as_str().unwrap()
            ),
            frobnicate["decision"].as_str().unwrap().to_owned(),
        ),
        created: recorded["level"].as_str().map(str::to_owned),
        blocked: blocked["decision"].as_str().unwrap().to_owned(),
        notified: Some(!scenario.hooks.lock().unwrap().is_empty()),
    })
}

#[test]
fn the_mcp_server_decides_with_all_of_attest() {
    through("mcp-server", mcp_server);
}

// --- attest hook claude-code ---

fn hook_answer(scenario: &Scenario, event: &Value) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["hook", "claude-code"])
        .current_dir(scenario.path())
        .env_clear()
        // Holds live in the per-user state directory (issue 49).
        .env("ATTEST_STATE_DIR", scenario.path().join(".hook-state"))
        .envs(scenario.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        event.to_string().as_bytes(),
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

fn hook_event(name: &str, tool: &str, input: Value) -> Value {
    json!({
        "session_id": "doors-session",
        "hook_event_name": name,
        "tool_name": tool,
        "tool_input": input,
    })
}

fn hook(scenario: &Scenario) -> Option<Saw> {
    if curl_missing() {
        return None;
    }
    let decision = |answer: &Value| {
        answer["hookSpecificOutput"]["permissionDecision"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let pre = hook_answer(
        scenario,
        &hook_event("PreToolUse", "mcp__acmecrm__frobnicate_widget", json!({})),
    );
    let reason = pre["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("acmecrm.list acts"), "{pre}");
    let frobnicate = (
        "acmecrm.list".to_owned(),
        if decision(&pre) == "allow" {
            "act"
        } else {
            "?"
        }
        .to_owned(),
    );
    // Claude Code ran the tool (the test makes the MCP server's call to the vendor).
    let deal = json!({"name": "Globex", "stage": "won"});
    let (status, _, body) = curl(
        "POST",
        &format!("{}/v1/deals", scenario.vendor_url),
        Some(&deal),
        &[],
    );
    assert_eq!(status, 201, "{body}");
    let answered: Value = serde_json::from_str(&body).unwrap();
    let post = hook_answer(
        scenario,
        &json!({
            "session_id": "doors-session",
            "hook_event_name": "PostToolUse",
            "tool_name": "mcp__acmecrm__create_deal",
            "tool_input": deal,
            "tool_response": answered,
        }),
    );
    let created = scenario
        .outcome("create")
        .and_then(|row| row["verification"]["level"].as_str().map(str::to_owned));
    // Claude is told of a read-back that contradicted the call, and of nothing else.
    let context = post["hookSpecificOutput"]["additionalContext"].as_str();
    if created.as_deref() == Some("unverified") {
        assert!(
            context.is_some_and(|c| c.contains("did not match")),
            "{post}"
        );
    } else {
        assert_eq!(post, json!({}), "{post}");
    }
    let blocked = hook_answer(
        scenario,
        &hook_event(
            "PreToolUse",
            "mcp__acmecrm__search_widgets",
            json!({"q": "x"}),
        ),
    );
    let blocked = if decision(&blocked) == "deny" {
        "refuse"
    } else {
        "?"
    }
    .to_owned();
    // The delete asks: with `hook.approvals: attest` it becomes an approval request the
    // webhook is told of; after `hook.wait` the hook denies, naming the request.
    let asked = hook_answer(
        scenario,
        &hook_event(
            "PreToolUse",
            "mcp__acmecrm__delete_deal",
            json!({"id": "d1"}),
        ),
    );
    assert_eq!(decision(&asked), "deny", "{asked}");
    let reason = asked["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("is held for approval"), "{asked}");
    assert!(!scenario.vendor_saw("DELETE /v1/deals/d1"));
    let notified = {
        let hooks = scenario.hooks.lock().unwrap();
        let id = hooks
            .iter()
            .find_map(|h| h["request"]["id"].as_str().map(str::to_owned));
        id.is_some_and(|id| reason.contains(&id))
    };
    Some(Saw {
        frobnicate,
        created,
        blocked,
        notified: Some(notified),
    })
}

#[test]
fn the_claude_code_hook_gets_all_of_attest() {
    through("hook claude-code", hook);
}

// --- bad input, from every door ---

/// Starts `attest gateway` in the scenario's directory with `env`; returns it and its
/// address.
fn start_gateway(scenario: &Scenario, env: &[(&str, String)]) -> (crate::Running, String) {
    let (running, line) = crate::start_first_line(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args([
                "gateway",
                "--port",
                "0",
                "--mode",
                "pending",
                "--record-reads",
            ])
            .args(["--upstream", &scenario.vendor_url])
            .current_dir(scenario.path())
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str()))),
    );
    let address = line
        .strip_prefix("attest gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    (running, address)
}

#[test]
fn a_bad_configuration_names_file_line_and_key_from_every_door() {
    let scenario = Scenario::new(false);
    let config = scenario.path().join(".attest/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    // An unknown key on line 3 of the file.
    let lines: Vec<&str> = text.lines().collect();
    let bad = format!(
        "{}\n{}\nnotfy: {{}}\n{}\n",
        lines[0],
        lines[1],
        lines[2..].join("\n")
    );
    std::fs::write(&config, bad).unwrap();
    let want = ".attest/config.yaml:3:1: unknown field `notfy`";
    let run = |args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(args)
            .current_dir(scenario.path())
            .env_clear()
            .envs(scenario.env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin.as_bytes());
        child.wait_with_output().unwrap()
    };
    for door in [
        &["gateway", "--port", "0"][..],
        &["mcp-proxy", "--", "true"],
        &["mcp-server"],
        &["config", "check"],
    ] {
        let output = run(door, "");
        let said = format!("{}{}", stdout(&output), stderr(&output));
        assert_ne!(output.status.code(), Some(0), "{door:?}: {said}");
        assert!(said.contains(want), "{door:?}: {said}");
    }
    // The hook answers Claude Code's deny (a hook that crashes or exits non-zero is not
    // one every agent reads as "blocked"), the reason naming the same place.
    let event = hook_event("PreToolUse", "mcp__acmecrm__frobnicate_widget", json!({}));
    let output = run(&["hook", "claude-code"], &event.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    let answer = &answer["hookSpecificOutput"];
    assert_eq!(answer["permissionDecision"], "deny", "{answer}");
    let reason = answer["permissionDecisionReason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains(want), "{answer}");
}

#[test]
fn a_missing_credential_names_the_configured_variable_and_the_write_is_acknowledged() {
    if curl_missing() {
        return;
    }
    let scenario = Scenario::new(false);
    let env: Vec<(&str, String)> = scenario
        .env()
        .into_iter()
        .filter(|(k, _)| *k != "ACME_TOKEN")
        .collect();
    let (_gateway, address) = start_gateway(&scenario, &env);
    let deal = json!({"name": "Globex", "stage": "won"});
    let (status, headers, body) = curl("POST", &format!("{address}/v1/deals"), Some(&deal), &[]);
    assert_eq!(status, 201, "{body}");
    assert_eq!(headers["x-attest-level"], "acknowledged", "{headers:?}");
    let row = scenario.outcome("create").unwrap();
    assert_eq!(row["verification"]["level"], "acknowledged", "{row}");
    let said = row["verification"].to_string();
    // The variable the configuration file names for acmecrm, once; never the recipe's.
    assert_eq!(said.matches("ACME_TOKEN").count(), 1, "{said}");
    assert!(!said.contains("ACME_DEFAULT_TOKEN"), "{said}");
    assert!(
        !scenario.vendor_saw("GET /v1/deals/d1"),
        "read back without a credential"
    );
}

// --- one registry entry, every door that describes a call ---

/// The widgets API: nothing listens there, and a refused call never reaches it.
const WIDGETS_API: &str = "http://127.0.0.1:9";

/// A directory whose configuration maps the in-house tool `frobnicate_gadget` to
/// `widgets.delete` (and the widgets API's host, [`WIDGETS_API`], to `widgets`), with a
/// policy that refuses `widgets.delete` organisation-wide. The compiled-in registry knows
/// neither the tool nor the system (`unknown.write`, which asks), so a door that
/// describes the call without the configured registry disagrees.
fn registry_entry_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let attest_dir = dir.path().join(".attest");
    std::fs::create_dir_all(&attest_dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(attest_dir.join(name), text).unwrap();
    write(
        "config.yaml",
        &format!(
            "policy: policy.yaml\nregistry: [in-house.yaml]\nsystems:\n  widgets: {{base_url: '{WIDGETS_API}'}}\n"
        ),
    );
    write(
        "in-house.yaml",
        "overrides:\n  - {tool: frobnicate_gadget, system: widgets, verb: delete}\n",
    );
    write(
        "policy.yaml",
        "version: 1\norg:\n  blocked: [widgets.delete]\n",
    );
    write(
        "cases.yaml",
        &format!(
            "cases:
  - name: the in-house tool is a blocked delete
    call: {{tool: frobnicate_gadget}}
    expect: {{decision: refuse}}
  - name: a delete on the widgets API is a blocked delete
    call: {{method: DELETE, url: '{WIDGETS_API}/gadgets/g1'}}
    expect: {{decision: refuse}}
"
        ),
    );
    dir
}

#[test]
fn a_configured_registry_entry_reads_alike_through_every_door() {
    let dir = registry_entry_dir();
    let path = dir.path();
    let run = |args: &[&str]| {
        let output = crate::attest(path, args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}{}",
            stdout(&output),
            stderr(&output)
        );
        stdout(&output)
    };
    let url = format!("{WIDGETS_API}/gadgets/g1");
    for call in [
        &["--tool", "frobnicate_gadget"][..],
        &["--method", "DELETE", "--url", &url],
    ] {
        let detected: Value =
            serde_json::from_str(&run(&[&["detect", "--json"], call].concat())).unwrap();
        assert_eq!(
            (&detected["system"], &detected["verb"]),
            (&json!("widgets"), &json!("delete")),
            "detect {call:?}: {detected}"
        );
        let explained: Value =
            serde_json::from_str(&run(&[&["policy", "explain", "--json"], call].concat())).unwrap();
        assert_eq!(
            (
                &explained["system"],
                &explained["verb"],
                &explained["decision"]
            ),
            (&json!("widgets"), &json!("delete"), &json!("refuse")),
            "policy explain {call:?}: {explained}"
        );
    }
    // The CI test of the policy, with the same configuration as production.
    let tested = run(&[
        "policy",
        "test",
        ".attest/policy.yaml",
        ".attest/cases.yaml",
    ]);
    assert!(!tested.contains("FAIL"), "policy test: {tested}");
    assert!(
        tested.contains("2 of 2 cases passed"),
        "policy test: {tested}"
    );
    // Each coding agent's hook denies the call and records the refusal as widgets.delete.
    use crate::hook_agents::{claude, codex, copilot, cursor, gemini, verdict};
    let tool = "mcp__acme__frobnicate_gadget";
    let events = [
        ("claude-code", claude(tool, json!({}))),
        ("codex", codex(tool, json!({}))),
        ("gemini", gemini(tool, json!({}))),
        (
            "cursor",
            cursor(
                "beforeMCPExecution",
                json!({"tool_name": "frobnicate_gadget", "tool_input": "{}",
                       "mcp_server_name": "acme", "command": "acme-mcp"}),
            ),
        ),
        ("copilot", copilot("acme/frobnicate_gadget", json!({}))),
    ];
    for (agent, event) in events {
        let answer = crate::hook::hook_answer(path, &[agent], &event, &[]);
        assert_eq!(verdict(agent, &answer), "deny", "hook {agent}: {answer}");
        let rows = exported_entries(path);
        let row = rows
            .last()
            .unwrap_or_else(|| panic!("hook {agent}: no row"));
        assert_eq!(
            (&row["system"], &row["verb"], &row["decision"]),
            (&json!("widgets"), &json!("delete"), &json!("refuse")),
            "hook {agent}: {row}"
        );
    }
    // The MCP server's `attest_decide` (an agent asking before it acts) answers the same.
    if crate::mcp::python_with("mcp") {
        let plan = json!({"calls": [
            {"tool": "attest_decide", "args": {"tool": "frobnicate_gadget", "params": {}}},
        ]});
        std::fs::write(path.join("plan.json"), plan.to_string()).unwrap();
        let output = Command::new(crate::python())
            .arg(crate::mcp::py("mcp_driver.py"))
            .arg(path.join("plan.json"))
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_attest"))
            .args(crate::store_args(
                path,
                &["--ledger", "ledger.sqlite", "mcp-server"],
            ))
            .current_dir(path)
            .output()
            .unwrap();
        assert!(output.status.success(), "mcp-server: {}", stderr(&output));
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let decided: Value =
            serde_json::from_str(report["calls"][0]["text"].as_str().unwrap_or("null")).unwrap();
        assert_eq!(
            (&decided["system"], &decided["verb"], &decided["decision"]),
            (&json!("widgets"), &json!("delete"), &json!("refuse")),
            "mcp-server attest_decide: {report}"
        );
    }
    // The gateway refuses the delete on the widgets API before forwarding it.
    if curl_missing() {
        return;
    }
    let (_gateway, line) = crate::start_first_line(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(crate::store_args(
                path,
                &[
                    "--ledger",
                    "ledger.sqlite",
                    "gateway",
                    "--port",
                    "0",
                    "--upstream",
                    WIDGETS_API,
                ],
            ))
            .current_dir(path)
            .env_clear(),
    );
    let address = line
        .strip_prefix("attest gateway listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    let (status, headers, body) = curl("DELETE", &format!("{address}/gadgets/g1"), None, &[]);
    assert_eq!(status, 403, "gateway: {body}");
    assert_eq!(
        headers["x-attest-decision"], "refuse",
        "gateway: {headers:?}"
    );
    let rows = exported_entries(path);
    let row = rows.last().expect("the gateway's row");
    assert_eq!(
        (&row["system"], &row["verb"], &row["decision"]),
        (&json!("widgets"), &json!("delete"), &json!("refuse")),
        "gateway: {row}"
    );
}

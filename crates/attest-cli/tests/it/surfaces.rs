//! Read-back from every surface: a GitHub issue created through `attest mcp-proxy` (a
//! Python MCP server named `github`) and through `attest gateway`
//! (`ATTEST_BASE_URL_GITHUB` naming a fake of GitHub's REST API on 127.0.0.1) is read
//! back by the built-in `github.issue` recipe with `GITHUB_TOKEN`; the row says which
//! server, tool, URL, issue and run it was; an organisation-blocked read through the
//! gateway is a 403 that never reaches the upstream.

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, serve_app, start_gateway_with, Gateway};
use crate::mcp::{drive_with, py, python_with};
use crate::{outcome_entries, python};

const GITHUB_TOKEN: &str = "ghp-test-token-for-the-fake";

/// The fake's state: issues by (owner/repo, number), every request it saw, and
/// whether it stores a different title than it was sent (a write that did not land).
#[derive(Default)]
struct GitHub {
    issues: Vec<(String, Value)>,
    seen: Vec<String>,
    tamper: bool,
}

type Shared = Arc<Mutex<GitHub>>;

fn authorised(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {GITHUB_TOKEN}"))
}

async fn create(
    State(github): State<Shared>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    headers: HeaderMap,
    Json(sent): Json<Value>,
) -> impl IntoResponse {
    let mut github = github.lock().unwrap();
    github
        .seen
        .push(format!("POST /repos/{owner}/{repo}/issues"));
    // The write carries the caller's own credentials (the gateway's test client sends
    // its own); the read-back must carry GITHUB_TOKEN, which `read` checks.
    let _ = headers;
    let number = github.issues.len() + 1;
    let mut title = sent["title"].as_str().unwrap_or_default().to_owned();
    if github.tamper {
        title.push_str(" (edited by a bot)");
    }
    let issue = json!({
        "id": 9000 + number,
        "number": number,
        "title": title,
        "body": sent["body"],
        "state": "open",
        "labels": [],
        "assignees": [],
    });
    github
        .issues
        .push((format!("{owner}/{repo}"), issue.clone()));
    (StatusCode::CREATED, Json(issue))
}

async fn read(
    State(github): State<Shared>,
    UrlPath((owner, repo, number)): UrlPath<(String, String, usize)>,
    headers: HeaderMap,
) -> impl IntoResponse {
    let mut github = github.lock().unwrap();
    github
        .seen
        .push(format!("GET /repos/{owner}/{repo}/issues/{number}"));
    if !authorised(&headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials"})),
        );
    }
    let slug = format!("{owner}/{repo}");
    match github
        .issues
        .iter()
        .find(|(at, issue)| *at == slug && issue["number"] == number)
    {
        Some((_, issue)) => (StatusCode::OK, Json(issue.clone())),
        None => (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))),
    }
}

async fn list(
    State(github): State<Shared>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
) -> Json<Value> {
    let mut github = github.lock().unwrap();
    github
        .seen
        .push(format!("GET /repos/{owner}/{repo}/issues"));
    Json(json!([]))
}

fn start_github(github: Shared) -> String {
    serve_app(move || {
        Router::new()
            .route("/repos/{owner}/{repo}/issues", post(create).get(list))
            .route("/repos/{owner}/{repo}/issues/{number}", get(read))
            .with_state(github)
    })
}

/// The `github` rows that record how each action ended.
fn github_outcomes(dir: &Path) -> Vec<Value> {
    outcome_entries(dir)
        .into_iter()
        .filter(|entry| entry["system"] == "github")
        .collect()
}

#[test]
fn through_the_proxy_a_created_issue_is_read_back_by_its_recipe() {
    if !python_with("mcp") {
        return;
    }
    for tamper in [false, true] {
        let github = Arc::new(Mutex::new(GitHub {
            tamper,
            ..GitHub::default()
        }));
        let base = start_github(Arc::clone(&github));
        let dir = tempfile::tempdir().unwrap();
        let plan = json!({"calls": [
            {"tool": "create_issue",
             "args": {"owner": "acme", "repo": "app", "title": "Login fails", "body": "500 on /login"},
             "meta": {"attest/run": "run-proxy-7"}},
        ]});
        let server = py("github_server.py");
        let python = python();
        let report = drive_with(
            dir.path(),
            &plan,
            &["--mode", "auto", "--server", "github"],
            &[python.to_str().unwrap(), server.to_str().unwrap()],
            &[
                ("GITHUB_API", &base),
                ("GITHUB_TOKEN", GITHUB_TOKEN),
                ("ATTEST_BASE_URL_GITHUB", &base),
            ],
        );
        let call = &report["calls"][0];
        let want = if tamper { "unverified" } else { "verified" };
        assert_eq!(call["meta"]["_attest"]["level"], want, "{report}");
        let rows = github_outcomes(dir.path());
        let [row] = rows.as_slice() else {
            panic!("one outcome row: {rows:?}")
        };
        assert_eq!(row["verification"]["method"], "read-back:recipe", "{row}");
        assert_eq!(row["verification"]["level"], want, "{row}");
        assert_eq!(
            row["call"],
            json!({"server": "github", "tool": "create_issue"})
        );
        assert_eq!(row["target"], "acme/app#1", "{row}");
        assert_eq!(row["run_id"], "run-proxy-7", "{row}");
        assert!(
            row["result_ids"].as_array().unwrap().contains(&json!("1")),
            "{row}"
        );
        let seen = github.lock().unwrap().seen.clone();
        assert_eq!(
            seen,
            [
                "POST /repos/acme/app/issues",
                "GET /repos/acme/app/issues/1"
            ]
        );
    }
}

const POLICY: &str = r#"
version: 1
org:
  blocked: ["github.list", "github.read", "github.get", "github.search"]
policies:
  - name: sandbox-writes
    match: {system: github, verb: [create, update, write]}
    decision: act
    reason: the fake GitHub is a sandbox
"#;

/// The gateway in front of the fake, with `ATTEST_BASE_URL_GITHUB` and `GITHUB_TOKEN` set.
fn start_gateway(dir: &Path, github: &str) -> (Gateway, String) {
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    let env = [
        ("ATTEST_BASE_URL_GITHUB", github),
        ("GITHUB_TOKEN", GITHUB_TOKEN),
    ];
    start_gateway_with(dir, github, &[], &env)
}

#[test]
fn through_the_gateway_a_created_issue_is_read_back_by_its_recipe() {
    if curl_missing() {
        return;
    }
    for tamper in [false, true] {
        let github = Arc::new(Mutex::new(GitHub {
            tamper,
            ..GitHub::default()
        }));
        let base = start_github(Arc::clone(&github));
        let dir = tempfile::tempdir().unwrap();
        let (_gateway, address) = start_gateway(dir.path(), &base);
        let issue = json!({"title": "Login fails", "body": "500 on /login"});
        let (status, headers, body) = curl(
            "POST",
            &format!("{address}/repos/acme/app/issues?per_page=1"),
            Some(&issue),
            &[
                "-H",
                "X-Attest-Run: run-gw-3",
                "-H",
                "X-Attest-Agent: triage-bot",
            ],
        );
        assert_eq!(status, 201, "{body}");
        let want = if tamper { "unverified" } else { "verified" };
        assert_eq!(headers["x-attest-level"], want, "{headers:?}");
        let rows = github_outcomes(dir.path());
        let [row] = rows.as_slice() else {
            panic!("one outcome row: {rows:?}")
        };
        assert_eq!(row["verification"]["method"], "read-back:recipe", "{row}");
        assert_eq!(row["verification"]["level"], want, "{row}");
        assert_eq!(
            row["call"],
            json!({"method": "POST", "url": format!("{base}/repos/acme/app/issues")}),
        );
        assert_eq!(row["target"], "acme/app#1", "{row}");
        assert_eq!(row["run_id"], "run-gw-3", "{row}");
        assert_eq!(row["agent"], "triage-bot", "{row}");
        assert!(!row.to_string().contains(GITHUB_TOKEN));
        assert!(!row.to_string().contains("per_page"));
        let seen = github.lock().unwrap().seen.clone();
        assert_eq!(
            seen,
            [
                "POST /repos/acme/app/issues",
                "GET /repos/acme/app/issues/1"
            ]
        );
    }
}

#[test]
fn an_organisation_blocked_read_through_the_gateway_never_reaches_the_upstream() {
    if curl_missing() {
        return;
    }
    let github = Arc::new(Mutex::new(GitHub::default()));
    let base = start_github(Arc::clone(&github));
    let dir = tempfile::tempdir().unwrap();
    let (_gateway, address) = start_gateway(dir.path(), &base);
    let (status, headers, body) = curl(
        "GET",
        &format!("{address}/repos/acme/app/issues"),
        None,
        &[],
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(headers["x-attest-decision"], "refuse", "{headers:?}");
    assert!(github.lock().unwrap().seen.is_empty());
    let rows = github_outcomes(dir.path());
    let [row] = rows.as_slice() else {
        panic!("one refusal row: {rows:?}")
    };
    assert_eq!(row["decision"], "refuse", "{row}");
    assert_eq!(row["execution"]["status"], "not_run", "{row}");
}

//! Metrics where actions run: `gateway` at `/_attest/metrics`, `mcp-proxy --listen` at
//! `/metrics` and `serve` at `/metrics`, each behind a scrape credential of its own
//! (`--metrics-token-file`), never an approver's token. A governed call goes through
//! the real binary, then a scrape is parsed with the Prometheus client.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::approvals::add_approver;
use crate::review::parse_metrics;

/// The scrape token the tests configure.
const SCRAPE_TOKEN: &str = "scrape-secret-7f3a";

/// Writes the scrape token to a 0600 file in `dir`.
fn token_file(dir: &Path) -> PathBuf {
    let path = dir.join("metrics.token");
    std::fs::write(&path, format!("{SCRAPE_TOKEN}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path
}

/// `GET url` with `bearer` as the scrape credential: (status, body).
fn scrape(url: &str, bearer: Option<&str>) -> (u16, String) {
    let mut command = Command::new("curl");
    command.args(["-s", "-w", "\n%{http_code}"]);
    if let Some(token) = bearer {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = command.arg(url).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.parse().unwrap(), body.to_owned())
}

/// Refuses a scrape without a token, with a wrong one and with an approver's; answers
/// the right one. Returns the parsed families (`None`: no Prometheus client here).
fn scrape_checked(url: &str, approver: &str) -> Option<Value> {
    assert_eq!(scrape(url, None).0, 401, "{url} without a token");
    assert_eq!(
        scrape(url, Some("scrape-secret-7f3b")).0,
        401,
        "{url} wrong token"
    );
    assert_eq!(scrape(url, Some(approver)).0, 401, "{url} approver token");
    let (status, text) = scrape(url, Some(SCRAPE_TOKEN));
    assert_eq!(status, 200, "{url}: {text}");
    parse_metrics(&text)
}

/// The count of `attest_entries_total{decision}`.
fn actions(families: &Value, decision: &str) -> f64 {
    families["attest_entries"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["name"] == "attest_entries_total" && s["labels"] == json!({"decision": decision})
        })
        .map(|s| s["value"].as_f64().unwrap())
        .sum()
}

/// The observation count of histogram `family`.
fn observed(families: &Value, family: &str) -> f64 {
    families[family]["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("no {family}: {families:#}"))
        .iter()
        .find(|s| s["name"] == format!("{family}_count"))
        .and_then(|s| s["value"].as_f64())
        .unwrap_or_else(|| panic!("no {family}_count: {families:#}"))
}

#[test]
fn the_gateway_serves_its_actions_and_latencies_to_the_scrape_token_only() {
    if crate::gateway::curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), crate::gateway::POLICY).unwrap();
    let approver = add_approver(dir.path(), "ann@acme.com", &[]);
    let tokens = token_file(dir.path());
    let upstream = crate::gateway::start_vendor(Arc::default());
    let (_gateway, address) = crate::gateway::start_gateway(
        dir.path(),
        &upstream,
        &["--metrics-token-file", tokens.to_str().unwrap()],
    );
    let (status, headers, body) = crate::gateway::curl(
        "POST",
        &format!("{address}/v1/notes"),
        Some(&json!({"title": "plan", "body": "ship it"})),
        &[],
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(headers["x-attest-decision"], "act");
    let Some(families) = scrape_checked(&format!("{address}/_attest/metrics"), &approver) else {
        return;
    };
    // The write's intent and its outcome: the counters count entries.
    assert_eq!(actions(&families, "act"), 2.0, "{families:#}");
    assert!(observed(&families, "attest_pipeline_seconds") >= 1.0);
    assert!(observed(&families, "attest_append_seconds") >= 1.0);
    // Not a serve: none of the dashboard's figures.
    assert!(families.get("attest_chain_broken").is_none());
}

#[test]
fn mcp_proxy_listen_serves_its_actions_and_latencies_to_the_scrape_token_only() {
    use crate::mcp::{py, python_with};
    if crate::gateway::curl_missing() || !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let approver = add_approver(dir.path(), "ann@acme.com", &[]);
    let tokens = token_file(dir.path());
    let (_server, url) = crate::mcp_remote::remote_notes(dir.path());
    let (_proxy, endpoint) = crate::mcp_remote::listening_proxy_with(
        dir.path(),
        &url,
        "127.0.0.1:0",
        &["--metrics-token-file", tokens.to_str().unwrap()],
        &[],
    );
    let output = Command::new(crate::python())
        .arg(py("http_driver.py"))
        .args([
            endpoint.as_str(),
            crate::mcp_remote::TOKEN,
            "create_note",
            r#"{"title": "over http", "body": "b"}"#,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", crate::stderr(&output));
    let base = endpoint.strip_suffix("/mcp").unwrap();
    let Some(families) = scrape_checked(&format!("{base}/metrics"), &approver) else {
        return;
    };
    // An unknown write asks (approved by --mode auto): its intent and its outcome.
    assert_eq!(actions(&families, "ask"), 2.0, "{families:#}");
    assert!(observed(&families, "attest_pipeline_seconds") >= 1.0);
}

#[tokio::test]
async fn serve_takes_the_scrape_token_and_never_an_approvers() {
    if crate::gateway::curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let known = crate::review::known_ledger(dir.path());
    let approver = add_approver(dir.path(), "ann@acme.com", &[]);
    let tokens = token_file(dir.path());
    let server = crate::approvals::serve(
        dir.path(),
        &["--metrics-token-file", tokens.to_str().unwrap()],
    );
    let url = format!("{}/metrics", server.url.trim_end_matches('/'));
    let Some(families) = tokio::task::spawn_blocking(move || scrape_checked(&url, &approver))
        .await
        .unwrap()
    else {
        return;
    };
    assert_eq!(actions(&families, "refuse"), 1.0, "{families:#}");
    assert_eq!(
        families["attest_ledger_seq"]["samples"][0]["value"],
        known.entries as f64
    );
}

#[test]
fn a_metrics_token_file_others_may_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = crate::attest(
        dir.path(),
        &[
            "gateway",
            "--port",
            "0",
            "--metrics-token-file",
            tokens.to_str().unwrap(),
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        crate::stderr(&out).contains("chmod 600"),
        "{}",
        crate::stderr(&out)
    );
}

#[test]
fn without_a_metrics_token_the_gateway_answers_loopback_scrapes_only() {
    if crate::gateway::curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), crate::gateway::POLICY).unwrap();
    let upstream = crate::gateway::start_vendor(Arc::default());
    let (_gateway, address) = crate::gateway::start_gateway(dir.path(), &upstream, &[]);
    let url = format!("{address}/_attest/metrics");
    let (status, text) = scrape(&url, None);
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("# TYPE attest_pipeline_seconds histogram"),
        "{text}"
    );
    // A page whose DNS name was rebound to 127.0.0.1 is not a loopback scrape.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(["-H", "Host: rebound.example"])
        .arg(&url)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "403");
}

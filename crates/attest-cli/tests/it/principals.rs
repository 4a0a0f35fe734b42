//! Bindings to authenticated principals (issue 50), through the binary: the requester of
//! a call is its proven agent's owner whatever the headers say; an agent token names an
//! agent only in its own tenant; the doors on stdio check the agent's credential on every
//! call, so a token revoked while they run stops the next call.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::approvals::attest_env;
use crate::gateway::{curl, curl_missing, start_gateway, start_vendor, Shared};
use crate::mcp::{py, python_with};
use crate::{attest, outcome_entries, stderr, stdout};

fn write_config(dir: &Path, yaml: &str) {
    std::fs::create_dir_all(dir.join(".attest")).unwrap();
    std::fs::write(dir.join(".attest/config.yaml"), yaml).unwrap();
}

/// `attest [--tenant T] agents add NAME --json`: the token, printed once.
fn add_agent_in(dir: &Path, tenant: Option<&str>, name: &str) -> String {
    let mut args = vec!["--ledger", "ledger.sqlite"];
    if let Some(tenant) = tenant {
        args.extend(["--tenant", tenant]);
    }
    args.extend(["agents", "add", name, "--json"]);
    let out = attest(dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    added["token"].as_str().unwrap().to_owned()
}

/// `attest approvers add NAME --json`: the token.
fn add_approver(dir: &Path, name: &str) -> String {
    let out = attest(
        dir,
        &[
            "--ledger",
            "ledger.sqlite",
            "approvers",
            "add",
            name,
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    added["token"].as_str().unwrap().to_owned()
}

/// `attest confirm ID approve` as the approver holding `token`.
fn approve_as(dir: &Path, token: &str, id: &str) -> std::process::Output {
    attest_env(
        dir,
        &["--ledger", "ledger.sqlite", "confirm", id, "approve"],
        &[("ATTEST_APPROVER_TOKEN", token)],
    )
}

const ASK_POLICY: &str = "version: 1
policies:
  - name: notes-need-a-person
    match: {verb: create}
    decision: ask
    approvers: [ann@acme.com, bob@acme.com]
    reason: a person reviews new notes
";

#[test]
fn a_requester_without_the_actor_header_is_still_excluded() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("policy.yaml"), ASK_POLICY).unwrap();
    write_config(dir, "agents:\n  owners: {billing-bot: ann@acme.com}\n");
    let agent = add_agent_in(dir, None, "billing-bot");
    let ann = add_approver(dir, "ann@acme.com");
    let bob = add_approver(dir, "bob@acme.com");
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, gw) = start_gateway(dir, &upstream, &["--mode", "pending"]);
    let hold = |extra: &[&str]| {
        let token = format!("X-Attest-Token: {agent}");
        let mut headers = vec!["-H", token.as_str()];
        for header in extra {
            headers.extend(["-H", header]);
        }
        let (status, _, body) = curl(
            "POST",
            &format!("{gw}/v1/notes"),
            Some(&json!({"title": "t"})),
            &headers,
        );
        assert_eq!(status, 202, "{body}");
        let held: Value = serde_json::from_str(&body).unwrap();
        (
            held["id"].as_str().unwrap().to_owned(),
            held["resume"].as_str().unwrap().to_owned(),
        )
    };

    // No `X-Attest-Actor`: Ann's agent asked, so Ann does not approve; Bob does.
    let (id, resume) = hold(&[]);
    let own = approve_as(dir, &ann, &id);
    assert_ne!(
        own.status.code(),
        Some(0),
        "the agent's owner approved her own agent's call: {}",
        stdout(&own)
    );
    assert!(stderr(&own).contains("asked for it"), "{}", stderr(&own));
    let other = approve_as(dir, &bob, &id);
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    let token = format!("X-Attest-Token: {agent}");
    let (status, _, body) = curl("POST", &format!("{gw}{resume}"), None, &["-H", &token]);
    assert_eq!(status, 201, "{body}");

    // A header naming someone else adds a name; it does not take Ann's away.
    let (id, _) = hold(&["X-Attest-Actor: bob@acme.com"]);
    for (who, token) in [("ann", &ann), ("bob", &bob)] {
        let out = approve_as(dir, token, &id);
        assert_ne!(
            out.status.code(),
            Some(0),
            "{who} approved: {}",
            stdout(&out)
        );
    }
    let posts = vendor
        .lock()
        .unwrap()
        .hits
        .iter()
        .filter(|h| h.starts_with("POST"))
        .count();
    assert_eq!(posts, 1, "only the call Bob approved ran");
}

#[test]
fn an_agent_token_names_its_agent_in_its_own_tenant_only() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("policy.yaml"), crate::gateway::POLICY).unwrap();
    write_config(dir, "agents: {}\n");
    let bot_a = add_agent_in(dir, None, "bot-a");
    let acme_bot = add_agent_in(dir, Some("acme"), "acme-bot");
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let allow = ["--allow-tenant", "acme", "--allow-tenant", "beta"];
    let (_gateway, gw) = start_gateway(dir, &upstream, &allow);
    let post = |tenant: Option<&str>, token: &str| {
        let mut headers = vec![format!("X-Attest-Token: {token}")];
        headers.extend(tenant.map(|t| format!("X-Attest-Tenant: {t}")));
        let args: Vec<&str> = headers.iter().flat_map(|h| ["-H", h.as_str()]).collect();
        let (status, _, body) = curl(
            "POST",
            &format!("{gw}/v1/notes"),
            Some(&json!({"title": "t", "body": "b"})),
            &args,
        );
        (status, body)
    };
    let posts = || {
        vendor
            .lock()
            .unwrap()
            .hits
            .iter()
            .filter(|h| h.starts_with("POST"))
            .count()
    };

    // Each tenant's own agent acts in its own tenant.
    let (status, body) = post(Some("acme"), &acme_bot);
    assert_eq!(status, 201, "acme's own agent in acme: {body}");
    let (status, body) = post(None, &bot_a);
    assert_eq!(status, 201, "the default tenant's own agent: {body}");
    assert_eq!(posts(), 2);
    // Neither token names anybody in another tenant; nothing reaches the vendor.
    for (tenant, token, who) in [
        (Some("beta"), &bot_a, "the default tenant's bot-a in beta"),
        (Some("acme"), &bot_a, "the default tenant's bot-a in acme"),
        (None, &acme_bot, "acme's agent in the default tenant"),
        (Some("beta"), &acme_bot, "acme's agent in beta"),
    ] {
        let (status, body) = post(tenant, token);
        assert_eq!(status, 401, "{who}: {body}");
    }
    assert_eq!(posts(), 2, "a token of another tenant reached the vendor");
    let acme: Vec<Value> = exported(dir, Some("acme"));
    assert!(
        acme.iter().all(|row| row["agent"] == "acme-bot"),
        "{acme:?}"
    );
}

#[test]
fn a_jwt_names_an_agent_in_the_gateways_own_tenant_only() {
    if curl_missing() || !python_with("jwt") || !python_with("cryptography") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("policy.yaml"), crate::gateway::POLICY).unwrap();
    let (_issuer, issuer) = crate::identity::local_issuer(dir);
    write_config(
        dir,
        &format!("agents:\n  jwt: {{issuer: {issuer}, audience: attest-gateway}}\n"),
    );
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, gw) = start_gateway(dir, &upstream, &["--allow-tenant", "beta"]);
    let jwt = crate::identity::mint(&issuer, "sub=bot-a&aud=attest-gateway");
    let post = |tenant: Option<&str>| {
        let mut headers = vec![format!("X-Attest-Token: {jwt}")];
        headers.extend(tenant.map(|t| format!("X-Attest-Tenant: {t}")));
        let args: Vec<&str> = headers.iter().flat_map(|h| ["-H", h.as_str()]).collect();
        let body = json!({"title": "t", "body": "b"});
        curl("POST", &format!("{gw}/v1/notes"), Some(&body), &args)
    };
    let (status, _, body) = post(None);
    assert_eq!(status, 201, "the issuer's own tenant: {body}");
    let (status, _, body) = post(Some("beta"));
    assert_eq!(
        status, 401,
        "a JWT of the gateway's issuer acted in beta: {body}"
    );
    assert!(exported(dir, Some("beta")).is_empty());
}

/// Every entry of `tenant`'s chain (the default one for `None`).
fn exported(dir: &Path, tenant: Option<&str>) -> Vec<Value> {
    let mut args = vec!["--ledger", "ledger.sqlite"];
    if let Some(tenant) = tenant {
        args.extend(["--tenant", tenant]);
    }
    args.push("export");
    let out = attest(dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The plan step that revokes agent `name` while the door runs.
fn revoke_step(dir: &Path, name: &str) -> Value {
    let ledger = crate::test_ledger_at(dir);
    json!({"run": [
        env!("CARGO_BIN_EXE_attest"), "--ledger", ledger, "agents", "revoke", name,
    ]})
}

/// A directory whose configuration names agents by credential, with agent `notes-bot`
/// and its token; `None` without the Python `mcp` client.
fn notes_bot() -> Option<(tempfile::TempDir, String)> {
    if !python_with("mcp") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "agents: {}\n");
    let token = add_agent_in(dir.path(), None, "notes-bot");
    Some((dir, token))
}

#[test]
fn a_stdio_mcp_proxy_checks_the_agent_credential_on_every_call() {
    let Some((dir, token)) = notes_bot() else {
        return;
    };
    let dir = dir.path();
    let create = json!({"tool": "create_note", "args": {"title": "stdio", "body": "b"}});
    let plan = json!({"calls": [create, revoke_step(dir, "notes-bot"), create]});
    let server = py("notes_server.py");
    let python = crate::python();
    let report = crate::mcp::drive_with(
        dir,
        &plan,
        &["--mode", "auto", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
        &[("ATTEST_AGENT_TOKEN", &token)],
    );
    only_the_call_before_the_revocation_ran(dir, &report, "create");
}

#[test]
fn mcp_server_checks_the_agent_credential_on_every_call() {
    let Some((dir, token)) = notes_bot() else {
        return;
    };
    let dir = dir.path();
    let record = json!({"tool": "attest_record",
        "args": {"system": "crm", "verb": "update", "result": {"id": "7"}}});
    let plan = json!({"calls": [record, revoke_step(dir, "notes-bot"), record]});
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let output = std::process::Command::new(crate::python())
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir,
            &["--ledger", "ledger.sqlite", "mcp-server"],
        ))
        .current_dir(dir)
        .env_clear()
        .env("ATTEST_AGENT_TOKEN", &token)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    only_the_call_before_the_revocation_ran(dir, &report, "update");
}

/// The driver's report of [call, revoke, call]: the first call went through, the one
/// after the revocation was refused for its credential, and the ledger holds one `verb`
/// row, the agent's.
fn only_the_call_before_the_revocation_ran(dir: &Path, report: &Value, verb: &str) {
    assert_eq!(report["calls"][0]["is_error"], false, "{report}");
    assert_eq!(report["calls"][1]["run"], 0, "{report}");
    assert_eq!(
        report["calls"][2]["is_error"], true,
        "a revoked token still named the agent: {report}"
    );
    let text = report["calls"][2]["text"].as_str().unwrap_or_default();
    assert!(text.contains("not a valid agent token"), "{report}");
    let rows: Vec<Value> = outcome_entries(dir)
        .into_iter()
        .filter(|row| row["verb"] == verb)
        .collect();
    assert_eq!(rows.len(), 1, "the call after the revocation ran: {rows:?}");
    assert_eq!(rows[0]["agent"], "notes-bot");
}

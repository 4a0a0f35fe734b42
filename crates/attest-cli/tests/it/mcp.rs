//! `attest mcp-proxy` and `attest mcp-server` with real peers: the official Python MCP
//! client (PyPI `mcp`) on one side, the reference servers from npm
//! (`@modelcontextprotocol/server-filesystem`, `server-everything`) or a small server
//! built with the Python SDK on the other. `.ci/run` installs them; without node or the
//! `mcp` module these tests say so and skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{attest, exported_entries, peer_missing, python, stderr, stdout};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test scripts' folder.
pub(crate) fn py(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/py")
        .join(name)
}

/// Whether the test Python has `module`; reports it missing otherwise.
pub(crate) fn python_with(module: &str) -> bool {
    let found = Command::new(python())
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        peer_missing(&missing_module(module));
    }
    found
}

/// What a skip says when the test Python lacks `module`.
fn missing_module(module: &str) -> String {
    // The distribution to install, where its name is not the module's.
    let package = match module {
        "jwt" => "PyJWT",
        "yaml" => "PyYAML",
        other => other,
    };
    format!(
        "python3 with the `{module}` module is missing (run .ci/run, or `pip install {package}`)"
    )
}

#[test]
fn a_missing_module_names_the_package_that_provides_it() {
    let hint = missing_module("jwt");
    assert!(hint.contains("`pip install PyJWT`"), "{hint}");
    assert!(missing_module("mcp").contains("`pip install mcp`"));
}

/// The entry point of an npm MCP server installed by `.ci/run`, when the Python MCP client
/// that drives it is there too; otherwise the missing peer is reported.
fn npm_server_and_python_client(package: &str) -> Option<PathBuf> {
    if !python_with("mcp") {
        return None;
    }
    let script = root()
        .join(".ci/node/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node && script.exists() {
        Some(script)
    } else {
        peer_missing(&format!(
            "node or @modelcontextprotocol/{package} is missing (run .ci/run, or \
             `npm install --prefix .ci/node @modelcontextprotocol/{package}`)"
        ));
        None
    }
}

/// Runs the Python client against `attest mcp-proxy` with `proxy_args`, returns its report.
pub(crate) fn drive(dir: &Path, plan: &Value, proxy_args: &[&str], upstream: &[&str]) -> Value {
    drive_with(dir, plan, proxy_args, upstream, &[])
}

/// [`drive`] with `env` set for the proxy and its upstream (after the `ATTEST_*` scrub).
pub(crate) fn drive_with(
    dir: &Path,
    plan: &Value,
    proxy_args: &[&str],
    upstream: &[&str],
    env: &[(&str, &str)],
) -> Value {
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let ledger = crate::test_ledger_at(dir);
    let mut command = Command::new(python());
    command
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .arg("--ledger")
        .arg(&ledger)
        .arg("mcp-proxy")
        .args(proxy_args)
        .arg("--")
        .args(upstream)
        .current_dir(dir)
        .env("NOTES_LOG", dir.join("notes.log"));
    for (name, _) in std::env::vars() {
        if name.starts_with("ATTEST_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    let started = Instant::now();
    let output = command.output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the proxy took too long"
    );
    assert!(
        output.status.success(),
        "driver failed: {}\n{}",
        stdout(&output),
        stderr(&output)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&output), stderr(&output)))
}

/// The ledger's rows, oldest first, as `attest ledger --json` prints them.
fn rows(dir: &Path) -> Vec<Value> {
    let output = attest(
        dir,
        &[
            "--ledger",
            "ledger.sqlite",
            "ledger",
            "--json",
            "--limit",
            "100",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let mut rows: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    rows.reverse();
    rows
}

/// Each ledger entry's verification, in ledger order.
fn verifications(dir: &Path) -> Vec<Value> {
    crate::outcome_entries(dir)
        .into_iter()
        .map(|entry| entry["verification"].clone())
        .collect()
}

fn verify(dir: &Path) {
    let output = attest(dir, &["--ledger", "ledger.sqlite", "verify"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}

fn receipt(call: &Value) -> &Value {
    &call["meta"]["_attest"]
}

const FS_POLICY: &str = r#"
version: 1
policies:
  - name: no-secrets
    match: {system: filesystem, params: {/path: {regex: secret}}}
    decision: refuse
    reason: files named secret are never written by agents
  - name: scratch-writes
    match: {system: filesystem, verb: [write, create, update]}
    decision: act
    reason: the sandbox is scratch space
  - name: reads
    match: {verb: [read, search, get, list]}
    decision: act
    reason: reads change nothing
"#;

#[test]
fn proxy_filesystem_read_write_and_refusal_are_recorded() {
    let Some(server) = npm_server_and_python_client("server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir_all(&sandbox).unwrap();
    let sandbox = sandbox.canonicalize().unwrap();
    std::fs::write(sandbox.join("hello.txt"), "hello from the sandbox").unwrap();
    std::fs::write(dir.path().join("policy.yaml"), FS_POLICY).unwrap();
    let written = sandbox.join("notes.txt");
    let secret = sandbox.join("secret.txt");
    let plan = json!({"calls": [
        {"tool": "read_text_file", "args": {"path": sandbox.join("hello.txt")}},
        {"tool": "write_file", "args": {"path": written, "content": "written through attest"}},
        {"tool": "write_file", "args": {"path": secret, "content": "must not land"}},
    ]});
    let policy = dir.path().join("policy.yaml");
    let report = drive(
        dir.path(),
        &plan,
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--server",
            "filesystem",
        ],
        &["node", server.to_str().unwrap(), sandbox.to_str().unwrap()],
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"write_file") && tools.contains(&"read_text_file"),
        "{tools:?}"
    );

    let calls = report["calls"].as_array().unwrap();
    let read = &calls[0];
    assert_eq!(read["is_error"], false, "{read}");
    assert!(read["text"]
        .as_str()
        .unwrap()
        .contains("hello from the sandbox"));
    assert_eq!(receipt(read)["decision"], "act");
    assert_eq!(receipt(read)["seq"], 1);

    let write = &calls[1];
    assert_eq!(write["is_error"], false, "{write}");
    assert_eq!(receipt(write)["decision"], "act");
    assert_eq!(
        std::fs::read_to_string(&written).unwrap(),
        "written through attest"
    );

    let refused = &calls[2];
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["text"].as_str().unwrap().contains("refused"),
        "{refused}"
    );
    assert_eq!(receipt(refused)["decision"], "refuse");
    assert!(!secret.exists(), "the refused write reached the server");

    verify(dir.path());
    let rows = rows(dir.path());
    let summary: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["system"].as_str().unwrap().to_owned(),
                r["verb"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("filesystem".into(), "read".into(), "act".into()),
            // The write's intent row, then its outcome.
            ("filesystem".into(), "write".into(), "act".into()),
            ("filesystem".into(), "write".into(), "act".into()),
            ("filesystem".into(), "write".into(), "refuse".into()),
        ]
    );
}

#[test]
fn proxy_passes_everything_through_and_reads_annotations() {
    let Some(server) = npm_server_and_python_client("server-everything") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plan = json!({
        "list": ["resources", "prompts"],
        "calls": [
            {"tool": "echo", "args": {"message": "through the proxy"}},
            {"tool": "trigger-long-running-operation", "args": {"duration": 0.3, "steps": 3},
             "progress": true},
        ],
    });
    // Block mode with the default policy: `echo` is not a name Attest knows, so it would
    // ask (and be rejected); its readOnlyHint makes it a read, which acts.
    let report = drive(
        dir.path(),
        &plan,
        &[],
        &["node", server.to_str().unwrap(), "stdio"],
    );
    assert!(report["tools"].as_array().unwrap().len() > 3, "{report}");
    assert!(report["resources"].as_u64().unwrap() > 0, "{report}");
    assert!(report["prompts"].as_u64().unwrap() > 0, "{report}");
    let echo = &report["calls"][0];
    assert_eq!(echo["is_error"], false, "{echo}");
    assert!(
        echo["text"].as_str().unwrap().contains("through the proxy"),
        "{echo}"
    );
    assert_eq!(receipt(echo)["decision"], "act");
    // Progress from the upstream reaches the client under the client's own token.
    let long = &report["calls"][1];
    assert_eq!(long["is_error"], false, "{long}");
    assert_eq!(
        long["progress"],
        json!([[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]]),
        "{long}"
    );
    let rows = rows(dir.path());
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|row| row["verb"] == "read"), "{rows:?}");
    verify(dir.path());
}

#[test]
fn proxy_reads_back_pairs_and_survives_a_crashing_upstream() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "plan", "body": "ship it"}},
        {"tool": "update_note", "args": {"id": "n1", "title": "plan b"}},
        {"tool": "update_note", "args": {"id": "n1", "title": "!plan c"}},
        {"tool": "boom"},
        {"tool": "crash"},
        {"tool": "get_note", "args": {"id": "n1"}},
    ]});
    let server = py("notes_server.py");
    let python = python();
    let report = drive(
        dir.path(),
        &plan,
        &["--mode", "auto", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
    );
    let calls = report["calls"].as_array().unwrap();
    let levels: Vec<&Value> = calls.iter().map(|c| &receipt(c)["level"]).collect();
    assert_eq!(levels[0], "verified", "{}", calls[0]);
    assert_eq!(levels[1], "verified", "{}", calls[1]);
    assert_eq!(levels[2], "unverified", "{}", calls[2]);
    // The upstream's own error result comes back as it is, recorded as failed.
    assert_eq!(calls[3]["is_error"], true, "{}", calls[3]);
    assert!(levels[3].is_null());
    // A crash mid-call is reported, and the next call fails at once instead of hanging.
    for call in &calls[4..] {
        assert_eq!(call["is_error"], true, "{call}");
        assert!(
            call["text"].as_str().unwrap().contains("not running"),
            "{call}"
        );
        assert!(receipt(call)["seq"].as_u64().is_some());
    }
    verify(dir.path());
    // Five writes (an intent and an outcome each) and one read.
    assert_eq!(rows(dir.path()).len(), 11);
    // Read back through the upstream's get_note, with per-field evidence in the ledger.
    let checks = verifications(dir.path());
    for check in &checks[..3] {
        assert_eq!(check["method"], "read-back:mcp-pair", "{check}");
        assert_eq!(
            check["evidence"]["source"], "tools/call get_note",
            "{check}"
        );
    }
    assert_eq!(checks[1]["evidence"]["ids"]["id"], "n1", "{}", checks[1]);
    let field = &checks[2]["evidence"]["fields"][0];
    assert_eq!(
        (&field["field"], &field["want"], &field["ok"]),
        (&json!("title"), &json!("!plan c"), &json!(false)),
        "{field}"
    );
}

#[test]
fn proxy_block_mode_holds_unanswered_asks_without_calling_the_upstream() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "x", "body": "y"}},
        {"tool": "get_note", "args": {"id": "n1"}},
    ]});
    let server = py("notes_server.py");
    let python = python();
    let report = drive(
        dir.path(),
        &plan,
        &["--mode", "block", "--timeout", "1", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
    );
    let create = &report["calls"][0];
    assert_eq!(create["is_error"], true);
    assert!(
        create["text"].as_str().unwrap().contains("has not run"),
        "{create}"
    );
    assert_eq!(receipt(create)["decision"], "ask");
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap_or_default();
    assert!(!log.contains("create_note"), "{log}");
    assert!(log.contains("get_note"), "{log}");
}

#[test]
fn mcp_server_offers_six_tools_that_decide_ask_record_and_verify_and_none_approves() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = json!({"calls": [
        {"tool": "attest_decide", "args": {"tool": "send_email", "params": {"to": "x@example.com"}}},
        {"tool": "attest_record", "args": {"system": "crm", "verb": "update", "result": {"id": "7"}}},
        {"tool": "attest_verify"},
        {"tool": "attest_ledger", "args": {"limit": 5}},
        {"tool": "attest_confirm", "args": {"token": "t", "approve": true, "approver": "ann"}},
        {"tool": "attest_confirm_status", "args": {"token": "t"}},
    ]});
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let output = Command::new(python())
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir.path(),
            &["--ledger", "ledger.sqlite", "mcp-server"],
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 6, "{report}");
    assert!(tools.iter().any(|t| t == "attest_ask"), "{report}");
    assert!(!tools.iter().any(|t| t == "attest_confirm"), "{report}");
    let calls = report["calls"].as_array().unwrap();
    let decide: Value = serde_json::from_str(calls[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(decide["verb"], "send");
    let record: Value = serde_json::from_str(calls[1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (record["seq"].as_u64(), record["decision"].as_str()),
        (Some(1), Some("recorded"))
    );
    let verified: Value = serde_json::from_str(calls[2]["text"].as_str().unwrap()).unwrap();
    assert_eq!(verified["ok"], true);
    let listed: Value = serde_json::from_str(calls[3]["text"].as_str().unwrap()).unwrap();
    assert_eq!(listed["rows"].as_array().unwrap().len(), 1);
    // The agent cannot approve through this server: no such tool.
    assert!(
        calls[4]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no tool named"),
        "{}",
        calls[4]
    );
    // It may ask how its held call stands.
    assert_eq!(calls[5]["is_error"], true, "{}", calls[5]);
}

/// examples/README.md's latency measurement as written there (its `ran-by` names this
/// file), with 20 calls instead of 1000 and the debug binary: it prints one JSON line with
/// both distributions and what the proxy added.
#[test]
fn python_mcp_latency_example_runs() {
    let Some(server) = npm_server_and_python_client("server-everything") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(python())
        .arg(root().join("examples/python/mcp_latency.py"))
        .args(["--calls", "20", "--attest", env!("CARGO_BIN_EXE_attest")])
        .args(["--durability", "full", "--tool", "echo"])
        .args(["--server", &format!("node {} stdio", server.display())])
        .args(["--args", r#"{"message": "hi"}"#])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let report: Value = serde_json::from_str(text.lines().last().unwrap_or("")).unwrap();
    for side in ["direct", "proxied"] {
        assert!(report[side]["p50_ms"].as_f64().is_some(), "{text}");
    }
    assert!(report["added_p50_ms"].as_f64().is_some(), "{text}");
}

#[test]
fn python_mcp_client_example_runs() {
    let Some(server) = npm_server_and_python_client("server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().canonicalize().unwrap();
    let upstream = format!("node {} {}", server.display(), sandbox.display());
    let output = Command::new(python())
        .arg(root().join("examples/python/mcp_client.py"))
        .arg(&sandbox)
        .current_dir(dir.path())
        .env("ATTEST_BIN", env!("CARGO_BIN_EXE_attest"))
        .env("ATTEST_LEDGER", crate::test_ledger_at(dir.path()))
        .env("MCP_SERVER", upstream)
        .env_remove("ATTEST_POLICY")
        .output()
        .unwrap();
    let text = stdout(&output);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    // seq 1 is the write's intent.
    assert!(text.contains("write_file: ok seq=2"), "{text}");
    assert!(
        text.contains("read_text_file: ok seq=3 decision=act"),
        "{text}"
    );
    verify(dir.path());
}

#[test]
fn proxy_pending_call_runs_after_attest_confirm_and_resume() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = crate::test_ledger_at(dir.path());
    let ledger = ledger.as_str();
    let attest_bin = env!("CARGO_BIN_EXE_attest");
    let token_file = dir.path().join("ann.token");
    let token_file = token_file.to_str().unwrap();
    let added = crate::attest(
        dir.path(),
        &[
            "--ledger",
            ledger,
            "approvers",
            "add",
            "ann",
            "--token-file",
            token_file,
        ],
    );
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "held", "body": "until approved"}},
        {"tool": "attest_resume", "args": {"token": "{token}"}},
        {"run": [attest_bin, "--ledger", ledger, "confirm", "{id}", "approve", "--token-file", token_file]},
        {"tool": "attest_resume", "args": {"token": "{token}"}},
        {"tool": "attest_resume", "args": {"token": "{token}"}},
    ]});
    let server = py("notes_server.py");
    let python = python();
    let report = drive(
        dir.path(),
        &plan,
        &["--mode", "pending", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
    );
    assert!(report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "attest_resume"));
    let calls = report["calls"].as_array().unwrap();
    // Held: not run, with a token to resume it by, and nothing the agent could approve with.
    assert_eq!(calls[0]["is_error"], true, "{}", calls[0]);
    assert!(
        !calls[0].to_string().contains("attest confirm"),
        "{}",
        calls[0]
    );
    assert!(
        calls[0]["text"].as_str().unwrap().contains("holding"),
        "{}",
        calls[0]
    );
    // Resuming before anyone decided: still held.
    assert!(
        calls[1]["text"].as_str().unwrap().contains("holding"),
        "{}",
        calls[1]
    );
    assert_eq!(calls[2]["run"], 0, "{}", calls[2]);
    // Approved: the resume runs it, read back through get_note.
    assert_eq!(calls[3]["is_error"], false, "{}", calls[3]);
    assert_eq!(receipt(&calls[3])["level"], "verified", "{}", calls[3]);
    // A token is used once.
    assert_eq!(calls[4]["is_error"], true, "{}", calls[4]);
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert_eq!(log.matches("create_note").count(), 1, "{log}");
    verify(dir.path());
}

#[test]
fn a_call_the_client_cancels_is_recorded_as_failed_and_the_session_goes_on() {
    let Some(server) = npm_server_and_python_client("server-everything") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The client gives up on a 30-second operation after one second and sends
    // notifications/cancelled; the proxy records the call as failed (and sends the
    // cancellation on upstream, which this test cannot observe), and the session goes on.
    let plan = json!({"calls": [
        {"tool": "trigger-long-running-operation", "args": {"duration": 30, "steps": 30},
         "timeout": 1.0},
        {"tool": "echo", "args": {"message": "still here"}},
    ]});
    let report = drive(
        dir.path(),
        &plan,
        &[],
        &["node", server.to_str().unwrap(), "stdio"],
    );
    let calls = report["calls"].as_array().unwrap();
    assert!(calls[0]["error"].is_string(), "{}", calls[0]);
    assert_eq!(calls[1]["is_error"], false, "{}", calls[1]);
    assert!(calls[1]["text"].as_str().unwrap().contains("still here"));
    let executions: Vec<Value> = exported_entries(dir.path())
        .iter()
        .map(|entry| entry["execution"]["status"].clone())
        .collect();
    assert_eq!(executions, ["failed", "ok"]);
    verify(dir.path());
}

#[test]
fn a_call_cancelled_while_it_waits_for_a_person_cancels_its_request() {
    if !python_with("mcp")
        || crate::sqlite_only(
            "a_call_cancelled_while_it_waits_for_a_person_cancels_its_request",
            "it reads the approvals table in the SQLite file",
        )
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Block mode waits a minute for a person; the client gives up after one second
    // (notifications/cancelled). The request is marked cancelled, nothing reaches the
    // server, and the session goes on.
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "x", "body": "y"}, "timeout": 1.0},
        {"tool": "get_note", "args": {"id": "n1"}},
    ]});
    let server = py("notes_server.py");
    let python = python();
    let report = drive(
        dir.path(),
        &plan,
        &["--mode", "block", "--timeout", "60", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
    );
    let calls = report["calls"].as_array().unwrap();
    assert!(calls[0]["error"].is_string(), "{}", calls[0]);
    assert!(calls[1].get("error").is_none(), "{}", calls[1]);
    let status = |dir: &std::path::Path| -> String {
        let conn = rusqlite::Connection::open(dir.join("ledger.sqlite")).unwrap();
        conn.query_row("SELECT status FROM approvals", [], |row| row.get(0))
            .unwrap()
    };
    assert_eq!(status(dir.path()), "cancelled");
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap_or_default();
    assert!(!log.contains("create_note"), "{log}");
}

#[test]
fn an_approval_given_for_one_mcp_server_does_not_run_through_another() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ledger = crate::test_ledger_at(dir.path());
    let ledger = ledger.as_str();
    let token_file = dir.path().join("ann.token");
    let token_file = token_file.to_str().unwrap();
    let added = crate::attest(
        dir.path(),
        &[
            "--ledger",
            ledger,
            "approvers",
            "add",
            "ann",
            "--token-file",
            token_file,
        ],
    );
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let server = py("notes_server.py");
    let python = python();
    let upstream = [python.to_str().unwrap(), server.to_str().unwrap()];
    let attest_bin = env!("CARGO_BIN_EXE_attest");
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "held", "body": "until approved"}},
        {"run": [attest_bin, "--ledger", ledger, "confirm", "{id}", "approve", "--token-file", token_file]},
    ]});
    let report = drive(
        dir.path(),
        &plan,
        &["--mode", "pending", "--server", "notes"],
        &upstream,
    );
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[1]["run"], 0, "{}", calls[1]);
    let text = calls[0]["text"].as_str().unwrap();
    let start = text.find("atr_").unwrap();
    let token = &text[start..start + 68];
    // The same tool name on another server (another account, another deployment).
    let resume = json!({"calls": [{"tool": "attest_resume", "args": {"token": token}}]});
    let report = drive(
        dir.path(),
        &resume,
        &["--mode", "pending", "--server", "notes-prod"],
        &upstream,
    );
    let call = &report["calls"][0];
    assert_eq!(call["is_error"], true, "{call}");
    assert!(
        call["text"]
            .as_str()
            .unwrap()
            .contains("approved for server `notes`"),
        "{call}"
    );
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap_or_default();
    assert!(!log.contains("create_note"), "{log}");
    // On the server it was asked for, it runs.
    let report = drive(
        dir.path(),
        &resume,
        &["--mode", "pending", "--server", "notes"],
        &upstream,
    );
    assert_eq!(
        report["calls"][0]["is_error"], false,
        "{}",
        report["calls"][0]
    );
    verify(dir.path());
}

/// Issue 49: through `mcp-proxy`, the reference filesystem server's write tools cannot
/// reach the governor's own files (an agent's settings, MCP server lists, Attest's
/// configuration, the proxy's own policy under any name), whatever the policy says;
/// each refusal names the path and is recorded; a write elsewhere still acts.
#[test]
fn proxy_filesystem_tools_cannot_write_protected_paths() {
    let Some(server) = npm_server_and_python_client("server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for sub in [".claude", ".attest", ".vscode", ".github"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join(".vscode/settings.json"), "{}").unwrap();
    let policy = root.join("agent-rules.yml");
    std::fs::write(&policy, FS_POLICY).unwrap();
    let at = |path: &str| root.join(path).display().to_string();
    let protected: [(&str, Value); 8] = [
        (
            "write_file",
            json!({"path": at(".claude/settings.json"), "content": "pwned"}),
        ),
        (
            "write_file",
            json!({"path": at(".mcp.json"), "content": "pwned"}),
        ),
        (
            "write_file",
            json!({"path": at(".attest/config.yaml"), "content": "mode: shadow"}),
        ),
        (
            "write_file",
            json!({"path": at("agent-rules.yml"), "content": "version: 1"}),
        ),
        (
            "write_file",
            json!({"path": at("src/../.claude/settings.local.json"), "content": "pwned"}),
        ),
        (
            "edit_file",
            json!({"path": at(".vscode/settings.json"), "edits": [{"oldText": "{}", "newText": "{\"x\": 1}"}]}),
        ),
        (
            "move_file",
            json!({"source": at("notes.txt"), "destination": at(".github/hooks/attest.json")}),
        ),
        ("create_directory", json!({"path": at(".cursor")})),
    ];
    let mut calls =
        vec![json!({"tool": "write_file", "args": {"path": at("notes.txt"), "content": "ok"}})];
    calls.extend(
        protected
            .iter()
            .map(|(tool, args)| json!({"tool": tool, "args": args})),
    );
    let report = drive(
        &root,
        &json!({ "calls": calls }),
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--server",
            "filesystem",
        ],
        &["node", server.to_str().unwrap(), root.to_str().unwrap()],
    );
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["is_error"], false, "{}", calls[0]);
    assert_eq!(receipt(&calls[0])["decision"], "act");
    for ((tool, args), call) in protected.iter().zip(&calls[1..]) {
        assert_eq!(call["is_error"], true, "{tool} {args}: {call}");
        assert_eq!(receipt(call)["decision"], "refuse", "{tool} {args}: {call}");
        let text = call["text"].as_str().unwrap();
        assert!(text.contains("protected"), "{tool}: {text}");
    }
    assert!(!root.join(".claude/settings.json").exists());
    assert!(!root.join(".mcp.json").exists());
    assert!(!root.join(".attest/config.yaml").exists());
    assert!(!root.join(".cursor").exists());
    assert!(!root.join(".github/hooks/attest.json").exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".vscode/settings.json")).unwrap(),
        "{}"
    );
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), FS_POLICY);
    verify(&root);
}

//! Shadow mode on every door: a write the policy refuses runs through `attest gateway
//! --shadow`, `attest mcp-proxy --shadow` and `attest hook claude-code` under a
//! configuration saying `mode: shadow`; its rows say `act` (it ran) and carry the verdict
//! that was not enforced in `shadow`; verify holds; `attest digest` counts it by rule,
//! agent and system. The same call without shadow mode is refused and never reaches the
//! tool.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, start_gateway, start_vendor, Shared};
use crate::hook::answer as hook;
use crate::mcp::{drive, py, python_with};
use crate::{attest, expect_ok, exported_entries, python, stdout};

/// Refuses every create: the rule shadow mode must not enforce.
const POLICY: &str = "version: 1\npolicies:\n  - name: no-new-notes\n    match: {verb: create}\n    decision: refuse\n    reason: notes are frozen\n";

/// The rows of `dir`'s ledger that carry a shadow verdict, after checking that every
/// such row says `act`, was run, names `no-new-notes` as what would have refused it,
/// and that the chain verifies.
fn shadow_rows(dir: &Path) -> Vec<Value> {
    let verify = attest(dir, &["--ledger", "ledger.sqlite", "verify"]);
    expect_ok(&verify);
    let rows: Vec<Value> = exported_entries(dir)
        .into_iter()
        .filter(|row| row.get("shadow").is_some())
        .collect();
    for row in &rows {
        assert_eq!(row["decision"], "act", "{row}");
        assert_eq!(row["rules_fired"], json!(["shadow"]), "{row}");
        assert!(row.get("confirm").is_none(), "not an approval: {row}");
        assert_eq!(row["shadow"]["decision"], "refuse", "{row}");
        assert_eq!(
            row["shadow"]["rules_fired"],
            json!(["no-new-notes"]),
            "{row}"
        );
        assert_eq!(
            row["shadow"]["reasons"],
            json!(["notes are frozen"]),
            "{row}"
        );
        assert!(
            row["reasons"][0].as_str().unwrap().contains("shadow mode"),
            "{row}"
        );
    }
    rows
}

/// `attest digest --json`'s `shadow` over the last day.
fn digest_shadow(dir: &Path) -> Value {
    let out = expect_ok(&attest(
        dir,
        &[
            "--ledger",
            "ledger.sqlite",
            "digest",
            "--json",
            "--since",
            "24h",
        ],
    ));
    let digest: Value = serde_json::from_str(&out).unwrap();
    digest["shadow"].clone()
}

/// The digest counts one would-have-refused call, under the rule, `agent` and `system`.
fn assert_digest_counts_one(dir: &Path, agent: &str, system: &str) {
    let shadow = digest_shadow(dir);
    assert_eq!(shadow["would_refuse"], 1, "{shadow:#}");
    assert_eq!(shadow["would_ask"], 0, "{shadow:#}");
    assert_eq!(shadow["by_rule"][0]["rule"], "no-new-notes", "{shadow:#}");
    assert_eq!(shadow["by_rule"][0]["would_refuse"], 1, "{shadow:#}");
    assert_eq!(shadow["by_agent"][0]["agent"], agent, "{shadow:#}");
    assert_eq!(shadow["by_system"][0]["system"], system, "{shadow:#}");
    // The calls behind the count: the outcome row's seq.
    let seq = shadow["by_rule"][0]["seqs"][0].as_u64().unwrap();
    let rows = exported_entries(dir);
    let row = rows.iter().find(|r| r["seq"] == seq).unwrap();
    assert_eq!(row["execution"]["status"], "ok", "{row}");
    // Never shown as a refusal: the text digest says what would have happened.
    let text = stdout(&attest(
        dir,
        &["--ledger", "ledger.sqlite", "digest", "--since", "24h"],
    ));
    assert!(text.contains("1 calls policy would have refused"), "{text}");
}

#[test]
fn through_the_gateway_a_refused_write_runs_in_shadow_mode_and_is_refused_without() {
    if curl_missing() {
        return;
    }
    for shadow in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
        let vendor = Shared::default();
        let upstream = start_vendor(Arc::clone(&vendor));
        let extra: &[&str] = if shadow { &["--shadow"] } else { &[] };
        let (gateway, address) = start_gateway(dir.path(), &upstream, extra);
        let (status, headers, body) = curl(
            "POST",
            &format!("{address}/v1/notes"),
            Some(&json!({"title": "plan", "body": "ship it"})),
            &["-H", "X-Attest-Agent: planner"],
        );
        drop(gateway);
        let reached = vendor
            .lock()
            .unwrap()
            .hits
            .iter()
            .any(|h| h == "POST /v1/notes");
        if !shadow {
            assert_eq!(status, 403, "{body}");
            assert!(!reached, "a refused write reached the vendor");
            assert!(shadow_rows(dir.path()).is_empty());
            assert_eq!(digest_shadow(dir.path())["would_refuse"], 0);
            continue;
        }
        assert_eq!(status, 201, "{body}");
        assert_eq!(headers["x-attest-decision"], "act", "{headers:?}");
        assert!(reached, "the shadow-mode write did not reach the vendor");
        // The intent and the outcome both carry the verdict; the outcome was read back.
        let rows = shadow_rows(dir.path());
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0]["execution"]["status"], "intent");
        assert_eq!(rows[1]["verification"]["level"], "verified", "{}", rows[1]);
        let system = rows[1]["system"].as_str().unwrap().to_owned();
        assert_digest_counts_one(dir.path(), "planner", &system);
    }
}

#[test]
fn through_the_mcp_proxy_a_refused_write_runs_in_shadow_mode_and_is_refused_without() {
    if !python_with("mcp") {
        return;
    }
    for shadow in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
        let policy = dir.path().join("policy.yaml");
        let plan = json!({"calls": [
            {"tool": "create_note", "args": {"title": "plan", "body": "ship it"}},
        ]});
        let server = py("notes_server.py");
        let python = python();
        let mut args = vec!["--policy", policy.to_str().unwrap(), "--server", "notes"];
        args.extend(["--agent", "note-bot"]);
        if shadow {
            args.push("--shadow");
        }
        let report = drive(
            dir.path(),
            &plan,
            &args,
            &[python.to_str().unwrap(), server.to_str().unwrap()],
        );
        let call = &report["calls"][0];
        let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap_or_default();
        if !shadow {
            assert_eq!(call["is_error"], true, "{call}");
            assert!(
                !log.contains("create_note"),
                "a refused call reached the server"
            );
            assert!(shadow_rows(dir.path()).is_empty());
            continue;
        }
        assert_ne!(call["is_error"], true, "{call}");
        assert_eq!(call["meta"]["_attest"]["decision"], "act", "{call}");
        assert!(log.contains("create_note"), "{log}");
        let rows = shadow_rows(dir.path());
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[1]["verification"]["level"], "verified", "{}", rows[1]);
        assert_digest_counts_one(dir.path(), "note-bot", "notes");
    }
}

#[test]
fn through_the_claude_code_hook_mode_shadow_in_the_configuration_lets_a_refused_call_run() {
    for shadow in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("attest.yaml"),
            POLICY.replace("{verb: create}", "{action: git.delete}"),
        )
        .unwrap();
        if shadow {
            std::fs::create_dir_all(dir.path().join(".attest")).unwrap();
            std::fs::write(dir.path().join(".attest/config.yaml"), "mode: shadow\n").unwrap();
        }
        let pre = json!({
            "session_id": "s-1",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "git push --force origin main"},
            "tool_use_id": "toolu_1",
        });
        let answer = hook(dir.path(), &pre);
        let out = &answer["hookSpecificOutput"];
        let reason = out["permissionDecisionReason"].as_str().unwrap();
        if !shadow {
            assert_eq!(out["permissionDecision"], "deny", "{answer}");
            let rows = exported_entries(dir.path());
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0]["decision"], "refuse");
            continue;
        }
        assert_eq!(out["permissionDecision"], "allow", "{answer}");
        assert!(
            reason.contains("shadow mode") && reason.contains("notes are frozen"),
            "{reason}"
        );
        // The shadow verdict is recorded before the call runs, with its intent (issue 48);
        // the after-event closes it.
        let intent = exported_entries(dir.path());
        assert_eq!(intent.len(), 1, "{intent:?}");
        assert_eq!(intent[0]["execution"]["status"], "intent", "{}", intent[0]);
        assert_eq!(intent[0]["shadow"]["decision"], "refuse", "{}", intent[0]);
        let mut post = pre.clone();
        post["hook_event_name"] = json!("PostToolUse");
        post["tool_response"] = json!({"stdout": "forced update", "exit_code": 0});
        assert_eq!(hook(dir.path(), &post), json!({}));
        let rows = shadow_rows(dir.path());
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[1]["execution"]["status"], "ok", "{}", rows[1]);
        assert_digest_counts_one(dir.path(), "claude-code", "git");
    }
}

//! Issue 48: every attempt a coding agent's hook sees leaves a row before anything runs.
//! A write that acts is an intent, closed by the agent's after-event (or listed by
//! `attest intents` when none comes); an ask put to the agent's prompt is an intent the
//! after-event closes as that prompt's approval, naming nobody; an ask nobody can answer
//! is recorded as Attest's policy denying it.

use std::path::Path;

use serde_json::{json, Value};

use crate::hook::hook_answer;
use crate::hook_agents::{claude, codex, copilot, cursor, gemini, verdict};
use crate::{attest, expect_ok, exported_entries};

/// The open intents `attest intents --json` lists.
fn open_intents(dir: &Path) -> Vec<Value> {
    let listed = attest(dir, &["--ledger", "ledger.sqlite", "intents", "--json"]);
    serde_json::from_str(&expect_ok(&listed)).unwrap()
}

/// A source-file write that policy lets act, as each agent sends it before and after
/// the call.
fn writes() -> Vec<(&'static str, Value, Value)> {
    let file = "/home/dev/app/src/a.ts";
    let mut claude_pre = claude("Write", json!({"file_path": file, "content": "x"}));
    let mut claude_post = claude_pre.clone();
    claude_post["hook_event_name"] = json!("PostToolUse");
    claude_post["tool_response"] = json!({"filePath": file});
    claude_pre["tool_use_id"] = json!("toolu_w1");
    claude_post["tool_use_id"] = json!("toolu_w1");
    let codex_pre = codex("Bash", json!({"command": "mkdir -p build/out"}));
    let mut codex_post = codex_pre.clone();
    codex_post["hook_event_name"] = json!("PostToolUse");
    codex_post["tool_response"] = json!("");
    let gemini_pre = gemini("write_file", json!({"file_path": file, "content": "x"}));
    let mut gemini_post = gemini_pre.clone();
    gemini_post["hook_event_name"] = json!("AfterTool");
    gemini_post["tool_response"] = json!({"llmContent": "Wrote 1 line", "returnDisplay": "ok"});
    let cursor_fields = json!({
        "tool_name": "Write", "tool_input": {"file_path": file, "contents": "x"},
        "tool_use_id": "w1", "cwd": "/home/dev/app",
    });
    let cursor_pre = cursor("preToolUse", cursor_fields.clone());
    let mut cursor_post = cursor("postToolUse", cursor_fields);
    cursor_post["tool_output"] = json!("{\"ok\": true}");
    let copilot_pre = copilot("create", json!({"path": file, "file_text": "x"}));
    let mut copilot_post = copilot_pre.clone();
    copilot_post["toolResult"] = json!({"resultType": "success", "textResultForLlm": "Created"});
    vec![
        ("claude-code", claude_pre, claude_post),
        ("codex", codex_pre, codex_post),
        ("gemini", gemini_pre, gemini_post),
        ("cursor", cursor_pre, cursor_post),
        ("copilot", copilot_pre, copilot_post),
    ]
}

/// Before a write that acts runs, its intent is in the ledger; the after-event closes it
/// (same action id, `ok`), so `attest intents` lists nothing open.
#[test]
fn a_write_that_acts_is_recorded_as_an_intent_before_it_runs_on_every_agent() {
    for (agent, pre, post) in writes() {
        let dir = tempfile::tempdir().unwrap();
        let answer = hook_answer(dir.path(), &[agent], &pre, &[]);
        assert!(
            ["allow", "none"].contains(&verdict(agent, &answer).as_str()),
            "{agent}: {answer}"
        );
        let rows = exported_entries(dir.path());
        assert_eq!(rows.len(), 1, "{agent}: {rows:?}");
        assert_eq!(rows[0]["execution"]["status"], "intent", "{agent}");
        assert_eq!(rows[0]["decision"], "act", "{agent}");
        assert_eq!(open_intents(dir.path()).len(), 1, "{agent}");

        hook_answer(dir.path(), &[agent], &post, &[]);
        let rows = exported_entries(dir.path());
        assert_eq!(rows.len(), 2, "{agent}: {rows:?}");
        assert_eq!(rows[1]["execution"]["status"], "ok", "{agent}: {}", rows[1]);
        assert_eq!(rows[1]["action_id"], rows[0]["action_id"], "{agent}");
        assert!(open_intents(dir.path()).is_empty(), "{agent}");
    }
}

/// A write whose after-event never comes (the agent was killed) stays an open intent,
/// and `attest intents resolve` reconciles it like any other.
#[test]
fn a_write_whose_after_event_never_comes_is_an_open_intent_to_reconcile() {
    let dir = tempfile::tempdir().unwrap();
    let (_, pre, _) = writes().remove(0);
    hook_answer(dir.path(), &["claude-code"], &pre, &[]);
    let open = open_intents(dir.path());
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(
        (open[0]["system"].as_str(), open[0]["verb"].as_str()),
        (Some("files"), Some("write"))
    );
    let seq = open[0]["seq"].as_u64().unwrap().to_string();
    let added = attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "approvers",
            "add",
            "ann",
            "--token-file",
            "ann.token",
        ],
    );
    expect_ok(&added);
    let resolved = attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "intents",
            "resolve",
            &seq,
            "--not-run",
            "--token-file",
            "ann.token",
        ],
    );
    expect_ok(&resolved);
    assert!(open_intents(dir.path()).is_empty());
}

/// An after-event for another call than the one intended (same id kept, other params)
/// does not close the intent: the intent stays open, and the call reported is recorded
/// apart.
#[test]
fn an_after_event_for_another_call_does_not_close_the_intent() {
    let dir = tempfile::tempdir().unwrap();
    let (_, pre, mut post) = writes().remove(0);
    hook_answer(dir.path(), &["claude-code"], &pre, &[]);
    post["tool_input"]["content"] = json!("something else");
    hook_answer(dir.path(), &["claude-code"], &post, &[]);
    assert_eq!(open_intents(dir.path()).len(), 1);
}

/// An ask put to Claude Code's prompt is recorded as an intent when it is asked; the
/// after-event closes it as the prompt's approval, naming nobody. An ask the prompt
/// declined (no after-event) stays an open intent.
#[test]
fn an_ask_put_to_the_agents_prompt_is_recorded_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let push = claude("Bash", json!({"command": "git push origin main"}));
    let answer = hook_answer(dir.path(), &["claude-code"], &push, &[]);
    assert_eq!(verdict("claude-code", &answer), "ask", "{answer}");
    let rows = exported_entries(dir.path());
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["decision"], "ask");
    assert_eq!(rows[0]["execution"]["status"], "intent");
    assert!(
        rows[0].get("confirm").is_none(),
        "not approved yet: {}",
        rows[0]
    );
    let text = rows[0]["reasons"].to_string();
    assert!(text.contains("claude-code-prompt"), "{text}");

    let mut post = push.clone();
    post["hook_event_name"] = json!("PostToolUse");
    post["tool_response"] = json!({"stdout": "", "stderr": "To origin\n"});
    hook_answer(dir.path(), &["claude-code"], &post, &[]);
    let rows = exported_entries(dir.path());
    assert_eq!(rows.len(), 2, "{rows:?}");
    let closed = &rows[1];
    assert_eq!(closed["action_id"], rows[0]["action_id"]);
    assert_eq!(closed["execution"]["status"], "ok");
    assert_eq!(closed["confirm"]["outcome"], "approved", "{closed}");
    assert_eq!(
        closed["confirm"]["channel"], "claude-code-prompt",
        "{closed}"
    );
    assert!(closed["confirm"].get("approver").is_none(), "{closed}");
    assert!(open_intents(dir.path()).is_empty());

    // Declined at the prompt: no after-event, the intent stays open.
    let force = claude("Bash", json!({"command": "git push origin release"}));
    hook_answer(dir.path(), &["claude-code"], &force, &[]);
    assert_eq!(open_intents(dir.path()).len(), 1);
}

/// An ask on an agent that cannot ask (Gemini CLI, Codex, Copilot CLI) is denied and
/// recorded at once, decided by Attest's policy (channel `attest-policy`), never as a
/// person's answer.
#[test]
fn an_ask_the_agent_cannot_put_is_recorded_as_attest_policys_deny() {
    let push = json!({"command": "git push origin main"});
    for (agent, event) in [
        ("gemini", gemini("run_shell_command", push.clone())),
        ("codex", codex("Bash", push.clone())),
        ("copilot", copilot("bash", push.clone())),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let answer = hook_answer(dir.path(), &[agent], &event, &[]);
        assert_eq!(verdict(agent, &answer), "deny", "{agent}: {answer}");
        let rows = exported_entries(dir.path());
        assert_eq!(rows.len(), 1, "{agent}: {rows:?}");
        assert_eq!(rows[0]["decision"], "ask", "{agent}");
        assert_eq!(rows[0]["execution"]["status"], "not_run", "{agent}");
        assert_eq!(rows[0]["confirm"]["outcome"], "rejected", "{agent}");
        assert_eq!(rows[0]["confirm"]["channel"], "attest-policy", "{agent}");
        assert!(rows[0]["confirm"].get("approver").is_none(), "{agent}");
    }
}

//! What happened earlier in the run (issue 51), through real processes sharing one
//! ledger: one `attest hook claude-code` process reads `secrets/x` in a session (the
//! run), and another, later, sends outside the company in the same session and is
//! asked about; the same send in another session acts. On a SQLite file and on a
//! PostgreSQL database.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::hook::with_stdin;
use crate::{pg_db, stderr, stdout};

const POLICY: &str = r#"version: 1
labels:
  sensitive: {paths: ["*/secrets/*", "secrets/*"]}
policies:
  - name: no-sends-after-sensitive-reads
    match: {verb: send}
    when: "run.touched('sensitive')"
    decision: ask
    reason: this run read a sensitive file
  - name: everything-else
    match: {}
    decision: act
"#;

/// One hook process on `ledger` in `dir`, answering `event`.
fn hook_on(dir: &Path, ledger: &str, event: &Value) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_attest"));
    command
        .args(["--ledger", ledger, "hook", "claude-code"])
        .current_dir(dir)
        .env_clear()
        .env("ATTEST_STATE_DIR", dir.join(".hook-state"));
    let output: Output = with_stdin(command, &event.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

fn pre(session: &str, tool: &str, input: Value, id: &str) -> Value {
    json!({
        "session_id": session,
        "cwd": "/home/dev/app",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": id,
    })
}

fn decision(answer: &Value) -> String {
    answer["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// The data-flow rule on `ledger`: each call its own process.
fn data_flow(dir: &Path, ledger: &str) {
    std::fs::write(dir.join("attest.yaml"), POLICY).unwrap();
    // Each send its own message: an identical call while an earlier one's intent is open
    // (no after-event is sent here) is the exactly-once rule's to ask about, not history's.
    let send = |session: &str, id: &str| {
        pre(
            session,
            "mcp__gmail__send_email",
            json!({"to": "someone@rival.io", "subject": format!("hi {id}"), "body": "hello"}),
            id,
        )
    };
    // Before any read, a send in the run acts.
    let before = hook_on(dir, ledger, &send("run-a", "toolu_0"));
    assert_eq!(decision(&before), "allow", "{before}");
    // Process 1 reads secrets/x in run A.
    let read = pre(
        "run-a",
        "Read",
        json!({"file_path": "/home/dev/app/secrets/x"}),
        "toolu_1",
    );
    let answer = hook_on(dir, ledger, &read);
    assert_eq!(decision(&answer), "allow", "{answer}");
    // Process 2, in the same run, sends outside: asked.
    let answer = hook_on(dir, ledger, &send("run-a", "toolu_2"));
    assert_eq!(decision(&answer), "ask", "{answer}");
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or("");
    assert!(
        reason.contains("this run read a sensitive file") && reason.contains("held"),
        "{reason}"
    );
    // The same send in another run acts.
    let answer = hook_on(dir, ledger, &send("run-b", "toolu_3"));
    assert_eq!(decision(&answer), "allow", "{answer}");
}

#[test]
fn a_send_after_a_sensitive_read_in_the_same_run_asks_across_processes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.sqlite").display().to_string();
    data_flow(dir.path(), &ledger);
}

#[test]
fn a_send_after_a_sensitive_read_in_the_same_run_asks_across_processes_on_postgres() {
    let Some(db) =
        pg_db("a_send_after_a_sensitive_read_in_the_same_run_asks_across_processes_on_postgres")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    data_flow(dir.path(), &db.url);
}

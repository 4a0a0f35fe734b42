//! `attest hook claude-code`: recorded Claude Code hook events on stdin, the decision JSON
//! on stdout, and the rows the events leave.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::{exported_entries, stderr, stdout};

/// Runs the hook in `dir` (ledger `ledger.sqlite`) with `event` on stdin.
pub(crate) fn hook(dir: &Path, event: &str) -> Output {
    run_hook(dir, &["claude-code"], event, &[])
}

/// Runs `attest --ledger ledger.sqlite hook ARGS` in `dir` with `event` on stdin and
/// only `env` set.
pub(crate) fn run_hook(dir: &Path, args: &[&str], event: &str, env: &[(&str, &str)]) -> Output {
    let mut all = vec!["--ledger", "ledger.sqlite", "hook"];
    all.extend_from_slice(args);
    let mut command = Command::new(env!("CARGO_BIN_EXE_attest"));
    command
        .args(crate::store_args(dir, &all))
        .current_dir(dir)
        .env_clear()
        // The per-user state directory (holds and their key), unless a test names one.
        .env("ATTEST_STATE_DIR", dir.join(".hook-state"))
        .envs(env.iter().copied());
    with_stdin(command, event)
}

/// Runs `command` with `input` on its stdin. A hook may stop reading an oversized event:
/// a closed pipe is the hook refusing to read more, and its answer says why.
pub(crate) fn with_stdin(mut command: Command, input: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

/// The hook's answer as JSON, after checking it exited 0 (agents read JSON only then).
pub(crate) fn hook_answer(dir: &Path, args: &[&str], event: &Value, env: &[(&str, &str)]) -> Value {
    let output = run_hook(dir, args, &event.to_string(), env);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

/// The answer JSON, after checking the hook exited 0 (Claude Code reads JSON only then).
pub(crate) fn answer(dir: &Path, event: &Value) -> Value {
    let output = hook(dir, &event.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

/// A `PreToolUse` event as Claude Code sends it.
fn pre(tool: &str, input: Value, id: &str) -> Value {
    json!({
        "session_id": "0f2c9a4e-session",
        "transcript_path": "/home/dev/.claude/projects/app/0f2c9a4e.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": id,
    })
}

/// The `PostToolUse` event for `pre`, with the tool's response.
fn post(pre: &Value, response: Value) -> Value {
    let mut event = pre.clone();
    event["hook_event_name"] = json!("PostToolUse");
    event["tool_response"] = response;
    event
}

fn decision(answer: &Value) -> (&str, &str) {
    let out = &answer["hookSpecificOutput"];
    assert_eq!(out["hookEventName"], "PreToolUse", "{answer}");
    (
        out["permissionDecision"].as_str().unwrap(),
        out["permissionDecisionReason"].as_str().unwrap(),
    )
}

#[test]
fn reads_and_source_edits_are_allowed_and_recorded_after_they_run() {
    let dir = tempfile::tempdir().unwrap();
    let status = pre(
        "Bash",
        json!({"command": "git status", "description": "status"}),
        "toolu_01",
    );
    assert_eq!(decision(&answer(dir.path(), &status)).0, "allow");
    // PreToolUse writes nothing for a call that acts: its row comes with the outcome.
    assert!(!dir.path().join("ledger.sqlite").exists() || exported_entries(dir.path()).is_empty());
    let done = post(
        &status,
        json!({"stdout": "nothing to commit", "stderr": "", "interrupted": false, "isImage": false}),
    );
    assert_eq!(answer(dir.path(), &done), json!({}));

    let edit = pre(
        "Edit",
        json!({"file_path": "/home/dev/app/src/main.rs", "old_string": "a", "new_string": "b"}),
        "toolu_02",
    );
    assert_eq!(decision(&answer(dir.path(), &edit)).0, "allow");
    answer(
        dir.path(),
        &post(&edit, json!({"filePath": "/home/dev/app/src/main.rs"})),
    );

    let entries = exported_entries(dir.path());
    let rows: Vec<(&str, &str, &str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["system"].as_str().unwrap(),
                e["verb"].as_str().unwrap(),
                e["decision"].as_str().unwrap(),
                e["execution"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("git", "read", "act", "ok"),
            ("files", "write", "act", "intent"),
            ("files", "write", "act", "ok"),
        ]
    );
    assert!(entries.iter().all(|e| e["agent"] == "claude-code"));
    assert!(entries.iter().all(|e| e["run_id"] == "0f2c9a4e-session"));
    // The command and the file's content are fingerprints, never text in the ledger.
    let text = serde_json::to_string(&entries).unwrap();
    assert!(
        !text.contains("nothing to commit") && !text.contains("new_string"),
        "{text}"
    );
}

#[test]
fn risky_commands_ask_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (i, command) in [
        "git push origin main",
        "rm -rf build",
        "gh pr merge 42 --squash",
        "curl -X POST https://hooks.slack.com/services/T000/B000/XXXX -d '{\"text\":\"hi\"}'",
        "./deploy.sh production",
    ]
    .into_iter()
    .enumerate()
    {
        let event = pre("Bash", json!({"command": command}), &format!("toolu_{i}"));
        let answer = answer(dir.path(), &event);
        let (verdict, reason) = decision(&answer);
        assert_eq!(verdict, "ask", "{command}: {answer}");
        assert!(reason.starts_with("Attest: "), "{reason}");
    }
    // An edit to the agent's own settings is refused (issue 49), naming the path; a
    // write to source code is not.
    let settings = pre(
        "Write",
        json!({"file_path": "/home/dev/app/.claude/settings.json", "content": "{}"}),
        "toolu_9",
    );
    let refused = answer(dir.path(), &settings);
    let (verdict, reason) = decision(&refused);
    assert_eq!(verdict, "deny");
    assert!(
        reason.contains("/home/dev/app/.claude/settings.json"),
        "{reason}"
    );
    let mcp = pre(
        "mcp__github__create_issue",
        json!({"title": "x"}),
        "toolu_10",
    );
    let answer = answer(dir.path(), &mcp);
    let (verdict, reason) = decision(&answer);
    assert_eq!(verdict, "ask");
    assert!(reason.contains("github.create"), "{reason}");
}

#[test]
fn an_asked_call_that_ran_is_recorded_as_decided_at_the_prompt_by_nobody_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let push = pre(
        "Bash",
        json!({"command": "git push origin main"}),
        "toolu_1",
    );
    assert_eq!(decision(&answer(dir.path(), &push)).0, "ask");
    answer(
        dir.path(),
        &post(&push, json!({"stdout": "", "stderr": "To origin\n"})),
    );
    let entries = exported_entries(dir.path());
    let outcome = entries.last().unwrap();
    assert_eq!(outcome["decision"], "ask");
    assert_eq!(outcome["execution"]["status"], "ok");
    // The agent's prompt decided; no name stands in for a person nobody identified.
    assert!(outcome["confirm"].get("approver").is_none(), "{outcome}");
    assert_eq!(outcome["confirm"]["outcome"], "approved", "{outcome}");
    assert_eq!(
        outcome["confirm"]["channel"], "claude-code-prompt",
        "{outcome}"
    );
    assert!(
        outcome["confirm"]["note"]
            .as_str()
            .unwrap()
            .contains("nobody was authenticated"),
        "{outcome}"
    );
}

#[test]
fn a_refused_call_is_denied_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("attest.yaml"),
        "version: 1\npolicies:\n  - name: no-force-push\n    match:\n      action: git.delete\n    decision: refuse\n    reason: history is never rewritten\n",
    )
    .unwrap();
    let push = pre(
        "Bash",
        json!({"command": "git push --force origin main"}),
        "toolu_1",
    );
    let answer = answer(dir.path(), &push);
    let (verdict, reason) = decision(&answer);
    assert_eq!(verdict, "deny");
    assert!(reason.contains("history is never rewritten"), "{reason}");
    let entries = exported_entries(dir.path());
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["decision"], "refuse");
    assert_eq!(
        (entries[0]["system"].as_str(), entries[0]["verb"].as_str()),
        (Some("git"), Some("delete"))
    );
}

#[test]
fn what_cannot_be_decided_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "not json", "{\"tool_name\": \"Bash\"}", "[1,2]"] {
        let output = hook(dir.path(), bad);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let answer: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
        assert_eq!(decision(&answer).0, "deny", "{bad}: {answer}");
    }
    // A policy that does not load denies too, naming the file.
    std::fs::write(
        dir.path().join("attest.yaml"),
        "version: 1\npolicies: [{decision: maybe}]\n",
    )
    .unwrap();
    let event = pre("Bash", json!({"command": "ls"}), "toolu_1");
    let answer = answer(dir.path(), &event);
    let (verdict, reason) = decision(&answer);
    assert_eq!(verdict, "deny");
    assert!(reason.contains("attest.yaml"), "{reason}");
    // After the call ran, a record that cannot be written is said to Claude (`block`).
    let done = post(&event, json!({"stdout": ""}));
    let answer = self::answer(dir.path(), &done);
    assert_eq!(answer["decision"], "block", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .unwrap()
            .contains("could not record"),
        "{answer}"
    );
    // Events the hook has nothing to say about get an empty answer.
    let other = json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"});
    std::fs::remove_file(dir.path().join("attest.yaml")).unwrap();
    assert_eq!(self::answer(dir.path(), &other), json!({}));
}

/// Each command's decision (`allow`, `ask`, `deny`) as Claude Code's `Bash`, by the
/// hook in `dir`.
fn bash_decisions(dir: &Path, commands: &[&str], expected: &str) {
    for (i, command) in commands.iter().enumerate() {
        let event = pre("Bash", json!({"command": command}), &format!("toolu_{i}"));
        let answer = answer(dir, &event);
        assert_eq!(decision(&answer).0, expected, "{command}: {answer}");
    }
}

#[test]
fn a_command_line_is_judged_by_its_riskiest_reading() {
    let dir = tempfile::tempdir().unwrap();
    // Runners, settings that run a command, and read programs that write: each asks.
    bash_decisions(
        dir.path(),
        &[
            "npx rimraf .git",
            "npm exec rimraf .git",
            "pnpm dlx rimraf .git",
            "yarn dlx rimraf .git",
            "bunx rimraf .git",
            "git submodule foreach 'rm -rf .'",
            "git bisect run rm -rf .",
            "find . -exec rm -rf {} +",
            "git -c core.fsmonitor='rm -f x' status",
            "git -c alias.st='!rm -rf .' st",
            "GIT_SSH_COMMAND='rm -rf x' git fetch",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=sh git log",
            "LD_PRELOAD=./x.so ls",
            "env PAGER='rm -rf x' git log",
            "export EDITOR=evil; git commit",
            "awk 'BEGIN{system(\"rm -rf x\")}'",
        ],
        "ask",
    );
    // A read program's writing option that writes a protected file is refused, as `> F` is.
    bash_decisions(
        dir.path(),
        &[
            "sort -o .claude/settings.json in.txt",
            "uniq in.txt .mcp.json",
            "sed 's/x/y/w .claude/settings.json' in.txt",
            "awk '{ print > \".mcp.json\" }' in.txt",
            "find . -fprint .git/hooks/pre-commit",
            "git config core.hooksPath .hooks",
        ],
        "deny",
    );
    // What they run or write, when harmless, is allowed as before.
    bash_decisions(
        dir.path(),
        &[
            "find . -name '*.rs' -exec grep -n TODO {} +",
            "timeout 10 git status",
            "sort -o sorted.txt in.txt",
            "git -c color.ui=always log --oneline",
        ],
        "allow",
    );
}

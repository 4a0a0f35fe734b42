//! `attest hook <agent>` for each coding agent: the JSON each agent's documentation shows
//! for a shell command, a file write, a file read, an MCP tool call and a web fetch, and
//! the answer in that agent's shape; input that is not the agent's is its deny.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;

use serde_json::{json, Value};

use crate::hook::{hook_answer, run_hook, with_stdin};
use crate::{exported_entries, outcome_entries, stderr, stdout};

/// What one answer says, in Attest's words: `allow`, `ask`, `deny`, or `none` (the
/// agent goes on as it would without the hook).
pub(crate) fn verdict(agent: &str, answer: &Value) -> String {
    let word = match agent {
        "claude-code" => answer["hookSpecificOutput"]["permissionDecision"].as_str(),
        "codex" | "copilot" => {
            let codex = answer["hookSpecificOutput"]["permissionDecision"].as_str();
            codex.or(answer["permissionDecision"].as_str())
        }
        "gemini" => answer["decision"].as_str(),
        "cursor" => answer["permission"].as_str(),
        _ => unreachable!(),
    };
    word.unwrap_or("none").to_owned()
}

/// The reason an answer gives the model.
fn reason(answer: &Value) -> String {
    [
        &answer["hookSpecificOutput"]["permissionDecisionReason"],
        &answer["permissionDecisionReason"],
        &answer["reason"],
        &answer["agent_message"],
    ]
    .iter()
    .find_map(|value| value.as_str())
    .unwrap_or_default()
    .to_owned()
}

fn answer(dir: &Path, agent: &str, event: &Value) -> Value {
    hook_answer(dir, &[agent], event, &[])
}

/// Claude Code's `PreToolUse` input (code.claude.com/docs/en/hooks).
pub(crate) fn claude(tool: &str, input: Value) -> Value {
    json!({
        "session_id": "abc123",
        "transcript_path": "/home/dev/.claude/projects/app/abc123.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "toolu_01ABC123",
    })
}

/// Codex's `PreToolUse` input (developers.openai.com/codex/hooks).
pub(crate) fn codex(tool: &str, input: Value) -> Value {
    json!({
        "session_id": "019a-codex-session",
        "transcript_path": null,
        "cwd": "/home/dev/app",
        "hook_event_name": "PreToolUse",
        "model": "gpt-5-codex",
        "turn_id": "turn-1",
        "tool_name": tool,
        "tool_use_id": "call_1",
        "tool_input": input,
    })
}

/// Gemini CLI's `BeforeTool` input (geminicli.com/docs/hooks/reference).
pub(crate) fn gemini(tool: &str, input: Value) -> Value {
    json!({
        "session_id": "gemini-session",
        "transcript_path": "/home/dev/.gemini/tmp/chats/session.json",
        "cwd": "/home/dev/app",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-01T20:00:00.000Z",
        "tool_name": tool,
        "tool_input": input,
    })
}

/// Cursor's common input fields with an event's own (cursor.com/docs/agent/hooks).
pub(crate) fn cursor(event: &str, fields: Value) -> Value {
    let mut value = json!({
        "hook_event_name": event,
        "conversation_id": "conv-123",
        "generation_id": "gen-456",
        "workspace_roots": ["/home/dev/app"],
    });
    for (key, field) in fields.as_object().unwrap() {
        value[key] = field.clone();
    }
    value
}

/// Cursor's generic tool event (`preToolUse`, `postToolUse`, `postToolUseFailure`):
/// the common fields, the tool and its input as an object, and the event's own fields
/// (cursor.com/docs/hooks).
fn cursor_tool(event: &str, tool: &str, input: Value, fields: Value) -> Value {
    let mut value = cursor(
        event,
        json!({
            "tool_name": tool,
            "tool_input": input,
            "tool_use_id": "abc123",
            "cwd": "/home/dev/app",
            "model": "claude-opus-4-7-thinking-max",
            "cursor_version": "2.4.1",
            "user_email": null,
            "transcript_path": null,
        }),
    );
    for (key, field) in fields.as_object().unwrap() {
        value[key] = field.clone();
    }
    value
}

/// Copilot CLI's `preToolUse` input: `toolArgs` is a JSON text (docs.github.com, CLI
/// hooks reference).
pub(crate) fn copilot(tool: &str, args: Value) -> Value {
    json!({
        "timestamp": 1_764_619_200_000_u64,
        "cwd": "/home/dev/app",
        "toolName": tool,
        "toolArgs": args.to_string(),
    })
}

#[test]
fn every_agent_gets_the_same_decisions_in_its_own_shape() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = json!({"owner": "acme", "repo": "app", "title": "Flaky test"});
    // (agent, what, event, Attest's ruling in the agent's words)
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "claude-code",
            "shell read",
            claude(
                "Bash",
                json!({"command": "git status", "description": "status"}),
            ),
            "allow",
        ),
        (
            "claude-code",
            "shell write",
            claude("Bash", json!({"command": "git push origin main"})),
            "ask",
        ),
        (
            "claude-code",
            "file write",
            claude(
                "Write",
                json!({"file_path": "/home/dev/app/src/a.ts", "content": "x"}),
            ),
            "allow",
        ),
        (
            "claude-code",
            "file read",
            claude(
                "Read",
                json!({"file_path": "/home/dev/app/README.md", "offset": 1, "limit": 20}),
            ),
            "allow",
        ),
        (
            "claude-code",
            "MCP tool",
            claude("mcp__github__create_issue", mcp.clone()),
            "ask",
        ),
        (
            "claude-code",
            "web fetch",
            claude(
                "WebFetch",
                json!({"url": "https://example.com/docs", "prompt": "Summarise"}),
            ),
            "allow",
        ),
        // Codex: an allow is no opinion (`{}`), an ask is a deny.
        (
            "codex",
            "shell read",
            codex("Bash", json!({"command": "git status"})),
            "none",
        ),
        (
            "codex",
            "shell write",
            codex("Bash", json!({"command": "git push origin main"})),
            "deny",
        ),
        (
            "codex",
            "file write",
            codex(
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** End Patch\n"}),
            ),
            "none",
        ),
        (
            "codex",
            "secrets write",
            codex(
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Update File: src/main.rs\n+b\n*** Add File: .env.production\n+KEY=x\n*** End Patch\n"}),
            ),
            "deny",
        ),
        (
            "codex",
            "indented settings write",
            codex(
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n  *** Add File: .codex/config.toml\n+model = \"o3\"\n*** End Patch\n"}),
            ),
            "deny",
        ),
        (
            "codex",
            "file read",
            codex("Bash", json!({"command": "cat README.md"})),
            "none",
        ),
        (
            "codex",
            "MCP tool",
            codex("mcp__github__create_issue", mcp.clone()),
            "deny",
        ),
        (
            "codex",
            "web fetch",
            codex(
                "Bash",
                json!({"command": "curl -s https://example.com/docs"}),
            ),
            "none",
        ),
        // Gemini: allow or deny; an ask is a deny.
        (
            "gemini",
            "shell read",
            gemini(
                "run_shell_command",
                json!({"command": "git status", "description": "status"}),
            ),
            "allow",
        ),
        (
            "gemini",
            "shell write",
            gemini(
                "run_shell_command",
                json!({"command": "git push origin main"}),
            ),
            "deny",
        ),
        (
            "gemini",
            "file write",
            gemini(
                "write_file",
                json!({"file_path": "/home/dev/app/src/a.ts", "content": "x"}),
            ),
            "allow",
        ),
        (
            "gemini",
            "file read",
            gemini("read_file", json!({"file_path": "/home/dev/app/README.md"})),
            "allow",
        ),
        (
            "gemini",
            "MCP tool",
            gemini("mcp__github__create_issue", mcp.clone()),
            "deny",
        ),
        (
            "gemini",
            "web fetch",
            gemini(
                "web_fetch",
                json!({"prompt": "Summarise https://example.com/docs please"}),
            ),
            "allow",
        ),
        // Cursor: allow, ask or deny.
        (
            "cursor",
            "shell read",
            cursor(
                "beforeShellExecution",
                json!({"command": "git status", "cwd": "/home/dev/app"}),
            ),
            "allow",
        ),
        (
            "cursor",
            "shell write",
            cursor(
                "beforeShellExecution",
                json!({"command": "git push origin main", "cwd": "/home/dev/app"}),
            ),
            "ask",
        ),
        (
            "cursor",
            "MCP tool",
            cursor(
                "beforeMCPExecution",
                json!({"tool_name": "create_issue", "tool_input": mcp.to_string(), "mcp_server_name": "github", "url": "https://api.githubcopilot.com/mcp/", "mcp_server_url": "https://api.githubcopilot.com/mcp/"}),
            ),
            "ask",
        ),
        // Cursor's generic `preToolUse` governs the tools no other event does; it
        // enforces allow or deny only, so an ask is a deny.
        (
            "cursor",
            "file write",
            cursor_tool(
                "preToolUse",
                "Write",
                json!({"file_path": "/home/dev/app/src/a.ts", "contents": "x"}),
                json!({}),
            ),
            "allow",
        ),
        (
            "cursor",
            "secrets write",
            cursor_tool(
                "preToolUse",
                "StrReplace",
                json!({"path": "/home/dev/app/.env", "old_string": "a", "new_string": "b"}),
                json!({}),
            ),
            "deny",
        ),
        (
            "cursor",
            "search",
            cursor_tool(
                "preToolUse",
                "Grep",
                json!({"pattern": "TODO", "path": "/home/dev/app"}),
                json!({}),
            ),
            "allow",
        ),
        (
            "cursor",
            "web fetch tool",
            cursor_tool(
                "preToolUse",
                "WebFetch",
                json!({"url": "https://example.com/docs"}),
                json!({}),
            ),
            "allow",
        ),
        (
            "cursor",
            "file read",
            cursor(
                "beforeReadFile",
                json!({"file_path": "/home/dev/app/README.md", "content": "# app", "attachments": [{"type": "rule", "file_path": "/home/dev/app/.cursorrules"}]}),
            ),
            "allow",
        ),
        (
            "cursor",
            "web fetch",
            cursor(
                "beforeShellExecution",
                json!({"command": "curl -s https://example.com/docs", "cwd": "/home/dev/app"}),
            ),
            "allow",
        ),
        // Copilot: a deny or nothing; an ask is a deny.
        (
            "copilot",
            "shell read",
            copilot(
                "bash",
                json!({"command": "git status", "description": "status"}),
            ),
            "none",
        ),
        (
            "copilot",
            "shell write",
            copilot("bash", json!({"command": "git push origin main"})),
            "deny",
        ),
        (
            "copilot",
            "file write",
            copilot(
                "create",
                json!({"path": "/home/dev/app/src/a.ts", "file_text": "x"}),
            ),
            "none",
        ),
        (
            "copilot",
            "file read",
            copilot("view", json!({"path": "/home/dev/app/README.md"})),
            "none",
        ),
        (
            "copilot",
            "MCP tool",
            copilot("mcp__github__create_issue", mcp.clone()),
            "deny",
        ),
        // Copilot names the built-in GitHub server's tools `github-mcp-server-<tool>`,
        // and custom agents name MCP tools `<server>/<tool>`.
        (
            "copilot",
            "GitHub MCP tool",
            copilot("github-mcp-server-create_issue", mcp.clone()),
            "deny",
        ),
        (
            "copilot",
            "MCP tool by server",
            copilot("linear/create_issue", json!({"title": "Flaky test"})),
            "deny",
        ),
        (
            "copilot",
            "web fetch",
            copilot("web_fetch", json!({"url": "https://example.com/docs"})),
            "none",
        ),
    ];
    for (agent, what, event, expected) in cases {
        let answer = answer(dir.path(), agent, &event);
        assert_eq!(
            verdict(agent, &answer),
            expected,
            "{agent} {what}: {answer}"
        );
        if expected != "none" {
            assert!(
                reason(&answer).starts_with("Attest"),
                "{agent} {what}: {answer}"
            );
        } else {
            assert_eq!(answer, json!({}), "{agent} {what}");
        }
        if expected == "deny" && agent != "claude-code" {
            // An ask the agent cannot enforce says so, and why; a protected file's refusal
            // names the file.
            assert!(
                reason(&answer).contains("approval") || reason(&answer).contains("is protected"),
                "{agent} {what}: {answer}"
            );
        }
    }
    // Every attempt left its row before anything ran (issue 48): a write that acts or an
    // ask put to a prompt as an intent, a refusal or an ask nobody can answer as not run.
    // No row says a call ran, and none says it was approved.
    let entries = exported_entries(dir.path());
    assert!(!entries.is_empty());
    assert!(
        entries.iter().all(|entry| {
            let status = &entry["execution"]["status"];
            (status == "intent" || status == "not_run") && entry["confirm"]["outcome"] != "approved"
        }),
        "{entries:?}"
    );
}

#[test]
fn after_events_record_what_ran_for_every_agent() {
    let dir = tempfile::tempdir().unwrap();
    let mut claude_post = claude("Bash", json!({"command": "git status"}));
    claude_post["hook_event_name"] = json!("PostToolUse");
    claude_post["tool_response"] = json!({"stdout": "clean", "stderr": ""});
    let mut codex_post = codex("Bash", json!({"command": "git status"}));
    codex_post["hook_event_name"] = json!("PostToolUse");
    codex_post["tool_response"] = json!("clean");
    let mut gemini_after = gemini(
        "write_file",
        json!({"file_path": "/home/dev/app/src/a.ts", "content": "x"}),
    );
    gemini_after["hook_event_name"] = json!("AfterTool");
    gemini_after["tool_response"] = json!({"llmContent": "Wrote 1 line", "returnDisplay": "ok"});
    let mut gemini_failed = gemini("run_shell_command", json!({"command": "git status"}));
    gemini_failed["hook_event_name"] = json!("AfterTool");
    gemini_failed["tool_response"] = json!({"llmContent": "", "error": "not a git repository"});
    let cursor_edit = cursor(
        "afterFileEdit",
        json!({"file_path": "/home/dev/app/src/a.ts", "edits": [{"old_string": "a", "new_string": "b"}]}),
    );
    let mut copilot_post = copilot("bash", json!({"command": "git status"}));
    copilot_post["toolResult"] = json!({"resultType": "success", "textResultForLlm": "clean"});
    for (agent, event) in [
        ("claude-code", claude_post),
        ("codex", codex_post),
        ("gemini", gemini_after),
        ("gemini", gemini_failed),
        ("cursor", cursor_edit),
        ("copilot", copilot_post),
    ] {
        assert_eq!(
            answer(dir.path(), agent, &event),
            json!({}),
            "{agent}: {event}"
        );
    }
    let entries = exported_entries(dir.path());
    let rows: Vec<(String, String, String)> = entries
        .iter()
        .filter(|e| e["execution"]["status"] != "intent")
        .map(|e| {
            (
                e["agent"].as_str().unwrap().to_owned(),
                format!(
                    "{}.{}",
                    e["system"].as_str().unwrap(),
                    e["verb"].as_str().unwrap()
                ),
                format!(
                    "{}/{}",
                    e["decision"].as_str().unwrap(),
                    e["execution"]["status"].as_str().unwrap()
                ),
            )
        })
        .collect();
    let expected = [
        ("claude-code", "git.read", "act/ok"),
        ("codex", "git.read", "act/ok"),
        ("gemini", "files.write", "act/ok"),
        ("gemini", "git.read", "act/failed"),
        ("cursor", "files.write", "recorded/recorded"),
        ("copilot", "git.read", "act/ok"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(rows, expected);
    // The framework names the agent's contract; the run is its session.
    assert_eq!(entries[0]["run_id"], "abc123");
    let text = serde_json::to_string(&entries).unwrap();
    assert!(
        !text.contains("not a git repository") && !text.contains("Wrote 1 line"),
        "{text}"
    );
}

#[test]
fn input_that_is_not_the_agents_is_its_deny() {
    let dir = tempfile::tempdir().unwrap();
    let huge = format!("{{\"pad\": \"{}\"}}", " ".repeat(33 * 1024 * 1024));
    for agent in ["claude-code", "codex", "gemini", "cursor", "copilot"] {
        for (what, bad) in [
            ("empty", ""),
            ("not JSON", "not json"),
            ("an array", "[1,2]"),
            (
                "a tool event without a tool",
                "{\"hook_event_name\": \"PreToolUse\", \"hook\": 1}",
            ),
            ("huge", huge.as_str()),
        ] {
            let bad = if agent == "gemini" {
                bad.replace("PreToolUse", "BeforeTool")
            } else if agent == "cursor" {
                bad.replace("PreToolUse", "beforeShellExecution")
            } else {
                bad.to_owned()
            };
            let answer = raw_answer(dir.path(), agent, &bad, what);
            assert_eq!(verdict(agent, &answer), "deny", "{agent} {what}: {answer}");
            assert!(
                reason(&answer).contains("did not run"),
                "{agent} {what}: {answer}"
            );
        }
    }
    // Codex fails a hook whose answer has a field it does not know: the deny has only its own.
    let output = run_hook(dir.path(), &["codex"], "nonsense", &[]);
    let answer: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    let fields: Vec<&String> = answer["hookSpecificOutput"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(
        fields,
        [
            "hookEventName",
            "permissionDecision",
            "permissionDecisionReason"
        ]
    );
    assert_eq!(answer.as_object().unwrap().len(), 1, "{answer}");
}

#[test]
fn a_session_in_a_subfolder_uses_the_projects_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    let mut event = claude("Bash", json!({"command": "git status"}));
    event["hook_event_name"] = json!("PostToolUse");
    event["cwd"] = json!(deep.display().to_string());
    event["tool_response"] = json!({"stdout": ""});
    // No --ledger: the default `.attest/ledger.sqlite` is the project's, not the subfolder's.
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_attest"));
    command
        .args(["hook", "claude-code"])
        .current_dir(&deep)
        .env_clear()
        .env("CLAUDE_PROJECT_DIR", dir.path());
    let output = with_stdin(command, &event.to_string());
    assert_eq!(stdout(&output).trim(), "{}", "{}", stderr(&output));
    assert!(dir.path().join(".attest/ledger.sqlite").exists());
    assert!(!deep.join(".attest").exists());
}

/// A project whose `.attest/config.yaml` does not load: line 2 has an unknown key, `ledgr`.
fn project_with_a_configuration_error() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        "agent: app-bot\nledgr: audit.sqlite\n",
    )
    .unwrap();
    dir
}

/// Issue 48: Codex and Copilot name no project directory, and a session started in a
/// subfolder runs the hook there: the project's `.attest/` above it still governs (a
/// configuration error there is a deny), never the defaults of a folder without one.
#[test]
fn a_hook_run_from_a_subfolder_finds_the_projects_configuration() {
    let dir = project_with_a_configuration_error();
    let deep = dir.path().join("src/deep");
    std::fs::create_dir_all(&deep).unwrap();
    let status = json!({"command": "git status"});
    for (agent, mut event) in [
        ("codex", codex("Bash", status.clone())),
        ("copilot", copilot("bash", status.clone())),
    ] {
        event["cwd"] = json!(deep.display().to_string());
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_attest"));
        command
            .args(["hook", agent])
            .current_dir(&deep)
            .env_clear()
            .env("HOME", dir.path());
        let output = with_stdin(command, &event.to_string());
        let answer: Value = serde_json::from_str(stdout(&output).trim())
            .unwrap_or_else(|_| panic!("{agent}: {}", stderr(&output)));
        assert_eq!(verdict(agent, &answer), "deny", "{agent}: {answer}");
        assert!(
            reason(&answer).contains(".attest/config.yaml:2"),
            "{agent}: {answer}"
        );
        assert!(!deep.join(".attest").exists(), "{agent}");
    }
}

/// A stand-in for GitHub's REST API on 127.0.0.1: issue 42 was stored with another title
/// than the one asked for, issue 43 as asked. Serves until the test ends.
fn fake_github() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0_u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&request)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            let title = if line.contains("/repos/acme/app/issues/42 ") {
                "Something else"
            } else {
                "Flaky test"
            };
            let body = json!({"number": 42, "title": title, "state": "open"}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    address
}

#[test]
fn an_mcp_write_read_back_as_not_done_is_told_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let github = fake_github();
    std::fs::create_dir_all(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        format!("systems:\n  github:\n    base_url: {github}\n"),
    )
    .unwrap();
    let env = [("GITHUB_TOKEN", "test-token")];
    let input = json!({"owner": "acme", "repo": "app", "title": "Flaky test"});
    for (agent, number, told) in [
        ("claude-code", 42, true),
        ("claude-code", 43, false),
        ("gemini", 42, true),
        ("codex", 42, true),
    ] {
        // The MCP result as the agent passes it on: the tool's content blocks.
        let response = json!([{"type": "text", "text": json!({"number": number, "title": "Flaky test"}).to_string()}]);
        let event = match agent {
            "gemini" => {
                let mut event = gemini("mcp__github__create_issue", input.clone());
                event["hook_event_name"] = json!("AfterTool");
                // Gemini's `llmContent`: the result as text parts.
                let parts = json!([{"text": response[0]["text"]}]);
                event["tool_response"] = json!({"llmContent": parts, "returnDisplay": "created"});
                event
            }
            _ => {
                let mut event = if agent == "codex" {
                    codex("mcp__github__create_issue", input.clone())
                } else {
                    claude("mcp__github__create_issue", input.clone())
                };
                event["hook_event_name"] = json!("PostToolUse");
                event["tool_response"] = response;
                event
            }
        };
        let answer = hook_answer(dir.path(), &[agent], &event, &env);
        let context = answer["hookSpecificOutput"]["additionalContext"].as_str();
        if told {
            let context = context.unwrap_or_else(|| panic!("{agent} {number}: {answer}"));
            assert!(
                context.contains("unverified") && context.contains("do not report"),
                "{context}"
            );
        } else {
            assert_eq!(answer, json!({}), "{agent} {number}");
        }
    }
    let levels: Vec<String> = exported_entries(dir.path())
        .iter()
        // Gemini and Codex have no prompt: the ask was a deny, so what they report ran is
        // recorded as reported (`recorded`), never approved, and still read back.
        .filter(|e| ["ok", "recorded"].contains(&e["execution"]["status"].as_str().unwrap()))
        .map(|e| {
            e["verification"]["level"]
                .as_str()
                .unwrap_or("none")
                .to_owned()
        })
        .collect();
    assert_eq!(
        levels,
        ["unverified", "verified", "unverified", "unverified"]
    );
}

/// Cursor's `beforeReadFile` answers allow or deny only: a read policy asks about is
/// denied with the reason, while a shell command it asks about stays an ask (that the
/// file's content is never read into the call: `hook::cursor::tests`).
#[test]
fn a_cursor_read_that_asks_is_a_deny() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("attest.yaml"),
        "version: 1\npolicies:\n  - name: reads-are-reviewed\n    match: {action: files.read}\n    decision: ask\n    reason: reads are reviewed\n",
    )
    .unwrap();
    let read = cursor(
        "beforeReadFile",
        json!({"file_path": "/home/dev/app/.env", "content": "API_KEY=sk-CONTENT-MUST-NOT-LEAK", "attachments": []}),
    );
    let answer = answer(dir.path(), "cursor", &read);
    assert_eq!(answer["permission"], "deny", "{answer}");
    assert!(reason(&answer).contains("approval"), "{answer}");
    let shell = cursor(
        "beforeShellExecution",
        json!({"command": "git push origin main", "cwd": "/home/dev/app"}),
    );
    assert_eq!(answer_of(dir.path(), &shell)["permission"], "ask");
    // Both spellings Cursor's documentation has used carry the message.
    let denied = answer_of(dir.path(), &read);
    assert_eq!(denied["agentMessage"], denied["agent_message"], "{denied}");
    assert_eq!(denied["userMessage"], denied["user_message"], "{denied}");
}

/// Cursor fires its generic `preToolUse` / `postToolUse` for every tool, beside the
/// events of its own for shell commands, MCP tools and file reads: those stay with their
/// own event (which can ask, and names the MCP server), so a call is judged and recorded
/// once; the generic events judge and record the rest (file writes, searches, fetches).
/// The JSON is the documentation's (cursor.com/docs/hooks, "preToolUse", "postToolUse",
/// "postToolUseFailure").
#[test]
fn cursor_generic_events_govern_what_no_other_event_does() {
    let dir = tempfile::tempdir().unwrap();
    let allow = json!({"permission": "allow"});
    for (tool, input) in [
        (
            "Shell",
            json!({"command": "npm install", "working_directory": "/project"}),
        ),
        ("Read", json!({"file_path": "/home/dev/app/.env"})),
        ("MCP:create_issue", json!({"title": "Flaky test"})),
    ] {
        let mut event = cursor_tool("preToolUse", tool, input.clone(), json!({}));
        event["agent_message"] = json!("Installing dependencies...");
        assert_eq!(answer_of(dir.path(), &event), allow, "{tool}");
        let done = cursor_tool(
            "postToolUse",
            tool,
            input,
            json!({"tool_output": "{\"exitCode\":0,\"stdout\":\"ok\"}", "duration": 5432}),
        );
        assert_eq!(answer_of(dir.path(), &done), json!({}), "{tool}");
    }
    // (None of them is recorded: the rows below are the write's and the delete's only.)

    let write = json!({"file_path": "/home/dev/app/src/a.ts", "contents": "x"});
    let before = answer_of(
        dir.path(),
        &cursor_tool("preToolUse", "Write", write.clone(), json!({})),
    );
    assert_eq!(before["permission"], "allow", "{before}");
    let done = cursor_tool(
        "postToolUse",
        "Write",
        write.clone(),
        json!({"tool_output": "{\"success\":true}", "duration": 12}),
    );
    assert_eq!(answer_of(dir.path(), &done), json!({}));
    let failed = cursor_tool(
        "postToolUseFailure",
        "Delete",
        json!({"path": "/home/dev/app/src/old.ts"}),
        json!({"error_message": "Command timed out after 30s", "failure_type": "timeout", "duration": 5000, "is_interrupt": false}),
    );
    assert_eq!(answer_of(dir.path(), &failed), json!({}));
    // A denied call did not run: nothing to record.
    let denied = cursor_tool(
        "postToolUseFailure",
        "Write",
        json!({"file_path": "/home/dev/app/.env"}),
        json!({"error_message": "denied", "failure_type": "permission_denied", "duration": 0, "is_interrupt": false}),
    );
    assert_eq!(answer_of(dir.path(), &denied), json!({}));
    let rows: Vec<(String, String, String)> = exported_entries(dir.path())
        .iter()
        .filter(|e| e["execution"]["status"] != "intent")
        .map(|e| {
            (
                format!(
                    "{}.{}",
                    e["system"].as_str().unwrap(),
                    e["verb"].as_str().unwrap()
                ),
                e["execution"]["status"].as_str().unwrap().to_owned(),
                e["run_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let conv = "conv-123".to_owned();
    assert_eq!(
        rows,
        [
            ("files.write".to_owned(), "ok".to_owned(), conv.clone()),
            ("files.write".to_owned(), "failed".to_owned(), conv),
        ]
    );
    // An event without its tool is Cursor's deny, never a crash.
    let output = run_hook(
        dir.path(),
        &["cursor"],
        "{\"hook_event_name\": \"preToolUse\", \"conversation_id\": \"c\"}",
        &[],
    );
    let answer: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(answer["permission"], "deny", "{answer}");
    assert!(reason(&answer).contains("tool_name"), "{answer}");
}

/// Copilot CLI's MCP tools, as its tool layer names the built-in GitHub server's
/// (`github-mcp-server-<tool>`) and as custom agents name a server's (`<server>/<tool>`),
/// are judged by their server.
#[test]
fn copilot_mcp_tools_are_judged_by_their_server() {
    let dir = tempfile::tempdir().unwrap();
    for (tool, label) in [
        ("github-mcp-server-create_issue", "github.create"),
        ("linear/create_issue", "linear.create"),
        ("mcp__github__create_issue", "github.create"),
    ] {
        let answer = answer(dir.path(), "copilot", &copilot(tool, json!({"title": "x"})));
        assert_eq!(answer["permissionDecision"], "deny", "{tool}: {answer}");
        assert!(reason(&answer).contains(label), "{tool}: {answer}");
    }
}

fn answer_of(dir: &Path, event: &Value) -> Value {
    answer(dir, "cursor", event)
}

/// `--shadow` on every agent's hook: a call policy refuses runs (the agent is not told
/// to stop), and the row its after-event writes carries the verdict that was not enforced.
#[test]
fn shadow_mode_never_blocks_on_any_agent_and_records_the_verdict() {
    let push = json!({"command": "git push --force origin main"});
    let cases: Vec<(&str, Value, Value)> = {
        let mut codex_post = codex("Bash", push.clone());
        codex_post["hook_event_name"] = json!("PostToolUse");
        codex_post["tool_response"] = json!("forced update");
        let mut gemini_after = gemini("run_shell_command", push.clone());
        gemini_after["hook_event_name"] = json!("AfterTool");
        gemini_after["tool_response"] = json!({"llmContent": "forced update"});
        let cursor_before = cursor(
            "beforeShellExecution",
            json!({"command": "git push --force origin main", "cwd": "/home/dev/app"}),
        );
        let cursor_after = cursor(
            "afterShellExecution",
            json!({"command": "git push --force origin main", "cwd": "/home/dev/app", "output": "forced update"}),
        );
        let mut copilot_post = copilot("bash", push.clone());
        copilot_post["toolResult"] =
            json!({"resultType": "success", "textResultForLlm": "forced update"});
        vec![
            ("codex", codex("Bash", push.clone()), codex_post),
            (
                "gemini",
                gemini("run_shell_command", push.clone()),
                gemini_after,
            ),
            ("cursor", cursor_before, cursor_after),
            ("copilot", copilot("bash", push.clone()), copilot_post),
        ]
    };
    for (agent, before, after) in cases {
        for shadow in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join("attest.yaml"),
                "version: 1\npolicies:\n  - name: no-force-push\n    match: {action: git.delete}\n    decision: refuse\n    reason: history is kept\n",
            )
            .unwrap();
            let args: &[&str] = if shadow {
                &[agent, "--shadow"]
            } else {
                &[agent]
            };
            let answer = hook_answer(dir.path(), args, &before, &[]);
            if !shadow {
                assert_eq!(verdict(agent, &answer), "deny", "{agent}: {answer}");
                continue;
            }
            assert!(
                ["allow", "none"].contains(&verdict(agent, &answer).as_str()),
                "{agent} in shadow mode: {answer}"
            );
            hook_answer(dir.path(), args, &after, &[]);
            let rows: Vec<Value> = exported_entries(dir.path())
                .into_iter()
                .filter(|row| row["execution"]["status"] != "intent")
                .collect();
            assert_eq!(rows.len(), 1, "{agent}: {rows:?}");
            let row = &rows[0];
            assert_eq!(row["decision"], "act", "{agent}: {row}");
            assert_eq!(row["shadow"]["decision"], "refuse", "{agent}: {row}");
            assert_eq!(
                row["shadow"]["rules_fired"],
                json!(["no-force-push"]),
                "{agent}: {row}"
            );
            assert_eq!(row["agent"], agent, "{row}");
        }
    }
}

/// Issue 48: input the hook cannot read is that agent's deny, never an allow or an ask
/// left to a prompt that may not exist — a command that is not a string, a `toolArgs`
/// text nested too deep or holding a lone surrogate, a duplicated key (JSON parsers
/// disagree on which one counts), an event over the size bound.
#[test]
fn input_the_hook_cannot_read_is_each_agents_deny() {
    let dir = tempfile::tempdir().unwrap();
    let push = "git push --force origin main";
    let mut gemini_array = gemini("run_shell_command", json!({"command": ["git", "status"]}));
    gemini_array["tool_input"]["description"] = json!("status");
    let gemini_object = gemini("run_shell_command", json!({"command": {"program": "git"}}));
    let deep = format!(
        "{{\"command\": \"git status\", \"x\": {}{}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    let mut copilot_deep = copilot("bash", json!({}));
    copilot_deep["toolArgs"] = json!(deep);
    let mut copilot_surrogate = copilot("bash", json!({}));
    copilot_surrogate["toolArgs"] = json!("{\"command\": \"git status \\ud800\"}");
    let mut cases: Vec<(&str, &str, String)> = vec![
        (
            "gemini",
            "a command that is an array",
            gemini_array.to_string(),
        ),
        (
            "gemini",
            "a command that is an object",
            gemini_object.to_string(),
        ),
        ("copilot", "toolArgs 200 deep", copilot_deep.to_string()),
        (
            "copilot",
            "toolArgs with a lone surrogate",
            copilot_surrogate.to_string(),
        ),
    ];
    // The same key twice: the force push first, a read last (serde_json keeps the last).
    let duplicated = [
        (
            "claude-code",
            format!(
                "{{\"session_id\": \"s\", \"cwd\": \"/home/dev/app\", \"hook_event_name\": \"PreToolUse\", \"tool_name\": \"Bash\", \"tool_input\": {{\"command\": \"{push}\"}}, \"tool_name\": \"Read\"}}"
            ),
        ),
        (
            "codex",
            format!(
                "{{\"session_id\": \"s\", \"cwd\": \"/home/dev/app\", \"hook_event_name\": \"PreToolUse\", \"tool_name\": \"Bash\", \"tool_input\": {{\"command\": \"{push}\", \"command\": \"git status\"}}}}"
            ),
        ),
        (
            "gemini",
            format!(
                "{{\"session_id\": \"s\", \"cwd\": \"/home/dev/app\", \"hook_event_name\": \"BeforeTool\", \"tool_name\": \"run_shell_command\", \"tool_input\": {{\"command\": \"{push}\"}}, \"tool_name\": \"read_file\"}}"
            ),
        ),
        (
            "cursor",
            "{\"hook_event_name\": \"preToolUse\", \"conversation_id\": \"c\", \"generation_id\": \"g\", \"workspace_roots\": [\"/home/dev/app\"], \"tool_name\": \"Delete\", \"tool_input\": {\"path\": \"/home/dev/app/src\"}, \"tool_name\": \"Grep\"}"
                .to_owned(),
        ),
        (
            "copilot",
            format!(
                "{{\"timestamp\": 1, \"cwd\": \"/home/dev/app\", \"toolName\": \"bash\", \"toolArgs\": \"{{\\\"command\\\": \\\"{push}\\\"}}\", \"toolName\": \"view\"}}"
            ),
        ),
    ];
    for (agent, event) in &duplicated {
        cases.push((agent, "a duplicated key", event.clone()));
    }
    // 20 MiB: over the bound, whatever the agent.
    let pad = " ".repeat(20 * 1024 * 1024);
    for agent in ["claude-code", "codex", "gemini", "cursor", "copilot"] {
        let mut event = match agent {
            "claude-code" => claude("Bash", json!({"command": "git status"})),
            "codex" => codex("Bash", json!({"command": "git status"})),
            "gemini" => gemini("run_shell_command", json!({"command": "git status"})),
            "cursor" => cursor_tool(
                "preToolUse",
                "Shell",
                json!({"command": "git status"}),
                json!({}),
            ),
            _ => copilot("bash", json!({"command": "git status"})),
        };
        event["pad"] = json!(pad);
        cases.push((agent, "a 20 MiB event", event.to_string()));
    }
    let mut wrong = Vec::new();
    for (agent, what, event) in &cases {
        let answer = raw_answer(dir.path(), agent, event, what);
        if verdict(agent, &answer) != "deny" || !reason(&answer).contains("did not run") {
            wrong.push(format!("{agent} {what}: {answer}"));
        }
    }
    assert!(wrong.is_empty(), "not denied:\n{}", wrong.join("\n"));
}

/// The answer to `event` sent as it is (not always valid JSON), after checking the hook
/// exited 0 (an agent reads the answer only then).
fn raw_answer(dir: &Path, agent: &str, event: &str, what: &str) -> Value {
    let output = run_hook(dir, &[agent], event, &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{agent} {what}: {}",
        stderr(&output)
    );
    serde_json::from_str(stdout(&output).trim()).unwrap()
}

/// Issue 48: a configuration file that does not load (here an unknown key) makes every
/// hook answer deny, naming the file, the line and the key; a read is no exception.
#[test]
fn a_configuration_error_is_every_agents_deny_with_file_line_and_key() {
    let dir = project_with_a_configuration_error();
    let status = json!({"command": "git status"});
    for (agent, event) in [
        ("claude-code", claude("Bash", status.clone())),
        ("codex", codex("Bash", status.clone())),
        ("gemini", gemini("run_shell_command", status.clone())),
        (
            "cursor",
            cursor(
                "beforeShellExecution",
                json!({"command": "git status", "cwd": "/home/dev/app"}),
            ),
        ),
        ("copilot", copilot("bash", status.clone())),
    ] {
        let answer = answer(dir.path(), agent, &event);
        assert_eq!(verdict(agent, &answer), "deny", "{agent}: {answer}");
        let why = reason(&answer);
        assert!(
            why.contains(".attest/config.yaml:2") && why.contains("ledgr"),
            "{agent}: {answer}"
        );
    }
}

/// Issue 48: Copilot CLI sends its session as `sessionId`, which is the row's run, and
/// `toolArgs` as an object as well as a JSON text; both shapes are judged alike.
#[test]
fn copilot_session_id_is_the_run_and_tool_args_may_be_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let push = json!({"command": "git push --force origin main"});
    let mut as_object = copilot("bash", json!({}));
    as_object["toolArgs"] = push.clone();
    as_object["sessionId"] = json!("copilot-session-7");
    let mut as_text = copilot("bash", push.clone());
    as_text["sessionId"] = json!("copilot-session-7");
    for (what, event) in [("text", as_text), ("object", as_object.clone())] {
        let answer = answer(dir.path(), "copilot", &event);
        assert_eq!(answer["permissionDecision"], "deny", "{what}: {answer}");
        assert!(reason(&answer).contains("git.delete"), "{what}: {answer}");
    }
    let mut after = copilot("bash", json!({"command": "git status"}));
    after["sessionId"] = json!("copilot-session-7");
    after["toolResult"] = json!({"resultType": "success", "textResultForLlm": "clean"});
    answer(dir.path(), "copilot", &after);
    let rows: Vec<Value> = exported_entries(dir.path())
        .into_iter()
        .filter(|row| row["execution"]["status"] != "intent")
        .collect();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|row| row["run_id"] == "copilot-session-7"),
        "{rows:?}"
    );
}

/// Issue 48: Gemini CLI names an MCP tool `mcp_<server>_<tool>` (its own
/// `parseMcpToolName` takes the server up to the first `_` after `mcp_`), and sends the
/// server and the tool apart in `mcp_context` (its hooks' `McpToolContext`), which is read
/// first: a server whose name has a `_` cannot be told from the name alone. The call is
/// judged and recorded as `mcp__<server>__<tool>`, as on every other agent.
#[test]
fn gemini_mcp_tools_are_read_in_geminis_spelling() {
    let title = json!({"owner": "acme", "repo": "app", "title": "x"});
    let mut with_context = gemini("mcp_my_github_create_issue", title.clone());
    with_context["mcp_context"] = json!({
        "server_name": "my_github", "tool_name": "create_issue", "command": "github-mcp",
    });
    for (what, before, recorded) in [
        (
            "name",
            gemini("mcp_github_create_issue", title.clone()),
            "mcp__github__create_issue",
        ),
        ("mcp_context", with_context, "mcp__my_github__create_issue"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let answer = answer(dir.path(), "gemini", &before);
        assert_eq!(answer["decision"], "deny", "{what}: {answer}");
        assert!(
            reason(&answer).contains("github.create"),
            "{what}: {answer}"
        );
        let mut after = before.clone();
        after["hook_event_name"] = json!("AfterTool");
        after["tool_response"] = json!({"llmContent": [{"text": "created"}]});
        hook_answer(dir.path(), &["gemini"], &after, &[]);
        // The denied attempt's row, and the after-event's.
        let rows = outcome_entries(dir.path());
        assert_eq!(rows.len(), 2, "{what}: {rows:?}");
        for row in &rows {
            assert_eq!(row["call"]["tool"], recorded, "{what}: {row}");
        }
    }
    // An `mcp_context` that is not the agent's is not guessed around.
    let mut garbled = gemini("mcp_github_list_issues", json!({}));
    garbled["mcp_context"] = json!({"server_name": ["github"], "tool_name": "list_issues"});
    let dir = tempfile::tempdir().unwrap();
    let answer = answer(dir.path(), "gemini", &garbled);
    assert_eq!(answer["decision"], "deny", "{answer}");
}

/// Issue 48: Claude Code sends `permission_mode` in every event; under
/// `bypassPermissions` (`--dangerously-skip-permissions`) and `dontAsk` it prompts
/// nobody, so an `ask` would run unasked. The ask is a deny saying so, the attempt is
/// recorded as decided by Attest's policy with the mode noted, and no row says approved
/// (not even after an after-event for the same call).
#[test]
fn claude_code_in_bypass_permissions_mode_gets_a_deny_not_an_ask() {
    for mode in ["bypassPermissions", "dontAsk"] {
        let dir = tempfile::tempdir().unwrap();
        let mut push = claude("Bash", json!({"command": "git push origin main"}));
        push["permission_mode"] = json!(mode);
        let answer = answer(dir.path(), "claude-code", &push);
        assert_eq!(verdict("claude-code", &answer), "deny", "{mode}: {answer}");
        let why = reason(&answer);
        assert!(
            why.contains(mode) && why.contains("person"),
            "{mode}: {why}"
        );
        let rows = exported_entries(dir.path());
        assert_eq!(rows.len(), 1, "{mode}: the attempt's row: {rows:?}");
        assert_eq!(rows[0]["decision"], "ask", "{mode}: {}", rows[0]);
        assert_eq!(
            rows[0]["confirm"]["outcome"], "rejected",
            "{mode}: {}",
            rows[0]
        );
        assert!(rows[0]["confirm"].get("approver").is_none(), "{}", rows[0]);
        let note = rows[0]["confirm"]["note"].as_str().unwrap_or_default();
        assert!(note.contains(mode), "{mode}: {}", rows[0]);
        // Had it run anyway, its after-event approves nothing.
        let mut post = push.clone();
        post["hook_event_name"] = json!("PostToolUse");
        post["tool_response"] = json!({"stdout": "", "stderr": "To origin\n"});
        hook_answer(dir.path(), &["claude-code"], &post, &[]);
        let text = serde_json::to_string(&exported_entries(dir.path())).unwrap();
        assert!(!text.contains("\"approved\""), "{mode}: {text}");
    }
}

/// Issue 48: Gemini CLI has no prompt, so the hook denies what policy asks about. An
/// `AfterTool` for that call approves nothing: nobody was asked. It is recorded as the
/// agent reported it (decision `recorded`, no approval), and the model is told Attest
/// had denied it.
#[test]
fn an_after_event_for_a_call_the_hook_denied_is_never_recorded_as_approved() {
    let dir = tempfile::tempdir().unwrap();
    let push = gemini(
        "run_shell_command",
        json!({"command": "git push origin main"}),
    );
    let answer = answer(dir.path(), "gemini", &push);
    assert_eq!(answer["decision"], "deny", "{answer}");
    let mut after = push.clone();
    after["hook_event_name"] = json!("AfterTool");
    after["tool_response"] = json!({"llmContent": "To origin", "returnDisplay": "ok"});
    let told = hook_answer(dir.path(), &["gemini"], &after, &[]);
    let context = told["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(context.contains("denied"), "{told}");
    let rows = outcome_entries(dir.path());
    let text = serde_json::to_string(&rows).unwrap();
    assert!(!text.contains("\"approved\""), "{text}");
    assert!(!text.contains("gemini-prompt"), "{text}");
    // The attempt's row, written when it was denied, then what the agent reported.
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(rows[0]["confirm"]["outcome"], "rejected", "{}", rows[0]);
    assert_eq!(rows[0]["execution"]["status"], "not_run", "{}", rows[0]);
    assert_eq!(rows[1]["decision"], "recorded", "{}", rows[1]);
}

//! Codex CLI's hook contract (<https://developers.openai.com/codex/hooks>; the output
//! schema Codex embeds, `pre-tool-use.command.output.schema.json`).
//!
//! In: the same JSON as Claude Code's (`hook_event_name` `PreToolUse` or `PostToolUse`,
//! `session_id`, `cwd`, `tool_name`, `tool_input`, `tool_response`). Tools are `Bash`
//! (`tool_input.command`), `apply_patch` (the patch in `tool_input.command`, each file
//! in a `*** Add File:` / `*** Update File:` / `*** Delete File:` line) and MCP tools
//! `mcp__<server>__<tool>`.
//!
//! Out (exit 0): Codex honours only a deny before a call — `hookSpecificOutput` with
//! `hookEventName: "PreToolUse"`, `permissionDecision: "deny"` and a non-empty
//! `permissionDecisionReason`; `allow` and `ask` are refused as unsupported (and a hook
//! that fails lets the tool run), so an allow is `{}` (Codex's own approval policy then
//! applies) and an ask is a deny with the reason. Unknown fields fail the hook, so the
//! answers carry only these. After a call, `decision: "block"` with a `reason`, and
//! `hookSpecificOutput.additionalContext`.

use std::time::Duration;

use serde_json::{json, Value};

use super::claude_code;
use super::event::{self, AfterNote, Contract, Event, Moment, Ruling, ToolCall};

/// Codex CLI.
pub(crate) struct Codex;

impl Contract for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn title(&self) -> &'static str {
        "Codex"
    }

    fn parse(&self, value: &Value) -> Result<Event, String> {
        let moment = match event::event_name(value, "hook_event_name")? {
            "PreToolUse" => Moment::Before,
            "PostToolUse" => Moment::After(Ok(value
                .get("tool_response")
                .cloned()
                .unwrap_or(Value::Null))),
            _ => {
                return Ok(Event {
                    moment: Moment::Before,
                    call: None,
                })
            }
        };
        // Codex sets no project variable; its `cwd` is the session's working directory.
        let mut call = claude_code::call(value, None)?;
        match call.tool.as_str() {
            "Bash" | "shell" | "local_shell" | "exec_command" => {
                call.tool = "Bash".to_owned();
                call.input = json!({"command": command_text(call.params.get("command"))});
            }
            "apply_patch" => {
                call.tool = "Edit".to_owned();
                let patch = command_text(call.params.get("command").or(call.params.get("input")));
                // Each file is a reading of the call; core judges it by the riskiest.
                let mut edits = patch_paths(&patch).map(|path| json!({"file_path": path}));
                call.input = edits.next().unwrap_or_else(|| json!({"file_path": ""}));
                call.readings = edits.collect();
            }
            _ => {}
        }
        Ok(Event {
            moment,
            call: Some(call),
        })
    }

    fn before(&self, _moment: &Moment, ruling: &Ruling) -> Value {
        match ruling {
            Ruling::Deny(reason) | Ruling::Ask(reason) => json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }),
            Ruling::Allow(_) | Ruling::Abstain => json!({}),
        }
    }

    fn after(&self, note: &AfterNote) -> Value {
        claude_code::ClaudeCode.after(note)
    }

    fn enforces_ask(&self, _call: &ToolCall) -> bool {
        false
    }

    fn timeout(&self) -> Duration {
        // Codex's default command-hook timeout is 600 s.
        Duration::from_secs(600)
    }
}

/// A shell command Codex sends as a string or as an argv array (joined with spaces:
/// every word is still read by the shell detector).
fn command_text(command: Option<&Value>) -> String {
    match command {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(words)) => words
            .iter()
            .map(|word| {
                word.as_str()
                    .map_or_else(|| word.to_string(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join(" "),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// The files a patch touches, in its order (a move names its source and destination).
fn patch_paths(patch: &str) -> impl Iterator<Item = &str> {
    patch.lines().filter_map(|line| {
        [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|prefix| line.strip_prefix(prefix))
        .map(str::trim)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_is_read_as_an_edit_of_each_file_it_touches() {
        let patch = "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** Add File: .github/workflows/ci.yml\n+on: push\n*** End Patch\n";
        let event = json!({
            "session_id": "s", "hook_event_name": "PreToolUse",
            "tool_name": "apply_patch", "tool_input": {"command": patch},
        });
        let call = Codex.parse(&event).unwrap().call.unwrap();
        assert_eq!(call.tool, "Edit");
        assert_eq!(call.input, json!({"file_path": "src/main.rs"}));
        assert_eq!(
            call.readings,
            [json!({"file_path": ".github/workflows/ci.yml"})]
        );
        let one = json!({
            "session_id": "s", "hook_event_name": "PreToolUse",
            "tool_name": "apply_patch", "tool_input": {"command": "*** Update File: src/lib.rs\n"},
        });
        let call = Codex.parse(&one).unwrap().call.unwrap();
        assert_eq!(call.input, json!({"file_path": "src/lib.rs"}));
        assert!(call.readings.is_empty());
    }
}

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

use attest_core::detect::{detect, DetectInput};
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
                call.input = json!({"file_path": riskiest_path(&patch)});
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

/// Of the files a patch touches, the one whose write is riskiest (a patch to source code
/// and to `.github/workflows/` is judged as the workflow edit).
fn riskiest_path(patch: &str) -> String {
    let paths = patch.lines().filter_map(|line| {
        [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|prefix| line.strip_prefix(prefix))
        .map(str::trim)
    });
    let judged = |path: &str| {
        detect(&DetectInput::CodingTool {
            name: "Edit",
            input: &json!({"file_path": path}),
        })
    };
    let mut best: Option<(String, attest_core::Detection)> = None;
    for path in paths {
        let found = judged(path);
        best = match best {
            Some((old, was)) if was.clone().riskier(found.clone()) == was => Some((old, was)),
            _ => Some((path.to_owned(), found)),
        };
    }
    best.map(|(path, _)| path).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_is_judged_by_its_riskiest_file() {
        let patch = "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-a\n+b\n*** Add File: .github/workflows/ci.yml\n+on: push\n*** End Patch\n";
        assert_eq!(riskiest_path(patch), ".github/workflows/ci.yml");
        assert_eq!(riskiest_path("*** Update File: src/lib.rs\n"), "src/lib.rs");
    }
}

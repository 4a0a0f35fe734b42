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

/// The hunk headers of Codex's patch format, as its parser spells them.
const PATCH_HEADERS: [&str; 4] = [
    "*** Add File: ",
    "*** Update File: ",
    "*** Delete File: ",
    "*** Move to: ",
];

/// The files a patch touches, in its order (a move names its source and destination),
/// read as leniently as Codex's own parser (`codex-rs/apply-patch`), which trims each
/// header of surrounding whitespace: every line that is a header once trimmed names a
/// file, wherever it stands. A line that looks like a header this reading does not know
/// (another case, no space after the colon) is an empty path: a write nobody can place,
/// which asks.
fn patch_paths(patch: &str) -> impl Iterator<Item = &str> {
    patch.lines().filter_map(|line| {
        let line = line.trim();
        if let Some(path) = PATCH_HEADERS
            .iter()
            .find_map(|header| line.strip_prefix(header))
        {
            return Some(path.trim());
        }
        if matches!(
            line,
            "*** Begin Patch" | "*** End Patch" | "*** End of File"
        ) {
            return None;
        }
        let lower = line.to_ascii_lowercase();
        let unknown_header = lower.starts_with("***")
            && ["file", "move", "to:"]
                .iter()
                .any(|word| lower.contains(word));
        unknown_header.then_some("")
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

    /// The files a patch touches, as the Codex hook reads them.
    fn read(patch: &str) -> Vec<Value> {
        let event = json!({
            "session_id": "s", "hook_event_name": "PreToolUse",
            "tool_name": "apply_patch", "tool_input": {"command": patch},
        });
        let call = Codex.parse(&event).unwrap().call.unwrap();
        std::iter::once(call.input).chain(call.readings).collect()
    }

    #[test]
    fn patch_headers_are_read_as_codex_reads_them() {
        // Codex's parser trims each hunk header of surrounding whitespace.
        for patch in [
            "*** Begin Patch\n  *** Add File: .codex/config.toml\n+x\n*** End Patch\n",
            "*** Begin Patch\n\t*** Add File: .codex/config.toml \n+x\n*** End Patch\n",
            " *** Begin Patch\n   *** Add File: .codex/config.toml\r\n+x\n *** End Patch",
        ] {
            assert_eq!(
                read(patch),
                [json!({"file_path": ".codex/config.toml"})],
                "{patch:?}"
            );
        }
        let all = "*** Begin Patch\n *** Update File: src/a.rs\n  *** Move to: .codex/hooks.json\n@@\n-a\n+b\n*** End of File\n    *** Delete File: .git/hooks/pre-commit\n*** End Patch";
        assert_eq!(
            read(all),
            [
                json!({"file_path": "src/a.rs"}),
                json!({"file_path": ".codex/hooks.json"}),
                json!({"file_path": ".git/hooks/pre-commit"}),
            ]
        );
        // A header ours cannot read (no space after the colon, another case, a marker
        // it does not know) is the riskiest reading: a write to a path nobody knows.
        for patch in [
            "*** Begin Patch\n*** Add File:.codex/config.toml\n+x\n*** End Patch",
            "*** Begin Patch\n*** add file: .codex/config.toml\n+x\n*** End Patch",
            "*** Begin Patch\n*** Rename File: a b\n*** End Patch",
        ] {
            assert!(
                read(patch).contains(&json!({"file_path": ""})),
                "{patch:?}: {:?}",
                read(patch)
            );
        }
    }
}

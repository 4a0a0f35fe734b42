//! Claude Code's hook contract (<https://code.claude.com/docs/en/hooks>, "Hooks reference").
//!
//! In: one JSON object with `hook_event_name`, `session_id`, `cwd`, `tool_name`,
//! `tool_input`, `permission_mode` (under `bypassPermissions` or `dontAsk` nobody is
//! prompted, so an ask is a deny), and for `PostToolUse` the `tool_response` (for
//! `PostToolUseFailure`, `error`). Tools are `Bash` (`command`), `Write`/`Edit`/`MultiEdit` (`file_path`),
//! `Read`, `WebFetch` (`url`), `WebSearch`, and MCP tools `mcp__<server>__<tool>`.
//! Claude Code sets `CLAUDE_PROJECT_DIR` to the project's root for every hook.
//!
//! Out (exit 0): before a call, `hookSpecificOutput` with `hookEventName: "PreToolUse"`,
//! `permissionDecision` (`allow`, `deny`, `ask`) and `permissionDecisionReason` (shown to
//! Claude on a deny, to the user on an ask), and with `hook.sandbox` an `updatedInput`
//! that runs a `Bash` command inside `attest sandbox` ([`super::sandboxed`]). At its permission prompt
//! (`PermissionRequest`), `hookSpecificOutput.decision.behavior` `deny` with a
//! `message`. After a call, `decision: "block"` with a `reason` (the record is missing),
//! and `hookSpecificOutput.additionalContext` for what Claude must know.

use std::time::Duration;

use serde_json::{json, Value};

use super::event::{self, AfterNote, Contract, Event, Moment, Ruling, ToolCall};

/// Claude Code.
pub(crate) struct ClaudeCode;

impl Contract for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn title(&self) -> &'static str {
        "Claude Code"
    }

    fn parse(&self, value: &Value) -> Result<Event, String> {
        let moment = match event::event_name(value, "hook_event_name")? {
            "PreToolUse" => Moment::Before,
            "PermissionRequest" => Moment::Permission,
            "PostToolUse" => Moment::After(Ok(value
                .get("tool_response")
                .cloned()
                .unwrap_or(Value::Null))),
            "PostToolUseFailure" => Moment::After(Err(event::text(value, "error")
                .unwrap_or("the tool failed")
                .to_owned())),
            _ => {
                return Ok(Event {
                    moment: Moment::Before,
                    call: None,
                })
            }
        };
        Ok(Event {
            moment,
            call: Some(call(value, Some("CLAUDE_PROJECT_DIR"))?),
        })
    }

    fn before(&self, moment: &Moment, ruling: &Ruling) -> Value {
        if let Moment::Permission = moment {
            return match ruling {
                Ruling::Deny(reason) => json!({
                    "hookSpecificOutput": {
                        "hookEventName": "PermissionRequest",
                        "decision": {"behavior": "deny", "message": reason},
                    }
                }),
                // The person at the prompt decides the rest.
                _ => json!({}),
            };
        }
        let (decision, reason) = match ruling {
            Ruling::Allow(reason) => ("allow", reason),
            Ruling::Ask(reason) => ("ask", reason),
            Ruling::Deny(reason) => ("deny", reason),
            Ruling::Abstain => return json!({}),
        };
        json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        })
    }

    fn after(&self, note: &AfterNote) -> Value {
        let mut answer = json!({});
        if let Some(reason) = &note.unrecorded {
            answer["decision"] = json!("block");
            answer["reason"] = json!(reason);
        }
        if let Some(context) = &note.context {
            answer["hookSpecificOutput"] = json!({
                "hookEventName": "PostToolUse",
                "additionalContext": context,
            });
        }
        answer
    }

    fn enforces_ask(&self, _call: &ToolCall) -> bool {
        true
    }

    fn timeout(&self) -> Duration {
        // A command hook's default timeout is 60 s unless its `timeout` says otherwise.
        Duration::from_secs(60)
    }

    fn rewrites_input(&self, call: &ToolCall) -> bool {
        call.agent_tool == "Bash"
    }

    fn with_input(&self, mut answer: Value, input: Value) -> Value {
        // `updatedInput` replaces the tool's whole input; Claude Code honours it with an
        // allow, and with an ask it is what the person at the prompt is asked to run.
        if let Some(out) = answer
            .get_mut("hookSpecificOutput")
            .filter(|out| out.get("permissionDecision").is_some())
        {
            out["updatedInput"] = input;
        }
        answer
    }
}

/// The call in a Claude Code (or Claude-compatible, as Codex's) tool event; the project
/// directory from `project_var` when the agent sets one, else the event's `cwd`.
pub(super) fn call(value: &Value, project_var: Option<&str>) -> Result<ToolCall, String> {
    let tool = event::required(value, "tool_name")?.to_owned();
    let input = value
        .get("tool_input")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let cwd = event::text(value, "cwd").map(str::to_owned);
    let project_dir = super::project_from_env(project_var)
        .or_else(|| cwd.as_deref().map(std::path::PathBuf::from));
    Ok(ToolCall {
        tool: tool.clone(),
        input: input.clone(),
        readings: Vec::new(),
        agent_tool: tool,
        params: input,
        cwd,
        session: event::text(value, "session_id").map(str::to_owned),
        project_dir,
        unprompted: event::text(value, "permission_mode")
            .filter(|mode| UNPROMPTED_MODES.contains(mode))
            .map(str::to_owned),
    })
}

/// Claude Code's permission modes in which nobody is prompted: `bypassPermissions`
/// (`--dangerously-skip-permissions`) runs every call, `dontAsk` denies what would have
/// been asked. Its hook answer `deny` is honoured in every mode.
const UNPROMPTED_MODES: [&str; 2] = ["bypassPermissions", "dontAsk"];

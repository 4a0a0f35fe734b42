//! Cursor's hook contract (<https://cursor.com/docs/agent/hooks>, `.cursor/hooks.json`).
//!
//! In: every event has `hook_event_name`, `conversation_id`, `generation_id` and
//! `workspace_roots`. `beforeShellExecution` / `afterShellExecution` carry `command` and
//! `cwd` (and after, `output`); `beforeMCPExecution` / `afterMCPExecution` carry
//! `tool_name`, `tool_input` (a JSON text) and the server's `url` or `command` (and
//! after, `result_json`); `beforeReadFile` carries `file_path`, the file's `content` and
//! `attachments` (only the path is read: the content never reaches the ledger);
//! `afterFileEdit` carries `file_path` and `edits`.
//!
//! Out (exit 0): before a shell command or MCP tool, `permission` (`allow`, `deny`,
//! `ask`) with the message shown to the person and the one sent to the model, under both
//! spellings Cursor's documentation has used (`userMessage`/`agentMessage` at hooks'
//! launch in 1.7, `user_message`/`agent_message` since); before a file read,
//! `permission` `allow` or `deny` only (there is no ask: an ask is a deny, with the
//! reason). After events are told nothing back; a file edit has no before-event here, so
//! it is recorded as it happened.

use std::time::Duration;

use serde_json::{json, Value};

use super::event::{self, AfterNote, Contract, Event, Moment, Ruling, ToolCall};

/// The agent tool a `beforeReadFile` event is recorded under.
const READ_FILE: &str = "beforeReadFile";

/// Cursor.
pub(crate) struct Cursor;

impl Contract for Cursor {
    fn name(&self) -> &'static str {
        "cursor"
    }

    fn title(&self) -> &'static str {
        "Cursor"
    }

    fn parse(&self, value: &Value) -> Result<Event, String> {
        let name = event::event_name(value, "hook_event_name")?;
        let (moment, agent_tool, params, tool, input) = match name {
            "beforeShellExecution" | "afterShellExecution" => {
                let command = event::required(value, "command")?;
                let moment = if name == "beforeShellExecution" {
                    Moment::Before
                } else {
                    Moment::After(Ok(json!({"output": event::text(value, "output")})))
                };
                let params = json!({"command": command});
                (
                    moment,
                    "Shell".to_owned(),
                    params.clone(),
                    "Bash".to_owned(),
                    params,
                )
            }
            "beforeMCPExecution" | "afterMCPExecution" => {
                let tool = event::required(value, "tool_name")?.to_owned();
                let params = event::input_value(value.get("tool_input"));
                let moment = if name == "beforeMCPExecution" {
                    Moment::Before
                } else {
                    Moment::After(Ok(event::input_value(value.get("result_json"))))
                };
                (moment, tool.clone(), params.clone(), tool, params)
            }
            "beforeReadFile" => {
                let path = event::required(value, "file_path")?;
                let params = json!({"file_path": path});
                (
                    Moment::Before,
                    READ_FILE.to_owned(),
                    params.clone(),
                    "Read".to_owned(),
                    params,
                )
            }
            "afterFileEdit" => {
                let path = event::required(value, "file_path")?;
                let edits = value.get("edits").cloned().unwrap_or(Value::Null);
                let params = json!({"file_path": path, "edits": edits});
                (
                    Moment::Reported(json!({"file_path": path})),
                    "afterFileEdit".to_owned(),
                    params,
                    "Edit".to_owned(),
                    json!({"file_path": path}),
                )
            }
            _ => {
                return Ok(Event {
                    moment: Moment::Before,
                    call: None,
                })
            }
        };
        let root = value
            .get("workspace_roots")
            .and_then(Value::as_array)
            .and_then(|roots| roots.first())
            .and_then(Value::as_str)
            .map(std::path::PathBuf::from);
        Ok(Event {
            moment,
            call: Some(ToolCall {
                tool,
                input,
                agent_tool,
                params,
                cwd: event::text(value, "cwd").map(str::to_owned),
                session: event::text(value, "conversation_id").map(str::to_owned),
                project_dir: root,
            }),
        })
    }

    fn before(&self, _moment: &Moment, ruling: &Ruling) -> Value {
        let (permission, reason) = match ruling {
            Ruling::Allow(reason) => ("allow", reason),
            Ruling::Ask(reason) => ("ask", reason),
            Ruling::Deny(reason) => ("deny", reason),
            Ruling::Abstain => return json!({}),
        };
        json!({
            "permission": permission,
            "user_message": reason,
            "agent_message": reason,
            "userMessage": reason,
            "agentMessage": reason,
        })
    }

    fn after(&self, note: &AfterNote) -> Value {
        event::logged_after(note)
    }

    fn enforces_ask(&self, call: &ToolCall) -> bool {
        // `beforeReadFile` answers allow or deny only.
        call.agent_tool != READ_FILE
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file read is judged by its path: the content Cursor sends along never becomes
    /// the call's params (hashed, previewed) or its input.
    #[test]
    fn a_file_read_is_its_path_and_never_its_content() {
        let event = json!({
            "hook_event_name": "beforeReadFile",
            "conversation_id": "c", "generation_id": "g", "workspace_roots": ["/app"],
            "file_path": "/app/.env", "content": "API_KEY=sk-CONTENT", "attachments": [],
        });
        let call = Cursor.parse(&event).unwrap().call.unwrap();
        assert_eq!(call.params, json!({"file_path": "/app/.env"}));
        assert_eq!(call.input, json!({"file_path": "/app/.env"}));
        assert_eq!(
            (call.tool.as_str(), call.agent_tool.as_str()),
            ("Read", READ_FILE)
        );
        assert!(!Cursor.enforces_ask(&call));
    }
}

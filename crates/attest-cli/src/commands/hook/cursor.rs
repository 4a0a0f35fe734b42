//! Cursor's hook contract (<https://cursor.com/docs/hooks>, "Hooks"; `.cursor/hooks.json`).
//!
//! In: every event has `hook_event_name`, `conversation_id`, `generation_id` and
//! `workspace_roots` (and Cursor sets `CURSOR_PROJECT_DIR` to the workspace root).
//!
//! - `beforeShellExecution` / `afterShellExecution` carry `command` and `cwd` (and after,
//!   `output`).
//! - `beforeMCPExecution` / `afterMCPExecution` carry `tool_name` (the server's own name
//!   for the tool), `tool_input` (a JSON text), `mcp_server_name` (the server's key in
//!   `mcp.json`) and its `url` or `command` (and after, `result_json`). The call is
//!   judged as `mcp__<server>__<tool>`, and that name (with the server) is its tool in the
//!   call's digest, so an approval for one server's tool never covers another's.
//! - `beforeReadFile` carries `file_path`, the file's `content` and `attachments` (only
//!   the path is read: the content never reaches the ledger); `afterFileEdit` carries
//!   `file_path` and `edits`.
//! - `preToolUse` / `postToolUse` / `postToolUseFailure`, the generic events that fire
//!   for every tool, carry `tool_name` (`Shell`, `Read`, `Write`, `Grep`, `Delete`,
//!   `Task`, MCP tools as `MCP:<tool_name>` …), `tool_input` (an object), `tool_use_id`
//!   and `cwd`; after, `tool_output` (a JSON text) and `duration`, or on a failure
//!   `error_message` and `failure_type` (`error`, `timeout`, `permission_denied`).
//!
//! One event owns each call, so a call is judged, counted and recorded once although
//! Cursor fires two hooks for it: a shell command belongs to `beforeShellExecution` /
//! `afterShellExecution` (they can ask), an MCP tool to `beforeMCPExecution` /
//! `afterMCPExecution` (they name the server), a file read to `beforeReadFile`; the
//! generic events govern every other tool (file writes and deletes, searches, web
//! fetches, subagents, tools Attest does not know) and answer the owned ones with a plain
//! allow (the owning event decides). The input fields of those tools are not published;
//! a file tool's path is read from `file_path`, `path`, `target_file` or
//! `relative_path`, and a file tool without any is judged as the riskiest write.
//!
//! Out (exit 0): before a shell command or MCP tool, `permission` (`allow`, `deny`,
//! `ask`) with the message shown to the person and the one sent to the model, under both
//! spellings Cursor's documentation has used (`userMessage`/`agentMessage` at hooks'
//! launch in 1.7, `user_message`/`agent_message` since). `beforeReadFile` and
//! `preToolUse` enforce `allow` or `deny` only (Cursor accepts `ask` from `preToolUse`
//! but does not enforce it), so an ask there is a deny with the reason; `preToolUse`
//! always answers with a `permission` (an answer without one is treated as invalid and
//! blocks). After a call, what the model must know (a read-back that did not match, a
//! record that failed) goes in `additional_context`, which `postToolUse` injects after
//! the tool result (the other after-events discard their answer; it is in the hook's log).

use std::time::Duration;

use serde_json::{json, Value};

use super::event::{self, AfterNote, Contract, Event, Moment, Ruling, ToolCall};

/// The agent tool a `beforeReadFile` event is recorded under.
const READ_FILE: &str = "beforeReadFile";

/// Cursor's shell tool, as `beforeShellExecution` calls are recorded and as the generic
/// events name it.
const SHELL: &str = "Shell";

/// The generic events: they fire for every tool.
const PRE_TOOL_USE: &str = "preToolUse";
const POST_TOOL_USE: &str = "postToolUse";
const POST_TOOL_USE_FAILURE: &str = "postToolUseFailure";

/// The input fields a file tool's path may come under.
const PATH_FIELDS: [&str; 4] = ["file_path", "path", "target_file", "relative_path"];

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
                    SHELL.to_owned(),
                    params.clone(),
                    "Bash".to_owned(),
                    params,
                )
            }
            "beforeMCPExecution" | "afterMCPExecution" => {
                let tool = mcp_tool(
                    event::text(value, "mcp_server_name"),
                    event::required(value, "tool_name")?,
                );
                let params = event::input_value(value.get("tool_input"))?;
                let moment = if name == "beforeMCPExecution" {
                    Moment::Before
                } else {
                    Moment::After(Ok(event::output_value(value.get("result_json"))))
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
                // Installed by earlier versions of Attest (`postToolUse` now records
                // edits): still recorded for settings that name it.
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
            PRE_TOOL_USE | POST_TOOL_USE | POST_TOOL_USE_FAILURE => {
                let agent_tool = event::required(value, "tool_name")?;
                if owned_elsewhere(agent_tool) {
                    return Ok(nothing_to_govern());
                }
                let moment = match name {
                    PRE_TOOL_USE => Moment::Before,
                    POST_TOOL_USE => {
                        Moment::After(Ok(event::output_value(value.get("tool_output"))))
                    }
                    _ => match event::text(value, "failure_type") {
                        // Denied (by the person, another hook or Attest): it did not run.
                        Some("permission_denied") => return Ok(nothing_to_govern()),
                        _ => Moment::After(Err(event::text(value, "error_message")
                            .unwrap_or("the tool failed")
                            .to_owned())),
                    },
                };
                let params = event::input_value(value.get("tool_input"))?;
                let (tool, input) = canonical(agent_tool, &params);
                (moment, agent_tool.to_owned(), params, tool, input)
            }
            _ => return Ok(nothing_to_govern()),
        };
        let root = super::project_from_env(Some("CURSOR_PROJECT_DIR")).or_else(|| {
            value
                .get("workspace_roots")
                .and_then(Value::as_array)
                .and_then(|roots| roots.first())
                .and_then(Value::as_str)
                .map(std::path::PathBuf::from)
        });
        Ok(Event {
            moment,
            call: Some(ToolCall {
                tool,
                input,
                readings: Vec::new(),
                agent_tool,
                params,
                cwd: event::text(value, "cwd").map(str::to_owned),
                session: event::text(value, "conversation_id").map(str::to_owned),
                project_dir: root,
                unprompted: None,
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
        event::logged_after(note);
        let lines: Vec<&str> = [&note.unrecorded, &note.context]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if lines.is_empty() {
            return json!({});
        }
        json!({"additional_context": lines.join("\n")})
    }

    fn nothing(&self, event: &Value) -> Value {
        // `preToolUse` reads a missing `permission` as an invalid answer and blocks.
        if event::text(event, "hook_event_name") == Some(PRE_TOOL_USE) {
            return json!({"permission": "allow"});
        }
        json!({})
    }

    fn enforces_ask(&self, call: &ToolCall) -> bool {
        // Only `beforeShellExecution` and `beforeMCPExecution` put an ask to the person;
        // `beforeReadFile` and `preToolUse` answer allow or deny.
        call.agent_tool == SHELL || call.agent_tool.starts_with("mcp__")
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
}

/// An event about no call Attest governs here.
fn nothing_to_govern() -> Event {
    Event {
        moment: Moment::Before,
        call: None,
    }
}

/// Whether a generic event's tool belongs to an event of its own (shell commands, MCP
/// tools and file reads), which judges and records it instead.
fn owned_elsewhere(tool: &str) -> bool {
    let mcp = tool
        .get(..4)
        .is_some_and(|head| head.eq_ignore_ascii_case("MCP:"))
        || tool
            .get(..5)
            .is_some_and(|head| head.eq_ignore_ascii_case("mcp__"));
    tool == SHELL || tool == "Read" || mcp
}

/// An MCP tool as `detect` names it: `mcp__<server>__<tool>` with the server's key from
/// `mcp.json` (a name that already has the prefix is kept; without a server, `mcp__<tool>`).
fn mcp_tool(server: Option<&str>, tool: &str) -> String {
    if tool
        .get(..5)
        .is_some_and(|head| head.eq_ignore_ascii_case("mcp__"))
    {
        return tool.to_owned();
    }
    match server.map(str::trim).filter(|server| !server.is_empty()) {
        Some(server) => format!("mcp__{server}__{tool}"),
        None => format!("mcp__{tool}"),
    }
}

/// The tools the generic events govern under the names and fields `detect` reads.
fn canonical(tool: &str, input: &Value) -> (String, Value) {
    let path = || {
        PATH_FIELDS
            .iter()
            .find_map(|key| event::text(input, key))
            .unwrap_or_default()
    };
    match tool {
        // A delete is judged as a write to its path.
        "Write" | "Edit" | "StrReplace" | "MultiEdit" | "Delete" | "EditNotebook" => {
            ("Write".to_owned(), json!({"file_path": path()}))
        }
        "Grep" | "Glob" | "LS" => ("Read".to_owned(), json!({})),
        "WebFetch" => match event::text(input, "url") {
            Some(url) => ("WebFetch".to_owned(), json!({"url": url})),
            None => ("WebFetch".to_owned(), json!({})),
        },
        "WebSearch" | "Task" => (tool.to_owned(), json!({})),
        other => (other.to_owned(), input.clone()),
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

    /// The generic events leave shell commands, MCP tools and reads to their own events,
    /// and cannot ask; the MCP events name the server, so one server's approval is not
    /// another's.
    #[test]
    fn each_call_has_one_owning_event() {
        let generic = |tool: &str, input: Value| {
            json!({
                "hook_event_name": "preToolUse", "conversation_id": "c",
                "workspace_roots": ["/app"], "cwd": "/app",
                "tool_name": tool, "tool_input": input, "tool_use_id": "t1",
            })
        };
        for tool in [
            "Shell",
            "Read",
            "MCP:create_issue",
            "mcp__github__create_issue",
        ] {
            let event = Cursor.parse(&generic(tool, json!({}))).unwrap();
            assert!(event.call.is_none(), "{tool}");
        }
        let write = Cursor
            .parse(&generic("StrReplace", json!({"path": "/app/src/a.rs"})))
            .unwrap()
            .call
            .unwrap();
        assert_eq!(
            (write.tool.as_str(), &write.input),
            ("Write", &json!({"file_path": "/app/src/a.rs"}))
        );
        assert!(!Cursor.enforces_ask(&write));
        let unnamed = Cursor
            .parse(&generic("Write", json!({"contents": "x"})))
            .unwrap()
            .call
            .unwrap();
        assert_eq!(unnamed.input, json!({"file_path": ""}));
        let mcp = |server: &str| {
            Cursor
                .parse(&json!({
                    "hook_event_name": "beforeMCPExecution", "conversation_id": "c",
                    "workspace_roots": ["/app"], "tool_name": "create_issue",
                    "tool_input": "{\"title\":\"x\"}", "mcp_server_name": server,
                }))
                .unwrap()
                .call
                .unwrap()
        };
        let (github, linear) = (mcp("github"), mcp("linear"));
        assert_eq!(github.tool, "mcp__github__create_issue");
        assert_ne!(github.agent_tool, linear.agent_tool);
        assert!(Cursor.enforces_ask(&github));
    }
}

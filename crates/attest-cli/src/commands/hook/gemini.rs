//! Gemini CLI's hook contract (<https://geminicli.com/docs/hooks/reference>).
//!
//! In: `hook_event_name` (`BeforeTool`, `AfterTool`), `session_id`, `cwd`, `tool_name`,
//! `tool_input`, and after the call `tool_response` (`llmContent`, `returnDisplay`,
//! `error`). Built-in tools are `run_shell_command` (`command`), `write_file` and
//! `replace` (`file_path`), `read_file`, `read_many_files`, `list_directory`, `glob`,
//! `search_file_content`, `web_fetch` (`prompt`, holding the URLs), `google_web_search`;
//! MCP tools are `mcp_<server>_<tool>` (Gemini CLI's `MCP_TOOL_PREFIX` and `_` separator),
//! with `mcp_context` (`server_name`, `tool_name`) beside them, read first, since a server
//! name with a `_` makes the name ambiguous. Gemini CLI sets `GEMINI_PROJECT_DIR`.
//!
//! Out (exit 0): `decision` (`allow` or `deny`) with a `reason` the model reads. There is
//! no ask, so an ask is a deny with the reason. After the call,
//! `hookSpecificOutput.additionalContext` is appended to the tool result.

use std::time::Duration;

use serde_json::{json, Value};

use super::event::{self, AfterNote, Contract, Event, Moment, Ruling, ToolCall};

/// Gemini CLI.
pub(crate) struct Gemini;

impl Contract for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn title(&self) -> &'static str {
        "Gemini CLI"
    }

    fn parse(&self, value: &Value) -> Result<Event, String> {
        let moment = match event::event_name(value, "hook_event_name")? {
            "BeforeTool" => Moment::Before,
            "AfterTool" => {
                let response = value.get("tool_response").cloned().unwrap_or(Value::Null);
                match response.get("error").filter(|error| !error.is_null()) {
                    Some(error) => Moment::After(Err(error
                        .as_str()
                        .map_or_else(|| error.to_string(), str::to_owned))),
                    // What the model gets is the tool's result.
                    None => {
                        Moment::After(Ok(response.get("llmContent").cloned().unwrap_or(response)))
                    }
                }
            }
            _ => {
                return Ok(Event {
                    moment: Moment::Before,
                    call: None,
                })
            }
        };
        let agent_tool = event::required(value, "tool_name")?.to_owned();
        let params = value
            .get("tool_input")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let (tool, input) = canonical(&agent_tool, &params, value.get("mcp_context"))?;
        let cwd = event::text(value, "cwd").map(str::to_owned);
        let project_dir = super::project_from_env(Some("GEMINI_PROJECT_DIR"))
            .or_else(|| cwd.as_deref().map(std::path::PathBuf::from));
        Ok(Event {
            moment,
            call: Some(ToolCall {
                tool,
                input,
                readings: Vec::new(),
                agent_tool,
                params,
                cwd,
                session: event::text(value, "session_id").map(str::to_owned),
                project_dir,
                unprompted: None,
            }),
        })
    }

    fn before(&self, _moment: &Moment, ruling: &Ruling) -> Value {
        match ruling {
            Ruling::Allow(reason) => json!({"decision": "allow", "reason": reason}),
            Ruling::Deny(reason) | Ruling::Ask(reason) => {
                json!({"decision": "deny", "reason": reason})
            }
            Ruling::Abstain => json!({}),
        }
    }

    fn after(&self, note: &AfterNote) -> Value {
        let context = [note.unrecorded.as_deref(), note.context.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("\n");
        if context.is_empty() {
            return json!({});
        }
        json!({
            "hookSpecificOutput": {
                "hookEventName": "AfterTool",
                "additionalContext": context,
            }
        })
    }

    fn enforces_ask(&self, _call: &ToolCall) -> bool {
        false
    }

    fn timeout(&self) -> Duration {
        // A hook's `timeout` defaults to 60000 ms.
        Duration::from_secs(60)
    }
}

/// Gemini's built-in tools under the names and fields `detect` reads.
/// A field the call is judged by that is missing or not a string is `Err`; so is an
/// `mcp_context` without its two names.
fn canonical(
    tool: &str,
    input: &Value,
    mcp_context: Option<&Value>,
) -> Result<(String, Value), String> {
    Ok(match tool {
        // `dir_path`: the directory the command runs in, under the project.
        "run_shell_command" => (
            "Bash".to_owned(),
            match event::optional_field(input, "dir_path")? {
                Some(dir) => json!({"command": event::field(input, "command")?, "dir_path": dir}),
                None => json!({"command": event::field(input, "command")?}),
            },
        ),
        "write_file" | "replace" | "edit" => (
            "Write".to_owned(),
            json!({"file_path": event::field(input, "file_path")?}),
        ),
        "read_file" | "read_many_files" | "list_directory" | "glob" | "search_file_content" => {
            ("Read".to_owned(), json!({}))
        }
        "web_fetch" => match event::optional_field(input, "prompt")?.and_then(first_url) {
            Some(url) => ("WebFetch".to_owned(), json!({"url": url})),
            None => ("WebFetch".to_owned(), json!({})),
        },
        "google_web_search" => ("WebSearch".to_owned(), json!({})),
        other => (mcp_tool(other, mcp_context)?, input.clone()),
    })
}

/// An MCP tool as `detect` names it, `mcp__<server>__<tool>`: from `mcp_context` (its
/// `server_name` and `tool_name`) when Gemini CLI sends one, else from the name
/// `mcp_<server>_<tool>` split as Gemini CLI's own `parseMcpToolName` splits it (the
/// server up to the first `_`); any other name as it is.
fn mcp_tool(name: &str, mcp_context: Option<&Value>) -> Result<String, String> {
    match mcp_context {
        None | Some(Value::Null) => {}
        Some(context) => {
            let server = event::field(context, "server_name");
            let tool = event::field(context, "tool_name");
            return match (server, tool) {
                (Ok(server), Ok(tool)) if !server.is_empty() && !tool.is_empty() => {
                    Ok(format!("mcp__{server}__{tool}"))
                }
                _ => Err("`mcp_context` has no `server_name` and `tool_name` strings".to_owned()),
            };
        }
    }
    if name.starts_with("mcp__") {
        return Ok(name.to_owned());
    }
    match name
        .strip_prefix("mcp_")
        .and_then(|rest| rest.split_once('_'))
    {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => {
            Ok(format!("mcp__{server}__{tool}"))
        }
        _ => Ok(name.to_owned()),
    }
}

/// The first `http://` or `https://` URL in a prompt (`web_fetch` takes URLs in prose).
fn first_url(prompt: &str) -> Option<String> {
    prompt
        .split_whitespace()
        .find(|word| word.starts_with("http://") || word.starts_with("https://"))
        .map(|url| url.trim_end_matches(['.', ',', ')', '"', '\'']).to_owned())
}

//! GitHub Copilot CLI's hook contract (<https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference>,
//! hooks in `.github/hooks/*.json`).
//!
//! In: `preToolUse` gets `timestamp`, `sessionId` (the row's run), `cwd`, `toolName` and
//! `toolArgs` (the arguments as a JSON text, or as an object: the real program sends
//! both); `postToolUse` gets the same and `toolResult` (`resultType`: `success`,
//! `failure` or `denied`, and `textResultForLlm`). There is no event name in the input:
//! an event with a `toolResult` is the one after the call. Tools are `bash`
//! (`command`), `create` / `edit` (`path`), `view` (`path`), `web_fetch` (`url`) and MCP
//! tools. The hooks reference gives no example of an MCP tool's `toolName`; Copilot's own
//! tool layer names one `<server>-<tool>` (`github-mcp-server-list_issues` for the
//! built-in GitHub server: github/copilot-sdk#869, #861), and custom agents' `tools:`
//! lists name one `<server>/<tool>`. Both are judged as `mcp__<server>__<tool>` where the
//! server can be told apart (the slash form, and the built-in `github-mcp-server-`); any
//! other name is judged by its words, which name the system (`linear-create_issue`).
//!
//! Out (exit 0): before a call, `permissionDecision` with `permissionDecisionReason`.
//! A deny is what is sure to be enforced (an ask was not honoured by every release),
//! so an ask is a deny with the reason, and an allow says nothing (`{}`). Output after a
//! call is not read.

use std::time::Duration;

use serde_json::{json, Value};

use super::event::{self, AfterNote, Contract, Event, Moment, Ruling, ToolCall};

/// GitHub Copilot CLI.
pub(crate) struct Copilot;

impl Contract for Copilot {
    fn name(&self) -> &'static str {
        "copilot"
    }

    fn title(&self) -> &'static str {
        "GitHub Copilot CLI"
    }

    fn parse(&self, value: &Value) -> Result<Event, String> {
        if !value.is_object() {
            return Err("not a JSON object".to_owned());
        }
        let agent_tool = event::required(value, "toolName")?.to_owned();
        let params = event::input_value(value.get("toolArgs"))?;
        let moment = match value.get("toolResult") {
            None | Some(Value::Null) => Moment::Before,
            Some(result) => match event::text(result, "resultType") {
                Some("failure") => Moment::After(Err(event::text(result, "textResultForLlm")
                    .unwrap_or("the tool failed")
                    .to_owned())),
                // A call the user or another hook denied did not run: nothing to record.
                Some("denied") => {
                    return Ok(Event {
                        moment: Moment::Before,
                        call: None,
                    })
                }
                _ => Moment::After(Ok(result.clone())),
            },
        };
        let (tool, input) = canonical(&agent_tool, &params)?;
        let cwd = event::text(value, "cwd").map(str::to_owned);
        Ok(Event {
            moment,
            call: Some(ToolCall {
                tool,
                input,
                readings: Vec::new(),
                agent_tool,
                params,
                project_dir: cwd.as_deref().map(std::path::PathBuf::from),
                unprompted: None,
                cwd,
                // Copilot CLI names the session `sessionId`; `session_id` as the other
                // agents do is read too.
                session: event::text(value, "sessionId")
                    .or_else(|| event::text(value, "session_id"))
                    .map(str::to_owned),
            }),
        })
    }

    fn before(&self, _moment: &Moment, ruling: &Ruling) -> Value {
        match ruling {
            Ruling::Deny(reason) | Ruling::Ask(reason) => json!({
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }),
            Ruling::Allow(_) | Ruling::Abstain => json!({}),
        }
    }

    fn after(&self, note: &AfterNote) -> Value {
        event::logged_after(note)
    }

    fn enforces_ask(&self, _call: &ToolCall) -> bool {
        false
    }

    fn timeout(&self) -> Duration {
        // `timeoutSec` defaults to 30.
        Duration::from_secs(30)
    }
}

/// Copilot's built-in tools under the names and fields `detect` reads.
/// A field the call is judged by that is missing or not a string is `Err`.
fn canonical(tool: &str, input: &Value) -> Result<(String, Value), String> {
    let field = |key: &str| event::field(input, key);
    Ok(match tool {
        "bash" | "shell" | "powershell" => {
            ("Bash".to_owned(), json!({"command": field("command")?}))
        }
        "create" | "edit" | "write" | "str_replace_editor" => {
            ("Write".to_owned(), json!({"file_path": field("path")?}))
        }
        "view" | "read" | "glob" | "grep" => ("Read".to_owned(), json!({})),
        "web_fetch" | "fetch" => ("WebFetch".to_owned(), json!({"url": field("url")?})),
        other => (mcp_tool(other), input.clone()),
    })
}

/// The built-in GitHub MCP server's key, the prefix of its tools' names.
const GITHUB_SERVER: &str = "github-mcp-server";

/// An MCP tool under the name `detect` reads best, `mcp__<server>__<tool>`, where the
/// server can be told from the tool; any other name as it is.
fn mcp_tool(name: &str) -> String {
    if let Some((server, tool)) = name.split_once('/') {
        if !server.is_empty() && !tool.is_empty() && !tool.contains('/') {
            return format!("mcp__{server}__{tool}");
        }
    }
    match name
        .strip_prefix(GITHUB_SERVER)
        .and_then(|rest| rest.strip_prefix('-'))
    {
        Some(tool) if !tool.is_empty() => format!("mcp__{GITHUB_SERVER}__{tool}"),
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_tools_keep_their_server() {
        for (name, tool) in [
            (
                "github-mcp-server-create_issue",
                "mcp__github-mcp-server__create_issue",
            ),
            ("linear/create_issue", "mcp__linear__create_issue"),
            ("mcp__github__create_issue", "mcp__github__create_issue"),
            ("linear-create_issue", "linear-create_issue"),
            ("github-mcp-server-", "github-mcp-server-"),
            ("/x", "/x"),
        ] {
            assert_eq!(canonical(name, &json!({})).unwrap().0, tool, "{name}");
        }
    }
}

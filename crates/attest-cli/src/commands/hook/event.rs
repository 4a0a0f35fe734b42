//! The agent-neutral side of a hook: one tool call, when it happens, what Attest rules,
//! and the [`Contract`] each agent module implements to translate its own JSON.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// When in a call's life an event comes.
#[derive(Debug, Clone)]
pub(crate) enum Moment {
    /// Before the tool runs: allow, ask or deny.
    Before,
    /// The agent is about to show its own permission prompt (Claude Code's
    /// `PermissionRequest`): deny what policy refuses, say nothing otherwise.
    Permission,
    /// The tool ran and returned (`Ok`, its output) or failed (`Err`, the error).
    After(Result<Value, String>),
    /// The agent reports a call that no hook could stop first (Cursor's file edits):
    /// recorded as it happened (decision `recorded`), with what it returned.
    Reported(Value),
}

/// One event: when, and the call it is about (`None`: nothing Attest governs, such as a
/// prompt submitted or a session started).
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) moment: Moment,
    pub(crate) call: Option<ToolCall>,
}

/// One tool call, in the vocabulary `detect` knows (Claude Code's tool names: `Bash`
/// with `command`, `Write`/`Edit` with `file_path`, `Read`, `WebFetch` with `url`,
/// `WebSearch`, MCP tools as `mcp__server__tool`), whatever agent made it.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    /// The tool, as `detect` names it.
    pub(crate) tool: String,
    /// The input `detect` reads (the fields it looks for, under its names).
    pub(crate) input: Value,
    /// Other inputs the call may be read as (each further file a patch touches): it is
    /// judged by its riskiest reading.
    pub(crate) readings: Vec<Value>,
    /// The tool's name as the agent sent it (part of the call's digest).
    pub(crate) agent_tool: String,
    /// The input exactly as the agent sent it: the action's params (hashed, never stored)
    /// and part of the call's digest.
    pub(crate) params: Value,
    /// The working directory the agent reports (part of the call's digest).
    pub(crate) cwd: Option<String>,
    /// The agent's session (recorded as the run).
    pub(crate) session: Option<String>,
    /// The project directory whose settings, policy and ledger govern the call.
    pub(crate) project_dir: Option<PathBuf>,
    /// The agent's mode, when the agent says it prompts nobody for this call (Claude
    /// Code's `permission_mode` `bypassPermissions` or `dontAsk`): an ask cannot go to
    /// its prompt.
    pub(crate) unprompted: Option<String>,
}

/// What Attest rules before a call, with the reason the model or the person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ruling {
    /// Let it run.
    Allow(String),
    /// Put it to the agent's own prompt (only where the agent enforces one).
    Ask(String),
    /// Do not let it run.
    Deny(String),
    /// No opinion: the agent goes on as it would without the hook.
    Abstain,
}

/// What Attest says after a call ran.
#[derive(Debug, Clone, Default)]
pub(crate) struct AfterNote {
    /// Told to the model (the agent's additional-context field): a result read back and
    /// found not to have happened.
    pub(crate) context: Option<String>,
    /// The call ran but could not be recorded.
    pub(crate) unrecorded: Option<String>,
}

/// One agent's hook contract: its events in, its answers out.
pub(crate) trait Contract: Sync {
    /// The agent's name as recorded (`claude-code`).
    fn name(&self) -> &'static str;
    /// The agent's name in sentences (`Claude Code`).
    fn title(&self) -> &'static str;
    /// Reads one event (already JSON); `Err` says why it is not one of the agent's.
    fn parse(&self, event: &Value) -> Result<Event, String>;
    /// The answer to a ruling before the call (or at its permission prompt).
    fn before(&self, moment: &Moment, ruling: &Ruling) -> Value;
    /// The answer after the call.
    fn after(&self, note: &AfterNote) -> Value;
    /// The answer to an event Attest has nothing to say about (`event`, as the agent
    /// sent it).
    fn nothing(&self, _event: &Value) -> Value {
        serde_json::json!({})
    }
    /// Whether the agent enforces an `ask` for `call` (puts it to its user and waits);
    /// where it does not, an ask is answered as a deny with the reason.
    fn enforces_ask(&self, call: &ToolCall) -> bool;
    /// The agent's own default hook timeout: a hook waiting for an approver answers well
    /// before it.
    fn timeout(&self) -> Duration;
    /// Whether the agent runs `call` with the input its hook answers instead of its own
    /// (Claude Code's `updatedInput`), so a shell command can be rewritten to run inside
    /// `attest sandbox`.
    fn rewrites_input(&self, _call: &ToolCall) -> bool {
        false
    }
    /// `answer` (an allow or an ask) telling the agent to run the call with `input`;
    /// only called where [`Contract::rewrites_input`] says the agent does.
    fn with_input(&self, answer: Value, _input: Value) -> Value {
        answer
    }
}

/// A string field of an object.
pub(crate) fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The required event name field, or why it is missing.
pub(crate) fn event_name<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    if !value.is_object() {
        return Err("not a JSON object".to_owned());
    }
    text(value, key).ok_or_else(|| format!("no `{key}` string"))
}

/// A required string field of a tool event, or why it is missing.
pub(crate) fn required<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    text(value, key).ok_or_else(|| format!("no `{key}` string"))
}

/// A string field of a tool's input that the call is judged by: `Err` when it is missing
/// or not a string (a command that is an array is not a read).
pub(crate) fn field<'a>(input: &'a Value, key: &str) -> Result<&'a str, String> {
    text(input, key).ok_or_else(|| format!("the tool input has no `{key}` string"))
}

/// An optional string field of a tool's input: `Err` when it is there but not a string.
pub(crate) fn optional_field<'a>(input: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("the tool input's `{key}` is not a string")),
    }
}

/// A tool input that an agent sends as a JSON text (Cursor's MCP input, Copilot's
/// `toolArgs`) or as an object; text that does not read as JSON one way only (too deep,
/// a lone surrogate, a key twice) is `Err`: the call cannot be judged.
pub(crate) fn input_value(value: Option<&Value>) -> Result<Value, String> {
    match value {
        Some(Value::String(text)) => super::json::parse(text.as_bytes())
            .map_err(|err| format!("the tool input is not JSON that reads one way: {err}")),
        Some(other) => Ok(other.clone()),
        None => Ok(Value::Object(serde_json::Map::new())),
    }
}

/// A tool's output that an agent sends as a JSON text or as a value: text that does not
/// parse stays a string, so it is still hashed.
pub(crate) fn output_value(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(text)) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        Some(other) => other.clone(),
        None => Value::Object(serde_json::Map::new()),
    }
}

/// The answer of an agent that reads nothing back after a call: what Attest has to say
/// goes to the hook's log (stderr) instead.
pub(crate) fn logged_after(note: &AfterNote) -> Value {
    for line in [&note.unrecorded, &note.context].into_iter().flatten() {
        eprintln!("attest: hook: {line}");
    }
    Value::Object(serde_json::Map::new())
}

/// What an MCP tool returned, as the value to hash and read back: its structured content,
/// else its one text block when that is a JSON object (as the MCP proxy reads a result),
/// else the output unchanged. Agents pass an MCP result on as the protocol's
/// `{"content": [...]}`, as the content blocks alone, or (Gemini CLI) as text parts.
pub(crate) fn tool_result(output: Value) -> Value {
    if let Some(structured) = output.get("structuredContent").filter(|v| v.is_object()) {
        return structured.clone();
    }
    let blocks = output.get("content").unwrap_or(&output);
    if let Some([only]) = blocks.as_array().map(Vec::as_slice) {
        // An MCP text block `{"type": "text", "text": …}`, or a Gemini part `{"text": …}`.
        if matches!(
            only.get("type").and_then(Value::as_str),
            Some("text") | None
        ) {
            if let Some(Ok(value @ Value::Object(_))) = only
                .get("text")
                .and_then(Value::as_str)
                .map(serde_json::from_str::<Value>)
            {
                return value;
            }
        }
    }
    output
}

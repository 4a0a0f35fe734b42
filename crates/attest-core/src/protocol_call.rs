//! A call as its protocol sees it → the [`Action`]: the one place an action is
//! described.
//!
//! Each door passes the facts its protocol carries (an MCP `tools/call` with its tool's
//! annotations and `_meta`, an HTTP request with its headers and body, a shell command, a
//! coding agent's tool and input, a framework's function call with what its decorator
//! declares) and [`Attest::action`] returns the action: detected with the configured
//! registry (its hosts, its tool overrides), refined by OpenAPI operation ids and the
//! tool's own hints, its path parameters filled by the read-back drivers, and the agent,
//! person and run taken from where the protocol says them. What stays in a door is
//! protocol translation only.
//!
//! ```
//! use attest_core::{Attest, ProtocolCall, McpCall};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let ledger = attest_ledger::Ledger::open(dir.path().join("l.sqlite"), Default::default())?;
//! let attest = Attest::builder().ledger(ledger).build()?;
//! let action = attest.action(ProtocolCall::Mcp(McpCall {
//!     server: "github",
//!     tool: "create_issue",
//!     arguments: serde_json::json!({"title": "x"}),
//!     ..McpCall::default()
//! }));
//! assert_eq!((action.system.as_str(), action.verb.as_str()), ("github", "create"));
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use attest_policy::{Action, Verb};
use serde_json::{json, Map, Value};

use crate::detect::{apply_hints, DetectInput, OperationIds, Registry, ToolHints};
use crate::protected::{Protected, ProtectedSet};
use crate::verification::ReadBack;
use crate::Attest;

/// A call, in its protocol's own terms.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ProtocolCall<'a> {
    /// An MCP `tools/call`.
    Mcp(McpCall<'a>),
    /// An HTTP request (the gateway).
    Http(HttpCall<'a>),
    /// A shell command line.
    Shell(ShellCall<'a>),
    /// A coding agent's own tool (Claude Code's `Bash`, `Write`, `mcp__server__tool`).
    CodingAgent(CodingAgentCall<'a>),
    /// A function an agent framework calls (a decorated Python function, a LangChain tool).
    Function(FunctionCall<'a>),
    /// A vendor SDK's method (`stripe.Refund.create`).
    Sdk(SdkCall<'a>),
}

/// What the caller says about a call beyond its protocol: each, when set, is recorded
/// (the agent, person and run beat the pipeline's defaults; the target beats detection's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallContext<'a> {
    /// The agent making the call.
    pub agent: Option<&'a str>,
    /// The person it acts for.
    pub actor: Option<&'a str>,
    /// The run (session, job) it belongs to.
    pub run: Option<&'a str>,
    /// The kind of thing acted on.
    pub target: Option<&'a str>,
}

/// An MCP `tools/call`.
#[derive(Debug, Clone, Default)]
pub struct McpCall<'a> {
    /// The server's name.
    pub server: &'a str,
    /// The user named the server (`--server hr`): it is the system, known or not. A name
    /// guessed from a command or a URL is only a hint.
    pub server_named: bool,
    /// The tool's name.
    pub tool: &'a str,
    /// The call's arguments (the action's params).
    pub arguments: Value,
    /// The tool's own annotations (`readOnlyHint`, …), which MCP calls untrusted hints.
    pub annotations: ToolHints,
    /// The request's `_meta` (`attest/run` or `runId` names the call's run).
    pub meta: Option<&'a Map<String, Value>>,
    /// What the caller says beyond the protocol.
    pub context: CallContext<'a>,
}

/// An HTTP request.
#[derive(Debug, Clone, Default)]
pub struct HttpCall<'a> {
    /// The method.
    pub method: &'a str,
    /// The URL, absolute (a forwarding proxy's) or relative.
    pub url: &'a str,
    /// The headers (method overrides are read; `X-Attest-Agent`, `X-Attest-Actor` and
    /// `X-Attest-Run` name the agent, person and run; `Content-Type` says how to read
    /// the body).
    pub headers: Vec<(&'a str, &'a [u8])>,
    /// The body.
    pub body: &'a [u8],
    /// What the caller says beyond the protocol (beats the identity headers).
    pub context: CallContext<'a>,
}

/// A shell command line.
#[derive(Debug, Clone, Default)]
pub struct ShellCall<'a> {
    /// The command line.
    pub command: &'a str,
    /// What the caller says beyond the protocol.
    pub context: CallContext<'a>,
}

/// A coding agent's own tool call.
#[derive(Debug, Clone, Default)]
pub struct CodingAgentCall<'a> {
    /// The coding agent (`claude-code`, `claude-agent-sdk`): recorded as the framework.
    pub agent: &'a str,
    /// The tool's name (`Bash`, `Write`, `mcp__github__create_issue`).
    pub tool: &'a str,
    /// The tool's input as detection reads it (the action's params unless `params`).
    pub input: Value,
    /// The input exactly as the agent sent it, when `input` is a translation of it into
    /// the tool vocabulary detection knows (another agent's shell or edit tool): the
    /// action's params.
    pub params: Option<Value>,
    /// The agent's session: the run.
    pub session: Option<&'a str>,
    /// Other inputs the same call may be read as (each further file one patch touches):
    /// the call is described by its riskiest reading.
    pub readings: Vec<Value>,
    /// The directory the agent runs the tool in (its event's `cwd`, absolute): relative
    /// paths the call writes are resolved against it (see [`crate::protected`]).
    pub cwd: Option<&'a str>,
    /// What the caller says beyond the protocol.
    pub context: CallContext<'a>,
}

/// A function an agent framework calls.
#[derive(Debug, Clone, Default)]
pub struct FunctionCall<'a> {
    /// The framework (`langchain`, `openai-agents`): recorded.
    pub framework: Option<&'a str>,
    /// The function's (or tool's) name.
    pub name: &'a str,
    /// The MCP server or toolkit it belongs to: a hint for the system.
    pub server: Option<&'a str>,
    /// Its arguments (the action's params).
    pub arguments: Value,
    /// The system its decorator declares; with `verb`, it wins over detection. Alone,
    /// the name's verb on this system.
    pub system: Option<&'a str>,
    /// The verb its decorator declares.
    pub verb: Option<Verb>,
    /// What the caller says beyond the protocol.
    pub context: CallContext<'a>,
}

/// A vendor SDK's method call.
#[derive(Debug, Clone, Default)]
pub struct SdkCall<'a> {
    /// The call's path (`stripe.Refund.create`, `gmail.users().messages().send()`).
    pub path: &'a str,
    /// Its arguments (the action's params).
    pub arguments: Value,
    /// What the caller says beyond the protocol.
    pub context: CallContext<'a>,
}

/// The headers naming the agent, the person it acts for, and its run.
pub const AGENT_HEADER: &str = "x-attest-agent";
/// See [`AGENT_HEADER`].
pub const ACTOR_HEADER: &str = "x-attest-actor";
/// See [`AGENT_HEADER`].
pub const RUN_HEADER: &str = "x-attest-run";

/// The longest identity (header, `_meta` run) recorded; a longer one is ignored.
const MAX_IDENTITY_BYTES: usize = 256;

impl Attest {
    /// The action `call` describes, as this pipeline's configuration sees it.
    pub fn action(&self, call: ProtocolCall<'_>) -> Action {
        let writes = self
            .protected()
            .map(|set| (set, protected_writes(set, &call)));
        let mut action = describe(self.registry(), self.operations(), self.readback(), call);
        if let Some((_, Some((protected, only_if_writing)))) = writes {
            if !only_if_writing || !reads_only(action.verb) {
                action.extra.protected = Some(protected.to_string());
            }
        }
        action
    }
}

/// The first protected path `call` writes, and whether it counts only when the call's
/// verb writes (a tool judged by its path arguments: `read_text_file` of a protected
/// file is a read).
fn protected_writes(set: &ProtectedSet, call: &ProtocolCall<'_>) -> Option<(Protected, bool)> {
    match call {
        ProtocolCall::CodingAgent(call) => {
            let inputs: Vec<&Value> = std::iter::once(&call.input)
                .chain(call.readings.iter())
                .collect();
            let cwd = call.cwd.map(std::path::Path::new);
            let mcp = call.tool.starts_with("mcp__");
            set.coding_agent_writes(call.tool, &inputs, cwd, mcp)
                .map(|found| (found, mcp))
        }
        // An MCP server started by this process reads relative paths in its directory.
        ProtocolCall::Mcp(call) => {
            let cwd = std::env::current_dir().ok();
            set.tool_writes(&call.arguments, cwd.as_deref())
                .map(|found| (found, true))
        }
        ProtocolCall::Shell(call) => {
            let cwd = std::env::current_dir().ok();
            set.shell_writes(call.command, cwd.as_deref())
                .map(|found| (found, false))
        }
        _ => None,
    }
}

/// Verbs that change nothing.
fn reads_only(verb: Verb) -> bool {
    matches!(verb, Verb::Read | Verb::Search | Verb::Get | Verb::List)
}

/// What describes calls, without the rest of a pipeline: the configured registry,
/// OpenAPI operation ids and read-back drivers ([`crate::setup::Settings::describer`]).
/// A command that judges a call without making it (`attest policy test`, `policy
/// explain`) describes it exactly as [`Attest::action`] does for the doors.
#[derive(Debug, Clone)]
pub struct Describer {
    registry: Arc<Registry>,
    operations: Arc<OperationIds>,
    readback: Option<Arc<ReadBack>>,
}

impl Describer {
    /// Describes with `registry`, `operations` and, when given, `readback`'s path
    /// parameters.
    pub fn new(
        registry: impl Into<Arc<Registry>>,
        operations: impl Into<Arc<OperationIds>>,
        readback: Option<Arc<ReadBack>>,
    ) -> Describer {
        Describer {
            registry: registry.into(),
            operations: operations.into(),
            readback,
        }
    }

    /// The action `call` describes: what [`Attest::action`] answers with the same parts.
    pub fn action(&self, call: ProtocolCall<'_>) -> Action {
        describe(
            &self.registry,
            &self.operations,
            self.readback.as_deref(),
            call,
        )
    }
}

/// The one description of a call: detected with `registry`, refined by `operations`, its
/// path parameters filled by `readback`.
fn describe(
    registry: &Registry,
    operations: &OperationIds,
    readback: Option<&ReadBack>,
    call: ProtocolCall<'_>,
) -> Action {
    let (mut action, context) = match call {
        ProtocolCall::Mcp(call) => {
            let input = if call.server_named {
                DetectInput::NamedServerTool {
                    name: call.tool,
                    server: call.server,
                }
            } else {
                DetectInput::Tool {
                    name: call.tool,
                    server: Some(call.server).filter(|s| !s.is_empty()),
                }
            };
            let mut action = registry.detect_action(&input, call.arguments);
            apply_hints(&mut action, &call.annotations);
            let mut context = call.context;
            if context.run.is_none() {
                context.run = call.meta.and_then(run_from_meta);
            }
            (action, context)
        }
        ProtocolCall::Http(call) => {
            let mut detection = registry.detect_http_request(
                call.method,
                call.url,
                call.headers.iter().copied(),
                Some(call.body),
            );
            let path = crate::detect::url::split_url(call.url).path;
            operations.refine(registry, call.method, path, &mut detection);
            let header = |name: &str| {
                call.headers
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case(name))
                    .and_then(|(_, value)| std::str::from_utf8(value).ok())
            };
            // A non-JSON body is kept byte for byte, and a form's fields are params.
            let params = crate::http_body::body_params(header("content-type"), call.body);
            let mut action = detection.into_action(params);
            DetectInput::Http {
                method: call.method,
                url: call.url,
                body: None,
            }
            .fill_extra(&mut action.extra);
            let identity = |name: &str| header(name).and_then(identity);
            let context = CallContext {
                agent: call.context.agent.or_else(|| identity(AGENT_HEADER)),
                actor: call.context.actor.or_else(|| identity(ACTOR_HEADER)),
                run: call.context.run.or_else(|| identity(RUN_HEADER)),
                target: call.context.target,
            };
            (action, context)
        }
        ProtocolCall::Shell(call) => {
            let input = DetectInput::Shell {
                command: call.command,
            };
            let action = registry.detect_action(&input, json!({"command": call.command}));
            (action, call.context)
        }
        ProtocolCall::CodingAgent(call) => {
            let reading = |input| DetectInput::CodingTool {
                name: call.tool,
                input,
            };
            let detected = |input| (reading(input), registry.detect(&reading(input)));
            // The riskiest reading; of equally risky ones, the first.
            let (input, detection) =
                call.readings
                    .iter()
                    .map(detected)
                    .fold(detected(&call.input), |best, next| {
                        if next.1.danger() > best.1.danger() {
                            next
                        } else {
                            best
                        }
                    });
            let params = call.params.clone().unwrap_or_else(|| call.input.clone());
            let mut action = detection.into_action(params);
            input.fill_extra(&mut action.extra);
            action.extra.framework = Some(call.agent.to_owned());
            let mut context = call.context;
            context.run = context.run.or(call.session);
            (action, context)
        }
        ProtocolCall::Function(call) => {
            let name = DetectInput::Tool {
                name: call.name,
                server: call.server,
            };
            let found = match (call.system, call.verb) {
                (Some(system), Some(verb)) => {
                    registry.detect(&DetectInput::Manual { system, verb })
                }
                _ => registry.detect(&name),
            };
            let mut action = found.into_action(call.arguments);
            if let (Some(system), None) = (call.system, call.verb) {
                // A system without a verb: the name's verb on the declared system.
                system.clone_into(&mut action.system);
            }
            if !call.name.is_empty() {
                name.fill_extra(&mut action.extra);
            }
            action.extra.framework = call.framework.map(str::to_owned);
            (action, call.context)
        }
        ProtocolCall::Sdk(call) => {
            let input = DetectInput::Sdk { path: call.path };
            (registry.detect_action(&input, call.arguments), call.context)
        }
    };
    let set = |field: &mut Option<String>, value: Option<&str>| {
        if let Some(value) = value {
            *field = Some(value.to_owned());
        }
    };
    set(&mut action.agent, context.agent);
    set(&mut action.actor, context.actor);
    set(&mut action.run_id, context.run);
    set(&mut action.target, context.target);
    if let Some(readback) = readback {
        readback.fill_path_params(&mut action);
    }
    action
}

/// An identity value as recorded: trimmed, not empty, at most 256 bytes, no control
/// characters; `None` otherwise.
fn identity(value: &str) -> Option<&str> {
    let value = value.trim();
    (!value.is_empty() && value.len() <= MAX_IDENTITY_BYTES && !value.chars().any(char::is_control))
        .then_some(value)
}

/// The run a `tools/call` names in its `_meta` (`attest/run`, else `runId`).
fn run_from_meta(meta: &Map<String, Value>) -> Option<&str> {
    ["attest/run", "runId"]
        .iter()
        .find_map(|key| meta.get(*key).and_then(Value::as_str).and_then(identity))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attest() -> (tempfile::TempDir, Attest) {
        let dir = tempfile::tempdir().unwrap();
        let ledger =
            attest_ledger::Ledger::open(dir.path().join("l.sqlite"), Default::default()).unwrap();
        let mut registry = crate::Registry::builtin().unwrap();
        registry.register("frobnicate_widget", "acmecrm", Verb::List);
        let attest = Attest::builder()
            .ledger(ledger)
            .registry(registry)
            .build()
            .unwrap();
        (dir, attest)
    }

    #[test]
    fn every_protocol_reaches_the_configured_registry() {
        let (_dir, attest) = attest();
        let mcp = attest.action(ProtocolCall::Mcp(McpCall {
            server: "widgets",
            tool: "frobnicate_widget",
            ..McpCall::default()
        }));
        let coding = attest.action(ProtocolCall::CodingAgent(CodingAgentCall {
            agent: "claude-code",
            tool: "mcp__widgets__frobnicate_widget",
            input: json!({}),
            session: Some("s-1"),
            ..CodingAgentCall::default()
        }));
        let function = attest.action(ProtocolCall::Function(FunctionCall {
            name: "frobnicate_widget",
            framework: Some("langchain"),
            ..FunctionCall::default()
        }));
        for action in [&mcp, &coding, &function] {
            assert_eq!(
                (action.system.as_str(), action.verb),
                ("acmecrm", Verb::List),
                "{action:?}"
            );
        }
        assert_eq!(coding.run_id.as_deref(), Some("s-1"));
        assert_eq!(coding.extra.framework.as_deref(), Some("claude-code"));
        assert_eq!(function.extra.framework.as_deref(), Some("langchain"));
    }

    #[test]
    fn a_coding_agent_call_is_described_by_its_riskiest_reading() {
        let (_dir, attest) = attest();
        let edit = |path: &str| json!({"file_path": path});
        let detected = |path: &str| {
            attest.registry().detect(&DetectInput::CodingTool {
                name: "Edit",
                input: &edit(path),
            })
        };
        let (source, workflow) = (
            detected("src/main.rs"),
            detected(".github/workflows/ci.yml"),
        );
        assert!(
            workflow.danger() > source.danger(),
            "{workflow:?} {source:?}"
        );
        // A patch to source code and to a workflow is judged as the workflow edit.
        let action = attest.action(ProtocolCall::CodingAgent(CodingAgentCall {
            agent: "codex",
            tool: "Edit",
            input: edit("src/main.rs"),
            readings: vec![edit(".github/workflows/ci.yml"), edit("src/lib.rs")],
            ..CodingAgentCall::default()
        }));
        assert_eq!(
            (action.system.as_str(), action.verb, action.recognised),
            (workflow.system.as_str(), workflow.verb, workflow.recognised)
        );
        assert_eq!(action.extra.tool_name.as_deref(), Some("Edit"));
    }

    #[test]
    fn http_identity_comes_from_headers_and_a_bad_one_is_ignored() {
        let (_dir, attest) = attest();
        let long = "x".repeat(300);
        let action = attest.action(ProtocolCall::Http(HttpCall {
            method: "POST",
            url: "https://api.stripe.com/v1/refunds",
            headers: vec![
                ("X-Attest-Agent", b"billing-bot".as_slice()),
                ("x-attest-run", long.as_bytes()),
                ("content-type", b"application/json".as_slice()),
            ],
            body: br#"{"charge":"ch_1"}"#,
            ..HttpCall::default()
        }));
        assert_eq!((action.system.as_str(), action.verb), ("stripe", Verb::Pay));
        assert_eq!(action.agent.as_deref(), Some("billing-bot"));
        assert_eq!(action.run_id, None);
        assert_eq!(action.params["charge"], "ch_1");
        assert_eq!(action.extra.method.as_deref(), Some("POST"));
    }

    #[test]
    fn mcp_meta_names_the_run_and_hints_never_make_a_write_a_read() {
        let (_dir, attest) = attest();
        let meta: Map<String, Value> = [("attest/run".to_owned(), json!("run-7"))]
            .into_iter()
            .collect();
        let action = attest.action(ProtocolCall::Mcp(McpCall {
            server: "github",
            tool: "create_issue",
            annotations: ToolHints {
                read_only: Some(true),
                ..ToolHints::default()
            },
            meta: Some(&meta),
            ..McpCall::default()
        }));
        assert_eq!(action.verb, Verb::Create);
        assert_eq!(action.run_id.as_deref(), Some("run-7"));
    }

    #[test]
    fn a_declared_system_and_verb_win() {
        let (_dir, attest) = attest();
        let action = attest.action(ProtocolCall::Function(FunctionCall {
            name: "do_it",
            system: Some("crm"),
            verb: Some(Verb::Update),
            context: CallContext {
                target: Some("deal"),
                ..CallContext::default()
            },
            ..FunctionCall::default()
        }));
        assert_eq!((action.system.as_str(), action.verb), ("crm", Verb::Update));
        assert_eq!(action.target.as_deref(), Some("deal"));
        let shell = attest.action(ProtocolCall::Shell(ShellCall {
            command: "rm -rf build",
            ..ShellCall::default()
        }));
        assert_eq!(shell.verb, Verb::Delete);
    }
}

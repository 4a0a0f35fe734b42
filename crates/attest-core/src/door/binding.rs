//! The binding engine: everything the Python and TypeScript packages do with a call, so
//! that their own code only converts values and errors. A binding opens a [`Binding`]
//! ([`open_binding`]), describes each call from what its caller names
//! ([`Binding::describe`]), starts it ([`Binding::start`]) and, when it is cleared, runs
//! the tool on its own thread (a Python tool must run on the thread that called it, a
//! JavaScript one on Node's) and hands the answer back ([`BindingRun::finish`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::{LedgerError, SigningKey, VerifiedCheckpoint};
use attest_policy::{Action, Verb};
use serde_json::Value;

use crate::agents::{handed_call, AgentSetupError, CallerAgent};
use crate::config::ConfigError;
use crate::detect::ToolHints;
use crate::setup::{DoorParts, Overrides, Settings, Source, Sourced};
use crate::verification::{CallerCheck, Judgement, JudgementSlot, ProcessEnv};
use crate::{
    Attest, AttestError, CallContext, Cleared, CodingAgentCall, FunctionCall, HandoffOutcome,
    McpCall, ProtocolCall, Receipt, Start, ToolError,
};

/// An [`Attest`] opened for a binding, with what its calls' links and checkpoints need.
pub struct Binding {
    attest: Attest,
    /// The signing key checkpoints are signed with (named, or the binary's default
    /// beside the ledger).
    key: PathBuf,
    /// The approval inbox's base URL, for the links held calls carry.
    inbox: String,
    /// With `agents:` configured, this instance's credential: every call is named by the
    /// agent it proves, checked as the call is made.
    agent: Option<Arc<CallerAgent>>,
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("key", &self.key)
            .field("inbox", &self.inbox)
            .field("agent", &self.agent.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a binding's [`Attest`] did not open.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// The configuration (a file, a keyword argument, the environment, the policy, the
    /// ledger) does not load; the error names the file, line and key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Agents are configured, and their authentication could not be set up (the
    /// approval store, the identity provider's keys).
    #[error(transparent)]
    Agents(#[from] AgentSetupError),
}

/// Why [`Binding::checkpoint`] signed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointRefused {
    /// The signing key or the ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The ledger does not verify, so no checkpoint vouches for it.
    #[error("the ledger does not verify ({0}); no checkpoint was signed")]
    Broken(String),
}

/// The framework name under which calls are a coding agent's own tools (`Bash`, `Write`,
/// `mcp__…`), described from their input as `attest hook claude-code` describes them
/// (Python's `attest.claude_agent_sdk` passes it).
const CODING_AGENT_FRAMEWORK: &str = "claude-agent-sdk";

/// A call as a binding's caller names it: detected from its name unless system and verb
/// are given.
#[derive(Debug, Clone, Default)]
pub struct BindingCall {
    /// The function's (or framework tool's, or MCP tool's) name.
    pub name: String,
    /// The system, when the caller names it.
    pub system: Option<String>,
    /// The verb, when the caller names it.
    pub verb: Option<Verb>,
    /// The kind of thing acted on, when the caller names it.
    pub target: Option<String>,
    /// The framework making the call (`langchain`, `ai`, …); `claude-agent-sdk`
    /// makes the call a coding agent's own tool.
    pub framework: Option<String>,
    /// The run it belongs to, when one is set.
    pub run: Option<String>,
    /// The call is an MCP `tools/call` to this server: described as the MCP proxy
    /// describes one.
    pub mcp: Option<McpServerCall>,
}

/// The MCP side of a [`BindingCall`].
#[derive(Debug, Clone, Default)]
pub struct McpServerCall {
    /// The server's name.
    pub server: String,
    /// The caller named the server itself (it is then the system, known or not), rather
    /// than taking the name the server gives.
    pub named: bool,
    /// The tool's own annotations (untrusted: they may make a call stricter, never a
    /// write a read).
    pub hints: ToolHints,
}

/// Where a call stands after [`Binding::start`].
pub enum BindingStart {
    /// Cleared: run the tool with [`BindingRun::params`].
    Run(BindingRun),
    /// Finished without running the tool (refused, rejected, expired, held, replayed),
    /// or Attest could not decide or record it (the tool did not run).
    Ended(Result<HandoffOutcome, AttestError>),
}

/// A call cleared to run. Dropped unfinished, it drops its pipeline: a write's intent
/// row then stands without an outcome, as after a crash, and `attest ledger` reports it.
pub struct BindingRun {
    cleared: Cleared,
    /// Where the caller's own check leaves its judgement, when it brought one.
    judged: Option<JudgementSlot>,
}

/// Opens the pipeline for a binding: `overrides` (its keyword arguments) beat the
/// environment, which beats `.attest/config.yaml` (or `$ATTEST_CONFIG`), which beats the
/// defaults. Below the file, an ask comes back held at once (with its resume token)
/// rather than blocking the agent for minutes; an ask about a call an earlier attempt
/// asked about finds that request (held again while pending, run once when approved).
/// With `agents:` configured, calls are named by the agent `agent_token` (else
/// `ATTEST_AGENT_TOKEN`) proves; the identity provider's keys are fetched now.
pub async fn open_binding(
    overrides: &Overrides,
    agent_token: Option<String>,
) -> Result<Binding, BindingError> {
    let mut settings = Settings::resolve(overrides, Arc::new(ProcessEnv))?;
    if settings.wait.source == Source::Default {
        settings.wait = Sourced {
            value: Duration::ZERO,
            source: Source::Default,
        };
    }
    let attest = settings.build(DoorParts {
        same_call: true,
        ..DoorParts::default()
    })?;
    let agent = CallerAgent::open(&settings, &attest, agent_token)
        .await?
        .map(Arc::new);
    Ok(Binding {
        attest,
        key: settings.key_path(),
        inbox: settings.inbox_url(),
        agent,
    })
}

impl Binding {
    /// The pipeline.
    pub fn attest(&self) -> &Attest {
        &self.attest
    }

    /// The approval inbox's base URL (the configuration's, else the default address).
    pub fn inbox_url(&self) -> &str {
        &self.inbox
    }

    /// The page where a person signs in and decides request `id`.
    pub fn request_link(&self, id: &str) -> String {
        super::request_link(&self.inbox, id)
    }

    /// The action `call` describes, as core describes a framework's function call, an
    /// MCP `tools/call` or a coding agent's own tool, with the configured registry.
    pub fn describe(&self, call: &BindingCall, params: Value) -> Action {
        let context = CallContext {
            run: call.run.as_deref(),
            target: call.target.as_deref(),
            ..CallContext::default()
        };
        let coding_agent = call.framework.as_deref() == Some(CODING_AGENT_FRAMEWORK);
        let protocol = match &call.mcp {
            Some(mcp) => ProtocolCall::Mcp(McpCall {
                server: &mcp.server,
                server_named: mcp.named,
                tool: &call.name,
                arguments: params,
                annotations: mcp.hints,
                meta: None,
                context,
            }),
            None if coding_agent && call.system.is_none() => {
                ProtocolCall::CodingAgent(CodingAgentCall {
                    agent: CODING_AGENT_FRAMEWORK,
                    tool: &call.name,
                    input: params,
                    context,
                    ..CodingAgentCall::default()
                })
            }
            None => ProtocolCall::Function(FunctionCall {
                framework: call.framework.as_deref(),
                name: &call.name,
                arguments: params,
                server: None,
                system: call.system.as_deref(),
                verb: call.verb,
                context,
            }),
        };
        self.attest.action(protocol)
    }

    /// Decides `start` (an action, a resume token, or an action presented again with
    /// the token of its approval) and, when it is cleared, returns it to run. `check` is
    /// the caller's own check of the result, answered in [`BindingRun::finish`]; `key`
    /// the caller's idempotency key ([`crate::Call::idempotency_key`]). With agents
    /// configured, the call is named by the agent this instance's credential proves now,
    /// or refused.
    pub async fn start(
        &self,
        start: Start,
        check: Option<CallerCheck>,
        key: Option<String>,
    ) -> BindingStart {
        let (call, slot) =
            handed_call(&self.attest, self.agent.clone(), start, key, check.as_ref());
        match call.cleared().await {
            Ok(cleared) => BindingStart::Run(BindingRun {
                cleared,
                judged: check.map(|_| slot),
            }),
            Err(ended) => BindingStart::Ended(ended),
        }
    }

    /// Records an action that already happened (decision `recorded`); `result`, when
    /// given, is hashed, never stored. With agents configured, the action is named by the
    /// agent this instance's credential proves, or refused ([`AttestError::Agent`]).
    pub async fn record(
        &self,
        mut action: Action,
        result: Option<&Value>,
    ) -> Result<Receipt, AttestError> {
        if let Some(agent) = &self.agent {
            agent.name(&mut action).await?;
        }
        self.attest.record(action, result).await
    }

    /// What a person sees of approval request `id`: its status, who decided, and the
    /// call's summary. Blocks on the approval store (call it off an async runtime's
    /// worker threads).
    pub fn request(&self, id: &str) -> Result<Value, AttestError> {
        let store = self.attest.approvals()?;
        let request = store.get_by_id(id).map_err(AttestError::Approval)?;
        Ok(request.summary())
    }

    /// Signs a checkpoint of the ledger's current head with the signing key, after
    /// verifying what it vouches for; returns the signed note. Blocks.
    pub fn checkpoint(&self) -> Result<String, CheckpointRefused> {
        let key = SigningKey::load(&self.key)?;
        match self.attest.ledger().checkpoint_verified(&key, &[])? {
            VerifiedCheckpoint::Signed { checkpoint, .. } => Ok(checkpoint.note),
            VerifiedCheckpoint::Refused(report) => {
                let problems: Vec<String> =
                    report.problems.iter().map(ToString::to_string).collect();
                Err(CheckpointRefused::Broken(problems.join("; ")))
            }
        }
    }
}

impl BindingRun {
    /// The params to run the tool with: the call's own, or a person's edits on approval.
    pub fn params(&self) -> &Value {
        &self.cleared.params
    }

    /// Hands the tool's answer (its result as JSON, or its failure) to the pipeline, which
    /// verifies and records it; resolves once the outcome row is written. `judged` is what
    /// the caller's own check said of the result, when it brought one. A tool failure
    /// comes back as `Ok` with its receipt: the caller raises the tool's own error.
    pub async fn finish(
        self,
        answer: Result<Value, String>,
        judged: Option<Judgement>,
    ) -> Result<HandoffOutcome, AttestError> {
        if let (Some(slot), Some(judged)) = (&self.judged, judged) {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(judged);
            }
        }
        // Once the tool has run, the call ends `Ran` or `Failed`: either way, its row.
        self.cleared.finish(answer.map_err(ToolError::from)).await
    }
}

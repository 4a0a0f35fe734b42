//! The one place the Python package calls `attest-core`: build the pipeline from the
//! configuration as every door does (core's `setup`), start a governed call, hand the tool's answer back, record, checkpoint.
//!
//! A Python tool must run on the Python thread that called it (or, for a coroutine, in
//! its event loop), while the pipeline is an async function that wants to call the tool
//! itself. So a call is a handshake, driven by the calling thread: [`Engine::start`] polls
//! the pipeline until its `execute` step hands over the (possibly edited) params, and
//! keeps the suspended pipeline in a [`Running`]; [`Running::finish`] hands the tool's
//! answer back and polls the pipeline to its end. No other thread runs the call, so a
//! call costs no hand-offs beyond the ledger writer's. A `Running` dropped unfinished
//! drops its pipeline: a write's intent row then stands without an outcome, as after a
//! crash, and `attest ledger` reports it. Everything Python-specific stays in `lib.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use attest_core::agents::{handed_call, CallerAgent};
use attest_core::door::{open_binding, BindingError};
use attest_core::setup::Overrides;
use attest_core::{
    Attest, AttestError, CallContext, Cleared, CodingAgentCall, FunctionCall, Handoff,
    HandoffOutcome, ProtocolCall, Receipt, ResumeToken, Start, ToolError,
};
use attest_ledger::{LedgerError, SigningKey, VerifiedCheckpoint};
use attest_policy::{Action, Verb};
use serde_json::Value;

use attest_core::verification::{CallerCheck as CheckKind, Judgement, JudgementSlot};

/// Why the engine could not be opened or could not do what it was asked; outcomes of
/// calls (refused, rejected, held, the tool failed) are [`Outcome`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum EngineError {
    /// The ledger or the signing key failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The pipeline failed.
    #[error(transparent)]
    Attest(#[from] AttestError),
    /// The pipeline could not be opened for a binding (the configuration, agents'
    /// authentication).
    #[error(transparent)]
    Open(#[from] BindingError),
    /// The runtime could not be started.
    #[error("cannot start the engine's runtime")]
    Runtime(#[source] std::io::Error),
    /// The ledger would not verify, so no checkpoint was signed.
    #[error("the ledger does not verify ({0}); no checkpoint was signed")]
    Broken(String),
}

/// A governed pipeline and the runtime it runs on.
pub(crate) struct Engine {
    attest: Attest,
    runtime: Arc<tokio::runtime::Runtime>,
    /// The signing key [`Engine::checkpoint`] signs with (named, or the binary's default
    /// beside the ledger).
    key: PathBuf,
    /// The approval inbox's base URL, for the links a held call carries.
    inbox: String,
    /// With `agents:` configured, this instance's credential: every call is named by
    /// the agent it proves, checked as the call is made.
    agent: Option<Arc<CallerAgent>>,
}

/// How a tool call is described: detection from its name, unless system and verb are given.
#[derive(Debug, Default)]
pub(crate) struct CallSpec {
    /// The function's (or framework tool's) name.
    pub(crate) name: String,
    /// The system, when the caller names it.
    pub(crate) system: Option<String>,
    /// The verb, when the caller names it.
    pub(crate) verb: Option<Verb>,
    /// The kind of thing acted on, when the caller names it.
    pub(crate) target: Option<String>,
    /// The framework making the call (`langchain`, `openai-agents`, …).
    pub(crate) framework: Option<String>,
    /// The run id (the Python `run` context), when one is set.
    pub(crate) run_id: Option<String>,
    /// The call is a coding agent's own tool (`Bash`, `Write`, `mcp__…`): described from
    /// its input, as `attest hook claude-code` does.
    pub(crate) coding_agent: bool,
}

/// The framework name under which calls are a coding agent's own tools (`Bash`, `Write`,
/// …), described from their input (`attest.claude_agent_sdk` passes it).
const CODING_AGENT_FRAMEWORK: &str = "claude-agent-sdk";

impl CallSpec {
    /// The call as the Python side names it; the framework [`CODING_AGENT_FRAMEWORK`]
    /// makes it a coding agent's own tool.
    pub(crate) fn new(
        name: String,
        system: Option<String>,
        verb: Option<Verb>,
        target: Option<String>,
        framework: Option<String>,
        run_id: Option<String>,
    ) -> CallSpec {
        CallSpec {
            name,
            system,
            verb,
            target,
            coding_agent: framework.as_deref() == Some(CODING_AGENT_FRAMEWORK),
            framework,
            run_id,
        }
    }
}

/// How a call ended, over the tool's answer as JSON.
pub(crate) type CallOutcome = HandoffOutcome;

/// A call cleared to run: the caller runs its tool with [`Running::params`] and hands the
/// answer to [`Running::finish`].
pub(crate) struct Running {
    /// The params to run with: the call's own, or a person's edits on approval.
    pub(crate) params: Value,
    cleared: Cleared,
    runtime: Arc<tokio::runtime::Runtime>,
    /// Where the caller's own check leaves its judgement, when it brought one.
    judged: Option<JudgementSlot>,
}

/// Where a call stands after [`Engine::start`].
pub(crate) enum Started {
    /// Cleared: run the tool.
    Run(Running),
    /// Finished without running the tool (refused, held, …), or could not decide.
    Done(Result<CallOutcome, AttestError>),
}

impl Engine {
    /// Builds the pipeline as every binding does ([`open_binding`]): the keyword
    /// arguments beat the environment, which beats `.attest/config.yaml`; an ask comes
    /// back held, and finds the request an earlier run of the same call filed.
    pub(crate) fn open(
        overrides: &Overrides,
        agent_token: Option<String>,
    ) -> Result<Engine, EngineError> {
        // Driven by the calling threads (several may drive it at once); the ledger writer
        // and blocking store calls run on threads of their own.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        let binding = runtime.block_on(open_binding(overrides, agent_token))?;
        Ok(Engine {
            attest: binding.attest,
            runtime: Arc::new(runtime),
            key: binding.key,
            inbox: binding.inbox,
            agent: binding.agent,
        })
    }

    /// The action a call describes, as core describes a framework's function call (or,
    /// for [`CODING_AGENT_FRAMEWORK`], a coding agent's own tool) with the configured
    /// registry: the caller's system and verb when both are given, else detection.
    pub(crate) fn action(&self, spec: &CallSpec, params: Value) -> Action {
        let context = CallContext {
            run: spec.run_id.as_deref(),
            target: spec.target.as_deref(),
            ..CallContext::default()
        };
        let call = if spec.coding_agent && spec.system.is_none() {
            ProtocolCall::CodingAgent(CodingAgentCall {
                agent: CODING_AGENT_FRAMEWORK,
                tool: &spec.name,
                input: params,
                context,
                ..CodingAgentCall::default()
            })
        } else {
            ProtocolCall::Function(FunctionCall {
                framework: spec.framework.as_deref(),
                name: &spec.name,
                arguments: params,
                server: None,
                system: spec.system.as_deref(),
                verb: spec.verb,
                context,
            })
        };
        self.attest.action(call)
    }

    /// Decides `action` and, when it is cleared, returns it to run; `check` is the
    /// caller's own check of the result, answered when the call finishes. Blocks until
    /// then (call it without holding the GIL).
    /// `key`: the caller's idempotency key ([`attest_core::Call::idempotency_key`]).
    pub(crate) fn start(
        &self,
        action: Action,
        check: Option<CheckKind>,
        key: Option<String>,
    ) -> Started {
        self.governed(action.into(), check, key)
    }

    /// Resumes the action `token` stands for (approved by a person): returns it to run
    /// with the approved params. Blocks.
    pub(crate) fn resume(&self, token: String, check: Option<CheckKind>) -> Started {
        self.governed(ResumeToken::new(token).into(), check, None)
    }

    /// Resumes the approved action `token` stands for, presented again as `action` (an
    /// agent retrying its call): it must be the action that was asked about. Blocks.
    pub(crate) fn resume_action(
        &self,
        token: String,
        action: Action,
        check: Option<CheckKind>,
    ) -> Started {
        self.governed(Start::retry(&ResumeToken::new(token), action), check, None)
    }

    /// The one governed call every entry point makes.
    fn governed(&self, start: Start, check: Option<CheckKind>, key: Option<String>) -> Started {
        let (call, slot) =
            handed_call(&self.attest, self.agent.clone(), start, key, check.as_ref());
        let mut started = self.handshake(call);
        if let Started::Run(running) = &mut started {
            running.judged = check.map(|_| slot);
        }
        started
    }

    /// The approval inbox's base URL (the configuration's, else the default address).
    pub(crate) fn inbox_url(&self) -> &str {
        &self.inbox
    }

    /// What a person sees of approval request `id` (status, who decided, the call's
    /// summary), from the approval store. Blocks.
    pub(crate) fn request(&self, id: &str) -> Result<Value, EngineError> {
        let store = self.attest.approvals()?;
        let request = store.get_by_id(id).map_err(AttestError::Approval)?;
        Ok(request.summary())
    }

    /// Records an action that already happened. Blocks.
    pub(crate) fn record(
        &self,
        mut action: Action,
        result: Option<Value>,
    ) -> Result<Receipt, AttestError> {
        self.runtime.block_on(async {
            if let Some(agent) = &self.agent {
                agent.name(&mut action).await?;
            }
            self.attest.record(action, result.as_ref()).await
        })
    }

    /// Signs a checkpoint of the ledger's current head with the signing key, after
    /// verifying what it vouches for; returns the signed note. Blocks.
    pub(crate) fn checkpoint(&self) -> Result<String, EngineError> {
        let key = SigningKey::load(&self.key)?;
        match self.attest.ledger().checkpoint_verified(&key, &[])? {
            VerifiedCheckpoint::Signed { checkpoint, .. } => Ok(checkpoint.note),
            VerifiedCheckpoint::Refused(report) => {
                let problems: Vec<String> =
                    report.problems.iter().map(ToString::to_string).collect();
                Err(EngineError::Broken(problems.join("; ")))
            }
        }
    }

    /// Polls `call` on this thread until it asks for the tool to run or finishes.
    fn handshake(&self, call: Handoff) -> Started {
        match self.runtime.block_on(call.cleared()) {
            Ok(cleared) => Started::Run(Running {
                params: cleared.params.clone(),
                cleared,
                runtime: Arc::clone(&self.runtime),
                judged: None,
            }),
            Err(outcome) => Started::Done(outcome),
        }
    }
}

impl Running {
    /// Hands the tool's answer (its result as JSON, or its failure) to the pipeline,
    /// which verifies and records it; blocks until the outcome row is written.
    ///
    /// `judged` is what the caller's own check said of the result (`verify=`,
    /// `read_back=`), when it brought one. A tool failure comes back as `Ok` with its
    /// receipt: the caller re-raises the tool's own error.
    pub(crate) fn finish(
        self,
        answer: Result<Value, String>,
        judged: Option<Judgement>,
    ) -> Result<Receipt, EngineError> {
        if let (Some(slot), Some(judged)) = (&self.judged, judged) {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(judged);
            }
        }
        // Once the tool has run, the call ends `Ran` or `Failed`: either way, its row.
        let finished = self.cleared.finish(answer.map_err(ToolError::from));
        match self.runtime.block_on(finished) {
            Ok(outcome) => Ok(outcome.into_receipt()),
            Err(err) => Err(EngineError::Attest(err)),
        }
    }
}

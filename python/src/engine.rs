//! The Python package's hold on core's binding engine ([`attest_core::door::Binding`]):
//! it drives the engine's async calls from the calling Python thread.
//!
//! A Python tool must run on the Python thread that called it (or, for a coroutine, in
//! its event loop), while the pipeline is an async function that wants to call the tool
//! itself. So a call is a handshake, driven by the calling thread: [`Engine::start`] polls
//! the pipeline until its `execute` step hands over the (possibly edited) params, and
//! keeps the suspended pipeline in a [`Running`]; [`Running::finish`] hands the tool's
//! answer back and polls the pipeline to its end. No other thread runs the call, so a
//! call costs no hand-offs beyond the ledger writer's. Everything Python-specific stays
//! in `lib.rs`.

use std::sync::Arc;

use attest_core::door::{
    open_binding, Binding, BindingError, BindingRun, BindingStart, CheckpointRefused,
};
use attest_core::setup::Overrides;
use attest_core::verification::{CallerCheck, Judgement};
use attest_core::{AttestError, HandoffOutcome, Receipt, ResumeToken, Start};
use attest_policy::Action;
use serde_json::Value;

pub(crate) use attest_core::door::BindingCall as CallSpec;

/// Why the engine could not be opened or could not do what it was asked; outcomes of
/// calls (refused, rejected, held, the tool failed) are [`HandoffOutcome`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum EngineError {
    /// The pipeline failed.
    #[error(transparent)]
    Attest(#[from] AttestError),
    /// The pipeline could not be opened for a binding (the configuration, agents'
    /// authentication).
    #[error(transparent)]
    Open(#[from] BindingError),
    /// No checkpoint was signed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointRefused),
    /// The runtime could not be started.
    #[error("cannot start the engine's runtime")]
    Runtime(#[source] std::io::Error),
}

/// The binding engine and the runtime the calling threads drive it on.
pub(crate) struct Engine {
    binding: Binding,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// A call cleared to run: the caller runs its tool with [`Running::params`] and hands the
/// answer to [`Running::finish`].
pub(crate) struct Running {
    run: BindingRun,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// Where a call stands after [`Engine::start`].
pub(crate) enum Started {
    /// Cleared: run the tool.
    Run(Running),
    /// Finished without running the tool (refused, held, …), or could not decide.
    Done(Result<HandoffOutcome, AttestError>),
}

impl Engine {
    /// Opens the binding engine ([`open_binding`]): the keyword arguments beat the
    /// environment, which beats `.attest/config.yaml`.
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
            binding,
            runtime: Arc::new(runtime),
        })
    }

    /// The action a call describes ([`Binding::describe`]).
    pub(crate) fn action(&self, spec: &CallSpec, params: Value) -> Action {
        self.binding.describe(spec, params)
    }

    /// Decides `action` and, when it is cleared, returns it to run; with `token` (from an
    /// earlier held call) the action is that one presented again, and must be the action
    /// that was asked about. Blocks (call it without holding the GIL).
    pub(crate) fn start(
        &self,
        action: Action,
        token: Option<String>,
        check: Option<CallerCheck>,
        key: Option<String>,
    ) -> Started {
        let start = match token {
            Some(token) => Start::retry(&ResumeToken::new(token), action),
            None => action.into(),
        };
        self.governed(start, check, key)
    }

    /// Resumes the action `token` stands for (approved by a person): returns it to run
    /// with the approved params. Blocks.
    pub(crate) fn resume(&self, token: String, check: Option<CallerCheck>) -> Started {
        self.governed(ResumeToken::new(token).into(), check, None)
    }

    fn governed(&self, start: Start, check: Option<CallerCheck>, key: Option<String>) -> Started {
        match self.runtime.block_on(self.binding.start(start, check, key)) {
            BindingStart::Run(run) => Started::Run(Running {
                run,
                runtime: Arc::clone(&self.runtime),
            }),
            BindingStart::Ended(ended) => Started::Done(ended),
        }
    }

    /// The approval inbox's base URL.
    pub(crate) fn inbox_url(&self) -> &str {
        self.binding.inbox_url()
    }

    /// The page where a person signs in and decides request `id`.
    pub(crate) fn request_link(&self, id: &str) -> String {
        self.binding.request_link(id)
    }

    /// What a person sees of approval request `id`. Blocks.
    pub(crate) fn request(&self, id: &str) -> Result<Value, EngineError> {
        Ok(self.binding.request(id)?)
    }

    /// Records an action that already happened. Blocks.
    pub(crate) fn record(
        &self,
        action: Action,
        result: Option<Value>,
    ) -> Result<Receipt, AttestError> {
        self.runtime
            .block_on(self.binding.record(action, result.as_ref()))
    }

    /// Signs a checkpoint of the ledger's head after verifying it. Blocks.
    pub(crate) fn checkpoint(&self) -> Result<String, EngineError> {
        Ok(self.binding.checkpoint()?)
    }
}

impl Running {
    /// The params to run the tool with: the call's own, or a person's edits on approval.
    pub(crate) fn params(&self) -> &Value {
        self.run.params()
    }

    /// Hands the tool's answer to the pipeline ([`BindingRun::finish`]); blocks until the
    /// outcome row is written.
    pub(crate) fn finish(
        self,
        answer: Result<Value, String>,
        judged: Option<Judgement>,
    ) -> Result<Receipt, EngineError> {
        let outcome = self.runtime.block_on(self.run.finish(answer, judged))?;
        Ok(outcome.into_receipt())
    }
}

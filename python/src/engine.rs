//! The one place the Python package calls `attest-core`: open a pipeline from explicit
//! settings, start a governed call, hand the tool's answer back, record, checkpoint.
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

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use attest_core::approvals::{ApprovalStore, DEFAULT_USE_BY};
use attest_core::detect::{detect, DetectInput};
use attest_core::{
    Attest, AttestError, Outcome, Receipt, ResumeToken, Start, StoreGate, ToolError,
};
use attest_ledger::{Durability, Ledger, LedgerError, LedgerOptions, SigningKey, VerifyOptions};
use attest_policy::{Action, PolicyEngine, PolicyError, Verb, MAX_POLICY_BYTES};
use serde_json::Value;
use tokio::sync::oneshot;

/// Why the engine could not be opened or could not do what it was asked; outcomes of
/// calls (refused, rejected, held, the tool failed) are [`Outcome`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum EngineError {
    /// A policy file could not be read.
    #[error("cannot read policy {path}")]
    PolicyIo {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A policy file is larger than a policy may be.
    #[error("policy {path} is larger than {MAX_POLICY_BYTES} bytes")]
    PolicyTooLarge { path: PathBuf },
    /// The policy does not load.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The ledger or the signing key failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The pipeline failed.
    #[error(transparent)]
    Attest(#[from] AttestError),
    /// The runtime could not be started.
    #[error("cannot start the engine's runtime")]
    Runtime(#[source] std::io::Error),
    /// A setting is wrong (names the setting).
    #[error("{0}")]
    Setting(String),
    /// The ledger would not verify, so no checkpoint was signed.
    #[error("the ledger does not verify ({0}); no checkpoint was signed")]
    Broken(String),
}

/// What a Python `Attest(...)` is built from; the coordinator's configuration file will
/// fill the same fields.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    /// The ledger file (created with its directory when missing).
    pub(crate) ledger: PathBuf,
    /// A policy file; when `None`, `./attest.yaml` if it exists, else the built-in default.
    pub(crate) policy: Option<PathBuf>,
    /// The agent recorded for calls that name none.
    pub(crate) agent: Option<String>,
    /// The actor recorded for calls that name none.
    pub(crate) actor: Option<String>,
    /// The signing key for [`Engine::checkpoint`].
    pub(crate) key: Option<PathBuf>,
    /// `full` (default), `normal` or `off`.
    pub(crate) durability: Option<String>,
    /// How long an ask waits for a person before the call comes back held.
    pub(crate) wait: Duration,
    /// Shadow mode: verdicts recorded in each row's `shadow`, not enforced.
    pub(crate) shadow: bool,
}

/// A governed pipeline and the runtime it runs on.
pub(crate) struct Engine {
    attest: Attest,
    runtime: Arc<tokio::runtime::Runtime>,
    key: Option<PathBuf>,
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

/// The pipeline of one call, suspended while its tool runs.
type Pipeline = Pin<Box<dyn Future<Output = Result<CallOutcome, AttestError>> + Send>>;

/// How a call ended, over the tool's answer as JSON.
pub(crate) type CallOutcome = Outcome<Value, ToolError>;

/// What the pipeline's `execute` step hands the caller: the params, and where to answer.
type Handover = (Value, oneshot::Sender<Result<Value, ToolError>>);

/// A call cleared to run: the caller runs its tool with [`Running::params`] and hands the
/// answer to [`Running::finish`].
pub(crate) struct Running {
    /// The params to run with: the call's own, or a person's edits on approval.
    pub(crate) params: Value,
    answer: oneshot::Sender<Result<Value, ToolError>>,
    pipeline: Pipeline,
    runtime: Arc<tokio::runtime::Runtime>,
}

/// Where a call stands after [`Engine::start`].
pub(crate) enum Started {
    /// Cleared: run the tool.
    Run(Running),
    /// Finished without running the tool (refused, held, …), or could not decide.
    Done(Result<CallOutcome, AttestError>),
}

impl Engine {
    /// Opens the ledger and the policy and builds the pipeline: asks go to the approval
    /// store on the ledger's file and come back held unless someone answers within `wait`.
    pub(crate) fn open(settings: Settings) -> Result<Engine, EngineError> {
        // The policy first: a policy that does not load must not leave a ledger behind.
        // As the binary finds it: the given file, else `./attest.yaml`, else the default.
        let local = std::path::Path::new("attest.yaml");
        let policy = match &settings.policy {
            Some(path) => load_policy(path)?,
            None if local.exists() => load_policy(local)?,
            None => PolicyEngine::default_policy()?,
        };
        let durability = match settings.durability.as_deref() {
            None => Durability::Full,
            Some(text) => text.parse().map_err(|_| {
                EngineError::Setting(format!("durability {text:?}: expected full, normal or off"))
            })?,
        };
        let options = LedgerOptions {
            durability,
            create: true,
            ..LedgerOptions::default()
        };
        let ledger = Arc::new(Ledger::open(&settings.ledger, options)?);
        let store = Arc::new(ApprovalStore::open(&ledger).map_err(AttestError::from)?);
        let gate = StoreGate::new(Arc::clone(&store))
            .use_by(DEFAULT_USE_BY)
            .wait(settings.wait);
        let mut builder = Attest::builder()
            .ledger(ledger)
            .policy(policy)
            .approvals(store)
            .gate(gate)
            .shadow(settings.shadow);
        if let Some(agent) = settings.agent {
            builder = builder.agent(agent);
        }
        if let Some(actor) = settings.actor {
            builder = builder.actor(actor);
        }
        // Driven by the calling threads (several may drive it at once); the ledger writer
        // and blocking store calls run on threads of their own.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        Ok(Engine {
            attest: builder.build()?,
            runtime: Arc::new(runtime),
            key: settings.key,
        })
    }

    /// The action a call describes: the caller's system and verb when both are given,
    /// else detection from the name (the way `Attest::wrap_fn` names a function's calls).
    pub(crate) fn action(spec: &CallSpec, params: Value) -> Action {
        let name = DetectInput::Tool {
            name: &spec.name,
            server: None,
        };
        let found = match (&spec.system, spec.verb) {
            (Some(system), Some(verb)) => detect(&DetectInput::Manual { system, verb }),
            _ if spec.coding_agent => detect(&DetectInput::CodingTool {
                name: &spec.name,
                input: &params,
            }),
            _ => detect(&name),
        };
        let mut action = found.into_action(params);
        if let (Some(system), None) = (&spec.system, spec.verb) {
            // A system without a verb: the name's verb on the named system.
            action.system.clone_from(system);
        }
        name.fill_extra(&mut action.extra);
        action.extra.framework.clone_from(&spec.framework);
        if spec.target.is_some() {
            action.target.clone_from(&spec.target);
        }
        action.run_id.clone_from(&spec.run_id);
        action
    }

    /// Decides `action` and, when it is cleared, returns it to run. Blocks until then
    /// (call it without holding the GIL).
    pub(crate) fn start(&self, action: Action) -> Started {
        let attest = self.attest.clone();
        self.handshake(move |execute| async move { attest.call(action).run(execute).await })
    }

    /// Resumes the action `token` stands for (approved by a person): returns it to run
    /// with the approved params. Blocks.
    pub(crate) fn resume(&self, token: String) -> Started {
        let attest = self.attest.clone();
        let token = ResumeToken::new(token);
        self.handshake(move |execute| async move { attest.call(token).run(execute).await })
    }

    /// Resumes the approved action `token` stands for, presented again as `action` (an
    /// agent retrying its call): it must be the action that was asked about. Blocks.
    pub(crate) fn resume_action(&self, token: String, action: Action) -> Started {
        let attest = self.attest.clone();
        let token = ResumeToken::new(token);
        let retry = Start::retry(&token, action);
        self.handshake(move |execute| async move { attest.call(retry).run(execute).await })
    }

    /// Records an action that already happened. Blocks.
    pub(crate) fn record(
        &self,
        action: Action,
        result: Option<Value>,
    ) -> Result<Receipt, AttestError> {
        self.runtime
            .block_on(self.attest.record(action, result.as_ref()))
    }

    /// Signs a checkpoint of the ledger's current head with the signing key, after
    /// verifying what it vouches for; returns the signed note. Blocks.
    pub(crate) fn checkpoint(&self) -> Result<String, EngineError> {
        let path = self.key.as_deref().ok_or_else(|| {
            EngineError::Setting("no signing key: pass key=PATH to Attest(...)".to_owned())
        })?;
        let key = SigningKey::load(path)?;
        let ledger = self.attest.ledger();
        let trusted = [key.verifier().clone()];
        let report = ledger.verify_with(VerifyOptions {
            trusted: &trusted,
            since_checkpoint: ledger.latest_checkpoint()?.is_some(),
            ..VerifyOptions::default()
        })?;
        if !report.is_intact() {
            let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
            return Err(EngineError::Broken(problems.join("; ")));
        }
        let (checkpoint, _new) = ledger.checkpoint(&key)?;
        Ok(checkpoint.note)
    }

    /// Polls `call` (given an `execute` step that hands the params over) on this thread
    /// until it asks for the tool to run or finishes.
    fn handshake<C, Fut>(&self, call: C) -> Started
    where
        C: FnOnce(Executor) -> Fut,
        Fut: Future<Output = Result<CallOutcome, AttestError>> + Send + 'static,
    {
        let (handover, mut handed) = oneshot::channel::<Handover>();
        let execute: Executor = Box::new(move |params| {
            Box::pin(async move {
                let (answer, answered) = oneshot::channel();
                if handover.send((params, answer)).is_err() {
                    return Err("the caller stopped waiting before the tool ran".into());
                }
                answered
                    .await
                    .unwrap_or_else(|_| Err("the tool did not answer".into()))
            })
        });
        let mut pipeline: Pipeline = Box::pin(call(execute));
        let first = self.runtime.block_on(async {
            tokio::select! {
                biased;
                outcome = &mut pipeline => Err(outcome),
                handed = &mut handed => match handed {
                    Ok(handover) => Ok(handover),
                    // The pipeline dropped its `execute` step without calling it (a
                    // refusal): it finishes without the tool.
                    Err(_) => Err((&mut pipeline).await),
                },
            }
        });
        match first {
            Ok((params, answer)) => Started::Run(Running {
                params,
                answer,
                pipeline,
                runtime: Arc::clone(&self.runtime),
            }),
            Err(outcome) => Started::Done(outcome),
        }
    }
}

/// The `execute` step handed to the pipeline.
type Executor =
    Box<dyn FnOnce(Value) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>> + Send>;

impl Running {
    /// Hands the tool's answer (its result as JSON, or its failure) to the pipeline,
    /// which verifies and records it; blocks until the outcome row is written.
    ///
    /// A tool failure comes back as `Ok` with its receipt: the caller re-raises the
    /// tool's own error.
    pub(crate) fn finish(self, answer: Result<Value, String>) -> Result<Receipt, EngineError> {
        let _ = self.answer.send(answer.map_err(ToolError::from));
        // Once the tool has run, the call ends `Ran` or `Failed`: either way, its row.
        match self.runtime.block_on(self.pipeline) {
            Ok(outcome) => Ok(outcome.into_receipt()),
            Err(err) => Err(EngineError::Attest(err)),
        }
    }
}

/// Reads and compiles a policy file, with a size cap.
fn load_policy(path: &std::path::Path) -> Result<PolicyEngine, EngineError> {
    let io = |source| EngineError::PolicyIo {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > MAX_POLICY_BYTES as u64 {
        return Err(EngineError::PolicyTooLarge {
            path: path.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    Ok(PolicyEngine::from_yaml(&text, &path.display().to_string())?)
}

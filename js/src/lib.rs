//! The native half of the npm package `attest`: the Rust engine (`attest-core`) behind a
//! few Node-API classes. The JavaScript half (`js/lib/`) adds `attest.tool`, the typed
//! errors and the framework adapters.
//!
//! The engine is opened as every door opens it (core's `setup`: options beat the
//! environment, which beats the configuration file, which beats the defaults). A call is
//! a handshake (core's `handoff`, as in the Python package): [`Engine::start`] runs the pipeline (on napi's
//! tokio runtime, never on Node's main thread) until its `execute` step hands over the
//! params, and resolves with a [`Started`] that holds the suspended pipeline; JavaScript
//! runs the tool (it must run on the JS thread) and hands its answer to
//! [`Started::finish`], which resolves once the outcome row is written. Every method that
//! waits on the ledger returns a promise, so Node's event loop keeps going meanwhile.
//!
//! Expected ends of a call (refused, rejected, expired, held, Attest could not decide)
//! resolve as a `Started` whose `status` says so; the JavaScript half turns them into
//! its typed errors. Params and results cross as JSON text; the tool's own value is never
//! converted back: the caller keeps the object its function made.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use attest_core::config::ConfigError;
use attest_core::detect::ToolHints;
use attest_core::door::{
    open_binding, Binding, BindingCall, BindingError, BindingRun, BindingStart, McpServerCall,
};
use attest_core::setup::Overrides;
use attest_core::verification::{CallerCheck, Judgement};
use attest_core::{
    error_chain, AttestError, HandoffOutcome, Outcome, Receipt as CoreReceipt, ResumeToken, Start,
};
use attest_policy::{Action, Verb};
use napi::{Error, Result, Status};
use napi_derive::napi;
use serde_json::Value;

/// How `new Attest(options)` opens the engine; each option beats its `ATTEST_*` variable,
/// which beats the configuration file, which beats the default.
#[napi(object)]
#[derive(Default)]
pub struct EngineOptions {
    /// The configuration file [default: `$ATTEST_CONFIG`, else `.attest/config.yaml`].
    pub config: Option<String>,
    /// A SQLite file or a `postgres://` URL [default: `.attest/ledger.sqlite`].
    pub ledger: Option<String>,
    /// The tenant whose chain to use.
    pub tenant: Option<String>,
    /// The policy YAML file [default: `./attest.yaml` when it exists, else built in].
    pub policy: Option<String>,
    /// Recorded as the agent of calls that name none.
    pub agent: Option<String>,
    /// Recorded as the actor of calls that name none.
    pub actor: Option<String>,
    /// The signing key `checkpoint()` signs with [default: beside the ledger].
    pub key: Option<String>,
    /// `full` (default), `normal` or `off`.
    pub durability: Option<String>,
    /// Seconds an ask waits for a person before the call comes back held [default 0].
    pub wait: Option<f64>,
    /// Decide every call but run it as if policy said act, recording the verdict.
    pub shadow: Option<bool>,
    /// With `agents:` configured, this agent's credential (an `attest agents add` token
    /// or a JWT) [default: `$ATTEST_AGENT_TOKEN`]: every call is recorded under the agent
    /// it proves, checked as each call is made.
    pub agent_token: Option<String>,
}

/// Why the engine did not open: `kind` is `ConfigError` or `PolicyError` (the message
/// names the file, line and key, as the binary's does) or `AttestError`.
#[napi(object)]
#[derive(Clone)]
pub struct OpenError {
    /// `ConfigError`, `PolicyError` or `AttestError`.
    pub kind: String,
    /// The binary's message for it.
    pub message: String,
}

/// What one call left in the ledger: the row's fields.
#[napi(object)]
#[derive(Clone)]
pub struct Receipt {
    /// The action's id.
    pub action_id: String,
    /// The ledger row's seq.
    pub seq: i64,
    /// The ledger row's hash, lower-case hex.
    pub entry_hash: String,
    /// The row's timestamp (RFC 3339, UTC).
    pub ts: String,
    /// `act`, `ask`, `refuse` or `recorded`.
    pub decision: String,
    /// Why policy decided so.
    pub reasons: Vec<String>,
    /// Who approved or rejected, when a person was asked.
    pub approver: Option<String>,
    /// `verified`, `verified-custom`, `acknowledged`, `attested-only` or `unverified`.
    pub level: Option<String>,
    /// Set when the tool ran but its outcome row could not be written.
    pub warning: Option<String>,
}

impl From<&CoreReceipt> for Receipt {
    fn from(receipt: &CoreReceipt) -> Self {
        Receipt {
            action_id: receipt.action_id.clone(),
            seq: i64::try_from(receipt.seq).unwrap_or(i64::MAX),
            entry_hash: receipt.entry_hash.clone(),
            ts: receipt.ts.clone(),
            decision: receipt.decision.as_str().to_owned(),
            reasons: receipt.reasons.clone(),
            approver: receipt.approver.clone(),
            level: receipt.level.map(|level| level.as_str().to_owned()),
            warning: receipt.warning.clone(),
        }
    }
}

/// How a tool call is described: detected from its name, unless system and verb are given.
#[napi(object)]
pub struct CallSpec {
    /// The function's (or framework tool's) name.
    pub name: String,
    /// The system, when the caller names it.
    pub system: Option<String>,
    /// The verb, when the caller names it.
    pub verb: Option<String>,
    /// The kind of thing acted on, when the caller names it.
    pub target: Option<String>,
    /// The framework making the call (`ai`, `langchain`, …).
    pub framework: Option<String>,
    /// The run id, when one is set.
    pub run_id: Option<String>,
    /// The call is an MCP `tools/call` to this server (`name` is the tool): described as
    /// the MCP proxy describes one.
    pub mcp_server: Option<String>,
    /// The caller named the MCP server itself (it is then the system, known or not),
    /// rather than taking the name the server gives.
    pub mcp_server_named: Option<bool>,
    /// The MCP tool's `readOnlyHint` (untrusted: it may make a call stricter, never a write a read).
    pub read_only_hint: Option<bool>,
    /// The MCP tool's `destructiveHint`.
    pub destructive_hint: Option<bool>,
    /// The MCP tool's `idempotentHint`.
    pub idempotent_hint: Option<bool>,
}

/// The caller's own check of the result, which it runs itself after the tool and
/// answers in `finish`: a read-back (by its name) beats a yes/no `verify`, as in core.
#[napi(object)]
pub struct CheckSpec {
    /// A yes/no check (`verify`): recorded as `verified-custom` or `unverified`.
    pub verify: Option<bool>,
    /// A read-back's name (`readBack`): Attest compares the record it returns with the
    /// params, recorded as `read-back:<name>`.
    pub read_back: Option<String>,
}

/// What the caller's own check said, handed over with the tool's result.
#[napi(object)]
pub struct Judged {
    /// What a `verify` check returned.
    pub verified: Option<bool>,
    /// The record a `readBack` returned, as JSON text (`null` when it found none).
    pub record: Option<String>,
    /// The check threw: it could not run (the row degrades, never to `unverified`).
    pub check_failed: Option<bool>,
}

/// How a call ended, over the tool's answer as JSON.
type CallOutcome = HandoffOutcome;

/// The engine: one ledger, one policy, one approval store.
#[napi]
pub struct Engine {
    /// `None` once closed (or when it did not open).
    opened: Mutex<Option<Arc<Binding>>>,
    open_error: Option<OpenError>,
}

#[napi]
impl Engine {
    /// Opens the engine as every door does; never throws: a configuration that does not
    /// load is `openError` (the JavaScript half throws its typed error).
    #[napi(constructor)]
    pub fn new(options: Option<EngineOptions>) -> Engine {
        match open(options.unwrap_or_default()) {
            Ok(opened) => Engine {
                opened: Mutex::new(Some(Arc::new(opened))),
                open_error: None,
            },
            Err(error) => Engine {
                opened: Mutex::new(None),
                open_error: Some(error),
            },
        }
    }

    /// Why the engine did not open, when it did not.
    #[napi(getter)]
    pub fn open_error(&self) -> Option<OpenError> {
        self.open_error.clone()
    }

    /// The approval inbox's base URL (the configuration's, else the default address).
    #[napi(getter)]
    pub fn inbox_url(&self) -> Option<String> {
        self.opened()
            .ok()
            .map(|opened| opened.inbox_url().to_owned())
    }

    /// The page where a person signs in and decides request `id`.
    #[napi]
    pub fn request_link(&self, id: String) -> Result<String> {
        let opened = self.opened().map_err(failure)?;
        Ok(opened.request_link(&id))
    }

    /// Decides a call and, when it is cleared, resolves with it ready to run; with
    /// `token` (from an earlier held call), the call is that one presented again.
    /// `idempotency_key`: a write made again with the same key and params, within the
    /// key's lifetime, does not run: it resolves `replayed`, with the first call's receipt.
    #[napi]
    pub async fn start(
        &self,
        spec: CallSpec,
        params: String,
        token: Option<String>,
        check: Option<CheckSpec>,
        idempotency_key: Option<String>,
    ) -> Result<Started> {
        let opened = match self.opened() {
            Ok(opened) => opened,
            Err(closed) => return Ok(Started::error(closed, None)),
        };
        let presented = parse_json(&params, "params")?;
        let action = describe(&opened, &spec, presented.clone())?;
        let start = match token {
            Some(token) => Start::retry(&ResumeToken::new(token), action),
            None => action.into(),
        };
        Ok(governed(&opened, start, Some(presented), check, idempotency_key).await)
    }

    /// Resumes the approved call `token` stands for, with the approved params.
    #[napi]
    pub async fn resume(&self, token: String, check: Option<CheckSpec>) -> Result<Started> {
        let opened = match self.opened() {
            Ok(opened) => opened,
            Err(closed) => return Ok(Started::error(closed, None)),
        };
        Ok(governed(&opened, ResumeToken::new(token).into(), None, check, None).await)
    }

    /// Records an action that already happened (decision `recorded`); `result`, when
    /// given, is hashed, never stored. Resolves `recorded` with its receipt, else
    /// `refused` (agents are configured and the credential proves no agent) or `error`.
    #[napi]
    pub async fn record(
        &self,
        spec: CallSpec,
        params: String,
        result: Option<String>,
    ) -> Result<Started> {
        let opened = match self.opened() {
            Ok(opened) => opened,
            Err(closed) => return Ok(Started::error(closed, None)),
        };
        let action = describe(&opened, &spec, parse_json(&params, "params")?)?;
        let result = result.map(|text| parse_json(&text, "result")).transpose()?;
        Ok(match opened.record(action, result.as_ref()).await {
            Ok(receipt) => Started::ended("recorded", String::new(), Some(&receipt)),
            Err(err) => Started::failed(&err),
        })
    }

    /// What a person sees of approval request `id`, as JSON text: its status, who
    /// decided, and the call's summary.
    #[napi]
    pub async fn request(&self, id: String) -> Result<String> {
        let opened = self.opened().map_err(failure)?;
        // The approval store's calls block: run them off the runtime's worker threads.
        let summary = tokio::task::spawn_blocking(move || opened.request(&id))
            .await
            .map_err(|err| failure(err.to_string()))?
            .map_err(|err| failure(error_chain(&err)))?;
        Ok(summary.to_string())
    }

    /// Signs a checkpoint of the ledger's head with the signing key, after verifying
    /// what it vouches for; resolves with the signed note.
    #[napi]
    pub async fn checkpoint(&self) -> Result<String> {
        let opened = self.opened().map_err(failure)?;
        tokio::task::spawn_blocking(move || opened.checkpoint())
            .await
            .map_err(|err| failure(err.to_string()))?
            .map_err(|err| failure(error_chain(&err)))
    }

    /// Closes the engine: later calls fail with "this Attest is closed"; calls already
    /// under way finish (they hold the pipeline until then).
    #[napi]
    pub fn close(&self) {
        if let Ok(mut opened) = self.opened.lock() {
            opened.take();
        }
    }

    fn opened(&self) -> std::result::Result<Arc<Binding>, String> {
        let opened = self
            .opened
            .lock()
            .map_err(|_| "the engine's state was poisoned".to_owned())?;
        match (opened.as_ref(), &self.open_error) {
            (Some(opened), _) => Ok(Arc::clone(opened)),
            (None, Some(error)) => Err(format!("this Attest did not open: {}", error.message)),
            (None, None) => Err("this Attest is closed".to_owned()),
        }
    }
}

/// Where a call stands after `start` or `resume`: cleared to run (`status` `run`: run
/// the tool with `params`, then `finish` or `fail`), or ended without running it.
#[napi]
pub struct Started {
    status: String,
    message: Option<String>,
    request_id: Option<String>,
    token: Option<String>,
    approver: Option<String>,
    receipt: Option<Receipt>,
    params: Option<String>,
    edited: bool,
    /// The suspended pipeline of a call cleared to run, until its tool answers.
    running: Mutex<Option<BindingRun>>,
}

#[napi]
impl Started {
    /// `run`, `refused`, `rejected`, `expired`, `held`, `replayed` (a retry of a keyed
    /// call that already ran: `receipt` is the first call's), `recorded` (from `record`)
    /// or `error` (Attest could not decide or record: the tool did not run).
    #[napi(getter)]
    pub fn status(&self) -> String {
        self.status.clone()
    }

    /// Why the tool did not run, when it did not.
    #[napi(getter)]
    pub fn message(&self) -> Option<String> {
        self.message.clone()
    }

    /// The approval request's id (held and expired calls).
    #[napi(getter)]
    pub fn request_id(&self) -> Option<String> {
        self.request_id.clone()
    }

    /// The token that resumes a held call once a person approves.
    #[napi(getter)]
    pub fn token(&self) -> Option<String> {
        self.token.clone()
    }

    /// Who rejected the call.
    #[napi(getter)]
    pub fn approver(&self) -> Option<String> {
        self.approver.clone()
    }

    /// The row of a call that did not run (refused, rejected, expired, held).
    #[napi(getter)]
    pub fn receipt(&self) -> Option<Receipt> {
        self.receipt.clone()
    }

    /// The params to run the tool with, as JSON text (a person may have edited them).
    #[napi(getter)]
    pub fn params(&self) -> Option<String> {
        self.params.clone()
    }

    /// True when `params` differ from the ones the call presented (a person's edits on
    /// approval), or the call presented none (a resume by token).
    #[napi(getter)]
    pub fn edited(&self) -> bool {
        self.edited
    }

    /// The tool returned `result` (JSON text): the pipeline verifies and records it
    /// (with what the caller's own check said, when it brought one); resolves with the
    /// outcome row's receipt.
    #[napi]
    pub async fn finish(&self, result: String, judged: Option<Judged>) -> Result<Receipt> {
        let value = parse_json(&result, "result")?;
        let judged = match judged {
            None => None,
            Some(Judged {
                check_failed: Some(true),
                ..
            }) => Some(Judgement::CouldNotRun),
            Some(Judged {
                verified: Some(ok), ..
            }) => Some(Judgement::Verified(ok)),
            Some(Judged {
                record: Some(text), ..
            }) => {
                let record = parse_json(&text, "record")?;
                Some(Judgement::Record(Some(record).filter(|r| !r.is_null())))
            }
            Some(_) => None,
        };
        self.answer(Ok(value), judged).await
    }

    /// The tool threw: `error` names the failure (only its hash is recorded); resolves
    /// with the failed execution's receipt.
    #[napi]
    pub async fn fail(&self, error: String) -> Result<Receipt> {
        self.answer(Err(error), None).await
    }
}

impl Started {
    fn error(message: String, receipt: Option<&CoreReceipt>) -> Started {
        Started::ended("error", message, receipt)
    }

    /// A call Attest could not decide or record; a credential that does not prove this
    /// instance's agent is `refused` (nothing was recorded).
    fn failed(err: &AttestError) -> Started {
        match err {
            AttestError::Agent(refusal) => Started::ended("refused", refusal.with_detail(), None),
            _ => Started::error(error_chain(err), err.receipt()),
        }
    }

    fn ended(status: &str, message: String, receipt: Option<&CoreReceipt>) -> Started {
        Started {
            status: status.to_owned(),
            message: Some(message),
            request_id: None,
            token: None,
            approver: None,
            receipt: receipt.map(Receipt::from),
            params: None,
            edited: false,
            running: Mutex::new(None),
        }
    }

    /// The call as it ended without running its tool.
    fn not_run(outcome: CallOutcome) -> Started {
        let message = outcome
            .why_not_run()
            .unwrap_or_else(|| "the call finished without running its tool".to_owned());
        let status = match &outcome {
            Outcome::Rejected { .. } => "rejected",
            Outcome::Expired { .. } => "expired",
            Outcome::Held { .. } => "held",
            Outcome::Refused { .. } => "refused",
            Outcome::Replayed { .. } => "replayed",
            _ => "error",
        };
        let mut started = Started::ended(status, message, Some(outcome.receipt()));
        match outcome {
            Outcome::Rejected { approver, .. } => started.approver = Some(approver),
            Outcome::Expired { id, .. } => started.request_id = Some(id),
            Outcome::Held { id, token, .. } => {
                started.request_id = Some(id);
                started.token = Some(token.expose().to_owned());
            }
            _ => {}
        }
        started
    }

    async fn answer(
        &self,
        answer: std::result::Result<Value, String>,
        judged: Option<Judgement>,
    ) -> Result<Receipt> {
        let running = self
            .running
            .lock()
            .map_err(|_| failure("the call's state was poisoned"))?
            .take()
            .ok_or_else(|| failure("this call was already finished, or was not cleared to run"))?;
        match running.finish(answer, judged).await {
            Ok(outcome) => Ok(Receipt::from(outcome.receipt())),
            Err(err) => Err(failure(error_chain(&err))),
        }
    }
}

/// Opens the engine from `options` through core's setup.
fn open(options: EngineOptions) -> std::result::Result<Binding, OpenError> {
    let wait = options
        .wait
        .map(Duration::try_from_secs_f64)
        .transpose()
        .map_err(|_| OpenError {
            kind: "AttestError".to_owned(),
            message: "wait must be a number of seconds, 0 or more".to_owned(),
        })?;
    let agent_token = options.agent_token;
    let overrides = Overrides {
        config: options.config.map(PathBuf::from),
        ledger: options.ledger,
        tenant: options.tenant,
        durability: options.durability,
        policy: options.policy.map(PathBuf::from),
        key: options.key.map(PathBuf::from),
        agent: options.agent,
        actor: options.actor,
        wait,
        shadow: options.shadow.unwrap_or(false),
        ..Overrides::default()
    };
    // The identity provider's keys are fetched now, once (on napi's runtime; the
    // constructor is synchronous): an instance that could not check a JWT does not open.
    napi::bindgen_prelude::block_on(open_binding(&overrides, agent_token)).map_err(|err| {
        OpenError {
            kind: match err {
                BindingError::Config(ConfigError::Policy { .. }) => "PolicyError",
                _ => "ConfigError",
            }
            .to_owned(),
            message: error_chain(&err),
        }
    })
}

/// The action a call describes ([`Binding::describe`]).
fn describe(binding: &Binding, spec: &CallSpec, params: Value) -> Result<Action> {
    let verb = spec
        .verb
        .as_deref()
        .map(str::parse::<Verb>)
        .transpose()
        .map_err(|err| Error::new(Status::InvalidArg, err.to_string()))?;
    let call = BindingCall {
        name: spec.name.clone(),
        system: spec.system.clone(),
        verb,
        target: spec.target.clone(),
        framework: spec.framework.clone(),
        run: spec.run_id.clone(),
        mcp: spec.mcp_server.as_ref().map(|server| McpServerCall {
            server: server.clone(),
            named: spec.mcp_server_named.unwrap_or(false),
            hints: ToolHints {
                read_only: spec.read_only_hint,
                destructive: spec.destructive_hint,
                idempotent: spec.idempotent_hint,
            },
        }),
    };
    Ok(binding.describe(&call, params))
}

/// The one governed call every entry point makes ([`Binding::start`]): resolves `run`
/// once the pipeline asks for the tool, else how the call ended without it.
async fn governed(
    binding: &Binding,
    start: Start,
    presented: Option<Value>,
    check: Option<CheckSpec>,
    key: Option<String>,
) -> Started {
    let check =
        check.and_then(|check| CallerCheck::chosen(check.verify == Some(true), check.read_back));
    match binding.start(start, check, key).await {
        BindingStart::Run(run) => Started {
            status: "run".to_owned(),
            message: None,
            request_id: None,
            token: None,
            approver: None,
            receipt: None,
            edited: presented.as_ref() != Some(run.params()),
            params: Some(run.params().to_string()),
            running: Mutex::new(Some(run)),
        },
        BindingStart::Ended(Ok(outcome)) => Started::not_run(outcome),
        BindingStart::Ended(Err(err)) => Started::failed(&err),
    }
}

fn parse_json(text: &str, what: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|err| Error::new(Status::InvalidArg, format!("{what} is not JSON: {err}")))
}

fn failure(message: impl Into<String>) -> Error {
    Error::new(Status::GenericFailure, message.into())
}

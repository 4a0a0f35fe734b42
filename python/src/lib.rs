//! `attest._attest`, the native half of the Python package `attest`: the Rust engine
//! (`attest-core`) behind a few Python classes. The Python half (`python/attest/`) adds
//! the decorator, the `run` context and the framework adapters.
//!
//! Every call that waits on the engine (a decision, an append) releases the GIL, so other
//! Python threads run meanwhile. Params and results cross as JSON text; the tool's own
//! Python result is never converted back: the caller keeps the object its function made.
//!
//! This module only translates: all calls into core go through the `engine` module.

mod engine;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use attest_core::{
    error_chain as chain, AttestError as CoreError, Outcome as CoreOutcome, Receipt as CoreReceipt,
};
use attest_policy::Verb;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use attest_core::setup::Overrides;
use attest_core::verification::{CallerCheck as CheckKind, Judgement};
use attest_core::HandoffOutcome as CallOutcome;
use engine::{CallSpec, Engine as CoreEngine, EngineError, Started};

pyo3::create_exception!(
    _attest,
    AttestError,
    PyException,
    "Attest could not decide or record a call (the tool did not run, or ran unrecorded)."
);
pyo3::create_exception!(
    _attest,
    ConfigError,
    AttestError,
    "The configuration does not load: the message names the file, line and key (or the setting and where it came from), as the binary's does."
);
pyo3::create_exception!(
    _attest,
    Refused,
    AttestError,
    "Policy refused the call; the tool did not run. `.receipt` is the refusal's row."
);
pyo3::create_exception!(
    _attest,
    Rejected,
    AttestError,
    "A person rejected the call; the tool did not run. `.approver`, `.receipt`."
);
pyo3::create_exception!(
    _attest,
    Expired,
    Rejected,
    "Nobody approved the call in time; the tool did not run. `.request_id`, `.receipt`."
);
pyo3::create_exception!(
    _attest,
    Held,
    AttestError,
    "The call waits for a person: `.token` resumes it once approved; `.request_id`, `.receipt`."
);

pyo3::create_exception!(
    _attest,
    Replayed,
    AttestError,
    "A call with the same `idempotency_key` and the same params already ran: the tool did not run again. `.receipt` is the first call's outcome row; its output is not kept in process."
);

/// What one call left in the ledger.
#[pyclass(module = "attest", frozen, get_all)]
#[derive(Clone)]
struct Receipt {
    /// The action's id.
    action_id: String,
    /// The ledger row's seq.
    seq: u64,
    /// The ledger row's hash, lower-case hex.
    entry_hash: String,
    /// The row's timestamp (RFC 3339, UTC).
    ts: String,
    /// `act`, `ask`, `refuse` or `recorded`.
    decision: String,
    /// Why policy decided so.
    reasons: Vec<String>,
    /// Who approved or rejected, when a person was asked.
    approver: Option<String>,
    /// `verified`, `verified-custom`, `acknowledged`, `attested-only` or `unverified`.
    level: Option<String>,
    /// Set when the tool ran but its outcome row could not be written.
    warning: Option<String>,
}

impl From<&CoreReceipt> for Receipt {
    fn from(receipt: &CoreReceipt) -> Self {
        Receipt {
            action_id: receipt.action_id.clone(),
            seq: receipt.seq,
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

#[pymethods]
impl Receipt {
    /// The receipt as a plain dict (JSON-ready).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("action_id", &self.action_id)?;
        dict.set_item("seq", self.seq)?;
        dict.set_item("entry_hash", &self.entry_hash)?;
        dict.set_item("ts", &self.ts)?;
        dict.set_item("decision", &self.decision)?;
        dict.set_item("reasons", &self.reasons)?;
        dict.set_item("approver", &self.approver)?;
        dict.set_item("level", &self.level)?;
        dict.set_item("warning", &self.warning)?;
        Ok(dict)
    }

    fn __repr__(&self) -> String {
        format!(
            "Receipt(seq={}, decision={:?}, level={:?}, action_id={:?})",
            self.seq,
            self.decision,
            self.level.as_deref().unwrap_or("none"),
            self.action_id
        )
    }
}

/// A call cleared to run: run the tool with `params`, then `finish` or `fail`.
#[pyclass(module = "attest._attest", frozen)]
struct Running {
    params: String,
    edited: bool,
    inner: Mutex<Option<engine::Running>>,
}

#[pymethods]
impl Running {
    /// The params to run the tool with, as JSON text (a person may have edited them).
    #[getter]
    fn params(&self) -> &str {
        &self.params
    }

    /// True when `params` differ from the ones the call presented (a person's edits on
    /// approval), or the call presented none (a resume by token).
    #[getter]
    fn edited(&self) -> bool {
        self.edited
    }

    /// The tool returned: `result` is its result as JSON text (for verification only).
    /// What the caller's own check said comes with it: `verified` (a `verify=` check's
    /// answer), `record` (the JSON a `read_back=` fetched, `null` when it found nothing),
    /// `check_failed` (the check raised), or `check_cancelled` (the check was cancelled
    /// or interrupted before it answered).
    #[pyo3(signature = (result, verified=None, record=None, check_failed=false, check_cancelled=false))]
    fn finish(
        &self,
        py: Python<'_>,
        result: &str,
        verified: Option<bool>,
        record: Option<&str>,
        check_failed: bool,
        check_cancelled: bool,
    ) -> PyResult<Receipt> {
        // The tool ran, so its row is written whatever its result: JSON the engine cannot
        // read (nested deeper than it reads) stands in as such, never raw.
        let value = parse_json(result, "result")
            .unwrap_or_else(|_| serde_json::json!({"unrepresentable": "json"}));
        let judged = match (check_cancelled, check_failed, verified, record) {
            (true, _, _, _) => Some(Judgement::Cancelled),
            (false, true, _, _) => Some(Judgement::CouldNotRun),
            (false, false, Some(ok), _) => Some(Judgement::Verified(ok)),
            (false, false, None, Some(text)) => {
                // A record the read-back found that JSON cannot carry is no record read.
                Some(match parse_json(text, "record") {
                    Ok(record) => Judgement::Record(Some(record).filter(|r| !r.is_null())),
                    Err(_) => Judgement::CouldNotRun,
                })
            }
            (false, false, None, None) => None,
        };
        self.answer(py, Ok(value), judged)
    }

    /// The tool raised: `error` names the failure (only its hash is recorded).
    fn fail(&self, py: Python<'_>, error: &str) -> PyResult<Receipt> {
        self.answer(py, Err(error.to_owned()), None)
    }
}

impl Running {
    fn answer(
        &self,
        py: Python<'_>,
        answer: Result<Value, String>,
        judged: Option<Judgement>,
    ) -> PyResult<Receipt> {
        let running = self
            .inner
            .lock()
            .map_err(|_| AttestError::new_err("the call's state was poisoned"))?
            .take()
            .ok_or_else(|| AttestError::new_err("this call was already finished"))?;
        let receipt = py.detach(move || running.finish(answer, judged));
        receipt
            .map(|receipt| Receipt::from(&receipt))
            .map_err(|err| engine_error(py, err))
    }
}

/// The engine: one ledger, one policy, one approval store.
#[pyclass(module = "attest._attest", frozen, name = "Engine")]
struct Engine {
    inner: CoreEngine,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (config=None, ledger=None, tenant=None, policy=None, agent=None, actor=None, key=None, durability=None, wait=None, shadow=false, agent_token=None))]
    #[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
    fn new(
        py: Python<'_>,
        config: Option<PathBuf>,
        ledger: Option<String>,
        tenant: Option<String>,
        policy: Option<PathBuf>,
        agent: Option<String>,
        actor: Option<String>,
        key: Option<PathBuf>,
        durability: Option<String>,
        wait: Option<f64>,
        shadow: bool,
        agent_token: Option<String>,
    ) -> PyResult<Engine> {
        let wait = wait
            .map(Duration::try_from_secs_f64)
            .transpose()
            .map_err(|_| PyValueError::new_err("wait must be a number of seconds, 0 or more"))?;
        // The keyword arguments are the door's own settings: they beat the environment,
        // which beats the configuration file, which beats the defaults (core's precedence).
        let overrides = Overrides {
            config,
            ledger,
            tenant,
            durability,
            policy,
            key,
            agent,
            actor,
            wait,
            shadow,
            ..Overrides::default()
        };
        let inner = py
            .detach(move || CoreEngine::open(&overrides, agent_token))
            .map_err(|err| engine_error(py, err))?;
        Ok(Engine { inner })
    }

    /// Decides a call and returns it cleared to run; raises `Refused`, `Rejected`,
    /// `Held` or `AttestError` when it may not run. With `token` (from an earlier
    /// `Held`), the call is the held one presented again and runs once approved.
    /// `verify` / `read_back` (the read-back's name) say which check of its own the
    /// caller answers in `Running.finish`.
    #[pyo3(signature = (name, params, system=None, verb=None, target=None, framework=None, run_id=None, token=None, verify=false, read_back=None, idempotency_key=None))]
    #[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
    fn start(
        &self,
        py: Python<'_>,
        name: String,
        params: &str,
        system: Option<String>,
        verb: Option<&str>,
        target: Option<String>,
        framework: Option<String>,
        run_id: Option<String>,
        token: Option<String>,
        verify: bool,
        read_back: Option<String>,
        idempotency_key: Option<String>,
    ) -> PyResult<Running> {
        let spec = call_spec(name, system, parse_verb(verb)?, target, framework, run_id);
        let presented = parse_json(params, "params")?;
        let action = self.inner.action(&spec, presented.clone());
        let check = CheckKind::chosen(verify, read_back);
        let started = py.detach(|| self.inner.start(action, token, check, idempotency_key));
        cleared(py, started, Some(&presented))
    }

    /// Resumes an approved call by its resume token; returns it cleared to run with the
    /// approved params.
    #[pyo3(signature = (token, verify=false, read_back=None))]
    fn resume(
        &self,
        py: Python<'_>,
        token: String,
        verify: bool,
        read_back: Option<String>,
    ) -> PyResult<Running> {
        let check = CheckKind::chosen(verify, read_back);
        let started = py.detach(|| self.inner.resume(token, check));
        cleared(py, started, None)
    }

    /// What a person sees of approval request `id`, as JSON text: its status
    /// (`pending`, `approved`, `edited`, `rejected`, `expired`, …), who decided, and the
    /// call's summary.
    fn request(&self, py: Python<'_>, id: &str) -> PyResult<String> {
        py.detach(|| self.inner.request(id))
            .map(|summary| summary.to_string())
            .map_err(|err| engine_error(py, err))
    }

    /// Records an action that already happened (decision `recorded`).
    #[pyo3(signature = (name, params, system=None, verb=None, target=None, result=None, framework=None, run_id=None))]
    #[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments one to one
    fn record(
        &self,
        py: Python<'_>,
        name: String,
        params: &str,
        system: Option<String>,
        verb: Option<&str>,
        target: Option<String>,
        result: Option<&str>,
        framework: Option<String>,
        run_id: Option<String>,
    ) -> PyResult<Receipt> {
        let spec = call_spec(name, system, parse_verb(verb)?, target, framework, run_id);
        let action = self.inner.action(&spec, parse_json(params, "params")?);
        let result = result.map(|text| parse_json(text, "result")).transpose()?;
        let receipt = py.detach(|| self.inner.record(action, result));
        receipt
            .map(|receipt| Receipt::from(&receipt))
            .map_err(|err| core_error(py, err))
    }

    /// The approval inbox's base URL (the configuration's, else the default address).
    fn inbox_url(&self) -> &str {
        self.inner.inbox_url()
    }

    /// The page where a person signs in and decides request `id`.
    fn request_link(&self, id: &str) -> String {
        self.inner.request_link(id)
    }

    /// Signs a checkpoint of the ledger's head with the signing key; returns the note.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| self.inner.checkpoint())
            .map_err(|err| engine_error(py, err))
    }
}

/// The call as the Python side names it.
fn call_spec(
    name: String,
    system: Option<String>,
    verb: Option<Verb>,
    target: Option<String>,
    framework: Option<String>,
    run: Option<String>,
) -> CallSpec {
    CallSpec {
        name,
        system,
        verb,
        target,
        framework,
        run,
        mcp: None,
    }
}

fn parse_verb(verb: Option<&str>) -> PyResult<Option<Verb>> {
    verb.map(|word| {
        word.parse::<Verb>()
            .map_err(|err| PyValueError::new_err(err.to_string()))
    })
    .transpose()
}

fn parse_json(text: &str, what: &str) -> PyResult<Value> {
    serde_json::from_str(text)
        .map_err(|err| PyValueError::new_err(format!("{what} is not JSON: {err}")))
}

/// A started call that must be cleared to run; anything else raises.
fn cleared(py: Python<'_>, started: Started, presented: Option<&Value>) -> PyResult<Running> {
    match started {
        Started::Run(running) => Ok(Running {
            params: running.params().to_string(),
            edited: presented != Some(running.params()),
            inner: Mutex::new(Some(running)),
        }),
        Started::Done(Err(err)) => Err(core_error(py, err)),
        Started::Done(Ok(outcome)) => Err(not_run_error(py, outcome)),
    }
}

fn engine_error(py: Python<'_>, err: EngineError) -> PyErr {
    match err {
        EngineError::Attest(err) => core_error(py, err),
        // The binary's message: the file, line and key (or the setting and its source).
        EngineError::Open(err) => ConfigError::new_err(chain(&err)),
        other => AttestError::new_err(chain(&other)),
    }
}

/// The exception a call that did not run its tool raises, with its receipt (and token)
/// as attributes.
fn not_run_error(py: Python<'_>, outcome: CallOutcome) -> PyErr {
    let Some(message) = outcome.why_not_run() else {
        return AttestError::new_err("the call finished without running its tool");
    };
    let (exception, attributes): (PyErr, Vec<(&str, Py<PyAny>)>) = match &outcome {
        CoreOutcome::Rejected { approver, .. } => (
            Rejected::new_err(message),
            vec![("approver", str_object(py, approver))],
        ),
        CoreOutcome::Expired { id, .. } => (
            Expired::new_err(message),
            vec![("request_id", str_object(py, id)), ("approver", py.None())],
        ),
        CoreOutcome::Held { id, token, .. } => (
            Held::new_err(message),
            vec![
                ("request_id", str_object(py, id)),
                ("token", str_object(py, token.expose())),
            ],
        ),
        CoreOutcome::Replayed { .. } => (Replayed::new_err(message), vec![]),
        _ => (Refused::new_err(message), vec![]),
    };
    with_attributes(py, exception, Some(outcome.receipt()), attributes)
}

/// The exception for a call Attest could not decide or record; a credential that does
/// not prove this instance's agent is `Refused` (with no receipt: nothing was recorded).
fn core_error(py: Python<'_>, err: CoreError) -> PyErr {
    let exception = match &err {
        CoreError::Agent(refusal) => Refused::new_err(refusal.with_detail()),
        _ => AttestError::new_err(chain(&err)),
    };
    with_attributes(py, exception, err.receipt(), vec![])
}

/// `exception`, with `receipt` (or `None`) and `attributes` set on it.
fn with_attributes(
    py: Python<'_>,
    exception: PyErr,
    receipt: Option<&CoreReceipt>,
    attributes: Vec<(&str, Py<PyAny>)>,
) -> PyErr {
    let value = exception.value(py);
    let receipt = receipt
        .and_then(|receipt| Py::new(py, Receipt::from(receipt)).ok())
        .map(Py::into_any);
    let _ = value.setattr("receipt", receipt.unwrap_or_else(|| py.None()));
    for (name, attribute) in attributes {
        let _ = value.setattr(name, attribute);
    }
    exception
}

fn str_object(py: Python<'_>, text: &str) -> Py<PyAny> {
    pyo3::types::PyString::new(py, text).into_any().unbind()
}

/// The native module `attest._attest`.
#[pymodule]
fn _attest(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_class::<Engine>()?;
    module.add_class::<Running>()?;
    module.add_class::<Receipt>()?;
    module.add("AttestError", py.get_type::<AttestError>())?;
    module.add("ConfigError", py.get_type::<ConfigError>())?;
    module.add("Refused", py.get_type::<Refused>())?;
    module.add("Rejected", py.get_type::<Rejected>())?;
    module.add("Expired", py.get_type::<Expired>())?;
    module.add("Held", py.get_type::<Held>())?;
    module.add("Replayed", py.get_type::<Replayed>())?;
    Ok(())
}

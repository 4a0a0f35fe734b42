//! A caller's own check of a call's result (`verify=` / `verify`, `read_back=` /
//! `readBack`) that runs on the caller's side, as a [`CustomCheck`]: for the language
//! bindings, whose callables must run on their own thread (a Python function under the
//! GIL, a JavaScript callback on Node's event loop), never inside a core future.
//!
//! The callable runs after the tool returned and before the answer is handed to the
//! pipeline ([`crate::Cleared::finish`]). What it said travels with the tool's answer
//! ([`Judgement`]) into a slot the [`CustomCheck`] reads when the pipeline's verification
//! step asks.

use std::sync::{Arc, Mutex};

use attest_policy::Action;
use serde_json::Value;

use super::{CustomCheck, Evidence, Finding};
use crate::ToolError;

/// Which check the caller brings for one call.
#[derive(Debug, Clone)]
pub enum CallerCheck {
    /// `verify=`: a yes/no check, recorded as method `custom`.
    Verify,
    /// `read_back=`: fetches the record; Attest compares it with the params (recorded
    /// as `read-back:<name>`, with its evidence).
    ReadBack {
        /// The callable's name.
        name: String,
    },
}

impl CallerCheck {
    /// The check a caller brought: a read-back (by its name) beats a yes/no `verify`.
    pub fn chosen(verify: bool, read_back: Option<String>) -> Option<CallerCheck> {
        match (read_back, verify) {
            (Some(name), _) => Some(CallerCheck::ReadBack { name }),
            (None, true) => Some(CallerCheck::Verify),
            (None, false) => None,
        }
    }
}

/// What the caller's check said about the result.
#[derive(Debug, Clone)]
pub enum Judgement {
    /// `verify=` returned true or false.
    Verified(bool),
    /// `read_back=` returned the record (JSON), or `None` when it found nothing.
    Record(Option<Value>),
    /// The check raised: it could not run (the outcome degrades, never `unverified`).
    CouldNotRun,
    /// The check was cancelled before it answered (the caller's task was cancelled, or
    /// interrupted): the tool ran, the check did not finish; the outcome degrades as for
    /// [`Judgement::CouldNotRun`], and its evidence says it was cancelled.
    Cancelled,
}

/// The error a yes/no caller check gives when it was cancelled ([`Judgement::Cancelled`]):
/// the verification step records that the check was cancelled rather than that it could
/// not run.
#[derive(Debug, thiserror::Error)]
#[error("the check was cancelled")]
pub struct CheckCancelled;

/// Where the caller leaves its [`Judgement`] for the check to read.
pub type JudgementSlot = Arc<Mutex<Option<Judgement>>>;

/// The core check for `kind`, reading the caller's judgement from `slot`.
pub fn caller_check(kind: &CallerCheck, slot: &JudgementSlot) -> CustomCheck {
    let slot = Arc::clone(slot);
    match kind {
        CallerCheck::Verify => CustomCheck::sync(move |_action, _result| match take(&slot) {
            Some(Judgement::Verified(ok)) => Ok(ok),
            Some(Judgement::Cancelled) => Err(ToolError::from(CheckCancelled)),
            _ => Err(ToolError::from("the verify= check did not answer")),
        }),
        CallerCheck::ReadBack { name } => {
            let name = name.clone();
            CustomCheck::read_back(name.clone(), move |action, result| {
                let finding = read_back_finding(&name, action, result, take(&slot));
                async move { finding }
            })
        }
    }
}

fn take(slot: &JudgementSlot) -> Option<Judgement> {
    slot.lock().ok().and_then(|mut judged| judged.take())
}

/// Compares the record the caller read back with what the call meant to write; a record
/// that was not found, or a read-back that raised, degrades.
fn read_back_finding(
    name: &str,
    action: &Action,
    result: &Value,
    judged: Option<Judgement>,
) -> Finding {
    let evidence = Evidence::new(name);
    match judged {
        Some(Judgement::Record(Some(record))) => {
            // The record read must be the one the tool said it wrote.
            let expect_id = result.get("id").and_then(Value::as_str);
            Finding::from_record(evidence, &action.params, &record, expect_id)
        }
        Some(Judgement::Record(None)) => {
            Finding::degraded("the read-back found no record", evidence)
        }
        Some(Judgement::Cancelled) => Finding::degraded("the read-back was cancelled", evidence),
        _ => Finding::degraded("the read-back could not run", evidence),
    }
}

//! Reading back a write whose outcome was never recorded (its process died between the
//! intent and the outcome): with the call alone, no result. Only a recipe that finds
//! the record from the call's own params or target can (a search by a natural key, a
//! read by an id the caller chose); one that needs the result's id does not apply.

use attest_ledger::Verification;
use attest_policy::Action;
use serde_json::{Map, Value};

use super::{verification, Finding, Level, ReadBack};

/// What a read-back says became of the call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReadOutcome {
    /// The record is there: it ran (verified when its fields match the call,
    /// acknowledged when nothing could be compared).
    Ran(Verification),
    /// The record is not there, and the recipe says an absent record contradicts the
    /// write (`missing: contradict`): it did not run.
    NotRun,
    /// The read could not tell (it could not run, the record differs from the call, or
    /// an absent record proves nothing): why, safe for the ledger.
    Unknown(String),
}

/// Reads `action` back without a result; `None` when no driver can look it up so.
pub(crate) async fn read_outcome(action: &Action, readback: &ReadBack) -> Option<ReadOutcome> {
    let (driver, finding) = readback.check(action, &Value::Object(Map::new())).await?;
    let method = format!("read-back:{driver}");
    Some(match finding {
        Finding::Degraded { reason, .. } => ReadOutcome::Unknown(reason),
        Finding::Compared(evidence) => {
            let absent = !evidence.fields.is_empty()
                && evidence.fields.iter().all(|f| {
                    f.ok || (f.field == "record"
                        && f.got.is_null()
                        && f.want == Value::String("present".to_owned()))
                })
                && evidence.fields.iter().any(|f| !f.ok);
            if absent {
                return Some(ReadOutcome::NotRun);
            }
            let finding = Finding::Compared(evidence);
            match finding.level(Level::Acknowledged) {
                Level::Unverified => {
                    ReadOutcome::Unknown("the record read back does not match the call".to_owned())
                }
                level => {
                    let matched = finding.matched();
                    ReadOutcome::Ran(verification(
                        level,
                        &method,
                        matched,
                        finding.into_evidence(),
                    ))
                }
            }
        }
    })
}

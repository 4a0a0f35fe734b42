//! Intents without an outcome: writes that were cleared to run and recorded as about to
//! run, whose outcome row never followed (a crash, a full or read-only disk); and the
//! outcome row written when one is found after the fact (read back from the vendor
//! when the same call is retried, or a person's answer: `attest intents resolve`).

use std::borrow::Cow;

pub use attest_ledger::OpenIntent;
use attest_ledger::{Filter, Ledger, LedgerError, OpenIntents, Record};
use serde::Deserialize;

use crate::record::INTENT;

/// The fields of a body this scan reads; anything unparsable is verify's to report.
#[derive(Deserialize)]
struct View<'a> {
    #[serde(borrow)]
    action_id: Cow<'a, str>,
    #[serde(borrow, default)]
    system: Cow<'a, str>,
    #[serde(borrow, default)]
    verb: Cow<'a, str>,
    #[serde(borrow, default)]
    execution: Option<ExecutionView<'a>>,
}

#[derive(Deserialize)]
struct ExecutionView<'a> {
    #[serde(borrow)]
    status: Cow<'a, str>,
}

/// Every intent from `from_seq` on that has no later row with its `action_id`, oldest
/// first. One streaming pass; memory grows with the open intents only.
pub fn open_intents(ledger: &Ledger, from_seq: u64) -> Result<Vec<OpenIntent>, LedgerError> {
    let mut open = OpenIntents::default();
    let intent = memchr::memmem::Finder::new(INTENT.as_bytes());
    ledger.for_each_row(from_seq, |row| {
        // With no intent open, only an intent row changes anything, and a body that
        // spells "intent" nowhere (nor escapes anything) cannot hold one: skip the
        // parse.
        if open.is_empty() && !row.body.contains(&b'\\') && intent.find(row.body).is_none() {
            return Ok(true);
        }
        let Ok(view) = serde_json::from_slice::<View<'_>>(row.body) else {
            return Ok(true);
        };
        let is_intent = view.execution.as_ref().is_some_and(|e| e.status == INTENT);
        open.see(
            row.seq,
            &view.action_id,
            &view.system,
            &view.verb,
            is_intent,
        );
        Ok(true)
    })?;
    Ok(open.into_sorted())
}

/// How an open intent's action was found to have ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// It ran: read back from the vendor (the verification says how sure), or a
    /// person's word.
    Ran(attest_ledger::Verification),
    /// It did not run.
    NotRun,
}

/// Who found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoundBy {
    /// A read-back from the system of record, when a retry of the same call came.
    ReadBack,
    /// A person, authenticated as `approver`, answering through `channel` (`cli`).
    Person {
        /// Who answered.
        approver: String,
        /// Where.
        channel: String,
    },
}

/// An intent row still open: its seq and record.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentRow {
    /// The intent row's seq.
    pub seq: u64,
    /// What it recorded.
    pub record: Record,
}

/// The intent row at `seq`, if it is one and no later row of its action follows it.
/// `Err(why)` inside: the row is not an open intent, in words for the person asking.
pub fn open_intent_at(ledger: &Ledger, seq: u64) -> Result<Result<IntentRow, String>, LedgerError> {
    let mut found = None;
    ledger.for_each_row_at(&[seq], |row| {
        found = Some(serde_json::from_slice::<Record>(row.body));
        Ok(())
    })?;
    let record = match found {
        None => return Ok(Err(format!("there is no row at seq {seq}"))),
        Some(Err(err)) => return Ok(Err(format!("the row at seq {seq} does not parse: {err}"))),
        Some(Ok(record)) => record,
    };
    if record.execution.status != INTENT {
        return Ok(Err(format!(
            "the row at seq {seq} is not an intent (its execution is {:?})",
            record.execution.status
        )));
    }
    let filter = Filter {
        action_id: Some(record.action_id.clone()),
        ..Filter::default()
    };
    let later = ledger
        .list_filtered(&filter, 16)?
        .into_iter()
        .filter(|row| row.seq > seq)
        .map(|row| row.seq)
        .min();
    if let Some(later) = later {
        return Ok(Err(format!(
            "the intent at seq {seq} is not open: seq {later} records its outcome"
        )));
    }
    Ok(Ok(IntentRow { seq, record }))
}

/// The outcome row of an open intent, found after the fact: the intent's record with
/// the outcome (`ok` without a result hash, or `not_run`), how it was found, and a
/// reason naming the intent. Format v1 as it is: no new field, no new status.
pub(crate) fn found_outcome(intent: &IntentRow, found: Found, by: FoundBy) -> Record {
    let mut record = intent.record.clone();
    let (status, verification, what) = match found {
        Found::Ran(verification) => ("ok", Some(verification), "it ran"),
        Found::NotRun => ("not_run", None, "it did not run"),
    };
    record.execution = attest_ledger::Execution {
        status: status.to_owned(),
        result_hash: None,
        error_hash: None,
    };
    record.verification = verification;
    record.result_ids = Vec::new();
    let how = match &by {
        FoundBy::ReadBack => "read back from the vendor when the same call was retried",
        FoundBy::Person { .. } => "a person answered",
    };
    record.reasons.push(format!(
        "the outcome of intent seq {} was not recorded; {how}: {what}",
        intent.seq
    ));
    if let FoundBy::Person { approver, channel } = by {
        record.confirm = Some(attest_ledger::Confirm {
            outcome: RESOLVED.to_owned(),
            approver: Some(approver),
            channel: Some(channel),
            note: Some(what.to_owned()),
            approvers: Vec::new(),
        });
    }
    record
}

/// The `confirm.outcome` of a person's answer about an open intent's outcome.
pub const RESOLVED: &str = "resolved";

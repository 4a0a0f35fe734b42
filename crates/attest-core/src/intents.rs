//! Intents without an outcome: writes that were cleared to run and recorded as about to
//! run, whose outcome row never followed (a crash, a full or read-only disk).

use std::borrow::Cow;
use std::collections::BTreeMap;

use attest_ledger::{Ledger, LedgerError};
use serde::{Deserialize, Serialize};

use crate::record::INTENT;

/// An intent row that no later row of the same action follows: the action may have
/// run, and nothing in the ledger says how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenIntent {
    /// The intent row's seq.
    pub seq: u64,
    /// The action's id.
    pub action_id: String,
    /// The system acted on.
    pub system: String,
    /// The verb.
    pub verb: String,
}

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
    let mut open: BTreeMap<String, OpenIntent> = BTreeMap::new();
    ledger.for_each_row(from_seq, |row| {
        let Ok(view) = serde_json::from_slice::<View<'_>>(row.body) else {
            return Ok(true);
        };
        let is_intent = view.execution.as_ref().is_some_and(|e| e.status == INTENT);
        if is_intent {
            open.insert(
                view.action_id.clone().into_owned(),
                OpenIntent {
                    seq: row.seq,
                    action_id: view.action_id.into_owned(),
                    system: view.system.into_owned(),
                    verb: view.verb.into_owned(),
                },
            );
        } else if !open.is_empty() {
            open.remove(view.action_id.as_ref());
        }
        Ok(true)
    })?;
    let mut open: Vec<OpenIntent> = open.into_values().collect();
    open.sort_by_key(|intent| intent.seq);
    Ok(open)
}

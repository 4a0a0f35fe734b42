use attest_ledger::{to_hex, Appended};
use attest_policy::Decision;
use serde::Serialize;

use crate::Level;

/// What the caller gets back for one action: where it sits in the ledger and how it went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// The action's id.
    pub action_id: String,
    /// The ledger row's seq.
    pub seq: u64,
    /// The ledger row's hash, lower-case hex.
    pub entry_hash: String,
    /// The row's timestamp.
    pub ts: String,
    /// What policy decided.
    pub decision: Decision,
    /// Why.
    pub reasons: Vec<String>,
    /// Who approved or rejected, when a person was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// How the outcome was verified, when the action ran.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "level_word")]
    pub level: Option<Level>,
    /// Set when the action ran but its outcome row could not be written: `seq` is then
    /// the intent row's, which stands for the action. Surfaces pass the tool's answer on
    /// with this warning rather than an error that invites a retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

fn level_word<S: serde::Serializer>(level: &Option<Level>, s: S) -> Result<S::Ok, S::Error> {
    match level {
        Some(level) => s.serialize_str(level.as_str()),
        None => s.serialize_none(),
    }
}

impl Receipt {
    /// A receipt whose row is not written yet (see [`Receipt::with_row`]).
    pub(crate) fn unwritten(action_id: &str, decision: Decision, reasons: Vec<String>) -> Self {
        Receipt {
            action_id: action_id.to_owned(),
            seq: 0,
            entry_hash: String::new(),
            ts: String::new(),
            decision,
            reasons,
            approver: None,
            level: None,
            warning: None,
        }
    }

    /// The receipt, naming the row its action was written to.
    pub(crate) fn with_row(mut self, appended: Appended) -> Self {
        self.seq = appended.seq;
        self.entry_hash = to_hex(&appended.hash);
        self.ts = appended.ts;
        self
    }

    pub(crate) fn new(
        action_id: &str,
        appended: Appended,
        decision: Decision,
        reasons: Vec<String>,
    ) -> Self {
        Receipt::unwritten(action_id, decision, reasons).with_row(appended)
    }
}

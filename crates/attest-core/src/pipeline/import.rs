//! Importing actions that happened elsewhere, keeping what the source says of them.

use attest_ledger::{Confirm, Execution, Imported, Record, Verification};
use attest_policy::{Action, Decision};
use serde_json::{Map, Value};

use super::Attest;
use crate::{AttestError, Receipt};

/// One action from another system's record, with what that record says of how it went.
/// Every `None` falls back to what [`Attest::record`] writes for an action reported
/// after the fact (decision `recorded`, execution `recorded`, level from the result).
#[derive(Debug, Clone)]
pub struct ImportItem {
    /// The action; its `id` is kept when given.
    pub action: Action,
    /// The result it had, hashed and checked for an acknowledgement; never stored.
    pub result: Option<Value>,
    /// When it happened (RFC 3339), kept in the row's `imported.ts`.
    pub ts: Option<String>,
    /// The decision the source records (a refusal stays a refusal).
    pub decision: Option<Decision>,
    /// The person's answer the source records.
    pub confirm: Option<Confirm>,
    /// Whether and how it ran, as the source records.
    pub execution: Option<Execution>,
    /// How its outcome was checked, as the source records.
    pub verification: Option<Verification>,
    /// Why, as the source records.
    pub reasons: Option<Vec<String>>,
    /// The params' hash, when the source has only the hash (an Attest export): kept
    /// instead of hashing absent params.
    pub params_hash: Option<String>,
    /// The params' preview, with `params_hash`.
    pub params_preview: Option<Map<String, Value>>,
}

impl ImportItem {
    /// An item that keeps nothing beyond the action and its result.
    pub fn new(action: Action, result: Option<Value>) -> Self {
        ImportItem {
            action,
            result,
            ts: None,
            decision: None,
            confirm: None,
            execution: None,
            verification: None,
            reasons: None,
            params_hash: None,
            params_preview: None,
        }
    }
}

impl Attest {
    /// Records actions from another system's record in one transaction, all or none.
    /// Each row is marked `imported` and keeps the source's time, decision, confirm,
    /// execution and verification; the row's own `ts` is the append time (the chain's
    /// times only move forward).
    pub async fn import_batch(&self, items: Vec<ImportItem>) -> Result<Vec<Receipt>, AttestError> {
        let mut batch = self.import();
        for item in items {
            batch.push(item)?;
        }
        batch.commit().await
    }

    /// [`Attest::import_batch`] an item at a time: each is reduced to its row when it is
    /// pushed (params and result hashed, previewed and dropped), so a long import holds
    /// rows, not the source's JSON; [`ImportBatch::commit`] appends them all in one
    /// transaction.
    pub fn import(&self) -> ImportBatch<'_> {
        ImportBatch {
            attest: self,
            records: Vec::new(),
            receipts: Vec::new(),
        }
    }
}

/// An import under way (see [`Attest::import`]): nothing is written until
/// [`ImportBatch::commit`].
#[derive(Debug)]
pub struct ImportBatch<'a> {
    attest: &'a Attest,
    records: Vec<Record>,
    receipts: Vec<Receipt>,
}

impl ImportBatch<'_> {
    /// Adds one item, reduced to the row it will append.
    pub fn push(&mut self, item: ImportItem) -> Result<(), AttestError> {
        let (mut record, mut receipt, _) =
            self.attest.imported(item.action, item.result.as_ref())?;
        if let Some(decision) = item.decision {
            record.decision = decision.as_str().to_owned();
            receipt.decision = decision;
        }
        if let Some(reasons) = item.reasons {
            // A source's text crosses the same redaction as a live row's.
            let reasons: Vec<String> = reasons
                .iter()
                .map(|reason| attest_policy::redact_text(reason))
                .collect();
            record.reasons.clone_from(&reasons);
            receipt.reasons = reasons;
        }
        if item.confirm.is_some() {
            record.confirm = item.confirm;
        }
        if let Some(execution) = item.execution {
            record.execution = execution;
            // What the source says ran (or not) replaces the shape check of a result.
            record.verification = item.verification;
            receipt.level = None;
        } else if let Some(verification) = item.verification {
            record.verification = Some(verification);
            receipt.level = None;
        }
        if let Some(hash) = item.params_hash {
            record.params_hash = hash;
            // A source's preview is filtered by the same allow-list as a live one.
            let preview = item.params_preview.unwrap_or_default();
            record.params_preview =
                attest_policy::params_preview(&serde_json::Value::Object(preview));
        }
        record.imported = Some(Imported { ts: item.ts });
        self.records.push(record);
        self.receipts.push(receipt);
        Ok(())
    }

    /// How many items were pushed.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Appends every pushed item in one transaction, all or none.
    pub async fn commit(self) -> Result<Vec<Receipt>, AttestError> {
        self.attest
            .append_recorded(self.records, self.receipts)
            .await
    }
}

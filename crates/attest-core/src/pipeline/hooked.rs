//! Calls whose tool runs in another process, after the one that decided them has ended:
//! a coding agent's hooks. The pre-call hook records the intent and exits; the agent
//! runs its tool; the post-call hook, a new process, closes the intent with how the
//! call ended. An intent whose post-call event never comes (the agent was killed, the
//! agent's prompt declined an ask, the hook was removed) stays open: `attest intents`
//! lists it and reconciles it like any other.
//!
//! A write that acts records its intent through the pipeline itself (policy, windows,
//! its digest claimed with the intent: see [`crate::handoff`]); an ask put to the
//! agent's own permission prompt records an intent that says so
//! ([`Attest::intend_asked`]), since whether it runs is that prompt's to decide.

use attest_ledger::Record;
use attest_policy::{Action, Decision, Verdict};
use serde_json::Value;

use super::retries::{decision_of, rows_of};
use super::Attest;
use crate::record::{to_record, RowOutcome, INTENT};
use crate::{AttestError, Receipt};

impl Attest {
    /// Records the intent of `action`, which policy asks about and which is put to the
    /// agent's own permission prompt (`channel`, `claude-code-prompt`): decision `ask`,
    /// execution `intent`, nobody named. [`Attest::close_intent`] closes it when the
    /// agent reports the call ran; the row it writes says the prompt allowed it.
    pub async fn intend_asked(
        &self,
        action: Action,
        channel: &str,
    ) -> Result<Receipt, AttestError> {
        let prepared = self.prepare(action)?;
        let (mut verdict, _) = self.enforced(&prepared.action);
        verdict.reasons.push(format!(
            "put to the agent's own permission prompt ({channel}): whether it runs is \
             that prompt's to decide, and nobody is authenticated there"
        ));
        let record = to_record(
            &prepared.action,
            prepared.params_hash.clone(),
            &verdict,
            Decision::Ask,
            None,
            RowOutcome::Intent,
        )?;
        let appended = self.append(record).await?;
        Ok(Receipt::new(
            &prepared.action.id,
            appended,
            Decision::Ask,
            verdict.reasons,
        ))
    }

    /// Closes the open intent of `action` (found by its id, which the pre-call hook
    /// kept): its outcome row, the intent's record with how the call ended, the result
    /// hashed and verified as a governed call's is. An intent of an ask (see
    /// [`Attest::intend_asked`]) closes as approved by `channel`, the agent's prompt,
    /// naming nobody.
    ///
    /// `None`: the action has no open intent, or its intent describes another call
    /// (other params, system or verb): nothing is written, and the intent, if any,
    /// stays open for reconciliation.
    pub async fn close_intent(
        &self,
        action: Action,
        outcome: Result<Value, String>,
        channel: &str,
    ) -> Result<Option<Receipt>, AttestError> {
        let prepared = self.prepare(action)?;
        let action = prepared.action;
        let id = action.id.clone();
        let rows = self.on_ledger(move |ledger| rows_of(ledger, &id)).await?;
        let Some((intent_seq, intent)) = rows.into_iter().next_back() else {
            return Ok(None);
        };
        let same_call = intent.params_hash == prepared.params_hash
            && intent.system == action.system
            && intent.verb == action.verb.as_str();
        if intent.execution.status != INTENT || !same_call {
            return Ok(None);
        }
        let (verdict, _) = self.enforced(&action);
        let (record, level) = match &outcome {
            Ok(result) => {
                let (level, verification) = self.verified(&action, result, None).await;
                let ran = RowOutcome::Ran(result, verification);
                (closed(&intent, &action, &verdict, ran)?, Some(level))
            }
            Err(message) => {
                let failed = RowOutcome::Failed(message);
                (closed(&intent, &action, &verdict, failed)?, None)
            }
        };
        let mut record = record;
        if intent.decision == Decision::Ask.as_str() && intent.confirm.is_none() {
            record.confirm = Some(super::confirm("approved", "", channel.to_owned(), None));
        }
        record.reasons.push(format!(
            "closes intent seq {intent_seq}: the agent reported how the call ended"
        ));
        let decision = decision_of(&record);
        let reasons = record.reasons.clone();
        let row = self.append(record).await?;
        // The digest claimed with the intent (by a process now gone) is freed; a call that
        // ran then blocks its duplicates for its dedupe window, as any call that ran.
        let id = action.id.clone();
        self.on_ledger(move |ledger| ledger.forget_call(&id))
            .await?;
        if outcome.is_ok() {
            self.dedupe_recorded(&action, row.seq).await;
        }
        let mut receipt = Receipt::new(&action.id, row, decision, reasons);
        receipt.level = level;
        Ok(Some(receipt))
    }
}

/// The outcome row of `intent`: its record (decision, reasons, confirm, shadow) with the
/// execution, verification and result ids of `outcome`.
fn closed(
    intent: &Record,
    action: &Action,
    verdict: &Verdict,
    outcome: RowOutcome<'_>,
) -> Result<Record, AttestError> {
    let fresh = to_record(
        action,
        intent.params_hash.clone(),
        verdict,
        verdict.decision,
        None,
        outcome,
    )?;
    let mut record = intent.clone();
    record.execution = fresh.execution;
    record.verification = fresh.verification;
    record.result_ids = fresh.result_ids;
    Ok(record)
}

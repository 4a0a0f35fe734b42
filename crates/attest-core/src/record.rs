//! Turning an action, its verdict and its outcome into a ledger record.

use attest_ledger::{to_hex, value_hash, Confirm, Execution, Record, Verification};
use attest_policy::{params_preview, redact_text, Action, Decision, Verdict};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::AttestError;

/// How the action ended, as the ledger records it.
pub(crate) enum RowOutcome<'a> {
    /// Not run (refused or rejected).
    NotRun,
    /// Not run yet: waiting for a person's answer in the approval store.
    Pending,
    /// About to run: the intent row a write needs before its tool is called. The
    /// outcome row follows with the same `action_id`.
    Intent,
    /// Ran and returned `result`.
    Ran(&'a Value, Verification),
    /// Ran and failed with this message.
    Failed(&'a str),
    /// Reported after the fact.
    Recorded(Option<&'a Value>, Verification),
}

pub use attest_ledger::INTENT;

pub(crate) fn to_record(
    action: &Action,
    params_hash: String,
    verdict: &Verdict,
    decision: Decision,
    confirm: Option<Confirm>,
    outcome: RowOutcome<'_>,
) -> Result<Record, AttestError> {
    let result = match &outcome {
        RowOutcome::Ran(result, _) | RowOutcome::Recorded(Some(result), _) => Some(*result),
        _ => None,
    };
    let result_ids = match result {
        Some(result) if !action.verb.is_read() => crate::touched::result_ids(result),
        _ => Vec::new(),
    };
    // Every free-text field crosses `redact_text` here, on its way into a row that can never
    // be edited: a URL or credential shape in a target or a reason is gone before it is chained.
    let target = crate::touched::target_of(action, result).map(|t| redact_text(&t));
    let (execution, verification) = match outcome {
        RowOutcome::NotRun => (execution("not_run", None, None), None),
        RowOutcome::Pending => (execution("pending", None, None), None),
        RowOutcome::Intent => (execution(INTENT, None, None), None),
        RowOutcome::Ran(result, verification) => (
            execution("ok", Some(hash_value(result)?), None),
            Some(verification),
        ),
        RowOutcome::Failed(message) => (
            execution("failed", None, Some(sha256_hex(message.as_bytes()))),
            None,
        ),
        RowOutcome::Recorded(result, verification) => (
            execution("recorded", result.map(hash_value).transpose()?, None),
            Some(verification),
        ),
    };
    Ok(Record {
        action_id: action.id.clone(),
        run_id: action.run_id.clone(),
        agent: action.agent.clone(),
        agent_auth: action.extra.agent_auth.clone(),
        actor: action.actor.clone(),
        call: crate::touched::call_of(action),
        owner: action.owner.clone(),
        system: action.system.clone(),
        verb: action.verb.as_str().to_owned(),
        target,
        target_class: action
            .target_class
            .unwrap_or(verdict.target_class)
            .max(verdict.target_class)
            .as_str()
            .to_owned(),
        source: action.source.as_str().to_owned(),
        decision: decision.as_str().to_owned(),
        tier: verdict.tier.as_str().to_owned(),
        reasons: verdict.reasons.iter().map(|r| redact_text(r)).collect(),
        rules_fired: verdict.rules_fired.clone(),
        params_hash,
        params_preview: params_preview(&action.params),
        result_ids,
        confirm,
        execution,
        verification,
        idempotency_key: None,
        replay_of: None,
        imported: None,
        shadow: None,
        grant: None,
        sealed: None,
        erasure: None,
    })
}

fn execution(status: &str, result_hash: Option<String>, error_hash: Option<String>) -> Execution {
    Execution {
        status: status.to_owned(),
        result_hash,
        error_hash,
    }
}

/// SHA-256 of a value's canonical (RFC 8785) form, in hex: how params and results are
/// fingerprinted (the same bytes and hash as `Action::params_hash`, by the ledger's writer).
pub(crate) fn hash_value(value: &Value) -> Result<String, AttestError> {
    Ok(to_hex(&value_hash(value)?))
}

fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes).into())
}

#[cfg(test)]
mod tests {
    use attest_policy::{Action, Verb};
    use serde_json::json;

    #[test]
    fn params_are_hashed_as_the_policy_crate_hashes_them() {
        let params = json!({"to": "é@x.io", "n": [1, 2.5, 1e21], "k": {"b": null, "a": "\u{7}"}});
        let action = Action::new("gmail", Verb::Send).with_params(params.clone());
        assert_eq!(
            super::hash_value(&params).unwrap(),
            action.params_hash().unwrap()
        );
    }
}

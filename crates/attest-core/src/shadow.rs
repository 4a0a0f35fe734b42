//! Shadow mode: policy decides every call as usual, and what it decided is recorded
//! beside the row (its `shadow` field) instead of enforced: the call runs as if policy
//! had said `act`.
//!
//! It is how a team sees what a policy would break before turning it on (README,
//! "Rolling out a policy"). The row's own `decision` is `act` because the call ran; the
//! verdict that was not enforced is in `shadow`, so no reader mistakes a shadow row for
//! an approval (nobody was asked) or a refusal (it ran). A policy that cannot decide
//! still refuses: shadow mode lifts enforcement, not fail-closed.

use attest_ledger::Shadow;
use attest_policy::{Decision, Verdict};

/// The rule named in `rules_fired` of a row that ran unenforced in shadow mode.
pub const SHADOW_RULE: &str = "shadow";

/// Whether `verdict` is shadow mode's stand-in `act` for a verdict that was not
/// enforced (a surface that skips recording some `act`s records these).
pub fn is_unenforced(verdict: &Verdict) -> bool {
    verdict.rules_fired.iter().any(|r| r == SHADOW_RULE)
}

/// The rule of the refusal that stands in for a policy that could not decide.
pub(crate) const POLICY_ERROR_RULE: &str = "policy-error";

/// The rule of the refusal of a write to the governor's protected files
/// ([`crate::protected`]): enforced in shadow mode too, since shadow mode is itself a
/// setting in those files.
pub const PROTECTED_RULE: &str = "protected-path";

/// The verdict to enforce in shadow mode, and the one it stands in for. An `act`, or a
/// refusal because policy could not decide or because the call writes a protected path,
/// is enforced as it is (no shadow).
pub(crate) fn unenforced(verdict: Verdict) -> (Verdict, Option<Shadow>) {
    let undecided = verdict
        .rules_fired
        .iter()
        .any(|r| r == POLICY_ERROR_RULE || r == PROTECTED_RULE);
    if verdict.decision == Decision::Act || undecided {
        return (verdict, None);
    }
    let would = match verdict.decision {
        Decision::Refuse => "refused",
        _ => "asked a person",
    };
    let reason = format!(
        "shadow mode, not enforced: policy would have {would} ({})",
        verdict.reasons.join("; ")
    );
    let shadow = Shadow {
        decision: verdict.decision.as_str().to_owned(),
        reasons: verdict.reasons.clone(),
        rules_fired: verdict.rules_fired.clone(),
    };
    let enforced = Verdict {
        decision: Decision::Act,
        reasons: vec![reason],
        rules_fired: vec![SHADOW_RULE.to_owned()],
        approvers: Vec::new(),
        hold: false,
        ..verdict
    };
    (enforced, Some(shadow))
}

#[cfg(test)]
mod tests {
    use attest_policy::{Action, Policy, PolicyEngine, Verb};

    use super::*;

    #[test]
    fn a_refusal_runs_as_act_and_keeps_its_verdict_in_the_shadow() {
        let policy = PolicyEngine::from_yaml(
            "version: 1\npolicies:\n  - name: no-deletes\n    match: {system: crm, verb: delete}\n    decision: refuse\n    reason: deletes are off\n",
            "policy.yaml",
        )
        .unwrap();
        let verdict = policy.evaluate(&Action::new("crm", Verb::Delete)).unwrap();
        let (enforced, shadow) = unenforced(verdict.clone());
        assert_eq!(enforced.decision, Decision::Act);
        assert_eq!(enforced.rules_fired, [SHADOW_RULE]);
        assert!(is_unenforced(&enforced) && !is_unenforced(&verdict));
        assert_eq!(enforced.tier, verdict.tier);
        let shadow = shadow.unwrap();
        assert_eq!(shadow.decision, "refuse");
        assert_eq!(shadow.rules_fired, verdict.rules_fired);
        assert_eq!(shadow.reasons, verdict.reasons);
    }

    #[test]
    fn act_and_an_undecided_policy_are_enforced_as_they_are() {
        let act = Verdict::new(Decision::Act, attest_policy::Risk::Low, "R4", "a read");
        assert_eq!(unenforced(act.clone()), (act, None));
        let error = Verdict::new(
            Decision::Refuse,
            attest_policy::Risk::High,
            POLICY_ERROR_RULE,
            "policy could not decide",
        );
        assert_eq!(unenforced(error.clone()), (error, None));
    }
}

use std::time::SystemTime;

use crate::{Action, Decision, History, HistoryRead, Mark, PolicyError, Risk, Verdict};

/// Turns an action into a verdict. Pure: no I/O, and the same answer every time for the
/// same action at the same time (a rule's `when:` may read the time).
pub trait Policy: Send + Sync {
    /// Decides `action`, made now. An error means "could not decide", and the action
    /// must not run.
    fn evaluate(&self, action: &Action) -> Result<Verdict, PolicyError>;

    /// Decides `action` as if made at `at` (policy test cases and explanations that set
    /// the time). A policy that never reads the time decides as [`Policy::evaluate`].
    fn evaluate_at(&self, action: &Action, at: SystemTime) -> Result<Verdict, PolicyError> {
        let _ = at;
        self.evaluate(action)
    }

    /// Decides `action` at `at` with the answers to its history questions (gathered by
    /// the caller for [`Policy::history_reads`]). A policy that asks no history decides
    /// as [`Policy::evaluate_at`].
    fn evaluate_with(
        &self,
        action: &Action,
        at: SystemTime,
        history: &History,
    ) -> Result<Verdict, PolicyError> {
        let _ = history;
        self.evaluate_at(action, at)
    }

    /// What `action`'s history questions need read: none by default.
    fn history_reads(&self, action: &Action) -> Vec<HistoryRead> {
        let _ = action;
        Vec::new()
    }

    /// The marks `action` leaves for later history questions when it runs: none by
    /// default.
    fn marks(&self, action: &Action) -> Vec<Mark> {
        let _ = action;
        Vec::new()
    }
}

/// Rule R4 alone: low and medium risk act, high and very high ask.
#[derive(Debug, Clone, Copy, Default)]
pub struct RiskTierPolicy;

impl Policy for RiskTierPolicy {
    fn evaluate(&self, action: &Action) -> Result<Verdict, PolicyError> {
        let tier = action.base_risk();
        let (decision, reason) = risk_rule(action, tier);
        Ok(Verdict::new(decision, tier, "R4", reason))
    }
}

/// Rule R4 for an action of tier `tier`: its decision and its reason.
pub(crate) fn risk_rule(action: &Action, tier: Risk) -> (Decision, String) {
    let decision = match tier {
        Risk::Low | Risk::Medium => Decision::Act,
        Risk::High | Risk::VeryHigh => Decision::Ask,
    };
    let reason = format!(
        "{} risk ({}.{}): {}",
        tier,
        action.system,
        action.verb,
        if decision == Decision::Act {
            "acts"
        } else {
            "asks a person"
        }
    );
    (decision, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verb;

    #[test]
    fn low_and_medium_act_high_and_very_high_ask() {
        let decide = |verb| RiskTierPolicy.evaluate(&Action::new("x", verb)).unwrap();
        assert_eq!(decide(Verb::List).decision, Decision::Act);
        assert_eq!(decide(Verb::Update).decision, Decision::Act);
        assert_eq!(decide(Verb::Send).decision, Decision::Ask);
        let pay = decide(Verb::Pay);
        assert_eq!(pay.decision, Decision::Ask);
        assert_eq!(pay.tier, Risk::VeryHigh);
        assert_eq!(pay.rules_fired, vec!["R4".to_owned()]);
    }
}

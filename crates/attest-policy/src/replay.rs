//! Deciding a recorded action again ([`PolicyEngine::replay`](crate::PolicyEngine::replay)):
//! what a ledger row lets a candidate policy know about the params it never kept.
//!
//! A row keeps the params' SHA-256 and an allow-listed, truncated preview, never the
//! params themselves. When the preview hashes to the recorded params hash it *is* the
//! params, and the action is decided as it was. Otherwise every condition that reads
//! params (a rule's `params:` or `target_domain`, an `action:` pattern naming
//! addresses, R3's placeholder scan) cannot be judged from the row: R3 takes the
//! record's own answer (whether R3 fired when it was decided) when the row has one, and
//! a rule the decision turns on is reported as undecidable, by name.

use crate::Verdict;

/// What a replay knows of a recorded action's params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// The action's params are exactly what it carries (the preview hashes to the
    /// recorded params hash).
    pub params_complete: bool,
    /// Whether the params held an unfilled placeholder, when the record says: R3 fired
    /// (or did not) in the verdict Attest gave it. `None` for rows no policy decided
    /// (imported, recorded after the fact).
    pub placeholders: Option<bool>,
    /// When the action was made (a row's time): what `when:` conditions read as `now`.
    /// `None`: a condition that reads the time cannot be judged.
    pub at: Option<std::time::SystemTime>,
}

impl Recorded {
    /// Everything is known: a live action.
    pub const COMPLETE: Recorded = Recorded {
        params_complete: true,
        placeholders: None,
        at: None,
    };
}

/// A recorded action decided again.
#[derive(Debug, Clone, PartialEq)]
pub enum Replayed {
    /// The candidate's verdict (boxed: a verdict is large, the other answer small).
    Decided(Box<Verdict>),
    /// The verdict turns on params the row does not keep; `rule` is the rule whose
    /// condition could not be judged (`R0`, `R3` or a YAML rule's name).
    Undecidable {
        /// The rule.
        rule: String,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Action, Decision, Policy, PolicyEngine, Verb};

    const POLICY: &str = "version: 1\npolicies:\n  - name: big-refunds\n    match: {system: stripe, params: {/amount: {gt: 500}}}\n    decision: ask\n    reason: big refunds ask\n  - name: stripe\n    match: {system: stripe}\n    decision: act\n    reason: small refunds act\n";

    const PARTIAL: Recorded = Recorded {
        params_complete: false,
        placeholders: Some(false),
        at: None,
    };

    #[test]
    fn a_param_condition_without_the_params_is_undecidable_and_names_its_rule() {
        let policy = PolicyEngine::from_yaml(POLICY, "p.yaml").unwrap();
        let refund = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 900}));
        assert_eq!(
            policy.replay(&refund, PARTIAL),
            Replayed::Undecidable {
                rule: "big-refunds".to_owned()
            }
        );
        // With the whole params, it is decided as a live call is.
        let live = policy.evaluate(&refund).unwrap();
        assert_eq!(
            policy.replay(&refund, Recorded::COMPLETE),
            Replayed::Decided(Box::new(live))
        );
        // A rule ruled out by keys that need no params is no obstacle.
        let mail = Action::new("gmail", Verb::Update);
        let Replayed::Decided(verdict) = policy.replay(&mail, PARTIAL) else {
            panic!("decidable")
        };
        assert_eq!(verdict.rules_fired, ["R4"]);
    }

    #[test]
    fn placeholders_come_from_the_record_or_make_r3_undecidable() {
        let policy = PolicyEngine::from_yaml("version: 1\n", "p.yaml").unwrap();
        let write = Action::new("crm", Verb::Update);
        let held = Recorded {
            params_complete: false,
            placeholders: Some(true),
            at: None,
        };
        let Replayed::Decided(verdict) = policy.replay(&write, held) else {
            panic!("decidable")
        };
        assert_eq!(verdict.decision, Decision::Ask);
        assert!(verdict.hold);
        let unknown = Recorded {
            params_complete: false,
            placeholders: None,
            at: None,
        };
        assert_eq!(
            policy.replay(&write, unknown),
            Replayed::Undecidable {
                rule: "R3".to_owned()
            }
        );
    }
}

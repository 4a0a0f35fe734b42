use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Action, Dedupe, Escalation, Quorum, Risk, Window};

/// What happens to an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Act,
    /// Run it only if a person approves.
    Ask,
    /// Do not run it.
    Refuse,
    /// It already happened; it is only being recorded.
    Recorded,
}

impl Decision {
    /// The word used in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Act => "act",
            Decision::Ask => "ask",
            Decision::Refuse => "refuse",
            Decision::Recorded => "recorded",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who an action reaches, best first; the worst recipient decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetClass {
    /// Nobody in particular.
    None,
    /// Only the organisation's own domains.
    Internal,
    /// Domains on the configured known list.
    Known,
    /// Anyone else.
    External,
}

impl TargetClass {
    /// The word used in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetClass::None => "none",
            TargetClass::Internal => "internal",
            TargetClass::Known => "known",
            TargetClass::External => "external",
        }
    }
}

/// A policy's answer for one action, with its reasons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Act, ask or refuse.
    pub decision: Decision,
    /// The action's risk tier.
    pub tier: Risk,
    /// Human-readable reasons, one per rule that spoke.
    pub reasons: Vec<String>,
    /// The rules that fired, in order (`R0`, `R4`, a YAML rule's name, …).
    pub rules_fired: Vec<String>,
    /// Who the action reaches.
    pub target_class: TargetClass,
    /// People or groups allowed to approve, when the decision is `ask`.
    pub approvers: Vec<String>,
    /// `approvers` with groups resolved to their members.
    pub approver_members: Vec<String>,
    /// True when the action must be held until a person edits it (unfilled placeholders).
    pub hold: bool,
    /// The windows of the `limit:` rules that matched, in rule order: this verdict holds
    /// while none would be crossed; the first crossed one's [`Window::crossed`] verdict
    /// applies otherwise. The pipeline checks them against what ran (see `limit.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<Window>,
    /// How many distinct approvers must approve, when the rule set a quorum
    /// (`approvers: {from: [finance], count: 2}`); `None`: the first decision wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<Quorum>,
    /// The rule's reminder, escalation and expiry (`remind_after`, `escalate_after`,
    /// `escalate_to`, `expire_after`).
    /// Boxed, and absent when the rule sets none: a verdict stays small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Box<Escalation>>,
    /// The duplicate window of a write (`dedupe:`): this verdict holds unless the same
    /// call ran within it; [`Dedupe::duplicate`] applies otherwise. The pipeline looks
    /// the call up in the ledger (see `dedupe.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe: Option<Dedupe>,
}

/// What a verdict without reminders, escalation or expiry says.
static NO_ESCALATION: Escalation = Escalation {
    remind_after: None,
    escalate_after: None,
    escalate_to: Vec::new(),
    escalate_members: Vec::new(),
    expire_after: None,
};

impl Verdict {
    /// The rule's reminder, escalation and expiry (all unset when it has none).
    pub fn escalation(&self) -> &Escalation {
        self.escalation.as_deref().unwrap_or(&NO_ESCALATION)
    }

    /// A verdict with one rule and one reason, nothing else.
    pub fn new(decision: Decision, tier: Risk, rule: &str, reason: impl Into<String>) -> Self {
        Verdict {
            decision,
            tier,
            reasons: vec![reason.into()],
            rules_fired: vec![rule.to_owned()],
            target_class: TargetClass::None,
            approvers: Vec::new(),
            approver_members: Vec::new(),
            hold: false,
            windows: Vec::new(),
            quorum: None,
            escalation: None,
            dedupe: None,
        }
    }

    /// What this verdict decided for `action` and why, as one JSON object: the action's
    /// system, verb, target and whether detection recognised it; the tier, decision,
    /// reasons, rules fired, target class, approvers (groups resolved) and hold. What
    /// `attest policy explain --json` prints and the MCP server's `attest_decide` answers.
    pub fn report(&self, action: &Action) -> serde_json::Value {
        serde_json::json!({
            "system": action.system,
            "verb": action.verb,
            "target": action.target,
            "recognised": action.recognised,
            "tier": self.tier,
            "decision": self.decision,
            "reasons": self.reasons,
            "rules_fired": self.rules_fired,
            "target_class": self.target_class,
            "approvers": self.approver_members,
            "hold": self.hold,
        })
    }
}

//! Gates: who answers when policy says `ask`.

use async_trait::async_trait;
use attest_policy::{Action, Verdict};
use serde_json::Value;

use crate::approvals::ResumeToken;

/// A person's (or a stand-in's) answer to an `ask`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// Run the action.
    Approve {
        /// Who approved.
        approver: String,
        /// Where (`auto`, `console`, `inbox`, …).
        channel: String,
    },
    /// Do not run it.
    Reject {
        /// Who rejected.
        approver: String,
        /// Where.
        channel: String,
        /// Why, when given.
        note: Option<String>,
    },
    /// Run the action with edited params. The pipeline applies `edits` (a JSON merge
    /// patch, RFC 7396) and asks policy again before anything runs.
    Edit {
        /// Who approved the edited action.
        approver: String,
        /// Where.
        channel: String,
        /// The merge patch on the params.
        edits: Value,
        /// A note, when given.
        note: Option<String>,
    },
    /// Nobody has answered yet; the request waits in the approval store. The pipeline
    /// records the ask and returns [`crate::Outcome::Held`] with this token.
    Pending {
        /// The request's id.
        id: String,
        /// The token that resumes it.
        token: ResumeToken,
    },
    /// The request was answered in the approval store; the pipeline reads the answer
    /// (approve, edit, reject, expiry) from there.
    Stored {
        /// The request's id.
        id: String,
    },
}

/// Asks for a decision on an action that policy did not let through on its own.
///
/// A gate that cannot reach anyone must answer [`GateDecision::Reject`]: an unanswered
/// question never runs the action.
#[async_trait]
pub trait Gate: Send + Sync {
    /// Decides on `action`, which policy judged as `verdict`.
    async fn decide(&self, action: &Action, verdict: &Verdict) -> GateDecision;
}

/// Answers every question the same way, in a named approver's name.
///
/// For demos, tests and pipelines where `ask` is only logged.
#[derive(Debug, Clone)]
pub struct AutoGate {
    approve: bool,
    approver: String,
}

impl AutoGate {
    /// Approves everything as `approver`.
    pub fn approve(approver: impl Into<String>) -> Self {
        AutoGate {
            approve: true,
            approver: approver.into(),
        }
    }

    /// Rejects everything as `approver`.
    pub fn reject(approver: impl Into<String>) -> Self {
        AutoGate {
            approve: false,
            approver: approver.into(),
        }
    }
}

#[async_trait]
impl Gate for AutoGate {
    async fn decide(&self, _action: &Action, _verdict: &Verdict) -> GateDecision {
        if self.approve {
            GateDecision::Approve {
                approver: self.approver.clone(),
                channel: "auto".to_owned(),
            }
        } else {
            GateDecision::Reject {
                approver: self.approver.clone(),
                channel: "auto".to_owned(),
                note: None,
            }
        }
    }
}

/// The default gate: nobody is there to ask, so every `ask` is rejected.
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectGate;

#[async_trait]
impl Gate for RejectGate {
    async fn decide(&self, _action: &Action, _verdict: &Verdict) -> GateDecision {
        GateDecision::Reject {
            approver: "nobody".to_owned(),
            channel: "none".to_owned(),
            note: Some("no gate is configured to ask a person".to_owned()),
        }
    }
}

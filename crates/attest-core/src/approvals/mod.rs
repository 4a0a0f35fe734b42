//! Asking a person: durable, action-bound approval requests.
//!
//! When policy says `ask` and the gate is a [`StoreGate`], the request is stored in the
//! `approvals` table of the ledger's SQLite file, people are told ([`Notifier`]s:
//! [`WebhookNotifier`], [`SlackNotifier`], [`TeamsNotifier`], `EmailNotifier` (feature `email`), one-click links from a [`LinkSigner`]), and
//! the call either waits or returns [`crate::Outcome::Held`] with a
//! [`ResumeToken`]. Whoever holds the token resumes with [`crate::Attest::call`], in
//! this process or another.
//!
//! The rules the store keeps:
//! - an approval is bound to the [`action_digest`] of what was shown, and runs once;
//! - the first decision wins; a second gets [`ApprovalError::AlreadyDecided`]; under a
//!   quorum (`approvers: {from: [finance], count: 2}`) every decision is recorded and the
//!   request is approved once enough distinct people (never its actor or owner) approved,
//!   rejected on the rule's number of rejections (the first, by default);
//! - a rule's `remind_after` and `escalate_after` fire once each ([`ApprovalStore::remind_due`],
//!   [`ApprovalStore::escalate_due`]), whichever long-running door gets there first;
//! - an approval must be used before its use-by time ([`DEFAULT_USE_BY`]), and policy is
//!   asked again when it is: a rule changed to `refuse` meanwhile wins;
//! - expiry counts as a rejection and is recorded as `expired`;
//! - only a registered approver ([`Approver`], authenticated by a personal token, a
//!   Slack user id, a signed link or a trusted proxy header) decides; when the rule
//!   names approvers, only they (or members of a named group) may;
//! - edits are a JSON merge patch on the params, and the edited action goes through
//!   policy again before it runs;
//! - the action's params stay here, never in the ledger, and only until the request is
//!   used or ended ([`ApprovalStore::purge`]). The ledger gets the ask row
//!   (execution `pending`) and the outcome row (`confirm` says who decided, how).

mod agents;
mod approvers;
mod backend;
#[cfg(feature = "email")]
mod email;
mod error;
mod gate;
mod grants;
mod links;
mod notify;
mod request;
mod signature;
#[cfg(feature = "http")]
mod slack;
mod store;
#[cfg(feature = "http")]
mod teams;
mod token;
#[cfg(feature = "http")]
mod webhook;

pub use agents::{Agent, AgentToken, AGENT_TOKEN_PREFIX};
pub use approvers::{Approver, ApproverToken, APPROVER_TOKEN_PREFIX};
#[cfg(feature = "email")]
pub use email::{EmailNotifier, SmtpSecurity};
pub use error::ApprovalError;
pub use gate::{StoreGate, DEFAULT_TTL, DEFAULT_USE_BY};
pub use grants::{Grant, GrantSpec, Unusable, GRANT_RULE, MAX_GRANT_CALLS, MAX_GRANT_LIFETIME};
pub use links::{Choice, LinkSigner, SignedLink};
pub use notify::{FollowUp, Notice, NoticeKind, Notifier, NotifyError};
pub use request::{
    action_digest, apply_edits, may_decide, Answer, ApprovalRequest, Progress, Status, Vote,
};
pub use signature::{Secret, SignatureError};
#[cfg(feature = "http")]
pub use slack::{
    verify_slack_signature, SlackNotifier, SlackPress, SLACK_API, SLACK_APPROVE_ACTION,
    SLACK_REJECT_ACTION, SLACK_TOLERANCE,
};
pub use store::{ApprovalStore, APPROVALS_SCHEMA_VERSION, TEST_CLOCK_VAR};
#[cfg(feature = "http")]
pub use teams::{TeamsNotifier, TEAMS_CARD_TYPE, TEAMS_CARD_VERSION};
pub use token::{ResumeToken, TOKEN_PREFIX};
#[cfg(feature = "http")]
pub use webhook::{
    sign_webhook, verify_webhook, WebhookNotifier, WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER, WEBHOOK_TOLERANCE,
};

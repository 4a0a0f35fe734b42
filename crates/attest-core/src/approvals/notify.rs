//! Notifiers: telling people that a request waits for them, or that something they
//! should hear about happened ([`Notice`]: a broken chain, a digest).

use async_trait::async_trait;
use serde::Serialize;
use thiserror::Error;

use super::ApprovalRequest;

/// What a [`Notice`] is about; webhooks send it as the body's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum NoticeKind {
    /// The ledger's chain was found broken (`alert.chain_broken`).
    #[serde(rename = "alert.chain_broken")]
    ChainBroken,
    /// A published log that `attest monitor` follows misbehaved
    /// (`alert.log_misbehaved`): a split view, a checkpoint that does not verify, tiles
    /// that do not lead to the signed root.
    #[serde(rename = "alert.log_misbehaved")]
    LogMisbehaved,
    /// A digest of what agents did is ready (`digest.ready`).
    #[serde(rename = "digest.ready")]
    DigestReady,
}

impl NoticeKind {
    /// The event type, as webhooks carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::ChainBroken => "alert.chain_broken",
            NoticeKind::LogMisbehaved => "alert.log_misbehaved",
            NoticeKind::DigestReady => "digest.ready",
        }
    }
}

/// A follow-up on a request nobody has decided yet, as its rule says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum FollowUp {
    /// `remind_after` passed: the approvers are told again (`approval.reminder`).
    #[serde(rename = "approval.reminder")]
    Reminder,
    /// `escalate_after` passed: the rule's `escalate_to` are told, and may decide from
    /// now on (`approval.escalated`).
    #[serde(rename = "approval.escalated")]
    Escalation,
}

impl FollowUp {
    /// The event type, as webhooks carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            FollowUp::Reminder => "approval.reminder",
            FollowUp::Escalation => "approval.escalated",
        }
    }

    /// The words a message starts with.
    pub fn headline(self) -> &'static str {
        match self {
            FollowUp::Reminder => "Reminder: approval still needed",
            FollowUp::Escalation => "Escalated: approval needed",
        }
    }
}

/// Something people should hear about that is not an approval request. Every notifier
/// sends one its own way: a Slack message, a signed webhook whose `type` is the kind,
/// an e-mail.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// What it is about.
    #[serde(rename = "type")]
    pub kind: NoticeKind,
    /// One line: a subject, a message's first line.
    pub title: String,
    /// Plain text for people.
    pub text: String,
    /// The details for programs (a webhook's `data`).
    pub data: serde_json::Value,
}

/// Tells someone that an approval request is waiting.
///
/// A notifier runs after the request is stored: when it fails, the request is still
/// pending and listed (`attest pending`, the inbox), and the failure is noted on it.
#[async_trait]
pub trait Notifier: Send + Sync {
    /// A short name for error notes (`webhook`, `slack`).
    fn name(&self) -> &str;

    /// Sends the notice of a waiting request.
    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError>;

    /// Sends a notice that is not a request (an alert, a digest).
    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError>;

    /// Sends a reminder or an escalation for a request still waiting. By default the
    /// request's notice again (the request says it was reminded or escalated).
    async fn follow_up(
        &self,
        request: &ApprovalRequest,
        step: FollowUp,
    ) -> Result<(), NotifyError> {
        let _ = step;
        self.notify(request).await
    }
}

#[async_trait]
impl<N: Notifier + ?Sized> Notifier for std::sync::Arc<N> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        (**self).notify(request).await
    }

    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError> {
        (**self).announce(notice).await
    }

    async fn follow_up(
        &self,
        request: &ApprovalRequest,
        step: FollowUp,
    ) -> Result<(), NotifyError> {
        (**self).follow_up(request, step).await
    }
}

/// Why a notice was not delivered.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// The HTTP request failed (the URL is left out: it may carry a secret).
    #[cfg(feature = "http")]
    #[error("{notifier}: request failed")]
    Http {
        /// The notifier.
        notifier: &'static str,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The receiver answered with an error status.
    #[error("{notifier}: the receiver answered HTTP {status}")]
    Status {
        /// The notifier.
        notifier: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// Slack answered `ok: false`.
    #[error("slack: chat.postMessage failed: {error}")]
    Slack {
        /// Slack's error code (`channel_not_found`, `invalid_auth`, …).
        error: String,
    },
    /// The SMTP server refused the message or could not be reached.
    #[error("email: sending failed: {detail}")]
    Smtp {
        /// What failed (never the password).
        detail: String,
    },
    /// The notice could not be put together.
    #[error("{notifier}: cannot build the notice: {detail}")]
    Build {
        /// The notifier.
        notifier: &'static str,
        /// What is wrong.
        detail: String,
    },
}

//! Notifiers: telling people that a request waits for them.

use async_trait::async_trait;
use thiserror::Error;

use super::ApprovalRequest;

/// Tells someone that an approval request is waiting.
///
/// A notifier runs after the request is stored: when it fails, the request is still
/// pending and listed (`attest pending`, the inbox), and the failure is noted on it.
#[async_trait]
pub trait Notifier: Send + Sync {
    /// A short name for error notes (`webhook`, `slack`).
    fn name(&self) -> &str;

    /// Sends the notice.
    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError>;
}

#[async_trait]
impl<N: Notifier + ?Sized> Notifier for std::sync::Arc<N> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        (**self).notify(request).await
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

//! What review tells people without being asked: a broken chain, a published log that
//! misbehaved (`attest monitor`), a digest.
//!
//! Each notice goes to standard error and through every configured notifier
//! ([`attest_core::approvals::Notifier::announce`]: a Slack message, a signed webhook
//! whose `type` names the notice, an e-mail). A notifier that fails is reported on
//! standard error; the others still get the notice.

use std::sync::Arc;

use attest_core::approvals::{Notice, NoticeKind, Notifier};
use serde_json::json;

use super::digest::Digest;

/// Something a person should hear about.
#[derive(Debug, Clone)]
pub enum Alert {
    /// The background verifier found the chain broken.
    ChainBroken {
        /// The first broken seq.
        seq: u64,
        /// What is wrong there.
        detail: String,
    },
    /// `attest monitor` found a published log misbehaving.
    LogMisbehaved {
        /// The log, as the monitor names it (a URL without credentials, or a directory).
        log: String,
        /// What is wrong.
        detail: String,
    },
}

impl Alert {
    /// The notice the notifiers send.
    pub fn notice(&self) -> Notice {
        match self {
            Alert::ChainBroken { seq, detail } => Notice {
                kind: NoticeKind::ChainBroken,
                title: format!("Attest: the ledger's chain is broken at seq {seq}"),
                text: format!(
                    "The background verifier found the ledger's chain broken at seq {seq}: \
                     {detail}.\nRun `attest verify` to see every problem."
                ),
                data: json!({"seq": seq, "detail": detail}),
            },
            Alert::LogMisbehaved { log, detail } => Notice {
                kind: NoticeKind::LogMisbehaved,
                title: format!("Attest monitor: the log at {log} misbehaved"),
                text: format!("attest monitor, following {log}:\n{detail}"),
                data: json!({"log": log, "detail": detail}),
            },
        }
    }
}

/// The notice for a digest: its text for people, its JSON (with the flags) for programs.
pub fn digest_notice(digest: &Digest) -> Notice {
    let flags = digest.flag_count;
    Notice {
        kind: NoticeKind::DigestReady,
        title: format!(
            "Attest digest: {}, {}",
            crate::count::n_actions(digest.actions),
            crate::count::counted(flags as u64, "flag")
        ),
        text: super::render_text(digest),
        data: serde_json::to_value(digest).unwrap_or_default(),
    }
}

/// Where alerts go: standard error, and the configured notifiers.
#[derive(Clone, Default)]
pub struct Alerts {
    notifiers: Arc<Vec<Arc<dyn Notifier>>>,
}

impl std::fmt::Debug for Alerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerts")
            .field("notifiers", &self.notifiers.len())
            .finish()
    }
}

impl Alerts {
    /// Alerts go to standard error and through `notifiers`.
    pub fn new(notifiers: Vec<Arc<dyn Notifier>>) -> Alerts {
        Alerts {
            notifiers: Arc::new(notifiers),
        }
    }

    /// Whether any notifier is configured.
    pub fn has_notifiers(&self) -> bool {
        !self.notifiers.is_empty()
    }

    /// Sends one alert: on standard error now, through the notifiers on the current
    /// runtime (in the background).
    pub fn send(&self, alert: &Alert) {
        let notice = alert.notice();
        eprintln!("attest serve: ALERT: {}", notice.title);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let alerts = self.clone();
                runtime.spawn(async move { alerts.announce(&notice).await });
            }
            Err(_) => eprintln!("attest serve: no runtime to send the alert through notifiers"),
        }
    }

    /// Sends `notice` through every notifier; returns how many failed (each is reported
    /// on standard error).
    pub async fn announce(&self, notice: &Notice) -> usize {
        let mut failed = 0;
        for notifier in self.notifiers.iter() {
            if let Err(err) = notifier.announce(notice).await {
                failed += 1;
                eprintln!(
                    "attest: the {} notice was not sent: {}",
                    notice.kind.as_str(),
                    crate::chain(&err)
                );
            }
        }
        failed
    }
}

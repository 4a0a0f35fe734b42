//! What review tells people without being asked: a broken chain, a digest.
//!
//! This is the hook for the configured notifiers. The approval notifiers
//! (`attest_core::approvals::Notifier`) announce one approval request each and do not
//! fit these messages; until the configuration file wires notifiers for alerts, an
//! alert is written to standard error, and [`Alerts::with_sink`] takes any other sink.

use std::sync::Arc;

use serde::Serialize;

/// Something a person should hear about.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "alert", rename_all = "snake_case")]
pub(crate) enum Alert {
    /// The background verifier found the chain broken.
    ChainBroken {
        /// The first broken seq.
        seq: u64,
        /// What is wrong there.
        detail: String,
    },
}

/// Where alerts go.
pub(crate) type Sink = Arc<dyn Fn(&Alert) + Send + Sync>;

/// The alert hook.
#[derive(Clone)]
pub(crate) struct Alerts {
    sink: Sink,
}

impl Default for Alerts {
    /// Alerts on standard error.
    fn default() -> Self {
        Alerts::with_sink(Arc::new(|alert: &Alert| match alert {
            Alert::ChainBroken { seq, detail } => {
                eprintln!(
                    "attest serve: ALERT: the ledger's chain is broken at seq {seq}: {detail}"
                );
            }
        }))
    }
}

impl Alerts {
    /// Alerts go to `sink`.
    pub(crate) fn with_sink(sink: Sink) -> Alerts {
        Alerts { sink }
    }

    /// Sends one alert.
    pub(crate) fn send(&self, alert: &Alert) {
        (self.sink)(alert);
    }
}

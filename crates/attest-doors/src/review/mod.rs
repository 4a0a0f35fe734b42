//! Reviewing what agents did (issue 17): the digest with anomaly flags, the
//! dashboard's read model and pages, the background verifier, metrics and traces, and
//! the OCSF export.
//!
//! Nothing here decides or writes entries: it reads the ledger (bounded, by seq) and
//! reports.

pub mod alerts;
mod cache;
mod digest;
pub(crate) mod metrics;
pub(crate) mod model;
pub mod ocsf;
pub(crate) mod rows;
pub use rows::claimed;
mod shadow;
pub mod telemetry;
pub mod verifier;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use attest_ledger::Ledger;

/// What `attest serve` reviews with: the read model, its answer cache, the background
/// verifier, and where alerts and digests go.
pub struct Review {
    pub(crate) model: model::ReadModel,
    pub(crate) cache: cache::Cache,
    pub(crate) verifier: Arc<verifier::Verifier>,
    alerts: alerts::Alerts,
}

impl std::fmt::Debug for Review {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Review").finish_non_exhaustive()
    }
}

impl Review {
    /// Opens the read model and the verifier on connections of their own to the
    /// configured ledger, each from `open` (read-only: neither ever holds the write lock;
    /// a file or a `postgres://` URL). Alerts go to standard error and through `alerts`'
    /// notifiers.
    pub fn open<E>(
        open: impl Fn() -> Result<Ledger, E>,
        alerts: alerts::Alerts,
    ) -> Result<Review, E> {
        let open = || open().map(Arc::new);
        Ok(Review {
            model: model::ReadModel::new(open()?),
            cache: cache::Cache::default(),
            verifier: Arc::new(verifier::Verifier::new(open()?, alerts.clone())),
            alerts,
        })
    }

    /// Starts the background verifier (and the digest, when scheduled) on the current
    /// runtime, and folds the ledger into the read model in the background.
    pub fn start(self: &Arc<Self>, schedule: verifier::Schedule) {
        tokio::spawn(Arc::clone(&self.verifier).run(schedule));
        if let Some(every) = schedule.digest {
            tokio::spawn(Arc::clone(self).post_digests(every, schedule.digest_baseline));
        }
        let review = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let filled = review
                .model
                .generation()
                .and_then(|generation| review.model.catch_up(generation));
            if let Err(err) = filled {
                eprintln!(
                    "attest serve: the dashboard could not read the ledger: {}",
                    crate::chain(&err)
                );
            }
        });
    }

    /// Every `every`, sends the digest of the last `every` through the notifiers.
    async fn post_digests(self: Arc<Self>, every: Duration, baseline: Duration) {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            ticks.tick().await;
            let review = Arc::clone(&self);
            let made = tokio::task::spawn_blocking(move || {
                let options = DigestOptions {
                    until: SystemTime::now(),
                    window: every,
                    baseline,
                };
                digest(review.model.ledger(), options)
            })
            .await;
            match made {
                Ok(Ok(digest)) => {
                    self.alerts.announce(&alerts::digest_notice(&digest)).await;
                }
                Ok(Err(err)) => eprintln!(
                    "attest serve: the digest could not read the ledger: {}",
                    crate::chain(&err)
                ),
                Err(err) => eprintln!("attest serve: the digest stopped: {err}"),
            }
        }
    }

    /// `/healthz`'s answer: healthy unless the chain is known to be broken.
    pub fn health(&self) -> (bool, serde_json::Value) {
        let status = self.verifier.status();
        if status.broken() {
            (false, serde_json::json!({"ok": false, "chain": status}))
        } else {
            (true, serde_json::json!({"ok": true}))
        }
    }
}

pub use digest::{digest, render_text, DigestOptions};

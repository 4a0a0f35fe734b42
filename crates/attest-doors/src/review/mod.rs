//! Reviewing what agents did (issue 17): the digest with anomaly flags, the
//! dashboard's read model and pages, the background verifier, metrics and traces, and
//! the OCSF export.
//!
//! Nothing here decides or writes entries: it reads the ledger (bounded, by seq) and
//! reports.

pub(crate) mod alerts;
pub(crate) mod dashboard;
mod digest;
pub(crate) mod metrics;
pub(crate) mod model;
pub(crate) mod ocsf;
mod rows;
pub(crate) use rows::claimed;
mod shadow;
pub(crate) mod telemetry;
pub(crate) mod verifier;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use attest_ledger::Ledger;
use clap::Args;

use crate::config::Config;

/// What `attest serve` reviews with: the read model, its answer cache, the background
/// verifier, and where alerts and digests go.
pub(crate) struct Review {
    pub(crate) model: model::ReadModel,
    pub(crate) cache: dashboard::Cache,
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
    /// configured ledger (read-only: neither ever holds the write lock; a file or a
    /// `postgres://` URL). Alerts go to standard error and through `alerts`' notifiers.
    pub(crate) fn open(config: &Config, alerts: alerts::Alerts) -> anyhow::Result<Review> {
        let open = || -> anyhow::Result<Arc<Ledger>> {
            Ok(Arc::new(
                config
                    .open_ledger_read_only()
                    .context("opening it for review")?,
            ))
        };
        Ok(Review {
            model: model::ReadModel::new(open()?),
            cache: dashboard::Cache::default(),
            verifier: Arc::new(verifier::Verifier::new(open()?, alerts.clone())),
            alerts,
        })
    }

    /// Starts the background verifier (and the digest, when scheduled) on the current
    /// runtime, and folds the ledger into the read model in the background.
    pub(crate) fn start(self: &Arc<Self>, schedule: verifier::Schedule) {
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
                    crate::servers::chain(&err)
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
                    crate::servers::chain(&err)
                ),
                Err(err) => eprintln!("attest serve: the digest stopped: {err}"),
            }
        }
    }

    /// `/healthz`'s answer: healthy unless the chain is known to be broken.
    pub(crate) fn health(&self) -> (bool, serde_json::Value) {
        let status = self.verifier.status();
        if status.broken() {
            (false, serde_json::json!({"ok": false, "chain": status}))
        } else {
            (true, serde_json::json!({"ok": true}))
        }
    }
}

/// `attest serve`'s options for the background verifier.
#[derive(Debug, Args)]
pub(crate) struct ServeReviewArgs {
    /// How often the background verifier checks new entries.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub(crate) verify_interval: Duration,
    /// How often it checks the whole chain (at least 5s).
    #[arg(long, env = "ATTEST_FULL_VERIFY_INTERVAL", default_value = "5m", value_parser = humantime::parse_duration)]
    pub(crate) full_verify_interval: Duration,
    /// Send the digest of the last period through the configured notifiers this often
    /// (`24h`); needs a notifier.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) digest_every: Option<Duration>,
    /// How much history the scheduled digest compares each agent with.
    #[arg(long, default_value = "28d", value_parser = humantime::parse_duration)]
    pub(crate) digest_baseline: Duration,
}

impl ServeReviewArgs {
    /// The verifier's schedule.
    pub(crate) fn schedule(&self) -> anyhow::Result<verifier::Schedule> {
        if self.full_verify_interval < Duration::from_secs(5) {
            anyhow::bail!("--full-verify-interval must be at least 5s");
        }
        if self.verify_interval < Duration::from_millis(100) {
            anyhow::bail!("--verify-interval must be at least 100ms");
        }
        if self
            .digest_every
            .is_some_and(|every| every < Duration::from_secs(1))
        {
            anyhow::bail!("--digest-every must be at least 1s");
        }
        Ok(verifier::Schedule {
            incremental: self.verify_interval,
            full: self.full_verify_interval,
            digest: self.digest_every,
            digest_baseline: self.digest_baseline,
        })
    }
}

pub(crate) use digest::{digest, render_text, DigestOptions};

/// `attest digest`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct DigestArgs {
    /// The window's length, ending now (or at --until): `24h`, `7d`, `90m`.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub(crate) since: Duration,
    /// The window's end (RFC 3339 UTC) [default: now].
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    pub(crate) until: Option<SystemTime>,
    /// How much history before the window each agent is compared with.
    #[arg(long, default_value = "28d", value_parser = humantime::parse_duration)]
    pub(crate) baseline: Duration,
    /// Print the digest as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also send it through the configured notifiers (Slack, webhook, e-mail).
    #[arg(long)]
    pub(crate) post: bool,
}

/// `attest digest`: reads only; exit 0 whether or not anything was flagged.
pub(crate) fn digest_command(config: &Config, args: &DigestArgs) -> anyhow::Result<ExitCode> {
    if args.since.is_zero() {
        anyhow::bail!("--since must be longer than zero");
    }
    let notifiers = if args.post {
        let notifiers = config.notifiers()?;
        if notifiers.is_empty() {
            anyhow::bail!("--post needs a notifier under `notify:` in the configuration file");
        }
        notifiers
    } else {
        Vec::new()
    };
    let ledger = config.open_ledger_read_only()?;
    let options = DigestOptions {
        until: args.until.unwrap_or_else(SystemTime::now),
        window: args.since,
        baseline: args.baseline,
    };
    let digest = digest(&ledger, options).context("reading the ledger for the digest")?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &digest)?;
        writeln!(out)?;
    } else {
        out.write_all(render_text(&digest).as_bytes())?;
    }
    out.flush()?;
    if !notifiers.is_empty() {
        let sent = notifiers.len();
        let alerts = alerts::Alerts::new(notifiers);
        let failed = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(alerts.announce(&alerts::digest_notice(&digest)));
        if failed > 0 {
            anyhow::bail!("the digest was not sent through {failed} of {sent} notifiers");
        }
    }
    Ok(ExitCode::SUCCESS)
}

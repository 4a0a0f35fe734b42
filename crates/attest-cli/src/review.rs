//! The review commands' flags (`attest serve`'s verifier schedule, `attest digest`) and
//! `attest digest` itself, over the review model in `attest-doors`.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
pub(crate) use attest_doors::review::{alerts, claimed, ocsf, telemetry, verifier};
use attest_doors::review::{digest, render_text, DigestOptions};
use clap::Args;

use crate::config::Config;

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

//! `attest stream run|status`: the audit stream for doors whose processes are short
//! (Python, TypeScript, hooks), and where each sink stands; and the streamer the
//! long-lived doors run beside themselves.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use attest_doors::stream::{self, SinkKind, StreamHandle, StreamOptions, Streamer};
use attest_ledger::Ledger;

use crate::cli::{StreamCommand, StreamRunArgs, StreamStatusArgs};
use crate::config::Config;

pub(crate) fn run(config: &Config, command: &StreamCommand) -> anyhow::Result<ExitCode> {
    match command {
        StreamCommand::Run(args) => stream_run(config, args),
        StreamCommand::Status(args) => stream_status(config, args),
    }
}

/// The configured stream (`stream:`), its secrets read; `None` without one.
fn options(config: &Config) -> anyhow::Result<Option<StreamOptions>> {
    let Some(settings) = &config.file.stream else {
        return Ok(None);
    };
    Ok(Some(StreamOptions::from_settings(
        settings,
        config.env().as_ref(),
        &config.origin(),
    )?))
}

fn required(config: &Config) -> anyhow::Result<StreamOptions> {
    options(config)?.with_context(|| not_configured(config))
}

fn not_configured(config: &Config) -> String {
    format!(
        "no stream is configured: add a stream: section to {} (docs/streaming.md)",
        config.origin()
    )
}

/// Starts the configured stream beside a long-lived door, on `ledger` (the door's
/// own): `None` when the configuration has no `stream:`.
pub(crate) fn beside(
    config: &Config,
    ledger: &Arc<Ledger>,
) -> anyhow::Result<Option<StreamHandle>> {
    let Some(options) = options(config)? else {
        return Ok(None);
    };
    let handle =
        stream::spawn(Arc::clone(ledger), options).context("cannot start the audit stream")?;
    Ok(Some(handle))
}

fn stream_run(config: &Config, args: &StreamRunArgs) -> anyhow::Result<ExitCode> {
    let options = required(config)?;
    let ledger = Arc::new(config.open_ledger(false)?);
    let streamer = Streamer::new(ledger, options);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(streamer.run(stopped(), args.once));
    // Given up on every exit, so the next streamer starts at once.
    streamer.release();
    let totals = outcome.map_err(|err| anyhow::Error::new(err).context("the audit stream"))?;
    if args.once {
        println!("streamed {} rows", totals.rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGINT or SIGTERM.
async fn stopped() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn stream_status(config: &Config, args: &StreamStatusArgs) -> anyhow::Result<ExitCode> {
    // The configured sinks, without their secrets: status reads only the ledger.
    let settings = config
        .file
        .stream
        .as_ref()
        .with_context(|| not_configured(config))?;
    let sinks: Vec<SinkKind> = [
        settings.otlp.as_ref().map(|_| SinkKind::Otlp),
        settings.ocsf.as_ref().map(|_| SinkKind::Ocsf),
    ]
    .into_iter()
    .flatten()
    .collect();
    let ledger = config.open_ledger_read_only()?;
    let status = stream::status(&ledger, &sinks)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    for sink in &status {
        let holder = match &sink.holder {
            Some(holder) => format!("streaming ({holder})"),
            None => "no streamer".to_owned(),
        };
        println!(
            "{}: cursor {}, head {}, lag {} rows, {holder}",
            sink.sink, sink.cursor, sink.head, sink.lag
        );
    }
    Ok(ExitCode::SUCCESS)
}

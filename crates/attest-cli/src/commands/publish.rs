//! `attest publish --dir DIR`: the ledger as a C2SP tlog-tiles directory.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::tiles::{publish, PublishOptions};

use crate::cli_tiles::PublishArgs;
use crate::config::{read_text, Config};

pub(crate) fn run(config: &Config, args: &PublishArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger_read_only()?;
    let note = match &args.note {
        Some(path) => Some(read_text(path, attest_ledger::MAX_NOTE_BYTES as u64)?),
        None => None,
    };
    let bar = crate::commands::tiles::progress_bar("publishing", args.json);
    let mut progress = |done: u64, total: u64| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let report = publish(
        &ledger,
        &args.dir,
        PublishOptions {
            note: note.as_deref(),
            progress: Some(&mut progress),
        },
    )
    .with_context(|| format!("cannot publish into {}", args.dir.display()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "published {} in {} (was {}): {} files, {} bytes written",
            crate::commands::entries(report.size),
            args.dir.display(),
            report.previous_size,
            report.files,
            report.bytes
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

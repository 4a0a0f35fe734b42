use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use attest_ledger::{split_notes, to_hex, VerifyOptions, VerifyReport, MAX_NOTE_BYTES};
use serde_json::json;

use crate::cli::VerifyArgs;
use crate::commands::entries;
use crate::config::{read_capped, trusted_keys, Config};

pub(crate) fn run(config: &Config, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let trusted = trusted_keys(&args.trust)?;
    let mut anchors = Vec::new();
    for path in &args.anchors {
        let bytes = read_capped(path, 1 << 26)?;
        let notes = split_notes(&bytes);
        if notes.is_empty() {
            anyhow::bail!("{} holds no checkpoint note", path.display());
        }
        for note in notes.into_iter().filter(|n| n.len() <= MAX_NOTE_BYTES) {
            anchors.push((path.display().to_string(), note));
        }
    }
    let ledger = config.open_ledger(false)?;
    let bar = (!args.json && std::io::stderr().is_terminal()).then(progress_bar);
    let mut progress = |done: u64, total: u64| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let report = ledger.verify_with(VerifyOptions {
        trusted: &trusted,
        anchors: &anchors,
        since_checkpoint: args.since_checkpoint,
        progress: Some(&mut progress),
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report_json(&report))?;
        writeln!(out)?;
    } else {
        print_report(&mut out, &report)?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("verifying {bar:40} {pos}/{len} rows ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

fn report_json(report: &VerifyReport) -> serde_json::Value {
    json!({
        "ok": report.is_intact(),
        "checked": report.checked,
        "broken_at": report.broken_at(),
        "problems": report.problems,
        "checkpoint": report.checkpoint.as_ref().map(|c| json!({"size": c.size, "root": c.root})),
        "signatures_checked": report.signatures_checked,
        "notes": report.notes,
        "tip": report.tip.map(|(seq, hash)| json!({"seq": seq, "hash": to_hex(&hash)})),
    })
}

pub(crate) fn print_report(out: &mut impl Write, report: &VerifyReport) -> std::io::Result<()> {
    if report.is_intact() {
        match report.tip {
            Some((seq, hash)) => writeln!(
                out,
                "intact: {} checked, chain to seq {seq} (hash {})",
                entries(report.checked),
                to_hex(&hash)
            )?,
            None if report.checked == 0 && report.checkpoint.is_some() => {
                writeln!(out, "intact: no entries since the checkpoint")?
            }
            None => writeln!(out, "intact: the ledger is empty (0 entries)")?,
        }
    } else {
        writeln!(
            out,
            "BROKEN at seq {}: {} problem(s) in {} checked",
            report.broken_at().unwrap_or_default(),
            report.problems.len(),
            entries(report.checked)
        )?;
        for problem in &report.problems {
            writeln!(out, "  {problem}")?;
        }
    }
    if let Some(checkpoint) = &report.checkpoint {
        writeln!(
            out,
            "checkpoint: size {} root {} (signature {})",
            checkpoint.size,
            checkpoint.root,
            if report.signatures_checked {
                "checked against the trusted key"
            } else {
                "NOT checked"
            }
        )?;
    }
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use attest_ledger::{to_hex, LedgerError, OpenIntent, ProblemKind, VerifyOptions, VerifyReport};
use serde_json::json;

use crate::cli::VerifyArgs;
use crate::commands::entries;
use crate::config::{trusted_keys, Config};
use crate::progress::Progress;
use crate::terminal::escape;

pub(crate) fn run(config: &Config, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let trusted = trusted_keys(&args.trust)?;
    if let Some(source) = &args.tiles {
        return crate::commands::tiles::verify(
            source,
            &trusted,
            &args.witness_keys,
            args.min_witnesses,
            args.json,
        );
    }
    let mut anchors = Vec::new();
    for source in &args.anchors {
        anchors.extend(crate::commands::anchor::read_notes(source)?);
    }
    // Read-only: verify works on a read-only disk and never writes to what it checks
    // (an empty or foreign file stays as it is, and is reported as no ledger).
    let ledger =
        match attest_ledger::Ledger::open_read_only_tenant(config.ledger_path(), config.tenant()) {
            Ok(ledger) => ledger,
            Err(err @ LedgerError::NotALedger { .. }) => return not_a_ledger(&err, args.json),
            Err(err) if err.is_damaged() => return damaged(config, &err, args.json),
            Err(err) => {
                return Err(anyhow::Error::new(err)
                    .context(format!("cannot open ledger {}", config.ledger_display())))
            }
        };
    let mut shown = Progress::new("verifying", "rows", args.progress, args.json);
    let mut progress = |done: u64, total: u64| shown.update(done, total);
    let report = ledger.verify_with(VerifyOptions {
        trusted: &trusted,
        anchors: &anchors,
        since_checkpoint: args.since_checkpoint,
        progress: Some(&mut progress),
        require_signature: true,
    });
    shown.finish();
    let report = match report {
        Err(err) if err.is_damaged() => return damaged(config, &err, args.json),
        other => other?,
    };
    // Found in the walk: with --since-checkpoint, among the rows after the checkpoint.
    let mut report = report;
    let intents = std::mem::take(&mut report.open_intents);
    for path in &args.archive {
        let archive = read_archive(path)?;
        let checked = ledger.verify_archive(&archive, &trusted)?;
        report.checked += checked.checked;
        report.signatures_checked |= checked.signatures_checked;
        for note in checked.notes {
            report
                .notes
                .push(format!("archive {}: {note}", path.display()));
        }
        for mut problem in checked.problems {
            problem.detail = format!("archive {}: {}", path.display(), problem.detail);
            report.problems.push(problem);
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut json = report_json(&report);
        json["open_intents"] = json!(intents);
        serde_json::to_writer(&mut out, &json)?;
        writeln!(out)?;
    } else {
        print_report(&mut out, &report)?;
        print_open_intents(&mut out, &intents)?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Reads a prune archive, naming the file in errors.
pub(crate) fn read_archive(path: &std::path::Path) -> anyhow::Result<attest_ledger::Archive> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot read archive {}", path.display()))?;
    attest_ledger::Archive::read(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not an attest archive", path.display()))
}

/// An empty or foreign file where the ledger should be: not intact (exit 1), untouched.
fn not_a_ledger(err: &LedgerError, json: bool) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &json!({"ok": false, "error": err.to_string()}))?;
        writeln!(out)?;
    } else {
        writeln!(out, "NOT A LEDGER: {}", escape(&err.to_string()))?;
    }
    Ok(ExitCode::from(1))
}

/// A ledger whose file or rows do not read (cut short, overwritten): broken (exit 1), as
/// the help promises, with the cause in words rather than only SQLite's.
fn damaged(config: &Config, err: &LedgerError, json: bool) -> anyhow::Result<ExitCode> {
    let cause = attest_core::error_chain(err);
    let text = format!(
        "the ledger {} is damaged and cannot be read ({cause}); it was cut short or \
         overwritten: restore it from a copy (`attest copy`) and verify that against your anchors",
        config.ledger_display()
    );
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &json!({"ok": false, "error": text}))?;
        writeln!(out)?;
    } else {
        writeln!(out, "BROKEN: {}", escape(&text))?;
    }
    Ok(ExitCode::from(1))
}

/// Writes that were cleared to run and never got an outcome row: the ledger is intact,
/// but nothing in it says how these ended.
pub(crate) fn print_open_intents(
    out: &mut impl Write,
    intents: &[OpenIntent],
) -> std::io::Result<()> {
    if intents.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "warning: {} action(s) were recorded as about to run but have no outcome row \
         (a crash, or a full or read-only disk, while they ran); check them at their system:",
        intents.len()
    )?;
    for intent in intents {
        writeln!(
            out,
            "  seq {}: {}.{} (action {})",
            intent.seq,
            escape(&intent.system),
            escape(&intent.verb),
            escape(&intent.action_id)
        )?;
    }
    Ok(())
}

fn report_json(report: &VerifyReport) -> serde_json::Value {
    json!({
        "ok": report.is_intact(),
        "checked": report.checked,
        "broken_at": report.broken_at(),
        "problems": report.problems,
        "checkpoint": report.checkpoint.as_ref().map(|c| json!({"size": c.size, "root": c.root})),
        "signatures_checked": report.signatures_checked,
        "verified_by": report.verified_by,
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
    } else if report
        .problems
        .iter()
        .all(|p| matches!(p.kind, ProblemKind::Unsigned | ProblemKind::BadSignature))
    {
        // Every entry, hash and tree hash checked out: what is missing is a signature the
        // trusted keys accept (a key rotation, a checkpoint not yet signed), not integrity.
        writeln!(
            out,
            "NOT PROVEN: the {} here chain intact, but no checkpoint signed by a trusted key \
             binds them (rows removed from the end, or a rewritten ledger, would look the \
             same): {} problem(s)",
            entries(report.checked),
            report.problems.len()
        )?;
        for problem in &report.problems {
            writeln!(out, "  {}", escape(&problem.to_string()))?;
        }
        writeln!(
            out,
            "  (after a key rotation, pass the old key's verifier too: another --vkey; \
             then sign with the new key: `attest checkpoint`)"
        )?;
    } else {
        writeln!(
            out,
            "BROKEN at seq {}: {} problem(s) in {} checked",
            report.broken_at().unwrap_or_default(),
            report.problems.len(),
            entries(report.checked)
        )?;
        for problem in &report.problems {
            writeln!(out, "  {}", escape(&problem.to_string()))?;
        }
    }
    if let Some(checkpoint) = &report.checkpoint {
        writeln!(
            out,
            "checkpoint: size {} root {} (signature {})",
            checkpoint.size,
            checkpoint.root,
            match report.verified_by.as_slice() {
                [] if report.signatures_checked =>
                    "did NOT verify under the trusted key".to_owned(),
                [] => "NOT checked: no trusted key given".to_owned(),
                keys => format!("verified by {}", keys.join(", ")),
            }
        )?;
    }
    for note in &report.notes {
        writeln!(out, "note: {}", escape(note))?;
    }
    Ok(())
}

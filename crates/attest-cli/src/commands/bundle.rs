//! `attest export --bundle` and `attest verify-bundle`: the auditor's bundle.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::bundle::{check_bundle, Selection, MAX_BUNDLE_BYTES};

use crate::cli::{ExportArgs, VerifyBundleArgs};
use crate::config::{read_capped, trusted_keys, Config};

pub(crate) fn export(config: &Config, args: &ExportArgs, path: &Path) -> anyhow::Result<ExitCode> {
    let selection = match (&args.since, &args.run) {
        (Some(since), None) => Selection::Since(crate::commands::ledger::parse_since(since)?),
        (None, Some(run)) => Selection::Run(run.clone()),
        _ => anyhow::bail!("--bundle needs the rows to put in it: --since TIME or --run ID"),
    };
    let mut trusted = trusted_keys(&args.trust)?;
    if trusted.is_empty() {
        trusted.push(
            config
                .signing_key(&args.key)
                .context("the bundle's checkpoints must verify under a key: pass --vkey")?
                .verifier()
                .clone(),
        );
    }
    let mut anchors = Vec::new();
    for source in &args.anchors {
        // Each note with where it was found; the bundle keeps the note.
        anchors.extend(
            crate::commands::anchor::read_notes(source)?
                .into_iter()
                .map(|(_, note)| note),
        );
    }
    let ledger = config.open_ledger_read_only()?;
    let bundle = ledger.audit_bundle(&selection, &anchors, &trusted)?;
    // A new file: an existing bundle (or anything else) is never overwritten.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    bundle.write_tar(&mut out)?;
    out.into_inner()
        .map_err(std::io::IntoInnerError::into_error)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "attest: wrote {} rows, proved in the signed tree of {} entries, to {}; check it with `attest verify-bundle {}`",
        bundle.rows,
        bundle.tree_size,
        path.display(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify(args: &VerifyBundleArgs) -> anyhow::Result<ExitCode> {
    let trusted = trusted_keys(&args.trust)?;
    if trusted.is_empty() {
        anyhow::bail!(
            "no trusted verifier key: pass --vkey, --vkey-file or set ATTEST_VKEY (the bundle's \
             keys.txt names its signers; take their keys from somewhere other than the bundle)"
        );
    }
    let bytes = read_capped(&args.file, MAX_BUNDLE_BYTES)?;
    let report = check_bundle(&bytes, &trusted)
        .with_context(|| format!("{} is not an audit bundle", args.file.display()))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["ok"] = report.ok().into();
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else if report.ok() {
        writeln!(
            out,
            "ok: {} rows of {}, each in the signed tree of {} entries (signed by {}); {} older checkpoint(s) consistent with it",
            report.rows,
            report.origin.as_deref().unwrap_or("?"),
            report.tree_size.unwrap_or(0),
            report.signers.join(", "),
            report.older_checkpoints.len()
        )?;
    } else {
        for problem in &report.problems {
            writeln!(out, "FAILED: {problem}")?;
        }
        if report.problems.is_empty() {
            writeln!(out, "FAILED: the bundle holds no rows")?;
        }
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

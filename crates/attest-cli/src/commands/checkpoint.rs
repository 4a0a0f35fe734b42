use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::{VerifyOptions, VerifyReport};

use crate::cli::{AnchorArgs, CheckpointArgs};
use crate::commands::verify::print_report;
use crate::config::Config;

pub(crate) fn run(config: &Config, args: &CheckpointArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if args.latest {
        // Only reads: works on a read-only ledger.
        let ledger = config.open_ledger_read_only()?;
        let Some(latest) = ledger.latest_checkpoint()? else {
            anyhow::bail!("the ledger has no checkpoint yet; run `attest checkpoint`");
        };
        out.write_all(latest.note.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let key = config.signing_key(&args.key)?;
    let ledger = config.open_ledger(false)?;
    // Never sign a broken ledger: check what the new checkpoint would vouch for.
    let trusted = [key.verifier().clone()];
    let since = ledger.latest_checkpoint()?.is_some();
    let report = ledger.verify_with(VerifyOptions {
        trusted: &trusted,
        since_checkpoint: since,
        ..VerifyOptions::default()
    })?;
    if !report.is_intact() {
        refuse(&report)?;
        return Ok(ExitCode::from(1));
    }
    let (checkpoint, new) = ledger.checkpoint(&key)?;
    eprintln!(
        "attest: {} checkpoint at size {} signed by {}",
        if new { "new" } else { "existing" },
        checkpoint.size,
        key.name()
    );
    out.write_all(checkpoint.note.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn refuse(report: &VerifyReport) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "attest: not signing: the ledger does not verify")?;
    print_report(&mut err, report)?;
    Ok(())
}

pub(crate) fn anchor(config: &Config, args: &AnchorArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger_read_only()?;
    let Some(latest) = ledger.latest_checkpoint()? else {
        anyhow::bail!("the ledger has no checkpoint yet; run `attest checkpoint`");
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    file.write_all(latest.note.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", args.file.display()))?;
    eprintln!(
        "attest: appended the checkpoint at size {} to {}",
        latest.size,
        args.file.display()
    );
    Ok(ExitCode::SUCCESS)
}

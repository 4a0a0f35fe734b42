use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use std::os::unix::fs::OpenOptionsExt;

use anyhow::Context;
use attest_ledger::VerifyOptions;

use crate::cli::PruneArgs;
use crate::commands::verify::print_report;
use crate::config::Config;

pub(crate) fn run(config: &Config, args: &PruneArgs) -> anyhow::Result<ExitCode> {
    let key = config.signing_key(&args.key)?;
    let ledger = config.open_ledger(false)?;
    // Removing rows removes evidence: only from a ledger that verifies in full.
    let trusted = [key.verifier().clone()];
    let report = ledger.verify_with(VerifyOptions {
        trusted: &trusted,
        ..VerifyOptions::default()
    })?;
    if !report.is_intact() {
        let mut err = std::io::stderr().lock();
        writeln!(err, "attest: not pruning: the ledger does not verify")?;
        print_report(&mut err, &report)?;
        return Ok(ExitCode::from(1));
    }
    let age = Duration::from_secs(args.older_than_days.saturating_mul(86_400));
    let cutoff = SystemTime::now()
        .checked_sub(age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let count = ledger.prune_count(cutoff)?;
    if count > 0 && !args.yes && !confirmed(count, args.older_than_days, config)? {
        writeln!(std::io::stderr().lock(), "attest: not pruned")?;
        return Ok(ExitCode::from(1));
    }
    let pruned = match &args.archive {
        None => ledger.prune(cutoff, &key)?,
        Some(path) => {
            // A new private file: an archive holds the same rows the ledger did.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create archive {}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            let pruned = ledger.prune_archived(cutoff, &key, &mut out)?;
            let file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()
                .with_context(|| format!("cannot sync archive {}", path.display()))?;
            pruned
        }
    };
    let mut out = std::io::stdout().lock();
    if pruned.removed == 0 {
        writeln!(
            out,
            "nothing to prune: no entry older than {} days lies behind a checkpoint (checkpoint at size {})",
            args.older_than_days, pruned.checkpoint.size
        )?;
    } else {
        writeln!(
            out,
            "removed {} entries (now everything up to seq {} is pruned), behind the checkpoint at size {}",
            pruned.removed, pruned.pruned_through, pruned.checkpoint.size
        )?;
        writeln!(
            out,
            "check it with `attest verify --vkey {}`: verification starts from the pruned \
             boundary and binds it to that signed checkpoint",
            key.verifier()
        )?;
        if let Some(path) = &args.archive {
            writeln!(
                out,
                "the removed rows are in {}: `attest verify --archive {}` checks them, \
                 `attest prove SEQ --archive {}` proves one",
                path.display(),
                path.display(),
                path.display()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks on the terminal; without one, refuses (the caller passes --yes to mean it).
fn confirmed(count: u64, days: u64, config: &Config) -> anyhow::Result<bool> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        anyhow::bail!(
            "prune would remove {} older than {days} days from {}; \
             there is no terminal to confirm on: pass --yes to prune",
            super::entries(count),
            config.ledger_display()
        );
    }
    let mut err = std::io::stderr().lock();
    write!(
        err,
        "remove {} older than {days} days from {}? They stay provable through \
         the signed checkpoint, but their bodies are gone unless exported first. [y/N] ",
        super::entries(count),
        config.ledger_display()
    )?;
    err.flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

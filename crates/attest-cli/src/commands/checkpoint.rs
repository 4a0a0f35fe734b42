use std::io::Write;
use std::process::ExitCode;

use attest_ledger::{VerifiedCheckpoint, VerifyReport};

use crate::cli::CheckpointArgs;
use crate::commands::verify::print_report;
use crate::config::{trusted_keys, Config};

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
    // The ledger first: a ledger that does not exist is the problem to name, not its key.
    let ledger = config.open_ledger(false)?;
    let key = config.signing_key(&args.key)?;
    // Never sign a broken ledger: the ledger checks what the new checkpoint would vouch
    // for, from the previous checkpoint on, which the signing key or a key given with
    // --vkey (the one it replaces, after a rotation) must have signed.
    let (checkpoint, new) = match ledger.checkpoint_verified(&key, &trusted_keys(&args.trust)?)? {
        VerifiedCheckpoint::Signed { checkpoint, new } => (checkpoint, new),
        VerifiedCheckpoint::Refused(report) => {
            refuse(&report)?;
            return Ok(ExitCode::from(1));
        }
    };
    eprintln!(
        "attest: {} checkpoint at size {} signed by {}",
        if new { "new" } else { "existing" },
        checkpoint.size,
        key.name()
    );
    let (note, cosigned_by) = crate::commands::witness::collect_cosignatures(
        &ledger,
        key.verifier(),
        &checkpoint.note,
        checkpoint.size,
        &args.witness,
    )?;
    if !args.witness.witnesses.is_empty() {
        eprintln!(
            "attest: cosigned by {} of {} witness(es): {}",
            cosigned_by.len(),
            args.witness.witnesses.len(),
            cosigned_by.join(", ")
        );
    }
    out.write_all(note.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn refuse(report: &VerifyReport) -> anyhow::Result<()> {
    let mut err = std::io::stderr().lock();
    writeln!(err, "attest: not signing: the ledger does not verify")?;
    print_report(&mut err, report)?;
    if report
        .problems
        .iter()
        .any(|p| p.kind == attest_ledger::ProblemKind::BadSignature)
    {
        writeln!(
            err,
            "attest: if the previous checkpoint was signed by a key this one replaces, pass \
             that key's verifier: attest checkpoint --vkey OLD_KEY (docs/operations.md: rotating keys)"
        )?;
    }
    Ok(())
}

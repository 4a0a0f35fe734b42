use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::{Ledger, LedgerOptions, VerifyOptions, VerifyReport};

use crate::cli::CopyArgs;
use crate::commands::verify::print_report;
use crate::config::{location_display, trusted_keys, Config};
use crate::progress::Progress;

/// `attest copy --from A --to B`: verify A, copy, verify both, compare what is signed.
pub(crate) fn run(config: &Config, args: &CopyArgs) -> anyhow::Result<ExitCode> {
    let trusted = trusted_keys(&args.trust)?;
    let from_tenant = args.from_tenant.as_deref().or(config.tenant());
    let to_tenant = args.to_tenant.as_deref().or(config.tenant());
    let source = Ledger::open_read_only_tenant(&args.from, from_tenant)
        .with_context(|| format!("cannot open ledger {}", location_display(&args.from)))?;
    let mut err = std::io::stderr().lock();
    // A copy carries tampering with it: only an intact ledger is copied.
    let before = check(&source, &trusted, "verifying the source", args.progress)?;
    if !before.is_intact() {
        writeln!(
            err,
            "attest: not copying: {} does not verify",
            location_display(&args.from)
        )?;
        print_report(&mut err, &before)?;
        return Ok(ExitCode::from(1));
    }
    let target = Ledger::open(
        &args.to,
        LedgerOptions {
            durability: config.durability.value,
            tenant: to_tenant.map(str::to_owned),
            ..LedgerOptions::default()
        },
    )
    .with_context(|| format!("cannot open ledger {}", location_display(&args.to)))?;
    let mut shown = Progress::new("copying", "rows", args.progress, false);
    let copied = source
        .copy_to_with(&target, &mut |done, total| shown.update(done, total))
        .with_context(|| format!("cannot copy into {}", location_display(&args.to)))?;
    shown.finish();
    let after = check(&target, &trusted, "verifying the copy", args.progress)?;
    let same_checkpoints = source.checkpoints()? == target.checkpoints()?;
    let same_tip = source.tip()? == target.tip()?;
    if !after.is_intact() || !same_checkpoints || !same_tip {
        writeln!(
            err,
            "attest: the copy in {} does not match its source",
            location_display(&args.to)
        )?;
        print_report(&mut err, &after)?;
        return Ok(ExitCode::from(1));
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "copied {} from {} to {}: both verify{}, {} signed checkpoint{} and the tip are the same",
        crate::commands::entries(copied),
        location_display(&args.from),
        location_display(&args.to),
        if after.signatures_checked {
            " under the trusted key"
        } else {
            ""
        },
        target.checkpoints()?.len(),
        if target.checkpoints()?.len() == 1 {
            ""
        } else {
            "s"
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

fn check(
    ledger: &Ledger,
    trusted: &[attest_ledger::VerifierKey],
    label: &str,
    forced: bool,
) -> anyhow::Result<VerifyReport> {
    let mut shown = Progress::new(label, "rows", forced, false);
    let mut progress = |done: u64, total: u64| shown.update(done, total);
    let report = ledger.verify_with(VerifyOptions {
        trusted,
        progress: Some(&mut progress),
        // A ledger with no checkpoint yet copies too; with a key, signatures are checked.
        require_signature: false,
        ..VerifyOptions::default()
    });
    shown.finish();
    Ok(report?)
}

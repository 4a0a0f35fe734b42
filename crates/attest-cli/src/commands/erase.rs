//! `attest erase`: destroy a subject's key and record the erasure (see
//! `attest_ledger::Ledger::erase`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::Erased;
use serde_json::json;

use crate::cli::EraseArgs;
use crate::config::Config;

/// Exit code of an erasure that found nothing to erase.
const NOTHING_TO_ERASE: u8 = 3;

/// Holds the erasure's transaction open this many milliseconds after the key is deleted
/// and the row written, before the commit: a crash drill's window
/// (`crash_in_the_middle_of_erase…` kills the process in it). Unset in normal use.
const HOLD_VAR: &str = "ATTEST_ERASE_HOLD_MS";

pub(crate) fn run(config: &Config, args: &EraseArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger(false)?;
    let hold = std::env::var(HOLD_VAR)
        .ok()
        .map(|ms| {
            ms.parse::<u64>()
                .with_context(|| format!("{HOLD_VAR} is not a number of milliseconds"))
        })
        .transpose()?
        .map(std::time::Duration::from_millis);
    let pause = move || {
        if let Some(hold) = hold {
            let _ = writeln!(
                std::io::stderr().lock(),
                "attest: erase: holding the transaction open"
            );
            std::thread::sleep(hold);
        }
    };
    let erased = ledger
        .erase(
            &args.subject,
            &args.requested_by,
            hold.is_some().then_some(&pause as &(dyn Fn() + Sync)),
        )
        .with_context(|| format!("cannot erase in ledger {}", config.ledger_display()))?;
    let mut out = std::io::stdout().lock();
    match erased {
        Erased::Done { seq, rows, subject } => {
            if args.json {
                let line = json!({"erased": true, "seq": seq, "rows": rows, "subject": subject});
                writeln!(out, "{line}")?;
            } else {
                writeln!(
                    out,
                    "erased: the key of subject {subject} is destroyed; {rows} rows read `erased` now; erasure row {seq}"
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Erased::Already { subject } => {
            if args.json {
                let line = json!({"erased": false, "subject": subject, "reason": "no key is kept for this subject"});
                writeln!(out, "{line}")?;
            } else {
                writeln!(
                    out,
                    "nothing to erase: no key is kept for subject {subject} (erased before, or no sealed rows); nothing was written"
                )?;
            }
            Ok(ExitCode::from(NOTHING_TO_ERASE))
        }
    }
}

//! `attest intents`: the writes recorded as about to run whose outcome row never
//! followed, and `attest intents resolve`: a person's answer about one of them.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;

use super::approvals::{as_approver, runtime};
use crate::cli::{IntentResolveArgs, IntentsArgs, IntentsCommand};
use crate::commands::verify::print_open_intents;
use crate::config::Config;
use crate::terminal::escape;

pub(crate) fn run(config: &Config, args: &IntentsArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        Some(IntentsCommand::Resolve(resolve)) => self::resolve(config, resolve),
        None => list(config, args.json),
    }
}

fn list(config: &Config, json: bool) -> anyhow::Result<ExitCode> {
    // Read-only: listing never writes to the ledger it reads.
    let intents =
        match attest_ledger::Ledger::open_read_only_tenant(config.ledger_path(), config.tenant()) {
            Ok(ledger) => attest_core::open_intents(&ledger, 1)?,
            // No ledger yet: nothing was about to run.
            Err(attest_ledger::LedgerError::NotFound { .. }) => Vec::new(),
            Err(err) => {
                return Err(anyhow::Error::new(err)
                    .context(format!("cannot open ledger {}", config.ledger_display())))
            }
        };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &intents)?;
        writeln!(out)?;
    } else if intents.is_empty() {
        writeln!(out, "(no open intents: every write's outcome is recorded)")?;
    } else {
        print_open_intents(&mut out, &intents)?;
        writeln!(
            out,
            "record what you found with `attest intents resolve SEQ --ran` or `--not-run`"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn resolve(config: &Config, args: &IntentResolveArgs) -> anyhow::Result<ExitCode> {
    let (attest, approver) = match as_approver(config, args.token_file.as_deref())? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    let ran = args.ran && !args.not_run;
    let resolved = runtime()?.block_on(attest.resolve_intent(args.seq, ran, &approver, "cli"))?;
    let receipt = match resolved {
        Ok(receipt) => receipt,
        Err(why) => {
            eprintln!("attest: not recorded: {}", escape(&why));
            return Ok(ExitCode::from(1));
        }
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let shown = json!({
            "seq": receipt.seq,
            "action_id": receipt.action_id,
            "intent_seq": args.seq,
            "ran": ran,
            "approver": approver,
        });
        serde_json::to_writer(&mut out, &shown)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "intent seq {} resolved as {} by {} (ledger seq {})",
            args.seq,
            if ran { "ran" } else { "not run" },
            escape(&approver),
            receipt.seq
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

//! `attest grants list|revoke`: the bounded grants people gave with an approval
//! (`attest confirm ID approve --grant …`).

use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;

use attest_core::approvals::{ApprovalError, Grant, Unusable};
use attest_core::{Attest, AttestError};
use attest_ledger::format_ts;
use serde_json::{json, Value};

use super::approvals::{pipeline, runtime};
use crate::cli::GrantsCommand;
use crate::config::Config;
use crate::terminal::escape;

pub(crate) fn run(config: &Config, command: &GrantsCommand) -> anyhow::Result<ExitCode> {
    let attest = pipeline(config, false)?;
    let mut out = std::io::stdout().lock();
    match command {
        GrantsCommand::List(args) => {
            let store = attest.approvals()?;
            let now = store.now();
            let listed = store
                .grants()?
                .iter()
                .map(|grant| listed(&attest, grant, now))
                .collect::<anyhow::Result<Vec<Value>>>()?;
            if args.json {
                serde_json::to_writer_pretty(&mut out, &listed)?;
                writeln!(out)?;
                return Ok(ExitCode::SUCCESS);
            }
            if listed.is_empty() {
                writeln!(
                    out,
                    "(no grants: give one with `attest confirm ID approve --grant calls=N,for=LENGTH`)"
                )?;
            }
            for grant in &listed {
                let text = |key: &str| escape(grant[key].as_str().unwrap_or("-"));
                writeln!(
                    out,
                    "{}  {}  {}.{}  {}/{} used  until {}  {}  by {}{}",
                    text("id"),
                    text("agent"),
                    text("system"),
                    text("verb"),
                    grant["used"],
                    grant["calls"],
                    text("expires_at"),
                    text("state"),
                    text("approver"),
                    grant["when"]
                        .as_str()
                        .map_or_else(String::new, |when| format!("  where {}", escape(when))),
                )?;
            }
        }
        GrantsCommand::Revoke(args) => {
            let revoked = runtime()?.block_on(attest.revoke_grant(&args.id));
            match revoked {
                Ok((grant, receipt)) if args.json => {
                    serde_json::to_writer_pretty(
                        &mut out,
                        &json!({"grant": grant, "seq": receipt.seq}),
                    )?;
                    writeln!(out)?;
                }
                Ok((grant, receipt)) => writeln!(
                    out,
                    "{} revoked (ledger seq {})",
                    escape(&grant.id),
                    receipt.seq
                )?,
                Err(AttestError::Approval(err @ ApprovalError::UnknownGrant { .. })) => {
                    eprintln!("attest: {err}");
                    return Ok(ExitCode::from(1));
                }
                Err(err) => return Err(err.into()),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A grant as listed: its fields, the calls used (from the ledger's window counts) and
/// its state.
fn listed(attest: &Attest, grant: &Grant, now: SystemTime) -> anyhow::Result<Value> {
    let used = attest.ledger().window_figures(&[grant.claim()])?;
    let state = match grant.unusable(now) {
        None => "active".to_owned(),
        Some(Unusable::Revoked(at)) => format!("revoked {}", format_ts(at)),
        Some(Unusable::Expired(_)) => "expired".to_owned(),
        Some(Unusable::Unrecorded) => "unrecorded".to_owned(),
    };
    let mut value = serde_json::to_value(grant)?;
    value["used"] = json!(used.first().copied().unwrap_or_default() as u64);
    value["state"] = json!(state);
    Ok(value)
}

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use attest_ledger::{format_ts, to_hex, Counts, Filter, Ledger, LedgerError, RowSummary};
use serde::Serialize;
use serde_json::Value;

use crate::cli::LedgerArgs;
use crate::commands::short;
use crate::commands::verify::print_open_intents;
use crate::config::Config;
use crate::terminal::escape;

pub(crate) fn run(config: &Config, args: &LedgerArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger_read_only()?;
    let mut out = std::io::stdout().lock();
    if args.counts {
        let counts = ledger.counts()?;
        if args.json {
            serde_json::to_writer_pretty(&mut out, &counts)?;
            writeln!(out)?;
        } else {
            print_counts(&mut out, &counts)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let filter = filter(args)?;
    let filtered = filter != Filter::default();
    let rows = ledger.list_filtered(&filter, args.limit)?;
    let listed = with_outcomes(&ledger, &rows)?;
    if args.json {
        serde_json::to_writer_pretty(&mut out, &listed)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if filtered && listed.is_empty() {
        writeln!(out, "(no row matches)")?;
        return Ok(ExitCode::SUCCESS);
    }
    print_listed(&mut out, &listed)?;
    if !filtered {
        print_open_intents(&mut out, &attest_core::open_intents(&ledger, 1)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The listing filter from the flags; `--since` must be an RFC 3339 time, compared in
/// the ledger's own form (UTC, microseconds).
fn filter(args: &LedgerArgs) -> anyhow::Result<Filter> {
    let since = args.since.as_deref().map(parse_since).transpose()?;
    Ok(Filter {
        run: args.run.clone(),
        agent: args.agent.clone(),
        system: args.system.clone(),
        decision: args.decision.clone(),
        level: args.level.clone(),
        since,
        action_id: args.action.clone(),
        before: None,
    })
}

/// A `--since` time (RFC 3339) in the ledger's own form (UTC, microseconds), which
/// compares as text in time order.
pub(crate) fn parse_since(text: &str) -> anyhow::Result<String> {
    let time = humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
        .or_else(|_| humantime::parse_rfc3339(text))
        .map_err(|err| {
            anyhow::anyhow!("bad --since {text:?}: {err} (use e.g. 2026-12-01T09:00:00Z)")
        })?;
    Ok(format_ts(time))
}

fn print_counts(out: &mut impl Write, counts: &Counts) -> std::io::Result<()> {
    writeln!(out, "{} entries", counts.total)?;
    let sections = [
        ("by decision", &counts.by_decision),
        ("by level", &counts.by_level),
        ("by system", &counts.by_system),
        ("by agent", &counts.by_agent),
    ];
    for (title, map) in sections {
        writeln!(out, "{title}:")?;
        for (key, n) in map {
            writeln!(out, "  {:<24} {n}", escape(key))?;
        }
    }
    writeln!(out, "by hour (UTC):")?;
    for (hour, map) in &counts.by_hour {
        let parts: Vec<String> = map
            .iter()
            .map(|(decision, n)| format!("{} {n}", escape(decision)))
            .collect();
        writeln!(out, "  {}  {}", escape(hour), parts.join(", "))?;
    }
    Ok(())
}

/// A listed row and what became of its action, as `attest ledger` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct Listed<'a> {
    #[serde(flatten)]
    row: &'a RowSummary,
    /// `ran`, `failed`, `refused`, `pending`, `intent`, `approved by X, ran`, `rejected by X`, …;
    /// for an imported row, `imported: the source claims …`.
    outcome: String,
    /// True for a row `attest import` wrote: its decision, approval and level are the
    /// source's claim, not what Attest saw.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    imported: bool,
}

/// The rows with their outcomes, read from the stored bodies (`execution`, `confirm`).
pub(crate) fn with_outcomes<'a>(
    ledger: &Ledger,
    rows: &'a [RowSummary],
) -> Result<Vec<Listed<'a>>, LedgerError> {
    let (Some(first), Some(last)) = (
        rows.iter().map(|r| r.seq).min(),
        rows.iter().map(|r| r.seq).max(),
    ) else {
        return Ok(Vec::new());
    };
    let mut outcomes = HashMap::with_capacity(rows.len());
    ledger.for_each_row(first, |stored| {
        if stored.seq > last {
            return Ok(false);
        }
        let imported = serde_json::from_slice::<Value>(stored.body)
            .is_ok_and(|entry| entry.get("imported").is_some_and(Value::is_object));
        let mut text = outcome(stored.body, stored.decision);
        if imported {
            text = format!("imported: the source claims {text}");
        }
        outcomes.insert(stored.seq, (text, imported));
        Ok(true)
    })?;
    Ok(rows
        .iter()
        .map(|row| {
            let (outcome, imported) = outcomes
                .remove(&row.seq)
                .unwrap_or_else(|| ("-".to_owned(), false));
            Listed {
                row,
                outcome,
                imported,
            }
        })
        .collect())
}

/// What became of an action, from its row's body: who decided, and whether it ran.
fn outcome(body: &[u8], decision: &str) -> String {
    let Ok(entry) = serde_json::from_slice::<Value>(body) else {
        return "unreadable".to_owned();
    };
    let text = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let status = entry
        .get("execution")
        .map(|e| text(e, "status"))
        .unwrap_or_default();
    let ran = match status.as_str() {
        "ok" => "ran",
        "failed" => "failed",
        "pending" => return "pending".to_owned(),
        // Written before the tool runs; the outcome row follows with the same action id.
        "intent" => "intent",
        "recorded" => "recorded",
        "not_run" if decision == "refuse" => return "refused".to_owned(),
        "not_run" => "not run",
        _ => "-",
    };
    // A grant's own row, or a call that ran under one (its use named after the outcome).
    let grant = entry.get("grant").filter(|g| g.is_object());
    let under = match grant.map(|g| (text(g, "id"), text(g, "event"))) {
        Some((id, event)) if event == "issued" || event == "revoked" => {
            return format!("grant {id} {event}");
        }
        Some((id, _)) => {
            let number = grant.and_then(|g| g.get("use")).and_then(Value::as_u64);
            format!(", grant {id} use {}", number.unwrap_or_default())
        }
        None => String::new(),
    };
    let Some(confirm) = entry.get("confirm").filter(|c| c.is_object()) else {
        return ran.to_owned();
    };
    let by = match text(confirm, "approver") {
        approver if approver.is_empty() => String::new(),
        approver => format!(" by {approver}"),
    };
    match text(confirm, "outcome").as_str() {
        "rejected" => format!("rejected{by}"),
        "expired" => "expired".to_owned(),
        "cancelled" => "cancelled".to_owned(),
        decided => format!("{decided}{by}, {ran}{under}"),
    }
}

pub(crate) fn print_listed(out: &mut impl Write, rows: &[Listed<'_>]) -> std::io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "(the ledger is empty)");
    }
    writeln!(
        out,
        "{:>6}  {:<27}  {:<12}  {:<22}  {:<8}  {:<15}  {:<12}  outcome",
        "seq", "ts", "agent", "action", "decision", "level", "hash"
    )?;
    for Listed {
        row,
        outcome,
        imported,
    } in rows
    {
        let level = crate::review::claimed(*imported, row.level.as_deref().unwrap_or("-"));
        writeln!(
            out,
            "{:>6}  {:<27}  {:<12}  {:<22}  {:<8}  {:<15}  {:<12}  {}",
            row.seq,
            escape(&row.ts),
            escape(row.agent.as_deref().unwrap_or("-")),
            format!("{}.{}", escape(&row.system), escape(&row.verb)),
            escape(&row.decision),
            escape(&level),
            short(&to_hex(&row.hash)),
            escape(outcome),
        )?;
    }
    Ok(())
}

use std::io::Write;
use std::process::ExitCode;

use attest_ledger::to_hex;

use crate::cli::LedgerArgs;
use crate::commands::short;
use crate::commands::verify::print_open_intents;
use crate::config::Config;
use crate::terminal::escape;

pub(crate) fn run(config: &Config, args: &LedgerArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger_read_only()?;
    let rows = ledger.list(args.limit)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    print_table(&mut out, &rows)?;
    print_open_intents(&mut out, &attest_core::open_intents(&ledger, 1)?)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn print_table(
    out: &mut impl Write,
    rows: &[attest_ledger::RowSummary],
) -> std::io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "(the ledger is empty)");
    }
    writeln!(
        out,
        "{:>6}  {:<27}  {:<12}  {:<22}  {:<8}  {:<15}  hash",
        "seq", "ts", "agent", "action", "decision", "level"
    )?;
    for row in rows {
        writeln!(
            out,
            "{:>6}  {:<27}  {:<12}  {:<22}  {:<8}  {:<15}  {}",
            row.seq,
            escape(&row.ts),
            escape(row.agent.as_deref().unwrap_or("-")),
            format!("{}.{}", escape(&row.system), escape(&row.verb)),
            escape(&row.decision),
            escape(row.level.as_deref().unwrap_or("-")),
            short(&to_hex(&row.hash)),
        )?;
    }
    Ok(())
}

use std::io::Write;
use std::process::ExitCode;

use attest_ledger::{to_hex, VerifyReport};
use serde_json::json;

use crate::cli::VerifyArgs;
use crate::config::Config;

pub(crate) fn run(config: &Config, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger(false)?;
    let report = ledger.verify()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report_json(&report))?;
        writeln!(out)?;
    } else {
        print_report(&mut out, &report)?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn report_json(report: &VerifyReport) -> serde_json::Value {
    json!({
        "ok": report.is_intact(),
        "checked": report.checked,
        "broken_at": report.broken_at(),
        "problems": report.problems,
        "tip": report.tip.map(|(seq, hash)| json!({"seq": seq, "hash": to_hex(&hash)})),
    })
}

pub(crate) fn print_report(out: &mut impl Write, report: &VerifyReport) -> std::io::Result<()> {
    match (report.is_intact(), report.tip) {
        (true, Some((seq, hash))) => writeln!(
            out,
            "intact: {} entries, chain from the zero hash to seq {seq} (hash {})",
            report.checked,
            to_hex(&hash)
        ),
        (true, None) => writeln!(out, "intact: the ledger is empty (0 entries)"),
        (false, _) => {
            let first = report.broken_at().unwrap_or_default();
            writeln!(
                out,
                "BROKEN at seq {first}: {} problem(s) in {} entries",
                report.problems.len(),
                report.checked
            )?;
            for problem in &report.problems {
                writeln!(out, "  {problem}")?;
            }
            Ok(())
        }
    }
}

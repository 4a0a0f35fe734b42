//! `attest import`: record actions that already happened, from JSON lines, in one
//! transaction.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use attest_core::Attest;
use attest_policy::Action;
use serde::Deserialize;
use serde_json::Value;

use crate::cli::ImportArgs;
use crate::config::Config;

/// Longest line accepted: one action, params included.
const MAX_LINE: usize = 1 << 20;

/// One line: the action's fields, and optionally the result it had.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(flatten)]
    action: Action,
    #[serde(default)]
    result: Option<Value>,
}

pub(crate) fn run(config: &Config, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let input: Box<dyn BufRead> = if name == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file =
            std::fs::File::open(&args.file).with_context(|| format!("cannot open {name}"))?;
        Box::new(std::io::BufReader::new(file))
    };
    // Parse everything first: a bad line imports nothing.
    let mut items = Vec::new();
    for (index, line) in input.lines().enumerate() {
        let number = index + 1;
        let line = line.with_context(|| format!("{name}:{number}: cannot read"))?;
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > MAX_LINE {
            anyhow::bail!(
                "{name}:{number}: line is {} bytes; the limit is {MAX_LINE}",
                line.len()
            );
        }
        let parsed: Line = serde_json::from_str(&line).with_context(|| {
            format!("{name}:{number}: not an action (needs at least \"system\" and \"verb\")")
        })?;
        items.push((parsed.action, parsed.result));
    }
    if items.is_empty() {
        anyhow::bail!("{name} holds no actions");
    }
    let ledger = config.open_ledger(true)?;
    let attest = Attest::builder().ledger(ledger).build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let receipts = runtime.block_on(attest.record_batch(items))?;
    let (first, last) = (
        receipts.first().map(|r| r.seq),
        receipts.last().map(|r| r.seq),
    );
    writeln!(
        std::io::stdout().lock(),
        "imported {} actions as seq {}..={} (decision recorded)",
        receipts.len(),
        first.unwrap_or_default(),
        last.unwrap_or_default()
    )?;
    Ok(ExitCode::SUCCESS)
}

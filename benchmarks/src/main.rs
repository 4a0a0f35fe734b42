//! The benchmark program behind every number in README.md.
//!
//! `cargo run --release -p benchmarks -- [--quick] [--json FILE]` prints one table
//! (mean, p50, p95, ops/s per row) and writes the same rows as JSON. Physical-limit
//! rows (a bare SQLite INSERT of the same bytes, raw SHA-256, one fsync) run in the
//! same process so each Attest row can be read against what the machine allows.

mod measure;
mod scenarios;

use std::path::PathBuf;

use clap::Parser;

use crate::measure::Row;

/// Measures Attest's own cost per action, per append and per verification.
#[derive(Debug, Parser)]
struct Args {
    /// Fewer samples and smaller ledgers, for a fast look (CI uses this).
    #[arg(long)]
    quick: bool,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let scale = if args.quick {
        scenarios::Scale::quick()
    } else {
        scenarios::Scale::full()
    };
    let rows = scenarios::all(&scale)?;
    print_table(&rows);
    if let Some(path) = args.json {
        let json = serde_json::json!({
            "quick": args.quick,
            "machine": machine(),
            "rows": rows,
        });
        std::fs::write(&path, serde_json::to_vec_pretty(&json)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!(
        "| {:<58} | {:>10} | {:>10} | {:>10} | {:>12} |",
        "what", "mean", "p50", "p95", "ops/s"
    );
    println!(
        "|{:-<60}|{:->12}|{:->12}|{:->12}|{:->14}|",
        "", "", "", "", ""
    );
    for row in rows {
        println!(
            "| {:<58} | {:>10} | {:>10} | {:>10} | {:>12} |",
            row.name,
            measure::human(row.mean_ns),
            measure::human(row.p50_ns),
            measure::human(row.p95_ns),
            format!("{:.0}", row.ops_per_sec),
        );
    }
}

fn machine() -> serde_json::Value {
    serde_json::json!({
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    })
}

//! The benchmark program behind every number in benchmarks/README.md.
//!
//! `cargo run --release -p benchmarks -- [--quick] [--json FILE] [--peer FILE]` prints
//! one table (mean, p50, p95, ops/s per row) and writes the same rows as JSON.
//! Physical-limit rows (a bare SQLite INSERT of the same bytes, raw SHA-256, one fsync)
//! run in the same process so each Attest row can be read against what the machine
//! allows. With `--peer FILE` (JSON from `benchmarks/peer/run.sh`), each row that the
//! source system also measured gets a ratio column.

mod dashboard;
mod mcp_proxy;
mod measure;
mod postgres;
mod processes;
mod scenarios;
mod targets;
mod tiles;

use std::path::PathBuf;

use clap::Parser;

/// Measures Attest's own cost per action, per append and per verification.
#[derive(Debug, Parser)]
struct Args {
    /// Fewer samples and smaller ledgers, for a fast look.
    #[arg(long)]
    quick: bool,
    /// Also write the rows as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The source system's rows (from `benchmarks/peer/run.sh --json FILE`), for ratios.
    #[arg(long)]
    peer: Option<PathBuf>,
    /// Internal: run as one of several processes appending to one ledger.
    #[arg(long, hide = true, num_args = 2, value_names = ["LEDGER", "ACTIONS"])]
    worker: Option<Vec<String>>,
    /// Run only one group of rows: `tiles` (publishing and checking tlog-tiles),
    /// `dashboard` (`attest serve` polled at 1,000,000 rows; 20,000 with --quick) or
    /// `stores` (SQLite's one-row appends and verify beside the PostgreSQL rows; no `attest`
    /// binary needed) or `ledger` (the SQLite ledger's rows and their limit rows: appends,
    /// the whole action, batched appends, full and since-checkpoint verify) or `windows`
    /// (a decision and a whole action with a budget or rate window, beside the plain ones)
    /// or `targets` (only the rows issue 27's targets are scored on and their limit rows,
    /// PostgreSQL's and the command line's included; needs the `attest` binary).
    #[arg(long, value_name = "GROUP")]
    only: Option<String>,
    /// Internal: verify a ledger and print the peak resident memory.
    #[arg(long, hide = true, value_name = "LEDGER")]
    verify_rss: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(worker) = args.worker {
        return processes::worker(&worker);
    }
    if let Some(path) = args.verify_rss {
        return processes::verify_rss(&path);
    }
    let peer = match &args.peer {
        Some(path) => Some(measure::Peer::load(path)?),
        None => None,
    };
    let scale = if args.quick {
        scenarios::Scale::quick()
    } else {
        scenarios::Scale::full()
    };
    let report = match args.only.as_deref() {
        None => scenarios::all(&scale)?,
        Some("tiles") => scenarios::tiles_only(&scale)?,
        Some("dashboard") => scenarios::dashboard_only(&scale)?,
        Some("stores") => scenarios::stores(&scale)?,
        Some("ledger") => scenarios::ledger_only(&scale)?,
        Some("windows") => scenarios::windows_only(&scale)?,
        Some("targets") => scenarios::targets_only(&scale)?,
        Some(other) => {
            anyhow::bail!(
                "--only {other:?}: the groups are `tiles`, `dashboard`, `stores`, `ledger`, `windows` and `targets`"
            )
        }
    };
    measure::print_table(&report.rows, peer.as_ref());
    for (what, value) in &report.facts {
        println!("{what}: {value}");
    }
    let targets = targets::score_report(&scale, &report);
    // A group that measures none of them (`--only tiles`) prints no table of dashes.
    if targets
        .iter()
        .any(|t| t.verdict != targets::Verdict::NotMeasured)
    {
        println!("\nIssue 27 targets:\n");
        print!("{}", targets::table(&targets));
    }
    if let Some(path) = args.json {
        let json = serde_json::json!({
            "quick": args.quick,
            "machine": machine(),
            "rows": report.rows,
            "facts": report.facts.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
            "peer": peer.as_ref().map(|p| p.json()),
            "targets": targets,
            "measures": report.measures.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(*v))).collect::<serde_json::Map<_, _>>(),
        });
        std::fs::write(&path, serde_json::to_vec_pretty(&json)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn machine() -> serde_json::Value {
    serde_json::json!({
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    })
}

//! Scenarios that need other processes: several writers on one file, and the peak
//! memory of a verification measured in a process that does nothing else.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use attest_core::Attest;
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, Verb};
use serde_json::json;

use crate::measure::{flat, Row};

/// The child half of [`several_processes`]: `actions` whole actions at `full`.
pub(crate) fn worker(args: &[String]) -> anyhow::Result<()> {
    let [path, actions] = args else {
        anyhow::bail!("--worker takes LEDGER ACTIONS");
    };
    let actions: u64 = actions.parse()?;
    let ledger = Ledger::open(path, LedgerOptions::default())?;
    let attest = Attest::builder()
        .ledger(ledger)
        .agent("bench-worker")
        .build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for i in 0..actions {
        let action = Action::new("hubspot", Verb::Update).with_params(json!({"id": i}));
        runtime.block_on(
            attest
                .call(action)
                .run(|_| async { Ok::<_, std::convert::Infallible>(json!({"id": "8812"})) }),
        )?;
    }
    Ok(())
}

/// `processes` processes, each running `actions` whole actions on one ledger at `full`.
pub(crate) fn several_processes(dir: &Path, processes: usize, actions: u64) -> anyhow::Result<Row> {
    let path = dir.join("processes.sqlite");
    drop(Ledger::open(&path, LedgerOptions::default())?);
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(&exe)
                .arg("--worker")
                .arg(&path)
                .arg(actions.to_string())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for mut child in children {
        anyhow::ensure!(child.wait()?.success(), "a worker process failed");
    }
    let elapsed = start.elapsed().as_nanos() as f64;
    let total = processes as f64 * actions as f64;
    let report = Ledger::open(&path, LedgerOptions::default())?.verify()?;
    // Each action is a write: its intent row, then its outcome row.
    anyhow::ensure!(
        report.is_intact() && report.checked as f64 == 2.0 * total,
        "processes broke the chain"
    );
    Ok(flat(
        &format!("throughput: {processes} processes on one file (full), per action"),
        total as usize,
        elapsed / total,
    ))
}

/// The child half of [`verify_peak_memory`]: verifies and prints its peak RSS in KiB.
pub(crate) fn verify_rss(path: &Path) -> anyhow::Result<()> {
    let ledger = Ledger::open(path, LedgerOptions::default())?;
    let report = ledger.verify()?;
    anyhow::ensure!(report.is_intact(), "ledger does not verify");
    let status = std::fs::read_to_string("/proc/self/status")?;
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map(|v| v.trim().trim_end_matches("kB").trim().to_owned())
        .unwrap_or_default();
    println!("{peak}");
    Ok(())
}

/// Peak resident memory of a process that opens `path` and verifies it, in bytes.
pub(crate) fn verify_peak_memory(path: &Path) -> anyhow::Result<u64> {
    let output = Command::new(std::env::current_exe()?)
        .arg("--verify-rss")
        .arg(path)
        .output()?;
    anyhow::ensure!(output.status.success(), "the verify process failed");
    let kib: u64 = String::from_utf8_lossy(&output.stdout).trim().parse()?;
    Ok(kib * 1024)
}

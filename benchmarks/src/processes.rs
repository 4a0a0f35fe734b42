//! Scenarios that need other processes: several writers on one file, the peak memory
//! of a verification measured in a process that does nothing else, and the command
//! line's `import` and `verify`, each a process, beside what a bare process does with
//! the same bytes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use attest_core::Attest;
use attest_ledger::{Durability, Ledger, LedgerOptions, Record, SigningKey};
use attest_policy::{Action, Verb};
use serde_json::json;

use crate::measure::{flat, paired, Row, Sampler};
use crate::scenarios::{record, Scale};
use crate::targets::names;

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

/// The bare limit under `attest import`: the same lines into one table in one
/// transaction, by Python's own `sqlite3` (WAL, `synchronous = FULL`, as the ledger's
/// default durability syncs).
const EXECUTEMANY: &str = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode = WAL")
db.execute("PRAGMA synchronous = FULL")
db.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)")
with open(sys.argv[2], encoding="utf-8") as lines, db:
    db.executemany("INSERT INTO entries (body) VALUES (?)", ((line,) for line in lines))
"#;

/// The command line's rows, each a process timed from spawn to exit: `attest import` of
/// an export of `scale.bulk_rows` rows into a new ledger beside Python's executemany of
/// the same lines, `attest verify` beside `openssl dgst -sha256` of the export, and
/// `attest verify --since-checkpoint` (100 rows after a checkpoint) beside
/// `attest --version` (what starting the process costs).
pub(crate) fn cli_rows(dir: &Path, scale: &Scale) -> anyhow::Result<Vec<Row>> {
    let attest = crate::mcp_proxy::attest_binary()?;
    let rows = scale.bulk_rows;
    let work = dir.join("cli");
    std::fs::create_dir_all(&work)?;
    let ledger_path = work.join("ledger.sqlite");
    let ledger = Ledger::open(
        &ledger_path,
        LedgerOptions {
            durability: Durability::Normal,
            ..LedgerOptions::default()
        },
    )?;
    let records: Vec<Record> = (0..rows as u64).map(record).collect();
    for chunk in records.chunks(1000) {
        ledger.append_batch(chunk)?;
    }
    let ledger_arg = ledger_path.display().to_string();
    let export = work.join("export.jsonl");
    let status = cli(&attest, &work)
        .args(["--ledger", &ledger_arg, "export"])
        .stdout(std::fs::File::create(&export)?)
        .status()?;
    anyhow::ensure!(status.success(), "attest export failed");
    let export_arg = export.display().to_string();

    let python = python()?;
    let mut out = Vec::new();
    let samples = scale.process_samples;
    let mut imports = 0;
    let import_name = names::cli_import(rows);
    let mut import = process(&import_name, || {
        imports += 1;
        let into = work.join(format!("import-{imports}"));
        std::fs::create_dir_all(&into)?;
        let mut run = cli(&attest, &work);
        run.arg("--ledger")
            .arg(into.join("ledger.sqlite"))
            .args(["import", &export_arg]);
        Ok((run, Some(into)))
    });
    let mut bares = 0;
    let executemany_name = names::cli_executemany(rows);
    let mut executemany = process(&executemany_name, || {
        bares += 1;
        let into = work.join(format!("bare-{bares}"));
        std::fs::create_dir_all(&into)?;
        let mut run = Command::new(&python);
        run.args(["-c", EXECUTEMANY])
            .arg(into.join("bare.sqlite"))
            .arg(&export);
        Ok((run, Some(into)))
    });
    out.extend(timed(
        samples,
        (&import_name, &mut import),
        (&executemany_name, &mut executemany),
    )?);
    let verify_name = names::cli_verify(rows);
    let mut verify = process(&verify_name, || {
        let mut run = cli(&attest, &work);
        run.args(["--ledger", &ledger_arg, "verify"]);
        Ok((run, None))
    });
    let openssl_name = names::cli_openssl(rows);
    let mut openssl = process(&openssl_name, || {
        let mut run = Command::new("openssl");
        run.args(["dgst", "-sha256", &export_arg]);
        Ok((run, None))
    });
    out.extend(timed(
        samples,
        (&verify_name, &mut verify),
        (&openssl_name, &mut openssl),
    )?);

    let (key, _) = SigningKey::generate("bench.attest/cli")?;
    ledger.checkpoint(&key)?;
    let after: Vec<Record> = (0..100).map(|i| record(rows as u64 + i)).collect();
    ledger.append_batch(&after)?;
    drop(ledger);
    let vkey = key.verifier().to_string();
    let since_name = names::cli_since_checkpoint(rows);
    let mut since = process(&since_name, || {
        let mut run = cli(&attest, &work);
        run.args([
            "--ledger",
            &ledger_arg,
            "verify",
            "--since-checkpoint",
            "--vkey",
            &vkey,
        ]);
        Ok((run, None))
    });
    let mut version = process(names::CLI_VERSION, || {
        let mut run = cli(&attest, &work);
        run.arg("--version");
        Ok((run, None))
    });
    out.extend(timed(
        scale.samples,
        (&since_name, &mut since),
        (names::CLI_VERSION, &mut version),
    )?);
    Ok(out)
}

/// The Python interpreter itself: `python3` on PATH may be a launcher script (pyenv's
/// shim takes longer to start than the executemany takes).
fn python() -> anyhow::Result<std::path::PathBuf> {
    let output = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .context("the executemany limit row needs python3 on PATH")?;
    anyhow::ensure!(output.status.success(), "python3 did not start");
    Ok(String::from_utf8(output.stdout)?.trim().into())
}

/// `attest` run in `dir` with none of the caller's `ATTEST_*` settings, so only the
/// arguments say what it does.
fn cli(attest: &Path, dir: &Path) -> Command {
    let mut command = Command::new(attest);
    command.current_dir(dir);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ATTEST_") {
            command.env_remove(name);
        }
    }
    command
}

/// A sampler of the command `next` makes: each sample runs one, timed from spawn to
/// exit, and removes the scratch directory it names afterwards (untimed).
fn process<'a>(
    name: &'a str,
    mut next: impl FnMut() -> anyhow::Result<(Command, Option<std::path::PathBuf>)> + 'a,
) -> impl FnMut() -> anyhow::Result<f64> + 'a {
    move || {
        let (mut command, scratch) = next()?;
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        let start = Instant::now();
        let output = command
            .output()
            .with_context(|| format!("cannot start {:?}", command.get_program()))?;
        let elapsed = start.elapsed().as_nanos() as f64;
        anyhow::ensure!(
            output.status.success(),
            "{name}: {:?} failed: {}",
            command.get_program(),
            String::from_utf8_lossy(&output.stderr)
        );
        if let Some(scratch) = scratch {
            std::fs::remove_dir_all(&scratch)?;
        }
        Ok(elapsed)
    }
}

/// A process row and its limit's, `samples` runs of each by turns (after one untimed
/// run of each, which warms the page cache): see [`paired`].
fn timed(
    samples: usize,
    (name, row): (&str, Sampler<'_>),
    (limit_name, limit): (&str, Sampler<'_>),
) -> anyhow::Result<[Row; 2]> {
    row()?;
    limit()?;
    paired(samples, 1, (name, row), (limit_name, limit))
}

//! The PostgreSQL store's rows, beside SQLite's and the ct-toolkit seed's figures
//! (PostgreSQL 18.6 over TCP through Docker Desktop: 1.12 ms per write, 20,000 writes in
//! 28.8 s, a full verification 320 ms per 20,000 entries).
//!
//! Runs against `ATTEST_BENCH_PG` (default `postgres://postgres@127.0.0.1:5432`), in a
//! database of its own that it drops after; without a server the rows are left out and
//! a fact says why.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use attest_ledger::{Ledger, LedgerOptions};

use crate::measure::{bulk, flat, once, per_call, Row};
use crate::scenarios::record;

/// A database for the run, dropped on the way out.
pub(crate) struct Database {
    admin: String,
    name: String,
    pub(crate) url: String,
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

pub(crate) fn database() -> Option<Database> {
    let server = std::env::var("ATTEST_BENCH_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let admin = format!("{server}/test");
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).ok()?;
    let name = format!("attest_bench_{}", std::process::id());
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .ok()?;
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .ok()?;
    Some(Database {
        url: format!("{server}/{name}"),
        admin,
        name,
    })
}

fn open(url: &str, tenant: Option<&str>) -> anyhow::Result<Ledger> {
    Ok(Ledger::open(
        url,
        LedgerOptions {
            tenant: tenant.map(str::to_owned),
            ..LedgerOptions::default()
        },
    )?)
}

/// The rows: one-at-a-time append, 64 concurrent tasks, 4 processes, 4 tenants in
/// parallel, and full verifies of `bulk_rows` and `big_rows` rows (all at `full`).
pub(crate) fn rows(
    samples: usize,
    bulk_rows: usize,
    big_rows: usize,
    per_task: usize,
    process_actions: u64,
    facts: &mut Vec<(String, String)>,
) -> anyhow::Result<Vec<Row>> {
    facts.push((
        "ct-toolkit seed, PostgreSQL 18.6 over TCP (Docker Desktop)".to_owned(),
        "1.12 ms per write; 20,000 writes in 28.8 s; full verify 320 ms per 20,000".to_owned(),
    ));
    let Some(db) = database() else {
        facts.push((
            "postgres rows".to_owned(),
            "left out: no PostgreSQL at ATTEST_BENCH_PG / 127.0.0.1:5432".to_owned(),
        ));
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();

    let ledger = open(&db.url, Some("one"))?;
    let mut n = 0;
    rows.push(per_call(
        "postgres: ledger append, one row (full)",
        samples.min(500),
        || {
            n += 1;
            ledger.append(&record(n))?;
            Ok(())
        },
    )?);

    // 64 threads on one ledger: group commit makes a statement of whatever is queued.
    let shared = Arc::new(open(&db.url, Some("tasks"))?);
    let start = Instant::now();
    let handles: Vec<_> = (0..64u64)
        .map(|t| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || -> anyhow::Result<()> {
                for i in 0..per_task as u64 {
                    shared.append(&record(t * 1_000_000 + i))?;
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("an append thread panicked"))??;
    }
    let total = 64 * per_task;
    rows.push(flat(
        "postgres: 64 concurrent tasks append (full), per append",
        total,
        start.elapsed().as_nanos() as f64 / total as f64,
    ));

    // 4 processes, each its own pool, whole actions (intent + outcome rows) at `full`.
    drop(open(&db.url, None)?);
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .arg("--worker")
                .arg(&db.url)
                .arg(process_actions.to_string())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for mut child in children {
        anyhow::ensure!(child.wait()?.success(), "a worker process failed");
    }
    let actions = 4 * process_actions as usize;
    rows.push(flat(
        "postgres: 4 processes, whole actions (full), per action",
        actions,
        start.elapsed().as_nanos() as f64 / actions as f64,
    ));
    let report = open(&db.url, None)?.verify()?;
    anyhow::ensure!(
        report.is_intact() && report.checked == 2 * actions as u64,
        "the processes broke the chain ({} rows)",
        report.checked
    );

    // 4 tenants, one writer each, one row at a time: throughput grows with tenants.
    let start = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let url = db.url.clone();
            std::thread::spawn(move || -> anyhow::Result<()> {
                let ledger = open(&url, Some(&format!("tenant{t}")))?;
                for i in 0..per_task as u64 {
                    ledger.append(&record(i))?;
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .map_err(|_| anyhow::anyhow!("a tenant thread panicked"))??;
    }
    let total = 4 * per_task;
    rows.push(flat(
        "postgres: 4 tenants in parallel, one row at a time each (full), per append",
        total,
        start.elapsed().as_nanos() as f64 / total as f64,
    ));

    let bulk_ledger = open(&db.url, Some("bulk"))?;
    let records: Vec<_> = (0..bulk_rows as u64).map(record).collect();
    for chunk in records.chunks(1000) {
        bulk_ledger.append_batch(chunk)?;
    }
    rows.push(once(
        &format!("postgres: full verify of {bulk_rows} rows"),
        || {
            let report = bulk_ledger.verify()?;
            anyhow::ensure!(report.is_intact(), "benchmark ledger is broken");
            Ok(())
        },
    )?);

    // The seed's scale for a ledger that is never done being checked: filled in batches
    // of 10,000 (one statement each), then verified whole.
    let big = open(&db.url, Some("big"))?;
    let batch = 10_000u64;
    rows.push(bulk(
        &format!("postgres: {big_rows} appends in batches of {batch} (full), per append"),
        big_rows,
        || {
            let mut next = 0u64;
            while next < big_rows as u64 {
                let end = (next + batch).min(big_rows as u64);
                let records: Vec<_> = (next..end).map(record).collect();
                big.append_batch(&records)?;
                next = end;
            }
            Ok(())
        },
    )?);
    rows.push(once(
        &format!("postgres: full verify of {big_rows} rows"),
        || {
            let report = big.verify()?;
            anyhow::ensure!(
                report.is_intact() && report.checked == big_rows as u64,
                "benchmark ledger is broken"
            );
            Ok(())
        },
    )?);
    Ok(rows)
}

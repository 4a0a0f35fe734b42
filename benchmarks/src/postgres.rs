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

use attest_core::Attest;
use attest_ledger::{canonical_bytes, Ledger, LedgerOptions};
use attest_policy::PolicyEngine;

use crate::measure::{bulk, flat, once, paired, timing, Row, PAIR_CHUNK};
use crate::scenarios::{record, Breadth, Scale};
use crate::targets::names;

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
/// parallel, and full verifies of `bulk_rows` and `big_rows` rows (all at `full`), and
/// their limit rows; with [`Breadth::Targets`], only the rows issue 27's targets are
/// scored on (the append, 64 concurrent tasks, batched appends) and their limits.
pub(crate) fn rows(
    scale: &Scale,
    breadth: Breadth,
    facts: &mut Vec<(String, String)>,
) -> anyhow::Result<Vec<Row>> {
    let samples = scale.samples;
    let bulk_rows = scale.bulk_rows;
    let big_rows = scale.big_rows;
    let per_task = scale.per_task;
    let process_actions = scale.process_actions;
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
    let mut append = timing(crate::scenarios::appending(&ledger));
    let mut bare = BareEntries::create(&db.url, "bare_one")?;
    let mut insert = timing(|| bare.insert_one());
    rows.extend(paired(
        samples.min(500),
        PAIR_CHUNK,
        (names::PG_APPEND, &mut append),
        (names::PG_BARE_INSERT, &mut insert),
    )?);

    // 64 tasks on one ledger, each a whole action (intent + outcome rows) at a time:
    // group commit makes a statement of whatever is queued.
    let runtime = crate::scenarios::runtime()?;
    let attest = Attest::builder()
        .ledger(open(&db.url, Some("tasks"))?)
        .policy(PolicyEngine::default_policy()?)
        .build()?;
    let mut grouped = BareEntries::create(&db.url, "bare_group")?;
    rows.extend(crate::scenarios::paired_group_commit(
        &runtime,
        &attest,
        per_task,
        (names::PG_TASKS_64, names::PG_GROUP_COMMIT),
        &mut |rows| grouped.insert_many(rows),
    )?);
    drop(attest);

    if breadth == Breadth::Targets {
        rows.extend(batched(&db, big_rows)?);
        return Ok(rows);
    }

    // 64 threads on one ledger, one append at a time each: group commit makes a
    // statement of whatever is queued.
    let shared = Arc::new(open(&db.url, Some("threads"))?);
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
    rows.extend(batched(&db, big_rows)?);
    let big = open(&db.url, Some("big"))?;
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

/// Rows per batched statement, in the ledger's batched appends and in their limit row.
const BATCH: usize = 10_000;

/// `big_rows` appends in batches of [`BATCH`] into tenant `big`, and the bare multi-row
/// INSERT of as many rows in the same batches.
fn batched(db: &Database, big_rows: usize) -> anyhow::Result<Vec<Row>> {
    let big = open(&db.url, Some("big"))?;
    let ledger = bulk(&names::pg_batched(big_rows), big_rows, || {
        let mut next = 0u64;
        while next < big_rows as u64 {
            let end = (next + BATCH as u64).min(big_rows as u64);
            let records: Vec<_> = (next..end).map(record).collect();
            big.append_batch(&records)?;
            next = end;
        }
        Ok(())
    })?;
    let mut bare = BareEntries::create(&db.url, "bare_batched")?;
    let limit = bulk(&names::pg_bare_batched(big_rows), big_rows, || {
        in_batches(big_rows, |rows| bare.insert_many(rows))
    })?;
    let mut floor_table = BareEntries::create(&db.url, "floor_batched")?;
    let floor = bulk(&names::pg_batched_floor(big_rows), big_rows, || {
        in_batches(big_rows, |rows| floor_table.insert_many_with_tree(rows))
    })?;
    Ok(vec![ledger, limit, floor])
}

/// `total` rows handed to `insert` [`BATCH`] at a time (the last batch the rest).
fn in_batches(
    total: usize,
    mut insert: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut left = total;
    while left > 0 {
        let rows = left.min(BATCH);
        insert(rows)?;
        left -= rows;
    }
    Ok(())
}

/// The floor under a PostgreSQL append: the same entry row (the ledger's `entries`
/// columns, the same body) into a table with only the primary key, by a prepared
/// statement, each statement its own synced commit (autocommit); no tree rows, counters,
/// indexes, hashing or JSON.
struct BareEntries {
    client: postgres::Client,
    one: postgres::Statement,
    many: postgres::Statement,
    /// `many`, and in the same statement the rows' stored tree hashes and an
    /// action-id lookup row each (see [`BareEntries::insert_many_with_tree`]).
    many_with_tree: postgres::Statement,
    seq: i64,
    /// Tree hashes written so far (their next index).
    idx: i64,
    body: Vec<u8>,
    row: attest_ledger::Record,
}

impl BareEntries {
    fn create(url: &str, table: &str) -> anyhow::Result<BareEntries> {
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        client.batch_execute(&format!(
            "CREATE TABLE {table} (
                tenant TEXT NOT NULL, seq BIGINT NOT NULL, hash BYTEA NOT NULL, ts TEXT NOT NULL,
                system TEXT NOT NULL, verb TEXT NOT NULL, agent TEXT, decision TEXT NOT NULL,
                level TEXT, run TEXT, action_id TEXT, body BYTEA NOT NULL,
                PRIMARY KEY (tenant, seq));
             CREATE TABLE {table}_tree (tenant TEXT NOT NULL, idx BIGINT NOT NULL,
                hash BYTEA NOT NULL, PRIMARY KEY (tenant, idx));
             CREATE TABLE {table}_lookups (tenant TEXT NOT NULL, key TEXT NOT NULL,
                seq BIGINT NOT NULL, PRIMARY KEY (tenant, key, seq))"
        ))?;
        let columns =
            "tenant, seq, hash, ts, system, verb, agent, decision, level, run, action_id, body";
        let one = client.prepare(&format!(
            "INSERT INTO {table} ({columns}) VALUES ('bare', $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ))?;
        // One statement for many rows: the arrays unnested side by side.
        let many = client.prepare(&format!(
            "INSERT INTO {table} ({columns}) SELECT 'bare', * FROM unnest($1::bigint[], $2::bytea[],
                $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                $10::text[], $11::bytea[])"
        ))?;
        let many_with_tree = client.prepare(&format!(
            "WITH entries AS (
                 INSERT INTO {table} ({columns}) SELECT 'bare', * FROM unnest($1::bigint[],
                     $2::bytea[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::text[], $11::bytea[])),
             tree AS (
                 INSERT INTO {table}_tree (tenant, idx, hash)
                 SELECT 'bare', * FROM unnest($12::bigint[], $13::bytea[]))
             INSERT INTO {table}_lookups (tenant, key, seq)
             SELECT 'bare', 'action_id:' || action_id, seq FROM unnest($10::text[], $1::bigint[])
                 AS ids (action_id, seq)"
        ))?;
        let row = record(1);
        Ok(BareEntries {
            client,
            one,
            many,
            many_with_tree,
            seq: 0,
            idx: 0,
            body: canonical_bytes(&row)?,
            row,
        })
    }

    const TS: &'static str = "2026-12-01T06:00:00.000000Z";

    /// One row: one round trip, one commit.
    fn insert_one(&mut self) -> anyhow::Result<()> {
        self.seq += 1;
        let r = &self.row;
        let level = r.verification.as_ref().map(|v| v.level.as_str());
        let action_id = format!("{:012}", self.seq);
        self.client.execute(
            &self.one,
            &[
                &self.seq,
                &&[7u8; 32][..],
                &Self::TS,
                &r.system,
                &r.verb,
                &r.agent,
                &r.decision,
                &level,
                &r.run_id,
                &action_id,
                &self.body,
            ],
        )?;
        Ok(())
    }

    /// The floor under a batched append: `rows` rows in one statement as
    /// [`BareEntries::insert_many`] writes them, with what the format and the design
    /// store beside them, in the same statement: the tree hashes the leaves complete
    /// (`1 + trailing zeros` of each leaf's number, as the ledger stores them for
    /// proofs) and one action-id lookup row per entry (an outcome finds its intent by
    /// action id). No run lookups, counters, hashing or JSON.
    fn insert_many_with_tree(&mut self, rows: usize) -> anyhow::Result<()> {
        let first = self.seq + 1;
        let hashes: i64 = (first..first + rows as i64)
            .map(|leaf| 1 + i64::from(leaf.trailing_zeros()))
            .sum();
        let indexes: Vec<i64> = (self.idx..self.idx + hashes).collect();
        self.idx += hashes;
        let tree_hashes = vec![&[9u8; 32][..]; indexes.len()];
        let statement = self.many_with_tree.clone();
        self.insert_many_by(&statement, rows, &[&indexes, &tree_hashes])
    }

    /// `rows` rows in one statement: one round trip, one commit.
    fn insert_many(&mut self, rows: usize) -> anyhow::Result<()> {
        let statement = self.many.clone();
        self.insert_many_by(&statement, rows, &[])
    }

    /// `rows` rows by `statement`: the eleven entry columns as arrays, then `extra`.
    fn insert_many_by(
        &mut self,
        statement: &postgres::Statement,
        rows: usize,
        extra: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> anyhow::Result<()> {
        let seqs: Vec<i64> = (self.seq + 1..=self.seq + rows as i64).collect();
        self.seq += rows as i64;
        let r = &self.row;
        let level = r.verification.as_ref().map(|v| v.level.as_str());
        let action_ids: Vec<String> = seqs.iter().map(|seq| format!("{seq:012}")).collect();
        let columns: [&(dyn postgres::types::ToSql + Sync); 11] = [
            &seqs,
            &vec![&[7u8; 32][..]; rows],
            &vec![Self::TS; rows],
            &vec![r.system.as_str(); rows],
            &vec![r.verb.as_str(); rows],
            &vec![r.agent.as_deref(); rows],
            &vec![r.decision.as_str(); rows],
            &vec![level; rows],
            &vec![r.run_id.as_deref(); rows],
            &action_ids,
            &vec![self.body.as_slice(); rows],
        ];
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
            columns.iter().chain(extra).copied().collect();
        self.client.execute(statement, &params)?;
        Ok(())
    }
}

//! The dashboard's poll at 1,000,000 rows: `attest serve` on a ledger of mixed rows
//! (eight systems, act/ask/refuse, some unverified and failed, runs of 50, spread over
//! two weeks), polled over HTTP on loopback with one keep-alive connection, as the page
//! polls. A miss is a poll after one new row (the read model folds it in, the answer is
//! rebuilt); a hit is a poll with nothing new (one tip lookup, a cached answer).
//!
//! The seed's figures (ct-toolkit, 20,000 entries, in-process without HTTP): telemetry
//! 10.2 ms on a miss, 0.00 ms on a hit; a tool-call page 0.21 ms miss, 0.05 ms hit.
//!
//! `attest serve` does not run on a PostgreSQL ledger yet (its approval store is SQLite),
//! so both stores are also measured in-process, without HTTP: what a miss reads from the
//! store (the counters, and a keyset page of 50 refused rows with their bodies), on the
//! same rows copied into PostgreSQL.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use attest_ledger::{
    Clock, Durability, Execution, Filter, Ledger, LedgerOptions, Record, Verification,
};

use crate::mcp_proxy::attest_binary;
use crate::measure::{once, per_call, Row};

const SYSTEMS: [&str; 8] = [
    "gmail", "hubspot", "stripe", "slack", "github", "notion", "jira", "drive",
];

/// A clock that spreads rows evenly over the two weeks before it was made.
struct Spread {
    start: SystemTime,
    step: Duration,
    n: AtomicU64,
}

impl Clock for Spread {
    fn now(&self) -> SystemTime {
        let n = self.n.fetch_add(1, Ordering::Relaxed);
        self.start + self.step * u32::try_from(n).unwrap_or(u32::MAX)
    }
}

fn record(n: u64) -> Record {
    let system = SYSTEMS[(n % 8) as usize];
    let (decision, status, level) = match n % 100 {
        0 => ("refuse", "not_run", None),
        1..=4 => ("ask", "ok", Some("verified")),
        5 => ("act", "failed", None),
        6 => ("act", "ok", Some("unverified")),
        7..=40 => ("act", "ok", Some("verified")),
        _ => ("act", "ok", Some("acknowledged")),
    };
    Record {
        action_id: format!("dash-{n:012}"),
        call: None,
        result_ids: Vec::new(),
        run_id: Some(format!("run-{}", n / 50)),
        agent: Some(format!("agent-{}", n % 5)),
        agent_auth: None,
        actor: None,
        owner: None,
        system: system.into(),
        verb: if n.is_multiple_of(3) {
            "send"
        } else {
            "update"
        }
        .into(),
        target: Some("deal/8812".into()),
        target_class: if n.is_multiple_of(10) {
            "external"
        } else {
            "internal"
        }
        .into(),
        source: "manual".into(),
        decision: decision.into(),
        tier: "medium".into(),
        reasons: vec![],
        rules_fired: vec!["R4".into()],
        params_hash: "cd032eb5b66aff46fe6aaa19a6c4718edbe4556bc175bed952be8ef2c479621e".into(),
        params_preview: serde_json::Map::new(),
        confirm: None,
        execution: Execution {
            status: status.into(),
            result_hash: None,
            error_hash: None,
        },
        verification: level.map(|level| Verification {
            level: level.into(),
            method: "ack".into(),
            matched: None,
            evidence: serde_json::Map::new(),
        }),
        idempotency_key: None,
        replay_of: None,
        imported: None,
        shadow: None,
        grant: None,
        sealed: None,
        erasure: None,
    }
}

/// The candidate `attest policy replay` is timed with: a rule per kind of row, one that
/// needs params the rows do not keep (undecidable on every stripe row), R4 for the rest.
const REPLAY_CANDIDATE: &str = "version: 1
policies:
  - name: big-payments
    match: {system: stripe, params: {/amount: {gt: 100}}}
    decision: ask
    reason: payments over 100 ask
  - name: external-asks
    match: {target: external}
    decision: ask
    reason: anything reaching outside asks
  - name: crm-updates-act
    match: {system: [hubspot, notion, jira], verb: update}
    decision: act
    reason: CRM updates act
";

/// One whole replay of [`REPLAY_CANDIDATE`] over the ledger at `path` (SQLite), with its
/// transitions as facts.
fn replay_row(path: &Path, rows: usize, facts: &mut Vec<(String, String)>) -> anyhow::Result<Row> {
    let candidate = attest_policy::PolicyEngine::from_yaml(REPLAY_CANDIDATE, "candidate.yaml")?;
    let ledger = Ledger::open_read_only(path)?;
    let scope = attest_core::replay::ReplayScope::default();
    let mut report = None;
    let row = once(
        &format!("policy replay: a candidate over {rows} rows (one pass, SQLite)"),
        || {
            report = Some(attest_core::replay::replay(
                &ledger,
                &candidate,
                &scope,
                &mut |_| {},
            )?);
            Ok(())
        },
    )?;
    if let Some(report) = report {
        let changed: u64 = report.transitions.iter().map(|t| t.count).sum();
        let undecided: u64 = report.undecidable.iter().map(|u| u.count).sum();
        facts.push((
            format!("policy replay at {rows} rows"),
            format!(
                "{} actions: {} unchanged, {changed} change ({} transitions), {undecided} undecidable",
                report.actions,
                report.unchanged,
                report.transitions.len()
            ),
        ));
    }
    Ok(row)
}

/// `attest serve` on a ledger, killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One keep-alive HTTP/1.1 connection with a bearer token.
struct Client {
    reader: BufReader<TcpStream>,
    host: String,
    token: String,
}

impl Client {
    fn get(&mut self, path: &str) -> anyhow::Result<Vec<u8>> {
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\n\r\n",
            self.host, self.token
        );
        self.reader.get_mut().write_all(request.as_bytes())?;
        let mut status = String::new();
        self.reader.read_line(&mut status)?;
        anyhow::ensure!(status.starts_with("HTTP/1.1 200"), "{path}: {status}");
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line)?;
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse()?;
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body)?;
        Ok(body)
    }
}

/// The dashboard rows at `rows` rows.
pub(crate) fn rows(
    dir: &Path,
    rows: usize,
    samples: usize,
    facts: &mut Vec<(String, String)>,
) -> anyhow::Result<Vec<Row>> {
    let attest = attest_binary()?;
    let path = dir.join("dashboard.sqlite");
    let span = Duration::from_secs(14 * 86_400);
    let clock = Arc::new(Spread {
        start: SystemTime::now() - span,
        step: span / u32::try_from(rows.max(1)).unwrap_or(u32::MAX),
        n: AtomicU64::new(0),
    });
    {
        let ledger = Ledger::open(
            &path,
            LedgerOptions {
                durability: Durability::Off,
                clock,
                create: true,
                ..LedgerOptions::default()
            },
        )?;
        let mut next = 0u64;
        while next < rows as u64 {
            let batch: Vec<Record> = (next..(next + 10_000).min(rows as u64))
                .map(record)
                .collect();
            ledger.append_batch(&batch)?;
            next += batch.len() as u64;
        }
    }
    let ledger_arg = path.display().to_string();
    let added = Command::new(&attest)
        .args([
            "--ledger",
            &ledger_arg,
            "approvers",
            "add",
            "bench@acme.example",
            "--json",
        ])
        .output()?;
    anyhow::ensure!(
        added.status.success(),
        "approvers add: {}",
        String::from_utf8_lossy(&added.stderr)
    );
    let token = serde_json::from_slice::<serde_json::Value>(&added.stdout)?["token"]
        .as_str()
        .context("no token")?
        .to_owned();
    let mut child = Command::new(&attest)
        .args(["--ledger", &ledger_arg, "serve", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
    let serve = Serve(child);
    let host = line
        .trim()
        .strip_prefix("attest: approval inbox on http://")
        .context("unexpected first line")?
        .trim_end_matches('/')
        .to_owned();
    let stream = TcpStream::connect(&host)?;
    stream.set_nodelay(true)?;
    let mut client = Client {
        reader: BufReader::new(stream),
        host,
        token,
    };
    let summary = "/api/review/summary?hours=48";
    let page = "/api/review/lists/refused?limit=50";
    let mut out = Vec::new();
    out.push(once(
        &format!("dashboard: first poll at {rows} rows, after start (counters; bodies folded in the background)"),
        || client.get(summary).map(drop),
    )?);
    // Let the background verifier's first whole pass and the body fold finish before
    // timing polls (answers that read the fold are cached once it reaches the tip).
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let mut folded = false;
    loop {
        let chain: serde_json::Value = serde_json::from_slice(&client.get("/api/review/chain")?)?;
        let polled: serde_json::Value = serde_json::from_slice(&client.get(summary)?)?;
        if !folded && polled["folded_through"] == polled["generation"] {
            folded = true;
            facts.push((
                format!("dashboard: background fold of {rows} rows' bodies (rejected, failed, held, intents, runs)"),
                format!("done within {} ms of the first poll", started.elapsed().as_millis()),
            ));
        }
        if folded && chain["last_full_pass"].is_string() {
            facts.push((
                format!("background verifier: whole pass at {rows} rows"),
                format!("{} ms", chain["last_full_ms"]),
            ));
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "no full verify pass");
        std::thread::sleep(Duration::from_millis(100));
    }
    client.get(page)?;
    out.push(per_call(
        &format!("dashboard poll at {rows} rows, cache hit (HTTP)"),
        samples,
        || client.get(summary).map(drop),
    )?);
    out.push(per_call(
        &format!("dashboard list page at {rows} rows, cache hit (HTTP)"),
        samples,
        || client.get(page).map(drop),
    )?);
    // Misses: one new row (appended by this process, not timed) before each poll.
    let writer = Ledger::open(
        &path,
        LedgerOptions {
            durability: Durability::Off,
            ..LedgerOptions::default()
        },
    )?;
    let mut n = rows as u64;
    let mut times = Vec::with_capacity(samples);
    let mut page_times = Vec::with_capacity(samples);
    for _ in 0..samples.min(300) {
        writer.append(&record(n))?;
        n += 1;
        let start = Instant::now();
        client.get(summary)?;
        times.push(start.elapsed().as_nanos() as f64);
        writer.append(&record(n * 100))?;
        n += 1;
        let start = Instant::now();
        client.get(page)?;
        page_times.push(start.elapsed().as_nanos() as f64);
    }
    out.push(crate::measure::from_times(
        &format!("dashboard poll at {rows} rows, cache miss: one new row (HTTP)"),
        times,
    ));
    out.push(crate::measure::from_times(
        &format!("dashboard list page at {rows} rows, cache miss: one new row (HTTP)"),
        page_times,
    ));
    let round_trip = per_call(
        "limit: HTTP round trip on loopback (GET /healthz, keep-alive)",
        samples,
        || client.get("/healthz").map(drop),
    )?;
    out.push(round_trip);
    drop(serve);
    out.extend(store_reads(
        "sqlite",
        &Ledger::open_read_only(&path)?,
        rows,
        samples,
    )?);
    out.push(replay_row(&path, rows, facts)?);
    match crate::postgres::database() {
        Some(db) => {
            let pg = Ledger::open(
                &db.url,
                LedgerOptions {
                    create: true,
                    ..LedgerOptions::default()
                },
            )?;
            let start = Instant::now();
            let copied = Ledger::open_read_only(&path)?.copy_to(&pg)?;
            facts.push((
                format!("postgres: {copied} rows copied in for the dashboard's reads"),
                format!("{:.1} s", start.elapsed().as_secs_f64()),
            ));
            // Statistics, as autovacuum gathers them after a bulk load: without them the
            // planner scans the whole tenant for a keyset page instead of walking the key.
            postgres::Client::connect(&db.url, postgres::NoTls)?.batch_execute("ANALYZE")?;
            out.extend(store_reads("postgres", &pg, rows, samples)?);
        }
        None => facts.push((
            "dashboard: postgres rows".to_owned(),
            "left out: no PostgreSQL at ATTEST_BENCH_PG / 127.0.0.1:5432".to_owned(),
        )),
    }
    Ok(out)
}

/// What a dashboard miss reads from `ledger`, in-process: the counters (the summary),
/// and a keyset page of 50 refused rows with their bodies (a list page).
fn store_reads(
    store: &str,
    ledger: &Ledger,
    rows: usize,
    samples: usize,
) -> anyhow::Result<Vec<Row>> {
    let counters = per_call(
        &format!("dashboard summary's read at {rows} rows, {store}: the counters (in-process)"),
        samples,
        || ledger.counts().map(drop).map_err(Into::into),
    )?;
    let refused = Filter {
        decision: Some("refuse".to_owned()),
        ..Filter::default()
    };
    let page = per_call(
        &format!("dashboard list page's reads at {rows} rows, {store}: 50 refused by keyset + their bodies (in-process)"),
        samples,
        || {
            let seqs: Vec<u64> = ledger.list_filtered(&refused, 50)?.iter().map(|r| r.seq).collect();
            let mut bodies = 0usize;
            ledger.for_each_row_at(&seqs, |row| {
                bodies += row.body.len();
                Ok(())
            })?;
            anyhow::ensure!(seqs.len() == 50 && bodies > 0, "a short page");
            Ok(())
        },
    )?;
    Ok(vec![counters, page])
}

//! The background verifier `attest serve` runs: new entries every few seconds, the
//! whole chain on an interval, both in keyset batches of [`BATCH`] rows on a read-only
//! connection of its own, so writers are never blocked (a WAL reader does not hold the
//! write lock, and no read transaction outlives a batch).
//!
//! It checks what a row can tell: seq order without gaps, each `prev` against the
//! previous body's hash, each stored hash against its body, and the indexed columns
//! against the body ([`attest_ledger::ChainChecker`], the same checks `attest verify`
//! runs row by row). Checkpoint roots and signatures stay with `attest verify`.
//!
//! A broken chain is kept (first broken seq, what, when), shown on the dashboard, makes
//! `/healthz` answer 503, and is handed once to the [`super::alerts::Alerts`] hook.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use attest_ledger::{from_hex, ChainChecker, Hash, Ledger, LedgerError};
use serde::Serialize;

use super::alerts::{Alert, Alerts};

/// Rows per batch.
pub const BATCH: usize = 2_000;

/// What `attest serve` runs on a schedule: the verifier, and the digest.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// Between checks of new entries.
    pub incremental: Duration,
    /// Between passes over the whole chain.
    pub full: Duration,
    /// Between digests sent through the notifiers (none when not set).
    pub digest: Option<Duration>,
    /// How much history a scheduled digest compares with.
    pub digest_baseline: Duration,
}

/// What the verifier knows of the chain.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChainStatus {
    /// When the last whole pass finished.
    pub(crate) last_full_pass: Option<String>,
    /// Rows the last whole pass checked.
    pub(crate) last_full_rows: u64,
    /// How long it took, in milliseconds.
    pub(crate) last_full_ms: u64,
    /// When new entries were last checked.
    pub(crate) last_incremental_check: Option<String>,
    /// The newest seq checked so far.
    pub(crate) checked_through: u64,
    /// The first broken seq, once one is found (it stays until `attest serve` restarts).
    pub(crate) first_broken_seq: Option<u64>,
    /// What is wrong there.
    pub(crate) problem: Option<String>,
    /// A check that could not run (I/O), which is not a broken chain.
    pub(crate) error: Option<String>,
}

impl ChainStatus {
    /// Whether the chain is known to be broken.
    pub fn broken(&self) -> bool {
        self.first_broken_seq.is_some()
    }
}

/// The verifier: its status, shared with the dashboard and `/healthz`.
pub struct Verifier {
    ledger: Arc<Ledger>,
    status: Mutex<ChainStatus>,
    /// Where incremental checks resume: the last checked seq and its hash.
    resume: Mutex<Option<(u64, Hash)>>,
    alerts: Alerts,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier").finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier over `ledger` (a read-only connection of its own).
    pub fn new(ledger: Arc<Ledger>, alerts: Alerts) -> Verifier {
        Verifier {
            ledger,
            status: Mutex::new(ChainStatus::default()),
            resume: Mutex::new(None),
            alerts,
        }
    }

    /// The status now.
    pub fn status(&self) -> ChainStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, change: impl FnOnce(&mut ChainStatus)) {
        change(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Checks the rows after the last one checked (all of them the first time).
    pub fn check_new(&self) -> Result<u64, LedgerError> {
        let start = *self.resume.lock().unwrap_or_else(PoisonError::into_inner);
        let (rows, end) = self.pass(start)?;
        if let Some(end) = end {
            *self.resume.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
        }
        self.update(|s| {
            s.last_incremental_check = Some(now());
            if let Some((seq, _)) = end {
                s.checked_through = s.checked_through.max(seq);
            }
        });
        Ok(rows)
    }

    /// Checks the whole chain from its first stored row.
    pub fn check_all(&self) -> Result<u64, LedgerError> {
        let started = std::time::Instant::now();
        let (rows, end) = self.pass(None)?;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(end) = end {
            // New entries are checked from here on.
            *self.resume.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
        }
        self.update(|s| {
            // A whole pass checks the new entries too.
            s.last_full_pass = Some(now());
            s.last_incremental_check.clone_from(&s.last_full_pass);
            s.last_full_rows = rows;
            s.last_full_ms = ms;
            if let Some((seq, _)) = end {
                s.checked_through = s.checked_through.max(seq);
            }
        });
        Ok(rows)
    }

    /// Walks the chain after `start` (or from the first stored row) in batches; returns
    /// the rows checked and the last row's seq and hash.
    fn pass(&self, start: Option<(u64, Hash)>) -> Result<(u64, Option<(u64, Hash)>), LedgerError> {
        let mut checker: Option<ChainChecker> =
            start.map(|(seq, hash)| ChainChecker::resume_after(seq, hash));
        let mut next = start.map_or(1, |(seq, _)| seq + 1);
        let mut end = start;
        let mut rows = 0u64;
        loop {
            let mut in_batch = 0usize;
            let mut last_seq = None;
            self.ledger.for_each_row(next, |row| {
                let checker = checker.get_or_insert_with(|| first_checker(row.seq, row.body));
                checker.check(row);
                last_seq = Some(row.seq);
                in_batch += 1;
                Ok(in_batch < BATCH)
            })?;
            let Some(seq) = last_seq else { break };
            rows += in_batch as u64;
            if let Some(checker) = &checker {
                end = Some((seq, checker.prev()));
            }
            next = seq + 1;
            if in_batch < BATCH {
                break;
            }
        }
        if let Some(checker) = checker {
            let report = checker.finish();
            if let Some(problem) = report.problems.first() {
                self.broken(problem.seq, problem.detail.clone());
            }
        }
        Ok((rows, end))
    }

    fn broken(&self, seq: u64, detail: String) {
        let mut first = false;
        self.update(|s| {
            if s.first_broken_seq.is_none_or(|known| seq < known) {
                first = s.first_broken_seq.is_none();
                s.first_broken_seq = Some(seq);
                s.problem = Some(detail.clone());
            }
        });
        if first {
            self.alerts.send(&Alert::ChainBroken { seq, detail });
        }
    }

    /// Runs the schedule until the process ends: a whole pass first, then new entries
    /// every `schedule.incremental` and the whole chain every `schedule.full`.
    pub async fn run(self: Arc<Self>, schedule: Schedule) {
        let mut last_full: Option<std::time::Instant> = None;
        loop {
            let full = last_full.is_none_or(|at| at.elapsed() >= schedule.full);
            let me = Arc::clone(&self);
            let done =
                tokio::task::spawn_blocking(
                    move || {
                        if full {
                            me.check_all()
                        } else {
                            me.check_new()
                        }
                    },
                )
                .await;
            match done {
                Ok(Ok(_)) => self.update(|s| s.error = None),
                Ok(Err(err)) => {
                    let text = crate::chain(&err);
                    eprintln!("attest serve: background verify could not run: {text}");
                    self.update(|s| s.error = Some(text));
                }
                Err(err) => self.update(|s| s.error = Some(err.to_string())),
            }
            if full {
                last_full = Some(std::time::Instant::now());
            }
            tokio::time::sleep(schedule.incremental).await;
        }
    }
}

/// A checker for a chain whose first stored row is `seq`: from the zero hash at seq 1;
/// after a prune, from the `prev` the first remaining row names (the prefix that
/// `attest prune` removed was checked before it went; `attest verify` checks the
/// checkpoint that covers it).
fn first_checker(seq: u64, body: &[u8]) -> ChainChecker {
    if seq <= 1 {
        return ChainChecker::default();
    }
    let prev = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("prev").and_then(|p| p.as_str()).and_then(from_hex));
    match prev {
        Some(prev) => ChainChecker::resume_after(seq - 1, prev),
        // An unreadable first row: start as if at seq 1, so the gap is reported.
        None => ChainChecker::default(),
    }
}

fn now() -> String {
    attest_ledger::format_ts(SystemTime::now())
}

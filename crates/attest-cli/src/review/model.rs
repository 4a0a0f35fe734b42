//! The dashboard's read model: counters per hour by decision, level and system, the
//! reviewer's lists and the recent runs, folded in from the ledger one new row at a
//! time (by seq, in bounded batches) and kept in memory.
//!
//! A poll first reads the tip's seq (one primary-key lookup). That seq is the write
//! generation: when it has not moved, nothing is read and cached answers are served.
//! When it has, only the rows after the last one folded in are read, in batches of
//! [`BATCH`] on the model's own read-only connection (WAL readers never block the
//! writer). Memory is bounded: [`HOURS_KEPT`] hours of per-hour counters, the newest
//! [`LIST_KEPT`] seqs of each list, [`RUNS_KEPT`] runs of at most [`RUN_ROWS_KEPT`]
//! rows, and at most [`OPEN_KEPT`] open intents and held requests.
//!
//! Counting at write time instead (a counters table updated in the append's own
//! transaction) belongs to the store; where it exists, [`ReadModel::summary`]'s totals and
//! per-hour figures read it instead of folding rows, and the lists read indexed columns.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use attest_ledger::{Ledger, LedgerError};
use serde::Serialize;
use serde_json::{json, Value};

use super::rows::{unix_secs, RowView};

/// Rows read per batch while catching up.
pub(crate) const BATCH: usize = 2_000;
/// Hours of per-hour counters kept (two weeks).
pub(crate) const HOURS_KEPT: usize = 14 * 24;
/// The newest seqs kept per list.
pub(crate) const LIST_KEPT: usize = 500;
/// Runs kept for the run view (the most recently active).
pub(crate) const RUNS_KEPT: usize = 1_000;
/// Rows kept per run.
pub(crate) const RUN_ROWS_KEPT: usize = 2_000;
/// Open intents and held requests tracked.
pub(crate) const OPEN_KEPT: usize = 10_000;

/// The lists a reviewer works through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ListKind {
    /// Refused by policy.
    Refused,
    /// Asked, and a person rejected it (or nobody answered in time).
    Rejected,
    /// Ran, and the read-back contradicted the result.
    Unverified,
    /// Ran, and the tool failed.
    Failed,
    /// Held for edits (unfilled placeholders) and not yet answered.
    Held,
    /// Recorded as about to run, with no outcome row since.
    Intents,
}

impl ListKind {
    /// Every list, in the order the dashboard shows them.
    pub(crate) const ALL: [ListKind; 6] = [
        ListKind::Refused,
        ListKind::Rejected,
        ListKind::Unverified,
        ListKind::Failed,
        ListKind::Held,
        ListKind::Intents,
    ];

    /// The list's name in URLs and JSON.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ListKind::Refused => "refused",
            ListKind::Rejected => "rejected",
            ListKind::Unverified => "unverified",
            ListKind::Failed => "failed",
            ListKind::Held => "held",
            ListKind::Intents => "intents",
        }
    }

    /// The list named `name`.
    pub(crate) fn parse(name: &str) -> Option<ListKind> {
        ListKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Counts by decision, level and system.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Counts {
    pub(crate) actions: u64,
    pub(crate) decision: BTreeMap<String, u64>,
    pub(crate) level: BTreeMap<String, u64>,
    pub(crate) system: BTreeMap<String, u64>,
}

impl Counts {
    fn add(&mut self, decision: &str, level: &str, system: &str) {
        self.actions += 1;
        bump(&mut self.decision, decision);
        bump(&mut self.level, level);
        bump(&mut self.system, system);
    }
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

/// One action as it is folded in: what the counters and metrics see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Folded<'a> {
    pub(crate) decision: &'a str,
    pub(crate) level: &'a str,
    pub(crate) system: &'a str,
}

/// Called for each action folded in (the metrics' counters).
pub(crate) type FoldHook = Box<dyn Fn(Folded<'_>) + Send + Sync>;

#[derive(Default)]
struct State {
    /// The highest seq folded in.
    seen: u64,
    totals: Counts,
    hours: BTreeMap<u64, Counts>,
    lists: HashMap<ListKind, VecDeque<u64>>,
    list_totals: HashMap<ListKind, u64>,
    /// Open intents and held requests: action id -> seq.
    open: HashMap<ListKind, BTreeMap<String, u64>>,
    runs: HashMap<String, Vec<u64>>,
    /// Runs by last activity, oldest first (may hold stale duplicates).
    run_order: VecDeque<(u64, String)>,
}

/// The read model over one ledger file.
pub(crate) struct ReadModel {
    ledger: Arc<Ledger>,
    state: Mutex<State>,
    hook: Option<FoldHook>,
}

impl std::fmt::Debug for ReadModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadModel").finish_non_exhaustive()
    }
}

/// A row as lists and the run view show it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RowItem {
    pub(crate) seq: u64,
    pub(crate) ts: String,
    pub(crate) hash: String,
    pub(crate) action_id: String,
    pub(crate) agent: Option<String>,
    pub(crate) system: String,
    pub(crate) verb: String,
    pub(crate) target: Option<String>,
    pub(crate) decision: String,
    pub(crate) confirm: String,
    pub(crate) status: String,
    pub(crate) level: String,
}

impl ReadModel {
    /// A model over `ledger` (best a read-only connection of its own); `hook` sees every
    /// action folded in.
    pub(crate) fn new(ledger: Arc<Ledger>, hook: Option<FoldHook>) -> ReadModel {
        ReadModel {
            ledger,
            state: Mutex::new(State::default()),
            hook,
        }
    }

    /// The ledger the model reads.
    pub(crate) fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The write generation: the tip's seq (0 for an empty ledger). One lookup.
    pub(crate) fn generation(&self) -> Result<u64, LedgerError> {
        Ok(self.ledger.tip()?.map_or(0, |(seq, _)| seq))
    }

    /// Folds in every row after the last one seen, up to `generation`; returns how many
    /// rows were read.
    pub(crate) fn catch_up(&self, generation: u64) -> Result<u64, LedgerError> {
        let mut read = 0;
        loop {
            let from = self.lock().seen + 1;
            if from > generation {
                return Ok(read);
            }
            let mut batch = Vec::with_capacity(BATCH);
            self.ledger.for_each_row(from, |row| {
                batch.push((row.seq, row.ts.to_owned(), row.body.to_vec()));
                Ok(batch.len() < BATCH)
            })?;
            if batch.is_empty() {
                // Nothing at or after `from` (pruned away, or a tip that moved back).
                self.lock().seen = generation;
                return Ok(read);
            }
            let mut state = self.lock();
            for (seq, _, body) in &batch {
                if *seq > state.seen {
                    self.fold(&mut state, *seq, body);
                    state.seen = *seq;
                }
            }
            read += batch.len() as u64;
        }
    }

    fn fold(&self, state: &mut State, seq: u64, body: &[u8]) {
        let Some(row) = RowView::parse(body) else {
            return;
        };
        let status = row.status();
        let id = row.action_id.as_ref();
        if let Some(run) = row.run_id.as_deref() {
            remember_run(state, run, seq);
        }
        // A row after a stage closes it.
        for kind in [ListKind::Intents, ListKind::Held] {
            if let Some(open) = state.open.get_mut(&kind) {
                open.remove(id);
            }
        }
        if status == attest_core::INTENT {
            open_item(state, ListKind::Intents, id, seq);
            return;
        }
        if status == "pending" {
            if row.rules_fired.iter().any(|r| r == "R3") {
                open_item(state, ListKind::Held, id, seq);
            }
            return;
        }
        let level = if row.level().is_empty() {
            "none"
        } else {
            row.level()
        };
        state.totals.add(&row.decision, level, &row.system);
        if let Some(at) = row.happened() {
            let hour = unix_secs(at) / 3_600;
            state
                .hours
                .entry(hour)
                .or_default()
                .add(&row.decision, level, &row.system);
            while state.hours.len() > HOURS_KEPT {
                state.hours.pop_first();
            }
        }
        if let Some(hook) = &self.hook {
            hook(Folded {
                decision: &row.decision,
                level,
                system: &row.system,
            });
        }
        let confirm = row.confirm_outcome();
        let kinds = [
            (ListKind::Refused, row.decision == "refuse"),
            (
                ListKind::Rejected,
                confirm == "rejected" || confirm == "expired",
            ),
            (ListKind::Unverified, level == "unverified"),
            (ListKind::Failed, status == "failed"),
        ];
        for (kind, hit) in kinds {
            if hit {
                *state.list_totals.entry(kind).or_default() += 1;
                let list = state.lists.entry(kind).or_default();
                list.push_back(seq);
                if list.len() > LIST_KEPT {
                    list.pop_front();
                }
            }
        }
    }

    /// The counters: totals, the last `hours` hours (up to the newest), list sizes.
    pub(crate) fn summary(&self, hours: usize, now: SystemTime) -> Value {
        let state = self.lock();
        let newest = unix_secs(now) / 3_600;
        let first = newest.saturating_sub(hours.min(HOURS_KEPT) as u64 - 1);
        let per_hour: Vec<Value> = (first..=newest)
            .map(|hour| {
                let counts = state.hours.get(&hour).cloned().unwrap_or_default();
                json!({
                    "hour": attest_ledger::format_ts(
                        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(hour * 3_600)
                    ),
                    "counts": counts,
                })
            })
            .collect();
        let lists: BTreeMap<&str, u64> = ListKind::ALL
            .iter()
            .map(|&kind| (kind.as_str(), list_total(&state, kind)))
            .collect();
        json!({
            "seen": state.seen,
            "totals": state.totals,
            "hours": per_hour,
            "lists": lists,
            "runs": state.runs.len(),
        })
    }

    /// The seqs of list `kind`, newest first, below `before` (keyset), at most `limit`;
    /// and the list's total.
    pub(crate) fn list_page(
        &self,
        kind: ListKind,
        before: Option<u64>,
        limit: usize,
    ) -> (Vec<u64>, u64) {
        let state = self.lock();
        let below = |seq: &u64| before.is_none_or(|b| *seq < b);
        let seqs: Vec<u64> = match kind {
            ListKind::Intents | ListKind::Held => {
                let mut seqs: Vec<u64> = state
                    .open
                    .get(&kind)
                    .map(|m| m.values().copied().filter(below).collect())
                    .unwrap_or_default();
                seqs.sort_unstable_by(|a, b| b.cmp(a));
                seqs.truncate(limit);
                seqs
            }
            _ => state
                .lists
                .get(&kind)
                .map(|l| l.iter().rev().copied().filter(below).take(limit).collect())
                .unwrap_or_default(),
        };
        (seqs, list_total(&state, kind))
    }

    /// The seqs of run `run`, in order, if the model keeps it.
    pub(crate) fn run(&self, run: &str) -> Option<Vec<u64>> {
        self.lock().runs.get(run).cloned()
    }

    /// The newest runs, most recently active first, at most `limit`.
    pub(crate) fn recent_runs(&self, limit: usize) -> Vec<(String, usize)> {
        let state = self.lock();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (_, run) in state.run_order.iter().rev() {
            if out.len() >= limit {
                break;
            }
            if seen.insert(run.as_str()) {
                if let Some(rows) = state.runs.get(run) {
                    out.push((run.clone(), rows.len()));
                }
            }
        }
        out
    }

    /// The rows at `seqs` (point reads by primary key), in the order given.
    pub(crate) fn rows(&self, seqs: &[u64]) -> Result<Vec<RowItem>, LedgerError> {
        let mut out = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            let mut item = None;
            self.ledger.for_each_row(seq, |row| {
                if row.seq == seq {
                    item = RowView::parse(row.body).map(|view| RowItem {
                        seq,
                        ts: row.ts.to_owned(),
                        hash: attest_ledger::to_hex(&attest_ledger::entry_hash(row.body)),
                        action_id: view.action_id.to_string(),
                        agent: view.agent.as_deref().map(str::to_owned),
                        system: view.system.to_string(),
                        verb: view.verb.to_string(),
                        target: view.target.as_deref().map(str::to_owned),
                        decision: view.decision.to_string(),
                        confirm: view.confirm_outcome().to_owned(),
                        status: view.status().to_owned(),
                        level: view.level().to_owned(),
                    });
                }
                Ok(false)
            })?;
            out.extend(item);
        }
        Ok(out)
    }
}

fn list_total(state: &State, kind: ListKind) -> u64 {
    match kind {
        ListKind::Intents | ListKind::Held => state.open.get(&kind).map_or(0, |m| m.len() as u64),
        _ => state.list_totals.get(&kind).copied().unwrap_or(0),
    }
}

fn open_item(state: &mut State, kind: ListKind, id: &str, seq: u64) {
    let open = state.open.entry(kind).or_default();
    open.insert(id.to_owned(), seq);
    if open.len() > OPEN_KEPT {
        // The oldest open item goes first (it is still in the ledger; `attest ledger`
        // lists every open intent).
        if let Some(oldest) = open.iter().min_by_key(|(_, s)| **s).map(|(k, _)| k.clone()) {
            open.remove(&oldest);
        }
    }
}

fn remember_run(state: &mut State, run: &str, seq: u64) {
    match state.runs.get_mut(run) {
        Some(rows) => {
            if rows.len() < RUN_ROWS_KEPT {
                rows.push(seq);
            }
        }
        None => {
            state.runs.insert(run.to_owned(), vec![seq]);
        }
    }
    state.run_order.push_back((seq, run.to_owned()));
    // Forget the least recently active runs; stale order entries are skipped.
    while state.runs.len() > RUNS_KEPT || state.run_order.len() > RUNS_KEPT * 4 {
        let Some((at, oldest)) = state.run_order.pop_front() else {
            break;
        };
        let last = state.runs.get(&oldest).and_then(|r| r.last().copied());
        if last == Some(at) && state.runs.len() > RUNS_KEPT {
            state.runs.remove(&oldest);
        }
    }
}

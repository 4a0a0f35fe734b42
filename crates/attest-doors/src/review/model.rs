//! The dashboard's read model.
//!
//! Counts come from the counters the ledger keeps with each entry
//! ([`Ledger::counts`]: totals by decision, level and system, decisions per hour), not
//! from rows. Lists whose rows the indexed columns name (refused: `decision`,
//! `unverified`: `level`) and the run view (`run`, indexed) are keyset pages, one
//! bounded query each, with totals from the counters.
//!
//! What the columns do not carry (a confirm outcome, an execution status, an open
//! intent or held request, recent runs) is folded in from the rows' bodies, one new row
//! at a time in batches of [`BATCH`], on the model's own read-only connection: once in
//! the background when `attest serve` starts, then incrementally. A poll folds at most
//! [`FOLD_PER_POLL`] rows itself, so it never waits for a whole chain; until the fold
//! reaches the tip, those lists say how far it got (`folded_through`). Memory is
//! bounded: the newest [`LIST_KEPT`] seqs of each list, [`RUNS_KEPT`] runs, and at most
//! [`OPEN_KEPT`] open intents and held requests.
//!
//! People count actions, not rows: an intent and its outcome, or an ask and its later
//! outcome, are one action (one action id). The counters count rows, so the fold also
//! tallies the counter keys of every stage row a later row of its action completed
//! ([`Completed`]); the counters less that tally count each action once, by its
//! latest row. An open stage (an intent still running, an ask still waiting) is one
//! action too, shown under its stage rather than as a verification level of `none`.
//! A stage row the fold never saw (pruned away before `serve` started, or one of more
//! than [`OPEN_KEPT`] open at once) stays counted as an action of its own.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use attest_ledger::{Filter, Ledger, LedgerError};
use serde::Serialize;
use serde_json::{json, Value};

use super::rows::{unix_secs, RowView};
use super::shadow::ShadowTally;

/// Rows read per batch while catching up.
pub(crate) const BATCH: usize = 2_000;
/// The most rows one poll folds in itself (the background fill does the rest).
pub(crate) const FOLD_PER_POLL: u64 = 20_000;
/// Hours of per-hour counts a summary may ask for (two weeks).
pub(crate) const HOURS_KEPT: usize = 14 * 24;
/// The newest seqs kept per folded list.
pub(crate) const LIST_KEPT: usize = 500;
/// Runs kept for the list of recent runs (the most recently active).
pub(crate) const RUNS_KEPT: usize = 1_000;
/// The most rows the run view shows (the run's newest).
pub(crate) const RUN_ROWS_SHOWN: usize = 2_000;
/// Open intents and held requests tracked (and open stage rows of any action, for
/// counting by action; one evicted stays counted as an action of its own).
pub(crate) const OPEN_KEPT: usize = 10_000;
/// Agents a run's tally names (the first seen).
const RUN_AGENTS_KEPT: usize = 16;
/// Agents the by-agent view keeps (the first seen; the counters still count the rest).
pub(crate) const AGENTS_KEPT: usize = 1_000;
/// Rows kept per agent for its timeline (its newest).
pub(crate) const AGENT_ROWS_KEPT: usize = 200;

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
    /// Ran in shadow mode, and policy would have refused or asked about it.
    Shadow,
    /// Asked a person (whatever they answered), once the ask has an outcome.
    Asked,
}

impl ListKind {
    /// Every list, in the order the dashboard shows them.
    pub(crate) const ALL: [ListKind; 8] = [
        ListKind::Refused,
        ListKind::Asked,
        ListKind::Rejected,
        ListKind::Unverified,
        ListKind::Failed,
        ListKind::Held,
        ListKind::Intents,
        ListKind::Shadow,
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
            ListKind::Shadow => "shadow",
            ListKind::Asked => "asked",
        }
    }

    /// The list named `name`.
    pub(crate) fn parse(name: &str) -> Option<ListKind> {
        ListKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Entries by decision, level and system, from the ledger's counters. Stage rows (an
/// intent, an ask still pending) are entries too: each counts once.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Counts {
    pub(crate) entries: u64,
    pub(crate) decision: BTreeMap<String, u64>,
    pub(crate) level: BTreeMap<String, u64>,
    pub(crate) system: BTreeMap<String, u64>,
}

/// The counter keys of one stage row, kept until a later row of its action completes it.
#[derive(Debug, Clone)]
struct StageKeys {
    decision: String,
    level: String,
    system: String,
    /// The counters' agent key (`none` for no agent).
    agent: String,
    /// The by-agent view's name for the agent.
    agent_name: String,
    /// The counters' hour key (`2026-12-01T09`).
    hour: String,
    run: Option<String>,
    /// An intent (else an ask waiting for its answer).
    intent: bool,
}

impl StageKeys {
    /// The keys [`attest_ledger::Counts`] files `row` under (empty keys are `none`).
    fn of(row: &RowView<'_>) -> StageKeys {
        let none = |key: &str| if key.is_empty() { "none" } else { key }.to_owned();
        StageKeys {
            decision: none(&row.decision),
            level: none(row.level()),
            system: none(&row.system),
            agent: none(row.agent.as_deref().unwrap_or("")),
            agent_name: row.agent_name().to_owned(),
            hour: row.ts.get(..13).unwrap_or(&row.ts).to_owned(),
            run: row.run_id.as_deref().map(str::to_owned),
            intent: row.status() == attest_core::INTENT,
        }
    }
}

/// The counter keys of stage rows a later row of the same action completed: the
/// ledger's counters less these count each action once.
#[derive(Debug, Clone, Default)]
struct Completed {
    total: u64,
    decision: BTreeMap<String, u64>,
    level: BTreeMap<String, u64>,
    system: BTreeMap<String, u64>,
    agent: BTreeMap<String, u64>,
    by_hour: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Completed {
    fn add(&mut self, keys: &StageKeys) {
        self.total += 1;
        for (map, key) in [
            (&mut self.decision, &keys.decision),
            (&mut self.level, &keys.level),
            (&mut self.system, &keys.system),
            (&mut self.agent, &keys.agent),
        ] {
            *map.entry(key.clone()).or_default() += 1;
        }
        *self
            .by_hour
            .entry(keys.hour.clone())
            .or_default()
            .entry(keys.decision.clone())
            .or_default() += 1;
    }
}

/// `rows` less `completed`, key by key (a key left at zero is dropped).
fn less(
    rows: &BTreeMap<String, u64>,
    completed: Option<&BTreeMap<String, u64>>,
) -> BTreeMap<String, u64> {
    rows.iter()
        .filter_map(|(key, &n)| {
            let done = completed.and_then(|c| c.get(key)).copied().unwrap_or(0);
            let left = n.saturating_sub(done);
            (left > 0).then(|| (key.clone(), left))
        })
        .collect()
}

/// One agent's actions, by decision, as the by-agent view shows them.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct AgentTally {
    pub(crate) agent: String,
    pub(crate) actions: u64,
    pub(crate) decision: BTreeMap<String, u64>,
    /// Actions that ran and failed.
    pub(crate) failed: u64,
    /// Runs the agent's rows name.
    pub(crate) runs: u64,
    /// The newest row's time.
    pub(crate) last_ts: String,
    /// The seqs of the agent's newest [`AGENT_ROWS_KEPT`] rows, oldest first.
    #[serde(skip)]
    recent: VecDeque<u64>,
}

/// One run as the list of runs shows it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub(crate) struct RunTally {
    pub(crate) run_id: String,
    /// Rows (stage rows included; kept for the API's older readers).
    pub(crate) rows: u64,
    /// Actions (an intent and its outcome are one).
    pub(crate) actions: u64,
    pub(crate) decision: BTreeMap<String, u64>,
    /// The agent of the run's first row.
    pub(crate) agent: Option<String>,
    /// Every agent the run's rows name, first seen first (a gateway serving several
    /// agents in one run; at most [`RUN_AGENTS_KEPT`]).
    pub(crate) agents: Vec<String>,
    pub(crate) first_ts: String,
    pub(crate) last_ts: String,
    #[serde(skip)]
    last_seq: u64,
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_owned(), 1);
        }
    }
}

fn drop_one(map: &mut BTreeMap<String, u64>, key: &str) {
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

#[derive(Default)]
struct State {
    /// The highest seq folded in.
    seen: u64,
    lists: HashMap<ListKind, VecDeque<u64>>,
    list_totals: HashMap<ListKind, u64>,
    /// Open intents and held requests: action id -> seq.
    open: HashMap<ListKind, BTreeMap<String, u64>>,
    /// Runs by id.
    runs: HashMap<String, RunTally>,
    /// Open stage rows of any action: action id -> their counter keys.
    stages: HashMap<String, StageKeys>,
    /// Stage rows completed since, as the counters filed them.
    completed: Completed,
    /// Actions by agent.
    agents: BTreeMap<String, AgentTally>,
    /// Runs by last activity, oldest first (may hold stale duplicates).
    run_order: VecDeque<(u64, String)>,
    /// Shadow verdicts folded in.
    shadow: ShadowTally,
}

/// The read model over one ledger file.
pub(crate) struct ReadModel {
    ledger: Arc<Ledger>,
    state: Mutex<State>,
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
    /// True for a row `attest import` wrote (its confirm and level are the source's claim).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) imported: bool,
    /// The verdict shadow mode did not enforce (`refuse`, `ask`), or "".
    pub(crate) shadow: String,
    /// Why policy decided as it did (a refusal's or an ask's reasons).
    pub(crate) reasons: Vec<String>,
    /// Who answered the ask, when one did.
    pub(crate) approver: Option<String>,
}

impl ReadModel {
    /// A model over `ledger` (best a read-only connection of its own).
    pub(crate) fn new(ledger: Arc<Ledger>) -> ReadModel {
        ReadModel {
            ledger,
            state: Mutex::new(State::default()),
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

    /// How far the fold has read.
    pub(crate) fn folded(&self) -> u64 {
        self.lock().seen
    }

    /// Folds in every row after the last one seen, up to `generation`; returns how many
    /// rows were read.
    pub(crate) fn catch_up(&self, generation: u64) -> Result<u64, LedgerError> {
        self.catch_up_at_most(generation, u64::MAX)
    }

    /// Like [`ReadModel::catch_up`], stopping after about `most` rows (whole batches).
    pub(crate) fn catch_up_at_most(&self, generation: u64, most: u64) -> Result<u64, LedgerError> {
        let mut read = 0;
        loop {
            let from = self.lock().seen + 1;
            if from > generation || read >= most {
                return Ok(read);
            }
            let mut batch = Vec::with_capacity(BATCH);
            self.ledger.for_each_row(from, |row| {
                batch.push((row.seq, row.body.to_vec()));
                Ok(batch.len() < BATCH)
            })?;
            if batch.is_empty() {
                // Nothing at or after `from` (pruned away, or a tip that moved back).
                self.lock().seen = generation;
                return Ok(read);
            }
            let mut state = self.lock();
            for (seq, body) in &batch {
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
            remember_run(state, run, seq, &row);
        }
        count_action(state, seq, id, &row);
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
        state.shadow.add(seq, &row);
        let confirm = row.confirm_outcome();
        let kinds = [
            (ListKind::Asked, row.decision == "ask"),
            (
                ListKind::Rejected,
                confirm == "rejected" || confirm == "expired",
            ),
            (ListKind::Failed, status == "failed"),
            (ListKind::Shadow, !row.shadow_decision().is_empty()),
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

    /// The counters: totals and the last `hours` hours (up to the one holding `now`) from
    /// the ledger's counters, list sizes.
    pub(crate) fn summary(&self, hours: usize, now: SystemTime) -> Result<Value, LedgerError> {
        let counts = self.ledger.counts()?;
        let state = self.lock();
        let newest = unix_secs(now) / 3_600;
        let first = newest.saturating_sub(hours.clamp(1, HOURS_KEPT) as u64 - 1);
        let per_hour: Vec<Value> = (first..=newest)
            .map(|hour| {
                let start = attest_ledger::format_ts(
                    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(hour * 3_600),
                );
                // The counters' hour key: `2026-12-01T09`.
                let decision = start
                    .get(..13)
                    .and_then(|key| counts.by_hour.get(key))
                    .cloned()
                    .unwrap_or_default();
                let key = start.get(..13).unwrap_or_default();
                let actions = less(&decision, state.completed.by_hour.get(key));
                json!({
                    "hour": start,
                    "counts": {"entries": decision.values().sum::<u64>(), "decision": decision},
                    "actions": {"total": actions.values().sum::<u64>(), "decision": actions},
                })
            })
            .collect();
        drop(state);
        let lists: BTreeMap<&str, u64> = ListKind::ALL
            .iter()
            .map(|&kind| (kind.as_str(), self.list_total(kind, &counts)))
            .collect();
        let state = self.lock();
        let actions = self.actions(&state, &counts);
        let mut agents: Vec<&AgentTally> = state.agents.values().collect();
        agents.sort_by(|a, b| b.actions.cmp(&a.actions).then(a.agent.cmp(&b.agent)));
        Ok(json!({
            "totals": Counts {
                entries: counts.total,
                decision: counts.by_decision,
                level: counts.by_level,
                system: counts.by_system,
            },
            "actions": actions,
            "agents": agents,
            "hours": per_hour,
            "lists": lists,
            "runs": state.runs.len(),
            "shadow": state.shadow,
            "folded_through": state.seen,
        }))
    }

    /// The counters less the completed stage rows: each action once, by its latest
    /// row; an open stage under `running` (an intent) or `awaiting decision` (an ask)
    /// instead of its verification level, and the rest of level `none` as `not checked`.
    fn actions(&self, state: &State, counts: &attest_ledger::Counts) -> Value {
        let done = &state.completed;
        let mut level = less(&counts.by_level, Some(&done.level));
        let (mut running, mut awaiting) = (0, 0);
        for stage in state.stages.values() {
            drop_one(&mut level, &stage.level);
            if stage.intent {
                running += 1;
            } else {
                awaiting += 1;
            }
        }
        // `none` in the counters: the action did not run, or nothing checked it.
        if let Some(n) = level.remove("none") {
            level.insert("not checked".to_owned(), n);
        }
        for (name, n) in [("running", running), ("awaiting decision", awaiting)] {
            if n > 0 {
                level.insert(name.to_owned(), n);
            }
        }
        json!({
            "total": counts.total.saturating_sub(done.total),
            "rows": counts.total,
            "decision": less(&counts.by_decision, Some(&done.decision)),
            "level": level,
            "system": less(&counts.by_system, Some(&done.system)),
            "agent": less(&counts.by_agent, Some(&done.agent)),
            "in_progress": running + awaiting,
        })
    }

    /// Actions by decision, as the dashboard counts them ([`ReadModel::summary`]'s
    /// `actions.decision`): each action once, by its latest row, so a write's intent and
    /// its outcome are one. Folds what it has not seen yet (at most [`FOLD_PER_POLL`]
    /// rows; the background fill does the rest).
    pub(crate) fn actions_by_decision(&self) -> Result<BTreeMap<String, u64>, LedgerError> {
        let generation = self.generation()?;
        self.catch_up_at_most(generation, FOLD_PER_POLL)?;
        let counts = self.ledger.counts()?;
        let state = self.lock();
        Ok(less(&counts.by_decision, Some(&state.completed.decision)))
    }

    /// Whether list `kind` is read from the indexed columns (else from the fold).
    pub(crate) fn indexed(kind: ListKind) -> bool {
        matches!(kind, ListKind::Refused | ListKind::Unverified)
    }

    fn list_total(&self, kind: ListKind, counts: &attest_ledger::Counts) -> u64 {
        let count = |map: &BTreeMap<String, u64>, key: &str| map.get(key).copied().unwrap_or(0);
        match kind {
            ListKind::Refused => count(&counts.by_decision, "refuse"),
            ListKind::Unverified => count(&counts.by_level, "unverified"),
            ListKind::Intents | ListKind::Held => {
                self.lock().open.get(&kind).map_or(0, |m| m.len() as u64)
            }
            ListKind::Rejected | ListKind::Failed | ListKind::Shadow | ListKind::Asked => {
                self.lock().list_totals.get(&kind).copied().unwrap_or(0)
            }
        }
    }

    /// List `kind`, newest first, below seq `before` (keyset), at most `limit` rows;
    /// and the list's total.
    pub(crate) fn list_page(
        &self,
        kind: ListKind,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<RowItem>, u64), LedgerError> {
        let seqs: Vec<u64> = match kind {
            ListKind::Refused | ListKind::Unverified => {
                let mut filter = Filter {
                    before,
                    ..Filter::default()
                };
                if kind == ListKind::Refused {
                    filter.decision = Some("refuse".to_owned());
                } else {
                    filter.level = Some("unverified".to_owned());
                }
                self.ledger
                    .list_filtered(&filter, limit)?
                    .into_iter()
                    .map(|row| row.seq)
                    .collect()
            }
            ListKind::Intents | ListKind::Held => {
                let state = self.lock();
                let mut seqs: Vec<u64> = state
                    .open
                    .get(&kind)
                    .map(|m| {
                        m.values()
                            .copied()
                            .filter(|&seq| below(seq, before))
                            .collect()
                    })
                    .unwrap_or_default();
                seqs.sort_unstable_by(|a, b| b.cmp(a));
                seqs.truncate(limit);
                seqs
            }
            ListKind::Rejected | ListKind::Failed | ListKind::Shadow | ListKind::Asked => self
                .lock()
                .lists
                .get(&kind)
                .map(|l| {
                    l.iter()
                        .rev()
                        .copied()
                        .filter(|&seq| below(seq, before))
                        .take(limit)
                        .collect()
                })
                .unwrap_or_default(),
        };
        let total = self.list_total(kind, &self.ledger.counts()?);
        Ok((self.rows(&seqs)?, total))
    }

    /// Run `run`'s newest [`RUN_ROWS_SHOWN`] rows, in order (from the `run` index).
    pub(crate) fn run(&self, run: &str) -> Result<Vec<RowItem>, LedgerError> {
        let filter = Filter {
            run: Some(run.to_owned()),
            ..Filter::default()
        };
        let mut seqs: Vec<u64> = self
            .ledger
            .list_filtered(&filter, RUN_ROWS_SHOWN)?
            .into_iter()
            .map(|row| row.seq)
            .collect();
        seqs.reverse();
        self.rows(&seqs)
    }

    /// Agent `agent`'s newest [`AGENT_ROWS_KEPT`] rows, in order (from the fold), or
    /// `None` for an agent the fold has not seen.
    pub(crate) fn agent(&self, agent: &str) -> Result<Option<Vec<RowItem>>, LedgerError> {
        let seqs: Option<Vec<u64>> = self
            .lock()
            .agents
            .get(agent)
            .map(|a| a.recent.iter().copied().collect());
        seqs.map(|seqs| self.rows(&seqs)).transpose()
    }

    /// The newest runs, most recently active first, at most `limit`.
    pub(crate) fn recent_runs(&self, limit: usize) -> Vec<RunTally> {
        let state = self.lock();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (_, run) in state.run_order.iter().rev() {
            if out.len() >= limit {
                break;
            }
            if seen.insert(run.as_str()) {
                if let Some(tally) = state.runs.get(run) {
                    out.push(tally.clone());
                }
            }
        }
        out
    }

    /// The rows at `seqs` (point reads by seq), in the order given.
    pub(crate) fn rows(&self, seqs: &[u64]) -> Result<Vec<RowItem>, LedgerError> {
        let mut out = Vec::with_capacity(seqs.len());
        let revealer = self.ledger.revealer()?;
        self.ledger.for_each_row_at(seqs, |row| {
            // Sealed personal fields opened, or `erased`; the hash stays the stored bytes'.
            let shown = revealer.shown(row.body);
            out.extend(RowView::parse(&shown).map(|view| {
                RowItem {
                    seq: row.seq,
                    ts: row.ts.to_owned(),
                    hash: attest_ledger::to_hex(&attest_ledger::entry_hash(row.body)),
                    action_id: view.action_id.to_string(),
                    agent: view.agent.as_deref().map(str::to_owned),
                    system: view.system.to_string(),
                    verb: view.verb.to_string(),
                    target: view.target.as_deref().map(str::to_owned),
                    decision: view.decision.to_string(),
                    confirm: view.shown_confirm(),
                    status: view.status().to_owned(),
                    level: view.shown_level(),
                    imported: view.is_imported(),
                    shadow: view.shadow_decision().to_owned(),
                    reasons: view.reasons.iter().map(|r| r.to_string()).collect(),
                    approver: view
                        .confirm
                        .as_ref()
                        .and_then(|c| c.approver.as_deref())
                        .map(str::to_owned),
                }
            }));
            Ok(())
        })?;
        Ok(out)
    }
}

/// Whether `seq` is on a page that ends before `before`.
fn below(seq: u64, before: Option<u64>) -> bool {
    before.is_none_or(|b| seq < b)
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

fn remember_run(state: &mut State, run: &str, seq: u64, row: &RowView<'_>) {
    let tally = state
        .runs
        .entry(run.to_owned())
        .or_insert_with(|| RunTally {
            run_id: run.to_owned(),
            agent: row.agent.as_deref().map(str::to_owned),
            first_ts: row.ts.to_string(),
            ..RunTally::default()
        });
    if let Some(agent) = row.agent.as_deref() {
        if tally.agents.len() < RUN_AGENTS_KEPT && !tally.agents.iter().any(|a| a == agent) {
            tally.agents.push(agent.to_owned());
        }
    }
    tally.last_seq = seq;
    tally.rows += 1;
    tally.last_ts.clear();
    tally.last_ts.push_str(&row.ts);
    state.run_order.push_back((seq, run.to_owned()));
    // Forget the least recently active runs; stale order entries are skipped.
    while state.runs.len() > RUNS_KEPT || state.run_order.len() > RUNS_KEPT * 4 {
        let Some((at, oldest)) = state.run_order.pop_front() else {
            break;
        };
        let last = state.runs.get(&oldest).map(|tally| tally.last_seq);
        if last == Some(at) && state.runs.len() > RUNS_KEPT {
            state.runs.remove(&oldest);
        }
    }
}

/// Counts `row` as its action's latest row: a stage row it completes stops counting
/// (in the completed tally, its agent's and its run's), and `row` counts instead.
fn count_action(state: &mut State, seq: u64, id: &str, row: &RowView<'_>) {
    if let Some(stage) = state.stages.remove(id) {
        state.completed.add(&stage);
        if let Some(agent) = state.agents.get_mut(&stage.agent_name) {
            agent.actions = agent.actions.saturating_sub(1);
            drop_one(&mut agent.decision, &stage.decision);
        }
        if let Some(run) = stage.run.as_deref().and_then(|r| state.runs.get_mut(r)) {
            run.actions = run.actions.saturating_sub(1);
            drop_one(&mut run.decision, &stage.decision);
        }
    }
    // Borrowed keys: most rows are not stages, and this runs for every row folded.
    let decision = if row.decision.is_empty() {
        "none"
    } else {
        row.decision.as_ref()
    };
    let run_id = row.run_id.as_deref();
    if let Some(run) = run_id.and_then(|r| state.runs.get_mut(r)) {
        run.actions += 1;
        bump(&mut run.decision, decision);
    }
    let first_of_run = run_id.is_some_and(|r| state.runs.get(r).is_some_and(|t| t.rows == 1));
    let name = row.agent_name();
    if !state.agents.contains_key(name) && state.agents.len() < AGENTS_KEPT {
        state.agents.insert(
            name.to_owned(),
            AgentTally {
                agent: name.to_owned(),
                ..AgentTally::default()
            },
        );
    }
    if let Some(agent) = state.agents.get_mut(name) {
        agent.actions += 1;
        bump(&mut agent.decision, decision);
        if row.status() == "failed" {
            agent.failed += 1;
        }
        agent.last_ts.clear();
        agent.last_ts.push_str(&row.ts);
        agent.recent.push_back(seq);
        if agent.recent.len() > AGENT_ROWS_KEPT {
            agent.recent.pop_front();
        }
        if first_of_run {
            // A run is the agent's once, at its first row.
            agent.runs += 1;
        }
    }
    if row.is_stage() && !id.is_empty() {
        if state.stages.len() >= OPEN_KEPT {
            // Forget one (it stays counted as an action of its own).
            if let Some(any) = state.stages.keys().next().cloned() {
                state.stages.remove(&any);
            }
        }
        state.stages.insert(id.to_owned(), StageKeys::of(row));
    }
}

#[cfg(test)]
mod tests {
    use attest_ledger::{LedgerOptions, Record};

    use super::*;

    /// One row: `(run, decision, status, level, confirm)`.
    fn record(n: u64, row: (Option<&str>, &str, &str, Option<&str>, Option<&str>)) -> Record {
        let (run, decision, status, level, confirm) = row;
        serde_json::from_value(json!({
            "action_id": format!("a{n}"),
            "run_id": run,
            "agent": "bot",
            "system": if decision == "refuse" { "stripe" } else { "gmail" },
            "verb": "send",
            "target_class": "internal",
            "source": "manual",
            "decision": decision,
            "tier": "high",
            "reasons": [],
            "rules_fired": [],
            "params_hash": "00",
            "params_preview": {},
            "confirm": confirm.map(|outcome| json!({"outcome": outcome})),
            "execution": {"status": status},
            "verification": level.map(|level| json!({"level": level, "method": "ack"})),
        }))
        .unwrap()
    }

    /// Writes known rows into `ledger` and checks what the model answers.
    fn the_model_answers_from_counters_and_indexed_columns(ledger: Ledger) {
        let rows = [
            (Some("r1"), "act", "ok", Some("verified"), None),
            (Some("r1"), "refuse", "not_run", None, None),
            (None, "act", "ok", Some("unverified"), None),
            (None, "ask", "not_run", None, Some("rejected")),
            (None, "act", "failed", None, None),
            (None, "act", attest_core::INTENT, None, None),
            (Some("r1"), "act", "ok", Some("verified"), None),
            (None, "refuse", "not_run", None, None),
        ];
        for (n, row) in rows.into_iter().enumerate() {
            ledger.append(&record(n as u64 + 1, row)).unwrap();
        }
        let model = ReadModel::new(Arc::new(ledger));
        let generation = model.generation().unwrap();
        assert_eq!(generation, 8);
        // Counts and the indexed lists need no fold.
        let summary = model.summary(24, SystemTime::now()).unwrap();
        assert_eq!(summary["totals"]["entries"], 8, "{summary:#}");
        assert_eq!(summary["totals"]["decision"]["act"], 5);
        assert_eq!(summary["totals"]["decision"]["refuse"], 2);
        assert_eq!(summary["totals"]["system"]["stripe"], 2);
        assert_eq!(summary["hours"][23]["counts"]["entries"], 8);
        assert_eq!(summary["lists"]["refused"], 2);
        assert_eq!(summary["lists"]["unverified"], 1);
        let seqs = |rows: Vec<RowItem>| rows.iter().map(|r| r.seq).collect::<Vec<_>>();
        let (page, total) = model.list_page(ListKind::Refused, None, 1).unwrap();
        assert_eq!((seqs(page), total), (vec![8], 2));
        let (page, _) = model.list_page(ListKind::Refused, Some(8), 1).unwrap();
        assert_eq!(seqs(page), [2]);
        let (page, _) = model.list_page(ListKind::Unverified, None, 50).unwrap();
        assert_eq!(seqs(page), [3]);
        let run = model.run("r1").unwrap();
        assert_eq!(seqs(run.clone()), [1, 2, 7]);
        assert_eq!(run[1].decision, "refuse");
        assert_eq!(run[0].hash.len(), 64);
        assert!(model.run("r2").unwrap().is_empty());
        assert_eq!(seqs(model.rows(&[7, 99, 1]).unwrap()), [7, 1]);
        // The body-only lists come from the fold, in bounded shares.
        let (page, total) = model.list_page(ListKind::Rejected, None, 50).unwrap();
        assert_eq!((seqs(page), total), (vec![], 0));
        assert_eq!(model.catch_up_at_most(generation, 1).unwrap(), 8);
        assert_eq!(model.folded(), 8);
        for (kind, seq) in [
            (ListKind::Rejected, 4),
            (ListKind::Failed, 5),
            (ListKind::Intents, 6),
        ] {
            let (page, total) = model.list_page(kind, None, 50).unwrap();
            assert_eq!((seqs(page), total), (vec![seq], 1), "{kind:?}");
        }
        let runs = model.recent_runs(10);
        assert_eq!(runs.len(), 1);
        assert_eq!(
            (runs[0].run_id.as_str(), runs[0].rows, runs[0].actions),
            ("r1", 3, 3)
        );
    }

    #[test]
    fn shadow_rows_are_listed_and_counted_by_rule_never_as_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("ledger.sqlite"), create()).unwrap();
        let mut shadowed = record(1, (None, "act", attest_core::INTENT, None, None));
        shadowed.shadow = Some(attest_ledger::Shadow {
            decision: "refuse".into(),
            reasons: vec!["no mail".into()],
            rules_fired: vec!["no-mail".into()],
        });
        ledger.append(&shadowed).unwrap();
        shadowed.execution.status = "ok".into();
        ledger.append(&shadowed).unwrap();
        ledger
            .append(&record(2, (None, "act", "ok", Some("verified"), None)))
            .unwrap();
        let model = ReadModel::new(Arc::new(ledger));
        model.catch_up(3).unwrap();
        let summary = model.summary(24, SystemTime::now()).unwrap();
        assert_eq!(summary["lists"]["refused"], 0, "{summary:#}");
        assert_eq!(summary["lists"]["shadow"], 1, "{summary:#}");
        assert_eq!(summary["shadow"]["would_refuse"], 1, "{summary:#}");
        assert_eq!(summary["shadow"]["by_rule"][0]["rule"], "no-mail");
        assert_eq!(summary["shadow"]["by_rule"][0]["seqs"], json!([2]));
        let (page, total) = model.list_page(ListKind::Shadow, None, 50).unwrap();
        assert_eq!(total, 1);
        assert_eq!((page[0].seq, page[0].decision.as_str()), (2, "act"));
        assert_eq!(page[0].shadow, "refuse");
    }

    #[test]
    fn an_intent_and_its_outcome_or_an_ask_and_its_answer_count_as_one_action() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("ledger.sqlite"), create()).unwrap();
        let rows = [
            // a1: an intent, then its outcome.
            (1, (Some("r1"), "act", attest_core::INTENT, None, None)),
            (1, (Some("r1"), "act", "ok", Some("verified"), None)),
            // a2: an ask waiting, then approved and run.
            (2, (Some("r1"), "ask", "pending", None, None)),
            (
                2,
                (Some("r1"), "ask", "ok", Some("verified"), Some("approved")),
            ),
            // a3: refused.
            (3, (None, "refuse", "not_run", None, None)),
            // a4: an intent still running.
            (4, (None, "act", attest_core::INTENT, None, None)),
        ];
        for (n, row) in rows {
            ledger.append(&record(n, row)).unwrap();
        }
        let model = ReadModel::new(Arc::new(ledger));
        model.catch_up(6).unwrap();
        let summary = model.summary(24, SystemTime::now()).unwrap();
        let actions = &summary["actions"];
        assert_eq!(summary["totals"]["entries"], 6, "{summary:#}");
        assert_eq!(actions["total"], 4, "{summary:#}");
        assert_eq!(actions["rows"], 6);
        assert_eq!(
            actions["decision"],
            json!({"act": 2, "ask": 1, "refuse": 1})
        );
        // The open intent is running, not a verification level of `none`.
        assert_eq!(
            actions["level"],
            json!({"verified": 2, "not checked": 1, "running": 1}),
            "{summary:#}"
        );
        assert_eq!(actions["agent"], json!({"bot": 4}));
        assert_eq!(actions["in_progress"], 1);
        assert_eq!(summary["hours"][23]["actions"]["total"], 4);
        assert_eq!(summary["agents"][0]["agent"], "bot");
        assert_eq!(summary["agents"][0]["actions"], 4);
        assert_eq!(summary["agents"][0]["decision"]["refuse"], 1);
        assert_eq!(summary["agents"][0]["runs"], 1);
        let runs = model.recent_runs(10);
        assert_eq!((runs[0].rows, runs[0].actions), (4, 2), "{runs:?}");
        let agent = model.agent("bot").unwrap().unwrap();
        assert_eq!(
            agent.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        assert!(model.agent("nobody").unwrap().is_none());
        assert_eq!(summary["lists"]["asked"], 1);
        let (page, _) = model.list_page(ListKind::Asked, None, 10).unwrap();
        assert_eq!(page[0].seq, 4);
    }

    fn create() -> LedgerOptions {
        LedgerOptions {
            create: true,
            ..LedgerOptions::default()
        }
    }

    #[test]
    fn on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("ledger.sqlite"), create()).unwrap();
        the_model_answers_from_counters_and_indexed_columns(ledger);
    }

    /// On PostgreSQL (a database of its own on 127.0.0.1:5432, `ATTEST_TEST_PG` for
    /// another server): skipped when none answers, unless `ATTEST_REQUIRE_PEERS` is set.
    #[test]
    fn on_postgres() {
        let server = std::env::var("ATTEST_TEST_PG")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let mut admin = match postgres::Client::connect(&format!("{server}/test"), postgres::NoTls)
        {
            Ok(client) => client,
            Err(err) if std::env::var_os("ATTEST_REQUIRE_PEERS").is_some() => {
                panic!("no PostgreSQL at {server}: {err}")
            }
            Err(_) => return,
        };
        let name = format!("attest_review_model_{}", std::process::id());
        let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        admin.batch_execute(&drop).unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let url = format!("{server}/{name}");
        the_model_answers_from_counters_and_indexed_columns(
            Ledger::open_location(&url, create()).unwrap(),
        );
        admin.batch_execute(&drop).unwrap();
    }
}

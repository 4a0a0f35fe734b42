//! Reviewing a ledger: listings filtered on indexed columns, and the counters kept
//! with the entries (totals by decision, level, system and agent, and decisions per
//! hour), read without counting rows.

use std::collections::BTreeMap;

use crate::LedgerError;

/// Which rows a listing shows; every field that is set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The run id.
    pub run: Option<String>,
    /// The agent.
    pub agent: Option<String>,
    /// The system.
    pub system: Option<String>,
    /// The decision (`act`, `ask`, `refuse`, `recorded`, …).
    pub decision: Option<String>,
    /// The verification level.
    pub level: Option<String>,
    /// Rows at or after this RFC 3339 UTC timestamp.
    pub since: Option<String>,
    /// The action id (its intent, ask and outcome rows).
    pub action_id: Option<String>,
    /// Rows before this seq only (a keyset page's bound).
    pub before: Option<u64>,
}

impl Filter {
    /// The column each set field compares, with its value (`ts` compares `>=`).
    pub(crate) fn columns(&self) -> Vec<(&'static str, &str)> {
        [
            ("run", &self.run),
            ("agent", &self.agent),
            ("system", &self.system),
            ("decision", &self.decision),
            ("level", &self.level),
            ("ts", &self.since),
            ("action_id", &self.action_id),
        ]
        .into_iter()
        .filter_map(|(column, value)| value.as_deref().map(|v| (column, v)))
        .collect()
    }
}

/// The counters kept with the entries. Rows removed by a prune stay counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Entries written.
    pub total: u64,
    /// Entries by decision.
    pub by_decision: BTreeMap<String, u64>,
    /// Entries by verification level (`none`: the action did not run or was not checked).
    pub by_level: BTreeMap<String, u64>,
    /// Entries by system.
    pub by_system: BTreeMap<String, u64>,
    /// Entries by agent (`none`: no agent recorded).
    pub by_agent: BTreeMap<String, u64>,
    /// Entries by hour (`2026-12-01T09`, UTC) and decision.
    pub by_hour: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Counts {
    /// Adds one counter row.
    pub(crate) fn add(&mut self, dim: &str, key: &str, hour: &str, n: u64) {
        let key = if key.is_empty() { "none" } else { key }.to_owned();
        let map = match (dim, hour.is_empty()) {
            ("decision", false) => self.by_hour.entry(hour.to_owned()).or_default(),
            ("decision", true) => {
                self.total += n;
                &mut self.by_decision
            }
            ("level", true) => &mut self.by_level,
            ("system", true) => &mut self.by_system,
            ("agent", true) => &mut self.by_agent,
            _ => return,
        };
        *map.entry(key).or_default() += n;
    }
}

/// What entries not yet filed add to the `counters` and `lookups` tables, tallied in
/// one scan: appends write it in bulk, and readers add it to what is written.
#[derive(Debug, Default)]
pub(crate) struct Unfiled {
    /// `(dim, key, hour)` → entries, as [`counter_keys`] names the rows.
    pub(crate) counters: BTreeMap<(&'static str, String, String), u64>,
    /// `(key, seq)`: `run:RUN` and `action_id:ID`, the keys [`Filter`]'s `run` and
    /// `action_id` find rows by.
    pub(crate) lookups: Vec<(String, u64)>,
    /// A key to look counters up by, its buffers reused.
    probe: (&'static str, String, String),
}

/// The columns of one entry that filing reads.
pub(crate) struct Columns<'a> {
    pub(crate) seq: u64,
    pub(crate) ts: &'a str,
    pub(crate) system: &'a str,
    pub(crate) agent: Option<&'a str>,
    pub(crate) decision: &'a str,
    pub(crate) level: Option<&'a str>,
    pub(crate) run: Option<&'a str>,
    pub(crate) action_id: Option<&'a str>,
}

impl Unfiled {
    /// Tallies one more entry.
    pub(crate) fn add(&mut self, entry: &Columns<'_>) {
        let keys = counter_keys(
            entry.ts,
            entry.system,
            entry.agent,
            entry.decision,
            entry.level,
        );
        for (dim, key, hour) in keys {
            // The probe's buffers are reused: a counter already seen costs no allocation.
            let probe = &mut self.probe;
            probe.0 = dim;
            probe.1.clear();
            probe.1.push_str(key);
            probe.2.clear();
            probe.2.push_str(hour);
            match self.counters.get_mut(probe) {
                Some(n) => *n += 1,
                None => {
                    self.counters.insert(probe.clone(), 1);
                }
            }
        }
        for (column, value) in [("run", entry.run), ("action_id", entry.action_id)] {
            if let Some(value) = value {
                self.lookups.push((format!("{column}:{value}"), entry.seq));
            }
        }
    }
}

/// The counter rows one entry moves: `(dim, key, hour)`, `key` empty for a NULL.
fn counter_keys<'a>(
    ts: &'a str,
    system: &'a str,
    agent: Option<&'a str>,
    decision: &'a str,
    level: Option<&'a str>,
) -> [(&'static str, &'a str, &'a str); 5] {
    let hour = ts.get(..13).unwrap_or(ts);
    [
        ("decision", decision, ""),
        ("level", level.unwrap_or(""), ""),
        ("system", system, ""),
        ("agent", agent.unwrap_or(""), ""),
        ("decision", decision, hour),
    ]
}

/// The `attest_meta` key holding the seq through which the `counters` and `lookups`
/// tables take in the entries. A file without it (schema 2) counted every entry as it
/// was appended, and indexed `run` and `action_id` on `entries` itself.
pub(crate) const FILED_THROUGH: &str = "filed_through";

/// The `run_id` and `action_id` a stored body carries, for the indexed columns.
pub(crate) fn run_and_action(body: &[u8]) -> (Option<String>, Option<String>) {
    #[derive(serde::Deserialize)]
    struct Ids {
        run_id: Option<String>,
        action_id: Option<String>,
    }
    match serde_json::from_slice::<Ids>(body) {
        Ok(ids) => (ids.run_id, ids.action_id),
        Err(_) => (None, None),
    }
}

/// How far the counters and lookups take in the entries (`filed_through`), from either
/// store's `attest_meta`; `None` when it is not recorded.
pub(crate) fn filed_through(src: &dyn crate::source::Source) -> Result<Option<u64>, LedgerError> {
    src.meta(FILED_THROUGH)?
        .map(|v| {
            v.parse().map_err(|_| LedgerError::BadRow {
                seq: 0,
                detail: format!("{FILED_THROUGH} in attest_meta is not a number: {v:?}"),
            })
        })
        .transpose()
}

//! Reviewing a ledger: listings filtered on indexed columns, and the counters kept
//! with the entries (totals by decision, level, system and agent, and decisions per
//! hour), read without counting rows.

use std::collections::BTreeMap;

use rusqlite::types::Value;

use crate::canonical::GENESIS;
use crate::{Ledger, LedgerError, RowSummary};

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

/// The counter rows one entry moves: `(dim, key, hour)`, `key` empty for a NULL.
pub(crate) fn counter_keys<'a>(
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

impl Ledger {
    /// The newest `limit` rows that match `filter`, newest first, from the indexed
    /// columns (`run` and `action_id` have indexes of their own; the others are read
    /// walking back from the newest row).
    pub fn list_filtered(
        &self,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<RowSummary>, LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.list(filter, limit);
        }
        let conn = self.lock()?;
        let mut sql = String::from(
            "SELECT seq, ts, system, verb, agent, decision, level, hash FROM entries WHERE 1 = 1",
        );
        let mut params: Vec<Value> = Vec::new();
        for (column, value) in filter.columns() {
            params.push(Value::Text(value.to_owned()));
            let op = if column == "ts" { ">=" } else { "=" };
            sql.push_str(&format!(" AND {column} {op} ?{}", params.len()));
        }
        if let Some(before) = filter.before {
            params.push(Value::Integer(i64::try_from(before).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" AND seq < ?{}", params.len()));
        }
        params.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ?{}", params.len()));
        let mut stmt = conn
            .prepare_cached(&sql)
            .map_err(self.sqlite("listing entries"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), |row| {
                let hash: Vec<u8> = row.get(7)?;
                Ok((
                    RowSummary {
                        seq: row.get(0)?,
                        ts: row.get(1)?,
                        system: row.get(2)?,
                        verb: row.get(3)?,
                        agent: row.get(4)?,
                        decision: row.get(5)?,
                        level: row.get(6)?,
                        hash: GENESIS,
                    },
                    hash,
                ))
            })
            .map_err(self.sqlite("listing entries"))?;
        let mut out = Vec::new();
        for row in rows {
            let (mut summary, hash) = row.map_err(self.sqlite("listing entries"))?;
            summary.hash = hash.try_into().map_err(|_| LedgerError::BadRow {
                seq: summary.seq,
                detail: "hash column is not 32 bytes".to_owned(),
            })?;
            out.push(summary);
        }
        Ok(out)
    }

    /// Calls `visit` for each row at `seqs` that exists (point reads by seq), in the
    /// order given.
    pub fn for_each_row_at(
        &self,
        seqs: &[u64],
        mut visit: impl FnMut(&crate::StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.rows_at(seqs, &mut visit);
        }
        for &seq in seqs {
            self.for_each_row(seq, |row| {
                if row.seq == seq {
                    visit(row)?;
                }
                Ok(false)
            })?;
        }
        Ok(())
    }

    /// The counters written with the entries.
    pub fn counts(&self) -> Result<Counts, LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.counts();
        }
        let conn = self.lock()?;
        let mut stmt = conn
            .prepare_cached("SELECT dim, key, hour, n FROM counters")
            .map_err(self.sqlite("reading counters"))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, u64>(3)?,
                ))
            })
            .map_err(self.sqlite("reading counters"))?;
        let mut counts = Counts::default();
        for row in rows {
            let (dim, key, hour, n) = row.map_err(self.sqlite("reading counters"))?;
            counts.add(&dim, &key, &hour, n);
        }
        Ok(counts)
    }
}

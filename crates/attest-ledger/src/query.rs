//! Reviewing a ledger: listings filtered on indexed columns, and the counters kept
//! with the entries (totals by decision, level, system and agent, and decisions per
//! hour), read without counting rows.

use std::collections::BTreeMap;

use rusqlite::types::Value;
use rusqlite::OptionalExtension;

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

/// The unfiled entries' columns that [`Unfiled`] tallies.
const SELECT_UNFILED: &str =
    "SELECT seq, ts, system, agent, decision, level, run, action_id FROM entries
     WHERE seq > ?1 AND seq <= ?2";

/// Adds `n` to a counter row.
pub(crate) const UPSERT_COUNTER: &str = "INSERT INTO counters (dim, key, hour, n)
     VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT (dim, key, hour) DO UPDATE SET n = n + excluded.n";

/// Files one entry under a lookup key. (`OR IGNORE`: a row filed twice is the same row.)
pub(crate) const INSERT_LOOKUP: &str = "INSERT OR IGNORE INTO lookups (key, seq) VALUES (?1, ?2)";

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

impl Ledger {
    /// The newest `limit` rows that match `filter`, newest first, from the indexed
    /// columns (`run` and `action_id` are looked up in `lookups`, plus the entries not
    /// filed there yet; the others are read walking back from the newest row).
    pub fn list_filtered(
        &self,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<RowSummary>, LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.list(filter, limit);
        }
        let mut conn = self.lock()?;
        let tx = conn.transaction().map_err(self.sqlite("listing entries"))?;
        let filed = self.filed_through_in(&tx)?;
        let mut sql = String::from(
            "SELECT seq, ts, system, verb, agent, decision, level, hash FROM entries WHERE 1 = 1",
        );
        let mut params: Vec<Value> = Vec::new();
        for (column, value) in filter.columns() {
            params.push(Value::Text(value.to_owned()));
            let n = params.len();
            match (column, filed) {
                ("run" | "action_id", Some(filed)) => {
                    params.push(Value::Text(format!("{column}:{value}")));
                    params.push(Value::Integer(i64::try_from(filed).unwrap_or(i64::MAX)));
                    sql.push_str(&format!(
                        " AND seq IN (SELECT seq FROM lookups WHERE key = ?{} UNION ALL
                                      SELECT seq FROM entries WHERE seq > ?{} AND {column} = ?{n})",
                        n + 1,
                        n + 2
                    ));
                }
                ("ts", _) => sql.push_str(&format!(" AND ts >= ?{n}")),
                _ => sql.push_str(&format!(" AND {column} = ?{n}")),
            }
        }
        if let Some(before) = filter.before {
            params.push(Value::Integer(i64::try_from(before).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" AND seq < ?{}", params.len()));
        }
        params.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ?{}", params.len()));
        let mut stmt = tx
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

    /// The counters: the `counters` table plus the entries appended since it was
    /// last written, read in one snapshot.
    pub fn counts(&self) -> Result<Counts, LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.counts();
        }
        let mut conn = self.lock()?;
        let tx = conn
            .transaction()
            .map_err(self.sqlite("reading counters"))?;
        let mut counts = Counts::default();
        {
            let mut stmt = tx
                .prepare_cached("SELECT dim, key, hour, n FROM counters")
                .map_err(self.sqlite("reading counters"))?;
            let mut rows = stmt.query([]).map_err(self.sqlite("reading counters"))?;
            while let Some(row) = rows.next().map_err(self.sqlite("reading counters"))? {
                let read = || -> rusqlite::Result<_> {
                    Ok((
                        row.get_ref(0)?.as_str()?,
                        row.get_ref(1)?.as_str()?,
                        row.get_ref(2)?.as_str()?,
                        row.get::<_, u64>(3)?,
                    ))
                };
                let (dim, key, hour, n) = read().map_err(self.sqlite("reading counters"))?;
                counts.add(dim, key, hour, n);
            }
        }
        if let Some(filed) = self.filed_through_in(&tx)? {
            for ((dim, key, hour), n) in self.unfiled_in(&tx, filed, u64::MAX)?.counters {
                counts.add(dim, &key, &hour, n);
            }
        }
        Ok(counts)
    }

    /// Tallies the entries `from + 1 ..= through`: what filing them adds to `counters`
    /// and `lookups`.
    pub(crate) fn unfiled_in(
        &self,
        conn: &rusqlite::Connection,
        from: u64,
        through: u64,
    ) -> Result<Unfiled, LedgerError> {
        let through = i64::try_from(through).unwrap_or(i64::MAX);
        let mut unfiled = Unfiled::default();
        let mut stmt = conn
            .prepare_cached(SELECT_UNFILED)
            .map_err(self.sqlite("reading unfiled entries"))?;
        let mut rows = stmt
            .query(rusqlite::params![from, through])
            .map_err(self.sqlite("reading unfiled entries"))?;
        while let Some(row) = rows
            .next()
            .map_err(self.sqlite("reading unfiled entries"))?
        {
            let read = || -> rusqlite::Result<_> {
                Ok((
                    row.get::<_, u64>(0)?,
                    row.get_ref(1)?.as_str()?,
                    row.get_ref(2)?.as_str()?,
                    row.get_ref(3)?.as_str_or_null()?,
                    row.get_ref(4)?.as_str()?,
                    row.get_ref(5)?.as_str_or_null()?,
                    row.get_ref(6)?.as_str_or_null()?,
                    row.get_ref(7)?.as_str_or_null()?,
                ))
            };
            let (seq, ts, system, agent, decision, level, run, action_id) =
                read().map_err(self.sqlite("reading unfiled entries"))?;
            unfiled.add(&Columns {
                seq,
                ts,
                system,
                agent,
                decision,
                level,
                run,
                action_id,
            });
        }
        Ok(unfiled)
    }

    /// The seq through which the `counters` and `lookups` tables take in the entries;
    /// `None` for a file of schema 2 (appends counted as they went; `entries` has
    /// indexes on `run` and `action_id` instead of `lookups`).
    pub(crate) fn filed_through_in(
        &self,
        conn: &rusqlite::Connection,
    ) -> Result<Option<u64>, LedgerError> {
        let value: Option<String> = conn
            .prepare_cached("SELECT value FROM attest_meta WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([FILED_THROUGH], |row| row.get(0)).optional())
            .map_err(self.sqlite("reading how far entries are filed"))?;
        value
            .map(|v| {
                v.parse().map_err(|_| LedgerError::BadRow {
                    seq: 0,
                    detail: format!("{FILED_THROUGH} in attest_meta is not a number: {v:?}"),
                })
            })
            .transpose()
    }
}

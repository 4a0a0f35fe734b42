//! The SQLite store's listings and counters: `counters` and `lookups` as filed, plus
//! the entries appended since (see [`super::FILING_ROWS`]).

use rusqlite::types::Value;
use rusqlite::OptionalExtension;

use super::SqliteStore;
use crate::canonical::GENESIS;
use crate::query::{Columns, Counts, Filter, Unfiled, FILED_THROUGH};
use crate::{LedgerError, RowSummary};

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

impl SqliteStore {
    /// The newest `limit` rows that match `filter`, newest first, from the indexed
    /// columns (`run` and `action_id` are looked up in `lookups`, plus the entries not
    /// filed there yet; the others are read walking back from the newest row).
    pub(crate) fn list_filtered(
        &self,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<RowSummary>, LedgerError> {
        let mut conn = self.lock();
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

    /// The counters: the `counters` table plus the entries appended since it was
    /// last written, read in one snapshot.
    pub(crate) fn counts_now(&self) -> Result<Counts, LedgerError> {
        let mut conn = self.lock();
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

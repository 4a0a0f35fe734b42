//! The PostgreSQL store's listings, point reads and counters.

use postgres::types::ToSql;
use postgres::Row;

use super::read::{stored_row, STORED_ROW_COLUMNS};
use super::PgStore;
use crate::query::{filed_through, Columns, Counts, Filter, Unfiled};
use crate::{LedgerError, RowSummary, StoredRow};

impl PgStore {
    /// Listing with filters, newest first, from the indexed columns.
    pub(crate) fn list_filtered(
        &self,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<RowSummary>, LedgerError> {
        let mut sql = String::from(
            "SELECT seq, ts, system, verb, agent, decision, level, hash FROM entries WHERE tenant = $1",
        );
        let mut params: Vec<Box<dyn ToSql + Sync>> = vec![Box::new(self.tenant.clone())];
        self.snapshot(false, |src| {
            let filed = i64::try_from(filed_through(&src)?.unwrap_or(0)).unwrap_or(i64::MAX);
            for (column, value) in filter.columns() {
                params.push(Box::new(value.to_owned()));
                let n = params.len();
                match column {
                    // Filed entries through `lookups`, the unfiled tail by its column.
                    "run" | "action_id" => {
                        params.push(Box::new(format!("{column}:{value}")));
                        params.push(Box::new(filed));
                        sql.push_str(&format!(
                            " AND seq IN (SELECT seq FROM lookups WHERE tenant = $1 AND key = ${}
                                      UNION ALL
                                      SELECT seq FROM entries WHERE tenant = $1 AND seq > ${}
                                                                AND {column} = ${n})",
                            n + 1,
                            n + 2
                        ));
                    }
                    "ts" => sql.push_str(&format!(" AND ts >= ${n}")),
                    _ => sql.push_str(&format!(" AND {column} = ${n}")),
                }
            }
            if let Some(before) = filter.before {
                params.push(Box::new(i64::try_from(before).unwrap_or(i64::MAX)));
                sql.push_str(&format!(" AND seq < ${}", params.len()));
            }
            params.push(Box::new(i64::try_from(limit).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" ORDER BY seq DESC LIMIT ${}", params.len()));
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
            let rows = src.query("listing entries", sql.as_str(), &refs)?;
            rows.iter()
                .map(|row| {
                    let seq = row.get::<_, i64>(0) as u64;
                    Ok(RowSummary {
                        seq,
                        ts: row.get(1),
                        system: row.get(2),
                        verb: row.get(3),
                        agent: row.get(4),
                        decision: row.get(5),
                        level: row.get(6),
                        hash: row.get::<_, &[u8]>(7).try_into().map_err(|_| {
                            LedgerError::BadRow {
                                seq,
                                detail: "hash column is not 32 bytes".to_owned(),
                            }
                        })?,
                    })
                })
                .collect()
        })
    }

    /// The rows at `seqs`, in the order given (one query).
    pub(crate) fn point_reads(
        &self,
        seqs: &[u64],
        visit: &mut dyn FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        let wanted: Vec<i64> = seqs
            .iter()
            .map(|&seq| i64::try_from(seq).unwrap_or(i64::MAX))
            .collect();
        let rows = self
            .client()?
            .query(
                &format!(
                    "SELECT {STORED_ROW_COLUMNS} FROM entries WHERE tenant = $1 AND seq = ANY($2)"
                ),
                &[&self.tenant, &wanted],
            )
            .map_err(self.err("reading entries"))?;
        let by_seq: std::collections::HashMap<u64, &Row> =
            rows.iter().map(|row| (stored_row(row).seq, row)).collect();
        for seq in seqs {
            if let Some(row) = by_seq.get(seq) {
                visit(&stored_row(row))?;
            }
        }
        Ok(())
    }

    /// The counters kept with the entries.
    pub(crate) fn counts_now(&self) -> Result<Counts, LedgerError> {
        self.snapshot(false, |src| {
            let mut counts = Counts::default();
            let rows = src.query(
                "reading counters",
                "SELECT dim, key, hour, n FROM counters WHERE tenant = $1",
                &[&self.tenant],
            )?;
            for row in rows {
                counts.add(
                    row.get(0),
                    row.get(1),
                    row.get(2),
                    row.get::<_, i64>(3) as u64,
                );
            }
            // The entries appended since the last filing, tallied here.
            let filed = filed_through(&src)?.unwrap_or(0);
            let rows = src.query(
                "reading unfiled entries",
                "SELECT seq, ts, system, agent, decision, level, run, action_id FROM entries
                 WHERE tenant = $1 AND seq > $2",
                &[&self.tenant, &i64::try_from(filed).unwrap_or(i64::MAX)],
            )?;
            let mut unfiled = Unfiled::default();
            for row in &rows {
                unfiled.add(&Columns {
                    seq: row.get::<_, i64>(0) as u64,
                    ts: row.get(1),
                    system: row.get(2),
                    agent: row.get(3),
                    decision: row.get(4),
                    level: row.get(5),
                    run: row.get(6),
                    action_id: row.get(7),
                });
            }
            for ((dim, key, hour), n) in unfiled.counters {
                counts.add(dim, &key, &hour, n);
            }
            Ok(counts)
        })
    }
}

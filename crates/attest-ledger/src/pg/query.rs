//! The PostgreSQL store's listings, point reads and counters.

use postgres::types::ToSql;
use postgres::Row;

use super::read::{stored_row, STORED_ROW_COLUMNS};
use super::PgStore;
use crate::query::{Counts, Filter};
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
        for (column, value) in filter.columns() {
            params.push(Box::new(value.to_owned()));
            let op = if column == "ts" { ">=" } else { "=" };
            sql.push_str(&format!(" AND {column} {op} ${}", params.len()));
        }
        if let Some(before) = filter.before {
            params.push(Box::new(i64::try_from(before).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" AND seq < ${}", params.len()));
        }
        params.push(Box::new(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ${}", params.len()));
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        let rows = self
            .client()?
            .query(sql.as_str(), &refs)
            .map_err(self.err("listing entries"))?;
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
                    hash: row
                        .get::<_, &[u8]>(7)
                        .try_into()
                        .map_err(|_| LedgerError::BadRow {
                            seq,
                            detail: "hash column is not 32 bytes".to_owned(),
                        })?,
                })
            })
            .collect()
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
        let rows = self
            .client()?
            .query(
                "SELECT dim, key, hour, n FROM counters WHERE tenant = $1",
                &[&self.tenant],
            )
            .map_err(self.err("reading counters"))?;
        let mut counts = Counts::default();
        for row in rows {
            counts.add(
                row.get(0),
                row.get(1),
                row.get(2),
                row.get::<_, i64>(3) as u64,
            );
        }
        Ok(counts)
    }
}

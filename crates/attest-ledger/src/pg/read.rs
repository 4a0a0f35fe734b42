//! The PostgreSQL store as a [`Source`]: one `REPEATABLE READ` snapshot of one
//! tenant, read a page at a time.

use std::cell::RefCell;
use std::path::Path;

use postgres::types::ToSql;
use postgres::{IsolationLevel, Row, Transaction};
use tlog_tiles::stored_hash_index;

use super::blocking::Held;
use super::PgStore;
use crate::canonical::Hash;
use crate::merkle::TreeHash;
use crate::source::{LeafHashes, Source, Visit, VisitTree};
use crate::{LedgerError, StoredCheckpoint, StoredRow};

/// Rows read per page by listings, verification and copies.
pub(crate) const PAGE: i64 = 2048;

/// One PostgreSQL snapshot of one tenant.
pub(crate) struct PgSource<'s, 'c> {
    pub(crate) store: &'s PgStore,
    pub(crate) tx: RefCell<Held<Transaction<'c>>>,
}

impl PgSource<'_, '_> {
    pub(crate) fn query(
        &self,
        during: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, LedgerError> {
        self.tx
            .borrow_mut()
            .with(|tx| tx.query(sql, params))
            .map_err(self.store.err(during))
    }

    fn tenant(&self) -> &str {
        &self.store.tenant
    }

    /// Rows `seq > after`, at most one page, in seq order.
    fn page(&self, after: u64) -> Result<Vec<Row>, LedgerError> {
        self.query(
            "reading entries",
            &format!(
                "SELECT {STORED_ROW_COLUMNS} FROM entries
                 WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3"
            ),
            &[&self.tenant(), &(after as i64), &PAGE],
        )
    }
}

/// The columns [`stored_row`] reads, in its order.
pub(crate) const STORED_ROW_COLUMNS: &str =
    "seq, hash, ts, system, verb, agent, decision, level, body, run, action_id";

pub(crate) fn stored_row(row: &Row) -> StoredRow<'_> {
    StoredRow {
        seq: row.get::<_, i64>(0) as u64,
        hash: row.get(1),
        ts: row.get(2),
        system: row.get(3),
        verb: row.get(4),
        agent: row.get(5),
        decision: row.get(6),
        level: row.get(7),
        body: row.get(8),
        run: row.get(9),
        action_id: row.get(10),
    }
}

fn read_checkpoint(row: &Row) -> Result<StoredCheckpoint, LedgerError> {
    StoredCheckpoint::from_columns(
        row.get::<_, i64>(0) as u64,
        row.get(1),
        row.get(2),
        row.get(3),
    )
}

impl Source for PgSource<'_, '_> {
    fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        let rows = self.query(
            "reading the tip",
            "SELECT seq, hash FROM entries WHERE tenant = $1 ORDER BY seq DESC LIMIT 1",
            &[&self.tenant()],
        )?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        crate::source::tip_from(row.get::<_, i64>(0) as u64, row.get(1)).map(Some)
    }

    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        Ok(self
            .query(
                "reading attest_meta",
                "SELECT value FROM attest_meta WHERE tenant = $1 AND key = $2",
                &[&self.tenant(), &key],
            )?
            .first()
            .map(|row| row.get(0)))
    }

    fn checkpoint_at(&self, size: u64) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.query(
            "reading a checkpoint",
            "SELECT size, root, note, ts FROM checkpoints WHERE tenant = $1 AND size = $2",
            &[&self.tenant(), &(size as i64)],
        )?
        .first()
        .map(read_checkpoint)
        .transpose()
    }

    fn newest_before(&self, before: &str, size: u64) -> Result<Option<u64>, LedgerError> {
        let last: Option<i64> = self
            .query(
                "choosing entries to prune",
                "SELECT max(seq) FROM entries WHERE tenant = $1 AND ts < $2 AND seq <= $3",
                &[&self.tenant(), &before, &(size as i64)],
            )?
            .first()
            .and_then(|row| row.get(0));
        Ok(last.map(|s| s as u64))
    }

    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.query(
            "reading checkpoints",
            "SELECT size, root, note, ts FROM checkpoints WHERE tenant = $1 ORDER BY size",
            &[&self.tenant()],
        )?
        .iter()
        .map(read_checkpoint)
        .collect()
    }

    fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.query(
            "reading the newest checkpoint",
            "SELECT size, root, note, ts FROM checkpoints WHERE tenant = $1 ORDER BY size DESC LIMIT 1",
            &[&self.tenant()],
        )?
        .first()
        .map(read_checkpoint)
        .transpose()
    }

    fn rows(&self, from: u64, visit: &mut Visit<'_>) -> Result<(), LedgerError> {
        let mut after = from.saturating_sub(1);
        loop {
            let rows = self.page(after)?;
            for row in &rows {
                let stored = stored_row(row);
                after = stored.seq;
                if !visit(&stored)? {
                    return Ok(());
                }
            }
            if (rows.len() as i64) < PAGE {
                return Ok(());
            }
        }
    }

    fn rows_with_tree(&self, start: u64, visit: &mut VisitTree<'_>) -> Result<(), LedgerError> {
        let mut after = start;
        let mut pairing = LeafHashes::new(start);
        loop {
            let rows = self.page(after)?;
            if rows.is_empty() {
                return Ok(());
            }
            let leaf = pairing.leaf();
            let first = stored_hash_index(0, leaf);
            let end = stored_hash_index(0, leaf + rows.len() as u64);
            let tree = self.query(
                "reading tree hashes",
                "SELECT idx, hash FROM tree_hashes WHERE tenant = $1 AND idx >= $2 AND idx < $3 ORDER BY idx",
                &[&self.tenant(), &(first as i64), &(end as i64)],
            )?;
            let mut tree = tree.iter();
            for row in &rows {
                let stored = stored_row(row);
                after = stored.seq;
                let slot = pairing.next_leaf(|sink| {
                    Ok(match tree.next() {
                        Some(t) => {
                            sink(Some(t.get::<_, i64>(0) as u64), Some(t.get(1)));
                            true
                        }
                        None => false,
                    })
                })?;
                if !visit(&stored, slot)? {
                    return Ok(());
                }
            }
            if (rows.len() as i64) < PAGE {
                return Ok(());
            }
        }
    }

    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        let wanted: Vec<i64> = indexes.iter().map(|&i| i as i64).collect();
        let tenant = self.tenant();
        let rows = self
            .tx
            .borrow_mut()
            .with(|tx| {
                tx.query(
                    "SELECT idx, hash FROM tree_hashes WHERE tenant = $1 AND idx = ANY($2)",
                    &[&tenant, &wanted],
                )
            })
            .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let bytes: &[u8] = row.get(1);
            let hash: Hash = bytes
                .try_into()
                .map_err(|_| tlog_tiles::Error::MalformedHash)?;
            found.insert(row.get::<_, i64>(0) as u64, hash);
        }
        indexes
            .iter()
            .map(|i| {
                found
                    .get(i)
                    .map(|h| TreeHash(*h))
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }

    fn tree_end(&self) -> Result<u64, LedgerError> {
        let max: Option<i64> = self
            .query(
                "reading the tree's size",
                "SELECT max(idx) FROM tree_hashes WHERE tenant = $1",
                &[&self.tenant()],
            )?
            .first()
            .and_then(|row| row.get(0));
        Ok(max.map_or(0, |idx| idx as u64 + 1))
    }

    fn path(&self) -> &Path {
        &self.store.name
    }
}

impl PgStore {
    /// Runs `f` on one `REPEATABLE READ` snapshot of this tenant (`writable`: a
    /// transaction the caller may write in and commit, as a checkpoint or prune does).
    pub(crate) fn snapshot<T>(
        &self,
        writable: bool,
        f: impl FnOnce(PgSource<'_, '_>) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let mut client = self.client()?;
        let tx = client
            .with(|client| {
                client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(!writable)
                    .start()
            })
            .map_err(self.err("starting a read"))?;
        f(PgSource {
            store: self,
            tx: RefCell::new(Held::new(tx)),
        })
    }
}

impl<'c> PgSource<'_, 'c> {
    /// The snapshot's transaction, to write in and commit.
    pub(crate) fn into_transaction(self) -> Held<Transaction<'c>> {
        self.tx.into_inner()
    }
}

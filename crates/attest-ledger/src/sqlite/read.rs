//! The SQLite store as a [`Source`]: reads inside one transaction on the ledger's
//! connection.

use rusqlite::{Connection, OptionalExtension};
use tlog_tiles::{stored_hash_index, HashReader};

use super::tree::StoredHashes;
use super::SqliteStore;
use crate::canonical::Hash;
use crate::merkle::TreeHash;
use crate::source::{LeafHashes, Source, Visit, VisitTree};
use crate::{LedgerError, StoredCheckpoint, StoredRow};

/// One SQLite snapshot.
pub(crate) struct SqliteSource<'a> {
    store: &'a SqliteStore,
    conn: &'a Connection,
    hashes: StoredHashes<'a>,
}

impl<'a> SqliteSource<'a> {
    pub(crate) fn new(store: &'a SqliteStore, conn: &'a Connection) -> SqliteSource<'a> {
        SqliteSource {
            store,
            conn,
            hashes: StoredHashes::new(conn),
        }
    }
}

impl Source for SqliteSource<'_> {
    fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.store.tip_in(self.conn)
    }

    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.store.meta_in(self.conn, key)
    }

    fn checkpoint_at(&self, size: u64) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.store.checkpoint_at_in(self.conn, size)
    }

    fn newest_before(&self, before: &str, size: u64) -> Result<Option<u64>, LedgerError> {
        self.conn
            .query_row(
                "SELECT MAX(seq) FROM entries WHERE ts < ?1 AND seq <= ?2",
                rusqlite::params![before, size],
                |row| row.get(0),
            )
            .map_err(self.store.sqlite("choosing entries to prune"))
    }

    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.store.checkpoints_in(self.conn)
    }

    fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.store.latest_checkpoint_in(self.conn)
    }

    fn rows(&self, from: u64, visit: &mut Visit<'_>) -> Result<(), LedgerError> {
        self.store.for_each_row_in(self.conn, from, visit)
    }

    /// Reads the rows and the tree hashes in lockstep, each with one statement.
    fn rows_with_tree(&self, start: u64, visit: &mut VisitTree<'_>) -> Result<(), LedgerError> {
        let store = self.store;
        let mut tree_stmt = self
            .conn
            .prepare_cached("SELECT idx, hash FROM tree_hashes WHERE idx >= ?1 ORDER BY idx")
            .map_err(store.sqlite("reading tree hashes"))?;
        let mut tree_rows = tree_stmt
            .query([stored_hash_index(0, start)])
            .map_err(store.sqlite("reading tree hashes"))?;
        let mut pairing = LeafHashes::new(start);
        store.for_each_row_in(self.conn, start + 1, |row| {
            let slot = pairing.next_leaf(|sink| {
                match tree_rows
                    .next()
                    .map_err(store.sqlite("reading tree hashes"))?
                {
                    Some(stored) => {
                        let bytes = stored.get_ref(1).ok().and_then(|v| v.as_blob().ok());
                        sink(stored.get(0).ok(), bytes);
                        Ok(true)
                    }
                    None => Ok(false),
                }
            })?;
            visit(row, slot)
        })
    }

    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        self.hashes.read_hashes(indexes)
    }

    fn tree_end(&self) -> Result<u64, LedgerError> {
        // Prepared once per connection: `verify --since-checkpoint` asks on every run.
        self.conn
            .prepare_cached("SELECT MAX(idx) FROM tree_hashes")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get::<_, Option<u64>>(0)))
            .map(|max| max.map_or(0, |idx| idx.saturating_add(1)))
            .map_err(self.store.sqlite("reading the tree's size"))
    }

    fn path(&self) -> &std::path::Path {
        &self.store.path
    }
}

impl SqliteStore {
    pub(crate) fn for_each_row_in(
        &self,
        conn: &Connection,
        from_seq: u64,
        mut visit: impl FnMut(&StoredRow<'_>) -> Result<bool, LedgerError>,
    ) -> Result<(), LedgerError> {
        let select = self.select_rows;
        let mut stmt = conn
            .prepare_cached(select)
            .map_err(self.sqlite("reading entries"))?;
        let mut rows = stmt
            .query([from_seq])
            .map_err(self.sqlite("reading entries"))?;
        while let Some(row) = rows.next().map_err(self.sqlite("reading entries"))? {
            let read = || -> Result<StoredRow<'_>, rusqlite::Error> {
                Ok(StoredRow {
                    seq: row.get(0)?,
                    hash: row.get_ref(1)?.as_bytes_or_null()?.unwrap_or_default(),
                    ts: row.get_ref(2)?.as_str_or_null()?.unwrap_or_default(),
                    system: row.get_ref(3)?.as_str_or_null()?.unwrap_or_default(),
                    verb: row.get_ref(4)?.as_str_or_null()?.unwrap_or_default(),
                    agent: row.get_ref(5)?.as_str_or_null()?,
                    decision: row.get_ref(6)?.as_str_or_null()?.unwrap_or_default(),
                    level: row.get_ref(7)?.as_str_or_null()?,
                    body: row.get_ref(8)?.as_bytes_or_null()?.unwrap_or_default(),
                    run: row.get_ref(9)?.as_str_or_null()?,
                    action_id: row.get_ref(10)?.as_str_or_null()?,
                })
            };
            let stored = read().map_err(self.sqlite("reading an entry"))?;
            if !visit(&stored)? {
                break;
            }
        }
        Ok(())
    }

    pub(crate) fn checkpoints_in(
        &self,
        conn: &Connection,
    ) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        let mut stmt = conn
            .prepare_cached("SELECT size, root, note, ts FROM checkpoints ORDER BY size")
            .map_err(self.sqlite("reading checkpoints"))?;
        let rows = stmt
            .query_map([], read_checkpoint)
            .map_err(self.sqlite("reading checkpoints"))?;
        rows.map(|row| row.map_err(self.sqlite("reading checkpoints"))?)
            .collect()
    }

    /// The newest stored checkpoint only: one row read, however many there are.
    pub(crate) fn latest_checkpoint_in(
        &self,
        conn: &Connection,
    ) -> Result<Option<StoredCheckpoint>, LedgerError> {
        conn.prepare_cached(
            "SELECT size, root, note, ts FROM checkpoints ORDER BY size DESC LIMIT 1",
        )
        .and_then(|mut stmt| stmt.query_row([], read_checkpoint).optional())
        .map_err(self.sqlite("reading the newest checkpoint"))?
        .transpose()
    }

    fn checkpoint_at_in(
        &self,
        conn: &Connection,
        size: u64,
    ) -> Result<Option<StoredCheckpoint>, LedgerError> {
        conn.query_row(
            "SELECT size, root, note, ts FROM checkpoints WHERE size = ?1",
            [size],
            read_checkpoint,
        )
        .optional()
        .map_err(self.sqlite("reading a checkpoint"))?
        .transpose()
    }

    pub(crate) fn meta_in(
        &self,
        conn: &Connection,
        key: &str,
    ) -> Result<Option<String>, LedgerError> {
        conn.prepare_cached("SELECT value FROM attest_meta WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([key], |row| row.get(0)).optional())
            .map_err(self.sqlite("reading attest_meta"))
    }
}

type CheckpointRow = Result<StoredCheckpoint, LedgerError>;

fn read_checkpoint(row: &rusqlite::Row<'_>) -> rusqlite::Result<CheckpointRow> {
    Ok(StoredCheckpoint::from_columns(
        row.get(0)?,
        row.get_ref(1)?.as_blob()?,
        row.get(2)?,
        row.get(3)?,
    ))
}

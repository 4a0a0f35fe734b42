//! The SQLite store as a [`Source`]: reads inside one transaction on the ledger's
//! connection.

use rusqlite::Connection;
use tlog_tiles::{stored_hash_index, HashReader};

use crate::canonical::Hash;
use crate::merkle::{StoredHashes, TreeHash};
use crate::source::{Source, TreeSlot, Visit, VisitTree};
use crate::{Ledger, LedgerError, StoredCheckpoint};

/// One SQLite snapshot.
pub(crate) struct SqliteSource<'a> {
    ledger: &'a Ledger,
    conn: &'a Connection,
    hashes: StoredHashes<'a>,
}

impl<'a> SqliteSource<'a> {
    pub(crate) fn new(ledger: &'a Ledger, conn: &'a Connection) -> SqliteSource<'a> {
        SqliteSource {
            ledger,
            conn,
            hashes: StoredHashes::new(conn),
        }
    }
}

impl Source for SqliteSource<'_> {
    fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.ledger.tip_in(self.conn)
    }

    fn pruned(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.ledger.pruned_in(self.conn)
    }

    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.ledger.checkpoints_in(self.conn)
    }

    fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.ledger.latest_checkpoint_in(self.conn)
    }

    fn rows(&self, from: u64, visit: &mut Visit<'_>) -> Result<(), LedgerError> {
        self.ledger.for_each_row_in(self.conn, from, visit)
    }

    /// Reads the rows and the tree hashes in lockstep, each with one statement.
    fn rows_with_tree(&self, start: u64, visit: &mut VisitTree<'_>) -> Result<(), LedgerError> {
        let ledger = self.ledger;
        let mut tree_stmt = self
            .conn
            .prepare_cached("SELECT idx, hash FROM tree_hashes WHERE idx >= ?1 ORDER BY idx")
            .map_err(ledger.sqlite("reading tree hashes"))?;
        let mut tree_rows = tree_stmt
            .query([stored_hash_index(0, start)])
            .map_err(ledger.sqlite("reading tree hashes"))?;
        let mut leaf = start;
        let mut unwritten = false;
        let mut hashes = Vec::with_capacity(32 * 8);
        ledger.for_each_row_in(self.conn, start + 1, |row| {
            // The stored hashes this leaf completed: 1 + trailing zeros of leaf + 1.
            let count = 1 + (leaf + 1).trailing_zeros() as u64;
            let first = stored_hash_index(0, leaf);
            let mut in_order = true;
            hashes.clear();
            for k in 0..count {
                if unwritten {
                    break;
                }
                match tree_rows
                    .next()
                    .map_err(ledger.sqlite("reading tree hashes"))?
                {
                    // The table ends at a leaf boundary: the rest is the unwritten tail.
                    None if k == 0 => unwritten = true,
                    Some(stored) => {
                        let idx: Option<u64> = stored.get(0).ok();
                        let bytes = stored.get_ref(1).ok().and_then(|v| v.as_blob().ok());
                        match bytes {
                            Some(bytes) if idx == Some(first + k) && bytes.len() == 32 => {
                                hashes.extend_from_slice(bytes)
                            }
                            _ => in_order = false,
                        }
                    }
                    None => in_order = false,
                }
            }
            leaf += 1;
            let slot = if unwritten {
                TreeSlot::Unwritten
            } else if in_order {
                TreeSlot::Stored(&hashes)
            } else {
                TreeSlot::Bad
            };
            visit(row, slot)
        })
    }

    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        self.hashes.read_hashes(indexes)
    }

    fn tree_end(&self) -> Result<u64, LedgerError> {
        self.conn
            .query_row("SELECT MAX(idx) FROM tree_hashes", [], |row| {
                row.get::<_, Option<u64>>(0)
            })
            .map(|max| max.map_or(0, |idx| idx.saturating_add(1)))
            .map_err(self.ledger.sqlite("reading the tree's size"))
    }

    fn path(&self) -> &std::path::Path {
        self.ledger.path()
    }
}

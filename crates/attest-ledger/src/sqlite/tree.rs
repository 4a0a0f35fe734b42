//! The SQLite store's tree hashes: the `tree_hashes` table, and the tail of leaves
//! whose hashes appends have not written yet, computed from the entries.

use std::cell::OnceCell;

use rusqlite::Connection;
use tlog_tiles::{stored_hash_index, HashReader};

use crate::canonical::Hash;
use crate::merkle::{leaf_hash, CompactRange, TreeHash};

/// Reads the tree's hashes: those in the ledger's `tree_hashes` table, and those of
/// the unwritten tail.
///
/// Appends write tree hashes in bulk (see [`super::TREE_FLUSH_LEAVES`]), so the newest few leaves'
/// hashes may be only in a writer's memory, or nowhere if it crashed. They are a pure
/// function of the entries' `hash` column, so any reader, in any process, computes
/// them the same way when it first needs one ([`read_tail`]).
pub(crate) struct StoredHashes<'c> {
    conn: &'c Connection,
    /// Computed on the first hash the table does not hold; `None` if it cannot be.
    tail: OnceCell<Option<Tail>>,
}

impl<'c> StoredHashes<'c> {
    pub(crate) fn new(conn: &'c Connection) -> StoredHashes<'c> {
        StoredHashes {
            conn,
            tail: OnceCell::new(),
        }
    }
}

impl HashReader for StoredHashes<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        read_table(self.conn, indexes, |index| {
            self.tail
                .get_or_init(|| read_tail(self.conn).ok())
                .as_ref()
                .and_then(|tail| tail.hash_at(index))
        })
    }
}

/// Only what `tree_hashes` holds, for computing the tail itself.
struct TableOnly<'c>(&'c Connection);

impl HashReader for TableOnly<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        read_table(self.0, indexes, |_| None)
    }
}

/// Reads hashes from `tree_hashes`, asking `missing` for any the table does not hold.
fn read_table(
    conn: &Connection,
    indexes: &[u64],
    missing: impl Fn(u64) -> Option<TreeHash>,
) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
    let mut stmt = conn
        .prepare_cached("SELECT hash FROM tree_hashes WHERE idx = ?1")
        .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
    indexes
        .iter()
        .map(|&index| {
            let bytes: Vec<u8> = match stmt.query_row([index], |row| row.get(0)) {
                Ok(bytes) => bytes,
                Err(rusqlite::Error::QueryReturnedNoRows) => {
                    return missing(index).ok_or(tlog_tiles::Error::IndexesNotInTree)
                }
                Err(_) => return Err(tlog_tiles::Error::IndexesNotInTree),
            };
            let hash: Hash = bytes
                .try_into()
                .map_err(|_| tlog_tiles::Error::MalformedHash)?;
            Ok(TreeHash(hash))
        })
        .collect()
}

/// The leaves whose tree hashes are not in `tree_hashes` yet, computed from the
/// entries: everything needed to read them and to keep appending.
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    /// Leaves whose hashes are all in `tree_hashes`.
    pub(crate) written: u64,
    /// The hashes leaves `written..` complete, in stored-index order from
    /// `stored_hash_index(0, written)`.
    pub(crate) hashes: Vec<Hash>,
    /// The compact range of the whole tree, tail included.
    pub(crate) range: CompactRange,
}

impl Tail {
    fn hash_at(&self, index: u64) -> Option<TreeHash> {
        let offset = index.checked_sub(stored_hash_index(0, self.written))?;
        let hash = self.hashes.get(usize::try_from(offset).ok()?)?;
        Some(TreeHash(*hash))
    }
}

/// Reads how many leaves `tree_hashes` covers, then hashes the entries after them.
///
/// Rows are written a whole leaf at a time in one transaction, so the table holds
/// exactly the hashes of some first `n` leaves; anything else (rows beyond the last
/// entry, a missing entry in the tail, a hash column that is not 32 bytes) is an error,
/// and an append on top of it fails.
pub(crate) fn read_tail(conn: &Connection) -> Result<Tail, tlog_tiles::Error> {
    let stored: Option<u64> = conn
        .prepare_cached("SELECT MAX(idx) + 1 FROM tree_hashes")
        .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
        .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
    let written = leaves_for(stored.unwrap_or(0)).ok_or(tlog_tiles::Error::IndexesNotInTree)?;
    let mut range = CompactRange::from_stored(written, &TableOnly(conn))?;
    let mut hashes = Vec::new();
    let mut stmt = conn
        .prepare_cached("SELECT seq, hash FROM entries WHERE seq > ?1 ORDER BY seq")
        .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
    let mut rows = stmt
        .query([written])
        .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
    while let Some(row) = rows
        .next()
        .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?
    {
        let seq: u64 = row
            .get(0)
            .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
        if seq != range.size() + 1 {
            return Err(tlog_tiles::Error::IndexesNotInTree);
        }
        let hash: Hash = row
            .get_ref(1)
            .ok()
            .and_then(|value| value.as_blob().ok())
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or(tlog_tiles::Error::MalformedHash)?;
        range.push_with(leaf_hash(&hash), |node| hashes.push(*node));
    }
    Ok(Tail {
        written,
        hashes,
        range,
    })
}

/// The number of leaves whose stored hashes number exactly `stored`, if there is one
/// (`stored_hash_index(0, n)` is strictly increasing in `n`).
fn leaves_for(stored: u64) -> Option<u64> {
    let (mut low, mut high) = (0u64, stored);
    while low < high {
        let mid = low + (high - low) / 2;
        if stored_hash_index(0, mid) < stored {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    (stored_hash_index(0, low) == stored).then_some(low)
}

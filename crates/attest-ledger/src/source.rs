//! What verification, proofs, roots and listings read, whatever the store: one
//! consistent snapshot of one ledger (a tenant's chain, in PostgreSQL).
//!
//! SQLite answers from one read transaction on the ledger's connection; PostgreSQL
//! from one `REPEATABLE READ` transaction. Everything above this trait (the chain
//! check, the tree check, proofs) is the same code for both, so both stores give the
//! same reports, roots and proofs for the same rows.

use tlog_tiles::HashReader;

use crate::canonical::Hash;
use crate::merkle::TreeHash;
use crate::{LedgerError, StoredCheckpoint, StoredRow};

/// The stored tree hashes a leaf completed, as a row is read beside them.
pub(crate) enum TreeSlot<'a> {
    /// The hashes, 32 bytes each, in stored-index order.
    Stored(&'a [u8]),
    /// A hash is missing, out of order or not 32 bytes.
    Bad,
    /// The stored hashes end before this leaf (SQLite writes them in bulk): nothing
    /// stored to compare.
    Unwritten,
}

/// A row visitor: returns `false` to stop.
pub(crate) type Visit<'v> = dyn FnMut(&StoredRow<'_>) -> Result<bool, LedgerError> + 'v;
/// A row-with-tree visitor: returns `false` to stop.
pub(crate) type VisitTree<'v> =
    dyn FnMut(&StoredRow<'_>, TreeSlot<'_>) -> Result<bool, LedgerError> + 'v;

/// One snapshot of one ledger.
pub(crate) trait Source {
    /// The newest row's seq and stored hash.
    fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError>;
    /// A value kept in `attest_meta` (the prune boundary, how far entries are filed).
    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError>;
    /// The last pruned seq and its entry hash.
    fn pruned(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        crate::prune::boundary(self.meta("pruned_through")?, self.meta("pruned_hash")?)
    }
    /// The stored checkpoint of `size` entries.
    fn checkpoint_at(&self, size: u64) -> Result<Option<StoredCheckpoint>, LedgerError>;
    /// The newest seq with `ts < before` and `seq <= size` (prune's candidate).
    fn newest_before(&self, before: &str, size: u64) -> Result<Option<u64>, LedgerError>;
    /// Every stored checkpoint, smallest first.
    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError>;
    /// The newest stored checkpoint.
    fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError>;
    /// Rows with `seq >= from`, in seq order, until `visit` says stop.
    fn rows(&self, from: u64, visit: &mut Visit<'_>) -> Result<(), LedgerError>;
    /// Rows after leaf `start` (seq `start + 1` on) with the stored tree hashes each
    /// one completed.
    fn rows_with_tree(&self, start: u64, visit: &mut VisitTree<'_>) -> Result<(), LedgerError>;
    /// Tree hashes by stored index (the unwritten tail computed from the entries).
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error>;
    /// One past the highest stored tree-hash index (0 when there is none).
    fn tree_end(&self) -> Result<u64, LedgerError>;
    /// Where the ledger lives, for messages.
    fn path(&self) -> &std::path::Path;
}

/// A [`Source`] as `tlog_tiles` reads hashes.
pub(crate) struct Hashes<'s>(pub(crate) &'s dyn Source);

impl HashReader for Hashes<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        self.0.read_hashes(indexes)
    }
}

/// The Merkle root of the first `size` entries, from stored hashes in O(log n).
pub(crate) fn root(source: &dyn Source, size: u64) -> Result<Hash, LedgerError> {
    tlog_tiles::tree_hash(size, &Hashes(source))
        .map(|h| h.0)
        .map_err(|source| LedgerError::Tree { seq: size, source })
}

/// A tip from its stored columns, whichever store they were read from (a corrupt
/// hash column is not chained onto).
pub(crate) fn tip_from(seq: u64, hash: &[u8]) -> Result<(u64, Hash), LedgerError> {
    let hash: Hash = hash.try_into().map_err(|_| LedgerError::BadRow {
        seq,
        detail: "hash column is not 32 bytes; run `attest verify`".to_owned(),
    })?;
    Ok((seq, hash))
}

/// Pairs each leaf with the stored tree hashes it completed, as a store reads both in
/// index order (the same for every store): a leaf completes `1 + trailing zeros of
/// (leaf + 1)` hashes, from `stored_hash_index(0, leaf)` on.
pub(crate) struct LeafHashes {
    leaf: u64,
    unwritten: bool,
    hashes: Vec<u8>,
}

impl LeafHashes {
    /// Pairing from leaf `start` (seq `start + 1`) on.
    pub(crate) fn new(start: u64) -> LeafHashes {
        LeafHashes {
            leaf: start,
            unwritten: false,
            hashes: Vec::with_capacity(32 * 8),
        }
    }

    /// The next leaf to pair.
    pub(crate) fn leaf(&self) -> u64 {
        self.leaf
    }

    /// Reads the next leaf's hashes with `next` (which hands the next stored hash,
    /// its index and bytes as read, to the sink it is given, and says whether there
    /// was one), and returns the leaf's slot.
    pub(crate) fn next_leaf(
        &mut self,
        mut next: impl FnMut(&mut dyn FnMut(Option<u64>, Option<&[u8]>)) -> Result<bool, LedgerError>,
    ) -> Result<TreeSlot<'_>, LedgerError> {
        let count = 1 + (self.leaf + 1).trailing_zeros() as u64;
        let first = tlog_tiles::stored_hash_index(0, self.leaf);
        let mut in_order = true;
        self.hashes.clear();
        for k in 0..count {
            if self.unwritten {
                break;
            }
            let hashes = &mut self.hashes;
            let found = next(&mut |idx, bytes| match bytes {
                Some(bytes) if idx == Some(first + k) && bytes.len() == 32 => {
                    hashes.extend_from_slice(bytes)
                }
                _ => in_order = false,
            })?;
            if !found {
                // The table ends at a leaf boundary: the rest is the unwritten tail.
                if k == 0 {
                    self.unwritten = true;
                } else {
                    in_order = false;
                }
            }
        }
        self.leaf += 1;
        Ok(if self.unwritten {
            TreeSlot::Unwritten
        } else if in_order {
            TreeSlot::Stored(&self.hashes)
        } else {
            TreeSlot::Bad
        })
    }
}

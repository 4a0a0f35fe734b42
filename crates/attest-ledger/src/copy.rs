//! Copying a ledger between stores without changing a byte: the same bodies at the
//! same seqs, the same tree hashes, the same signed checkpoints and prune boundary,
//! so both verify, export the same lines and prove against the same signed roots.

use std::cell::{Cell, RefCell};

use crate::canonical::Hash;
use crate::merkle::TreeHash;
use crate::source::{Source, Visit, VisitTree};
use crate::{Ledger, LedgerError, StoredCheckpoint};

/// How many copied rows between two progress calls.
const PROGRESS_EVERY: u64 = 4_096;

impl Ledger {
    /// Copies every row, tree hash, checkpoint and the prune boundary of this ledger
    /// into `target`, which must be empty; returns the rows copied. One snapshot of
    /// this ledger is read, and the target is written in one transaction.
    ///
    /// Verify this ledger first: a copy carries tampering with it (and `verify` on
    /// the target finds it there too).
    pub fn copy_to(&self, target: &Ledger) -> Result<u64, LedgerError> {
        self.copy_to_with(target, &mut |_, _| {})
    }

    /// [`Ledger::copy_to`], calling `progress(rows copied, rows to copy)` as rows go.
    pub fn copy_to_with(
        &self,
        target: &Ledger,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, LedgerError> {
        self.read(|source| {
            let total = source.tip()?.map_or(0, |(seq, _)| seq)
                - source.pruned()?.map_or(0, |(seq, _)| seq);
            let counted = Counted {
                inner: source,
                copied: Cell::new(0),
                total,
                progress: RefCell::new(progress),
            };
            target.store.copy_in(&counted)
        })
    }
}

/// A source that reports each row a store's `copy_in` reads from it: the stores copy
/// with their own SQL, and progress needs no second copy loop in each.
struct Counted<'s, 'p> {
    inner: &'s dyn Source,
    copied: Cell<u64>,
    total: u64,
    progress: RefCell<&'p mut dyn FnMut(u64, u64)>,
}

impl Source for Counted<'_, '_> {
    fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.inner.tip()
    }
    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.inner.meta(key)
    }
    fn checkpoint_at(&self, size: u64) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.inner.checkpoint_at(size)
    }
    fn newest_before(&self, before: &str, size: u64) -> Result<Option<u64>, LedgerError> {
        self.inner.newest_before(before, size)
    }
    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.inner.checkpoints()
    }
    fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.inner.latest_checkpoint()
    }
    fn rows(&self, from: u64, visit: &mut Visit<'_>) -> Result<(), LedgerError> {
        self.inner.rows(from, &mut |row| {
            let go_on = visit(row)?;
            let copied = self.copied.get() + 1;
            self.copied.set(copied);
            if copied % PROGRESS_EVERY == 0 || copied == self.total {
                (self.progress.borrow_mut())(copied, self.total);
            }
            Ok(go_on)
        })
    }
    fn rows_with_tree(&self, start: u64, visit: &mut VisitTree<'_>) -> Result<(), LedgerError> {
        self.inner.rows_with_tree(start, visit)
    }
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        self.inner.read_hashes(indexes)
    }
    fn tree_end(&self) -> Result<u64, LedgerError> {
        self.inner.tree_end()
    }
    fn path(&self) -> &std::path::Path {
        self.inner.path()
    }
}

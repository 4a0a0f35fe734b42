//! Stored checkpoints: signing the current tree (written once for every store: the
//! store only keeps the note), listing, and the tree's roots.

use crate::canonical::Hash;
use crate::clock::format_ts;
use crate::source::root;
use crate::{sign_checkpoint, Ledger, LedgerError, SigningKey};

/// A checkpoint as the ledger stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCheckpoint {
    /// Entries covered.
    pub size: u64,
    /// The root over them, as stored beside the note.
    pub root: Hash,
    /// The signed note, exactly as signed.
    pub note: String,
    /// When it was signed.
    pub ts: String,
}

impl Ledger {
    /// Signs the current tree with `key` and stores the note. Signing a size that is
    /// already checkpointed returns the stored checkpoint and `false`.
    ///
    /// This signs what the ledger holds: callers should verify first (the CLI's
    /// `attest checkpoint` does), or a checkpoint can vouch for a tampered ledger.
    pub fn checkpoint(&self, key: &SigningKey) -> Result<(StoredCheckpoint, bool), LedgerError> {
        let ts = format_ts(self.now());
        let path = self.path();
        self.store.save_checkpoint(&mut |src| {
            let Some((size, _)) = src.tip()? else {
                return Err(LedgerError::Empty {
                    path: path.to_path_buf(),
                });
            };
            if let Some(existing) = src.checkpoint_at(size)? {
                return Ok((existing, false));
            }
            let root = root(src, size)?;
            let note = sign_checkpoint(key, size, &root)?;
            let checkpoint = StoredCheckpoint {
                size,
                root,
                note,
                ts: ts.clone(),
            };
            Ok((checkpoint, true))
        })
    }

    /// Every stored checkpoint, smallest first.
    pub fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.read(|src| src.checkpoints())
    }

    /// The newest stored checkpoint, if any.
    pub fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.read(|src| src.latest_checkpoint())
    }

    /// The Merkle root of the first `size` entries, from stored hashes in O(log n).
    pub fn root_at(&self, size: u64) -> Result<Hash, LedgerError> {
        self.read(|src| root(src, size))
    }
}

impl StoredCheckpoint {
    /// A checkpoint from its stored columns, whichever store they were read from.
    pub(crate) fn from_columns(
        size: u64,
        root: &[u8],
        note: String,
        ts: String,
    ) -> Result<StoredCheckpoint, LedgerError> {
        let root = Hash::try_from(root).map_err(|_| LedgerError::BadRow {
            seq: size,
            detail: "checkpoint root is not 32 bytes".to_owned(),
        })?;
        Ok(StoredCheckpoint {
            size,
            root,
            note,
            ts,
        })
    }
}

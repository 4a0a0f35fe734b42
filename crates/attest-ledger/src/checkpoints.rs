//! Stored checkpoints: signing the current tree (written once for every store: the
//! store only keeps the note), listing, and the tree's roots.

use crate::canonical::Hash;
use crate::clock::format_ts;
use crate::source::root;
use crate::{
    sign_checkpoint, Ledger, LedgerError, SigningKey, VerifierKey, VerifyOptions, VerifyReport,
};

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

/// What [`Ledger::checkpoint_verified`] did.
#[derive(Debug)]
pub enum VerifiedCheckpoint {
    /// The ledger verified and the checkpoint is signed (`new`: `false` when this size
    /// was already checkpointed).
    Signed {
        /// The checkpoint, as stored.
        checkpoint: StoredCheckpoint,
        /// Whether it was signed now rather than found.
        new: bool,
    },
    /// The ledger does not verify, so nothing was signed; the report says why.
    Refused(VerifyReport),
}

impl Ledger {
    /// Signs the current tree with `key` only if the ledger verifies first: from the
    /// previous checkpoint on (whose signature `key`, or one of `also_trusted` — a key it
    /// replaces after a rotation — must have made), or from the start when there is none.
    /// A checkpoint must never vouch for a tampered ledger, so every door that signs one
    /// (`attest checkpoint`, the bindings) signs through here.
    pub fn checkpoint_verified(
        &self,
        key: &SigningKey,
        also_trusted: &[VerifierKey],
    ) -> Result<VerifiedCheckpoint, LedgerError> {
        let mut trusted = vec![key.verifier().clone()];
        for given in also_trusted {
            if !trusted.contains(given) {
                trusted.push(given.clone());
            }
        }
        let report = self.verify_with(VerifyOptions {
            trusted: &trusted,
            since_checkpoint: self.latest_checkpoint()?.is_some(),
            ..VerifyOptions::default()
        })?;
        if !report.is_intact() {
            return Ok(VerifiedCheckpoint::Refused(report));
        }
        let (checkpoint, new) = self.checkpoint(key)?;
        Ok(VerifiedCheckpoint::Signed { checkpoint, new })
    }

    /// Signs the current tree with `key` and stores the note. Signing a size that is
    /// already checkpointed returns the stored checkpoint and `false`.
    ///
    /// This signs what the ledger holds: callers should verify first
    /// ([`Ledger::checkpoint_verified`] does), or a checkpoint can vouch for a tampered
    /// ledger.
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

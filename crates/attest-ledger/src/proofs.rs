//! Inclusion and consistency proofs (RFC 9162 §2.1.3, §2.1.4), served from stored
//! hashes, and checked offline against a signed checkpoint.

use serde::{Deserialize, Serialize};
use tlog_tiles::{check_record, check_tree, prove_record, prove_tree, Hash as TreeHashAlias};

use crate::canonical::{entry_hash, to_hex, Hash};
use crate::merkle::{leaf_hash, TreeHash};
use crate::source::{root, Hashes, Source};
use crate::{open_checkpoint, Ledger, LedgerError, VerifierKey};

/// Proof that entry `seq` is in the tree of `tree_size` entries.
///
/// Unknown fields are refused, so a file that mixes proof kinds parses as neither.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InclusionProof {
    /// The entry's seq.
    pub seq: u64,
    /// Its leaf index (`seq - 1`).
    pub index: u64,
    /// The tree the proof is for.
    pub tree_size: u64,
    /// SHA-256 of the entry's canonical body, lower-case hex.
    pub entry_hash: String,
    /// The audit path, base64 hashes, leaf side first.
    pub proof: Vec<String>,
    /// The tree's root, base64.
    pub root: String,
    /// The signed checkpoint for `tree_size`, when the ledger has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

/// Proof that the tree of `old_size` entries is a prefix of the one of `new_size`.
///
/// Unknown fields are refused, so a file that mixes proof kinds parses as neither.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsistencyProof {
    /// The older tree's size.
    pub old_size: u64,
    /// The newer tree's size.
    pub new_size: u64,
    /// The older root, base64.
    pub old_root: String,
    /// The newer root, base64.
    pub new_root: String,
    /// The proof, base64 hashes.
    pub proof: Vec<String>,
    /// The signed checkpoint for `old_size`, when the ledger has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_checkpoint: Option<String>,
    /// The signed checkpoint for `new_size`, when the ledger has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_checkpoint: Option<String>,
}

/// Why a proof did not check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// A field is not what it should be (bad base64, wrong length, index ≠ seq − 1).
    #[error("malformed proof: {0}")]
    Malformed(String),
    /// The proof has no checkpoint to check against.
    #[error("the proof carries no signed checkpoint for the tree of {size} entries: the ledger had none at that size when it was proved; sign one with `attest checkpoint` and prove against its size")]
    NoCheckpoint {
        /// The tree size that has no checkpoint in the proof.
        size: u64,
    },
    /// The checkpoint's signature did not verify.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// The checkpoint is for another tree than the proof.
    #[error("the checkpoint is for size {checkpoint_size} with root {checkpoint_root}, the proof for size {size} with root {root}")]
    CheckpointDisagrees {
        /// The checkpoint's size.
        checkpoint_size: u64,
        /// Its root.
        checkpoint_root: String,
        /// The proof's size.
        size: u64,
        /// The proof's root.
        root: String,
    },
    /// The hashes do not lead to the root.
    #[error("the proof does not lead to the root")]
    Invalid,
}

impl Ledger {
    /// Proves entry `seq` is in the tree of `size` entries (default: the newest
    /// checkpoint's size).
    pub fn prove_inclusion(
        &self,
        seq: u64,
        size: Option<u64>,
    ) -> Result<InclusionProof, LedgerError> {
        self.read(|src| self.prove_inclusion_in(src, seq, size, None))
    }

    /// [`Ledger::prove_inclusion`] for an entry a prune removed, its body read from
    /// the prune's archive (the ledger keeps the whole tree, so the proof is the same).
    pub fn prove_inclusion_archived(
        &self,
        seq: u64,
        size: Option<u64>,
        archive: &crate::Archive,
    ) -> Result<InclusionProof, LedgerError> {
        self.read(|src| self.prove_inclusion_in(src, seq, size, Some(archive)))
    }

    fn prove_inclusion_in(
        &self,
        src: &dyn Source,
        seq: u64,
        size: Option<u64>,
        archive: Option<&crate::Archive>,
    ) -> Result<InclusionProof, LedgerError> {
        let checkpoints = src.checkpoints()?;
        let size = proof_size(src, size, &checkpoints)?;
        if seq == 0 || seq > size {
            return Err(LedgerError::OutOfRange { seq, size });
        }
        let mut body_hash = None;
        src.rows(seq, &mut |row| {
            if row.seq == seq {
                body_hash = Some((entry_hash(row.body), row.hash == entry_hash(row.body)));
            }
            Ok(false)
        })?;
        let hash = match body_hash {
            Some((hash, true)) => hash,
            Some((_, false)) => {
                return Err(LedgerError::BadRow {
                    seq,
                    detail: "its body does not match its hash; run `attest verify`".to_owned(),
                })
            }
            None => match archive.and_then(|a| a.entry_hash(seq)) {
                // Checked below: the proof from the stored tree must lead to the root.
                Some(hash) => hash,
                None => return Err(LedgerError::Pruned { seq }),
            },
        };
        let stored = Hashes(src);
        let tree = |source| LedgerError::Tree { seq, source };
        let proof = prove_record(size, seq - 1, &stored).map_err(tree)?;
        let root = root(src, size)?;
        check_record(
            &proof,
            size,
            TreeHash(root),
            seq - 1,
            TreeHash(leaf_hash(&hash)),
        )
        .map_err(tree)?;
        Ok(InclusionProof {
            seq,
            index: seq - 1,
            tree_size: size,
            entry_hash: to_hex(&hash),
            proof: proof.iter().map(|h| b64(&h.0)).collect(),
            root: b64(&root),
            checkpoint: checkpoints
                .into_iter()
                .find(|c| c.size == size)
                .map(|c| c.note),
        })
    }

    /// Proves the tree of `old` entries is a prefix of the tree of `new` (default: the
    /// newest checkpoint's size).
    pub fn prove_consistency(
        &self,
        old: u64,
        new: Option<u64>,
    ) -> Result<ConsistencyProof, LedgerError> {
        self.read(|src| self.prove_consistency_in(src, old, new))
    }

    fn prove_consistency_in(
        &self,
        src: &dyn Source,
        old: u64,
        new: Option<u64>,
    ) -> Result<ConsistencyProof, LedgerError> {
        let checkpoints = src.checkpoints()?;
        let new = proof_size(src, new, &checkpoints)?;
        if old == 0 || old > new {
            return Err(LedgerError::OutOfRange {
                seq: old,
                size: new,
            });
        }
        let stored = Hashes(src);
        let proof = prove_tree(new, old, &stored)
            .map_err(|source| LedgerError::Tree { seq: new, source })?;
        let note_at = |size: u64| {
            checkpoints
                .iter()
                .find(|c| c.size == size)
                .map(|c| c.note.clone())
        };
        Ok(ConsistencyProof {
            old_size: old,
            new_size: new,
            old_root: b64(&root(src, old)?),
            new_root: b64(&root(src, new)?),
            proof: proof.iter().map(|h| b64(&h.0)).collect(),
            old_checkpoint: note_at(old),
            new_checkpoint: note_at(new),
        })
    }
}

/// The tree size a proof is for: `size`, else the newest checkpoint's.
fn proof_size(
    src: &dyn Source,
    size: Option<u64>,
    checkpoints: &[crate::StoredCheckpoint],
) -> Result<u64, LedgerError> {
    let tip = src.tip()?.map(|(seq, _)| seq).unwrap_or(0);
    let size = match size {
        Some(size) => size,
        None => checkpoints
            .last()
            .map(|c| c.size)
            .ok_or_else(|| LedgerError::NoCheckpoint {
                path: src.path().to_path_buf(),
            })?,
    };
    if size == 0 || size > tip {
        return Err(LedgerError::OutOfRange {
            seq: size,
            size: tip,
        });
    }
    Ok(size)
}

impl InclusionProof {
    /// Checks the proof offline: the checkpoint's signature under `trusted`, that the
    /// checkpoint is for this tree, and that the audit path leads from the entry to
    /// its root. No ledger is needed.
    pub fn check(&self, trusted: &[VerifierKey]) -> Result<(), ProofError> {
        let root = signed_root(
            self.checkpoint.as_deref(),
            trusted,
            self.tree_size,
            &self.root,
        )?;
        if self.seq == 0 || self.index != self.seq - 1 {
            return Err(ProofError::Malformed(format!(
                "index {} is not seq {} - 1",
                self.index, self.seq
            )));
        }
        let entry = crate::from_hex(&self.entry_hash).ok_or_else(|| {
            ProofError::Malformed("entry_hash is not 64 lower-case hex digits".to_owned())
        })?;
        let proof = self
            .proof
            .iter()
            .map(|p| unb64(p).map(TreeHash))
            .collect::<Result<Vec<TreeHashAlias>, _>>()?;
        check_record(
            &proof,
            self.tree_size,
            TreeHash(root),
            self.index,
            TreeHash(leaf_hash(&entry)),
        )
        .map_err(|_| ProofError::Invalid)
    }
}

impl ConsistencyProof {
    /// Checks the proof offline: both checkpoints' signatures under `trusted`, that
    /// each is for its tree, and the path from one root to the other.
    pub fn check(&self, trusted: &[VerifierKey]) -> Result<(), ProofError> {
        signed_root(
            self.old_checkpoint.as_deref(),
            trusted,
            self.old_size,
            &self.old_root,
        )?;
        signed_root(
            self.new_checkpoint.as_deref(),
            trusted,
            self.new_size,
            &self.new_root,
        )?;
        self.check_path()
    }

    /// Checks the hashes only: that the stated old root is a prefix of the stated new
    /// one. Says nothing about who vouches for either root; [`ConsistencyProof::check`]
    /// does.
    pub fn check_path(&self) -> Result<(), ProofError> {
        let proof = self
            .proof
            .iter()
            .map(|p| unb64(p).map(TreeHash))
            .collect::<Result<Vec<TreeHashAlias>, _>>()?;
        check_tree(
            &proof,
            self.new_size,
            TreeHash(unb64(&self.new_root)?),
            self.old_size,
            TreeHash(unb64(&self.old_root)?),
        )
        .map_err(|_| ProofError::Invalid)
    }
}

/// The root a signed checkpoint vouches for, after checking that it is the proof's
/// `size` and `root`.
fn signed_root(
    note: Option<&str>,
    trusted: &[VerifierKey],
    size: u64,
    root: &str,
) -> Result<Hash, ProofError> {
    let note = note.ok_or(ProofError::NoCheckpoint { size })?;
    let body = open_checkpoint(note.as_bytes(), trusted)
        .map_err(|e| ProofError::Checkpoint(e.to_string()))?;
    let stated = unb64(root)?;
    if body.size != size || body.root != stated {
        return Err(ProofError::CheckpointDisagrees {
            checkpoint_size: body.size,
            checkpoint_root: b64(&body.root),
            size,
            root: root.to_owned(),
        });
    }
    Ok(stated)
}

fn b64(hash: &Hash) -> String {
    crate::verify::b64(hash)
}

fn unb64(text: &str) -> Result<Hash, ProofError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()
        .and_then(|bytes| Hash::try_from(bytes).ok())
        .ok_or_else(|| ProofError::Malformed(format!("{text:?} is not a base64 32-byte hash")))
}

//! Pruning: removing old entries' bodies behind a signed checkpoint.
//!
//! The tree keeps every stored hash, so the remaining entries' inclusion proofs still
//! check; the last removed entry's hash is kept, so the remaining chain still links;
//! and verification binds that hash to a signed root with an inclusion proof.

use std::time::SystemTime;

use crate::archive::ArchiveWriter;
use crate::canonical::{entry_hash, from_hex, Hash};
use crate::clock::format_ts;
use crate::source::Source;
use crate::store::PruneCut;
use crate::{Ledger, LedgerError, SigningKey, StoredCheckpoint};

/// What a prune removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries removed by this run.
    pub removed: u64,
    /// All entries up to this seq are now gone (0: none).
    pub pruned_through: u64,
    /// The checkpoint signed before removing anything.
    pub checkpoint: StoredCheckpoint,
}

impl Ledger {
    /// Signs a checkpoint with `key`, then removes the entries older than `cutoff` that
    /// it covers. The newest entry always stays.
    ///
    /// Verify first: pruning a tampered prefix would remove the evidence.
    pub fn prune(&self, cutoff: SystemTime, key: &SigningKey) -> Result<PruneReport, LedgerError> {
        self.prune_into(cutoff, key, None)
    }

    /// [`Ledger::prune`], writing the removed rows and the checkpoint that covers them
    /// to `archive` first (see [`crate::Archive`]); the rows are removed only once the
    /// archive is written and flushed.
    pub fn prune_archived(
        &self,
        cutoff: SystemTime,
        key: &SigningKey,
        archive: &mut dyn std::io::Write,
    ) -> Result<PruneReport, LedgerError> {
        self.prune_into(cutoff, key, Some(archive))
    }

    /// The order of checks, the same on every store, all inside the store's write
    /// transaction after the checkpoint: choose the last entry to remove; check its
    /// body against its stored hash (its hash becomes the boundary the rest of the
    /// chain links to, so a tampered one is refused before anything is written); only
    /// then write the archive and flush it; then the store removes the rows and
    /// records the boundary, together.
    fn prune_into(
        &self,
        cutoff: SystemTime,
        key: &SigningKey,
        archive: Option<&mut dyn std::io::Write>,
    ) -> Result<PruneReport, LedgerError> {
        let (checkpoint, _) = self.checkpoint(key)?;
        let mut writer = ArchiveWriter::new(archive);
        let mut already = 0;
        let mut through = 0;
        let removed = self.store.prune(&mut |src| {
            let boundary = src.pruned()?;
            already = boundary.map_or(0, |(seq, _)| seq);
            let Some(last) = prune_through(src, cutoff, checkpoint.size)? else {
                return Ok(None);
            };
            through = last;
            let mut stored = None;
            src.rows(last, &mut |row| {
                if row.seq == last {
                    stored = Some((row.hash.to_vec(), entry_hash(row.body)));
                }
                Ok(false)
            })?;
            let hash =
                match stored {
                    Some((stored, hash)) if stored == hash => hash,
                    _ => return Err(LedgerError::BadRow {
                        seq: last,
                        detail:
                            "its body does not match its hash; run `attest verify` before pruning"
                                .to_owned(),
                    }),
                };
            if writer.is_open() {
                let prev = boundary.map_or(crate::GENESIS, |(_, hash)| hash);
                writer.header(already + 1, last, &prev, &checkpoint.note)?;
                src.rows(already + 1, &mut |row| {
                    if row.seq > last {
                        return Ok(false);
                    }
                    writer.row(row)?;
                    Ok(true)
                })?;
                // The archive is complete and flushed before the rows go.
                writer.finish()?;
            }
            Ok(Some(PruneCut {
                through: last,
                hash,
            }))
        })?;
        Ok(match removed {
            Some(removed) => PruneReport {
                removed,
                pruned_through: through,
                checkpoint,
            },
            None => PruneReport {
                removed: 0,
                pruned_through: already,
                checkpoint,
            },
        })
    }

    /// How many entries [`Ledger::prune`] with `cutoff` would remove now (it signs the
    /// ledger as it is, so the checkpoint would cover every entry). Reads only.
    pub fn prune_count(&self, cutoff: SystemTime) -> Result<u64, LedgerError> {
        self.read(|src| {
            let size = src.tip()?.map_or(0, |(seq, _)| seq);
            let already = src.pruned()?.map_or(0, |(seq, _)| seq);
            Ok(prune_through(src, cutoff, size)?.map_or(0, |through| through - already))
        })
    }
}

/// The newest entry a prune behind a checkpoint of `size` removes: older than
/// `cutoff`, covered by the checkpoint, never the newest entry, and not pruned yet.
fn prune_through(
    src: &dyn Source,
    cutoff: SystemTime,
    size: u64,
) -> Result<Option<u64>, LedgerError> {
    let already = src.pruned()?.map_or(0, |(seq, _)| seq);
    let tip = src.tip()?.map_or(0, |(seq, _)| seq);
    let below_tip = size.min(tip.saturating_sub(1));
    let last = src.newest_before(&format_ts(cutoff), below_tip)?;
    Ok(last.filter(|&seq| seq > already))
}

/// The prune boundary from its two `attest_meta` values, as either store keeps them.
pub(crate) fn boundary(
    seq: Option<String>,
    hash: Option<String>,
) -> Result<Option<(u64, Hash)>, LedgerError> {
    let (Some(seq), Some(hash)) = (seq, hash) else {
        return Ok(None);
    };
    let bad = |detail: &str| LedgerError::BadRow {
        seq: 0,
        detail: format!("prune boundary in attest_meta: {detail}"),
    };
    let seq: u64 = seq
        .parse()
        .map_err(|_| bad("pruned_through is not a number"))?;
    let hash = from_hex(&hash).ok_or_else(|| bad("pruned_hash is not 64 hex digits"))?;
    Ok(Some((seq, hash)))
}

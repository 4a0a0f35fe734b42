//! Pruning: removing old entries' bodies behind a signed checkpoint.
//!
//! The tree keeps every stored hash, so the remaining entries' inclusion proofs still
//! check; the last removed entry's hash is kept, so the remaining chain still links;
//! and verification binds that hash to a signed root with an inclusion proof.

use std::time::SystemTime;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::canonical::{entry_hash, from_hex, to_hex, Hash};
use crate::clock::format_ts;
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

    fn prune_into(
        &self,
        cutoff: SystemTime,
        key: &SigningKey,
        archive: Option<&mut dyn std::io::Write>,
    ) -> Result<PruneReport, LedgerError> {
        if let Some(pg) = self.pg() {
            let mut writer = crate::archive::ArchiveWriter::new(archive);
            return pg.prune(cutoff, key, self.now(), &mut writer);
        }
        let (checkpoint, _) = self.checkpoint(key)?;
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting a prune"))?;
        let already = self.pruned_in(&tx)?.map(|(seq, _)| seq).unwrap_or(0);
        let Some(through) = self.prune_through_in(&tx, cutoff, checkpoint.size)? else {
            return Ok(PruneReport {
                removed: 0,
                pruned_through: already,
                checkpoint,
            });
        };
        let (stored, body): (Vec<u8>, Vec<u8>) = tx
            .query_row(
                "SELECT hash, CAST(body AS BLOB) FROM entries WHERE seq = ?1",
                [through],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(self.sqlite("reading the last entry to prune"))?;
        let hash = entry_hash(&body);
        if stored != hash {
            return Err(LedgerError::BadRow {
                seq: through,
                detail: "its body does not match its hash; run `attest verify` before pruning"
                    .to_owned(),
            });
        }
        if let Some(out) = archive {
            let prev = self
                .pruned_in(&tx)?
                .map_or(crate::GENESIS, |(_, hash)| hash);
            let mut writer = crate::archive::ArchiveWriter::new(Some(out));
            writer.header(already + 1, through, &prev, &checkpoint.note)?;
            self.for_each_row_in(&tx, already + 1, |row| {
                if row.seq > through {
                    return Ok(false);
                }
                writer.row(row)?;
                Ok(true)
            })?;
            writer.finish()?;
        }
        // Pruned rows stay counted: the entries not filed yet are filed before they go.
        let mut edge = self.edge_in(&tx)?;
        self.file_tail(&tx, &mut edge)?;
        let removed = tx
            .execute("DELETE FROM entries WHERE seq <= ?1", [through])
            .map_err(self.sqlite("removing entries"))?;
        tx.execute("DELETE FROM lookups WHERE seq <= ?1", [through])
            .map_err(self.sqlite("removing entries"))?;
        tx.execute(
            "INSERT OR REPLACE INTO attest_meta (key, value) VALUES ('pruned_through', ?1), ('pruned_hash', ?2)",
            params![through.to_string(), to_hex(&hash)],
        )
        .map_err(self.sqlite("recording the prune"))?;
        // Commit point: the rows are gone and the boundary is recorded, together.
        tx.commit().map_err(self.sqlite("committing a prune"))?;
        self.keep_edge(edge);
        Ok(PruneReport {
            removed: removed as u64,
            pruned_through: through,
            checkpoint,
        })
    }

    /// How many entries [`Ledger::prune`] with `cutoff` would remove now (it signs the
    /// ledger as it is, so the checkpoint would cover every entry). Reads only.
    pub fn prune_count(&self, cutoff: SystemTime) -> Result<u64, LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.prune_count(cutoff);
        }
        let conn = self.lock()?;
        let size = self.tip_in(&conn)?.map_or(0, |(seq, _)| seq);
        let already = self.pruned_in(&conn)?.map_or(0, |(seq, _)| seq);
        Ok(self
            .prune_through_in(&conn, cutoff, size)?
            .map_or(0, |through| through - already))
    }

    /// The newest entry a prune behind a checkpoint of `size` removes: older than
    /// `cutoff`, covered by the checkpoint, never the newest entry, and not pruned yet.
    fn prune_through_in(
        &self,
        conn: &Connection,
        cutoff: SystemTime,
        size: u64,
    ) -> Result<Option<u64>, LedgerError> {
        let already = self.pruned_in(conn)?.map(|(seq, _)| seq).unwrap_or(0);
        let tip = self.tip_in(conn)?.map(|(seq, _)| seq).unwrap_or(0);
        let last: Option<u64> = conn
            .query_row(
                "SELECT MAX(seq) FROM entries WHERE ts < ?1 AND seq <= ?2 AND seq < ?3",
                params![format_ts(cutoff), size, tip],
                |row| row.get(0),
            )
            .map_err(self.sqlite("choosing entries to prune"))?;
        Ok(last.filter(|&seq| seq > already))
    }

    /// The last pruned seq and its entry hash, if anything was pruned.
    pub(crate) fn pruned_in(&self, conn: &Connection) -> Result<Option<(u64, Hash)>, LedgerError> {
        let read = |key: &str| -> Result<Option<String>, LedgerError> {
            conn.query_row(
                "SELECT value FROM attest_meta WHERE key = ?1",
                [key],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.sqlite("reading the prune boundary"))
        };
        let (Some(seq), Some(hash)) = (read("pruned_through")?, read("pruned_hash")?) else {
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
}

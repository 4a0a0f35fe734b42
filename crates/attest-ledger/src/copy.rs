//! Copying a ledger between stores without changing a byte: the same bodies at the
//! same seqs, the same tree hashes, the same signed checkpoints and prune boundary,
//! so both verify, export the same lines and prove against the same signed roots.

use rusqlite::{params, TransactionBehavior};

use crate::canonical::to_hex;
use crate::query::run_and_action;
use crate::source::Source;
use crate::{Ledger, LedgerError};

/// Rows and tree hashes per statement batch.
const CHUNK: u64 = 4096;

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
            let mut copied_row = |copied: u64| {
                if copied % CHUNK == 0 || copied == total {
                    progress(copied, total);
                }
            };
            if let Some(pg) = target.pg() {
                if !pg.is_empty()? {
                    return Err(LedgerError::NotEmpty {
                        path: target.path().to_path_buf(),
                    });
                }
                return pg.copy_from(source, &mut copied_row);
            }
            target.copy_into_sqlite(source, &mut copied_row)
        })
    }

    fn copy_into_sqlite(
        &self,
        source: &dyn Source,
        copied_row: &mut dyn FnMut(u64),
    ) -> Result<u64, LedgerError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting a copy"))?;
        let held: i64 = tx
            .query_row(
                "SELECT (SELECT count(*) FROM entries) + (SELECT count(*) FROM tree_hashes)
                      + (SELECT count(*) FROM checkpoints)",
                [],
                |row| row.get(0),
            )
            .map_err(self.sqlite("checking the ledger is empty"))?;
        if held > 0 || self.pruned_in(&tx)?.is_some() {
            return Err(LedgerError::NotEmpty {
                path: self.path().to_path_buf(),
            });
        }
        let mut copied = 0u64;
        {
            let mut insert = tx
                .prepare_cached(crate::sqlite::INSERT_ENTRY)
                .map_err(self.sqlite("copying entries"))?;
            let from = source.pruned()?.map_or(0, |(seq, _)| seq) + 1;
            source.rows(from, &mut |row| {
                let (run, action_id) = run_and_action(row.body);
                // The body is stored as text, byte for byte (it is canonical JSON, so UTF-8).
                let body = std::str::from_utf8(row.body).map_err(|_| LedgerError::BadRow {
                    seq: row.seq,
                    detail: "body is not UTF-8; run `attest verify` on the source".to_owned(),
                })?;
                insert
                    .execute(params![
                        row.seq,
                        row.hash,
                        row.ts,
                        row.system,
                        row.verb,
                        row.agent,
                        row.decision,
                        row.level,
                        body,
                        run,
                        action_id
                    ])
                    .map_err(self.sqlite("copying entries"))?;
                copied += 1;
                copied_row(copied);
                Ok(true)
            })?;
            let tip = source.tip()?.map_or(0, |(seq, _)| seq);
            // The copied rows filed in one go, as appends file theirs.
            self.file_entries(&tx, 0, tip)?;
            let total = tlog_tiles::stored_hash_count(tip);
            let mut tree = tx
                .prepare_cached(crate::sqlite::INSERT_TREE_HASH)
                .map_err(self.sqlite("copying tree hashes"))?;
            let mut start = 0u64;
            while start < total {
                let end = (start + CHUNK).min(total);
                let indexes: Vec<u64> = (start..end).collect();
                let hashes = source
                    .read_hashes(&indexes)
                    .map_err(|source| LedgerError::Tree { seq: tip, source })?;
                for (idx, hash) in indexes.iter().zip(&hashes) {
                    tree.execute(params![idx, &hash.0[..]])
                        .map_err(self.sqlite("copying tree hashes"))?;
                }
                start = end;
            }
            for cp in source.checkpoints()? {
                tx.execute(
                    "INSERT INTO checkpoints (size, root, note, ts) VALUES (?1, ?2, ?3, ?4)",
                    params![cp.size, &cp.root[..], cp.note, cp.ts],
                )
                .map_err(self.sqlite("copying checkpoints"))?;
            }
            if let Some((seq, hash)) = source.pruned()? {
                tx.execute(
                    "INSERT OR REPLACE INTO attest_meta (key, value) VALUES ('pruned_through', ?1), ('pruned_hash', ?2)",
                    params![seq.to_string(), to_hex(&hash)],
                )
                .map_err(self.sqlite("copying the prune boundary"))?;
            }
        }
        tx.commit().map_err(self.sqlite("committing a copy"))?;
        // The next append reads the new edge from the file.
        self.forget_edge();
        Ok(copied)
    }
}

//! The SQLite store's writes other than appends: storing a checkpoint, removing a
//! pruned prefix, and copying a ledger in. What to sign and what to prune is decided
//! above the store ([`crate::checkpoints`], [`crate::prune`]).

use rusqlite::{params, TransactionBehavior};

use super::read::SqliteSource;
use super::{SqliteStore, INSERT_ENTRY, INSERT_TREE_HASH};
use crate::canonical::to_hex;
use crate::query::run_and_action;
use crate::source::Source;
use crate::store::{Cut, Sign};
use crate::{LedgerError, StoredCheckpoint};

/// Rows and tree hashes per statement batch in a copy.
const CHUNK: u64 = 4096;

impl SqliteStore {
    /// Stores the checkpoint `sign` decides, with the tree hashes appends kept in
    /// memory (a checkpoint writes them).
    pub(crate) fn store_checkpoint(
        &self,
        sign: &mut Sign<'_>,
    ) -> Result<(StoredCheckpoint, bool), LedgerError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting a checkpoint"))?;
        let mut edge = self.edge_in(&tx)?;
        self.write_tree_tail(&tx, &mut edge)?;
        let (checkpoint, new) = sign(&SqliteSource::new(self, &tx))?;
        if !new {
            return Ok((checkpoint, false));
        }
        tx.execute(
            "INSERT INTO checkpoints (size, root, note, ts) VALUES (?1, ?2, ?3, ?4)",
            params![
                checkpoint.size,
                &checkpoint.root[..],
                &checkpoint.note,
                &checkpoint.ts
            ],
        )
        .map_err(self.sqlite("storing a checkpoint"))?;
        // Commit point: the checkpoint is stored once this returns.
        tx.commit().map_err(self.sqlite("storing a checkpoint"))?;
        self.keep_edge(edge);
        Ok((checkpoint, true))
    }

    /// Removes the entries through the cut `cut` decides, and records the boundary.
    pub(crate) fn remove_prefix(&self, cut: &mut Cut<'_>) -> Result<Option<u64>, LedgerError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting a prune"))?;
        let Some(cut) = cut(&SqliteSource::new(self, &tx))? else {
            return Ok(None);
        };
        // Pruned rows stay counted: the entries not filed yet are filed before they go.
        let mut edge = self.edge_in(&tx)?;
        self.file_tail(&tx, &mut edge)?;
        let removed = tx
            .execute("DELETE FROM entries WHERE seq <= ?1", [cut.through])
            .map_err(self.sqlite("removing entries"))?;
        tx.execute("DELETE FROM lookups WHERE seq <= ?1", [cut.through])
            .map_err(self.sqlite("removing entries"))?;
        tx.execute(
            "INSERT OR REPLACE INTO attest_meta (key, value) VALUES ('pruned_through', ?1), ('pruned_hash', ?2)",
            params![cut.through.to_string(), to_hex(&cut.hash)],
        )
        .map_err(self.sqlite("recording the prune"))?;
        // Commit point: the rows are gone and the boundary is recorded, together.
        tx.commit().map_err(self.sqlite("committing a prune"))?;
        self.keep_edge(edge);
        Ok(Some(removed as u64))
    }

    pub(crate) fn copy_from(&self, source: &dyn Source) -> Result<u64, LedgerError> {
        let mut conn = self.lock();
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
        if held > 0 || self.meta_in(&tx, "pruned_through")?.is_some() {
            return Err(LedgerError::NotEmpty {
                path: self.path.clone(),
            });
        }
        let mut copied = 0u64;
        {
            let mut insert = tx
                .prepare_cached(INSERT_ENTRY)
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
                Ok(true)
            })?;
            let tip = source.tip()?.map_or(0, |(seq, _)| seq);
            // The copied rows filed in one go, as appends file theirs.
            self.file_entries(&tx, 0, tip)?;
            let total = tlog_tiles::stored_hash_count(tip);
            let mut tree = tx
                .prepare_cached(INSERT_TREE_HASH)
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

//! The PostgreSQL store's writes other than appends: storing a checkpoint, removing a
//! pruned prefix, and copying a ledger in. What to sign and what to prune is decided
//! above the store ([`crate::checkpoints`], [`crate::prune`]).

use postgres::Transaction;

use super::append::{AppendArgs, Filing};
use super::blocking::Held;
use super::read::PAGE;
use super::PgStore;
use crate::canonical::to_hex;
use crate::source::Source;
use crate::store::{Cut, Sign};
use crate::{LedgerError, StoredCheckpoint, StoredRow};

impl PgStore {
    /// Stores the checkpoint `sign` decides on a snapshot of this transaction.
    pub(crate) fn store_checkpoint(
        &self,
        sign: &mut Sign<'_>,
    ) -> Result<(StoredCheckpoint, bool), LedgerError> {
        self.snapshot(true, |source| {
            let (checkpoint, new) = sign(&source)?;
            if !new {
                return Ok((checkpoint, false));
            }
            let mut tx = source.into_transaction();
            let inserted = tx
                .execute(
                    "INSERT INTO checkpoints (tenant, size, root, note, ts) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (tenant, size) DO NOTHING",
                    &[
                        &self.tenant,
                        &(checkpoint.size as i64),
                        &&checkpoint.root[..],
                        &checkpoint.note,
                        &checkpoint.ts,
                    ],
                )
                .map_err(self.err("storing a checkpoint"))?;
            tx.commit().map_err(self.err("storing a checkpoint"))?;
            Ok((checkpoint, inserted == 1))
        })
    }

    /// Removes the entries through the cut `cut` decides, and records the boundary.
    pub(crate) fn remove_prefix(&self, cut: &mut Cut<'_>) -> Result<Option<u64>, LedgerError> {
        self.snapshot(true, |source| {
            let Some(cut) = cut(&source)? else {
                return Ok(None);
            };
            // Pruned rows stay counted: the entries not filed yet are filed before they go.
            let filed = crate::query::filed_through(&source)?.unwrap_or(0);
            let tip = source.tip()?.map_or(0, |(seq, _)| seq);
            let mut tx = source.into_transaction();
            if tip > filed {
                let filing = Filing {
                    file: true,
                    after: filed,
                    through: tip,
                };
                let tenant = self.tenant.as_str();
                tx.with(|tx| AppendArgs::new(tenant, filing).run(tx))
                    .map_err(self.err("filing entries"))?;
            }
            let removed = tx
                .execute(
                    "DELETE FROM entries WHERE tenant = $1 AND seq <= $2",
                    &[&self.tenant, &(cut.through as i64)],
                )
                .map_err(self.err("removing entries"))?;
            tx.execute(
                "DELETE FROM lookups WHERE tenant = $1 AND seq <= $2",
                &[&self.tenant, &(cut.through as i64)],
            )
            .map_err(self.err("removing entries"))?;
            for (key, value) in [
                ("pruned_through", cut.through.to_string()),
                ("pruned_hash", to_hex(&cut.hash)),
            ] {
                tx.execute(
                    "INSERT INTO attest_meta (tenant, key, value) VALUES ($1, $2, $3)
                     ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
                    &[&self.tenant, &key, &value],
                )
                .map_err(self.err("recording the prune"))?;
            }
            // Commit point: the rows are gone and the boundary is recorded, together.
            tx.commit().map_err(self.err("committing a prune"))?;
            // The cached edge's filing extent moved.
            *self.edge_slot() = None;
            Ok(Some(removed))
        })
    }

    /// Whether this tenant holds nothing (the target of a copy must not).
    fn is_empty(&self) -> Result<bool, LedgerError> {
        let mut client = self.client()?;
        for table in [
            "entries",
            "tree_hashes",
            "checkpoints",
            "attest_meta",
            "lookups",
        ] {
            let found = client
                .query_opt(
                    &format!("SELECT 1 FROM {table} WHERE tenant = $1 LIMIT 1"),
                    &[&self.tenant],
                )
                .map_err(self.err("checking the ledger is empty"))?;
            if found.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Writes a copy in one transaction: rows (with counters recomputed), every tree
    /// hash, checkpoints and the prune boundary, exactly as read from `source`.
    pub(crate) fn copy_from(&self, source: &dyn Source) -> Result<u64, LedgerError> {
        if !self.is_empty()? {
            return Err(LedgerError::NotEmpty {
                path: self.name.clone(),
            });
        }
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(self.err("starting a copy"))?;
        let tenant = self.tenant.as_str();
        let mut copied = 0u64;
        let mut batch: Vec<OwnedRow> = Vec::new();
        let flush = |tx: &mut Held<Transaction<'_>>,
                     batch: &mut Vec<OwnedRow>|
         -> Result<(), LedgerError> {
            if batch.is_empty() {
                return Ok(());
            }
            let rows = &*batch;
            tx.with(|tx| insert_rows(tx, tenant, rows))
                .map_err(self.err("copying entries"))?;
            batch.clear();
            Ok(())
        };
        let from = source.pruned()?.map_or(0, |(seq, _)| seq) + 1;
        source.rows(from, &mut |row| {
            batch.push(OwnedRow::from(row));
            copied += 1;
            if batch.len() as i64 >= PAGE {
                flush(&mut tx, &mut batch)?;
            }
            Ok(true)
        })?;
        flush(&mut tx, &mut batch)?;
        let tip = source.tip()?.map_or(0, |(seq, _)| seq);
        let count = tlog_tiles::stored_hash_count(tip);
        let mut start = 0u64;
        while start < count {
            let end = (start + PAGE as u64).min(count);
            let indexes: Vec<u64> = (start..end).collect();
            let hashes = source
                .read_hashes(&indexes)
                .map_err(|source| LedgerError::Tree { seq: tip, source })?;
            let idx: Vec<i64> = indexes.iter().map(|&i| i as i64).collect();
            let bytes: Vec<&[u8]> = hashes.iter().map(|h| &h.0[..]).collect();
            tx.execute(
                "INSERT INTO tree_hashes (tenant, idx, hash) SELECT $1, * FROM UNNEST($2::int8[], $3::bytea[])",
                &[&tenant, &idx, &bytes],
            )
            .map_err(self.err("copying tree hashes"))?;
            start = end;
        }
        for cp in source.checkpoints()? {
            tx.execute(
                "INSERT INTO checkpoints (tenant, size, root, note, ts) VALUES ($1, $2, $3, $4, $5)",
                &[&tenant, &(cp.size as i64), &&cp.root[..], &cp.note, &cp.ts],
            )
            .map_err(self.err("copying checkpoints"))?;
        }
        if let Some((seq, hash)) = source.pruned()? {
            for (key, value) in [
                ("pruned_through", seq.to_string()),
                ("pruned_hash", to_hex(&hash)),
            ] {
                tx.execute(
                    "INSERT INTO attest_meta (tenant, key, value) VALUES ($1, $2, $3)",
                    &[&tenant, &key, &value],
                )
                .map_err(self.err("copying the prune boundary"))?;
            }
        }
        tx.commit().map_err(self.err("committing a copy"))?;
        *self.edge_slot() = None;
        Ok(copied)
    }
}

/// A row copied out of a source, for a copy into PostgreSQL.
struct OwnedRow {
    seq: u64,
    hash: Vec<u8>,
    ts: String,
    system: String,
    verb: String,
    agent: Option<String>,
    decision: String,
    level: Option<String>,
    run: Option<String>,
    action_id: Option<String>,
    body: Vec<u8>,
}

impl From<&StoredRow<'_>> for OwnedRow {
    fn from(row: &StoredRow<'_>) -> OwnedRow {
        let (run, action_id) = crate::query::run_and_action(row.body);
        OwnedRow {
            seq: row.seq,
            hash: row.hash.to_vec(),
            ts: row.ts.to_owned(),
            system: row.system.to_owned(),
            verb: row.verb.to_owned(),
            agent: row.agent.map(str::to_owned),
            decision: row.decision.to_owned(),
            level: row.level.map(str::to_owned),
            run,
            action_id,
            body: row.body.to_vec(),
        }
    }
}

/// Inserts copied rows and files them.
fn insert_rows(
    tx: &mut Transaction<'_>,
    tenant: &str,
    rows: &[OwnedRow],
) -> Result<(), postgres::Error> {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(());
    };
    // The rows before these are filed already; these are filed as they go in.
    let filing = Filing {
        file: true,
        after: first.seq.saturating_sub(1),
        through: last.seq,
    };
    let mut args = AppendArgs::new(tenant, filing);
    for row in rows {
        args.seqs.push(row.seq as i64);
        args.hashes.push(&row.hash);
        args.ts.push(&row.ts);
        args.system.push(&row.system);
        args.verb.push(&row.verb);
        args.agent.push(row.agent.as_deref());
        args.decision.push(&row.decision);
        args.level.push(row.level.as_deref());
        args.run.push(row.run.as_deref());
        args.action.push(row.action_id.as_deref());
        args.bodies.push(&row.body);
    }
    args.run(tx)
}

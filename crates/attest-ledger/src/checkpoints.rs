//! Stored checkpoints: signing the current tree, listing, and the tree's roots.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::canonical::Hash;
use crate::clock::format_ts;
use crate::source::root;
use crate::sqlite_read::SqliteSource;
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
        if let Some(pg) = self.pg() {
            return pg.checkpoint(key, self.now());
        }
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting a checkpoint"))?;
        let Some((size, _)) = self.tip_in(&tx)? else {
            return Err(LedgerError::Empty {
                path: self.path().to_path_buf(),
            });
        };
        if let Some(existing) = self.checkpoint_at_in(&tx, size)? {
            return Ok((existing, false));
        }
        // The tree hashes appends kept in memory go to the file with the checkpoint.
        let mut edge = self.edge_in(&tx)?;
        self.write_tree_tail(&tx, &mut edge)?;
        let root = root(&SqliteSource::new(self, &tx), size)?;
        let note = sign_checkpoint(key, size, &root)?;
        let ts = format_ts(self.now());
        tx.execute(
            "INSERT INTO checkpoints (size, root, note, ts) VALUES (?1, ?2, ?3, ?4)",
            params![size, &root[..], &note, &ts],
        )
        .map_err(self.sqlite("storing a checkpoint"))?;
        // Commit point: the checkpoint is stored once this returns.
        tx.commit().map_err(self.sqlite("storing a checkpoint"))?;
        self.keep_edge(edge);
        Ok((
            StoredCheckpoint {
                size,
                root,
                note,
                ts,
            },
            true,
        ))
    }

    /// Every stored checkpoint, smallest first.
    pub fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.read(|src| src.checkpoints())
    }

    /// The newest stored checkpoint, if any.
    pub fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.read(|src| src.latest_checkpoint())
    }

    pub(crate) fn checkpoints_in(
        &self,
        conn: &Connection,
    ) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        let mut stmt = conn
            .prepare_cached("SELECT size, root, note, ts FROM checkpoints ORDER BY size")
            .map_err(self.sqlite("reading checkpoints"))?;
        let rows = stmt
            .query_map([], read_checkpoint)
            .map_err(self.sqlite("reading checkpoints"))?;
        rows.map(|row| row.map_err(self.sqlite("reading checkpoints"))?)
            .collect()
    }

    /// The newest stored checkpoint only: one row read, however many there are.
    pub(crate) fn latest_checkpoint_in(
        &self,
        conn: &Connection,
    ) -> Result<Option<StoredCheckpoint>, LedgerError> {
        conn.prepare_cached(
            "SELECT size, root, note, ts FROM checkpoints ORDER BY size DESC LIMIT 1",
        )
        .and_then(|mut stmt| stmt.query_row([], read_checkpoint).optional())
        .map_err(self.sqlite("reading the newest checkpoint"))?
        .transpose()
    }

    fn checkpoint_at_in(
        &self,
        conn: &Connection,
        size: u64,
    ) -> Result<Option<StoredCheckpoint>, LedgerError> {
        conn.query_row(
            "SELECT size, root, note, ts FROM checkpoints WHERE size = ?1",
            [size],
            read_checkpoint,
        )
        .optional()
        .map_err(self.sqlite("reading a checkpoint"))?
        .transpose()
    }

    /// The Merkle root of the first `size` entries, from stored hashes in O(log n).
    pub fn root_at(&self, size: u64) -> Result<Hash, LedgerError> {
        self.read(|src| root(src, size))
    }
}

type CheckpointRow = Result<StoredCheckpoint, LedgerError>;

fn read_checkpoint(row: &rusqlite::Row<'_>) -> rusqlite::Result<CheckpointRow> {
    let size: u64 = row.get(0)?;
    let root: Vec<u8> = row.get(1)?;
    let note: String = row.get(2)?;
    let ts: String = row.get(3)?;
    Ok(match Hash::try_from(root) {
        Ok(root) => Ok(StoredCheckpoint {
            size,
            root,
            note,
            ts,
        }),
        Err(_) => Err(LedgerError::BadRow {
            seq: size,
            detail: "checkpoint root is not 32 bytes".to_owned(),
        }),
    })
}

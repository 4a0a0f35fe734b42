//! The SQLite store's recent calls by digest (see [`crate::calls`]): one `IMMEDIATE`
//! transaction holds the file's write lock from the row's read to the commit.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::SqliteStore;
use crate::calls::{CallWrite, Riding, SettleCall, StoredCall};
use crate::LedgerError;

/// The call digests table; created by schema version 5. Every read and write is of one
/// digest (its primary key), or, rarely, of one action (a person resolving an intent:
/// a scan of a table that holds only open calls and recent ones).
pub(crate) const CALLS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS call_digests (
    digest    BLOB NOT NULL PRIMARY KEY,
    action_id TEXT NOT NULL,
    owner     TEXT NOT NULL,
    seq       INTEGER,
    at_ms     INTEGER NOT NULL,
    until_ms  INTEGER NOT NULL
) WITHOUT ROWID;";

impl SqliteStore {
    pub(crate) fn settle_call(
        &self,
        digest: [u8; 32],
        settle: Option<&mut SettleCall<'_>>,
    ) -> Result<Option<StoredCall>, LedgerError> {
        let mut conn = self.lock();
        let during = "checking a call digest";
        let behavior = match settle {
            Some(_) => TransactionBehavior::Immediate,
            None => TransactionBehavior::Deferred,
        };
        // At `full` durability a claim or finish commits without its own sync: in WAL
        // mode the intent's commit, which syncs, makes every earlier frame durable, the
        // claim's included; a finish lost to a power cut leaves the call open, and a
        // retry then reads its outcome row (see `crate::calls`).
        let relaxed = settle.is_some() && self.durability == crate::Durability::Full;
        if relaxed {
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(self.sqlite("relaxing durability for a call digest"))?;
        }
        let settled = Self::settle_call_in(self, &mut conn, digest, behavior, settle, during);
        if relaxed {
            conn.pragma_update(None, "synchronous", self.durability.pragma())
                .map_err(self.sqlite("restoring durability"))?;
        }
        settled
    }

    fn settle_call_in(
        &self,
        conn: &mut rusqlite::Connection,
        digest: [u8; 32],
        behavior: TransactionBehavior,
        settle: Option<&mut SettleCall<'_>>,
        during: &'static str,
    ) -> Result<Option<StoredCall>, LedgerError> {
        let tx = conn
            .transaction_with_behavior(behavior)
            .map_err(self.sqlite(during))?;
        let row = match settle {
            None => return self.call_row(&tx, digest, during),
            Some(settle) => self.settle_call_tx(&tx, digest, &mut |row| Ok(settle(row)), during)?,
        };
        // Commit point: the digest is claimed (or finished) once this returns; a failure
        // leaves the row as it was, and the caller does not run the call.
        tx.commit().map_err(self.sqlite(during))?;
        Ok(row)
    }

    /// Makes the steps riding with an append, inside its transaction, after its rows
    /// (`seqs`: the records' seqs, by index).
    pub(crate) fn ride_calls(
        &self,
        conn: &Connection,
        calls: &[Riding<'_>],
        seqs: &[u64],
    ) -> Result<(), LedgerError> {
        let during = "settling a call digest with its row";
        crate::calls::ride(calls, seqs, &mut |digest, write| {
            self.settle_call_tx(conn, digest, write, during).map(drop)
        })
    }

    fn call_row(
        &self,
        conn: &Connection,
        digest: [u8; 32],
        during: &'static str,
    ) -> Result<Option<StoredCall>, LedgerError> {
        conn.prepare_cached(
            "SELECT action_id, owner, seq, at_ms, until_ms FROM call_digests WHERE digest = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_row(params![&digest[..]], |row| {
                Ok(StoredCall {
                    action_id: row.get(0)?,
                    owner: row.get(1)?,
                    seq: row.get(2)?,
                    at_ms: row.get(3)?,
                    until_ms: row.get(4)?,
                })
            })
            .optional()
        })
        .map_err(self.sqlite(during))
    }

    /// Reads the digest's row and writes what `settle` decides, inside the caller's
    /// write transaction; returns the row read.
    fn settle_call_tx(
        &self,
        conn: &Connection,
        digest: [u8; 32],
        settle: &mut dyn FnMut(Option<&StoredCall>) -> Result<CallWrite, LedgerError>,
        during: &'static str,
    ) -> Result<Option<StoredCall>, LedgerError> {
        let row = self.call_row(conn, digest, during)?;
        let written = match settle(row.as_ref())? {
            CallWrite::Keep => return Ok(row),
            CallWrite::Put(call) => conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO call_digests (digest, action_id, owner, seq, at_ms, until_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        &digest[..],
                        call.action_id,
                        call.owner,
                        call.seq,
                        call.at_ms,
                        call.until_ms
                    ])
                }),
            CallWrite::Delete => conn
                .prepare_cached("DELETE FROM call_digests WHERE digest = ?1")
                .and_then(|mut stmt| stmt.execute(params![&digest[..]])),
        };
        written.map_err(self.sqlite(during))?;
        Ok(row)
    }

    pub(crate) fn forget_call_rows(&self, action_id: &str) -> Result<u64, LedgerError> {
        let conn = self.lock();
        let gone = conn
            .execute(
                "DELETE FROM call_digests WHERE action_id = ?1",
                params![action_id],
            )
            .map_err(self.sqlite("forgetting a call digest"))?;
        Ok(gone as u64)
    }
}

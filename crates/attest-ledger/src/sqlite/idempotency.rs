//! The SQLite store's idempotency keys (see [`crate::idempotency`]): one `IMMEDIATE`
//! transaction holds the file's write lock from the expiry sweep to the claim's commit.

use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::SqliteStore;
use crate::idempotency::{KeyChange, KeyRow, KeyState, KeysPurged, StoredKey};
use crate::LedgerError;

/// The idempotency keys table; created by schema version 5. A rowid table (a replay can
/// be large, and a `WITHOUT ROWID` row holds it in the key's b-tree page).
pub(crate) const KEYS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key        BLOB PRIMARY KEY,
    digest     TEXT NOT NULL,
    action_id  TEXT NOT NULL,
    claimed_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    intent_seq INTEGER,
    outcome    TEXT,
    replay     BLOB
);";

const DELETE_EXPIRED: &str = "DELETE FROM idempotency_keys WHERE expires_ms <= ?1";

impl SqliteStore {
    pub(crate) fn claim_idempotency_key(
        &self,
        now_ms: i64,
        claim: &StoredKey<'_>,
    ) -> Result<KeyState, LedgerError> {
        let mut conn = self.lock();
        let during = "claiming an idempotency key";
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite(during))?;
        tx.execute(DELETE_EXPIRED, [now_ms])
            .map_err(self.sqlite(during))?;
        let row = tx
            .query_row(
                "SELECT digest, action_id, claimed_ms, intent_seq, outcome, replay
                 FROM idempotency_keys WHERE key = ?1",
                [&claim.key[..]],
                |row| {
                    Ok(KeyRow {
                        digest: row.get(0)?,
                        action_id: row.get(1)?,
                        claimed_ms: row.get(2)?,
                        intent_seq: row.get(3)?,
                        outcome: row.get(4)?,
                        replay: row.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(self.sqlite(during))?;
        let state = match row {
            Some(row) => row.state(claim.digest, now_ms),
            None => {
                tx.execute(
                    "INSERT INTO idempotency_keys (key, digest, action_id, claimed_ms, expires_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        &claim.key[..],
                        claim.digest,
                        claim.action_id,
                        now_ms,
                        claim.expires_ms
                    ],
                )
                .map_err(self.sqlite(during))?;
                KeyState::Claimed
            }
        };
        // Commit point: the key is this call's once this returns; a failed commit
        // claims nothing, and the caller does not run the call.
        tx.commit().map_err(self.sqlite(during))?;
        Ok(state)
    }

    pub(crate) fn change_idempotency_key(
        &self,
        key: &[u8; 32],
        action_id: &str,
        change: KeyChange<'_>,
    ) -> Result<(), LedgerError> {
        let conn = self.lock();
        let during = "updating an idempotency key";
        let key = &key[..];
        match change {
            KeyChange::Intent(seq) => conn.execute(
                "UPDATE idempotency_keys SET intent_seq = ?3
                 WHERE key = ?1 AND action_id = ?2 AND outcome IS NULL",
                params![key, action_id, i64::try_from(seq).unwrap_or(i64::MAX)],
            ),
            KeyChange::Done { outcome, replay } => conn.execute(
                "UPDATE idempotency_keys SET outcome = ?3, replay = ?4
                 WHERE key = ?1 AND action_id = ?2 AND outcome IS NULL",
                params![key, action_id, outcome, replay],
            ),
            KeyChange::Release => conn.execute(
                "DELETE FROM idempotency_keys
                 WHERE key = ?1 AND action_id = ?2 AND outcome IS NULL",
                params![key, action_id],
            ),
        }
        .map(drop)
        .map_err(self.sqlite(during))
    }

    pub(crate) fn purge_idempotency_keys(&self, now_ms: i64) -> Result<KeysPurged, LedgerError> {
        let mut conn = self.lock();
        let during = "removing expired idempotency keys";
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite(during))?;
        let removed = tx
            .execute(DELETE_EXPIRED, [now_ms])
            .map_err(self.sqlite(during))?;
        let held: i64 = tx
            .query_row("SELECT count(*) FROM idempotency_keys", [], |row| {
                row.get(0)
            })
            .map_err(self.sqlite(during))?;
        tx.commit().map_err(self.sqlite(during))?;
        Ok(KeysPurged {
            removed: removed as u64,
            held: u64::try_from(held).unwrap_or(0),
        })
    }
}

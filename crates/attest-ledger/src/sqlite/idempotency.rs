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

/// A row claimed before keys were scoped, by the SHA-256 of its text alone.
const UNSCOPED: &str = "SELECT intent_seq FROM idempotency_keys WHERE key = ?1";

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
        let unscoped = || {
            tx.query_row(UNSCOPED, [&claim.unscoped[..]], |row| {
                row.get::<_, Option<i64>>(0)
            })
            .optional()
        };
        let state = match row {
            Some(row) => row.state(claim.digest, now_ms),
            None => match unscoped().map_err(self.sqlite(during))? {
                Some(intent_seq) => KeyRow::unbound(intent_seq),
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
            },
        };
        // Commit point: the key is this call's once this returns; a failed commit
        // claims nothing, and the caller does not run the call.
        tx.commit().map_err(self.sqlite(during))?;
        Ok(state)
    }

    pub(crate) fn change_idempotency_key(
        &self,
        key: Option<&[u8; 32]>,
        action_id: &str,
        change: KeyChange<'_>,
    ) -> Result<(), LedgerError> {
        let conn = self.lock();
        let during = "updating an idempotency key";
        // Without a key: the row `action_id` holds, found by a scan (a settled intent's,
        // rare); with one, by the key.
        let only = if key.is_some() { "key = ?1 AND" } else { "" };
        let key = key.map(|k| &k[..]);
        match change {
            KeyChange::Intent(seq) => conn.execute(
                &format!(
                    "UPDATE idempotency_keys SET intent_seq = ?3
                     WHERE {only} action_id = ?2 AND outcome IS NULL"
                ),
                params![key, action_id, i64::try_from(seq).unwrap_or(i64::MAX)],
            ),
            KeyChange::Done { outcome, replay } => conn.execute(
                &format!(
                    "UPDATE idempotency_keys SET outcome = ?3, replay = ?4
                     WHERE {only} action_id = ?2 AND outcome IS NULL"
                ),
                params![key, action_id, outcome, replay],
            ),
            KeyChange::Release => conn.execute(
                &format!(
                    "DELETE FROM idempotency_keys
                     WHERE {only} action_id = ?2 AND outcome IS NULL"
                ),
                params![key, action_id],
            ),
        }
        .map(drop)
        .map_err(self.sqlite(during))
    }

    /// The secret keyed fingerprints use: `fresh`, unless one is stored already.
    pub(crate) fn idempotency_secret(&self, fresh: &str) -> Result<String, LedgerError> {
        let conn = self.lock();
        let during = "reading the idempotency secret";
        conn.execute(
            "INSERT OR IGNORE INTO attest_meta (key, value) VALUES ('idempotency_secret', ?1)",
            [fresh],
        )
        .map_err(self.sqlite(during))?;
        conn.query_row(
            "SELECT value FROM attest_meta WHERE key = 'idempotency_secret'",
            [],
            |row| row.get(0),
        )
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

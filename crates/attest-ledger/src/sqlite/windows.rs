//! The SQLite store's window counts (see [`crate::windows`]): one `IMMEDIATE`
//! transaction holds the file's write lock from the first figure read to the commit.

use rusqlite::{params, TransactionBehavior};

use super::SqliteStore;
use crate::windows::{Figure, Settle, StoredClaim};
use crate::LedgerError;

/// The window entries table; created by schema version 4. No index on `at_ms`: every
/// read and delete is of one key, whose entries (one window's worth) sit together under
/// the primary key, and an index would cost a page write per count.
pub(crate) const WINDOWS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS window_entries (
    key       BLOB NOT NULL,
    action_id TEXT NOT NULL,
    at_ms     INTEGER NOT NULL,
    amount    REAL NOT NULL,
    PRIMARY KEY (key, action_id)
) WITHOUT ROWID;";

impl SqliteStore {
    pub(crate) fn settle_windows(
        &self,
        now_ms: i64,
        action_id: &str,
        claims: &[StoredClaim],
        settle: Option<&mut Settle<'_>>,
    ) -> Result<Vec<Figure>, LedgerError> {
        let mut conn = self.lock();
        let during = "counting a window";
        let behavior = match settle {
            Some(_) => TransactionBehavior::Immediate,
            None => TransactionBehavior::Deferred,
        };
        let tx = conn
            .transaction_with_behavior(behavior)
            .map_err(self.sqlite(during))?;
        let mut figures = Vec::with_capacity(claims.len());
        for claim in claims {
            if settle.is_some() {
                tx.execute(
                    "DELETE FROM window_entries WHERE key = ?1 AND at_ms <= ?2",
                    params![&claim.key[..], claim.since_ms],
                )
                .map_err(self.sqlite(during))?;
            }
            let figure = tx
                .query_row(
                    "SELECT coalesce(sum(CASE WHEN action_id = ?3 THEN 0.0 ELSE amount END), 0.0),
                            count(CASE WHEN action_id = ?3 THEN 1 END)
                     FROM window_entries WHERE key = ?1 AND at_ms > ?2",
                    params![&claim.key[..], claim.since_ms, action_id],
                    |row| {
                        Ok(Figure {
                            others: row.get(0)?,
                            counted: row.get::<_, i64>(1)? > 0,
                        })
                    },
                )
                .map_err(self.sqlite(during))?;
            figures.push(figure);
        }
        let Some(settle) = settle else {
            return Ok(figures);
        };
        if settle(&figures) {
            for claim in claims {
                tx.execute(
                    "INSERT OR IGNORE INTO window_entries (key, action_id, at_ms, amount)
                     VALUES (?1, ?2, ?3, ?4)",
                    params![&claim.key[..], action_id, now_ms, claim.adds],
                )
                .map_err(self.sqlite(during))?;
            }
        }
        // Commit point: the call is counted (or the expired entries are gone) once this
        // returns; a failure leaves nothing counted, and the caller does not run the call.
        tx.commit().map_err(self.sqlite(during))?;
        Ok(figures)
    }

    pub(crate) fn release_window_entries(
        &self,
        action_id: &str,
        keys: &[[u8; 32]],
    ) -> Result<(), LedgerError> {
        let mut conn = self.lock();
        let during = "releasing a window count";
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite(during))?;
        for key in keys {
            tx.execute(
                "DELETE FROM window_entries WHERE key = ?1 AND action_id = ?2",
                params![&key[..], action_id],
            )
            .map_err(self.sqlite(during))?;
        }
        tx.commit().map_err(self.sqlite(during))
    }
}

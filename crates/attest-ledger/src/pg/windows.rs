//! The PostgreSQL store's window counts (see [`crate::windows`]): one transaction that
//! first locks a row per key in `window_keys` (sorted, so two writers never wait on
//! each other crosswise), then reads the figures and counts. A row lock rather than an
//! advisory lock, so that PostgreSQL-compatible databases without advisory locks run it.

use super::PgStore;
use crate::windows::{lock_order, Figure, Settle, StoredClaim};
use crate::LedgerError;

impl PgStore {
    pub(crate) fn settle_windows(
        &self,
        now_ms: i64,
        action_id: &str,
        claims: &[StoredClaim],
        settle: Option<&mut Settle<'_>>,
    ) -> Result<Vec<Figure>, LedgerError> {
        let during = "counting a window";
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(self.err(during))?;
        let keys = if settle.is_some() {
            lock_order(claims)
        } else {
            Vec::new()
        };
        for key in keys {
            tx.execute(
                "INSERT INTO window_keys (tenant, key) VALUES ($1, $2)
                 ON CONFLICT (tenant, key) DO UPDATE SET key = EXCLUDED.key",
                &[&self.tenant, &&key[..]],
            )
            .map_err(self.err(during))?;
        }
        let mut figures = Vec::with_capacity(claims.len());
        for claim in claims {
            if settle.is_some() {
                tx.execute(
                    "DELETE FROM window_entries WHERE tenant = $1 AND key = $2 AND at_ms <= $3",
                    &[&self.tenant, &&claim.key[..], &claim.since_ms],
                )
                .map_err(self.err(during))?;
            }
            // Read committed: this statement sees every entry committed by the writers
            // that held the key's lock before this one.
            let row = tx
                .with(|tx| {
                    tx.query_one(
                        "SELECT coalesce(sum(CASE WHEN action_id = $4 THEN 0 ELSE amount END), 0)::float8,
                                count(*) FILTER (WHERE action_id = $4)
                         FROM window_entries WHERE tenant = $1 AND key = $2 AND at_ms > $3",
                        &[&self.tenant, &&claim.key[..], &claim.since_ms, &action_id],
                    )
                })
                .map_err(self.err(during))?;
            figures.push(Figure {
                others: row.get::<_, f64>(0),
                counted: row.get::<_, i64>(1) > 0,
            });
        }
        let Some(settle) = settle else {
            return Ok(figures);
        };
        if settle(&figures) {
            for claim in claims {
                tx.execute(
                    "INSERT INTO window_entries (tenant, key, action_id, at_ms, amount)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    &[
                        &self.tenant,
                        &&claim.key[..],
                        &action_id,
                        &now_ms,
                        &claim.adds,
                    ],
                )
                .map_err(self.err(during))?;
            }
        }
        // Commit point: counted once this returns; a failed commit counts nothing (the
        // caller does not run the call), a lost acknowledgement may leave it counted,
        // which only makes the window stricter.
        tx.commit().map_err(self.err(during))?;
        Ok(figures)
    }

    pub(crate) fn release_window_entries(
        &self,
        action_id: &str,
        keys: &[[u8; 32]],
    ) -> Result<(), LedgerError> {
        let during = "releasing a window count";
        let mut client = self.client()?;
        for key in keys {
            client
                .with(|client| {
                    client.execute(
                        "DELETE FROM window_entries WHERE tenant = $1 AND key = $2 AND action_id = $3",
                        &[&self.tenant, &&key[..], &action_id],
                    )
                })
                .map_err(self.err(during))?;
        }
        Ok(())
    }
}

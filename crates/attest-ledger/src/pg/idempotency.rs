//! The PostgreSQL store's idempotency keys (see [`crate::idempotency`]): one
//! transaction whose `INSERT … ON CONFLICT DO NOTHING` takes the key's row lock; a
//! second claimer of the key waits on it, then reads the first's committed row.

use super::PgStore;
use crate::idempotency::{KeyChange, KeyRow, KeyState, KeysPurged, StoredKey};
use crate::LedgerError;

impl PgStore {
    pub(crate) fn claim_idempotency_key(
        &self,
        now_ms: i64,
        claim: &StoredKey<'_>,
    ) -> Result<KeyState, LedgerError> {
        let during = "claiming an idempotency key";
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(self.err(during))?;
        tx.execute(
            "DELETE FROM idempotency_keys WHERE tenant = $1 AND expires_ms <= $2",
            &[&self.tenant, &now_ms],
        )
        .map_err(self.err(during))?;
        // A row from before keys were scoped holds the key's text alone: no principal
        // may claim it while it lives.
        let unscoped = tx
            .with(|tx| {
                tx.query_opt(
                    "SELECT intent_seq FROM idempotency_keys WHERE tenant = $1 AND key = $2",
                    &[&self.tenant, &&claim.unscoped[..]],
                )
            })
            .map_err(self.err(during))?
            .map(|row| KeyRow::unbound(row.get(0)));
        // A row released between this insert and the read is claimed again (twice at
        // most; after that the caller is told a call is running, and may retry).
        let mut state = KeyState::Running {
            action_id: String::new(),
            intent_seq: None,
            age: std::time::Duration::ZERO,
        };
        for _ in 0..3 {
            let inserted = tx
                .execute(
                    "INSERT INTO idempotency_keys
                         (tenant, key, digest, action_id, claimed_ms, expires_ms)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, key) DO NOTHING",
                    &[
                        &self.tenant,
                        &&claim.key[..],
                        &claim.digest,
                        &claim.action_id,
                        &now_ms,
                        &claim.expires_ms,
                    ],
                )
                .map_err(self.err(during))?;
            if inserted == 1 {
                state = KeyState::Claimed;
                break;
            }
            if let Some(legacy) = unscoped {
                state = legacy;
                break;
            }
            // Read committed: the row of the claimer whose insert this one waited on.
            let row = tx
                .with(|tx| {
                    tx.query_opt(
                        "SELECT digest, action_id, claimed_ms, intent_seq, outcome, replay
                         FROM idempotency_keys WHERE tenant = $1 AND key = $2",
                        &[&self.tenant, &&claim.key[..]],
                    )
                })
                .map_err(self.err(during))?;
            if let Some(row) = row {
                state = KeyRow {
                    digest: row.get(0),
                    action_id: row.get(1),
                    claimed_ms: row.get(2),
                    intent_seq: row.get(3),
                    outcome: row.get(4),
                    replay: row.get(5),
                }
                .state(claim.digest, now_ms);
                break;
            }
        }
        // Commit point: the key is this call's once this returns; a failed commit claims
        // nothing (the caller does not run the call); a lost acknowledgement may leave
        // it claimed and running, which a retry reports and never runs blindly.
        tx.commit().map_err(self.err(during))?;
        Ok(state)
    }

    pub(crate) fn change_idempotency_key(
        &self,
        key: Option<&[u8; 32]>,
        action_id: &str,
        change: KeyChange<'_>,
    ) -> Result<(), LedgerError> {
        let during = "updating an idempotency key";
        let mut client = self.client()?;
        // Without a key: the row `action_id` holds, whichever key it is (a settled
        // intent's); `$2` NULL then matches every key of the tenant.
        let key = key.map(|k| &k[..]);
        let held = "tenant = $1 AND ($2::bytea IS NULL OR key = $2) AND action_id = $3 \
                    AND outcome IS NULL";
        client
            .with(|client| match change {
                KeyChange::Intent(seq) => client.execute(
                    &format!("UPDATE idempotency_keys SET intent_seq = $4 WHERE {held}"),
                    &[
                        &self.tenant,
                        &key,
                        &action_id,
                        &i64::try_from(seq).unwrap_or(i64::MAX),
                    ],
                ),
                KeyChange::Done { outcome, replay } => client.execute(
                    &format!("UPDATE idempotency_keys SET outcome = $4, replay = $5 WHERE {held}"),
                    &[&self.tenant, &key, &action_id, &outcome, &replay],
                ),
                KeyChange::Release => client.execute(
                    &format!("DELETE FROM idempotency_keys WHERE {held}"),
                    &[&self.tenant, &key, &action_id],
                ),
            })
            .map(drop)
            .map_err(self.err(during))
    }

    /// The secret keyed fingerprints use: `fresh`, unless one is stored already.
    pub(crate) fn idempotency_secret(&self, fresh: &str) -> Result<String, LedgerError> {
        let during = "reading the idempotency secret";
        let mut client = self.client()?;
        let row = client
            .with(|client| {
                client.execute(
                    "INSERT INTO attest_meta (tenant, key, value)
                     VALUES ($1, 'idempotency_secret', $2) ON CONFLICT (tenant, key) DO NOTHING",
                    &[&self.tenant, &fresh],
                )?;
                client.query_one(
                    "SELECT value FROM attest_meta WHERE tenant = $1 AND key = 'idempotency_secret'",
                    &[&self.tenant],
                )
            })
            .map_err(self.err(during))?;
        Ok(row.get(0))
    }

    pub(crate) fn purge_idempotency_keys(&self, now_ms: i64) -> Result<KeysPurged, LedgerError> {
        let during = "removing expired idempotency keys";
        let mut client = self.client()?;
        let removed = client
            .with(|client| {
                client.execute(
                    "DELETE FROM idempotency_keys WHERE tenant = $1 AND expires_ms <= $2",
                    &[&self.tenant, &now_ms],
                )
            })
            .map_err(self.err(during))?;
        let held: i64 = client
            .with(|client| {
                client.query_one(
                    "SELECT count(*) FROM idempotency_keys WHERE tenant = $1",
                    &[&self.tenant],
                )
            })
            .map_err(self.err(during))?
            .get(0);
        Ok(KeysPurged {
            removed,
            held: u64::try_from(held).unwrap_or(0),
        })
    }
}

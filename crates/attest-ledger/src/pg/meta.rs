//! Values beside the chain in `attest_meta` (stream cursors), each changed by a
//! compare-and-swap on its stored value.

use super::PgStore;
use crate::LedgerError;

impl PgStore {
    pub(crate) fn meta_value(&self, key: &str) -> Result<Option<String>, LedgerError> {
        let mut client = self.client()?;
        let row = client
            .query_opt(
                "SELECT value FROM attest_meta WHERE tenant = $1 AND key = $2",
                &[&self.tenant, &key],
            )
            .map_err(self.err("reading a stream cursor"))?;
        Ok(row.map(|row| row.get(0)))
    }

    pub(crate) fn swap_meta_value(
        &self,
        key: &str,
        old: Option<&str>,
        new: &str,
    ) -> Result<bool, LedgerError> {
        if self.read_only {
            return Err(LedgerError::ReadOnly {
                path: self.name.clone(),
            });
        }
        let mut client = self.client()?;
        // One statement each, conditional on the value read: of two writers that read the
        // same old value, the second changes no row (the row lock orders them).
        let changed = client
            .with(|client| match old {
                None => client.execute(
                    "INSERT INTO attest_meta (tenant, key, value) VALUES ($1, $2, $3)
                     ON CONFLICT (tenant, key) DO NOTHING",
                    &[&self.tenant, &key, &new],
                ),
                Some(old) => client.execute(
                    "UPDATE attest_meta SET value = $4 WHERE tenant = $1 AND key = $2 AND value = $3",
                    &[&self.tenant, &key, &old, &new],
                ),
            })
            .map_err(self.err("moving a stream cursor"))?;
        Ok(changed == 1)
    }
}

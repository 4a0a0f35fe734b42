//! Values beside the chain in `attest_meta` (stream cursors), each changed by a
//! compare-and-swap on its stored value.

use rusqlite::OptionalExtension;

use super::SqliteStore;
use crate::LedgerError;

impl SqliteStore {
    pub(crate) fn meta_value(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.lock()
            .query_row(
                "SELECT value FROM attest_meta WHERE key = ?1",
                [key],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.sqlite("reading a stream cursor"))
    }

    pub(crate) fn swap_meta_value(
        &self,
        key: &str,
        old: Option<&str>,
        new: &str,
    ) -> Result<bool, LedgerError> {
        let conn = self.lock();
        // One statement each: SQLite runs it under the write lock, so of two writers that
        // read the same old value, the second changes no row.
        let changed = match old {
            None => conn.execute(
                "INSERT OR IGNORE INTO attest_meta (key, value) VALUES (?1, ?2)",
                [key, new],
            ),
            Some(old) => conn.execute(
                "UPDATE attest_meta SET value = ?3 WHERE key = ?1 AND value = ?2",
                [key, old, new],
            ),
        }
        .map_err(self.sqlite("moving a stream cursor"))?;
        Ok(changed == 1)
    }
}

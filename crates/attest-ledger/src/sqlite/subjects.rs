//! The SQLite store's subject keys (see [`crate::erasure`]): one row per subject's blind
//! index, beside the chain and never in it.

use rusqlite::{params, Connection, OptionalExtension};

use super::SqliteStore;
use crate::LedgerError;

/// The subject keys table; created by schema version 7.
pub(crate) const SUBJECTS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS subject_keys (
    subject BLOB NOT NULL PRIMARY KEY,
    key     BLOB NOT NULL
) WITHOUT ROWID;";

impl SqliteStore {
    /// The key kept under `index`; with `fresh`, stored first unless one is kept.
    pub(crate) fn stored_subject_key(
        &self,
        index: &[u8; 32],
        fresh: Option<&[u8; 32]>,
    ) -> Result<Option<[u8; 32]>, LedgerError> {
        let conn = self.lock();
        let during = "reading a subject key";
        let read = |conn: &Connection| -> Result<Option<Vec<u8>>, LedgerError> {
            conn.prepare_cached("SELECT key FROM subject_keys WHERE subject = ?1")
                .and_then(|mut stmt| stmt.query_row([&index[..]], |row| row.get(0)).optional())
                .map_err(self.sqlite(during))
        };
        // Read first: only a subject's first row writes (and syncs) here.
        let mut key = read(&conn)?;
        if let (None, Some(fresh)) = (&key, fresh) {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO subject_keys (subject, key) VALUES (?1, ?2)",
            )
            .and_then(|mut stmt| stmt.execute(params![&index[..], &fresh[..]]))
            .map_err(self.sqlite("storing a subject key"))?;
            key = read(&conn)?;
        }
        key.map(|key| {
            <[u8; 32]>::try_from(key.as_slice())
                .map_err(|_| LedgerError::Internal("a subject key in subject_keys is not 32 bytes"))
        })
        .transpose()
    }

    /// Every key kept, by blind index; none when the table is missing (a file of an
    /// older schema, opened read-only and so not upgraded).
    pub(crate) fn all_subject_keys(&self) -> Result<Vec<crate::erasure::KeptKey>, LedgerError> {
        let conn = self.lock();
        let during = "reading the subject keys";
        let exists: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'subject_keys')",
                [],
                |row| row.get(0),
            )
            .map_err(self.sqlite(during))?;
        if !exists {
            return Ok(Vec::new());
        }
        let mut stmt = conn
            .prepare("SELECT subject, key FROM subject_keys")
            .map_err(self.sqlite(during))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .map_err(self.sqlite(during))?;
        let mut keys = Vec::new();
        for row in rows {
            let (index, key) = row.map_err(self.sqlite(during))?;
            keys.push(pair(&index, &key)?);
        }
        Ok(keys)
    }

    /// Deletes the key kept under `index`, inside the caller's write transaction; none
    /// there is [`LedgerError::SubjectErased`] (the caller's transaction rolls back).
    pub(crate) fn forget_subject(
        &self,
        conn: &Connection,
        index: &[u8; 32],
    ) -> Result<(), LedgerError> {
        let deleted = conn
            .prepare_cached("DELETE FROM subject_keys WHERE subject = ?1")
            .and_then(|mut stmt| stmt.execute([&index[..]]))
            .map_err(self.sqlite("deleting a subject key"))?;
        if deleted == 0 {
            return Err(LedgerError::SubjectErased);
        }
        Ok(())
    }
}

/// A stored (blind index, key) pair, both 32 bytes.
pub(crate) fn pair(index: &[u8], key: &[u8]) -> Result<crate::erasure::KeptKey, LedgerError> {
    match (<[u8; 32]>::try_from(index), <[u8; 32]>::try_from(key)) {
        (Ok(index), Ok(key)) => Ok((index, key)),
        _ => Err(LedgerError::Internal(
            "a row of subject_keys is not two 32-byte values",
        )),
    }
}

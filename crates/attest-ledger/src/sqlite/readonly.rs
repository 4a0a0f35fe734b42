//! Opening a ledger read-only: for verify and listings, on a read-only file, directory
//! or mount, and on files that may not be ledgers at all.
//!
//! Nothing is ever written: no schema is created, no journal mode is switched, and an
//! empty or foreign file is an error ([`LedgerError::NotALedger`]), never a fresh ledger.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::{Ledger, LedgerError, SCHEMA_VERSION};

impl Ledger {
    /// Opens the ledger at `path` for reading only. Appends on the result fail.
    ///
    /// In WAL mode SQLite wants to create `-shm` beside the file; where it cannot (a
    /// read-only directory or mount) and no `-wal` holds unmerged rows, the file is
    /// read as immutable instead, so the whole ledger is still read.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Ledger, LedgerError> {
        Ledger::open_read_only_tenant(path, None)
    }

    /// [`Ledger::open_read_only`] for a tenant's chain (a `postgres://` URL works too).
    pub fn open_read_only_tenant(
        path: impl AsRef<Path>,
        tenant: Option<&str>,
    ) -> Result<Ledger, LedgerError> {
        if crate::pg::is_url(path.as_ref()) {
            let options = crate::LedgerOptions {
                tenant: tenant.map(str::to_owned),
                ..crate::LedgerOptions::default()
            };
            return Ledger::open_postgres(path.as_ref(), &options, true);
        }
        let path = super::tenant_path(path.as_ref(), tenant)?;
        if path.is_dir() {
            return Err(LedgerError::IsDirectory { path });
        }
        if !path.exists() {
            return Err(LedgerError::NotFound { path });
        }
        let sqlite = |during| {
            let path = path.clone();
            move |source| LedgerError::Sqlite {
                path,
                during,
                source,
            }
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(sqlite("opening"))?;
        let (conn, version) = match schema_version(&conn) {
            Ok(found) => {
                let version = check_schema(&path, found, &conn)?;
                (conn, version)
            }
            Err(source) if has_wal(&path) || is_not_a_database(&source) => {
                return Err(not_a_database(&path, source));
            }
            // No -shm could be made and no -wal exists: read the file as it stands.
            Err(_) => {
                let conn = Connection::open_with_flags(
                    immutable_uri(&path),
                    flags | OpenFlags::SQLITE_OPEN_URI,
                )
                .map_err(sqlite("opening read-only"))?;
                let found = schema_version(&conn).map_err(|e| not_a_database(&path, e))?;
                let version = check_schema(&path, found, &conn)?;
                (conn, version)
            }
        };
        let store = super::SqliteStore::from_connection(path, conn, version);
        Ok(Ledger::over(
            Box::new(store),
            std::sync::Arc::new(crate::SystemClock),
        ))
    }
}

fn is_not_a_database(err: &rusqlite::Error) -> bool {
    err.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase)
}

/// A file SQLite cannot read as a database is not a ledger; other failures stay SQLite's.
fn not_a_database(path: &Path, source: rusqlite::Error) -> LedgerError {
    if is_not_a_database(&source) {
        LedgerError::NotALedger {
            path: path.to_path_buf(),
            detail: "not a SQLite database".to_owned(),
        }
    } else {
        LedgerError::Sqlite {
            path: path.to_path_buf(),
            during: "reading the schema",
            source,
        }
    }
}

/// What `attest_meta` says, or `None` when the table is missing.
fn schema_version(conn: &Connection) -> Result<Option<Option<String>>, rusqlite::Error> {
    let has_meta: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'attest_meta')",
        [],
        |row| row.get(0),
    )?;
    if !has_meta {
        return Ok(None);
    }
    conn.query_row(
        "SELECT value FROM attest_meta WHERE key = 'schema_version'",
        [],
        |row| row.get(0),
    )
    .optional()
    .map(Some)
}

/// The schema version, if this build reads it; an error naming what the file is
/// otherwise.
fn check_schema(
    path: &Path,
    found: Option<Option<String>>,
    conn: &Connection,
) -> Result<u32, LedgerError> {
    let readable = found
        .as_ref()
        .and_then(|version| version.as_deref()?.parse::<u32>().ok())
        .filter(|version| (1..=SCHEMA_VERSION).contains(version));
    // Older schemas read as they are (an upgrade needs a read-write open).
    if let Some(version) = readable {
        return Ok(version);
    }
    match found {
        Some(version) => Err(LedgerError::SchemaVersion {
            path: path.to_path_buf(),
            found: version.unwrap_or_else(|| "none".to_owned()),
            expected: SCHEMA_VERSION,
        }),
        None => {
            let tables: i64 = conn
                .query_row(
                    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
                    [],
                    |row| row.get(0),
                )
                .unwrap_or(0);
            let empty = std::fs::metadata(path)
                .map(|m| m.len() == 0)
                .unwrap_or(false);
            Err(LedgerError::NotALedger {
                path: path.to_path_buf(),
                detail: if empty {
                    "the file is empty".to_owned()
                } else if tables == 0 {
                    "the database holds no tables".to_owned()
                } else {
                    format!("a database of another program ({tables} tables, no attest_meta)")
                },
            })
        }
    }
}

/// Whether a `-wal` file with content sits beside the ledger (rows not yet merged).
fn has_wal(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal)).is_ok_and(|m| m.len() > 0)
}

/// `file:<path>?immutable=1`, with the characters a URI path cannot hold escaped.
fn immutable_uri(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for byte in absolute.as_os_str().as_encoded_bytes() {
        match byte {
            b'?' | b'#' | b'%' | 0..=0x1f | 0x7f.. => uri.push_str(&format!("%{byte:02X}")),
            _ => uri.push(char::from(*byte)),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

//! Where the approval store's tables live: the ledger's SQLite file (on a connection of
//! the store's own), or the ledger's PostgreSQL database (on the ledger's pool, rows
//! marked with the ledger's tenant).
//!
//! Statements are written once, in the SQL both dialects agree on, with `?N` parameters
//! (`$N` for PostgreSQL) and `?1` always the tenant. The few places the dialects differ
//! are markers filled in per dialect: [`EMPTY_PARAMS`] and [`APPROVER_KEY`].

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use attest_ledger::PgDatabase;
use postgres::types::{ToSql as PgToSql, Type};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ToSql as SqliteToSql};

use super::ApprovalError;

/// The action's JSON with its params replaced by `{}`.
pub(super) const EMPTY_PARAMS: &str = "{empty_params}";
/// The unique key an approver's name is matched on, case-insensitively.
pub(super) const APPROVER_KEY: &str = "{approver_key}";

/// A statement parameter, bound the same way on either store.
#[derive(Debug, Clone, Copy)]
pub(super) enum Arg<'a> {
    Int(Option<i64>),
    Text(Option<&'a str>),
    Bool(bool),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(Some(value))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Arg::Text(value)
    }
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(Some(value))
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}

/// A column value as read back: the store's tables hold only integers, text and NULL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

impl Cell {
    pub(super) fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(n) => Some(*n),
            _ => None,
        }
    }

    pub(super) fn text(self) -> Option<String> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// Where the tables live.
pub(super) enum Home {
    Sqlite {
        path: PathBuf,
        conn: Mutex<Connection>,
    },
    Postgres(PgDatabase),
}

/// The tables' home, and the tenant every statement's `?1` is bound to (`""` in a SQLite
/// file, which holds one tenant).
pub(super) struct Backend {
    home: Home,
    tenant: String,
}

impl Backend {
    pub(super) fn new(home: Home) -> Backend {
        let tenant = match &home {
            Home::Sqlite { .. } => String::new(),
            Home::Postgres(db) => db.tenant().to_owned(),
        };
        Backend { home, tenant }
    }

    /// The file or `postgres://` URL (without credentials), for messages.
    pub(super) fn path(&self) -> &Path {
        match &self.home {
            Home::Sqlite { path, .. } => path,
            Home::Postgres(db) => db.name(),
        }
    }

    /// The SQLite connection (a poisoned lock is sound: rusqlite rolls back an open
    /// transaction on drop).
    fn sqlite_conn(&self) -> Option<MutexGuard<'_, Connection>> {
        match &self.home {
            Home::Sqlite { conn, .. } => Some(conn.lock().unwrap_or_else(PoisonError::into_inner)),
            Home::Postgres(_) => None,
        }
    }

    /// `sql` in this store's dialect.
    fn render(&self, sql: &str) -> String {
        match &self.home {
            Home::Sqlite { .. } => sql
                .replace(EMPTY_PARAMS, "json_set(action, '$.params', json('{}'))")
                .replace(APPROVER_KEY, "name"),
            Home::Postgres(_) => sql
                .replace(
                    EMPTY_PARAMS,
                    "jsonb_set(action::jsonb, '{params}', '{}'::jsonb)::text",
                )
                .replace(APPROVER_KEY, "tenant, lower(name)")
                .replace('?', "$"),
        }
    }

    fn sqlite_error(&self, during: &'static str) -> impl FnOnce(rusqlite::Error) -> ApprovalError {
        let path = self.path().to_path_buf();
        move |source| ApprovalError::Sqlite {
            path,
            during,
            source,
        }
    }

    fn postgres_error(
        &self,
        during: &'static str,
    ) -> impl FnOnce(postgres::Error) -> ApprovalError {
        let path = self.path().to_path_buf();
        move |source| ApprovalError::Postgres {
            path,
            during,
            source,
        }
    }

    fn connect(
        db: &PgDatabase,
        during: &'static str,
    ) -> Result<attest_ledger::PgConnection, ApprovalError> {
        db.connect().map_err(|source| ApprovalError::Connection {
            during,
            source: Box::new(source),
        })
    }

    /// Runs one statement (`?1` bound to the tenant, then `args`); returns the rows it
    /// changed.
    pub(super) fn execute(
        &self,
        during: &'static str,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<u64, ApprovalError> {
        let sql = self.render(sql);
        match &self.home {
            Home::Sqlite { .. } => {
                let conn = self
                    .sqlite_conn()
                    .ok_or(ApprovalError::Internal("no SQLite connection"))?;
                let bound = sqlite_args(&self.tenant, args);
                let changed = conn
                    .prepare_cached(&sql)
                    .and_then(|mut stmt| stmt.execute(bound.as_slice()))
                    .map_err(self.sqlite_error(during))?;
                Ok(u64::try_from(changed).unwrap_or(u64::MAX))
            }
            Home::Postgres(db) => attest_ledger::off_runtime(|| {
                let mut client = Backend::connect(db, during)?;
                client
                    .execute(sql.as_str(), &pg_args(&self.tenant, args))
                    .map_err(self.postgres_error(during))
            }),
        }
    }

    /// Runs one query (`?1` bound to the tenant, then `args`); returns its rows' cells.
    pub(super) fn query(
        &self,
        during: &'static str,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<Vec<Cell>>, ApprovalError> {
        let sql = self.render(sql);
        match &self.home {
            Home::Sqlite { .. } => {
                let conn = self
                    .sqlite_conn()
                    .ok_or(ApprovalError::Internal("no SQLite connection"))?;
                let bound = sqlite_args(&self.tenant, args);
                let mut stmt = conn
                    .prepare_cached(&sql)
                    .map_err(self.sqlite_error(during))?;
                let width = stmt.column_count();
                let rows = stmt
                    .query_map(bound.as_slice(), |row| {
                        (0..width)
                            .map(|i| sqlite_cell(row.get_ref(i)?))
                            .collect::<rusqlite::Result<Vec<Cell>>>()
                    })
                    .map_err(self.sqlite_error(during))?;
                rows.collect::<Result<_, _>>()
                    .map_err(self.sqlite_error(during))
            }
            Home::Postgres(db) => attest_ledger::off_runtime(|| {
                let mut client = Backend::connect(db, during)?;
                let rows = client
                    .query(sql.as_str(), &pg_args(&self.tenant, args))
                    .map_err(self.postgres_error(during))?;
                rows.iter()
                    .map(|row| {
                        (0..row.len())
                            .map(|i| pg_cell(row, i))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<_, _>>()
                    .map_err(self.postgres_error(during))
            }),
        }
    }
}

/// Whether `err` is a unique-key violation (a second row with a taken key).
pub(super) fn is_unique_violation(err: &ApprovalError) -> bool {
    match err {
        ApprovalError::Sqlite {
            source: rusqlite::Error::SqliteFailure(code, _),
            ..
        } => code.code == rusqlite::ErrorCode::ConstraintViolation,
        ApprovalError::Postgres { source, .. } => {
            source.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
        }
        _ => false,
    }
}

// `&String`, not `&str`: the tenant is bound as a trait object, and `str` is unsized.
#[allow(clippy::ptr_arg)]
fn sqlite_args<'a>(tenant: &'a String, args: &'a [Arg<'a>]) -> Vec<&'a dyn SqliteToSql> {
    std::iter::once(tenant as &dyn SqliteToSql)
        .chain(args.iter().map(|arg| match arg {
            Arg::Int(v) => v as &dyn SqliteToSql,
            Arg::Text(v) => v as &dyn SqliteToSql,
            Arg::Bool(v) => v as &dyn SqliteToSql,
        }))
        .collect()
}

#[allow(clippy::ptr_arg)] // as `sqlite_args`
fn pg_args<'a>(tenant: &'a String, args: &'a [Arg<'a>]) -> Vec<&'a (dyn PgToSql + Sync)> {
    std::iter::once(tenant as &(dyn PgToSql + Sync))
        .chain(args.iter().map(|arg| match arg {
            Arg::Int(v) => v as &(dyn PgToSql + Sync),
            Arg::Text(v) => v as &(dyn PgToSql + Sync),
            Arg::Bool(v) => v as &(dyn PgToSql + Sync),
        }))
        .collect()
}

fn sqlite_cell(value: ValueRef<'_>) -> rusqlite::Result<Cell> {
    match value {
        ValueRef::Null => Ok(Cell::Null),
        ValueRef::Integer(n) => Ok(Cell::Int(n)),
        ValueRef::Text(bytes) => Ok(Cell::Text(
            std::str::from_utf8(bytes)
                .map_err(rusqlite::Error::Utf8Error)?
                .to_owned(),
        )),
        ValueRef::Real(_) | ValueRef::Blob(_) => Err(rusqlite::Error::InvalidColumnType(
            0,
            "approval store column".to_owned(),
            value.data_type(),
        )),
    }
}

fn pg_cell(row: &postgres::Row, i: usize) -> Result<Cell, postgres::Error> {
    let ty = row.columns()[i].type_().clone();
    let cell = if ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?
            .map_or(Cell::Null, |b| Cell::Int(i64::from(b)))
    } else if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?
            .map_or(Cell::Null, Cell::Int)
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?
            .map_or(Cell::Null, |n| Cell::Int(i64::from(n)))
    } else {
        // Text, or a type the store never makes: try_get reports the mismatch.
        row.try_get::<_, Option<String>>(i)?
            .map_or(Cell::Null, Cell::Text)
    };
    Ok(cell)
}

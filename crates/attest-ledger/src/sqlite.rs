//! The embedded store: one SQLite file in WAL mode.
//!
//! Appends are compare-and-swap on the tip: the tip is read inside an `IMMEDIATE`
//! transaction, which holds SQLite's write lock, so threads and processes sharing the
//! file each see the row before theirs and the chain stays linear.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::canonical::{entry_hash, to_hex, Hash, GENESIS};
use crate::clock::format_ts;
use crate::entry::{Entry, FORMAT_VERSION};
use crate::group::GroupCommit;
use crate::jcs::write_entry;
use crate::merkle::{leaf_hash, read_tail, CompactRange};
use crate::query::{Columns, Filter, Unfiled, FILED_THROUGH, INSERT_LOOKUP, UPSERT_COUNTER};
use crate::source::Source;
use crate::sqlite_read::SqliteSource;
use crate::wal::{WalCheckpointer, WAL_SIZE_LIMIT};
use crate::{Clock, Durability, LedgerError, Record, SystemClock};
use tlog_tiles::stored_hash_index;

/// The schema version stored in `attest_meta` (and, from version 2 on, in
/// `attest_schema`); bump it with a migration in `MIGRATIONS`.
pub const SCHEMA_VERSION: u32 = 3;

/// Migrations, in order: entry `n` brings a file from version `n + 1` to `n + 2`.
/// Each runs in the opening transaction; a file written by any earlier release opens
/// and is upgraded in place.
const MIGRATIONS: &[&str] = &[
    // 2: the run and action id as indexed columns (filled from the bodies), the
    // counters table (filled from the entries), and the schema version table.
    "ALTER TABLE entries ADD COLUMN run TEXT;
     ALTER TABLE entries ADD COLUMN action_id TEXT;
     UPDATE entries SET run = json_extract(body, '$.run_id'),
                        action_id = json_extract(body, '$.action_id');
     CREATE INDEX IF NOT EXISTS entries_action ON entries (action_id);
     CREATE INDEX IF NOT EXISTS entries_run ON entries (run, seq) WHERE run IS NOT NULL;
     CREATE TABLE IF NOT EXISTS counters (
         dim  TEXT NOT NULL,
         key  TEXT NOT NULL,
         hour TEXT NOT NULL,
         n    INTEGER NOT NULL,
         PRIMARY KEY (dim, key, hour)
     ) WITHOUT ROWID;
     INSERT INTO counters (dim, key, hour, n)
         SELECT 'decision', decision, '', count(*) FROM entries GROUP BY decision;
     INSERT INTO counters (dim, key, hour, n)
         SELECT 'level', coalesce(level, ''), '', count(*) FROM entries GROUP BY coalesce(level, '');
     INSERT INTO counters (dim, key, hour, n)
         SELECT 'system', system, '', count(*) FROM entries GROUP BY system;
     INSERT INTO counters (dim, key, hour, n)
         SELECT 'agent', coalesce(agent, ''), '', count(*) FROM entries GROUP BY coalesce(agent, '');
     INSERT INTO counters (dim, key, hour, n)
         SELECT 'decision', decision, substr(ts, 1, 13), count(*) FROM entries
         GROUP BY decision, substr(ts, 1, 13);
     CREATE TABLE IF NOT EXISTS attest_schema (
         version INTEGER PRIMARY KEY,
         applied TEXT NOT NULL
     );",
    // 3: counters and run / action id lookups written in bulk (see `FILING_ROWS`)
    // instead of an index leaf and five counter rows per append; every entry so far was
    // counted as it was appended.
    "DROP INDEX IF EXISTS entries_action;
     DROP INDEX IF EXISTS entries_run;
     CREATE TABLE IF NOT EXISTS lookups (
         key TEXT NOT NULL,
         seq INTEGER NOT NULL,
         PRIMARY KEY (key, seq)
     ) WITHOUT ROWID;
     INSERT OR IGNORE INTO lookups (key, seq)
         SELECT 'run:' || run, seq FROM entries WHERE run IS NOT NULL
         UNION ALL
         SELECT 'action_id:' || action_id, seq FROM entries WHERE action_id IS NOT NULL;
     INSERT OR REPLACE INTO attest_meta (key, value)
         SELECT 'filed_through', coalesce(max(seq), 0) FROM entries;",
];

/// How long a writer waits for another writer's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Secondary indexes that releases before this one created on `entries`. No query the
/// product runs uses them (listings read by seq, prune by seq range), and each one
/// cost a page write per append, so opening a ledger drops them. Their absence is
/// invisible to older releases, which open and append to the file as before.
const DROP_UNUSED_INDEXES: &str = "DROP INDEX IF EXISTS entries_system;
DROP INDEX IF EXISTS entries_verb;
DROP INDEX IF EXISTS entries_agent;
DROP INDEX IF EXISTS entries_decision;
DROP INDEX IF EXISTS entries_level;
DROP INDEX IF EXISTS entries_ts;";

/// Entries an append leaves unfiled before it files them in one go: adds their
/// counters to `counters` and their run and action ids to `lookups`
/// ([`crate::query::Unfiled`]).
///
/// Filed one append at a time, five counter upserts and two index entries (the action
/// id's at a random place) cost three or four pages in every commit; filed every 64
/// entries, one scan reads them back (still cached) and each page is written once.
/// Until then readers take in the unfiled entries themselves ([`Ledger::counts`],
/// [`Ledger::list_filtered`]), so what they show is the same either way, after a crash
/// too: the extent (`filed_through` in `attest_meta`) moves in the same transaction.
const FILING_ROWS: u64 = 64;

/// Entries read back and filed per step when a stretch is filed from the file (a copy).
const FILING_CHUNK: u64 = 4096;

/// Leaves whose tree hashes an append keeps in memory before writing them in one go.
///
/// A leaf's hashes written with it would cost a `tree_hashes` page in every commit;
/// written every 64 leaves, one page covers them all. Until then they are derived
/// data: any reader (another process, or this one after a crash) computes them from
/// the entries' `hash` column ([`crate::merkle::read_tail`]), so proofs, roots and
/// verify are the same whether they are written or not. A checkpoint writes them.
const TREE_FLUSH_LEAVES: u64 = 64;

pub(crate) const INSERT_ENTRY: &str =
    "INSERT INTO entries (seq, hash, ts, system, verb, agent, decision, level, body, run, action_id)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
pub(crate) const INSERT_TREE_HASH: &str = "INSERT INTO tree_hashes (idx, hash) VALUES (?1, ?2)";
/// Every column verify and export read, in [`StoredRow`] order.
const SELECT_ROWS: &str =
    "SELECT seq, hash, ts, system, verb, agent, decision, level, body, run, action_id
     FROM entries WHERE seq >= ?1 ORDER BY seq";
/// [`SELECT_ROWS`] on a schema-1 file: `run` and `action_id` as the upgrade to schema 2
/// fills them, from the body.
const SELECT_ROWS_V1: &str = "SELECT seq, hash, ts, system, verb, agent, decision, level, body,
            json_extract(body, '$.run_id'), json_extract(body, '$.action_id')
     FROM entries WHERE seq >= ?1 ORDER BY seq";
const SELECT_TIP: &str = "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS attest_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    seq      INTEGER PRIMARY KEY,
    hash     BLOB NOT NULL,
    ts       TEXT NOT NULL,
    system   TEXT NOT NULL,
    verb     TEXT NOT NULL,
    agent    TEXT,
    decision TEXT NOT NULL,
    level    TEXT,
    body     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tree_hashes (
    idx  INTEGER PRIMARY KEY,
    hash BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    size INTEGER PRIMARY KEY,
    root BLOB NOT NULL,
    note TEXT NOT NULL,
    ts   TEXT NOT NULL
);
";

/// How to open a ledger.
#[derive(Clone)]
pub struct LedgerOptions {
    /// Sync policy for appends.
    pub durability: Durability,
    /// Where `ts` comes from.
    pub clock: Arc<dyn Clock>,
    /// Create the file (and its directory) when it does not exist.
    pub create: bool,
    /// The tenant whose chain to open: in PostgreSQL a chain of its own in the same
    /// database; in SQLite a file of its own beside the default one
    /// (`ledger.sqlite` → `ledger.tenant-NAME.sqlite`). `None`: the default chain.
    pub tenant: Option<String>,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            durability: Durability::Full,
            clock: Arc::new(SystemClock),
            create: true,
            tenant: None,
        }
    }
}

impl std::fmt::Debug for LedgerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOptions")
            .field("durability", &self.durability)
            .field("create", &self.create)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// The file of `tenant`'s SQLite ledger: `ledger.sqlite` → `ledger.tenant-NAME.sqlite`.
pub(crate) fn tenant_path(path: &Path, tenant: Option<&str>) -> Result<PathBuf, LedgerError> {
    let Some(tenant) = tenant else {
        return Ok(path.to_path_buf());
    };
    crate::pg::check_tenant(tenant)?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ledger".to_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.tenant-{tenant}.{}", ext.to_string_lossy()),
        None => format!("{stem}.tenant-{tenant}"),
    };
    Ok(path.with_file_name(name))
}

/// What an append produced: the row's place and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The row's seq.
    pub seq: u64,
    /// SHA-256 of its canonical body.
    pub hash: Hash,
    /// Its timestamp.
    pub ts: String,
}

/// One row as listings show it, read from the indexed columns only. Serializes with
/// the hash as lower-case hex, the form listings and APIs print.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RowSummary {
    /// The row's seq.
    pub seq: u64,
    /// Its timestamp.
    pub ts: String,
    /// The system.
    pub system: String,
    /// The verb.
    pub verb: String,
    /// The agent, if recorded.
    pub agent: Option<String>,
    /// The decision.
    pub decision: String,
    /// The verification level, if the action ran.
    pub level: Option<String>,
    /// The entry hash.
    #[serde(serialize_with = "hex_hash")]
    pub hash: Hash,
}

fn hex_hash<S: serde::Serializer>(hash: &Hash, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&to_hex(hash))
}

/// One stored row, as verify and export read it.
#[derive(Debug)]
pub struct StoredRow<'a> {
    /// The `seq` column.
    pub seq: u64,
    /// The `hash` column (may be any length if the file was edited).
    pub hash: &'a [u8],
    /// The `ts` column.
    pub ts: &'a str,
    /// The `system` column.
    pub system: &'a str,
    /// The `verb` column.
    pub verb: &'a str,
    /// The `agent` column.
    pub agent: Option<&'a str>,
    /// The `decision` column.
    pub decision: &'a str,
    /// The `level` column.
    pub level: Option<&'a str>,
    /// The `run` column (the body's `run_id`).
    pub run: Option<&'a str>,
    /// The `action_id` column.
    pub action_id: Option<&'a str>,
    /// The stored canonical body, exactly the bytes that were hashed.
    pub body: &'a [u8],
}

/// A hash-chained ledger: one SQLite file, or one tenant's chain in a PostgreSQL
/// database (`Ledger::open` with a `postgres://` URL).
pub struct Ledger {
    /// The file, or the server's URL without credentials.
    path: PathBuf,
    store: Store,
    clock: Arc<dyn Clock>,
    pub(crate) group: GroupCommit,
}

/// Where the rows live.
// One per open ledger, never moved around: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Store {
    /// One SQLite file.
    Sqlite(SqliteStore),
    /// One tenant of a PostgreSQL database.
    Postgres(Box<crate::pg::PgStore>),
}

/// The SQLite store's connection and append state.
pub(crate) struct SqliteStore {
    conn: Mutex<Connection>,
    /// The chain's end as this connection last committed it; locked only while `conn`
    /// is held.
    edge: Mutex<Option<Edge>>,
    /// WAL checkpoints, run on a thread of their own instead of inside a commit.
    wal: WalCheckpointer,
    /// How rows are read: [`SELECT_ROWS`], or [`SELECT_ROWS_V1`] for a file of schema
    /// version 1 opened read-only (not upgraded, so without the `run` and `action_id`
    /// columns).
    select_rows: &'static str,
}

impl SqliteStore {
    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no transaction open (rusqlite rolls back
        // on drop), so the connection is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tip and the tree's right edge, kept in memory so an append reads neither.
///
/// It is trusted only while `PRAGMA data_version` (read inside the write transaction)
/// is the one it was taken at: that number changes whenever another connection, in
/// this process or another, commits to the file, and never for this connection's own
/// commits. Anything else re-reads the edge from the file.
///
/// The append is a compare-and-swap on this edge: confirm it (or re-read it) inside the
/// write transaction, insert rows at `seq + 1 …` (the primary key on `seq` refuses a
/// second row at a seq), commit, keep the new edge. A store without `data_version`
/// (PostgreSQL) can confirm the edge by the tip's seq and hash instead, and on a
/// unique-key conflict drop it, re-read and re-hash.
pub(crate) struct Edge {
    data_version: i64,
    seq: u64,
    hash: Hash,
    range: CompactRange,
    /// Leaves whose tree hashes are in `tree_hashes`.
    written: u64,
    /// Entries filed in `counters` and `lookups` (`filed_through`).
    filed: u64,
    /// The entries `filed + 1 ..= seq`, tallied as they were appended; `None` when the
    /// edge was read from the file (the next filing reads them back instead).
    unfiled: Option<Unfiled>,
    /// The tree hashes of leaves `written..=seq`, in stored-index order, not yet
    /// written: they go to the file in bulk (see [`TREE_FLUSH_LEAVES`]).
    pending: Vec<Hash>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Opens (or, with `options.create`, creates) the ledger at `path`.
    ///
    /// `path` may be a `postgres://` (or `postgresql://`) URL: the ledger is then the
    /// tenant's chain in that database, its schema created or upgraded on open.
    pub fn open(path: impl AsRef<Path>, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        let location = path.as_ref();
        if crate::pg::is_url(location) {
            return Ledger::open_postgres(location, &options, false);
        }
        let path = tenant_path(location, options.tenant.as_deref())?;
        if path.is_dir() {
            return Err(LedgerError::IsDirectory { path });
        }
        let exists = path.exists();
        if !exists && !options.create {
            return Err(LedgerError::NotFound { path });
        }
        if !exists {
            // Private from the start: the file also holds held params (approval store).
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                crate::private::create_dir_all(dir).map_err(|source| LedgerError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            crate::private::create_file(&path).map_err(|source| LedgerError::CreateFile {
                path: path.clone(),
                source,
            })?;
        }
        let flags = if options.create {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let sqlite = |during| {
            let path = path.clone();
            move |source| LedgerError::Sqlite {
                path,
                during,
                source,
            }
        };
        let conn = Connection::open_with_flags(&path, flags).map_err(sqlite("opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sqlite("setting the busy timeout"))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite("switching to WAL"))?;
        conn.pragma_update(None, "synchronous", options.durability.pragma())
            .map_err(sqlite("setting durability"))?;
        // Commits never checkpoint the WAL themselves: `wal` does it off the append path.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(sqlite("handing WAL checkpoints to a thread"))?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(sqlite("bounding the WAL"))?;
        let wal = WalCheckpointer::start(&path).map_err(sqlite("opening the WAL checkpointer"))?;
        let ledger = Ledger {
            path,
            store: Store::Sqlite(SqliteStore {
                conn: Mutex::new(conn),
                edge: Mutex::new(None),
                wal,
                select_rows: SELECT_ROWS,
            }),
            clock: options.clock,
            group: GroupCommit::default(),
        };
        ledger.init_schema()?;
        Ok(ledger)
    }

    /// Opens a ledger from the string a user gives: a file path, or a `postgres://`
    /// URL. The one entry point for `--ledger` and the configuration file.
    pub fn open_location(location: &str, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        Ledger::open(Path::new(location), options)
    }

    pub(crate) fn open_postgres(
        location: &Path,
        options: &LedgerOptions,
        read_only: bool,
    ) -> Result<Ledger, LedgerError> {
        let url = location.to_str().ok_or_else(|| LedgerError::BadUrl {
            detail: "the URL is not UTF-8".to_owned(),
        })?;
        let store = crate::pg::PgStore::open(
            url,
            options.tenant.as_deref(),
            options.durability,
            read_only,
        )?;
        Ok(Ledger::with_store(
            store.name().to_path_buf(),
            Store::Postgres(Box::new(store)),
            options.clock.clone(),
        ))
    }

    /// Whether this ledger lives in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.pg().is_some()
    }

    /// The PostgreSQL database this ledger lives in (`None` for a SQLite file), for
    /// tables kept beside the chain, such as the approval store's.
    pub fn postgres(&self) -> Option<crate::pg::PgDatabase> {
        self.pg().map(crate::pg::PgStore::database)
    }

    /// A ledger over an open connection (the read-only opener's way in).
    /// A ledger over a read-only connection to a file of schema `version`.
    pub(crate) fn from_connection(path: PathBuf, conn: Connection, version: u32) -> Ledger {
        Ledger {
            path,
            store: Store::Sqlite(SqliteStore {
                conn: Mutex::new(conn),
                edge: Mutex::new(None),
                wal: WalCheckpointer::inline(),
                select_rows: if version < 2 {
                    SELECT_ROWS_V1
                } else {
                    SELECT_ROWS
                },
            }),
            clock: Arc::new(SystemClock),
            group: GroupCommit::default(),
        }
    }

    /// The current time, from the injected clock.
    pub(crate) fn now(&self) -> std::time::SystemTime {
        self.clock.now()
    }

    /// The file this ledger lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn sqlite(
        &self,
        during: &'static str,
    ) -> impl FnOnce(rusqlite::Error) -> LedgerError + '_ {
        move |source| LedgerError::Sqlite {
            path: self.path.clone(),
            during,
            source,
        }
    }

    /// The SQLite connection; an internal error on another store (callers dispatch
    /// to the PostgreSQL store before they get here).
    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, Connection>, LedgerError> {
        match &self.store {
            Store::Sqlite(store) => Ok(store.lock()),
            Store::Postgres(_) => Err(LedgerError::Internal(
                "a SQLite-only operation was called on a PostgreSQL ledger",
            )),
        }
    }

    /// The PostgreSQL store, when this ledger lives in one.
    pub(crate) fn pg(&self) -> Option<&crate::pg::PgStore> {
        match &self.store {
            Store::Postgres(store) => Some(store),
            Store::Sqlite(_) => None,
        }
    }

    /// Runs `f` on one consistent snapshot of the ledger, whatever the store.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&dyn Source) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        match &self.store {
            Store::Sqlite(store) => {
                let mut conn = store.lock();
                // One read transaction: a consistent snapshot even while others append.
                let tx = conn.transaction().map_err(self.sqlite("starting a read"))?;
                let source = SqliteSource::new(self, &tx);
                f(&source)
            }
            Store::Postgres(store) => store.read(f),
        }
    }

    /// Builds a ledger around a store (the PostgreSQL opener's way in).
    pub(crate) fn with_store(path: PathBuf, store: Store, clock: Arc<dyn Clock>) -> Ledger {
        Ledger {
            path,
            store,
            clock,
            group: GroupCommit::default(),
        }
    }

    fn init_schema(&self) -> Result<(), LedgerError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("reading the schema"))?;
        let has_meta: bool = tx
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'attest_meta')",
                [],
                |row| row.get(0),
            )
            .map_err(self.sqlite("reading the schema"))?;
        let has_other_tables: bool = tx
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT IN ('attest_meta', 'entries', 'tree_hashes', 'checkpoints', 'approvals', 'counters', 'attest_schema', 'lookups'))",
                [],
                |row| row.get(0),
            )
            .map_err(self.sqlite("reading the schema"))?;
        if has_meta {
            let found: Option<String> = tx
                .query_row(
                    "SELECT value FROM attest_meta WHERE key = 'schema_version'",
                    [],
                    |row| row.get(0),
                )
                .optional()
                .map_err(self.sqlite("reading the schema version"))?;
            let version = found
                .as_deref()
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|v| (1..=SCHEMA_VERSION).contains(v));
            let Some(version) = version else {
                return Err(LedgerError::SchemaVersion {
                    path: self.path.clone(),
                    found: found.unwrap_or_else(|| "none".to_owned()),
                    expected: SCHEMA_VERSION,
                });
            };
            // A ledger written before these indexes were dropped still has them; dropping
            // one that is not there changes nothing.
            tx.execute_batch(DROP_UNUSED_INDEXES)
                .map_err(self.sqlite("dropping unused indexes"))?;
            self.migrate(&tx, version)?;
            tx.commit().map_err(self.sqlite("upgrading the schema"))?;
            return Ok(());
        }
        // `approvals` belongs to attest-core's approval store, which shares the file.
        if has_other_tables {
            return Err(LedgerError::SchemaVersion {
                path: self.path.clone(),
                found: "none (a database of another program)".to_owned(),
                expected: SCHEMA_VERSION,
            });
        }
        tx.execute_batch(SCHEMA)
            .map_err(self.sqlite("creating the schema"))?;
        tx.execute(
            "INSERT INTO attest_meta (key, value) VALUES ('schema_version', '1')",
            [],
        )
        .map_err(self.sqlite("creating the schema"))?;
        self.migrate(&tx, 1)?;
        tx.commit().map_err(self.sqlite("creating the schema"))
    }

    /// Runs the migrations after `version`, recording each in `attest_schema` and the
    /// newest in `attest_meta`, inside the caller's write transaction.
    fn migrate(&self, tx: &Connection, version: u32) -> Result<(), LedgerError> {
        if version >= SCHEMA_VERSION {
            return Ok(());
        }
        for (to, sql) in (2u32..).zip(MIGRATIONS).skip((version - 1) as usize) {
            tx.execute_batch(sql)
                .map_err(self.sqlite("upgrading the schema"))?;
            tx.execute(
                "INSERT OR REPLACE INTO attest_schema (version, applied) VALUES (?1, ?2)",
                params![to, format_ts(self.now())],
            )
            .map_err(self.sqlite("upgrading the schema"))?;
        }
        tx.execute(
            "UPDATE attest_meta SET value = ?1 WHERE key = 'schema_version'",
            [SCHEMA_VERSION.to_string()],
        )
        .map_err(self.sqlite("upgrading the schema"))?;
        Ok(())
    }

    /// Appends one record and returns its seq and hash once it is durable; concurrent
    /// callers share a transaction (see [`Ledger::append_owned`]).
    pub fn append(&self, record: &Record) -> Result<Appended, LedgerError> {
        self.append_owned(record.clone())
    }

    /// Appends records in order, in one transaction and one sync.
    pub fn append_batch(&self, records: &[Record]) -> Result<Vec<Appended>, LedgerError> {
        self.append_batch_tracked(records, &mut Vec::new())
    }

    /// [`Ledger::append_batch`], leaving in `attempted` the rows it built when it
    /// fails: a failed commit may still have been durable (its acknowledgement lost),
    /// and the caller looks for them before writing the records again.
    pub(crate) fn append_batch_tracked(
        &self,
        records: &[Record],
        attempted: &mut Vec<Appended>,
    ) -> Result<Vec<Appended>, LedgerError> {
        if let Some(pg) = self.pg() {
            return pg.append_batch(records, self.clock.as_ref());
        }
        attempted.clear();
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting an append"))?;
        // The tip is read (or confirmed current) under the write lock: no other writer
        // can append in between. Until the commit, the edge lives only here: on any
        // error it is dropped and the next append reads the file again.
        let mut edge = self.edge_in(&tx)?;
        let appended = attempted;
        {
            let mut insert = tx
                .prepare_cached(INSERT_ENTRY)
                .map_err(self.sqlite("preparing an append"))?;
            let mut body = Vec::with_capacity(1024);
            for record in records {
                let seq = edge.seq + 1;
                let ts = format_ts(self.clock.now());
                let prev_hex = to_hex(&edge.hash);
                let entry = Entry {
                    v: FORMAT_VERSION,
                    seq,
                    prev: &prev_hex,
                    ts: &ts,
                    record,
                };
                body.clear();
                write_entry(&mut body, &entry)?;
                let text = std::str::from_utf8(&body)
                    .map_err(|_| LedgerError::Internal("canonical JSON is not UTF-8"))?;
                let hash = entry_hash(&body);
                let level = record.verification.as_ref().map(|v| v.level.as_str());
                insert
                    .execute(params![
                        seq,
                        &hash[..],
                        &ts,
                        &record.system,
                        &record.verb,
                        &record.agent,
                        &record.decision,
                        level,
                        text,
                        &record.run_id,
                        &record.action_id,
                    ])
                    .map_err(self.sqlite("inserting an entry"))?;
                if let Some(unfiled) = edge.unfiled.as_mut() {
                    unfiled.add(&Columns {
                        seq,
                        ts: &ts,
                        system: &record.system,
                        agent: record.agent.as_deref(),
                        decision: &record.decision,
                        level,
                        run: record.run_id.as_deref(),
                        action_id: Some(&record.action_id),
                    });
                }
                // The tree hashes this leaf completes, kept until the next bulk write.
                let pending = &mut edge.pending;
                edge.range
                    .push_with(leaf_hash(&hash), |node| pending.push(*node));
                edge.seq = seq;
                edge.hash = hash;
                appended.push(Appended { seq, hash, ts });
            }
        }
        if edge.seq - edge.written >= TREE_FLUSH_LEAVES {
            self.write_tree_tail(&tx, &mut edge)?;
        }
        if edge.seq - edge.filed >= FILING_ROWS {
            self.file_tail(&tx, &mut edge)?;
        }
        // Commit point: once this returns, the rows are durable at the configured level.
        tx.commit().map_err(self.sqlite("committing an append"))?;
        // Our own commit leaves `data_version` as it was, so the edge stays current.
        self.keep_edge(edge);
        if let Store::Sqlite(store) = &self.store {
            store.wal.committed(records.len(), &conn);
        }
        Ok(std::mem::take(appended))
    }

    /// Files the entries after `edge.filed`, inside the caller's write transaction.
    pub(crate) fn file_tail(&self, conn: &Connection, edge: &mut Edge) -> Result<(), LedgerError> {
        if edge.filed < edge.seq {
            let unfiled = match edge.unfiled.take() {
                Some(unfiled) => unfiled,
                None => self.unfiled_in(conn, edge.filed, edge.seq)?,
            };
            self.write_filing(conn, &unfiled, edge.seq)?;
            edge.filed = edge.seq;
        }
        edge.unfiled = Some(Unfiled::default());
        Ok(())
    }

    /// Files the entries after `from`, read back from the file, through `through`,
    /// the newest entry: [`FILING_CHUNK`] at a time, so a copy of a large ledger never
    /// holds more than that many entries' lookups.
    pub(crate) fn file_entries(
        &self,
        conn: &Connection,
        from: u64,
        through: u64,
    ) -> Result<(), LedgerError> {
        let mut start = from;
        loop {
            let end = start.saturating_add(FILING_CHUNK).min(through);
            let unfiled = self.unfiled_in(conn, start, end)?;
            self.write_filing(conn, &unfiled, end)?;
            if end >= through {
                return Ok(());
            }
            start = end;
        }
    }

    /// Adds `unfiled` to `counters` and `lookups` and records the entries filed
    /// through `through`.
    fn write_filing(
        &self,
        conn: &Connection,
        unfiled: &Unfiled,
        through: u64,
    ) -> Result<(), LedgerError> {
        let write = || -> rusqlite::Result<()> {
            let mut upsert = conn.prepare_cached(UPSERT_COUNTER)?;
            for ((dim, key, hour), n) in &unfiled.counters {
                upsert.execute(params![dim, key, hour, n])?;
            }
            let mut insert = conn.prepare_cached(INSERT_LOOKUP)?;
            for (key, seq) in &unfiled.lookups {
                insert.execute(params![key, seq])?;
            }
            conn.prepare_cached("INSERT OR REPLACE INTO attest_meta (key, value) VALUES (?1, ?2)")?
                .execute(params![FILED_THROUGH, through.to_string()])?;
            Ok(())
        };
        write().map_err(self.sqlite("filing entries"))
    }

    /// Writes the pending tree hashes, inside the caller's write transaction.
    pub(crate) fn write_tree_tail(
        &self,
        conn: &Connection,
        edge: &mut Edge,
    ) -> Result<(), LedgerError> {
        let mut insert = conn
            .prepare_cached(INSERT_TREE_HASH)
            .map_err(self.sqlite("storing tree hashes"))?;
        let first = stored_hash_index(0, edge.written);
        for (idx, node) in (first..).zip(&edge.pending) {
            insert
                .execute(params![idx, &node[..]])
                .map_err(self.sqlite("storing tree hashes"))?;
        }
        edge.pending.clear();
        edge.written = edge.seq;
        Ok(())
    }

    /// Keeps `edge` for the next append; only after its transaction committed.
    pub(crate) fn keep_edge(&self, edge: Edge) {
        if let Some(mut slot) = self.edge_slot() {
            *slot = Some(edge);
        }
    }

    /// Drops the cached edge: the next append reads it from the file.
    pub(crate) fn forget_edge(&self) {
        if let Some(mut slot) = self.edge_slot() {
            *slot = None;
        }
    }

    fn edge_slot(&self) -> Option<MutexGuard<'_, Option<Edge>>> {
        match &self.store {
            // Only whole values are stored; a poisoned lock holds no torn state.
            Store::Sqlite(store) => Some(store.edge.lock().unwrap_or_else(PoisonError::into_inner)),
            Store::Postgres(_) => None,
        }
    }

    /// The chain's end, inside a write transaction: the cached edge when no other
    /// connection has committed since it was taken, else read from the file (the
    /// recovery path after another writer's commit or crash: the tail of tree hashes it
    /// left unwritten is computed from the entries).
    pub(crate) fn edge_in(&self, conn: &Connection) -> Result<Edge, LedgerError> {
        let data_version: i64 = conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut stmt| stmt.query_row([], |row| row.get(0)))
            .map_err(self.sqlite("reading the data version"))?;
        let cached = self.edge_slot().and_then(|mut slot| slot.take());
        if let Some(edge) = cached.filter(|edge| edge.data_version == data_version) {
            return Ok(edge);
        }
        // A corrupt tip is not chained onto: the append fails and the action does not run.
        let (seq, hash) = self.tip_in(conn)?.unwrap_or((0, GENESIS));
        let tail = read_tail(conn).map_err(|source| LedgerError::Tree { seq, source })?;
        if tail.range.size() != seq {
            return Err(LedgerError::BadRow {
                seq,
                detail: format!(
                    "the tree hashes cover {} entries but the last entry is seq {seq}; run `attest verify`",
                    tail.range.size()
                ),
            });
        }
        // A file that does not say filed every entry as it was appended (schema 2).
        let filed = self.filed_through_in(conn)?.unwrap_or(seq);
        Ok(Edge {
            data_version,
            seq,
            hash,
            range: tail.range,
            written: tail.written,
            filed,
            unfiled: None,
            pending: tail.hashes,
        })
    }

    /// The newest row's seq and hash, or `None` for an empty ledger.
    pub fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.read(|src| src.tip())
    }

    pub(crate) fn tip_in(&self, conn: &Connection) -> Result<Option<(u64, Hash)>, LedgerError> {
        let tip: Option<(u64, Vec<u8>)> = conn
            .prepare_cached(SELECT_TIP)
            .and_then(|mut stmt| {
                stmt.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(self.sqlite("reading the tip"))?;
        match tip {
            None => Ok(None),
            Some((seq, hash)) => {
                let hash: Hash = hash.try_into().map_err(|_| LedgerError::BadRow {
                    seq,
                    detail: "hash column is not 32 bytes; run `attest verify`".to_owned(),
                })?;
                Ok(Some((seq, hash)))
            }
        }
    }

    /// The newest `limit` rows, newest first, from the indexed columns.
    pub fn list(&self, limit: usize) -> Result<Vec<RowSummary>, LedgerError> {
        self.list_filtered(&Filter::default(), limit)
    }

    /// Calls `visit` for every row with `seq >= from_seq`, in seq order, streaming.
    ///
    /// `visit` returns `false` to stop early.
    pub fn for_each_row(
        &self,
        from_seq: u64,
        mut visit: impl FnMut(&StoredRow<'_>) -> Result<bool, LedgerError>,
    ) -> Result<(), LedgerError> {
        self.read(|src| src.rows(from_seq, &mut visit))
    }

    pub(crate) fn for_each_row_in(
        &self,
        conn: &Connection,
        from_seq: u64,
        mut visit: impl FnMut(&StoredRow<'_>) -> Result<bool, LedgerError>,
    ) -> Result<(), LedgerError> {
        let select = match &self.store {
            Store::Sqlite(store) => store.select_rows,
            Store::Postgres(_) => SELECT_ROWS,
        };
        let mut stmt = conn
            .prepare_cached(select)
            .map_err(self.sqlite("reading entries"))?;
        let mut rows = stmt
            .query([from_seq])
            .map_err(self.sqlite("reading entries"))?;
        while let Some(row) = rows.next().map_err(self.sqlite("reading entries"))? {
            let read = || -> Result<StoredRow<'_>, rusqlite::Error> {
                Ok(StoredRow {
                    seq: row.get(0)?,
                    hash: row.get_ref(1)?.as_bytes_or_null()?.unwrap_or_default(),
                    ts: row.get_ref(2)?.as_str_or_null()?.unwrap_or_default(),
                    system: row.get_ref(3)?.as_str_or_null()?.unwrap_or_default(),
                    verb: row.get_ref(4)?.as_str_or_null()?.unwrap_or_default(),
                    agent: row.get_ref(5)?.as_str_or_null()?,
                    decision: row.get_ref(6)?.as_str_or_null()?.unwrap_or_default(),
                    level: row.get_ref(7)?.as_str_or_null()?,
                    body: row.get_ref(8)?.as_bytes_or_null()?.unwrap_or_default(),
                    run: row.get_ref(9)?.as_str_or_null()?,
                    action_id: row.get_ref(10)?.as_str_or_null()?,
                })
            };
            let stored = read().map_err(self.sqlite("reading an entry"))?;
            if !visit(&stored)? {
                break;
            }
        }
        Ok(())
    }

    /// Writes every stored body, one per line, exactly the bytes that were hashed.
    pub fn export_jsonl(&self, out: &mut impl std::io::Write) -> Result<u64, LedgerError> {
        let mut count = 0;
        self.for_each_row(1, |row| {
            out.write_all(row.body).map_err(LedgerError::Output)?;
            out.write_all(b"\n").map_err(LedgerError::Output)?;
            count += 1;
            Ok(true)
        })?;
        out.flush().map_err(LedgerError::Output)?;
        Ok(count)
    }
}

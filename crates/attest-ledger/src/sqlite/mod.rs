//! The embedded store: one SQLite file in WAL mode ([`Store`] for SQLite).
//!
//! Appends are compare-and-swap on the tip: the tip is read inside an `IMMEDIATE`
//! transaction, which holds SQLite's write lock, so threads and processes sharing the
//! file each see the row before theirs and the chain stays linear.

mod append;
mod calls;
mod idempotency;
mod meta;
mod query;
mod subjects;
pub(crate) use subjects::pair as subject_pair;
pub(crate) mod read;
pub(crate) mod readonly;
mod tree;
mod wal;
mod windows;
mod write;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::calls::{Riding, SettleCall, StoredCall};
use crate::chain::ChainEdge;
use crate::clock::format_ts;
use crate::erasure::Forget;
use crate::idempotency::{KeyChange, KeyState, KeysPurged, StoredKey};
use crate::query::{Counts, Filter, Unfiled};
use crate::source::Source;
use crate::store::{Build, Cut, Extended, Read, Sign, Store};
use crate::windows::{Settle, StoredClaim};
use crate::{
    Clock, Hash, LedgerError, LedgerOptions, Record, RowSummary, StoredCheckpoint, StoredRow,
    SystemClock,
};
use read::SqliteSource;
pub use wal::switch_to_wal;
use wal::{WalCheckpointer, WAL_SIZE_LIMIT};

/// The schema version stored in `attest_meta` (and, from version 2 on, in
/// `attest_schema`); bump it with a migration in `MIGRATIONS`.
pub const SCHEMA_VERSION: u32 = 7;

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
    // 4: window counts for policy's budgets and rates, beside the chain (see
    // `crate::windows`); nothing to fill: counting starts with the first limit.
    windows::WINDOWS_SCHEMA,
    // 5: idempotency keys and the responses they replay, beside the chain (see
    // `crate::idempotency`); nothing to fill.
    idempotency::KEYS_SCHEMA,
    // 6: recent calls by digest, beside the chain (see `crate::calls`); nothing to
    // fill: an older release stored no digest, so its open intents block nothing.
    calls::CALLS_SCHEMA,
    // 7: subject keys for sealed personal fields, beside the chain (see
    // `crate::erasure`); nothing to fill: an older release sealed nothing.
    subjects::SUBJECTS_SCHEMA,
];

/// How long a writer waits for another writer's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);
/// Prepared statements the write connection keeps.
const STATEMENT_CACHE: usize = 64;

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
/// the entries' `hash` column ([`tree::read_tail`]), so proofs, roots and
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

/// The SQLite store's connection and append state.
pub(crate) struct SqliteStore {
    path: PathBuf,
    /// Where the schema's applied times come from.
    clock: Arc<dyn Clock>,
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
    /// The configured durability: side-table commits run at `NORMAL` under `FULL`
    /// (see `calls.rs`) and restore it.
    durability: crate::Durability,
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
    chain: ChainEdge,
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

impl SqliteStore {
    /// Opens (or, with `options.create`, creates) the file at `location` (the
    /// tenant's file beside it, for a tenant), creating or upgrading its schema.
    pub(crate) fn open(
        location: &Path,
        options: &LedgerOptions,
    ) -> Result<SqliteStore, LedgerError> {
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
        switch_to_wal(&conn, BUSY_TIMEOUT).map_err(sqlite("switching to WAL"))?;
        conn.pragma_update(None, "synchronous", options.durability.pragma())
            .map_err(sqlite("setting durability"))?;
        // Commits never checkpoint the WAL themselves: `wal` does it off the append path.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(sqlite("handing WAL checkpoints to a thread"))?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(sqlite("bounding the WAL"))?;
        // Every statement the write path prepares stays cached (rusqlite keeps 16 by
        // default; appends, digest steps, windows and keys use about 25).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let wal = WalCheckpointer::start(&path).map_err(sqlite("opening the WAL checkpointer"))?;
        let store = SqliteStore {
            path,
            clock: options.clock.clone(),
            conn: Mutex::new(conn),
            edge: Mutex::new(None),
            wal,
            select_rows: SELECT_ROWS,
            durability: options.durability,
        };
        store.init_schema()?;
        Ok(store)
    }

    /// A store over a read-only connection to a file of schema `version`.
    pub(crate) fn from_connection(path: PathBuf, conn: Connection, version: u32) -> SqliteStore {
        SqliteStore {
            path,
            clock: Arc::new(SystemClock),
            conn: Mutex::new(conn),
            edge: Mutex::new(None),
            wal: WalCheckpointer::inline(),
            select_rows: if version < 2 {
                SELECT_ROWS_V1
            } else {
                SELECT_ROWS
            },
            durability: crate::Durability::Full,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no transaction open (rusqlite rolls back
        // on drop), so the connection is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
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

    fn init_schema(&self) -> Result<(), LedgerError> {
        let mut conn = self.lock();
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
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT IN ('attest_meta', 'entries', 'tree_hashes', 'checkpoints', 'approvals', 'counters', 'attest_schema', 'lookups', 'window_entries', 'idempotency_keys', 'call_digests', 'subject_keys'))",
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
                params![to, format_ts(self.clock.now())],
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
}

impl Store for SqliteStore {
    fn path(&self) -> &Path {
        &self.path
    }

    fn extend(
        &self,
        records: &[Record],
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
        _fresh: bool,
        build: &mut Build<'_>,
    ) -> Extended {
        // The cached edge is checked against `data_version` inside the write lock, so
        // it is never stale: `fresh` changes nothing here.
        self.extend_chain(records, calls, forget, build)
    }

    fn late_commits(&self) -> bool {
        false
    }

    fn attempts(&self) -> u32 {
        // A second attempt on a fresh edge after a commit that did not hold; the busy
        // timeout already waited for other writers.
        2
    }

    fn recover(&self, _attempt: u32) -> Result<(), LedgerError> {
        Ok(())
    }

    fn save_checkpoint(
        &self,
        sign: &mut Sign<'_>,
    ) -> Result<(StoredCheckpoint, bool), LedgerError> {
        self.store_checkpoint(sign)
    }

    fn prune(&self, cut: &mut Cut<'_>) -> Result<Option<u64>, LedgerError> {
        self.remove_prefix(cut)
    }

    fn read(&self, read: &mut Read<'_>) -> Result<(), LedgerError> {
        let mut conn = self.lock();
        // One read transaction: a consistent snapshot even while others append.
        let tx = conn.transaction().map_err(self.sqlite("starting a read"))?;
        read(&SqliteSource::new(self, &tx))
    }

    fn list(&self, filter: &Filter, limit: usize) -> Result<Vec<RowSummary>, LedgerError> {
        self.list_filtered(filter, limit)
    }

    fn rows_at(
        &self,
        seqs: &[u64],
        visit: &mut dyn FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        let conn = self.lock();
        for &seq in seqs {
            self.for_each_row_in(&conn, seq, |row| {
                if row.seq == seq {
                    visit(row)?;
                }
                Ok(false)
            })?;
        }
        Ok(())
    }

    fn counts(&self) -> Result<Counts, LedgerError> {
        self.counts_now()
    }

    fn copy_in(&self, source: &dyn Source) -> Result<u64, LedgerError> {
        self.copy_from(source)
    }
    fn windows(
        &self,
        now_ms: i64,
        action_id: &str,
        claims: &[StoredClaim],
        settle: Option<&mut Settle<'_>>,
    ) -> Result<Vec<crate::windows::Figure>, LedgerError> {
        self.settle_windows(now_ms, action_id, claims, settle)
    }

    fn release_windows(&self, action_id: &str, keys: &[[u8; 32]]) -> Result<(), LedgerError> {
        self.release_window_entries(action_id, keys)
    }

    fn claim_key(&self, now_ms: i64, claim: &StoredKey<'_>) -> Result<KeyState, LedgerError> {
        self.claim_idempotency_key(now_ms, claim)
    }

    fn change_key(
        &self,
        key: Option<&[u8; 32]>,
        action_id: &str,
        change: KeyChange<'_>,
    ) -> Result<(), LedgerError> {
        self.change_idempotency_key(key, action_id, change)
    }

    fn purge_keys(&self, now_ms: i64) -> Result<KeysPurged, LedgerError> {
        self.purge_idempotency_keys(now_ms)
    }

    fn key_secret(&self, fresh: &str) -> Result<String, LedgerError> {
        self.idempotency_secret(fresh)
    }

    fn subject_key(
        &self,
        index: &[u8; 32],
        fresh: Option<&[u8; 32]>,
    ) -> Result<Option<[u8; 32]>, LedgerError> {
        self.stored_subject_key(index, fresh)
    }

    fn subject_keys(&self) -> Result<Vec<crate::erasure::KeptKey>, LedgerError> {
        self.all_subject_keys()
    }

    fn calls(
        &self,
        digest: [u8; 32],
        settle: Option<&mut SettleCall<'_>>,
    ) -> Result<Option<StoredCall>, LedgerError> {
        self.settle_call(digest, settle)
    }

    fn forget_calls(&self, action_id: &str) -> Result<u64, LedgerError> {
        self.forget_call_rows(action_id)
    }

    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.meta_value(key)
    }

    fn swap_meta(&self, key: &str, old: Option<&str>, new: &str) -> Result<bool, LedgerError> {
        self.swap_meta_value(key, old, new)
    }
}

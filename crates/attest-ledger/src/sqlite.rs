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
use crate::wal::{WalCheckpointer, WAL_SIZE_LIMIT};
use crate::{Clock, Durability, LedgerError, Record, SystemClock};
use tlog_tiles::stored_hash_index;

/// The schema version stored in `attest_meta`; bump it with a migration.
pub const SCHEMA_VERSION: u32 = 1;

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

/// Leaves whose tree hashes an append keeps in memory before writing them in one go.
///
/// A leaf's hashes written with it would cost a `tree_hashes` page in every commit;
/// written every 64 leaves, one page covers them all. Until then they are derived
/// data: any reader (another process, or this one after a crash) computes them from
/// the entries' `hash` column ([`crate::merkle::read_tail`]), so proofs, roots and
/// verify are the same whether they are written or not. A checkpoint writes them.
const TREE_FLUSH_LEAVES: u64 = 64;

const INSERT_ENTRY: &str =
    "INSERT INTO entries (seq, hash, ts, system, verb, agent, decision, level, body)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const INSERT_TREE_HASH: &str = "INSERT INTO tree_hashes (idx, hash) VALUES (?1, ?2)";
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
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            durability: Durability::Full,
            clock: Arc::new(SystemClock),
            create: true,
        }
    }
}

impl std::fmt::Debug for LedgerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOptions")
            .field("durability", &self.durability)
            .field("create", &self.create)
            .finish_non_exhaustive()
    }
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
    /// The stored canonical body, exactly the bytes that were hashed.
    pub body: &'a [u8],
}

/// A hash-chained ledger in one SQLite file.
pub struct Ledger {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The chain's end as this connection last committed it; locked only while `conn`
    /// is held.
    edge: Mutex<Option<Edge>>,
    clock: Arc<dyn Clock>,
    pub(crate) group: GroupCommit,
    /// WAL checkpoints, run on a thread of their own instead of inside a commit.
    wal: WalCheckpointer,
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
    pub fn open(path: impl AsRef<Path>, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        let path = path.as_ref().to_path_buf();
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
            conn: Mutex::new(conn),
            edge: Mutex::new(None),
            clock: options.clock,
            group: GroupCommit::default(),
            wal,
        };
        ledger.init_schema()?;
        Ok(ledger)
    }

    /// A ledger over an open connection (the read-only opener's way in).
    pub(crate) fn from_connection(path: PathBuf, conn: Connection) -> Ledger {
        Ledger {
            path,
            conn: Mutex::new(conn),
            edge: Mutex::new(None),
            clock: Arc::new(SystemClock),
            group: GroupCommit::default(),
            wal: WalCheckpointer::inline(),
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

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no transaction open (rusqlite rolls back
        // on drop), so the connection is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
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
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT IN ('attest_meta', 'entries', 'tree_hashes', 'checkpoints', 'approvals'))",
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
            if found.as_deref() != Some(&SCHEMA_VERSION.to_string()) {
                return Err(LedgerError::SchemaVersion {
                    path: self.path.clone(),
                    found: found.unwrap_or_else(|| "none".to_owned()),
                    expected: SCHEMA_VERSION,
                });
            }
            // A ledger written before these indexes were dropped still has them; dropping
            // one that is not there changes nothing.
            tx.execute_batch(DROP_UNUSED_INDEXES)
                .map_err(self.sqlite("dropping unused indexes"))?;
            tx.commit()
                .map_err(self.sqlite("dropping unused indexes"))?;
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
            "INSERT INTO attest_meta (key, value) VALUES ('schema_version', ?1)",
            [SCHEMA_VERSION.to_string()],
        )
        .map_err(self.sqlite("creating the schema"))?;
        tx.commit().map_err(self.sqlite("creating the schema"))
    }

    /// Appends one record and returns its seq and hash once it is durable; concurrent
    /// callers share a transaction (see [`Ledger::append_owned`]).
    pub fn append(&self, record: &Record) -> Result<Appended, LedgerError> {
        self.append_owned(record.clone())
    }

    /// Appends records in order, in one transaction and one sync.
    pub fn append_batch(&self, records: &[Record]) -> Result<Vec<Appended>, LedgerError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("starting an append"))?;
        // The tip is read (or confirmed current) under the write lock: no other writer
        // can append in between. Until the commit, the edge lives only here: on any
        // error it is dropped and the next append reads the file again.
        let mut edge = self.edge_in(&tx)?;
        let mut appended = Vec::with_capacity(records.len());
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
                insert
                    .execute(params![
                        seq,
                        &hash[..],
                        &ts,
                        &record.system,
                        &record.verb,
                        &record.agent,
                        &record.decision,
                        record.verification.as_ref().map(|v| v.level.as_str()),
                        text,
                    ])
                    .map_err(self.sqlite("inserting an entry"))?;
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
        // Commit point: once this returns, the rows are durable at the configured level.
        tx.commit().map_err(self.sqlite("committing an append"))?;
        // Our own commit leaves `data_version` as it was, so the edge stays current.
        self.keep_edge(edge);
        self.wal.committed(records.len(), &conn);
        Ok(appended)
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
        *self.edge_slot() = Some(edge);
    }

    fn edge_slot(&self) -> MutexGuard<'_, Option<Edge>> {
        // Only whole values are stored; a poisoned lock holds no torn state.
        self.edge.lock().unwrap_or_else(PoisonError::into_inner)
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
        let cached = self.edge_slot().take();
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
        Ok(Edge {
            data_version,
            seq,
            hash,
            range: tail.range,
            written: tail.written,
            pending: tail.hashes,
        })
    }

    /// The newest row's seq and hash, or `None` for an empty ledger.
    pub fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.tip_in(&self.lock())
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
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, ts, system, verb, agent, decision, level, hash
                 FROM entries ORDER BY seq DESC LIMIT ?1",
            )
            .map_err(self.sqlite("listing entries"))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map([limit], |row| {
                let hash: Vec<u8> = row.get(7)?;
                Ok((
                    RowSummary {
                        seq: row.get(0)?,
                        ts: row.get(1)?,
                        system: row.get(2)?,
                        verb: row.get(3)?,
                        agent: row.get(4)?,
                        decision: row.get(5)?,
                        level: row.get(6)?,
                        hash: GENESIS,
                    },
                    hash,
                ))
            })
            .map_err(self.sqlite("listing entries"))?;
        let mut out = Vec::new();
        for row in rows {
            let (mut summary, hash) = row.map_err(self.sqlite("listing entries"))?;
            summary.hash = hash.try_into().map_err(|_| LedgerError::BadRow {
                seq: summary.seq,
                detail: "hash column is not 32 bytes".to_owned(),
            })?;
            out.push(summary);
        }
        Ok(out)
    }

    /// Calls `visit` for every row with `seq >= from_seq`, in seq order, streaming.
    ///
    /// `visit` returns `false` to stop early.
    pub fn for_each_row(
        &self,
        from_seq: u64,
        visit: impl FnMut(&StoredRow<'_>) -> Result<bool, LedgerError>,
    ) -> Result<(), LedgerError> {
        self.for_each_row_in(&self.lock(), from_seq, visit)
    }

    pub(crate) fn for_each_row_in(
        &self,
        conn: &Connection,
        from_seq: u64,
        mut visit: impl FnMut(&StoredRow<'_>) -> Result<bool, LedgerError>,
    ) -> Result<(), LedgerError> {
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, hash, ts, system, verb, agent, decision, level, body
                 FROM entries WHERE seq >= ?1 ORDER BY seq",
            )
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

//! The SQLite store's append: a compare-and-swap on the edge inside one `IMMEDIATE`
//! transaction (SQLite's write lock), rows inserted with a prepared statement, tree
//! hashes and filing written in bulk every 64 entries.

use std::sync::{MutexGuard, PoisonError};

use rusqlite::{params, Connection, OptionalExtension};
use tlog_tiles::stored_hash_index;

use super::query::{INSERT_LOOKUP, UPSERT_COUNTER};
use super::tree::read_tail;
use super::{
    Edge, SqliteStore, FILING_CHUNK, FILING_ROWS, INSERT_ENTRY, INSERT_TREE_HASH, SELECT_TIP,
    TREE_FLUSH_LEAVES,
};
use crate::calls::Riding;
use crate::canonical::{Hash, GENESIS};
use crate::chain::ChainEdge;
use crate::erasure::Forget;
use crate::query::{Columns, Unfiled, FILED_THROUGH};
use crate::store::{Build, Extended};
use crate::{LedgerError, Record};

impl SqliteStore {
    /// One append attempt ([`crate::store::Store::extend`]). SQLite never loses to
    /// another writer (the write lock is held from the edge read to the commit), and a
    /// commit that returned an error either holds or never will.
    pub(crate) fn extend_chain(
        &self,
        records: &[Record],
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
        build: &mut Build<'_>,
    ) -> Extended {
        let conn = self.lock();
        let tx = match WriteTx::begin(&conn) {
            Ok(tx) => tx,
            Err(err) => return Extended::Failed(self.sqlite("starting an append")(err)),
        };
        // The tip is read (or confirmed current) under the write lock: no other writer
        // can append in between. Until the commit, the edge lives only here: on any
        // error it is dropped and the next append reads the file again.
        let written = (|| {
            let mut edge = self.edge_in(&tx)?;
            let built = build(&edge.chain)?;
            self.insert_built(&tx, records, &built, &mut edge)?;
            if !calls.is_empty() {
                let seqs: Vec<u64> = built.rows.iter().map(|row| row.seq).collect();
                self.ride_calls(&tx, calls, &seqs)?;
            }
            if let Some(forget) = forget {
                self.forget_subject(&tx, &forget.index)?;
                if let Some(before_commit) = forget.before_commit {
                    before_commit();
                }
            }
            edge.chain = built.edge.clone();
            if edge.chain.seq - edge.written >= TREE_FLUSH_LEAVES {
                self.write_tree_tail(&tx, &mut edge)?;
            }
            if edge.chain.seq - edge.filed >= FILING_ROWS {
                self.file_tail(&tx, &mut edge)?;
            }
            Ok::<_, LedgerError>((edge, built.appended()))
        })();
        let (edge, appended) = match written {
            Ok(done) => done,
            Err(err) => return Extended::Failed(err),
        };
        // Commit point: once this returns, the rows are durable at the configured level.
        if let Err(err) = tx.commit() {
            return Extended::Unknown {
                built: appended,
                error: self.sqlite("committing an append")(err),
            };
        }
        // Our own commit leaves `data_version` as it was, so the edge stays current.
        self.keep_edge(edge);
        self.wal.committed(records.len(), &conn);
        Extended::Committed(appended)
    }

    /// Inserts the built rows with their records' columns, tallying what filing them
    /// adds and keeping the tree hashes they complete for the next bulk write.
    fn insert_built(
        &self,
        conn: &Connection,
        records: &[Record],
        built: &crate::chain::Built,
        edge: &mut Edge,
    ) -> Result<(), LedgerError> {
        let mut insert = conn
            .prepare_cached(INSERT_ENTRY)
            .map_err(self.sqlite("preparing an append"))?;
        for (row, record) in built.rows.iter().zip(records) {
            let level = record.verification.as_ref().map(|v| v.level.as_str());
            insert
                .execute(params![
                    row.seq,
                    &row.hash[..],
                    &row.ts,
                    &record.system,
                    &record.verb,
                    &record.agent,
                    &record.decision,
                    level,
                    &row.body,
                    &record.run_id,
                    &record.action_id,
                ])
                .map_err(self.sqlite("inserting an entry"))?;
            if let Some(unfiled) = edge.unfiled.as_mut() {
                unfiled.add(&Columns {
                    seq: row.seq,
                    ts: &row.ts,
                    system: &record.system,
                    agent: record.agent.as_deref(),
                    decision: &record.decision,
                    level,
                    run: record.run_id.as_deref(),
                    action_id: Some(&record.action_id),
                });
            }
        }
        edge.pending.extend_from_slice(&built.tree);
        Ok(())
    }

    /// Files the entries after `edge.filed`, inside the caller's write transaction.
    pub(crate) fn file_tail(&self, conn: &Connection, edge: &mut Edge) -> Result<(), LedgerError> {
        if edge.filed < edge.chain.seq {
            let unfiled = match edge.unfiled.take() {
                Some(unfiled) => unfiled,
                None => self.unfiled_in(conn, edge.filed, edge.chain.seq)?,
            };
            self.write_filing(conn, &unfiled, edge.chain.seq)?;
            edge.filed = edge.chain.seq;
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
        edge.written = edge.chain.seq;
        Ok(())
    }

    /// Keeps `edge` for the next append; only after its transaction committed.
    pub(crate) fn keep_edge(&self, edge: Edge) {
        *self.edge_slot() = Some(edge);
    }

    /// Drops the cached edge: the next append reads it from the file.
    pub(crate) fn forget_edge(&self) {
        *self.edge_slot() = None;
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
        // A file that does not say filed every entry as it was appended (schema 2).
        let filed = self.filed_through_in(conn)?.unwrap_or(seq);
        Ok(Edge {
            data_version,
            chain: ChainEdge {
                seq,
                hash,
                range: tail.range,
            },
            written: tail.written,
            filed,
            unfiled: None,
            pending: tail.hashes,
        })
    }

    pub(crate) fn tip_in(&self, conn: &Connection) -> Result<Option<(u64, Hash)>, LedgerError> {
        let tip: Option<(u64, Vec<u8>)> = conn
            .prepare_cached(SELECT_TIP)
            .and_then(|mut stmt| {
                stmt.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(self.sqlite("reading the tip"))?;
        tip.map(|(seq, hash)| crate::source::tip_from(seq, &hash))
            .transpose()
    }
}

/// An `IMMEDIATE` transaction (SQLite's write lock from the start) begun and committed
/// through cached statements. rusqlite's `Transaction` runs `BEGIN IMMEDIATE` and
/// `COMMIT` through `execute_batch`, which parses them again on every append: about 7%
/// of a whole action in its profile. Dropped uncommitted (an error, or a failed
/// `COMMIT`), it rolls back, as rusqlite's does.
pub(crate) struct WriteTx<'c> {
    conn: &'c Connection,
}

impl<'c> WriteTx<'c> {
    pub(crate) fn begin(conn: &'c Connection) -> rusqlite::Result<WriteTx<'c>> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(WriteTx { conn })
    }

    pub(crate) fn commit(self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }
}

impl std::ops::Deref for WriteTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        // Committed: nothing open. Otherwise undo what this transaction wrote; a failed
        // rollback leaves the connection to SQLite's own recovery, as rusqlite does.
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

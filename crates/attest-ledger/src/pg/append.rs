//! The PostgreSQL store's append: one statement per group (entries, tree hashes and
//! counters), a compare-and-swap on the key `(tenant, seq)`, and how each failure is
//! told apart (another writer's row, a refusal, or a connection lost with the outcome
//! unknown).

use std::cell::RefCell;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, IsolationLevel};

use super::blocking::Held;
use super::read::PgSource;
use super::{Conn, PgStore};
use crate::canonical::GENESIS;
use crate::chain::{Built, ChainEdge};
use crate::merkle::CompactRange;
use crate::source::{Hashes, Source};
use crate::store::{Build, Extended};
use crate::{LedgerError, Record};

/// One statement per group: the entries; then (each reading the entries' output, so
/// they run after every entry is in) the tree hashes and the counters. A conflict on
/// `(tenant, seq)` fails the whole statement: nothing of the group is written.
pub(crate) const APPEND: &str = "WITH e AS (
    INSERT INTO entries (tenant, seq, hash, ts, system, verb, agent, decision, level, run, action_id, body)
    SELECT $1, * FROM UNNEST($2::int8[], $3::bytea[], $4::text[], $5::text[], $6::text[],
                             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[])
    RETURNING ts, system, agent, decision, level
), t AS (
    INSERT INTO tree_hashes (tenant, idx, hash)
    SELECT $1, u.idx, u.hash FROM UNNEST($13::int8[], $14::bytea[]) AS u(idx, hash)
    WHERE (SELECT count(*) FROM e) > 0
    RETURNING 1
), c AS (
    INSERT INTO counters (tenant, dim, key, hour, n)
    SELECT $1, d.dim, d.key, d.hour, count(*)
    FROM e CROSS JOIN LATERAL (VALUES
        ('decision', e.decision, ''),
        ('level', coalesce(e.level, ''), ''),
        ('system', e.system, ''),
        ('agent', coalesce(e.agent, ''), ''),
        ('decision', e.decision, left(e.ts, 13))
    ) AS d(dim, key, hour)
    GROUP BY d.dim, d.key, d.hour
    ORDER BY d.dim, d.key, d.hour
    ON CONFLICT (tenant, dim, key, hour) DO UPDATE SET n = counters.n + EXCLUDED.n
    RETURNING 1
)
SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM t), (SELECT count(*) FROM c)";

const APPEND_TYPES: [Type; 14] = [
    Type::TEXT,
    Type::INT8_ARRAY,
    Type::BYTEA_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::BYTEA_ARRAY,
    Type::INT8_ARRAY,
    Type::BYTEA_ARRAY,
];

/// How often a group is tried before the append fails: conflicts with other writers
/// and lost connections both retry (with a randomized back-off, up to about a minute
/// under contention, as SQLite's busy timeout).
pub(crate) const MAX_ATTEMPTS: u32 = 4096;

impl PgStore {
    /// One append attempt ([`crate::store::Store::extend`]).
    pub(crate) fn extend_chain(
        &self,
        records: &[Record],
        fresh: bool,
        build: &mut Build<'_>,
    ) -> Extended {
        if self.read_only {
            return Extended::Failed(LedgerError::ReadOnly {
                path: self.name.clone(),
            });
        }
        let mut client = match self.client() {
            Ok(client) => client,
            Err(err) => return Extended::Retry(err),
        };
        let cached = if fresh { None } else { self.edge_slot().take() };
        let edge = match cached {
            Some(edge) => edge,
            None => match self.load_edge(&mut client) {
                Ok(edge) => edge,
                Err(err) if is_connection(&err) => return Extended::Retry(err),
                Err(err) => return Extended::Failed(err),
            },
        };
        let built = match build(&edge) {
            Ok(built) => built,
            Err(err) => return Extended::Failed(err),
        };
        match self.write_group(&mut client, records, &built) {
            Ok(()) => {
                let appended = built.appended();
                *self.edge_slot() = Some(built.edge);
                Extended::Committed(appended)
            }
            // Another writer took the seq: read the new tip, rebuild, re-hash.
            Err(err) if is_conflict(&err) => Extended::Conflict(self.err("appending")(err)),
            // A constraint or type error: the same statement fails again.
            Err(err) if !is_ambiguous(&err) => Extended::Failed(self.err("appending")(err)),
            // The connection broke: the statement may have committed.
            Err(err) => Extended::Unknown {
                built: built.appended(),
                error: self.err("appending")(err),
            },
        }
    }

    /// Reads the chain's end from the database: the tip, and the compact range from
    /// the stored tree hashes (every leaf's hashes are written with it).
    fn load_edge(&self, client: &mut Client) -> Result<ChainEdge, LedgerError> {
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(self.err("reading the tip"))?;
        let source = PgSource {
            store: self,
            tx: RefCell::new(Held::new(tx)),
        };
        let (seq, hash) = source.tip()?.unwrap_or((0, GENESIS));
        let range = CompactRange::from_stored(seq, &Hashes(&source))
            .map_err(|source| LedgerError::Tree { seq, source })?;
        Ok(ChainEdge { seq, hash, range })
    }

    /// A fresh connection after a failure, waiting a little longer each time (a
    /// restarting server).
    pub(crate) fn reconnect(&self, attempt: u32) -> Result<Held<Conn>, LedgerError> {
        let mut last = None;
        for wait in 0..20u64 {
            std::thread::sleep(Duration::from_millis(
                20 * wait.min(10) + u64::from(attempt),
            ));
            match self.client() {
                Ok(mut client) => {
                    if client.is_valid(Duration::from_secs(5)).is_ok() {
                        return Ok(client);
                    }
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or(LedgerError::Pool {
            path: self.name.clone(),
            detail: "no working connection".to_owned(),
        }))
    }

    fn write_group(
        &self,
        client: &mut Client,
        records: &[Record],
        group: &Built,
    ) -> Result<(), postgres::Error> {
        let seqs: Vec<i64> = group.rows.iter().map(|r| r.seq as i64).collect();
        let hashes: Vec<&[u8]> = group.rows.iter().map(|r| &r.hash[..]).collect();
        let ts: Vec<&str> = group.rows.iter().map(|r| r.ts.as_str()).collect();
        let system: Vec<&str> = records.iter().map(|r| r.system.as_str()).collect();
        let verb: Vec<&str> = records.iter().map(|r| r.verb.as_str()).collect();
        let agent: Vec<Option<&str>> = records.iter().map(|r| r.agent.as_deref()).collect();
        let decision: Vec<&str> = records.iter().map(|r| r.decision.as_str()).collect();
        let level: Vec<Option<&str>> = records
            .iter()
            .map(|r| r.verification.as_ref().map(|v| v.level.as_str()))
            .collect();
        let run: Vec<Option<&str>> = records.iter().map(|r| r.run_id.as_deref()).collect();
        let action: Vec<&str> = records.iter().map(|r| r.action_id.as_str()).collect();
        let bodies: Vec<&[u8]> = group.rows.iter().map(|r| r.body.as_bytes()).collect();
        let tree_idx: Vec<i64> = (group.first_tree_index..)
            .take(group.tree.len())
            .map(|i| i as i64)
            .collect();
        let tree: Vec<&[u8]> = group.tree.iter().map(|h| &h[..]).collect();
        let params: [&(dyn ToSql + Sync); 14] = [
            &self.tenant,
            &seqs,
            &hashes,
            &ts,
            &system,
            &verb,
            &agent,
            &decision,
            &level,
            &run,
            &action,
            &bodies,
            &tree_idx,
            &tree,
        ];
        let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
            .iter()
            .copied()
            .zip(APPEND_TYPES.iter().cloned())
            .collect();
        client.query_typed(APPEND, &typed)?;
        Ok(())
    }
}

pub(crate) fn is_conflict(err: &postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(code) if *code == SqlState::UNIQUE_VIOLATION
            || *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Whether a statement's failure leaves its outcome unknown: the connection broke or
/// the server stopped the session (classes 08, 57, 58, 53), not a refusal.
fn is_ambiguous(err: &postgres::Error) -> bool {
    match err.code() {
        None => true,
        Some(code) => ["08", "57", "58", "53"]
            .iter()
            .any(|class| code.code().starts_with(class)),
    }
}

/// Whether reading the edge failed for the connection's sake, not the statement's (a
/// tree read cut short reads as a missing hash: retried too, a few dozen times).
fn is_connection(err: &LedgerError) -> bool {
    match err {
        LedgerError::Tree { .. } => true,
        LedgerError::Postgres { source, .. } => is_ambiguous(source) || source.is_closed(),
        LedgerError::Pool { .. } => true,
        _ => false,
    }
}

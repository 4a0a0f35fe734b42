//! The PostgreSQL store's append: one statement per group (entries and tree hashes, and
//! counters and lookups when the group files them; see [`AppendShape`]), a
//! compare-and-swap on the key `(tenant, seq)`, and how each failure is told apart
//! (another writer's row, a refusal, or a connection lost with the outcome unknown).

use std::cell::RefCell;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, GenericClient, IsolationLevel};

use super::blocking::Held;
use super::calls::RideStatements;
use super::connect::Session;
use super::read::PgSource;
use super::{Conn, PgEdge, PgStore};
use crate::calls::Riding;
use crate::canonical::GENESIS;
use crate::chain::{Built, ChainEdge};
use crate::erasure::Forget;
use crate::merkle::CompactRange;
use crate::source::{Hashes, Source};
use crate::store::{Build, Extended};
use crate::{LedgerError, Record};

/// Entries an append leaves unfiled before the next one files them in the same
/// statement (counters and run / action id lookups), as the SQLite store does
/// (`sqlite::FILING_ROWS`); readers take in the unfiled tail themselves.
pub(crate) const FILING_ROWS: u64 = 64;

/// The three append statements' shared parts, one spelling each (`concat!` takes only
/// literals): the entries' insert and its columns, the entries as the arrays `$2` to
/// `$12` in that order, and the tree hashes from `$13` and `$14`.
macro_rules! insert_entries {
    () => {
        "INSERT INTO entries (tenant, seq, hash, ts, system, verb, agent, decision, level, run, action_id, body)"
    };
}
macro_rules! unnested_entries {
    () => {
        "SELECT $1, * FROM UNNEST($2::int8[], $3::bytea[], $4::text[], $5::text[], $6::text[],
                             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[])"
    };
}
macro_rules! insert_tree_hashes {
    () => {
        "INSERT INTO tree_hashes (tenant, idx, hash)
    SELECT $1, u.idx, u.hash FROM UNNEST($13::int8[], $14::bytea[]) AS u(idx, hash)"
    };
}

/// The statement of a group that files ([`AppendShape::Filing`]), and of a prune's
/// filing step: the entries; then (each reading the entries' output, so
/// they run after every entry is in) the tree hashes and, when `$15`, the filing of
/// every entry after `$16` (those stored before, and these) into the counters and
/// lookups, with `filed_through` moved to `$17`. A conflict on `(tenant, seq)` fails
/// the whole statement: nothing of the group is written. With no entries it files
/// what is stored (a prune's first step).
pub(crate) const APPEND: &str = concat!(
    "WITH e AS (\n    ",
    insert_entries!(),
    "\n    ",
    unnested_entries!(),
    "
    RETURNING seq, ts, system, agent, decision, level, run, action_id
), t AS (
    ",
    insert_tree_hashes!(),
    "
    WHERE (SELECT count(*) FROM e) > 0
    RETURNING 1
), u AS (
    SELECT seq, ts, system, agent, decision, level, run, action_id FROM entries
    WHERE $15 AND tenant = $1 AND seq > $16
    UNION ALL
    SELECT seq, ts, system, agent, decision, level, run, action_id FROM e WHERE $15
), c AS (
    INSERT INTO counters (tenant, dim, key, hour, n)
    SELECT $1, d.dim, d.key, d.hour, count(*)
    FROM u CROSS JOIN LATERAL (VALUES
        ('decision', u.decision, ''),
        ('level', coalesce(u.level, ''), ''),
        ('system', u.system, ''),
        ('agent', coalesce(u.agent, ''), ''),
        ('decision', u.decision, left(u.ts, 13))
    ) AS d(dim, key, hour)
    GROUP BY d.dim, d.key, d.hour
    ORDER BY d.dim, d.key, d.hour
    ON CONFLICT (tenant, dim, key, hour) DO UPDATE SET n = counters.n + EXCLUDED.n
    RETURNING 1
), l AS (
    INSERT INTO lookups (tenant, key, seq)
    SELECT $1, 'run:' || u.run, u.seq FROM u WHERE u.run IS NOT NULL
    UNION ALL
    SELECT $1, 'action_id:' || u.action_id, u.seq FROM u WHERE u.action_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING 1
), f AS (
    INSERT INTO attest_meta (tenant, key, value)
    SELECT $1, 'filed_through', $17::text WHERE $15
    ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value
    RETURNING 1
)
SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM t), (SELECT count(*) FROM c),
       (SELECT count(*) FROM l), (SELECT count(*) FROM f)"
);

/// [`APPEND`] for a group that files nothing (63 appends in 64): the entries and their
/// tree hashes only. The server opens only the two tables it writes; the filing
/// statement's other three tables and the plan nodes that file into them cost one
/// row's append about as much server time as the row's own insert (`EXPLAIN ANALYZE`
/// of one row: 45 against 93–108 µs).
/// Its parameters are [`APPEND`]'s first fourteen; a conflict on `(tenant, seq)` fails
/// it whole, as it does [`APPEND`].
pub(crate) const APPEND_UNFILED: &str = concat!(
    "WITH e AS (\n    ",
    insert_entries!(),
    "\n    ",
    unnested_entries!(),
    "\n)\n",
    insert_tree_hashes!()
);

/// [`APPEND_UNFILED`] for a group of one row (every lone append): the row as plain
/// parameters, not eleven one-element arrays to unnest (`EXPLAIN ANALYZE`: 23 against
/// 38 µs of the server's time).
pub(crate) const APPEND_ONE: &str = concat!(
    "WITH e AS (\n    ",
    insert_entries!(),
    "\n    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)\n)\n",
    insert_tree_hashes!()
);

/// Which of the three append statements a group is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AppendShape {
    /// [`APPEND`]: entries, tree hashes, and the filing of counters and lookups.
    Filing,
    /// [`APPEND_UNFILED`]: entries and tree hashes.
    Unfiled,
    /// [`APPEND_ONE`]: one entry and its tree hashes.
    One,
}

impl AppendShape {
    pub(crate) fn sql(self) -> &'static str {
        match self {
            AppendShape::Filing => APPEND,
            AppendShape::Unfiled => APPEND_UNFILED,
            AppendShape::One => APPEND_ONE,
        }
    }

    pub(crate) fn types(self) -> &'static [Type] {
        match self {
            AppendShape::Filing => &APPEND_TYPES,
            AppendShape::Unfiled => &APPEND_TYPES[..UNFILED_PARAMS],
            AppendShape::One => &APPEND_ONE_TYPES,
        }
    }
}

/// [`APPEND_UNFILED`]'s parameters: [`APPEND`]'s without the filing's three, its last.
const UNFILED_PARAMS: usize = 14;

const APPEND_ONE_TYPES: [Type; 14] = [
    Type::TEXT,
    Type::INT8,
    Type::BYTEA,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::BYTEA,
    Type::INT8_ARRAY,
    Type::BYTEA_ARRAY,
];

pub(crate) const APPEND_TYPES: [Type; 17] = [
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
    Type::BOOL,
    Type::INT8,
    Type::TEXT,
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
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
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
        let built = match build(&edge.chain) {
            Ok(built) => built,
            Err(err) => return Extended::Failed(err),
        };
        let tip = built.edge.seq;
        let filing = if tip - edge.filed >= FILING_ROWS {
            Filing {
                file: true,
                after: edge.filed,
                through: tip,
            }
        } else {
            Filing::NONE
        };
        let written = if calls.is_empty() && forget.is_none() {
            self.write_group(&mut client, records, &built, filing)
                .map_err(Unwritten::Postgres)
        } else {
            self.write_group_riding(&mut client, records, calls, forget, &built, filing)
        };
        let err = match written {
            Ok(()) => None,
            Err(Unwritten::Postgres(err)) => Some(err),
            // A claim held, or a step that failed for another reason than the server.
            Err(Unwritten::Ledger(err)) => return Extended::Failed(err),
        };
        match err {
            None => {
                let appended = built.appended();
                *self.edge_slot() = Some(PgEdge {
                    chain: built.edge,
                    filed: if filing.file { tip } else { edge.filed },
                });
                Extended::Committed(appended)
            }
            // Another writer took the seq: read the new tip, rebuild, re-hash.
            Some(err) if is_conflict(&err) => Extended::Conflict(self.err("appending")(err)),
            // A constraint or type error: the same statement fails again.
            Some(err) if !is_ambiguous(&err) => Extended::Failed(self.err("appending")(err)),
            // The connection broke: the statement may have committed.
            Some(err) => Extended::Unknown {
                built: built.appended(),
                error: self.err("appending")(err),
            },
        }
    }

    /// Reads the chain's end from the database: the tip, and the compact range from
    /// the stored tree hashes (every leaf's hashes are written with it).
    fn load_edge(&self, client: &mut Client) -> Result<PgEdge, LedgerError> {
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
        let filed = crate::query::filed_through(&source)?.unwrap_or(0);
        Ok(PgEdge {
            chain: ChainEdge { seq, hash, range },
            filed,
        })
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

    /// The group's statement and the call-digest steps riding with it, in one
    /// transaction (the steps after the rows: a step's write needs its row's seq).
    fn write_group_riding(
        &self,
        session: &mut Session,
        records: &[Record],
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
        group: &Built,
        filing: Filing,
    ) -> Result<(), Unwritten> {
        let args = self.group_args(records, group, filing);
        let append = session.append(args.shape()).map_err(Unwritten::Postgres)?;
        let ride = RideStatements::prepare(session).map_err(Unwritten::Postgres)?;
        let mut tx = session.transaction().map_err(Unwritten::Postgres)?;
        args.run_prepared(&mut tx, &append)
            .map_err(Unwritten::Postgres)?;
        let seqs: Vec<u64> = group.rows.iter().map(|row| row.seq).collect();
        let ridden = if calls.is_empty() {
            Ok(())
        } else {
            self.ride_calls(&mut tx, &ride, calls, &seqs)
        };
        let forgotten = ridden.and_then(|()| match forget {
            Some(forget) => self.forget_subject(&mut tx, &forget.index),
            None => Ok(()),
        });
        match forgotten {
            Ok(()) => {}
            Err(LedgerError::Postgres { source, .. }) => return Err(Unwritten::Postgres(source)),
            Err(err) => return Err(Unwritten::Ledger(err)),
        }
        if let Some(before_commit) = forget.and_then(|forget| forget.before_commit) {
            before_commit();
        }
        // Commit point: rows and steps together, durable at the configured level.
        tx.commit().map_err(Unwritten::Postgres)
    }

    fn write_group(
        &self,
        session: &mut Session,
        records: &[Record],
        group: &Built,
        filing: Filing,
    ) -> Result<(), postgres::Error> {
        let args = self.group_args(records, group, filing);
        let append = session.append(args.shape())?;
        args.run_prepared(&mut **session, &append)
    }

    fn group_args<'a>(
        &'a self,
        records: &'a [Record],
        group: &'a Built,
        filing: Filing,
    ) -> AppendArgs<'a> {
        let mut args = AppendArgs::new(&self.tenant, filing);
        for (row, record) in group.rows.iter().zip(records) {
            args.seqs.push(row.seq as i64);
            args.hashes.push(&row.hash[..]);
            args.ts.push(&row.ts);
            args.system.push(&record.system);
            args.verb.push(&record.verb);
            args.agent.push(record.agent.as_deref());
            args.decision.push(&record.decision);
            args.level
                .push(record.verification.as_ref().map(|v| v.level.as_str()));
            args.run.push(record.run_id.as_deref());
            args.action.push(Some(&record.action_id));
            args.bodies.push(row.body.as_bytes());
        }
        args.tree_idx = (group.first_tree_index..)
            .take(group.tree.len())
            .map(|i| i as i64)
            .collect();
        args.tree = group.tree.iter().map(|h| &h[..]).collect();
        args
    }
}

/// Why a group with riding steps was not written: the server's answer (told apart as a
/// lone statement's is), or the ledger's own (a claim held).
enum Unwritten {
    Postgres(postgres::Error),
    Ledger(LedgerError),
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

/// What an [`APPEND`] statement files besides its entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filing {
    /// Whether to file at all (`$15`).
    pub(crate) file: bool,
    /// The stored entries after this seq are filed with the new ones (`$16`).
    pub(crate) after: u64,
    /// `filed_through` afterwards (`$17`).
    pub(crate) through: u64,
}

impl Filing {
    /// Nothing filed.
    pub(crate) const NONE: Filing = Filing {
        file: false,
        after: 0,
        through: 0,
    };
}

/// One [`APPEND`] statement's arguments, column by column.
pub(crate) struct AppendArgs<'a> {
    tenant: &'a str,
    pub(crate) seqs: Vec<i64>,
    pub(crate) hashes: Vec<&'a [u8]>,
    pub(crate) ts: Vec<&'a str>,
    pub(crate) system: Vec<&'a str>,
    pub(crate) verb: Vec<&'a str>,
    pub(crate) agent: Vec<Option<&'a str>>,
    pub(crate) decision: Vec<&'a str>,
    pub(crate) level: Vec<Option<&'a str>>,
    pub(crate) run: Vec<Option<&'a str>>,
    pub(crate) action: Vec<Option<&'a str>>,
    pub(crate) bodies: Vec<&'a [u8]>,
    pub(crate) tree_idx: Vec<i64>,
    pub(crate) tree: Vec<&'a [u8]>,
    filing: Filing,
}

impl<'a> AppendArgs<'a> {
    /// No entries yet, for `tenant`.
    pub(crate) fn new(tenant: &'a str, filing: Filing) -> AppendArgs<'a> {
        AppendArgs {
            tenant,
            seqs: Vec::new(),
            hashes: Vec::new(),
            ts: Vec::new(),
            system: Vec::new(),
            verb: Vec::new(),
            agent: Vec::new(),
            decision: Vec::new(),
            level: Vec::new(),
            run: Vec::new(),
            action: Vec::new(),
            bodies: Vec::new(),
            tree_idx: Vec::new(),
            tree: Vec::new(),
            filing,
        }
    }

    /// Runs the statement (typed: no round trip to prepare it).
    pub(crate) fn run(&self, client: &mut impl GenericClient) -> Result<(), postgres::Error> {
        self.with_params(|params| {
            let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
                .iter()
                .copied()
                .zip(APPEND_TYPES.iter().cloned())
                .collect();
            client.query_typed(APPEND, &typed).map(drop)
        })
    }

    /// The statement these arguments are written with.
    pub(crate) fn shape(&self) -> AppendShape {
        match (self.filing.file, self.seqs.len()) {
            (true, _) => AppendShape::Filing,
            (false, 1) => AppendShape::One,
            (false, _) => AppendShape::Unfiled,
        }
    }

    /// Runs `statement`, the [`AppendArgs::shape`]'s, prepared on this connection
    /// (planned once).
    pub(crate) fn run_prepared(
        &self,
        client: &mut impl GenericClient,
        statement: &postgres::Statement,
    ) -> Result<(), postgres::Error> {
        match self.shape() {
            AppendShape::Filing => self.with_params(|params| client.execute(statement, params)),
            AppendShape::Unfiled => {
                self.with_params(|params| client.execute(statement, &params[..UNFILED_PARAMS]))
            }
            AppendShape::One => client.execute(
                statement,
                &[
                    &self.tenant,
                    &self.seqs[0],
                    &self.hashes[0],
                    &self.ts[0],
                    &self.system[0],
                    &self.verb[0],
                    &self.agent[0],
                    &self.decision[0],
                    &self.level[0],
                    &self.run[0],
                    &self.action[0],
                    &self.bodies[0],
                    &self.tree_idx,
                    &self.tree,
                ],
            ),
        }
        .map(drop)
    }

    fn with_params<R>(&self, run: impl FnOnce(&[&(dyn ToSql + Sync)]) -> R) -> R {
        let after = i64::try_from(self.filing.after).unwrap_or(i64::MAX);
        let through = self.filing.through.to_string();
        run(&[
            &self.tenant,
            &self.seqs,
            &self.hashes,
            &self.ts,
            &self.system,
            &self.verb,
            &self.agent,
            &self.decision,
            &self.level,
            &self.run,
            &self.action,
            &self.bodies,
            &self.tree_idx,
            &self.tree,
            &self.filing.file,
            &after,
            &through,
        ])
    }
}

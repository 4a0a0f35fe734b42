//! The PostgreSQL store's recent calls by digest (see [`crate::calls`]): one
//! transaction that first locks the digest's row and reads it in one statement
//! ([`LOCK_CALLS`]: `INSERT … ON CONFLICT DO UPDATE … RETURNING`, which creates a
//! placeholder when there is none), then writes it. A row lock
//! rather than an advisory lock, so that PostgreSQL-compatible databases without
//! advisory locks run it.

use std::collections::HashMap;

use postgres::types::Type;
use postgres::{GenericClient, ToStatement};

use super::connect::Session;
use super::PgStore;
use crate::calls::{CallWrite, Riding, SettleCall, StoredCall};
use crate::LedgerError;

/// The placeholder a lock creates for a digest with no row: it holds nothing (a ran
/// row that expired at the epoch), and is replaced or removed in the same transaction.
const PLACEHOLDER: &str = "";

/// Locks the digests `$2` (creating a placeholder, `$3`, where there is no row) and
/// returns each one's row as its last writer committed it: `ON CONFLICT DO UPDATE`
/// locks and returns the newest committed version, as a read after the lock would.
const LOCK_CALLS: &str =
    "INSERT INTO call_digests (tenant, digest, action_id, owner, seq, at_ms, until_ms)
     SELECT $1, u.digest, $3, '', 0, 0, 0
     FROM unnest($2::bytea[]) WITH ORDINALITY AS u(digest, n) ORDER BY u.n
     ON CONFLICT (tenant, digest) DO UPDATE SET digest = EXCLUDED.digest
     RETURNING digest, action_id, owner, seq, at_ms, until_ms";
const LOCK_CALLS_TYPES: [Type; 3] = [Type::TEXT, Type::BYTEA_ARRAY, Type::TEXT];

/// Removes the digests `$2` and rewrites the rows `$3…$8`, in one statement (the two
/// sets never share a digest, so no row is changed twice).
const WRITE_CALLS: &str = "WITH gone AS (
         DELETE FROM call_digests WHERE tenant = $1 AND digest = ANY($2) RETURNING 1
     )
     UPDATE call_digests AS c SET action_id = u.action_id, owner = u.owner,
         seq = u.seq, at_ms = u.at_ms, until_ms = u.until_ms
     FROM unnest($3::bytea[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::int8[])
         AS u(digest, action_id, owner, seq, at_ms, until_ms)
     WHERE c.tenant = $1 AND c.digest = u.digest";
const WRITE_CALLS_TYPES: [Type; 8] = [
    Type::TEXT,
    Type::BYTEA_ARRAY,
    Type::BYTEA_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
];

/// The two statements [`PgStore::ride_calls`] runs, prepared on the append's connection.
pub(crate) struct RideStatements {
    lock: postgres::Statement,
    write: postgres::Statement,
}

impl RideStatements {
    pub(crate) fn prepare(session: &mut Session) -> Result<RideStatements, postgres::Error> {
        Ok(RideStatements {
            lock: session.prepared(LOCK_CALLS, &LOCK_CALLS_TYPES)?,
            write: session.prepared(WRITE_CALLS, &WRITE_CALLS_TYPES)?,
        })
    }
}

impl PgStore {
    pub(crate) fn settle_call(
        &self,
        digest: [u8; 32],
        settle: Option<&mut SettleCall<'_>>,
    ) -> Result<Option<StoredCall>, LedgerError> {
        let during = "checking a call digest";
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(self.err(during))?;
        // At `full` a claim or finish commits without waiting for its own WAL flush, as
        // on SQLite: PostgreSQL's WAL is one sequence, so the intent's commit, which
        // waits for its flush, makes the claim committed before it durable too; a finish
        // lost to a crash leaves the call open, and a retry then reads its outcome row
        // (see `crate::calls`). A claim or finish riding with a row commits in the row's
        // transaction instead ([`PgStore::ride_calls`]); this one is the rarer claim made
        // apart (a call decided again, a takeover, a person's approval of a recorded call).
        if settle.is_some() && self.synchronous {
            tx.batch_execute("SET LOCAL synchronous_commit = off")
                .map_err(self.err(during))?;
        }
        let row = match settle {
            None => tx.with(|tx| self.call_row(tx, digest, during))?,
            Some(settle) => {
                tx.with(|tx| self.settle_call_tx(tx, digest, &mut |row| Ok(settle(row)), during))?
            }
        };
        // Commit point: the digest is claimed (or finished) once this returns; a failed
        // commit leaves the row as it was (the caller does not run the call), a lost
        // acknowledgement may leave it claimed, which blocks a retry until it is resolved.
        tx.commit().map_err(self.err(during))?;
        Ok(row)
    }

    /// Makes the steps riding with an append, inside its transaction, after its rows
    /// (`seqs`: the records' seqs, by index), in two statements whatever their number
    /// ([`RideStatements`]): lock and read every digest (sorted, so two groups never
    /// wait on each other in a cycle), apply the steps in order to what was read (a
    /// later step of one digest sees an earlier one's write, as one after the other
    /// would), write back what changed.
    pub(crate) fn ride_calls(
        &self,
        tx: &mut impl GenericClient,
        statements: &RideStatements,
        calls: &[Riding<'_>],
        seqs: &[u64],
    ) -> Result<(), LedgerError> {
        let during = "settling call digests with their rows";
        let mut digests: Vec<[u8; 32]> = calls.iter().map(|riding| riding.digest).collect();
        digests.sort_unstable();
        digests.dedup();
        let keys: Vec<&[u8]> = digests.iter().map(|digest| &digest[..]).collect();
        let mut state: HashMap<[u8; 32], Option<StoredCall>> =
            digests.iter().map(|digest| (*digest, None)).collect();
        for (digest, call) in self.lock_calls(tx, &statements.lock, &keys, during)? {
            state.insert(digest, Some(call));
        }
        let before = state.clone();
        crate::calls::ride(calls, seqs, &mut |digest, write| {
            let slot = state.entry(digest).or_default();
            match write(slot.as_ref())? {
                CallWrite::Keep => {}
                CallWrite::Put(call) => *slot = Some(call),
                CallWrite::Delete => *slot = None,
            }
            Ok(())
        })?;
        let mut gone: Vec<&[u8]> = Vec::new();
        let mut put = PutCalls::default();
        for digest in &digests {
            let (was, now) = (before.get(digest), state.get(digest));
            match now {
                // Unchanged: left as it is.
                Some(Some(_)) if was == now => {}
                Some(Some(call)) => put.push(digest, call),
                // Gone, or never there: the placeholder the lock made goes too.
                _ => gone.push(&digest[..]),
            }
        }
        if !gone.is_empty() || !put.digests.is_empty() {
            tx.query(
                &statements.write,
                &[
                    &self.tenant,
                    &gone,
                    &put.digests,
                    &put.action_ids,
                    &put.owners,
                    &put.seqs,
                    &put.at_ms,
                    &put.until_ms,
                ],
            )
            .map_err(self.err(during))?;
        }
        Ok(())
    }

    /// The digest's row, read committed (a plain read: no lock).
    fn call_row(
        &self,
        tx: &mut impl GenericClient,
        digest: [u8; 32],
        during: &'static str,
    ) -> Result<Option<StoredCall>, LedgerError> {
        let found = tx
            .query_opt(
                "SELECT action_id, owner, seq, at_ms, until_ms FROM call_digests
                 WHERE tenant = $1 AND digest = $2",
                &[&self.tenant, &&digest[..]],
            )
            .map_err(self.err(during))?;
        Ok(found
            .map(|row| stored_call(&row, 0))
            .filter(|row| !is_placeholder(row)))
    }

    /// Locks the digests `keys` with [`LOCK_CALLS`] (prepared, or its text) and returns
    /// the rows their last writers committed (a placeholder the lock made is no row).
    fn lock_calls<T: ToStatement + ?Sized>(
        &self,
        tx: &mut impl GenericClient,
        lock: &T,
        keys: &[&[u8]],
        during: &'static str,
    ) -> Result<Vec<([u8; 32], StoredCall)>, LedgerError> {
        let found = tx
            .query(lock, &[&self.tenant, &keys, &PLACEHOLDER])
            .map_err(self.err(during))?;
        Ok(found
            .iter()
            .filter_map(|row| {
                let digest = <[u8; 32]>::try_from(row.get::<_, &[u8]>(0)).ok()?;
                let call = stored_call(row, 1);
                (!is_placeholder(&call)).then_some((digest, call))
            })
            .collect())
    }

    /// Locks the digest's row (creating a placeholder), reads it, and writes what
    /// `settle` decides, inside the caller's transaction; returns the row read.
    fn settle_call_tx(
        &self,
        tx: &mut impl GenericClient,
        digest: [u8; 32],
        settle: &mut dyn FnMut(Option<&StoredCall>) -> Result<CallWrite, LedgerError>,
        during: &'static str,
    ) -> Result<Option<StoredCall>, LedgerError> {
        let row = self
            .lock_calls(tx, LOCK_CALLS, &[&digest[..]], during)?
            .pop()
            .map(|(_, call)| call);
        match settle(row.as_ref())? {
            CallWrite::Keep if row.is_some() => {}
            CallWrite::Keep | CallWrite::Delete => {
                tx.execute(
                    "DELETE FROM call_digests WHERE tenant = $1 AND digest = $2",
                    &[&self.tenant, &&digest[..]],
                )
                .map_err(self.err(during))?;
            }
            CallWrite::Put(call) => {
                tx.execute(
                    "UPDATE call_digests SET action_id = $3, owner = $4, seq = $5, at_ms = $6,
                     until_ms = $7 WHERE tenant = $1 AND digest = $2",
                    &[
                        &self.tenant,
                        &&digest[..],
                        &call.action_id,
                        &call.owner,
                        &call.seq,
                        &call.at_ms,
                        &call.until_ms,
                    ],
                )
                .map_err(self.err(during))?;
            }
        }
        Ok(row)
    }

    pub(crate) fn forget_call_rows(&self, action_id: &str) -> Result<u64, LedgerError> {
        let during = "forgetting a call digest";
        let mut client = self.client()?;
        client
            .with(|client| {
                client.execute(
                    "DELETE FROM call_digests WHERE tenant = $1 AND action_id = $2",
                    &[&self.tenant, &action_id],
                )
            })
            .map_err(self.err(during))
    }
}

/// The call in `row`'s columns from `first` on: action_id, owner, seq, at_ms, until_ms.
fn stored_call(row: &postgres::Row, first: usize) -> StoredCall {
    StoredCall {
        action_id: row.get(first),
        owner: row.get(first + 1),
        seq: row.get(first + 2),
        at_ms: row.get(first + 3),
        until_ms: row.get(first + 4),
    }
}

/// Whether `row` is the placeholder a lock made (it holds nothing).
fn is_placeholder(row: &StoredCall) -> bool {
    row.action_id == PLACEHOLDER && row.until_ms == 0
}

/// The rows a group's steps write back, column by column.
#[derive(Default)]
struct PutCalls<'a> {
    digests: Vec<&'a [u8]>,
    action_ids: Vec<&'a str>,
    owners: Vec<&'a str>,
    seqs: Vec<Option<i64>>,
    at_ms: Vec<i64>,
    until_ms: Vec<i64>,
}

impl<'a> PutCalls<'a> {
    fn push(&mut self, digest: &'a [u8; 32], call: &'a StoredCall) {
        self.digests.push(&digest[..]);
        self.action_ids.push(&call.action_id);
        self.owners.push(&call.owner);
        self.seqs.push(call.seq);
        self.at_ms.push(call.at_ms);
        self.until_ms.push(call.until_ms);
    }
}

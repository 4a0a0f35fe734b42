//! Appending, written once for every store: group commit (concurrent appends in one
//! process share one transaction and one sync), retries, and recovery from a commit
//! whose acknowledgement was lost.
//!
//! The first caller to find no commit in progress becomes the leader: it takes every
//! queued record, writes them in one transaction, and hands each caller its result.
//! Callers that arrive meanwhile queue up and wait for the next leader (often one of
//! them). Each caller returns only after the transaction holding its row committed,
//! so a receipt always means "durable at the configured level".

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use crate::calls::{CallStep, Riding};
use crate::erasure::Forget;
use crate::store::Extended;
use crate::windows::millis;
use crate::{Appended, Ledger, LedgerError, Record};

/// Most records one group commit writes in one transaction.
pub const MAX_GROUP: usize = 4096;

/// The queue and the hand-off of results.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<GroupState>,
    done: Condvar,
}

#[derive(Default)]
struct GroupState {
    next_ticket: u64,
    queue: Vec<(u64, Record, Option<CallStep>)>,
    results: HashMap<u64, Result<Appended, LedgerError>>,
    leading: bool,
    /// Callers waiting on `done`: a leader wakes them only when there are any, since
    /// every notify is a system call (std's condvar does not count its waiters), one
    /// per append on the common path of a lone caller.
    waiting: usize,
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, GroupState> {
        // Results are only moved in and out whole; a poisoned lock holds no torn state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Ledger {
    /// Appends one record, sharing a transaction with concurrent callers in this
    /// process; returns once its row is durable at the configured level.
    pub fn append_owned(&self, record: Record) -> Result<Appended, LedgerError> {
        self.append_with(record, None)
    }

    /// Appends one record with a call-digest step that commits in the same transaction
    /// ([`CallStep`]), sharing it with concurrent callers in this process; returns once
    /// both are durable at the configured level. A claim found held writes nothing:
    /// [`LedgerError::CallHeld`].
    pub fn append_with(
        &self,
        record: Record,
        step: Option<CallStep>,
    ) -> Result<Appended, LedgerError> {
        let group = &self.group;
        let mut state = group.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push((ticket, record, step));
        loop {
            if let Some(result) = state.results.remove(&ticket) {
                return result;
            }
            if !state.leading {
                state.leading = true;
                let take = state.queue.len().min(MAX_GROUP);
                let batch: Vec<(u64, Record, Option<CallStep>)> =
                    state.queue.drain(..take).collect();
                drop(state);
                let results = self.commit_group(batch);
                state = group.lock();
                state.leading = false;
                state.results.extend(results);
                if state.waiting > 0 {
                    group.done.notify_all();
                }
                continue;
            }
            state.waiting += 1;
            state = group
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
    }

    /// Writes one group; if the group's transaction fails, each record is retried on
    /// its own so every caller gets its own outcome (one bad record fails alone).
    fn commit_group(
        &self,
        batch: Vec<(u64, Record, Option<CallStep>)>,
    ) -> Vec<(u64, Result<Appended, LedgerError>)> {
        let mut tickets = Vec::with_capacity(batch.len());
        let mut records = Vec::with_capacity(batch.len());
        let mut steps = Vec::with_capacity(batch.len());
        for (ticket, record, step) in batch {
            tickets.push(ticket);
            records.push(record);
            steps.push(step);
        }
        tickets
            .into_iter()
            .zip(self.append_each_with(&records, &steps))
            .collect()
    }

    /// Appends records from independent callers: in one transaction and one sync when
    /// all of them can be written, else each on its own, so one bad record fails
    /// alone. Returns one result per record, in order; each `Ok` is durable at the
    /// configured level. A dedicated writer thread that drains a queue calls this.
    pub fn append_each(&self, records: &[Record]) -> Vec<Result<Appended, LedgerError>> {
        self.append_each_with(records, &[])
    }

    /// [`Ledger::append_each`], each record with the call-digest step at its index in
    /// `steps` (empty: none) committed in its transaction.
    pub fn append_each_with(
        &self,
        records: &[Record],
        steps: &[Option<CallStep>],
    ) -> Vec<Result<Appended, LedgerError>> {
        match self.append_batch_with(records, steps) {
            Ok(appended) => appended.into_iter().map(Ok).collect(),
            // Writing again could write twice.
            Err(LedgerError::OutcomeUnknown { .. }) => records
                .iter()
                .map(|_| Err(self.outcome_unknown()))
                .collect(),
            Err(err) if records.len() == 1 => vec![Err(err)],
            // Each record in a transaction of its own, so one bad record fails alone.
            Err(_) => records
                .iter()
                .enumerate()
                .map(|(index, record)| {
                    let step = steps.get(index).map_or(&[][..], std::slice::from_ref);
                    self.append_batch_with(std::slice::from_ref(record), step)?
                        .pop()
                        .ok_or(LedgerError::Internal("a batch of one appended nothing"))
                })
                .collect(),
        }
    }

    /// Appends one record and returns its seq and hash once it is durable; concurrent
    /// callers share a transaction (see [`Ledger::append_owned`]).
    pub fn append(&self, record: &Record) -> Result<Appended, LedgerError> {
        self.append_owned(record.clone())
    }

    /// Appends records in order, in one transaction and one sync.
    ///
    /// Each attempt reads the chain's end, builds the rows on it (`chain.rs`) and
    /// commits them (`Store::extend`). Another writer taking the next seq first is
    /// retried on a fresh edge after a random wait. A commit whose outcome is unknown
    /// (its acknowledgement may be lost) leaves its rows pending: before anything is
    /// written again they are looked for, and if the row at the first seq is there
    /// with the hash this writer built, the commit held and its rows are the result,
    /// so nothing is written twice.
    pub fn append_batch(&self, records: &[Record]) -> Result<Vec<Appended>, LedgerError> {
        self.append_batch_with(records, &[])
    }

    /// [`Ledger::append_batch`], with the call-digest steps (one per record, or none) in
    /// the same transaction.
    fn append_batch_with(
        &self,
        records: &[Record],
        steps: &[Option<CallStep>],
    ) -> Result<Vec<Appended>, LedgerError> {
        self.append_batch_forgetting(records, steps, None)
    }

    /// Appends `record` and deletes the subject key `forget` names, in one transaction
    /// (an erasure, [`Ledger::erase`]): alone, never grouped with other callers' rows,
    /// so its failure (the key already gone) fails nothing else.
    pub(crate) fn append_forgetting(
        &self,
        record: &Record,
        forget: &Forget<'_>,
    ) -> Result<Appended, LedgerError> {
        self.append_batch_forgetting(std::slice::from_ref(record), &[], Some(forget))?
            .pop()
            .ok_or(LedgerError::Internal("an erasure appended nothing"))
    }

    fn append_batch_forgetting(
        &self,
        records: &[Record],
        steps: &[Option<CallStep>],
        forget: Option<&Forget<'_>>,
    ) -> Result<Vec<Appended>, LedgerError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let riding = Riding::of(steps, millis(self.now()));
        let store = self.store.as_ref();
        let clock = self.clock.as_ref();
        // Groups whose commit may have held, or may yet (a server finishing a
        // statement after the connection broke); resolved before anything is written.
        let mut pending: Vec<Vec<Appended>> = Vec::new();
        // With a group pending, any failure is "unknown": the caller must not write
        // the records again.
        let unknown = |pending: &Vec<Vec<Appended>>, err: LedgerError| {
            if pending.is_empty() {
                err
            } else {
                self.outcome_unknown()
            }
        };
        let mut last_error = None;
        let attempts = store.attempts();
        for attempt in 0..attempts {
            if !pending.is_empty() {
                match self.resolve(&mut pending) {
                    Ok(Some(appended)) => return Ok(appended),
                    Ok(None) => {}
                    Err(err) => {
                        last_error = Some(err);
                        store.recover(attempt).map_err(|e| unknown(&pending, e))?;
                        continue;
                    }
                }
            }
            // Built on the edge just read: a pending group still in flight wants the
            // same seq, and the store lets only one of them commit.
            let mut build =
                |edge: &crate::chain::ChainEdge| crate::chain::build(records, edge, clock);
            match store.extend(records, &riding, forget, !pending.is_empty(), &mut build) {
                Extended::Committed(appended) => return Ok(appended),
                Extended::Conflict(err) => {
                    last_error = Some(err);
                    // Many writers on one tip: step aside for a random while that grows
                    // with the losses (up to 16 ms), so every writer gets its turn.
                    let cap = 100u64 << attempt.min(7);
                    std::thread::sleep(Duration::from_micros(jitter() % cap));
                }
                Extended::Failed(err) => return Err(unknown(&pending, err)),
                Extended::Retry(err) => {
                    last_error = Some(err);
                    store.recover(attempt).map_err(|e| unknown(&pending, e))?;
                }
                Extended::Unknown { built, error } => {
                    last_error = Some(error);
                    pending.push(built);
                    store.recover(attempt).map_err(|e| unknown(&pending, e))?;
                }
            }
        }
        if !pending.is_empty() {
            // One last look: the final attempt's outcome may be known by now.
            if let Ok(Some(appended)) = self.resolve(&mut pending) {
                return Ok(appended);
            }
            if !pending.is_empty() {
                return Err(self.outcome_unknown());
            }
        }
        Err(last_error.unwrap_or(LedgerError::Internal("the append did not finish")))
    }

    /// Settles pending groups against one snapshot: a group whose first seq is at or
    /// below the tip either is there (its hash at that seq: it committed, and its rows
    /// are the result) or never will be (another row holds the seq). A group past the
    /// tip stays pending where a commit may still land late; elsewhere it never will.
    /// An error leaves every group pending.
    fn resolve(
        &self,
        pending: &mut Vec<Vec<Appended>>,
    ) -> Result<Option<Vec<Appended>>, LedgerError> {
        let late = self.store.late_commits();
        let found = self.read(|src| {
            let tip = src.tip()?.map_or(0, |(seq, _)| seq);
            let mut keep = Vec::with_capacity(pending.len());
            for group in pending.iter() {
                let Some(first) = group.first() else {
                    keep.push(false);
                    continue;
                };
                if first.seq > tip {
                    keep.push(late);
                    continue;
                }
                let mut held = false;
                src.rows(first.seq, &mut |row| {
                    held = row.seq == first.seq && row.hash == first.hash;
                    Ok(false)
                })?;
                if held {
                    return Ok(Err(group.clone()));
                }
                keep.push(false);
            }
            Ok(Ok(keep))
        })?;
        match found {
            Err(held) => Ok(Some(held)),
            Ok(keep) => {
                let mut keep = keep.into_iter();
                pending.retain(|_| keep.next().unwrap_or(false));
                Ok(None)
            }
        }
    }

    fn outcome_unknown(&self) -> LedgerError {
        LedgerError::OutcomeUnknown {
            path: self.path().to_path_buf(),
        }
    }
}

/// A random-enough number so writers that lost the same race (in this process or
/// another) do not retry in lockstep.
fn jitter() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

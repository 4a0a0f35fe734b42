//! Group commit: concurrent appends in one process share one transaction and one sync.
//!
//! The first caller to find no commit in progress becomes the leader: it takes every
//! queued record, writes them in one transaction, and hands each caller its result.
//! Callers that arrive meanwhile queue up and wait for the next leader (often one of
//! them). Each caller returns only after the transaction holding its row committed,
//! so a receipt always means "durable at the configured level".

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

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
    queue: Vec<(u64, Record)>,
    results: HashMap<u64, Result<Appended, LedgerError>>,
    leading: bool,
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
        let group = &self.group;
        let mut state = group.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push((ticket, record));
        loop {
            if let Some(result) = state.results.remove(&ticket) {
                return result;
            }
            if !state.leading {
                state.leading = true;
                let take = state.queue.len().min(MAX_GROUP);
                let batch: Vec<(u64, Record)> = state.queue.drain(..take).collect();
                drop(state);
                let results = self.commit_group(batch);
                state = group.lock();
                state.leading = false;
                state.results.extend(results);
                group.done.notify_all();
                continue;
            }
            state = group
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Writes one group; if the group's transaction fails, each record is retried on
    /// its own so every caller gets its own outcome (one bad record fails alone).
    fn commit_group(&self, batch: Vec<(u64, Record)>) -> Vec<(u64, Result<Appended, LedgerError>)> {
        let (tickets, records): (Vec<u64>, Vec<Record>) = batch.into_iter().unzip();
        tickets
            .into_iter()
            .zip(self.append_each(&records))
            .collect()
    }

    /// Appends records from independent callers: in one transaction and one sync when
    /// all of them can be written, else each on its own, so one bad record fails
    /// alone. Returns one result per record, in order; each `Ok` is durable at the
    /// configured level. A dedicated writer thread that drains a queue calls this.
    ///
    /// A group whose commit failed is looked for before anything is written again: if
    /// its first row is in the ledger with the hash this writer built, the commit was
    /// durable and only its acknowledgement was lost, so its rows are the results and
    /// nothing is appended twice.
    pub fn append_each(&self, records: &[Record]) -> Vec<Result<Appended, LedgerError>> {
        let mut attempted = Vec::new();
        match self.append_batch_tracked(records, &mut attempted) {
            Ok(appended) if appended.len() == records.len() => {
                appended.into_iter().map(Ok).collect()
            }
            Err(_) if attempted.len() == records.len() => match self.holds(&attempted) {
                Some(true) => attempted.into_iter().map(Ok).collect(),
                // Not there: the transaction rolled back; each is written on its own.
                Some(false) => self.append_singly(records),
                // Unknown: writing again could write twice.
                None => records
                    .iter()
                    .map(|_| Err(self.outcome_unknown()))
                    .collect(),
            },
            Err(LedgerError::OutcomeUnknown { .. }) => records
                .iter()
                .map(|_| Err(self.outcome_unknown()))
                .collect(),
            _ => self.append_singly(records),
        }
    }

    fn outcome_unknown(&self) -> LedgerError {
        LedgerError::OutcomeUnknown {
            path: self.path().to_path_buf(),
        }
    }

    /// Each record in a transaction of its own, so one bad record fails alone.
    fn append_singly(&self, records: &[Record]) -> Vec<Result<Appended, LedgerError>> {
        records
            .iter()
            .map(|record| {
                let mut attempted = Vec::new();
                match self.append_batch_tracked(std::slice::from_ref(record), &mut attempted) {
                    Ok(mut v) => v
                        .pop()
                        .ok_or(LedgerError::Internal("a batch of one appended nothing")),
                    Err(err) if attempted.len() == 1 => match self.holds(&attempted) {
                        Some(true) => attempted
                            .pop()
                            .ok_or(LedgerError::Internal("lost a checked row")),
                        Some(false) => Err(err),
                        None => Err(self.outcome_unknown()),
                    },
                    Err(err) => Err(err),
                }
            })
            .collect()
    }

    /// Whether the ledger holds `rows[0]` with the hash it was built with (the rows of
    /// one transaction are all there or none is).
    fn holds(&self, rows: &[Appended]) -> Option<bool> {
        let Some(first) = rows.first() else {
            return Some(false);
        };
        self.read(|src| {
            let mut found = false;
            src.rows(first.seq, &mut |row| {
                found = row.seq == first.seq && row.hash == first.hash;
                Ok(false)
            })?;
            Ok(found)
        })
        .ok()
    }
}

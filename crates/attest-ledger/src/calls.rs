//! Recent calls by digest: which write is in flight and which ran lately, per call
//! digest, for retries (an open intent blocks a retry of the same call) and policy's
//! duplicate suppression (a rule's `dedupe:`), kept beside the chain.
//!
//! A side table of one row per call digest (a hash of the digest text, the action that
//! holds it, the process that claimed it, open or ran, the outcome's seq, when), **not**
//! part of the hash-chained format: nothing here is verified, exported, copied or
//! proven, and the chain is never re-read to answer: the check before a write is one
//! lookup by primary key. The ledger knows no policy and no process: a digest, an
//! action id, an owner text and a window.
//!
//! The check and the claim are one write transaction ([`Ledger::claim_call`]): SQLite's
//! `BEGIN IMMEDIATE` holds the file's write lock, PostgreSQL locks the digest's row
//! (`INSERT … ON CONFLICT DO UPDATE` before the read). Of two writers claiming one
//! digest, in any process on any host, the second reads the first's claim.
//!
//! A row lives while its call is open, and after it ran only for the dedupe window it
//! was finished with ([`Ledger::finish_call`]); a call that did not run, or ran without
//! a window, leaves no row. An expired row is replaced when its digest is next claimed
//! (rows of calls never repeated stay until then: one small row per distinct write
//! that ran with a window).
//!
//! A step can also ride in the transaction of an append ([`Ledger::append_with`]): an
//! intent's row and its claim, an outcome's row and its finish, commit together, one
//! commit for both and grouped with other callers' appends. A claim found held there
//! writes nothing: the append fails with [`LedgerError::CallHeld`].
//!
//! A ledger written before this table existed starts with it empty: intents left open
//! by an older release do not block retries (their digest was never stored), and are
//! still listed and resolvable by seq.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::windows::{key_hash, millis};
use crate::{Ledger, LedgerError};

/// A write about to run, as [`Ledger::claim_call`] claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallClaim {
    /// The call's digest (any text; stored as its SHA-256).
    pub digest: String,
    /// The action that claims it.
    pub action_id: String,
    /// Who claims it (opaque: a process identity a later reader may check).
    pub owner: String,
    /// Duplicate suppression: a call that ran within this window blocks the claim.
    pub dedupe: Option<Duration>,
}

/// What holds a digest: an earlier call that is still open, or one that ran lately.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldCall {
    /// An earlier call of the same digest was claimed and its outcome not recorded: it
    /// may be running now, or its process may have died.
    Open {
        /// The earlier action.
        action_id: String,
        /// Who claimed it.
        owner: String,
        /// When it was claimed.
        since: SystemTime,
    },
    /// The same call ran within the dedupe window.
    Ran {
        /// The earlier action.
        action_id: String,
        /// Its outcome row's seq.
        seq: u64,
        /// When its outcome was recorded.
        at: SystemTime,
    },
}

/// What [`Ledger::claim_call`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallCheck {
    /// The digest is this action's now (open until [`Ledger::finish_call`]).
    Claimed,
    /// An earlier call holds it: nothing was written.
    Held(HeldCall),
}

/// A call-digest step that rides in the transaction of an append
/// ([`Ledger::append_with`]): it commits with the row, or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallStep {
    /// As [`Ledger::claim_call`]; if an earlier call holds the digest, neither the step
    /// nor the row is written: the append fails with [`LedgerError::CallHeld`].
    Claim {
        /// The claim.
        claim: CallClaim,
        /// The open call it takes over (see [`Ledger::claim_call`]).
        replacing: Option<String>,
    },
    /// As [`Ledger::take_call`]: claimed whatever holds it.
    Take(CallClaim),
    /// As [`Ledger::finish_call`], the row being the call's outcome: `keep`, how long it
    /// blocks duplicates (`None`: the call did not run, and the digest's row goes).
    Finish {
        /// The call's digest.
        digest: String,
        /// The action holding it.
        action_id: String,
        /// The dedupe window; `None` or zero: the row goes.
        keep: Option<Duration>,
    },
}

impl CallStep {
    fn digest(&self) -> &str {
        match self {
            CallStep::Claim { claim, .. } | CallStep::Take(claim) => &claim.digest,
            CallStep::Finish { digest, .. } => digest,
        }
    }
}

/// A step as the store carries it in an append's transaction: the record it rides with
/// (its index in the group), the hashed digest, and the write it makes of the row read.
pub(crate) struct Riding<'s> {
    /// The record's index among the records of the append.
    pub(crate) index: usize,
    /// The digest's key in the table.
    pub(crate) digest: [u8; 32],
    step: &'s CallStep,
    now_ms: i64,
}

impl<'s> Riding<'s> {
    /// The steps of `steps` (one per record, or none at all) that are there, at `now_ms`.
    pub(crate) fn of(steps: &'s [Option<CallStep>], now_ms: i64) -> Vec<Riding<'s>> {
        steps
            .iter()
            .enumerate()
            .filter_map(|(index, step)| {
                step.as_ref().map(|step| Riding {
                    index,
                    digest: key_hash(step.digest()),
                    step,
                    now_ms,
                })
            })
            .collect()
    }

    /// What to write, from the digest's row, for the record whose row has `seq`; a claim
    /// an earlier call holds fails (the store writes nothing of the append).
    pub(crate) fn write(
        &self,
        row: Option<&StoredCall>,
        seq: u64,
    ) -> Result<CallWrite, LedgerError> {
        match self.step {
            CallStep::Claim { claim, replacing } => {
                claim_write(claim, replacing.as_deref(), self.now_ms, row)
                    .map_err(|held| LedgerError::CallHeld(Box::new(held)))
            }
            CallStep::Take(claim) => Ok(CallWrite::Put(open_row(claim, self.now_ms))),
            CallStep::Finish {
                action_id, keep, ..
            } => Ok(finish_write(
                action_id,
                keep.map(|keep| (seq, keep)),
                self.now_ms,
                row,
            )),
        }
    }
}

/// A store's read and write of one digest's row inside an append's transaction: `write`
/// decides from the row read.
pub(crate) type SettleIn<'s> = dyn FnMut(
        [u8; 32],
        &mut dyn FnMut(Option<&StoredCall>) -> Result<CallWrite, LedgerError>,
    ) -> Result<(), LedgerError>
    + 's;

/// Makes the steps riding with an append through the store's `settle`, after its rows
/// (`seqs`: the records' seqs, by index).
pub(crate) fn ride(
    calls: &[Riding<'_>],
    seqs: &[u64],
    settle: &mut SettleIn<'_>,
) -> Result<(), LedgerError> {
    for riding in calls {
        let seq = seqs
            .get(riding.index)
            .copied()
            .ok_or(LedgerError::Internal(
                "a call-digest step rides with no record",
            ))?;
        settle(riding.digest, &mut |row| riding.write(row, seq))?;
    }
    Ok(())
}

/// A row as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredCall {
    pub(crate) action_id: String,
    pub(crate) owner: String,
    /// The outcome's seq when it ran; `None` while open.
    pub(crate) seq: Option<i64>,
    /// Claimed (open) or finished (ran) at, ms since the epoch.
    pub(crate) at_ms: i64,
    /// A ran row blocks duplicates until this time (ms since the epoch).
    pub(crate) until_ms: i64,
}

/// What a settle step does with the row it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallWrite {
    /// Leave it as it is.
    Keep,
    /// Write this row for the digest.
    Put(StoredCall),
    /// Remove the digest's row.
    Delete,
}

/// Decides, from the digest's row (if any), what to write.
pub(crate) type SettleCall<'s> = dyn FnMut(Option<&StoredCall>) -> CallWrite + Send + 's;

impl Ledger {
    /// Checks the digest and, unless an earlier call holds it, claims it for this
    /// action, atomically across processes and hosts. An earlier call holds it while it
    /// is open, and after it ran for the `dedupe` window of this claim (none: only open
    /// calls hold). `replacing`: the action id of an open call this one takes over (its
    /// process is known to be gone); the claim succeeds only while the row still names
    /// that action, so of two callers taking over one dead call, one does.
    pub fn claim_call(
        &self,
        claim: &CallClaim,
        replacing: Option<&str>,
    ) -> Result<CallCheck, LedgerError> {
        let now_ms = millis(self.now());
        let mut held = None;
        self.store.calls(
            key_hash(&claim.digest),
            Some(
                &mut |row: Option<&StoredCall>| match claim_write(claim, replacing, now_ms, row) {
                    Ok(write) => write,
                    Err(found) => {
                        held = Some(found);
                        CallWrite::Keep
                    }
                },
            ),
        )?;
        Ok(match held {
            Some(held) => CallCheck::Held(held),
            None => CallCheck::Claimed,
        })
    }

    /// Claims the digest for this action whatever holds it (a person approved the call
    /// knowing what the check said).
    pub fn take_call(&self, claim: &CallClaim) -> Result<(), LedgerError> {
        let now_ms = millis(self.now());
        self.store
            .calls(
                key_hash(&claim.digest),
                Some(&mut |_: Option<&StoredCall>| CallWrite::Put(open_row(claim, now_ms))),
            )
            .map(drop)
    }

    /// What holds the digest now for a call with this `dedupe` window, without claiming
    /// it (a read; works on a ledger opened read-only).
    pub fn held_call(
        &self,
        digest: &str,
        dedupe: Option<Duration>,
    ) -> Result<Option<HeldCall>, LedgerError> {
        let now_ms = millis(self.now());
        let row = self.store.calls(key_hash(digest), None)?;
        Ok(row.and_then(|row| blocking(&row, now_ms, dedupe.map(duration_ms), None)))
    }

    /// Records how the action holding the digest ended: `ran`, its outcome row's seq and
    /// how long it blocks duplicates (`None`, or a zero window: the row goes). A row
    /// another action holds by now is left alone.
    pub fn finish_call(
        &self,
        digest: &str,
        action_id: &str,
        ran: Option<(u64, Duration)>,
    ) -> Result<(), LedgerError> {
        let now_ms = millis(self.now());
        self.store
            .calls(
                key_hash(digest),
                Some(&mut |row: Option<&StoredCall>| finish_write(action_id, ran, now_ms, row)),
            )
            .map(drop)
    }

    /// Removes whatever row names `action_id` (a person resolved its open intent, or it
    /// was reconciled): the next call of its digest is decided afresh. Returns how many
    /// rows went.
    pub fn forget_call(&self, action_id: &str) -> Result<u64, LedgerError> {
        self.store.forget_calls(action_id)
    }
}

/// A claim's write of the digest's row `row`: the claim, unless an earlier call holds it.
fn claim_write(
    claim: &CallClaim,
    replacing: Option<&str>,
    now_ms: i64,
    row: Option<&StoredCall>,
) -> Result<CallWrite, HeldCall> {
    let dedupe_ms = claim.dedupe.map(duration_ms);
    match row.and_then(|row| blocking(row, now_ms, dedupe_ms, replacing)) {
        Some(held) => Err(held),
        None => Ok(CallWrite::Put(open_row(claim, now_ms))),
    }
}

/// A finish's write of the digest's row `row` (see [`Ledger::finish_call`]).
fn finish_write(
    action_id: &str,
    ran: Option<(u64, Duration)>,
    now_ms: i64,
    row: Option<&StoredCall>,
) -> CallWrite {
    match row {
        Some(row) if row.action_id == action_id => match ran {
            Some((seq, keep)) if !keep.is_zero() => CallWrite::Put(StoredCall {
                action_id: row.action_id.clone(),
                owner: row.owner.clone(),
                seq: Some(i64::try_from(seq).unwrap_or(i64::MAX)),
                at_ms: now_ms,
                until_ms: now_ms.saturating_add(duration_ms(keep)),
            }),
            _ => CallWrite::Delete,
        },
        _ => CallWrite::Keep,
    }
}

/// What `row` says holds the digest for a claim at `now_ms`, if anything.
fn blocking(
    row: &StoredCall,
    now_ms: i64,
    dedupe_ms: Option<i64>,
    replacing: Option<&str>,
) -> Option<HeldCall> {
    match row.seq {
        None if replacing == Some(row.action_id.as_str()) => None,
        None => Some(HeldCall::Open {
            action_id: row.action_id.clone(),
            owner: row.owner.clone(),
            since: time(row.at_ms),
        }),
        Some(seq) => {
            let window = dedupe_ms?;
            let within = row.until_ms > now_ms && row.at_ms > now_ms.saturating_sub(window);
            within.then(|| HeldCall::Ran {
                action_id: row.action_id.clone(),
                seq: u64::try_from(seq).unwrap_or_default(),
                at: time(row.at_ms),
            })
        }
    }
}

fn open_row(claim: &CallClaim, now_ms: i64) -> StoredCall {
    StoredCall {
        action_id: claim.action_id.clone(),
        owner: claim.owner.clone(),
        seq: None,
        at_ms: now_ms,
        until_ms: 0,
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or_default())
}

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
        let dedupe_ms = claim.dedupe.map(duration_ms);
        let mut held = None;
        self.store.calls(
            key_hash(&claim.digest),
            Some(&mut |row: Option<&StoredCall>| {
                held = row.and_then(|row| blocking(row, now_ms, dedupe_ms, replacing));
                if held.is_some() {
                    CallWrite::Keep
                } else {
                    CallWrite::Put(open_row(claim, now_ms))
                }
            }),
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
                Some(&mut |row: Option<&StoredCall>| match row {
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
                }),
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

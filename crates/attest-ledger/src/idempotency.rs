//! Idempotency keys: a retried call with the same key acts once, kept beside the chain.
//!
//! A side table of claimed keys, **not** part of the hash-chained format: nothing here
//! is verified, exported, copied or proven. A key is stored as the SHA-256 of its text
//! (per tenant: each tenant's rows are its own), with the digest of the call it was
//! first used for, the claiming action's id, when it expires, the intent row's seq and,
//! once the call ended, its outcome (the caller's receipt, opaque to the ledger) and
//! the bytes a door replays (a response, bounded by the caller; absent for in-process
//! calls). What a door replays may hold what the vendor answered: the store lives in
//! the ledger's own file (mode 0600) or database, and rows are removed when they
//! expire.
//!
//! The claim is one write transaction ([`Ledger::claim_key`]): SQLite's `BEGIN
//! IMMEDIATE` holds the file's write lock, PostgreSQL's `INSERT … ON CONFLICT` locks
//! the key's row. Of two callers racing with one key, in any process on any host,
//! exactly one gets [`KeyState::Claimed`]; the other reads the first's row.
//!
//! Every claim first removes the rows that have expired (of every key), so the table
//! holds about one lifetime's worth of keyed calls.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::{Ledger, LedgerError};

/// A key claimed for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    /// The key as the caller sent it (stored as its SHA-256).
    pub key: String,
    /// The digest of the whole call: the same key with another digest is refused.
    pub digest: String,
    /// The claiming action's id.
    pub action_id: String,
    /// How long the key is held from the claim.
    pub lifetime: Duration,
}

/// What the store holds for a key another call claimed first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// The key was free (or had expired): this call holds it now, and must
    /// [`Ledger::finish_key`] or [`Ledger::release_key`] it.
    Claimed,
    /// The key was claimed for a call with another digest.
    Mismatch,
    /// The first call has not ended (or its process died before it could say so).
    Running {
        /// The first call's action id.
        action_id: String,
        /// Its intent row, once written.
        intent_seq: Option<u64>,
        /// How long ago it claimed the key.
        age: Duration,
    },
    /// The first call ended: what it left.
    Done(KeyOutcome),
}

/// How a keyed call ended, as its caller stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOutcome {
    /// The first call's action id.
    pub action_id: String,
    /// The first call's receipt, as its caller encoded it.
    pub outcome: String,
    /// What a door replays (its response), when it kept one.
    pub replay: Option<Vec<u8>>,
}

/// A change to a key this call holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyChange<'a> {
    /// The intent row was written at this seq.
    Intent(u64),
    /// The call ended.
    Done {
        outcome: &'a str,
        replay: Option<&'a [u8]>,
    },
    /// The call did not run: the key is free again.
    Release,
}

/// A claim as the store sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoredKey<'a> {
    /// SHA-256 of the key text.
    pub(crate) key: [u8; 32],
    pub(crate) digest: &'a str,
    pub(crate) action_id: &'a str,
    /// When it expires, ms since the epoch.
    pub(crate) expires_ms: i64,
}

/// A key's row as read back.
#[derive(Debug, Clone)]
pub(crate) struct KeyRow {
    pub(crate) digest: String,
    pub(crate) action_id: String,
    pub(crate) claimed_ms: i64,
    pub(crate) intent_seq: Option<i64>,
    pub(crate) outcome: Option<String>,
    pub(crate) replay: Option<Vec<u8>>,
}

impl KeyRow {
    /// What a second claim of this row, with `digest`, at `now_ms`, finds.
    pub(crate) fn state(self, digest: &str, now_ms: i64) -> KeyState {
        if self.digest != digest {
            return KeyState::Mismatch;
        }
        match self.outcome {
            Some(outcome) => KeyState::Done(KeyOutcome {
                action_id: self.action_id,
                outcome,
                replay: self.replay,
            }),
            None => KeyState::Running {
                action_id: self.action_id,
                intent_seq: self.intent_seq.and_then(|s| u64::try_from(s).ok()),
                age: Duration::from_millis(
                    u64::try_from(now_ms.saturating_sub(self.claimed_ms)).unwrap_or(0),
                ),
            },
        }
    }
}

/// What [`Ledger::purge_keys`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeysPurged {
    /// Rows removed (expired).
    pub removed: u64,
    /// Rows still held.
    pub held: u64,
}

impl Ledger {
    /// Claims `claim.key` for a call, atomically across processes and hosts; when
    /// another call holds it, says what that call left (see [`KeyState`]). Expired keys
    /// are removed first.
    pub fn claim_key(&self, claim: &KeyClaim) -> Result<KeyState, LedgerError> {
        let now_ms = crate::windows::millis(self.now());
        let lifetime = i64::try_from(claim.lifetime.as_millis()).unwrap_or(i64::MAX);
        let stored = StoredKey {
            key: key_hash(&claim.key),
            digest: &claim.digest,
            action_id: &claim.action_id,
            expires_ms: now_ms.saturating_add(lifetime),
        };
        self.store.claim_key(now_ms, &stored)
    }

    /// Notes the intent row of the call holding `key` (so a second caller can name it).
    pub fn key_intent(&self, key: &str, action_id: &str, seq: u64) -> Result<(), LedgerError> {
        self.store
            .change_key(&key_hash(key), action_id, KeyChange::Intent(seq))
    }

    /// Stores how the call holding `key` ended: `outcome` (the caller's receipt) and,
    /// for a door, the bytes it replays. Kept until the key expires.
    pub fn finish_key(
        &self,
        key: &str,
        action_id: &str,
        outcome: &str,
        replay: Option<&[u8]>,
    ) -> Result<(), LedgerError> {
        let change = KeyChange::Done { outcome, replay };
        self.store.change_key(&key_hash(key), action_id, change)
    }

    /// Frees `key` when the call holding it did not run (refused, held, not recorded):
    /// a retry is decided afresh. A key whose call ended is not freed.
    pub fn release_key(&self, key: &str, action_id: &str) -> Result<(), LedgerError> {
        self.store
            .change_key(&key_hash(key), action_id, KeyChange::Release)
    }

    /// Removes the keys that have expired, and says how many remain.
    pub fn purge_keys(&self) -> Result<KeysPurged, LedgerError> {
        self.store.purge_keys(crate::windows::millis(self.now()))
    }
}

fn key_hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

//! Idempotency keys: a retried call with the same key acts once, kept beside the chain.
//!
//! A side table of claimed keys, **not** part of the hash-chained format: nothing here
//! is verified, exported, copied or proven. A key belongs to whoever sent it, where they
//! sent it ([`KeyScope`]): its row is the SHA-256 of the principal (an authenticated
//! agent, or a keyed fingerprint of the credential the call carried), the method, the
//! route and the key's text, so another principal's call with the same key finds no row
//! and is its own call (per tenant: each tenant's rows are its own). A credential is
//! keyed with a secret made once per ledger (`idempotency_secret` in `attest_meta`): the
//! table holds no hash of a credential that a guess can be tested against without that
//! secret, and neither the credential nor its fingerprint is ever chained or logged. A
//! row stored before keys were scoped (the SHA-256 of the key's text alone) is found by
//! no principal; while it lives, a claim of its key is refused
//! ([`KeyState::Unbound`]) rather than run again or replayed to someone else. Each row
//! holds the digest of the call it was
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

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::{Ledger, LedgerError};

/// A key claimed for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyClaim {
    /// The key as the caller sent it (stored hashed with its scope).
    pub key: String,
    /// Whose the key is, and where it applies.
    pub scope: KeyScope,
    /// The digest of the whole call: the same key with another digest is refused.
    pub digest: String,
    /// The claiming action's id.
    pub action_id: String,
    /// How long the key is held from the claim.
    pub lifetime: Duration,
}

/// Whose a key is and where it applies: a key is one principal's, on one method and route.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyScope {
    /// Who sent it.
    pub principal: Principal,
    /// The HTTP method, or the MCP method.
    pub method: String,
    /// The route: the URL without query, or the MCP server and tool.
    pub route: String,
}

/// Who a key belongs to.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Principal {
    /// An agent the door authenticated (a per-agent token, a JWT, an OAuth subject).
    Agent(String),
    /// Without agent authentication: the credential the call carried (its `Authorization`,
    /// cookies, API-key headers), as bytes. Only a keyed fingerprint of it is stored.
    Credential(Vec<u8>),
    /// The call carried no credential and named no authenticated agent.
    #[default]
    Nobody,
}

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A credential is never printed.
        match self {
            Principal::Agent(name) => f.debug_tuple("Agent").field(name).finish(),
            Principal::Credential(_) => f.write_str("Credential(..)"),
            Principal::Nobody => f.write_str("Nobody"),
        }
    }
}

/// A claimed key's row, as [`Ledger::key_id`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyId([u8; 32]);

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
    /// The key was claimed before keys were bound to a principal: whose it is cannot be
    /// told, so it is neither replayed nor run again until it expires.
    Unbound {
        /// Its intent row, once written.
        intent_seq: Option<u64>,
    },
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
    /// The key's row: its text hashed with its scope.
    pub(crate) key: [u8; 32],
    /// The row the key had before keys were scoped: SHA-256 of its text alone.
    pub(crate) unscoped: [u8; 32],
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
    /// What a claim finds where the key's only row predates scoped keys.
    pub(crate) fn unbound(intent_seq: Option<i64>) -> KeyState {
        KeyState::Unbound {
            intent_seq: intent_seq.and_then(|s| u64::try_from(s).ok()),
        }
    }

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
            key: self.key_id(claim)?.0,
            unscoped: Sha256::digest(claim.key.as_bytes()).into(),
            digest: &claim.digest,
            action_id: &claim.action_id,
            expires_ms: now_ms.saturating_add(lifetime),
        };
        self.store.claim_key(now_ms, &stored)
    }

    /// The row `claim` claims: its key hashed with its scope, a credential keyed with
    /// this ledger's secret (made on first use).
    pub fn key_id(&self, claim: &KeyClaim) -> Result<KeyId, LedgerError> {
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        field(b"attest idempotency key v2");
        match &claim.scope.principal {
            Principal::Agent(name) => {
                field(b"agent");
                field(name.as_bytes());
            }
            Principal::Credential(credential) => {
                let mut mac = Hmac::<Sha256>::new_from_slice(&self.key_secret()?)
                    .map_err(|_| LedgerError::Internal("an HMAC key of 32 bytes"))?;
                mac.update(credential);
                field(b"credential");
                field(&mac.finalize().into_bytes());
            }
            Principal::Nobody => field(b"nobody"),
        }
        field(claim.scope.method.as_bytes());
        field(claim.scope.route.as_bytes());
        field(claim.key.as_bytes());
        Ok(KeyId(hash.finalize().into()))
    }

    /// The secret credentials are keyed with: made once per ledger (tenant), kept in
    /// `attest_meta`, read once per process.
    pub(crate) fn key_secret(&self) -> Result<[u8; 32], LedgerError> {
        if let Some(secret) = self.key_secret.get() {
            return Ok(*secret);
        }
        let mut fresh = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut fresh);
        let stored = self.store.key_secret(&hex::encode(fresh))?;
        let mut secret = [0u8; 32];
        hex::decode_to_slice(stored.trim(), &mut secret).map_err(|_| {
            LedgerError::Internal("idempotency_secret in attest_meta is not 64 hex digits")
        })?;
        Ok(*self.key_secret.get_or_init(|| secret))
    }

    /// Notes the intent row of the call holding `key` (so a second caller can name it).
    pub fn key_intent(&self, key: &KeyId, action_id: &str, seq: u64) -> Result<(), LedgerError> {
        self.store
            .change_key(Some(&key.0), action_id, KeyChange::Intent(seq))
    }

    /// Stores how the call holding `key` ended: `outcome` (the caller's receipt) and,
    /// for a door, the bytes it replays. Kept until the key expires. `key` `None`: the
    /// key `action_id` holds, whichever it is (an intent settled after its process went
    /// away, whose scope is not known).
    pub fn finish_key(
        &self,
        key: Option<&KeyId>,
        action_id: &str,
        outcome: &str,
        replay: Option<&[u8]>,
    ) -> Result<(), LedgerError> {
        let change = KeyChange::Done { outcome, replay };
        self.store.change_key(key.map(|k| &k.0), action_id, change)
    }

    /// Frees `key` when the call holding it did not run (refused, held, not recorded):
    /// a retry is decided afresh. A key whose call ended is not freed. `key` `None`: as
    /// for [`Ledger::finish_key`].
    pub fn release_key(&self, key: Option<&KeyId>, action_id: &str) -> Result<(), LedgerError> {
        self.store
            .change_key(key.map(|k| &k.0), action_id, KeyChange::Release)
    }

    /// Removes the keys that have expired, and says how many remain.
    pub fn purge_keys(&self) -> Result<KeysPurged, LedgerError> {
        self.store.purge_keys(crate::windows::millis(self.now()))
    }
}

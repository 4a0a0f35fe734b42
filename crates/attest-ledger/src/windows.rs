//! Window counts: what ran within a time window, per key, for policy's budgets and
//! rates (a rule's `limit:`), kept beside the chain.
//!
//! A side table of window entries (a hash of the key, the action's id, when it was
//! counted, what it added), **not** part of the hash-chained format: nothing here is
//! verified, exported, copied or proven, and the chain is never re-read to answer. A
//! key is stored as its SHA-256 only, so the values it names (an agent, a currency, a
//! target) never reach the file.
//!
//! The check and the count are one write transaction ([`Ledger::reserve_windows`]):
//! SQLite's `BEGIN IMMEDIATE` holds the file's write lock, PostgreSQL locks one row per
//! key (`window_keys`, keys in sorted order so two writers never wait on each other
//! crosswise). Of two writers racing at a cap, in any process on any host, the second
//! reads the first's entry and crosses. An action is counted once per key, however
//! often it is counted (the key and action id are the table's primary key).
//!
//! Entries older than a key's window are removed when the key is next checked, so the
//! table holds about one window's worth of calls per key. A key whose window is made
//! longer keeps only what the shorter window had kept.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::{Ledger, LedgerError};

/// One window a call is counted in. The ledger knows no policy: a key, a length, a cap
/// and what the call adds.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowClaim {
    /// The window's key (any text; stored as its SHA-256).
    pub key: String,
    /// How far back the window reaches.
    pub per: Duration,
    /// The most the window may hold: a call crosses when the figure plus
    /// [`WindowClaim::adds`] would exceed it.
    pub max: f64,
    /// What the call adds (1 for a count).
    pub adds: f64,
}

/// What [`Ledger::reserve_windows`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// No window was crossed: the call is counted in every one.
    Counted {
        /// Each window's figure before this call, in claim order.
        figures: Vec<f64>,
    },
    /// The call would cross the window at `index`: nothing was counted.
    Crossed {
        /// The first crossed claim's position.
        index: usize,
        /// Its figure before this call.
        figure: f64,
    },
}

/// A claim as the store sees it: the key's hash and the window's start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoredClaim {
    /// SHA-256 of the key text.
    pub(crate) key: [u8; 32],
    /// Entries counted at or before this time (ms since the epoch) are out of the window.
    pub(crate) since_ms: i64,
    /// What the call adds.
    pub(crate) adds: f64,
}

/// What a store reads of one claim's window, inside the transaction that counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Figure {
    /// What every other action counted in the window adds up to.
    pub(crate) others: f64,
    /// Whether this action is already counted in it.
    pub(crate) counted: bool,
}

/// Decides, from each claim's figure, whether the call is counted.
pub(crate) type Settle<'s> = dyn FnMut(&[Figure]) -> bool + Send + 's;

impl Ledger {
    /// Checks the call against every window and, unless one would be crossed, counts
    /// it in all of them, atomically across processes and hosts: a call that passes
    /// is counted before any other call reads the figure.
    ///
    /// A window the action is already counted in is not checked again: it passed when
    /// it was counted (a coding agent's hook counts a call before the agent runs it, and
    /// the row made after it ran reserves under the same action id). The figures are
    /// what the other actions add up to.
    pub fn reserve_windows(
        &self,
        action_id: &str,
        claims: &[WindowClaim],
    ) -> Result<Reservation, LedgerError> {
        let mut crossed = None;
        let figures = self.settle_windows(
            action_id,
            claims,
            Some(&mut |figures: &[Figure]| {
                crossed = claims.iter().zip(figures).position(|(claim, figure)| {
                    !figure.counted && figure.others + claim.adds > claim.max
                });
                crossed.is_none()
            }),
        )?;
        let figures: Vec<f64> = figures.iter().map(|figure| figure.others).collect();
        Ok(match crossed {
            Some(index) => Reservation::Crossed {
                index,
                figure: figures.get(index).copied().unwrap_or_default(),
            },
            None => Reservation::Counted { figures },
        })
    }

    /// Counts the call in every window without checking (a person approved it over
    /// the cap, or it ran unenforced); an action already counted is not counted again.
    pub fn count_windows(
        &self,
        action_id: &str,
        claims: &[WindowClaim],
    ) -> Result<(), LedgerError> {
        self.settle_windows(action_id, claims, Some(&mut |_: &[Figure]| true))
            .map(drop)
    }

    /// Each window's current figure, in claim order: a read, which counts nothing (and
    /// works on a ledger opened read-only).
    pub fn window_figures(&self, claims: &[WindowClaim]) -> Result<Vec<f64>, LedgerError> {
        let figures = self.settle_windows("", claims, None)?;
        Ok(figures.iter().map(|figure| figure.others).collect())
    }

    /// Takes back what [`Ledger::reserve_windows`] counted for a call that then did not
    /// run (its intent could not be recorded).
    pub fn release_windows(
        &self,
        action_id: &str,
        claims: &[WindowClaim],
    ) -> Result<(), LedgerError> {
        let keys: Vec<[u8; 32]> = claims.iter().map(|c| key_hash(&c.key)).collect();
        self.store.release_windows(action_id, &keys)
    }

    fn settle_windows(
        &self,
        action_id: &str,
        claims: &[WindowClaim],
        settle: Option<&mut Settle<'_>>,
    ) -> Result<Vec<Figure>, LedgerError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let now_ms = millis(self.now());
        let stored: Vec<StoredClaim> = claims
            .iter()
            .map(|claim| StoredClaim {
                key: key_hash(&claim.key),
                since_ms: now_ms
                    .saturating_sub(i64::try_from(claim.per.as_millis()).unwrap_or(i64::MAX)),
                adds: claim.adds,
            })
            .collect();
        self.store.windows(now_ms, action_id, &stored, settle)
    }
}

pub(crate) fn key_hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Milliseconds since the Unix epoch (0 for a clock before it).
pub(crate) fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The keys of `claims`, each once, in sorted order: the order locks are taken in.
pub(crate) fn lock_order(claims: &[StoredClaim]) -> Vec<[u8; 32]> {
    let mut keys: Vec<[u8; 32]> = claims.iter().map(|c| c.key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

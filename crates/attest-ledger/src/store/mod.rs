//! The handful of operations a ledger needs from where its rows live, as both stores
//! (SQLite: [`crate::sqlite`]; PostgreSQL: [`crate::pg`]) answer them.
//!
//! Everything that makes the format or decides an order is above this trait and
//! written once ([`crate::Ledger`]): building rows ([`crate::chain`]), group commit
//! with its retries and its recovery from a lost acknowledgement
//! ([`crate::group`]), prune's order of checks ([`crate::prune`]) and checkpoint
//! signing ([`crate::checkpoints`]). Below it is only SQL, tuned per store: one
//! statement per append on PostgreSQL; prepared inserts, tree hashes and filing in
//! bulk on SQLite.
//!
//! # Crash table
//!
//! An append is three steps in one transaction: read the edge, insert the built rows
//! (and tree hashes), commit. Each step can fail outright, or fail after what it did
//! was persisted (the acknowledgement lost: a connection cut, a process killed after
//! the commit record reached the disk). What the ledger does in each cell:
//!
//! | step      | failed                                              | failed but persisted                                   |
//! |-----------|-----------------------------------------------------|--------------------------------------------------------|
//! | edge read | nothing written; the error is returned ([`Extended::Failed`]); nothing cached | reads persist nothing; same as failed |
//! | insert    | the transaction rolls back; nothing written ([`Extended::Failed`], or [`Extended::Conflict`] when another writer took the seq: re-read, rebuild, retry) | an insert persists only with its commit: same as failed |
//! | commit    | [`Extended::Unknown`]: the row at the group's first seq is read back; absent, the group is written again on a fresh edge | [`Extended::Unknown`]: the row is found with the hash this writer built, and its rows are the result: nothing is written twice |
//!
//! Each cell is a test on both stores (`src/store/faults.rs`), through a store that fails where
//! it is told to.

#[cfg(test)]
mod faults;

use std::path::Path;

use crate::calls::{Riding, SettleCall, StoredCall};
use crate::chain::{Built, ChainEdge};
use crate::erasure::Forget;
use crate::idempotency::{KeyChange, KeyState, KeysPurged, StoredKey};
use crate::query::{Counts, Filter};
use crate::source::Source;
use crate::windows::{Settle, StoredClaim};
use crate::{Appended, LedgerError, Record, RowSummary, StoredCheckpoint, StoredRow};

/// How an attempt to extend the chain ended.
#[derive(Debug)]
pub(crate) enum Extended {
    /// The rows are committed, durable at the configured level.
    Committed(Vec<Appended>),
    /// Another writer took the next seq first; nothing of this attempt was written.
    Conflict(LedgerError),
    /// Nothing was written, and the same attempt would fail again.
    Failed(LedgerError),
    /// Nothing was written, for the connection's sake: recover and try again.
    Retry(LedgerError),
    /// The commit was sent but its outcome is not known (the acknowledgement may be
    /// lost): these rows may be in the ledger.
    Unknown {
        built: Vec<Appended>,
        error: LedgerError,
    },
}

/// What the prune step above the store decided, inside the store's transaction.
pub(crate) struct PruneCut {
    /// Remove every entry up to this seq.
    pub(crate) through: u64,
    /// Its entry hash, checked against its body: the new prune boundary.
    pub(crate) hash: crate::Hash,
}

/// Builds the rows of one attempt on the edge the store read.
pub(crate) type Build<'b> = dyn FnMut(&ChainEdge) -> Result<Built, LedgerError> + Send + 'b;
/// A read of one snapshot.
pub(crate) type Read<'r> = dyn FnMut(&dyn Source) -> Result<(), LedgerError> + 'r;
/// Decides a checkpoint inside the store's write transaction: the checkpoint, and
/// whether it is new (to be stored) or the one already stored at the tip.
pub(crate) type Sign<'s> =
    dyn FnMut(&dyn Source) -> Result<(StoredCheckpoint, bool), LedgerError> + Send + 's;
/// Decides a prune inside the store's write transaction: `None` when nothing goes.
pub(crate) type Cut<'c> = dyn FnMut(&dyn Source) -> Result<Option<PruneCut>, LedgerError> + 'c;

/// Where a ledger's rows live.
pub(crate) trait Store: Send + Sync {
    /// Where the ledger lives, for messages (a file, or a URL without credentials).
    fn path(&self) -> &Path;

    /// One attempt to extend the chain: in one write transaction, read the edge (a
    /// cached one unless `fresh`), let `build` build `records` on it, store the rows
    /// and tree hashes, make the call-digest steps `calls` ride with (after the rows:
    /// a step's write needs its row's seq; a claim held fails the whole attempt,
    /// [`Extended::Failed`]), commit.
    /// `forget`, when given, deletes a subject's key in the same transaction, after the
    /// rows (no key there: [`Extended::Failed`] with [`LedgerError::SubjectErased`]), and
    /// runs its `before_commit` last.
    fn extend(
        &self,
        records: &[Record],
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
        fresh: bool,
        build: &mut Build<'_>,
    ) -> Extended;

    /// The key kept for the subject whose blind index is `index`; with `fresh`, stored
    /// first unless one is kept already. `None`: no key (and no `fresh`).
    fn subject_key(
        &self,
        index: &[u8; 32],
        fresh: Option<&[u8; 32]>,
    ) -> Result<Option<[u8; 32]>, LedgerError>;

    /// Every subject key kept, by blind index (none: an older schema without the table,
    /// opened read-only).
    fn subject_keys(&self) -> Result<Vec<crate::erasure::KeptKey>, LedgerError>;

    /// Whether a commit whose outcome was unknown may still land later (a server
    /// finishing a statement after the connection broke). A store where it cannot
    /// (SQLite: a transaction not committed when the call returned never will be)
    /// lets a group that is not there be written again at once.
    fn late_commits(&self) -> bool;

    /// How many attempts an append makes before it gives up.
    fn attempts(&self) -> u32;

    /// Waits until the store can be written again after attempt `attempt` failed
    /// with its outcome unknown (a fresh connection, for a server).
    fn recover(&self, attempt: u32) -> Result<(), LedgerError>;

    /// Stores a checkpoint decided by `sign` on a snapshot of the write transaction.
    fn save_checkpoint(&self, sign: &mut Sign<'_>)
        -> Result<(StoredCheckpoint, bool), LedgerError>;

    /// Removes the entries through the cut `cut` decides (archived by it first) and
    /// records the boundary, in one write transaction; returns the entries removed
    /// (`None`: `cut` chose nothing).
    fn prune(&self, cut: &mut Cut<'_>) -> Result<Option<u64>, LedgerError>;

    /// Runs `read` on one consistent snapshot.
    fn read(&self, read: &mut Read<'_>) -> Result<(), LedgerError>;

    /// The newest `limit` rows matching `filter`, newest first.
    fn list(&self, filter: &Filter, limit: usize) -> Result<Vec<RowSummary>, LedgerError>;

    /// The rows at `seqs` that exist, in the order given.
    fn rows_at(
        &self,
        seqs: &[u64],
        visit: &mut dyn FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError>;

    /// The counters, the unfiled tail taken in.
    fn counts(&self) -> Result<Counts, LedgerError>;

    /// Copies every row, tree hash, checkpoint and the prune boundary of `source` in,
    /// in one transaction; the store must be empty.
    fn copy_in(&self, source: &dyn Source) -> Result<u64, LedgerError>;

    /// Each claim's figure (what was counted after its `since_ms`), in claim order. With
    /// `settle`, in one write transaction that no other writer of these keys can
    /// interleave with: also drops each claim's expired entries and counts the call in
    /// every window (at `now_ms`, once per key) when `settle` says so, the figures read
    /// before (see [`crate::windows`]). Without, a plain read.
    fn windows(
        &self,
        now_ms: i64,
        action_id: &str,
        claims: &[StoredClaim],
        settle: Option<&mut Settle<'_>>,
    ) -> Result<Vec<crate::windows::Figure>, LedgerError>;

    /// Removes what the action counted under `keys`.
    fn release_windows(&self, action_id: &str, keys: &[[u8; 32]]) -> Result<(), LedgerError>;

    /// In one write transaction no other claimer of the key can interleave with: drops
    /// the expired keys, then claims `claim`'s key or reads what holds it (see
    /// [`crate::idempotency`]).
    fn claim_key(&self, now_ms: i64, claim: &StoredKey<'_>) -> Result<KeyState, LedgerError>;

    /// Changes the key `key` (`None`: whichever) held by `action_id` (only while it has
    /// no outcome).
    fn change_key(
        &self,
        key: Option<&[u8; 32]>,
        action_id: &str,
        change: KeyChange<'_>,
    ) -> Result<(), LedgerError>;

    /// Drops the keys expired at `now_ms`; counts what is left.
    fn purge_keys(&self, now_ms: i64) -> Result<KeysPurged, LedgerError>;

    /// The secret idempotency keys' credentials are keyed with: `fresh` stored, unless
    /// one was stored before, and what is stored returned.
    fn key_secret(&self, fresh: &str) -> Result<String, LedgerError>;
    /// The row of the call digest `digest` (see [`crate::calls`]). With `settle`, in one
    /// write transaction that no other writer of this digest can interleave with: also
    /// writes what `settle` decides from the row read. Without, a plain read.
    fn calls(
        &self,
        digest: [u8; 32],
        settle: Option<&mut SettleCall<'_>>,
    ) -> Result<Option<StoredCall>, LedgerError>;

    /// Removes every call row naming `action_id`; returns how many went.
    fn forget_calls(&self, action_id: &str) -> Result<u64, LedgerError>;

    /// The value stored beside the chain at `key` (`attest_meta`), if any.
    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError>;

    /// Sets `key` to `new` if its stored value is still `old` (`None`: absent), in one
    /// statement; `false` when it was not (another writer changed it first).
    fn swap_meta(&self, key: &str, old: Option<&str>, new: &str) -> Result<bool, LedgerError>;

    /// The PostgreSQL database, for a store that lives in one.
    fn database(&self) -> Option<crate::PgDatabase> {
        None
    }
}

//! The PostgreSQL store: one database holds any number of tenants' ledgers, each its
//! own chain from seq 1, tree and checkpoints, and any number of writers in any
//! process on any host append to them.
//!
//! The append is a compare-and-swap on the tip: the primary key on `(tenant, seq)`
//! refuses a second row at a seq, so of two writers that read the same tip, one
//! commits and the other gets a unique violation, drops its cached tip, re-reads it,
//! rebuilds and re-hashes its bodies, and tries again. No lock is taken beyond the
//! key's own, so no advisory locks, and the SQL runs on PostgreSQL-compatible
//! databases that have none.
//!
//! A group of rows is one statement: the entries, the tree hashes they complete and
//! the counters they move, in one round trip and one transaction.
//!
//! A statement whose acknowledgement was lost (the connection cut after the commit)
//! is found on retry: the row at the first seq it wrote is read back, and if its hash
//! is the hash of the body this writer built, the rows are there and are not written
//! again.

mod append;
mod blocking;
mod calls;
mod connect;
mod idempotency;
mod meta;
mod query;
mod read;
mod schema;
mod subjects;
mod windows;
mod write;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::calls::{Riding, SettleCall, StoredCall};
use crate::chain::ChainEdge;
use crate::erasure::Forget;
use crate::idempotency::{KeyChange, KeyState, KeysPurged, StoredKey};
use crate::query::{Counts, Filter};
use crate::source::Source;
use crate::store::{Build, Cut, Extended, Read, Sign, Store};
use crate::windows::{Settle, StoredClaim};
use crate::{Durability, LedgerError, Record, RowSummary, StoredCheckpoint, StoredRow};
pub use blocking::off_runtime;
use blocking::Held;
pub use connect::{check_tenant, PgConnection, PgDatabase};
use connect::{Conn, Pool};

/// Whether `location` names a PostgreSQL ledger rather than a file.
pub(crate) fn is_url(location: &Path) -> bool {
    location
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// The chain's end, and how far its entries are filed (`filed_through`).
struct PgEdge {
    chain: ChainEdge,
    filed: u64,
}

/// One tenant of one PostgreSQL database.
pub(crate) struct PgStore {
    pool: Held<Pool>,
    /// `postgres://user@host:port/db`: no password, no query.
    name: PathBuf,
    tenant: String,
    /// The chain's end as this process last saw it commit.
    edge: Mutex<Option<PgEdge>>,
    read_only: bool,
    /// The sessions commit synchronously (`full`): a call digest's claim and finish then
    /// commit without waiting for their own flush ([`PgStore::settle_call`]).
    synchronous: bool,
}

impl PgStore {
    /// Connects (a pool), creates or upgrades the schema unless `read_only`.
    pub(crate) fn open(
        url: &str,
        tenant: Option<&str>,
        durability: Durability,
        read_only: bool,
    ) -> Result<PgStore, LedgerError> {
        off_runtime(|| PgStore::open_here(url, tenant, durability, read_only))
    }

    fn open_here(
        url: &str,
        tenant: Option<&str>,
        durability: Durability,
        read_only: bool,
    ) -> Result<PgStore, LedgerError> {
        if let Some(tenant) = tenant {
            check_tenant(tenant)?;
        }
        let (pool, name) = connect::pool(url, durability)?;
        let store = PgStore {
            pool: Held::new(pool),
            name,
            tenant: tenant.unwrap_or("").to_owned(),
            edge: Mutex::new(None),
            read_only,
            synchronous: durability == Durability::Full,
        };
        if read_only {
            store.check_schema()?;
        } else {
            store.migrate()?;
        }
        Ok(store)
    }

    pub(crate) fn err(&self, during: &'static str) -> impl Fn(postgres::Error) -> LedgerError + '_ {
        move |source| LedgerError::Postgres {
            path: self.name.clone(),
            during,
            source,
        }
    }

    pub(crate) fn client(&self) -> Result<Held<Conn>, LedgerError> {
        off_runtime(|| self.pool.get())
            .map(Held::new)
            .map_err(|source| LedgerError::Pool {
                path: self.name.clone(),
                detail: source.to_string(),
            })
    }

    fn edge_slot(&self) -> MutexGuard<'_, Option<PgEdge>> {
        // Only whole values are stored; a poisoned lock holds no torn state.
        self.edge.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for PgStore {
    fn path(&self) -> &Path {
        &self.name
    }

    fn extend(
        &self,
        records: &[Record],
        calls: &[Riding<'_>],
        forget: Option<&Forget<'_>>,
        fresh: bool,
        build: &mut Build<'_>,
    ) -> Extended {
        off_runtime(|| self.extend_chain(records, calls, forget, fresh, build))
    }

    fn late_commits(&self) -> bool {
        // A backend may finish a statement after the connection to it broke.
        true
    }

    fn attempts(&self) -> u32 {
        append::MAX_ATTEMPTS
    }

    fn recover(&self, attempt: u32) -> Result<(), LedgerError> {
        off_runtime(|| self.reconnect(attempt).map(drop))
    }

    fn save_checkpoint(
        &self,
        sign: &mut Sign<'_>,
    ) -> Result<(StoredCheckpoint, bool), LedgerError> {
        off_runtime(|| self.store_checkpoint(sign))
    }

    fn prune(&self, cut: &mut Cut<'_>) -> Result<Option<u64>, LedgerError> {
        self.remove_prefix(cut)
    }

    fn read(&self, read: &mut Read<'_>) -> Result<(), LedgerError> {
        self.snapshot(false, |source| read(&source))
    }

    fn list(&self, filter: &Filter, limit: usize) -> Result<Vec<RowSummary>, LedgerError> {
        off_runtime(|| self.list_filtered(filter, limit))
    }

    fn rows_at(
        &self,
        seqs: &[u64],
        visit: &mut dyn FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        self.point_reads(seqs, visit)
    }

    fn counts(&self) -> Result<Counts, LedgerError> {
        off_runtime(|| self.counts_now())
    }

    fn copy_in(&self, source: &dyn Source) -> Result<u64, LedgerError> {
        self.copy_from(source)
    }

    fn windows(
        &self,
        now_ms: i64,
        action_id: &str,
        claims: &[StoredClaim],
        settle: Option<&mut Settle<'_>>,
    ) -> Result<Vec<crate::windows::Figure>, LedgerError> {
        off_runtime(|| self.settle_windows(now_ms, action_id, claims, settle))
    }

    fn release_windows(&self, action_id: &str, keys: &[[u8; 32]]) -> Result<(), LedgerError> {
        off_runtime(|| self.release_window_entries(action_id, keys))
    }

    fn claim_key(&self, now_ms: i64, claim: &StoredKey<'_>) -> Result<KeyState, LedgerError> {
        off_runtime(|| self.claim_idempotency_key(now_ms, claim))
    }

    fn change_key(
        &self,
        key: Option<&[u8; 32]>,
        action_id: &str,
        change: KeyChange<'_>,
    ) -> Result<(), LedgerError> {
        off_runtime(|| self.change_idempotency_key(key, action_id, change))
    }

    fn purge_keys(&self, now_ms: i64) -> Result<KeysPurged, LedgerError> {
        off_runtime(|| self.purge_idempotency_keys(now_ms))
    }

    fn key_secret(&self, fresh: &str) -> Result<String, LedgerError> {
        off_runtime(|| self.idempotency_secret(fresh))
    }

    fn subject_key(
        &self,
        index: &[u8; 32],
        fresh: Option<&[u8; 32]>,
    ) -> Result<Option<[u8; 32]>, LedgerError> {
        off_runtime(|| self.stored_subject_key(index, fresh))
    }

    fn subject_keys(&self) -> Result<Vec<crate::erasure::KeptKey>, LedgerError> {
        off_runtime(|| self.all_subject_keys())
    }

    fn calls(
        &self,
        digest: [u8; 32],
        settle: Option<&mut SettleCall<'_>>,
    ) -> Result<Option<StoredCall>, LedgerError> {
        off_runtime(|| self.settle_call(digest, settle))
    }

    fn forget_calls(&self, action_id: &str) -> Result<u64, LedgerError> {
        off_runtime(|| self.forget_call_rows(action_id))
    }

    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        off_runtime(|| self.meta_value(key))
    }

    fn swap_meta(&self, key: &str, old: Option<&str>, new: &str) -> Result<bool, LedgerError> {
        off_runtime(|| self.swap_meta_value(key, old, new))
    }

    fn database(&self) -> Option<PgDatabase> {
        Some(PgDatabase {
            pool: self.pool.clone(),
            name: self.name.clone(),
            tenant: self.tenant.clone(),
        })
    }
}

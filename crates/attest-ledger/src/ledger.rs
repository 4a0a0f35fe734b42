//! [`Ledger`]: one chain over one [`Store`], whichever store it is. No SQL here: what
//! the ledger does is written once above the store ([`crate::group`] for appends,
//! [`crate::checkpoints`], [`crate::prune`], [`crate::verify`]), and each store
//! answers in its own SQL.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::group::GroupCommit;
use crate::query::{Counts, Filter};
use crate::source::Source;
use crate::store::Store;
use crate::{Clock, Hash, LedgerError, LedgerOptions, RowSummary, StoredRow};

/// A hash-chained ledger: one SQLite file, or one tenant's chain in a PostgreSQL
/// database (`Ledger::open` with a `postgres://` URL).
pub struct Ledger {
    /// The file, or the server's URL without credentials.
    path: PathBuf,
    pub(crate) store: Box<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) group: GroupCommit,
    /// The secret idempotency keys' credentials are keyed with, once read.
    pub(crate) key_secret: std::sync::OnceLock<[u8; 32]>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Ledger {
    /// Opens (or, with `options.create`, creates) the ledger at `path`.
    ///
    /// `path` may be a `postgres://` (or `postgresql://`) URL: the ledger is then the
    /// tenant's chain in that database, its schema created or upgraded on open.
    pub fn open(path: impl AsRef<Path>, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        let location = path.as_ref();
        if crate::pg::is_url(location) {
            return Ledger::open_postgres(location, &options, false);
        }
        let store = crate::sqlite::SqliteStore::open(location, &options)?;
        Ok(Ledger::over(Box::new(store), options.clock))
    }

    /// Opens a ledger from the string a user gives: a file path, or a `postgres://`
    /// URL. The one entry point for `--ledger` and the configuration file.
    pub fn open_location(location: &str, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        Ledger::open(Path::new(location), options)
    }

    pub(crate) fn open_postgres(
        location: &Path,
        options: &LedgerOptions,
        read_only: bool,
    ) -> Result<Ledger, LedgerError> {
        let url = location.to_str().ok_or_else(|| LedgerError::BadUrl {
            detail: "the URL is not UTF-8".to_owned(),
        })?;
        let store = crate::pg::PgStore::open(
            url,
            options.tenant.as_deref(),
            options.durability,
            read_only,
        )?;
        Ok(Ledger::over(Box::new(store), options.clock.clone()))
    }

    /// A ledger over `store`.
    pub(crate) fn over(store: Box<dyn Store>, clock: Arc<dyn Clock>) -> Ledger {
        Ledger {
            path: store.path().to_path_buf(),
            store,
            clock,
            group: GroupCommit::default(),
            key_secret: std::sync::OnceLock::new(),
        }
    }

    /// Whether this ledger lives in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.store.database().is_some()
    }

    /// The PostgreSQL database this ledger lives in (`None` for a SQLite file), for
    /// tables kept beside the chain, such as the approval store's.
    pub fn postgres(&self) -> Option<crate::pg::PgDatabase> {
        self.store.database()
    }

    /// The current time, from the injected clock.
    pub(crate) fn now(&self) -> std::time::SystemTime {
        self.clock.now()
    }

    /// The file this ledger lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on one consistent snapshot of the ledger, whatever the store.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&dyn Source) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let mut f = Some(f);
        let mut out = None;
        self.store.read(&mut |source| {
            if let Some(f) = f.take() {
                out = Some(f(source)?);
            }
            Ok(())
        })?;
        out.ok_or(LedgerError::Internal("a read ran nothing"))
    }

    /// The newest row's seq and hash, or `None` for an empty ledger.
    pub fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        self.read(|src| src.tip())
    }

    /// The newest `limit` rows, newest first, from the indexed columns.
    pub fn list(&self, limit: usize) -> Result<Vec<RowSummary>, LedgerError> {
        self.list_filtered(&Filter::default(), limit)
    }

    /// The newest `limit` rows that match `filter`, newest first, from the indexed
    /// columns (`run` and `action_id` through the store's lookups, the entries not
    /// filed there yet included).
    pub fn list_filtered(
        &self,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<RowSummary>, LedgerError> {
        self.store.list(filter, limit)
    }

    /// Calls `visit` for every row with `seq >= from_seq`, in seq order, streaming.
    ///
    /// `visit` returns `false` to stop early.
    pub fn for_each_row(
        &self,
        from_seq: u64,
        mut visit: impl FnMut(&StoredRow<'_>) -> Result<bool, LedgerError>,
    ) -> Result<(), LedgerError> {
        self.read(|src| src.rows(from_seq, &mut visit))
    }

    /// Calls `visit` for each row at `seqs` that exists (point reads by seq), in the
    /// order given.
    pub fn for_each_row_at(
        &self,
        seqs: &[u64],
        mut visit: impl FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        self.store.rows_at(seqs, &mut visit)
    }

    /// The counters kept with the entries, the entries not filed yet taken in, read
    /// in one snapshot.
    pub fn counts(&self) -> Result<Counts, LedgerError> {
        self.store.counts()
    }

    /// Writes every stored body, one per line, exactly the bytes that were hashed.
    pub fn export_jsonl(&self, out: &mut impl std::io::Write) -> Result<u64, LedgerError> {
        let mut count = 0;
        self.for_each_row(1, |row| {
            out.write_all(row.body).map_err(LedgerError::Output)?;
            out.write_all(b"\n").map_err(LedgerError::Output)?;
            count += 1;
            Ok(true)
        })?;
        out.flush().map_err(LedgerError::Output)?;
        Ok(count)
    }
}

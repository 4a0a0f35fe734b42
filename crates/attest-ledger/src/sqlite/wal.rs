//! WAL checkpoints off the append path.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its threshold, so
//! about every hundredth append stalled its caller for milliseconds while pages were
//! copied and synced into the database file. The ledger's connection turns that off
//! (`wal_autocheckpoint = 0`) and this thread, with a connection of its own, runs a
//! checkpoint whenever about [`CHECKPOINT_PAGES`] pages have been committed since the
//! last one: `PASSIVE` first, which takes no lock an append needs, so appends carry on
//! while it copies; then a short `RESTART` for what was committed meanwhile.
//!
//! The WAL stays bounded: once a checkpoint has copied every frame, the next commit
//! starts again at the front of the file, and `journal_size_limit` truncates a WAL that
//! grew past it (a long read transaction can hold a checkpoint back meanwhile). A failed
//! checkpoint loses nothing (the frames stay in the WAL, which readers consult) and is
//! tried again at the next threshold. Closing the last connection checkpoints too.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

/// How long the second step of a checkpoint waits for readers and writers.
const RESTART_WAIT: Duration = Duration::from_millis(10);

/// WAL frames past which a checkpoint makes sure the WAL starts over (2 × the
/// checkpoint threshold, about 8 MiB of 4 KiB pages).
const RESTART_FRAMES: i64 = 2 * CHECKPOINT_PAGES as i64;

/// Pages committed between checkpoints: SQLite's own default threshold.
const CHECKPOINT_PAGES: usize = 1000;

/// Bytes a WAL is truncated to when it is reset after a checkpoint, if it grew larger
/// (set on every connection: the one that resets it applies its own limit).
pub(crate) const WAL_SIZE_LIMIT: i64 = 16 << 20;

/// How long a busy WAL switch sleeps before it tries again.
const SWITCH_RETRY: Duration = Duration::from_millis(5);

/// Puts the file `conn` opened in WAL mode, waiting up to `within` for other processes.
///
/// A file still in rollback mode (new, or written by a process that has not switched it
/// yet) changes mode under an exclusive lock, taken while this connection already reads
/// the file: SQLite answers `SQLITE_BUSY` at once then instead of calling the busy
/// handler (waiting could deadlock two readers that both want to write), so processes
/// that open a new ledger together would fail. This waits in its own loop instead, as
/// the busy handler would. Once the file is in WAL mode the switch takes no such lock.
pub fn switch_to_wal(conn: &Connection, within: Duration) -> rusqlite::Result<()> {
    let started = Instant::now();
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if matches!(
                    error.code,
                    ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked
                ) && started.elapsed() < within =>
            {
                std::thread::sleep(SWITCH_RETRY);
            }
            done => return done,
        }
    }
}

/// The checkpoint thread and how to wake it.
pub(crate) struct WalCheckpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Pages committed since the last checkpoint, estimated.
    pages: usize,
    stop: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Two plain fields, written whole: a poisoned lock holds no torn state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WalCheckpointer {
    /// Opens a second connection to `path` and starts the thread that checkpoints with it.
    pub(crate) fn start(path: &Path) -> rusqlite::Result<WalCheckpointer> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(RESTART_WAIT)?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("attest-wal-checkpoint".to_owned())
                .spawn(move || run(&shared, &conn))
                .ok()
        };
        Ok(WalCheckpointer { shared, thread })
    }

    /// No thread: for a connection that never commits (the read-only opener's), or
    /// that checkpoints in its own commits.
    pub(crate) fn inline() -> WalCheckpointer {
        WalCheckpointer {
            shared: Arc::new(Shared::default()),
            thread: None,
        }
    }

    /// Tells the thread a commit of `rows` rows happened; wakes it past the threshold.
    /// Without a thread (it could not be started), the commit itself checkpoints, as
    /// SQLite would have.
    pub(crate) fn committed(&self, rows: usize, conn: &Connection) {
        let mut state = self.shared.lock();
        // An entry row is a few hundred bytes: a one-row commit writes the entries leaf
        // and sometimes an interior page; one in 64 also writes the tree_hashes,
        // counters and lookups pages filed in bulk.
        state.pages += 2 + rows / 2;
        if state.pages < CHECKPOINT_PAGES {
            return;
        }
        if self.thread.is_some() {
            self.shared.wake.notify_one();
        } else {
            state.pages = 0;
            drop(state);
            checkpoint(conn);
        }
    }
}

impl Drop for WalCheckpointer {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread never panics; if it did, there is nothing left to clean up.
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared, conn: &Connection) {
    let mut state = shared.lock();
    loop {
        if state.stop {
            return;
        }
        if state.pages >= CHECKPOINT_PAGES {
            state.pages = 0;
            drop(state);
            checkpoint(conn);
            state = shared.lock();
            continue;
        }
        state = shared
            .wake
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// One checkpoint, in two steps when the WAL is long; a failure is retried at the next
/// threshold (see the module doc).
///
/// A passive checkpoint copies the frames without blocking anyone, but under a steady
/// stream of appends it never catches up with the last frame, and only a checkpoint
/// that does lets the next commit start the WAL again from its beginning. So when the
/// WAL has grown past [`RESTART_FRAMES`], a `RESTART` follows: it copies the few frames
/// committed meanwhile (and syncs) holding writers back only that long, and makes the
/// next commit reset the WAL. If a reader holds an old snapshot it gives up after
/// [`RESTART_WAIT`] rather than stall appends behind it.
fn checkpoint(conn: &Connection) {
    let frames = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        row.get::<_, i64>(1)
    });
    if frames.is_ok_and(|frames| frames >= RESTART_FRAMES) {
        let _ = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
    }
}

//! The ledger's writer thread: one thread of its own does every append an `Attest`
//! makes, instead of a `spawn_blocking` per action.
//!
//! A caller queues its record (with the call-digest step that commits with it, if any)
//! with a reply slot and awaits the reply. The thread takes
//! everything queued (up to [`MAX_GROUP`]) and writes it with [`Ledger::append_each`]:
//! one transaction and one sync for the lot, so concurrent actions are group-committed
//! exactly as before. A reply is sent only after the transaction holding its row
//! committed, so a receipt still means "durable at the configured level". The thread
//! ends when the last `Attest` sharing it is dropped.
//!
//! A caller that finds the writer idle (nothing queued, no other caller appending on
//! its own thread) appends to a SQLite ledger on its own thread instead: two thread
//! hand-offs cost more than the commit itself, and one action at a time never has
//! anything to group with. At most one caller does so at a time, so at most one
//! runtime thread waits on a commit; everyone else queues. A PostgreSQL ledger always
//! goes through the thread: its client must not run on a runtime thread.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use attest_ledger::{Appended, CallStep, Ledger, LedgerError, Record, MAX_GROUP};
use tokio::sync::oneshot;

use crate::AttestError;

/// The answer to a queued append, with the record and step handed back: the caller's
/// task frees them (a record is a dozen strings), not the writer thread, which every
/// concurrent action waits on (dropping a group's records was 3% of its samples).
type Reply = oneshot::Sender<(Result<Appended, LedgerError>, Record, Option<CallStep>)>;

/// The queue into the writer thread, and the way around it when it is idle.
#[derive(Debug, Clone)]
pub(crate) struct LedgerWriter {
    queue: mpsc::Sender<(Record, Option<CallStep>, Reply)>,
    /// The ledger, for appends on the caller's thread; `None` for a PostgreSQL ledger.
    inline: Option<Arc<Ledger>>,
    /// Whether a caller is appending on its own thread.
    appending_inline: Arc<AtomicBool>,
    /// Records sent to the thread and not yet answered.
    queued: Arc<AtomicUsize>,
}

impl LedgerWriter {
    /// Starts the thread that appends to `ledger`.
    pub(crate) fn start(ledger: Arc<Ledger>) -> Result<LedgerWriter, AttestError> {
        let (queue, jobs) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let inline = (!ledger.is_postgres()).then(|| Arc::clone(&ledger));
        let answered = Arc::clone(&queued);
        std::thread::Builder::new()
            .name("attest-ledger-writer".to_owned())
            .spawn(move || write_until_closed(&ledger, &jobs, &answered))
            .map_err(AttestError::WriterThread)?;
        Ok(LedgerWriter {
            queue,
            inline,
            appending_inline: Arc::new(AtomicBool::new(false)),
            queued,
        })
    }

    /// Appends `record`, and makes `step` in the same transaction; returns once both
    /// are durable at the configured level.
    pub(crate) async fn append(
        &self,
        record: Record,
        step: Option<CallStep>,
    ) -> Result<Appended, AttestError> {
        if let Some((ledger, _slot)) = self.idle_ledger() {
            let result = ledger
                .append_each_with(std::slice::from_ref(&record), std::slice::from_ref(&step))
                .pop();
            return match result {
                Some(result) => result.map_err(AttestError::Ledger),
                None => Err(AttestError::WriterStopped),
            };
        }
        let (reply, answer) = oneshot::channel();
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.queue.send((record, step, reply)).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(AttestError::WriterStopped);
        }
        let (result, _record, _step) = answer.await.map_err(|_| AttestError::WriterStopped)?;
        result.map_err(AttestError::Ledger)
    }
}

impl LedgerWriter {
    /// The SQLite ledger, when nothing is queued and no other caller is using it on
    /// its own thread (an append, or a side table's read or write through
    /// `Attest::on_ledger`); the caller holds the inline slot until the guard drops.
    pub(crate) fn idle_ledger(&self) -> Option<(&Ledger, InlineSlot<'_>)> {
        let ledger = self.inline.as_deref()?;
        if self.queued.load(Ordering::Acquire) != 0 {
            return None;
        }
        self.appending_inline
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| (ledger, InlineSlot(&self.appending_inline)))
    }
}

/// The inline slot, held: freed when dropped (after the append, or if it panicked).
pub(crate) struct InlineSlot<'a>(&'a AtomicBool);

impl Drop for InlineSlot<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

fn write_until_closed(
    ledger: &Ledger,
    jobs: &mpsc::Receiver<(Record, Option<CallStep>, Reply)>,
    queued: &AtomicUsize,
) {
    let mut records = Vec::new();
    let mut steps = Vec::new();
    let mut replies = Vec::new();
    // `recv` fails only once every sender (every `Attest` clone) is gone.
    while let Ok((record, step, reply)) = jobs.recv() {
        records.push(record);
        steps.push(step);
        replies.push(reply);
        while records.len() < MAX_GROUP {
            let Ok((record, step, reply)) = jobs.try_recv() else {
                break;
            };
            records.push(record);
            steps.push(step);
            replies.push(reply);
        }
        let results = ledger.append_each_with(&records, &steps);
        queued.fetch_sub(records.len(), Ordering::AcqRel);
        let handed_back = records.drain(..).zip(steps.drain(..));
        for ((reply, result), (record, step)) in replies.drain(..).zip(results).zip(handed_back) {
            // A caller that stopped waiting (its task was cancelled) still has its row.
            let _ = reply.send((result, record, step));
        }
    }
}

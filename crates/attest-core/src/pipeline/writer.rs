//! The ledger's writer thread: one thread of its own does every append an `Attest`
//! makes, instead of a `spawn_blocking` per action.
//!
//! A caller queues its record with a reply slot and awaits the reply. The thread takes
//! everything queued (up to [`MAX_GROUP`]) and writes it with [`Ledger::append_each`]:
//! one transaction and one sync for the lot, so concurrent actions are group-committed
//! exactly as before. A reply is sent only after the transaction holding its row
//! committed, so a receipt still means "durable at the configured level". The thread
//! ends when the last `Attest` sharing it is dropped.

use std::sync::mpsc;
use std::sync::Arc;

use attest_ledger::{Appended, Ledger, LedgerError, Record, MAX_GROUP};
use tokio::sync::oneshot;

use crate::AttestError;

type Reply = oneshot::Sender<Result<Appended, LedgerError>>;

/// The queue into the writer thread.
#[derive(Debug, Clone)]
pub(crate) struct LedgerWriter {
    queue: mpsc::Sender<(Record, Reply)>,
}

impl LedgerWriter {
    /// Starts the thread that appends to `ledger`.
    pub(crate) fn start(ledger: Arc<Ledger>) -> Result<LedgerWriter, AttestError> {
        let (queue, jobs) = mpsc::channel();
        std::thread::Builder::new()
            .name("attest-ledger-writer".to_owned())
            .spawn(move || write_until_closed(&ledger, &jobs))
            .map_err(AttestError::WriterThread)?;
        Ok(LedgerWriter { queue })
    }

    /// Appends `record`; returns once its row is durable at the configured level.
    pub(crate) async fn append(&self, record: Record) -> Result<Appended, AttestError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((record, reply))
            .map_err(|_| AttestError::WriterStopped)?;
        answer
            .await
            .map_err(|_| AttestError::WriterStopped)?
            .map_err(AttestError::Ledger)
    }
}

fn write_until_closed(ledger: &Ledger, jobs: &mpsc::Receiver<(Record, Reply)>) {
    let mut records = Vec::new();
    let mut replies = Vec::new();
    // `recv` fails only once every sender (every `Attest` clone) is gone.
    while let Ok((record, reply)) = jobs.recv() {
        records.push(record);
        replies.push(reply);
        while records.len() < MAX_GROUP {
            let Ok((record, reply)) = jobs.try_recv() else {
                break;
            };
            records.push(record);
            replies.push(reply);
        }
        for (reply, result) in replies.drain(..).zip(ledger.append_each(&records)) {
            // A caller that stopped waiting (its task was cancelled) still has its row.
            let _ = reply.send(result);
        }
        records.clear();
    }
}

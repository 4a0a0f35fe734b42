//! The row-by-row part of verification, split over two threads: this thread reads
//! rows and their stored tree hashes out of the store; a worker parses and checks them
//! in order. Hashing the bodies goes to whichever thread has time: the worker hashes
//! every row the reader has not, and the reader hashes rows of the batch it holds
//! while the worker is behind (the channel is full) instead of waiting. So both cores
//! stay busy whichever side is slower on a machine, and memory stays flat (a few
//! batches in flight).

use std::collections::BTreeMap;
use std::sync::mpsc::{self, TrySendError};

use crate::canonical::{entry_hash, Hash, GENESIS};
use crate::merkle::{leaf_hash, CompactRange};
use crate::source::{Source, TreeSlot};
use crate::verify::{b64, Claim};
use crate::{ChainChecker, Ledger, LedgerError, ProblemKind, StoredRow};

/// Rows per batch handed to the worker.
const BATCH: usize = 512;
/// Batches in flight; bounds memory.
const IN_FLIGHT: usize = 4;
/// Walks this short are checked on the calling thread: a thread costs more than they do.
const INLINE_ROWS: u64 = 1024;
/// Rows the reader hashes between tries to hand a batch to a worker that was behind.
const HASH_STEP: usize = 32;

/// Fields of a row kept in a batch, in this order: hash, ts, system, verb, agent,
/// decision, level, run, action_id, body, then the leaf's stored tree hashes.
const FIELDS: usize = 11;
const AGENT: usize = 4;
const LEVEL: usize = 6;
const RUN: usize = 7;
const ACTION_ID: usize = 8;
const BODY: usize = 9;
const TREE: usize = 10;

/// Rows copied out of the store into one buffer, so a walk of a million rows makes a
/// handful of allocations rather than one per row: the checker hands each emptied
/// batch back to the reader, which fills it again.
#[derive(Default)]
struct Batch {
    data: Vec<u8>,
    rows: Vec<CopiedRow>,
    /// Rows before this one are hashed (rows are hashed in order, by either thread).
    hashed: usize,
}

/// Where one row's fields are in its batch's `data`.
struct CopiedRow {
    seq: u64,
    /// Start and end of each field in `data`.
    spans: [(usize, usize); FIELDS],
    /// Which fields were NULL (bit `i` for field `i`); for the tree hashes: a stored
    /// index was missing or out of order.
    nulls: u16,
    /// The table ends before this leaf: its hashes are the unwritten tail, which
    /// appends write in bulk; nothing stored to compare.
    unwritten: bool,
    /// SHA-256 of the body and its leaf hash, once either thread has computed them.
    hashed: Option<(Hash, Hash)>,
}

impl Batch {
    fn with_capacity(rows: usize) -> Batch {
        Batch {
            data: Vec::with_capacity(rows * 1024),
            rows: Vec::with_capacity(rows),
            hashed: 0,
        }
    }

    fn clear(&mut self) {
        self.data.clear();
        self.rows.clear();
        self.hashed = 0;
    }

    /// Hashes the bodies of up to `most` rows not hashed yet; whether any were left.
    fn hash_some(&mut self, most: usize) -> bool {
        let end = self.rows.len().min(self.hashed.saturating_add(most));
        for i in self.hashed..end {
            let (start, stop) = self.rows[i].spans[BODY];
            let body_hash = entry_hash(self.data.get(start..stop).unwrap_or_default());
            self.rows[i].hashed = Some((body_hash, leaf_hash(&body_hash)));
        }
        self.hashed = end;
        end < self.rows.len()
    }

    /// Copies `row` and its stored tree hashes (hashed later, by either thread).
    fn push(&mut self, row: &StoredRow<'_>, slot: TreeSlot<'_>) {
        let (tree, unwritten) = match slot {
            TreeSlot::Stored(hashes) => (Some(hashes), false),
            TreeSlot::Bad => (None, false),
            TreeSlot::Unwritten => (None, true),
        };
        let fields: [Option<&[u8]>; FIELDS] = [
            Some(row.hash),
            Some(row.ts.as_bytes()),
            Some(row.system.as_bytes()),
            Some(row.verb.as_bytes()),
            row.agent.map(str::as_bytes),
            Some(row.decision.as_bytes()),
            row.level.map(str::as_bytes),
            row.run.map(str::as_bytes),
            row.action_id.map(str::as_bytes),
            Some(row.body),
            tree,
        ];
        let mut spans = [(0, 0); FIELDS];
        let mut nulls = 0;
        for (i, field) in fields.iter().enumerate() {
            match field {
                Some(bytes) => {
                    spans[i] = (self.data.len(), self.data.len() + bytes.len());
                    self.data.extend_from_slice(bytes);
                }
                None => nulls |= 1 << i,
            }
        }
        self.rows.push(CopiedRow {
            seq: row.seq,
            spans,
            nulls,
            unwritten,
            hashed: None,
        });
    }

    fn bytes(&self, row: &CopiedRow, i: usize) -> Option<&[u8]> {
        let (start, end) = row.spans[i];
        (row.nulls & (1 << i) == 0).then(|| self.data.get(start..end).unwrap_or_default())
    }

    fn text(&self, row: &CopiedRow, i: usize) -> Option<&str> {
        // Copied from &str, so always UTF-8; an empty string otherwise.
        self.bytes(row, i)
            .map(|bytes| std::str::from_utf8(bytes).unwrap_or_default())
    }

    fn stored(&self, row: &CopiedRow) -> StoredRow<'_> {
        StoredRow {
            seq: row.seq,
            hash: self.bytes(row, 0).unwrap_or_default(),
            ts: self.text(row, 1).unwrap_or_default(),
            system: self.text(row, 2).unwrap_or_default(),
            verb: self.text(row, 3).unwrap_or_default(),
            agent: self.text(row, AGENT),
            decision: self.text(row, 5).unwrap_or_default(),
            level: self.text(row, LEVEL),
            run: self.text(row, RUN),
            action_id: self.text(row, ACTION_ID),
            body: self.bytes(row, BODY).unwrap_or_default(),
        }
    }
}

/// What the walk found, handed back to the report.
pub(crate) struct Walked {
    pub(crate) checker: ChainChecker,
    pub(crate) range: CompactRange,
    pub(crate) tree_ok: bool,
}

impl Ledger {
    /// Walks the `expected` rows after `start`: the chain, the stored tree hashes, and
    /// each claimed root the walk passes. A short walk (`verify --since-checkpoint`)
    /// is checked on this thread; a long one on a worker while this thread reads.
    #[allow(clippy::too_many_arguments)] // one private call site; a struct would only rename them
    pub(crate) fn walk(
        &self,
        source: &dyn Source,
        start: u64,
        expected: u64,
        checker: ChainChecker,
        range: CompactRange,
        claims: &BTreeMap<u64, Claim>,
        mut progress: impl FnMut(u64),
    ) -> Result<Walked, LedgerError> {
        if expected <= INLINE_ROWS {
            let mut all = Batch::default();
            // One batch, sized for the few rows there are rather than grown to them.
            let sized = Batch::with_capacity(usize::try_from(expected).unwrap_or(0));
            let mut sized = Some(sized);
            let grow = || sized.take().or_else(|| Some(Batch::default()));
            self.read_rows(source, start, &mut progress, usize::MAX, grow, |batch| {
                all = batch;
                true
            })?;
            return Ok(check_rows([all], checker, range, claims, |_| {}));
        }
        std::thread::scope(|scope| {
            let (send, receive) = mpsc::sync_channel::<Batch>(IN_FLIGHT);
            // Emptied batches go back to the reader; IN_FLIGHT + 2 of them ever exist.
            let (recycle, recycled) = mpsc::channel::<Batch>();
            let worker = scope.spawn(move || {
                check_rows(receive, checker, range, claims, |batch| {
                    let _ = recycle.send(batch);
                })
            });
            let mut worker_gone = false;
            let result = self.read_rows(
                source,
                start,
                &mut progress,
                BATCH,
                || recycled.try_recv().ok(),
                |mut batch| {
                    // While the worker is behind, hash rows for it rather than wait.
                    loop {
                        match send.try_send(batch) {
                            Ok(()) => break,
                            Err(TrySendError::Full(back)) => batch = back,
                            Err(TrySendError::Disconnected(_)) => {
                                worker_gone = true;
                                break;
                            }
                        }
                        if !batch.hash_some(HASH_STEP) {
                            worker_gone = send.send(batch).is_err();
                            break;
                        }
                    }
                    !worker_gone
                },
            );
            drop(send);
            let walked = worker
                .join()
                .map_err(|_| LedgerError::Internal("the verification worker panicked"))?;
            result?;
            if worker_gone {
                return Err(LedgerError::Internal(
                    "the verification worker stopped early",
                ));
            }
            Ok(walked)
        })
    }

    /// Reads the rows after `start` with the stored tree hashes each leaf completed,
    /// in batches of `rows` handed to `sink` (filling a batch `reuse` gives back when
    /// it has one); stops when `sink` returns `false`.
    fn read_rows(
        &self,
        source: &dyn Source,
        start: u64,
        progress: &mut impl FnMut(u64),
        rows: usize,
        mut reuse: impl FnMut() -> Option<Batch>,
        mut sink: impl FnMut(Batch) -> bool,
    ) -> Result<(), LedgerError> {
        let mut fresh = || {
            let mut batch = reuse().unwrap_or_else(|| Batch::with_capacity(BATCH));
            batch.clear();
            batch
        };
        let mut batch = fresh();
        let mut read = 0u64;
        let mut open = true;
        source.rows_with_tree(start, &mut |row, slot| {
            batch.push(row, slot);
            if batch.rows.len() == rows {
                read += rows as u64;
                progress(read);
                open = sink(std::mem::replace(&mut batch, fresh()));
            }
            Ok(open)
        })?;
        if open {
            read += batch.rows.len() as u64;
            sink(batch);
        }
        progress(read);
        Ok(())
    }
}

/// Checks batches in order (on the worker, or inline for a short walk), handing each
/// one to `done` once checked.
fn check_rows(
    batches: impl IntoIterator<Item = Batch>,
    mut checker: ChainChecker,
    mut range: CompactRange,
    claims: &BTreeMap<u64, Claim>,
    mut done: impl FnMut(Batch),
) -> Walked {
    let mut tree_ok = true;
    for mut batch in batches {
        batch.hash_some(usize::MAX);
        for row in &batch.rows {
            // Every row is hashed now; `GENESIS` is never reached.
            let (body_hash, leaf) = row.hashed.unwrap_or((GENESIS, GENESIS));
            checker.check_hashed(&batch.stored(row), body_hash);
            let mut expected = batch.bytes(row, TREE).map(|hashes| hashes.chunks_exact(32));
            let mut stored_ok = expected.is_some() || row.unwritten;
            range.push_with(leaf, |hash: &Hash| {
                let matches = row.unwritten
                    || expected
                        .as_mut()
                        .and_then(|hashes| hashes.next())
                        .is_some_and(|stored| stored == hash);
                stored_ok &= matches;
            });
            if !stored_ok && tree_ok {
                tree_ok = false;
                checker.report_problem(
                    row.seq,
                    ProblemKind::TreeMismatch,
                    format!(
                        "the stored tree hashes for seq {} disagree with the entries; \
                         proofs through them would not check",
                        row.seq
                    ),
                );
            }
            if let Some(claim) = claims.get(&range.size()) {
                let root = range.root();
                if root != claim.root {
                    checker.report_problem(
                        range.size(),
                        ProblemKind::CheckpointMismatch,
                        format!(
                            "the first {} entries have root {} but {} says {}",
                            range.size(),
                            b64(&root),
                            claim.label,
                            b64(&claim.root)
                        ),
                    );
                }
            }
        }
        done(batch);
    }
    Walked {
        checker,
        range,
        tree_ok,
    }
}

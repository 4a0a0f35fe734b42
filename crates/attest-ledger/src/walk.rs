//! The row-by-row part of verification, split over two threads: this thread reads
//! rows and their stored tree hashes out of the store; a worker hashes, parses and
//! checks them in order. Reading and checking cost about the same, so on two cores
//! the walk takes about half the time, and memory stays flat (a few batches in flight).

use std::collections::BTreeMap;
use std::sync::mpsc;

use crate::canonical::{entry_hash, Hash};
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

/// One row copied out of SQLite: its fields live in `data`, located by `spans`.
struct OwnedRow {
    seq: u64,
    data: Vec<u8>,
    /// hash, ts, system, verb, agent, decision, level, body.
    spans: [(usize, usize); 8],
    /// Which of agent (bit 0) and level (bit 1) were NULL.
    nulls: u8,
    /// The leaf's stored tree hashes, in `data` after the fields; `None` if a stored
    /// index was missing or out of order.
    tree: Option<(usize, usize)>,
    /// The table ends before this leaf: its hashes are the unwritten tail, which
    /// appends write in bulk; nothing stored to compare.
    unwritten: bool,
    /// SHA-256 of the body and its leaf hash, computed by the reading thread.
    body_hash: Hash,
    leaf: Hash,
}

impl OwnedRow {
    fn copy(row: &StoredRow<'_>) -> OwnedRow {
        let body_hash = entry_hash(row.body);
        let mut data = Vec::with_capacity(row.body.len() + 160);
        let mut spans = [(0, 0); 8];
        let mut nulls = 0;
        let fields: [Option<&[u8]>; 8] = [
            Some(row.hash),
            Some(row.ts.as_bytes()),
            Some(row.system.as_bytes()),
            Some(row.verb.as_bytes()),
            row.agent.map(str::as_bytes),
            Some(row.decision.as_bytes()),
            row.level.map(str::as_bytes),
            Some(row.body),
        ];
        for (i, field) in fields.iter().enumerate() {
            match field {
                Some(bytes) => {
                    spans[i] = (data.len(), data.len() + bytes.len());
                    data.extend_from_slice(bytes);
                }
                None => nulls |= if i == 4 { 1 } else { 2 },
            }
        }
        OwnedRow {
            seq: row.seq,
            data,
            spans,
            nulls,
            tree: None,
            unwritten: false,
            body_hash,
            leaf: leaf_hash(&body_hash),
        }
    }

    fn bytes(&self, i: usize) -> &[u8] {
        let (start, end) = self.spans[i];
        self.data.get(start..end).unwrap_or_default()
    }

    fn text(&self, i: usize) -> &str {
        // Copied from &str, so always UTF-8; an empty string otherwise.
        std::str::from_utf8(self.bytes(i)).unwrap_or_default()
    }

    fn stored(&self) -> StoredRow<'_> {
        StoredRow {
            seq: self.seq,
            hash: self.bytes(0),
            ts: self.text(1),
            system: self.text(2),
            verb: self.text(3),
            agent: (self.nulls & 1 == 0).then(|| self.text(4)),
            decision: self.text(5),
            level: (self.nulls & 2 == 0).then(|| self.text(6)),
            body: self.bytes(7),
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
            let mut rows = Vec::new();
            self.read_rows(source, start, &mut progress, |batch| {
                rows.extend(batch);
                true
            })?;
            return Ok(check_rows([rows], checker, range, claims));
        }
        std::thread::scope(|scope| {
            let (send, receive) = mpsc::sync_channel::<Vec<OwnedRow>>(IN_FLIGHT);
            let worker = scope.spawn(move || check_rows(receive, checker, range, claims));
            let mut worker_gone = false;
            let result = self.read_rows(source, start, &mut progress, |batch| {
                worker_gone = send.send(batch).is_err();
                !worker_gone
            });
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
    /// in batches handed to `sink`; stops when `sink` returns `false`.
    fn read_rows(
        &self,
        source: &dyn Source,
        start: u64,
        progress: &mut impl FnMut(u64),
        mut sink: impl FnMut(Vec<OwnedRow>) -> bool,
    ) -> Result<(), LedgerError> {
        let mut batch = Vec::with_capacity(BATCH);
        let mut read = 0u64;
        let mut open = true;
        source.rows_with_tree(start, &mut |row, slot| {
            let mut owned = OwnedRow::copy(row);
            let from = owned.data.len();
            match slot {
                TreeSlot::Stored(hashes) => {
                    owned.data.extend_from_slice(hashes);
                    owned.tree = Some((from, owned.data.len()));
                }
                TreeSlot::Bad => {}
                TreeSlot::Unwritten => owned.unwritten = true,
            }
            batch.push(owned);
            if batch.len() == BATCH {
                read += BATCH as u64;
                progress(read);
                open = sink(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
            }
            Ok(open)
        })?;
        if !batch.is_empty() && open {
            read += batch.len() as u64;
            sink(batch);
        }
        progress(read);
        Ok(())
    }
}

/// Checks batches in order (on the worker, or inline for a short walk).
fn check_rows(
    batches: impl IntoIterator<Item = Vec<OwnedRow>>,
    mut checker: ChainChecker,
    mut range: CompactRange,
    claims: &BTreeMap<u64, Claim>,
) -> Walked {
    let mut tree_ok = true;
    for batch in batches {
        for row in &batch {
            let stored = row.stored();
            checker.check_hashed(&stored, row.body_hash);
            let mut expected = row.tree.map(|(start, end)| {
                row.data
                    .get(start..end)
                    .unwrap_or_default()
                    .chunks_exact(32)
            });
            let mut stored_ok = expected.is_some() || row.unwritten;
            range.push_with(row.leaf, |hash: &Hash| {
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
    }
    Walked {
        checker,
        range,
        tree_ok,
    }
}

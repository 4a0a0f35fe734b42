//! Archives: what a prune removed, kept in a file that can still be checked and
//! proved from.
//!
//! An archive is JSON lines. The first line is a header:
//! `{"attest_archive":1,"first":F,"last":L,"prev":"<hex>","checkpoint":"<note>"}` —
//! the seqs it holds, the entry hash the first row links to (64 zeros for seq 1), and
//! the signed checkpoint the prune signed, which covers every row in it. Each further
//! line is one removed entry's body, exactly the bytes that were hashed, in seq order.
//!
//! Checking an archive against its ledger ([`crate::Ledger::verify_archive`]) walks
//! the chain through it, and compares every row's leaf hash with the ledger's stored
//! tree (which a prune keeps whole), whose root at the checkpoint's size is the signed
//! one: so every archived row is bound to a signature.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::canonical::{entry_hash, from_hex, to_hex, Hash};
use crate::{LedgerError, StoredRow};

/// The archive format's version.
const ARCHIVE_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    attest_archive: u32,
    first: u64,
    last: u64,
    prev: String,
    checkpoint: String,
}

/// Writes an archive while a prune reads the rows it removes.
pub(crate) struct ArchiveWriter<'a> {
    out: Option<&'a mut dyn Write>,
}

impl<'a> ArchiveWriter<'a> {
    /// A writer to `out`; with `None` every call does nothing (a prune without archive).
    pub(crate) fn new(out: Option<&'a mut dyn Write>) -> ArchiveWriter<'a> {
        ArchiveWriter { out }
    }

    /// Whether there is an archive to write.
    pub(crate) fn is_open(&self) -> bool {
        self.out.is_some()
    }

    pub(crate) fn header(
        &mut self,
        first: u64,
        last: u64,
        prev: &Hash,
        checkpoint: &str,
    ) -> Result<(), LedgerError> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        let header = Header {
            attest_archive: ARCHIVE_VERSION,
            first,
            last,
            prev: to_hex(prev),
            checkpoint: checkpoint.to_owned(),
        };
        serde_json::to_writer(&mut *out, &header).map_err(LedgerError::Canonical)?;
        out.write_all(b"\n").map_err(LedgerError::Output)
    }

    pub(crate) fn row(&mut self, row: &StoredRow<'_>) -> Result<(), LedgerError> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        out.write_all(row.body).map_err(LedgerError::Output)?;
        out.write_all(b"\n").map_err(LedgerError::Output)
    }

    pub(crate) fn finish(&mut self) -> Result<(), LedgerError> {
        match self.out.as_mut() {
            Some(out) => out.flush().map_err(LedgerError::Output),
            None => Ok(()),
        }
    }
}

/// A prune's archive, read back.
#[derive(Debug, Clone)]
pub struct Archive {
    /// The first seq it holds.
    pub first: u64,
    /// The last seq it holds.
    pub last: u64,
    /// The entry hash the first row links to.
    pub prev: Hash,
    /// The signed checkpoint note the prune signed; it covers every row here.
    pub checkpoint: String,
    /// The bodies, seq `first` first.
    pub bodies: Vec<Vec<u8>>,
}

impl Archive {
    /// Reads an archive; an error names the line that is not what it should be.
    pub fn read(input: impl BufRead) -> Result<Archive, LedgerError> {
        let bad = |line: usize, detail: String| LedgerError::BadArchive { line, detail };
        let mut lines = input.split(b'\n');
        let header = lines
            .next()
            .ok_or_else(|| bad(1, "the file is empty".to_owned()))?
            .map_err(LedgerError::Input)?;
        let header: Header = serde_json::from_slice(&header)
            .map_err(|err| bad(1, format!("not an archive header: {err}")))?;
        if header.attest_archive != ARCHIVE_VERSION {
            return Err(bad(
                1,
                format!("archive version {}, expected 1", header.attest_archive),
            ));
        }
        let prev =
            from_hex(&header.prev).ok_or_else(|| bad(1, "prev is not 64 hex digits".to_owned()))?;
        let mut bodies = Vec::new();
        for (n, line) in lines.enumerate() {
            let line = line.map_err(LedgerError::Input)?;
            if line.is_empty() {
                continue;
            }
            if bodies.len() as u64 > header.last.saturating_sub(header.first) {
                return Err(bad(n + 2, "more rows than the header says".to_owned()));
            }
            bodies.push(line);
        }
        Ok(Archive {
            first: header.first,
            last: header.last,
            prev,
            checkpoint: header.checkpoint,
            bodies,
        })
    }

    /// The body of `seq`, if the archive holds it.
    pub fn body(&self, seq: u64) -> Option<&[u8]> {
        let offset = seq.checked_sub(self.first)?;
        self.bodies
            .get(usize::try_from(offset).ok()?)
            .map(Vec::as_slice)
    }

    /// The entry hash of `seq`, if the archive holds it.
    pub fn entry_hash(&self, seq: u64) -> Option<Hash> {
        self.body(seq).map(entry_hash)
    }
}

impl crate::Ledger {
    /// Checks an archive against this ledger: the chain through its rows (from the
    /// hash its header names), each row's leaf against the ledger's stored tree, the
    /// checkpoint's signature under `trusted` (when given) and its root against that
    /// tree, and that its last row is where the ledger's pruned prefix ends.
    pub fn verify_archive(
        &self,
        archive: &Archive,
        trusted: &[crate::VerifierKey],
    ) -> Result<crate::VerifyReport, LedgerError> {
        use crate::{ChainChecker, ProblemKind};
        self.read(|src| {
            let mut checker =
                ChainChecker::resume_after(archive.first.saturating_sub(1), archive.prev);
            let mut hashes = Vec::with_capacity(archive.bodies.len());
            for (offset, body) in archive.bodies.iter().enumerate() {
                let seq = archive.first + offset as u64;
                let hash = entry_hash(body);
                let view: Option<crate::entry::EntryView<'_>> = serde_json::from_slice(body).ok();
                let level = view
                    .as_ref()
                    .and_then(|v| v.verification.as_ref().map(|l| l.level.as_ref()));
                let row = StoredRow {
                    seq,
                    hash: &hash,
                    ts: view.as_ref().map_or("", |v| v.ts.as_ref()),
                    system: view.as_ref().map_or("", |v| v.system.as_ref()),
                    verb: view.as_ref().map_or("", |v| v.verb.as_ref()),
                    agent: view.as_ref().and_then(|v| v.agent.as_deref()),
                    decision: view.as_ref().map_or("", |v| v.decision.as_ref()),
                    level,
                    run: view.as_ref().and_then(|v| v.run_id.as_deref()),
                    action_id: view.as_ref().and_then(|v| v.action_id.as_deref()),
                    body,
                };
                checker.check(&row);
                hashes.push((seq, hash));
            }
            let held = archive.bodies.len() as u64;
            if held != archive.last.saturating_sub(archive.first) + 1 {
                checker.report_problem(
                    archive.first + held,
                    ProblemKind::Truncated,
                    format!(
                        "the header says seqs {} to {} but the archive holds {held} rows",
                        archive.first, archive.last
                    ),
                );
            }
            // Every archived leaf against the ledger's stored tree.
            for chunk in hashes.chunks(1024) {
                let indexes: Vec<u64> = chunk
                    .iter()
                    .map(|(seq, _)| tlog_tiles::stored_hash_index(0, seq - 1))
                    .collect();
                match src.read_hashes(&indexes) {
                    Ok(stored) => {
                        for ((seq, hash), leaf) in chunk.iter().zip(stored) {
                            if leaf.0 != crate::leaf_hash(hash) {
                                checker.report_problem(
                                    *seq,
                                    ProblemKind::TreeMismatch,
                                    format!("archived seq {seq} is not the leaf the ledger's tree holds"),
                                );
                            }
                        }
                    }
                    Err(err) => checker.report_problem(
                        chunk.first().map_or(0, |(seq, _)| *seq),
                        ProblemKind::TreeMismatch,
                        format!("cannot read the ledger's tree for the archived rows: {err}"),
                    ),
                }
            }
            // The checkpoint: signed, covering the rows, and the ledger's tree's root.
            let opened = if trusted.is_empty() {
                crate::read_checkpoint_unverified(archive.checkpoint.as_bytes())
            } else {
                crate::open_checkpoint(archive.checkpoint.as_bytes(), trusted)
            };
            match opened {
                Ok(body) => {
                    if !trusted.is_empty() {
                        checker.signed_by(trusted, &body.origin);
                    } else {
                        checker.note(
                            "the archive's checkpoint signature was not checked: no trusted \
                             verifier key given (--vkey, --vkey-file or ATTEST_VKEY)"
                                .to_owned(),
                        );
                    }
                    if body.size < archive.last {
                        checker.report_problem(
                            archive.last,
                            ProblemKind::CheckpointMismatch,
                            format!(
                                "the archive's checkpoint covers {} entries, not its last row {}",
                                body.size, archive.last
                            ),
                        );
                    }
                    match crate::source::root(src, body.size) {
                        Ok(root) if root == body.root => {}
                        _ => checker.report_problem(
                            body.size,
                            ProblemKind::CheckpointMismatch,
                            format!(
                                "the ledger's tree at size {} is not the one the archive's checkpoint signed",
                                body.size
                            ),
                        ),
                    }
                }
                Err(err) => checker.report_problem(
                    archive.last,
                    ProblemKind::BadSignature,
                    format!("the archive's checkpoint: {err}"),
                ),
            }
            // Where the ledger's pruned prefix ends, the archive's last row must be.
            if let Some((through, boundary)) = src.pruned()? {
                if through == archive.last && hashes.last().map(|(_, h)| h) != Some(&boundary) {
                    checker.report_problem(
                        through,
                        ProblemKind::PrevMismatch,
                        format!(
                            "the ledger's pruned prefix ends at seq {through} with hash {} but the archive's row there hashes otherwise",
                            to_hex(&boundary)
                        ),
                    );
                }
            }
            Ok(checker.finish())
        })
    }
}

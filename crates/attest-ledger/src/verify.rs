//! Full verification: every row, in order, against the chain and its own columns.

use std::fmt;

use serde::Serialize;

use crate::canonical::{entry_hash, from_hex, to_hex, Hash, GENESIS};
use crate::entry::{EntryView, FORMAT_VERSION};
use crate::{Ledger, LedgerError, StoredRow};

/// Most problems kept in a report; the first is the one that matters.
const MAX_PROBLEMS: usize = 100;

/// What is wrong with one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// A seq is missing (a row was deleted) or out of order.
    SeqGap,
    /// `prev` is not the hash of the row before.
    PrevMismatch,
    /// The body's SHA-256 is not the stored hash: the body or the hash was edited.
    HashMismatch,
    /// The body is not a v1 entry (not JSON, wrong `v`, its `seq` is not the row's).
    BodyAltered,
    /// An indexed column disagrees with the body.
    ColumnMismatch,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProblemKind::SeqGap => "seq gap",
            ProblemKind::PrevMismatch => "prev mismatch",
            ProblemKind::HashMismatch => "hash mismatch",
            ProblemKind::BodyAltered => "body altered",
            ProblemKind::ColumnMismatch => "column disagrees with body",
        })
    }
}

/// One finding, naming the seq where it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The seq of the bad row (for a gap: the first missing seq).
    pub seq: u64,
    /// What kind of problem.
    pub kind: ProblemKind,
    /// What exactly, for a person.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {}: {}: {}", self.seq, self.kind, self.detail)
    }
}

/// The result of a verification run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Rows read.
    pub checked: u64,
    /// Findings, first bad seq first, at most 100.
    pub problems: Vec<Problem>,
    /// The last row's seq and hash as stored, when there was one.
    #[serde(skip)]
    pub tip: Option<(u64, Hash)>,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first bad seq, if any.
    pub fn broken_at(&self) -> Option<u64> {
        self.problems.first().map(|p| p.seq)
    }
}

/// Walks a chain row by row; reusable by any store that yields [`StoredRow`]s in order.
#[derive(Debug)]
pub struct ChainChecker {
    expected_seq: u64,
    prev: Hash,
    report: VerifyReport,
}

impl Default for ChainChecker {
    fn default() -> Self {
        ChainChecker {
            expected_seq: 1,
            prev: GENESIS,
            report: VerifyReport {
                checked: 0,
                problems: Vec::new(),
                tip: None,
            },
        }
    }
}

impl ChainChecker {
    /// Checks the next row. After a problem it carries on from the stored hash, so
    /// later findings are about later rows, not echoes of the first.
    pub fn check(&mut self, row: &StoredRow<'_>) {
        self.report.checked += 1;
        if row.seq != self.expected_seq {
            let detail = if row.seq > self.expected_seq {
                format!(
                    "seq {} is missing (next row is seq {})",
                    self.expected_seq, row.seq
                )
            } else {
                format!("seq {} follows seq {}", row.seq, self.expected_seq - 1)
            };
            self.problem(self.expected_seq, ProblemKind::SeqGap, detail);
        }
        let computed = entry_hash(row.body);
        match <[u8; 32]>::try_from(row.hash) {
            Ok(stored) if stored == computed => {}
            Ok(stored) => self.problem(
                row.seq,
                ProblemKind::HashMismatch,
                format!(
                    "stored hash {} but the body hashes to {}",
                    to_hex(&stored),
                    to_hex(&computed)
                ),
            ),
            Err(_) => self.problem(
                row.seq,
                ProblemKind::HashMismatch,
                format!("stored hash is {} bytes, not 32", row.hash.len()),
            ),
        }
        self.check_body(row);
        self.expected_seq = row.seq.saturating_add(1);
        self.prev = computed;
        self.report.tip = Some((row.seq, computed));
    }

    fn check_body(&mut self, row: &StoredRow<'_>) {
        let view: EntryView<'_> = match serde_json::from_slice(row.body) {
            Ok(view) => view,
            Err(err) => {
                return self.problem(
                    row.seq,
                    ProblemKind::BodyAltered,
                    format!("body is not a v1 entry: {err}"),
                )
            }
        };
        if view.v != FORMAT_VERSION {
            self.problem(
                row.seq,
                ProblemKind::BodyAltered,
                format!("body has v {}, expected {FORMAT_VERSION}", view.v),
            );
        }
        if view.seq != row.seq {
            self.problem(
                row.seq,
                ProblemKind::BodyAltered,
                format!(
                    "body says seq {} but is stored at seq {}",
                    view.seq, row.seq
                ),
            );
        }
        if from_hex(&view.prev) != Some(self.prev) {
            self.problem(
                row.seq,
                ProblemKind::PrevMismatch,
                format!(
                    "prev is {} but the previous entry hashes to {}",
                    view.prev,
                    to_hex(&self.prev)
                ),
            );
        }
        let level = view.verification.as_ref().map(|v| v.level.as_ref());
        let columns: [(&str, Option<&str>, Option<&str>); 6] = [
            ("ts", Some(row.ts), Some(view.ts.as_ref())),
            ("system", Some(row.system), Some(view.system.as_ref())),
            ("verb", Some(row.verb), Some(view.verb.as_ref())),
            ("agent", row.agent, view.agent.as_deref()),
            ("decision", Some(row.decision), Some(view.decision.as_ref())),
            ("level", row.level, level),
        ];
        for (column, stored, body) in columns {
            if stored != body {
                self.problem(
                    row.seq,
                    ProblemKind::ColumnMismatch,
                    format!("column {column} is {stored:?} but the body says {body:?}"),
                );
            }
        }
    }

    fn problem(&mut self, seq: u64, kind: ProblemKind, detail: String) {
        if self.report.problems.len() < MAX_PROBLEMS {
            self.report.problems.push(Problem { seq, kind, detail });
        }
    }

    /// The report so far.
    pub fn finish(self) -> VerifyReport {
        self.report
    }
}

impl Ledger {
    /// Checks every row: seq order without gaps, `prev` links from the zero hash, each
    /// stored hash against its body, and the indexed columns against the body.
    pub fn verify(&self) -> Result<VerifyReport, LedgerError> {
        let mut checker = ChainChecker::default();
        self.for_each_row(1, |row| {
            checker.check(row);
            Ok(true)
        })?;
        Ok(checker.finish())
    }
}

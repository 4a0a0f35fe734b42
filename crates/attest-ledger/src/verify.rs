//! Full verification: every row, in order, against the chain and its own columns.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Serialize;
use tlog_tiles::{check_record, check_tree, prove_record, prove_tree};

use crate::canonical::{entry_hash, is_hex_of, to_hex, Hash, GENESIS};
use crate::entry::{EntryView, FORMAT_VERSION};
use crate::merkle::{leaf_hash, CompactRange, TreeHash};
use crate::source::{Hashes, Source};
use crate::walk::Walked;
use crate::{
    open_checkpoint_signed, read_checkpoint_unverified, CheckpointBody, CheckpointError, Ledger,
    LedgerError, OpenIntent, OpenIntents, StoredRow, VerifierKey, INTENT,
};

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
    /// Entries a checkpoint covers are gone from the end of the ledger.
    Truncated,
    /// The entries' Merkle root at a checkpoint's size is not the root it signed, or a
    /// stored checkpoint disagrees with its own note or with an anchored copy.
    CheckpointMismatch,
    /// A checkpoint's signature does not verify under any trusted key.
    BadSignature,
    /// A checkpoint kept elsewhere (an anchor) is missing from the ledger.
    CheckpointMissing,
    /// The stored tree hashes disagree with the entries (proofs would not check), or
    /// reach beyond the newest entry (entries were removed from the end).
    TreeMismatch,
    /// A trusted key was given, but no checkpoint signed by it covers the ledger: its
    /// entries are bound to no signature, so a truncated or rewritten ledger would pass.
    Unsigned,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProblemKind::SeqGap => "seq gap",
            ProblemKind::PrevMismatch => "prev mismatch",
            ProblemKind::HashMismatch => "hash mismatch",
            ProblemKind::BodyAltered => "body altered",
            ProblemKind::ColumnMismatch => "column disagrees with body",
            ProblemKind::Truncated => "truncated",
            ProblemKind::CheckpointMismatch => "checkpoint mismatch",
            ProblemKind::BadSignature => "bad checkpoint signature",
            ProblemKind::CheckpointMissing => "checkpoint missing",
            ProblemKind::TreeMismatch => "tree hashes disagree",
            ProblemKind::Unsigned => "no signed checkpoint",
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
    /// The last row's seq and the hash its body has, when there was one.
    #[serde(skip)]
    pub tip: Option<(u64, Hash)>,
    /// The newest checkpoint the run relied on or compared against.
    pub checkpoint: Option<CheckpointSummary>,
    /// Whether at least one checkpoint signature was checked against a trusted key.
    pub signatures_checked: bool,
    /// The trusted keys (their text encoding) that verified at least one checkpoint.
    pub verified_by: Vec<String>,
    /// Things a reader should know that are not problems (e.g. "no trusted key").
    pub notes: Vec<String>,
    /// The intents among the rows checked that no later checked row of their action
    /// follows, oldest first: writes that may have run with nothing saying how they ended.
    #[serde(skip)]
    pub open_intents: Vec<OpenIntent>,
}

/// A checkpoint's size and root, for reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointSummary {
    /// Entries covered.
    pub size: u64,
    /// Base64 root hash, as in the note.
    pub root: String,
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
    intents: OpenIntents,
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
                checkpoint: None,
                signatures_checked: false,
                verified_by: Vec::new(),
                notes: Vec::new(),
                open_intents: Vec::new(),
            },
            intents: OpenIntents::default(),
        }
    }
}

impl ChainChecker {
    /// A checker for a chain that resumes after `seq`, whose entry hashed to `prev`.
    pub fn resume_after(seq: u64, prev: Hash) -> Self {
        ChainChecker {
            expected_seq: seq.saturating_add(1),
            prev,
            ..ChainChecker::default()
        }
    }

    /// The hash of the last row checked (or the starting `prev`).
    pub fn prev(&self) -> Hash {
        self.prev
    }

    /// Records that a signature by `origin` was checked against `trusted`.
    pub(crate) fn signed_by(&mut self, trusted: &[VerifierKey], origin: &str) {
        self.report.signatures_checked = true;
        if let Some(key) = trusted.iter().find(|k| k.name() == origin) {
            let text = key.to_string();
            if !self.report.verified_by.contains(&text) {
                self.report.verified_by.push(text);
            }
        }
    }

    /// Adds a note for the reader (not a problem).
    pub(crate) fn note(&mut self, note: String) {
        self.report.notes.push(note);
    }

    /// Records a finding that is not about one row's contents.
    pub fn report_problem(&mut self, seq: u64, kind: ProblemKind, detail: String) {
        self.problem(seq, kind, detail);
    }

    /// Checks the next row. After a problem it carries on from the stored hash, so
    /// later findings are about later rows, not echoes of the first.
    pub fn check(&mut self, row: &StoredRow<'_>) {
        self.check_hashed(row, entry_hash(row.body));
    }

    /// [`ChainChecker::check`] with the body's SHA-256 already computed (by the thread
    /// that read the row, so hashing and checking run on both cores).
    pub(crate) fn check_hashed(&mut self, row: &StoredRow<'_>, computed: Hash) {
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
        // The common case, a canonical body that agrees, without building anything
        // (its action_id, system and verb are the row's columns).
        if let Some(agreed) = crate::columns::agrees(row, &self.prev) {
            if let Some(action_id) = row.action_id {
                self.intents
                    .see(row.seq, action_id, row.system, row.verb, agreed.intent);
            }
            return;
        }
        self.check_body_fully(row);
    }

    /// Parses the body and reports each way it disagrees with the row and the chain.
    pub(crate) fn check_body_fully(&mut self, row: &StoredRow<'_>) {
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
        if let Some(action_id) = view.action_id.as_deref() {
            let status = view.execution.as_ref().and_then(|e| e.get("status"));
            let intent = status.and_then(serde_json::Value::as_str) == Some(INTENT);
            self.intents
                .see(row.seq, action_id, &view.system, &view.verb, intent);
        }
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
        if !is_hex_of(&view.prev, &self.prev) {
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
        let columns: [(&str, Option<&str>, Option<&str>); 8] = [
            ("ts", Some(row.ts), Some(view.ts.as_ref())),
            ("system", Some(row.system), Some(view.system.as_ref())),
            ("verb", Some(row.verb), Some(view.verb.as_ref())),
            ("agent", row.agent, view.agent.as_deref()),
            ("decision", Some(row.decision), Some(view.decision.as_ref())),
            ("level", row.level, level),
            ("run", row.run, view.run_id.as_deref()),
            ("action_id", row.action_id, view.action_id.as_deref()),
        ];
        for (column, stored, body) in columns {
            if stored != body {
                self.problem(
                    row.seq,
                    ProblemKind::ColumnMismatch,
                    format!(
                        "column {column} is {} but the body says {}",
                        shown(stored),
                        shown(body)
                    ),
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
        VerifyReport {
            open_intents: self.intents.into_sorted(),
            ..self.report
        }
    }
}

/// What to check beyond the chain itself.
#[derive(Default)]
pub struct VerifyOptions<'a> {
    /// Keys whose checkpoint signatures are trusted. Without any, stored checkpoints
    /// are compared with the entries but their signatures are not checked, and
    /// `since_checkpoint` is refused.
    pub trusted: &'a [VerifierKey],
    /// Signed checkpoint notes kept elsewhere, with a label (file name) for messages.
    pub anchors: &'a [(String, Vec<u8>)],
    /// Check only the newest checkpoint's signature, the rows after it, and that they
    /// extend its tree: O(rows since + log n).
    pub since_checkpoint: bool,
    /// Called now and then with (rows checked, rows expected).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// With trusted keys: a ledger that no checkpoint signed by one of them covers is a
    /// problem ([`ProblemKind::Unsigned`]), not a pass. `attest verify --vkey` sets it;
    /// the check before signing the first checkpoint does not.
    pub require_signature: bool,
}

/// A root some checkpoint claims for the first `size` entries.
pub(crate) struct Claim {
    pub(crate) root: Hash,
    pub(crate) label: String,
}

impl Ledger {
    /// Checks every row: seq order without gaps, `prev` links from the zero hash (or
    /// from the pruned prefix's last hash), each stored hash against its body, and the
    /// indexed columns against the body; then the tree: every stored checkpoint's root
    /// against the entries, and its signature when trusted keys are given.
    pub fn verify(&self) -> Result<VerifyReport, LedgerError> {
        self.verify_with(VerifyOptions::default())
    }

    /// [`Ledger::verify`] with trusted keys, anchors, or only since the newest checkpoint.
    pub fn verify_with(&self, options: VerifyOptions<'_>) -> Result<VerifyReport, LedgerError> {
        // One snapshot: consistent even while others append.
        self.read(|source| self.verify_in(source, options))
    }

    fn verify_in(
        &self,
        src: &dyn Source,
        mut options: VerifyOptions<'_>,
    ) -> Result<VerifyReport, LedgerError> {
        let tip = src.tip()?.map(|(seq, _)| seq).unwrap_or(0);
        let pruned = src.pruned()?;
        let stored = if options.since_checkpoint {
            // Only the newest checkpoint matters here: one row read and one signature
            // checked, not one per day.
            src.latest_checkpoint()?.into_iter().collect()
        } else {
            src.checkpoints()?
        };
        let mut checker = ChainChecker::default();
        let trusted = options.trusted;
        // The keys whose signatures verified each note, and the sizes each one signed:
        // after a key rotation, several keys of one log sign its checkpoints.
        let mut signed_sizes: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut verified_by = |checker: &mut ChainChecker, size: u64, signers: &[&VerifierKey]| {
            checker.report.signatures_checked = true;
            for key in signers {
                let text = key.to_string();
                let sizes = signed_sizes.entry(text.clone()).or_default();
                if !sizes.contains(&size) {
                    sizes.push(size);
                }
                if !checker.report.verified_by.contains(&text) {
                    checker.report.verified_by.push(text);
                }
            }
        };

        // Every root some checkpoint claims, by size: stored notes, then anchors.
        let mut claims: BTreeMap<u64, Claim> = BTreeMap::new();
        let mut signed: BTreeMap<u64, Hash> = BTreeMap::new();
        for cp in &stored {
            let label = format!("stored checkpoint at size {}", cp.size);
            let body = open_note(cp.note.as_bytes(), options.trusted);
            match body {
                Ok((body, _)) if body.size != cp.size || body.root != cp.root => checker
                    .report_problem(
                        cp.size,
                        ProblemKind::CheckpointMismatch,
                        format!(
                            "{label}: its columns disagree with its note (size {}, root {})",
                            body.size,
                            b64(&body.root)
                        ),
                    ),
                Ok((body, signers)) => {
                    if !options.trusted.is_empty() {
                        verified_by(&mut checker, body.size, &signers);
                        signed.insert(body.size, body.root);
                    }
                    claims.insert(
                        body.size,
                        Claim {
                            root: body.root,
                            label,
                        },
                    );
                }
                Err(err @ CheckpointError::Signature(_)) => {
                    checker.report.signatures_checked = true;
                    checker.report_problem(
                        cp.size,
                        ProblemKind::BadSignature,
                        format!(
                            "{label}: does not verify under the trusted key(s) {} (wrong --vkey?): {err}",
                            key_names(trusted)
                        ),
                    )
                }
                Err(err) => checker.report_problem(
                    cp.size,
                    ProblemKind::CheckpointMismatch,
                    format!("{label}: {err}"),
                ),
            }
        }
        if options.trusted.is_empty() && !stored.is_empty() {
            checker.report.notes.push(
                "checkpoint signatures were not checked: no trusted verifier key given \
                 (--vkey, --vkey-file or ATTEST_VKEY); roots were compared with the entries only"
                    .to_owned(),
            );
        }
        for (label, note) in options.anchors {
            // Without a key an anchor's roots are still compared; its signature is not checked.
            let opened = open_note(note, options.trusted);
            match opened {
                Ok((body, signers)) => {
                    if !options.trusted.is_empty() {
                        verified_by(&mut checker, body.size, &signers);
                        signed.insert(body.size, body.root);
                    }
                    match stored.iter().find(|cp| cp.size == body.size) {
                        None => checker.report_problem(
                            body.size,
                            ProblemKind::CheckpointMissing,
                            format!("the checkpoint at size {} kept in {label} is not in the ledger (deleted?)", body.size),
                        ),
                        Some(cp) if cp.root != body.root => checker.report_problem(
                            body.size,
                            ProblemKind::CheckpointMismatch,
                            format!("the checkpoint at size {} in the ledger is not the one kept in {label} (swapped?)", body.size),
                        ),
                        Some(_) => {}
                    }
                    claims.insert(
                        body.size,
                        Claim {
                            root: body.root,
                            label: format!("checkpoint kept in {label}"),
                        },
                    );
                }
                Err(err) => {
                    let kind = match err {
                        CheckpointError::Signature(_) => {
                            checker.report.signatures_checked = true;
                            ProblemKind::BadSignature
                        }
                        _ => ProblemKind::CheckpointMismatch,
                    };
                    checker.report_problem(0, kind, format!("anchor {label}: {err}"))
                }
            }
        }
        if signed_sizes.len() > 1 {
            // A rotation: say which key vouches for which part of the history.
            for (key, sizes) in &signed_sizes {
                let sizes: Vec<String> = sizes.iter().map(u64::to_string).collect();
                checker.report.notes.push(format!(
                    "key {key} signed the checkpoint(s) at size {}",
                    sizes.join(", ")
                ));
            }
        }
        if options.trusted.is_empty() && !options.anchors.is_empty() && stored.is_empty() {
            checker.report.notes.push(
                "the anchors' signatures were not checked: no trusted verifier key given \
                 (--vkey, --vkey-file or ATTEST_VKEY); their roots were compared with the entries only"
                    .to_owned(),
            );
        }
        if options.require_signature && !options.trusted.is_empty() && signed.is_empty() {
            checker.report_problem(
                1,
                ProblemKind::Unsigned,
                format!(
                    "no checkpoint signed by the trusted key(s) {} covers this ledger, so nothing \
                     binds its entries (rows removed from the end would go unnoticed); sign one \
                     with `attest checkpoint`",
                    key_names(trusted)
                ),
            );
        }
        if let Some((&newest, _)) = signed.last_key_value().filter(|(&size, _)| size < tip) {
            checker.report.notes.push(format!(
                "entries after seq {newest} are chained but no signed checkpoint covers them yet \
                 (`attest checkpoint` signs them)"
            ));
        }
        if let Some((&size, claim)) = claims.last_key_value() {
            checker.report.checkpoint = Some(CheckpointSummary {
                size,
                root: b64(&claim.root),
            });
            if tip < size {
                checker.report_problem(
                    tip + 1,
                    ProblemKind::Truncated,
                    format!(
                        "{} covers {size} entries but the ledger ends at seq {tip}",
                        claim.label
                    ),
                );
            }
        }

        // Where the walk starts, and the hash the first walked row must link to.
        let start = if options.since_checkpoint {
            if options.trusted.is_empty() {
                return Err(LedgerError::NoTrustedKey);
            }
            let Some(newest) = stored.last() else {
                return Err(LedgerError::NoCheckpoint {
                    path: self.path().to_path_buf(),
                });
            };
            let Some(&root) = signed.get(&newest.size) else {
                // Its signature did not verify: nothing to start from; the problem is reported.
                return Ok(checker.finish());
            };
            checker.report.checkpoint = Some(CheckpointSummary {
                size: newest.size,
                root: b64(&root),
            });
            newest.size
        } else {
            pruned.map(|(seq, _)| seq).unwrap_or(0)
        };
        let prev = if start == 0 {
            GENESIS
        } else if let Some((_, hash)) = pruned.filter(|(seq, _)| *seq == start) {
            hash
        } else {
            let mut hash = None;
            src.rows(start, &mut |row| {
                if row.seq == start {
                    hash = Some(entry_hash(row.body));
                }
                Ok(false)
            })?;
            match hash {
                Some(hash) => hash,
                None => {
                    checker.report_problem(
                        start,
                        ProblemKind::Truncated,
                        format!("seq {start}, where verification starts, is missing"),
                    );
                    return Ok(checker.finish());
                }
            }
        };
        // Bind the starting entry to a signed root: its leaf must be included.
        if start > 0 {
            match claims.range(start..).next() {
                Some((&size, claim)) => {
                    if !included(src, start - 1, size, &prev, &claim.root) {
                        checker.report_problem(
                            start,
                            ProblemKind::CheckpointMismatch,
                            format!("entry {start}, where verification starts, is not in the signed tree of size {size}"),
                        );
                    }
                }
                None if stored.iter().any(|cp| cp.size >= start) => checker.report_problem(
                    start,
                    ProblemKind::BadSignature,
                    format!(
                        "entries up to seq {start} were pruned; the checkpoints covering them \
                             do not verify under the trusted key(s) {}: wrong --vkey?",
                        key_names(trusted)
                    ),
                ),
                None => checker.report.notes.push(format!(
                    "entries up to seq {start} were pruned and no checkpoint covers them"
                )),
            }
        }
        let range = match CompactRange::from_stored(start, &Hashes(src)) {
            Ok(range) => range,
            Err(err) => {
                checker.report_problem(
                    start,
                    ProblemKind::TreeMismatch,
                    format!("cannot read the tree at size {start}: {err}"),
                );
                return Ok(checker.finish());
            }
        };
        // Claims at or before the start: equal to the start's root, or consistent with it.
        let start_root = range.root();
        for (&size, claim) in claims.range(..=start) {
            if size == start {
                if claim.root != start_root {
                    checker.report_problem(
                        size,
                        ProblemKind::CheckpointMismatch,
                        format!(
                            "the tree of the first {size} entries has root {} but {} says {}",
                            b64(&start_root),
                            claim.label,
                            b64(&claim.root)
                        ),
                    );
                }
            } else if !consistent(src, size, &claim.root, start, &start_root) {
                checker.report_problem(
                    size,
                    ProblemKind::CheckpointMismatch,
                    format!(
                        "{} (size {size}) is not a prefix of the tree at size {start}",
                        claim.label
                    ),
                );
            }
        }

        let checker = ChainChecker {
            report: checker.report,
            ..ChainChecker::resume_after(start, prev)
        };
        let expected = tip.saturating_sub(start);
        let mut last_reported = 0;
        let Walked {
            mut checker,
            range,
            tree_ok,
        } = self.walk(src, start, expected, checker, range, &claims, |done| {
            if done - last_reported >= 4096 || done == expected {
                last_reported = done;
                if let Some(progress) = options.progress.as_mut() {
                    progress(done, expected);
                }
            }
        })?;
        // Tree hashes past the tip: rows were cut from the end, or hashes were planted.
        let end = src.tree_end()?;
        if end > tlog_tiles::stored_hash_count(tip) {
            checker.report_problem(
                tip + 1,
                ProblemKind::TreeMismatch,
                format!(
                    "the tree holds {end} stored hashes but {tip} entries need only {}: \
                     entries beyond seq {tip} were removed (or hashes added)",
                    tlog_tiles::stored_hash_count(tip)
                ),
            );
        }
        // The stored tree must agree with the entries, or proofs served from it fail.
        if tree_ok && range.size() == tip && tip > 0 {
            match crate::source::root(src, tip) {
                Ok(stored_root) if stored_root == range.root() => {}
                _ => checker.report_problem(tip, ProblemKind::TreeMismatch, format!(
                    "the stored tree hashes at size {tip} disagree with the entries; inclusion proofs would not check")),
            }
        }
        Ok(checker.finish())
    }
}

/// Whether the entry hashing to `entry` is leaf `index` of the tree with `root` at `size`.
fn included(src: &dyn Source, index: u64, size: u64, entry: &Hash, root: &Hash) -> bool {
    let stored = Hashes(src);
    prove_record(size, index, &stored)
        .and_then(|proof| {
            check_record(
                &proof,
                size,
                TreeHash(*root),
                index,
                TreeHash(leaf_hash(entry)),
            )
        })
        .is_ok()
}

/// Whether the tree of `old` entries with `old_root` is a prefix of the one at `new`.
fn consistent(src: &dyn Source, old: u64, old_root: &Hash, new: u64, new_root: &Hash) -> bool {
    let stored = Hashes(src);
    prove_tree(new, old, &stored)
        .and_then(|proof| check_tree(&proof, new, TreeHash(*new_root), old, TreeHash(*old_root)))
        .is_ok()
}

/// A column's or a body field's value for a message: quoted, or `absent`.
fn shown(value: Option<&str>) -> String {
    match value {
        Some(text) => format!("\"{}\"", text.escape_debug()),
        None => "absent".to_owned(),
    }
}

/// A checkpoint note's body and the trusted keys that signed it: its signature checked
/// against `trusted`, or, without a key, read for its size and root only (verify then
/// says signatures were not checked).
fn open_note<'k>(
    note: &[u8],
    trusted: &'k [VerifierKey],
) -> Result<(CheckpointBody, Vec<&'k VerifierKey>), CheckpointError> {
    if trusted.is_empty() {
        read_checkpoint_unverified(note).map(|body| (body, Vec::new()))
    } else {
        open_checkpoint_signed(note, trusted)
    }
}

/// The trusted keys' names, for messages (`none` when there is none).
fn key_names(trusted: &[VerifierKey]) -> String {
    if trusted.is_empty() {
        return "none".to_owned();
    }
    trusted
        .iter()
        .map(|k| k.name().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Base64 (standard, padded), the form roots take in notes.
pub(crate) fn b64(hash: &Hash) -> String {
    base64::engine::general_purpose::STANDARD.encode(hash)
}

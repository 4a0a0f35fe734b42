//! Checking a published log from its files alone.

use std::fmt;

use tlog_tiles::{check_tree, prove_tree, Tile};

use super::cosign::{open_cosigned, CosignerKey};
use super::layout::{bodies_path, bundle_path, parse_bundle, split_bodies, tile_path, width_at};
use super::store::{TileHashes, TileStore};
use super::{TileError, TILE_WIDTH};
use crate::canonical::{entry_hash, Hash, GENESIS};
use crate::merkle::{leaf_hash, CompactRange, TreeHash};
use crate::{to_hex, CheckpointBody, VerifierKey};

/// What [`verify_tiles`] checks against.
#[derive(Default)]
pub struct VerifyTilesOptions<'a> {
    /// The log's verifier keys: the checkpoint must be signed by one of them.
    pub trusted: &'a [VerifierKey],
    /// Witnesses' cosignature keys.
    pub witnesses: &'a [CosignerKey],
    /// How many of `witnesses` must have cosigned the checkpoint.
    pub min_witnesses: usize,
    /// Called with (entries checked, entries in the tree).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
}

/// One thing wrong with a published log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TileProblem {
    /// The file (path inside the log).
    pub path: String,
    /// The entry concerned, when there is one.
    pub seq: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

impl fmt::Display for TileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "{} (seq {seq}): {}", self.path, self.detail),
            None => write!(f, "{}: {}", self.path, self.detail),
        }
    }
}

/// What [`verify_tiles`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TilesReport {
    /// The checkpoint's origin (empty when it could not be read).
    pub origin: String,
    /// The checkpoint's tree size.
    pub size: u64,
    /// Its root, lower-case hex.
    pub root: String,
    /// Entries whose bundle record, leaf and body were checked.
    pub checked: u64,
    /// The log key that signed the checkpoint.
    pub signed_by: Option<String>,
    /// The witnesses whose cosignatures verified.
    pub cosigned_by: Vec<String>,
    /// Everything wrong, in the order found.
    pub problems: Vec<TileProblem>,
}

impl TilesReport {
    /// True when nothing is wrong and a checkpoint was checked.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty() && self.signed_by.is_some()
    }

    fn problem(&mut self, path: impl Into<String>, seq: Option<u64>, detail: impl Into<String>) {
        self.problems.push(TileProblem {
            path: path.into(),
            seq,
            detail: detail.into(),
        });
    }
}

/// Checks a published log: the checkpoint's signature under `options.trusted` (and
/// cosignatures), every entry bundle, every hash tile recomputed from the bundles, the
/// root, every body against its record, and the chain of `seq` and `prev` in the bodies.
///
/// A file that is missing or wrong is a [`TileProblem`]; an error means the store could
/// not be read at all (I/O, network).
pub fn verify_tiles(
    store: &(impl TileStore + ?Sized),
    mut options: VerifyTilesOptions<'_>,
) -> Result<TilesReport, TileError> {
    let mut report = TilesReport::default();
    let Some(note) = store.read("checkpoint")? else {
        report.problem("checkpoint", None, "missing");
        return Ok(report);
    };
    let cosigned = match open_cosigned(&note, options.trusted, options.witnesses) {
        Ok(cosigned) => cosigned,
        Err(err) => {
            report.problem("checkpoint", None, err.to_string());
            return Ok(report);
        }
    };
    let body = cosigned.body;
    report.origin = body.origin.clone();
    report.size = body.size;
    report.root = to_hex(&body.root);
    report.signed_by = Some(cosigned.signed_by);
    report.cosigned_by = cosigned.cosigned_by;
    if report.cosigned_by.len() < options.min_witnesses {
        let got = report.cosigned_by.len();
        report.problem(
            "checkpoint",
            None,
            format!(
                "{got} of the required {} witness cosignatures verified",
                options.min_witnesses
            ),
        );
    }
    let size = body.size;
    let mut range = CompactRange::new();
    let mut upper = Levels::default();
    let mut prev = GENESIS;
    let bundles = size.div_ceil(TILE_WIDTH);
    for n in 0..bundles {
        let width = width_at(size, n);
        let path = bundle_path(n, width);
        let first_seq = n * TILE_WIDTH + 1;
        let records = match store.read(&path)? {
            None => {
                report.problem(path, Some(first_seq), "missing");
                return Ok(report);
            }
            Some(bytes) => match parse_bundle(&bytes, width) {
                Ok(records) => records,
                Err(detail) => {
                    report.problem(path, Some(first_seq), detail);
                    return Ok(report);
                }
            },
        };
        let leaves: Vec<Hash> = records.iter().map(leaf_hash).collect();
        for leaf in &leaves {
            range.push(*leaf);
        }
        check_tile(store, &mut report, 0, n, &leaves)?;
        if width == TILE_WIDTH {
            upper.push(
                store,
                &mut report,
                1,
                Tile::subtree_hash(&leaves.concat()).0,
            )?;
        }
        check_bodies(store, &mut report, n, &records, &mut prev)?;
        report.checked += width;
        if let Some(progress) = options.progress.as_mut() {
            progress(report.checked, size);
        }
    }
    upper.finish(store, &mut report, size)?;
    if range.root() != body.root {
        report.problem(
            "checkpoint",
            None,
            format!(
                "the entry bundles lead to root {}, the signed checkpoint says {}",
                to_hex(&range.root()),
                to_hex(&body.root)
            ),
        );
    }
    Ok(report)
}

/// Proves from the tiles of the tree `new` that it extends the tree `old`: the
/// consistency proof between them (RFC 9162 §2.1.4) built from `store`'s tiles must
/// lead from `old`'s root to `new`'s. `Err` with the reason when it does not.
pub fn check_consistency(
    store: &(impl TileStore + ?Sized),
    old: &CheckpointBody,
    new: &CheckpointBody,
) -> Result<Result<(), String>, TileError> {
    if old.origin != new.origin {
        return Ok(Err(format!(
            "the log's origin changed from {:?} to {:?}",
            old.origin, new.origin
        )));
    }
    if new.size < old.size {
        return Ok(Err(format!(
            "the tree shrank from {} to {} entries",
            old.size, new.size
        )));
    }
    if new.size == old.size || old.size == 0 {
        return Ok(if new.size == old.size && new.root != old.root {
            Err(format!(
                "two different trees of {} entries (roots {} and {}): a split view",
                new.size,
                to_hex(&old.root),
                to_hex(&new.root)
            ))
        } else {
            Ok(())
        });
    }
    let hashes = TileHashes::new(store, new.size);
    let proof = match prove_tree(new.size, old.size, &hashes) {
        Ok(proof) => proof,
        Err(_) => {
            return match hashes.take_error() {
                Some(err @ (TileError::Io { .. } | TileError::Fetch { .. })) => Err(err),
                Some(err) => Ok(Err(format!("the tiles cannot prove consistency: {err}"))),
                None => Ok(Err("the tiles cannot prove consistency".to_owned())),
            }
        }
    };
    Ok(check_tree(
        &proof,
        new.size,
        TreeHash(new.root),
        old.size,
        TreeHash(old.root),
    )
    .map_err(|_| {
        format!(
            "the tree of {} entries (root {}) does not extend the one of {} (root {}): \
             the log rewrote its history or shows different histories to different readers",
            new.size,
            to_hex(&new.root),
            old.size,
            to_hex(&old.root)
        )
    }))
}

/// Checks what a log added between the checkpoint `old` (already trusted) and `new` (its
/// signature already checked), reading only the new entries' files and the old tree's
/// right edge: the tiles of `old` must lead to its root, the new bundles' records on top
/// of it to `new`'s root (so the new tree extends the old one, whatever the tiles say),
/// each new body must hash to its record, and `seq` and `prev` must continue the chain.
pub fn check_new_entries(
    store: &(impl TileStore + ?Sized),
    old: &CheckpointBody,
    new: &CheckpointBody,
) -> Result<Vec<TileProblem>, TileError> {
    let mut report = TilesReport::default();
    if new.size <= old.size {
        return Ok(Vec::new());
    }
    let mut range = if old.size == 0 {
        CompactRange::new()
    } else {
        // The old tree's complete subtrees, read from the new tree's tiles (the same
        // stored hashes; older partial tiles may be gone), checked by the old root below.
        let hashes = TileHashes::new(store, new.size);
        match CompactRange::from_stored(old.size, &hashes) {
            Ok(range) => range,
            Err(_) => {
                let detail = hashes
                    .take_error()
                    .map_or_else(|| "unreadable".to_owned(), |err| err.to_string());
                report.problem(
                    "tile/",
                    None,
                    format!("the tiles of size {}: {detail}", old.size),
                );
                return Ok(report.problems);
            }
        }
    };
    if range.root() != old.root {
        report.problem(
            "tile/",
            None,
            format!(
                "the tiles no longer lead to the accepted root of size {}",
                old.size
            ),
        );
        return Ok(report.problems);
    }
    let mut prev = GENESIS;
    let first_bundle = old.size.saturating_sub(1) / TILE_WIDTH;
    for n in first_bundle..new.size.div_ceil(TILE_WIDTH) {
        let width = width_at(new.size, n);
        let path = bundle_path(n, width);
        let records = match store.read(&path)?.map(|bytes| parse_bundle(&bytes, width)) {
            Some(Ok(records)) => records,
            Some(Err(detail)) => {
                report.problem(path, Some(n * TILE_WIDTH + 1), detail);
                return Ok(report.problems);
            }
            None => {
                report.problem(path, Some(n * TILE_WIDTH + 1), "missing");
                return Ok(report.problems);
            }
        };
        let bodies_file = store.read(&bodies_path(n, width))?;
        let bodies = bodies_file.as_deref().map(split_bodies);
        for (i, record) in records.iter().enumerate() {
            let seq = n * TILE_WIDTH + i as u64 + 1;
            if seq <= old.size {
                prev = *record;
                continue;
            }
            range.push(leaf_hash(record));
            let body = match &bodies {
                Some(Ok(bodies)) if bodies.len() as u64 == width => bodies.get(i).copied(),
                _ => None,
            };
            check_body(
                &mut report,
                &bodies_path(n, width),
                seq,
                body,
                record,
                &prev,
            );
            prev = *record;
        }
    }
    if range.root() != new.root {
        report.problem(
            "checkpoint",
            None,
            format!(
                "the entries after size {} do not lead to the signed root of size {}",
                old.size, new.size
            ),
        );
    }
    Ok(report.problems)
}

/// Checks one body: present, hashes to its record, names `seq` and `prev`.
fn check_body(
    report: &mut TilesReport,
    path: &str,
    seq: u64,
    body: Option<&[u8]>,
    record: &Hash,
    prev: &Hash,
) {
    let Some(body) = body else {
        report.problem(path, Some(seq), "missing or malformed bodies file");
        return;
    };
    if entry_hash(body) != *record {
        report.problem(path, Some(seq), "the body does not hash to its record");
        return;
    }
    match serde_json::from_slice::<ChainFields>(body) {
        Ok(fields) if fields.seq != seq => {
            report.problem(path, Some(seq), format!("the body says seq {}", fields.seq))
        }
        Ok(fields) if fields.prev != to_hex(prev) => report.problem(
            path,
            Some(seq),
            "its prev is not the hash of the entry before it",
        ),
        Ok(_) => {}
        Err(err) => report.problem(path, Some(seq), format!("not an entry: {err}")),
    }
}

/// Compares the hash tile at (`level`, `n`) with the hashes it must hold.
fn check_tile(
    store: &(impl TileStore + ?Sized),
    report: &mut TilesReport,
    level: u8,
    n: u64,
    hashes: &[Hash],
) -> Result<(), TileError> {
    let path = tile_path(level, n, hashes.len() as u64);
    let seq = (level == 0).then_some(n * TILE_WIDTH + 1);
    match store.read(&path)? {
        None => report.problem(path, seq, "missing"),
        Some(data) if data != hashes.concat() => {
            let detail = match data.chunks(32).zip(hashes).position(|(a, b)| a != b) {
                Some(i) => format!("hash {i} is not the one the entries below it make"),
                None => format!(
                    "{} bytes, {} hashes need {}",
                    data.len(),
                    hashes.len(),
                    hashes.len() * 32
                ),
            };
            report.problem(path, seq, detail);
        }
        Some(_) => {}
    }
    Ok(())
}

/// Checks the bodies beside bundle `n`: each hashes to its record and names the right
/// `seq` and `prev`.
fn check_bodies(
    store: &(impl TileStore + ?Sized),
    report: &mut TilesReport,
    n: u64,
    records: &[Hash],
    prev: &mut Hash,
) -> Result<(), TileError> {
    let width = records.len() as u64;
    let path = bodies_path(n, width);
    let first_seq = n * TILE_WIDTH + 1;
    let bytes = store.read(&path)?;
    let bodies = match bytes.as_deref().map(split_bodies) {
        None => {
            report.problem(&path, Some(first_seq), "missing");
            Vec::new()
        }
        Some(Err(detail)) => {
            report.problem(&path, Some(first_seq), detail);
            Vec::new()
        }
        Some(Ok(bodies)) if bodies.len() as u64 != width => {
            let count = bodies.len();
            report.problem(
                &path,
                Some(first_seq),
                format!("{count} bodies, its path says {width}"),
            );
            Vec::new()
        }
        Some(Ok(bodies)) => bodies,
    };
    for (i, record) in records.iter().enumerate() {
        let seq = first_seq + i as u64;
        if !bodies.is_empty() {
            check_body(report, &path, seq, bodies.get(i).copied(), record, prev);
        }
        *prev = *record;
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct ChainFields {
    seq: u64,
    prev: String,
}

/// The hashes above level 0 waiting to fill a tile, per level.
#[derive(Default)]
struct Levels {
    /// pending[L - 1]: (tiles completed at level L, the hashes of the tile being filled).
    pending: Vec<(u64, Vec<Hash>)>,
}

impl Levels {
    fn push(
        &mut self,
        store: &(impl TileStore + ?Sized),
        report: &mut TilesReport,
        level: u8,
        hash: Hash,
    ) -> Result<(), TileError> {
        let index = usize::from(level) - 1;
        while self.pending.len() <= index {
            self.pending.push((0, Vec::new()));
        }
        let (done, hashes) = &mut self.pending[index];
        hashes.push(hash);
        if hashes.len() as u64 == TILE_WIDTH {
            let full = std::mem::take(hashes);
            let n = *done;
            *done += 1;
            check_tile(store, report, level, n, &full)?;
            self.push(
                store,
                report,
                level + 1,
                Tile::subtree_hash(&full.concat()).0,
            )?;
        }
        Ok(())
    }

    fn finish(
        &mut self,
        store: &(impl TileStore + ?Sized),
        report: &mut TilesReport,
        size: u64,
    ) -> Result<(), TileError> {
        for (index, (done, hashes)) in self.pending.iter().enumerate() {
            let level = index as u8 + 1;
            let expected = width_at(size >> (8 * u32::from(level)), *done);
            if hashes.len() as u64 != expected {
                return Err(TileError::Internal("tile levels out of step"));
            }
            if !hashes.is_empty() {
                check_tile(store, report, level, *done, hashes)?;
            }
        }
        Ok(())
    }
}

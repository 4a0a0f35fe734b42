//! Writing a ledger out as a `tlog-tiles` directory, from scratch or incrementally.

use std::path::Path;

use tlog_tiles::Tile;

use super::layout::{
    bodies_path, bundle_path, encode_bundle, parse_bundle, split_bodies, tile_path, TILE_HEIGHT,
    TILE_WIDTH,
};
use super::store::{DirStore, TileHashes, TileStore};
use super::TileError;
use crate::canonical::{entry_hash, Hash};
use crate::merkle::{leaf_hash, CompactRange};
use crate::{read_checkpoint_unverified, to_hex, Ledger};

/// What [`publish`] is given besides the ledger and the directory.
#[derive(Default)]
pub struct PublishOptions<'a> {
    /// The note to write as `checkpoint` (a cosigned copy, say); by default the ledger's
    /// newest stored checkpoint. Its tree must be the ledger's tree of that size.
    pub note: Option<&'a str>,
    /// Called with (entries written so far, entries to write).
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
}

/// What [`publish`] did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PublishReport {
    /// The published tree's size.
    pub size: u64,
    /// The size the directory held before (0 for a new one).
    pub previous_size: u64,
    /// Files written (tiles, bundles, bodies, the checkpoint).
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Publishes the ledger's tree up to its newest checkpoint (or `options.note`) into
/// `dir` as C2SP `tlog-tiles`, with the bodies beside the bundles (see the module docs).
///
/// Incremental: it reads the size `dir/checkpoint` says, checks that the ledger's tree
/// of that size has that root, and writes only tiles and bundles from there on (full
/// ones once, partial ones anew). Files are written to a temporary name and renamed;
/// the checkpoint is written last, after every file it covers (and its directory) is
/// synced, and only if the tiles lead to its root. A run that fails or crashes leaves
/// the previous checkpoint, and the next run writes everything after it again.
pub fn publish(
    ledger: &Ledger,
    dir: &Path,
    mut options: PublishOptions<'_>,
) -> Result<PublishReport, TileError> {
    let store = DirStore::new(dir);
    let diverged = |detail: String| TileError::Diverged {
        dir: dir.to_path_buf(),
        detail,
    };
    let note = match options.note {
        Some(note) => note.to_owned(),
        None => {
            ledger
                .latest_checkpoint()?
                .ok_or(TileError::NoCheckpoint)?
                .note
        }
    };
    let new = read_checkpoint_unverified(note.as_bytes())?;
    if ledger.root_at(new.size)? != new.root {
        return Err(diverged(format!(
            "the checkpoint to publish (size {}) is not this ledger's tree",
            new.size
        )));
    }
    let old_size = match store.read("checkpoint")? {
        None => 0,
        Some(bytes) => {
            let old = read_checkpoint_unverified(&bytes)?;
            if old.origin != new.origin {
                return Err(diverged(format!(
                    "it publishes the log {:?}, the ledger's checkpoint is for {:?}",
                    old.origin, new.origin
                )));
            }
            if old.size > new.size {
                return Err(diverged(format!(
                    "it holds {} entries, more than the checkpoint's {}",
                    old.size, new.size
                )));
            }
            if ledger.root_at(old.size)? != old.root {
                return Err(diverged(format!(
                    "its root at size {} is {}, the ledger's is not",
                    old.size,
                    to_hex(&old.root)
                )));
            }
            old.size
        }
    };
    let total = new.size - old_size;
    if total == 0 {
        // Same tree (both roots are the ledger's at that size): only the note may differ,
        // e.g. new cosignatures.
        store.write("checkpoint", note.as_bytes())?;
        return Ok(PublishReport {
            size: new.size,
            previous_size: old_size,
            files: 1,
            bytes: note.len() as u64,
        });
    }
    let mut writer = Writer::open(&store, old_size, new.size)?;
    let mut failure = None;
    ledger.for_each_row(old_size + 1, |row| {
        if row.seq > new.size {
            return Ok(false);
        }
        let expected = writer.range.size() + 1;
        if row.seq != expected {
            failure = Some(if expected == old_size + 1 {
                TileError::Pruned {
                    from: expected,
                    to: row.seq - 1,
                    dir: dir.to_path_buf(),
                }
            } else {
                diverged(format!(
                    "the ledger skips from seq {} to {}; run `attest verify`",
                    expected - 1,
                    row.seq
                ))
            });
            return Ok(false);
        }
        let hash = entry_hash(row.body);
        if row.hash != hash {
            failure = Some(diverged(format!(
                "seq {}: the stored hash is not the body's; run `attest verify`",
                row.seq
            )));
            return Ok(false);
        }
        if let Err(err) = writer.push(hash, row.body) {
            failure = Some(err);
            return Ok(false);
        }
        if let Some(progress) = options.progress.as_mut() {
            if row.seq % 4096 == 0 {
                progress(row.seq - old_size, total);
            }
        }
        Ok(true)
    })?;
    if let Some(err) = failure {
        return Err(err);
    }
    if writer.range.size() != new.size {
        let from = writer.range.size() + 1;
        return Err(TileError::Pruned {
            from,
            to: new.size,
            dir: dir.to_path_buf(),
        });
    }
    writer.finish()?;
    if writer.range.root() != new.root {
        return Err(diverged(format!(
            "the published tiles lead to root {}, the checkpoint says {}",
            to_hex(&writer.range.root()),
            to_hex(&new.root)
        )));
    }
    store.sync_all(&writer.written)?;
    // Commit point: the checkpoint names the new tree only once all of it is on disk.
    store.write("checkpoint", note.as_bytes())?;
    if let Some(progress) = options.progress.as_mut() {
        progress(total, total);
    }
    Ok(PublishReport {
        size: new.size,
        previous_size: old_size,
        files: writer.files + 1,
        bytes: writer.bytes + note.len() as u64,
    })
}

/// The right edge of every level being written: the hashes of each level's last tile,
/// starting from what the directory held.
struct Writer<'s> {
    store: &'s DirStore,
    range: CompactRange,
    /// levels[L]: (hashes at level 8·L so far, the last tile's hashes, changed since read).
    levels: Vec<(u64, Vec<Hash>, bool)>,
    records: Vec<Hash>,
    bodies: Vec<u8>,
    bodies_count: u64,
    files: u64,
    bytes: u64,
    /// Files written and not yet synced.
    written: Vec<String>,
}

impl<'s> Writer<'s> {
    fn open(store: &'s DirStore, old: u64, new: u64) -> Result<Writer<'s>, TileError> {
        let range = if old == 0 {
            CompactRange::new()
        } else {
            let hashes = TileHashes::new(store, old);
            CompactRange::from_stored(old, &hashes).map_err(|_| {
                hashes
                    .take_error()
                    .unwrap_or(TileError::Internal("reading the published edge failed"))
            })?
        };
        let mut levels = Vec::new();
        let mut level = 0u8;
        while level < 8 && (new >> (u32::from(level) * u32::from(TILE_HEIGHT))) > 0 {
            let len = old >> (u32::from(level) * u32::from(TILE_HEIGHT));
            let width = len % TILE_WIDTH;
            let mut last = Vec::new();
            if width > 0 {
                let path = tile_path(level, len / TILE_WIDTH, width);
                let data = read_required(store, &path)?;
                last = parse_hashes(&data, width).map_err(|detail| TileError::Malformed {
                    path: path.clone(),
                    detail,
                })?;
            }
            levels.push((len, last, false));
            level += 1;
        }
        let width = old % TILE_WIDTH;
        let (mut records, mut bodies) = (Vec::new(), Vec::new());
        if width > 0 {
            let path = bundle_path(old / TILE_WIDTH, width);
            records = parse_bundle(&read_required(store, &path)?, width)
                .map_err(|detail| TileError::Malformed { path, detail })?;
            let path = bodies_path(old / TILE_WIDTH, width);
            bodies = read_required(store, &path)?;
            let count = split_bodies(&bodies)
                .map_err(|detail| TileError::Malformed {
                    path: path.clone(),
                    detail,
                })?
                .len() as u64;
            if count != width {
                return Err(TileError::Malformed {
                    path,
                    detail: format!("{count} bodies, its path says {width}"),
                });
            }
        }
        Ok(Writer {
            store,
            range,
            levels,
            bodies_count: records.len() as u64,
            records,
            bodies,
            files: 0,
            bytes: 0,
            written: Vec::new(),
        })
    }

    fn write(&mut self, path: &str, bytes: &[u8]) -> Result<(), TileError> {
        self.store.write_unsynced(path, bytes)?;
        self.written.push(path.to_owned());
        self.files += 1;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    fn push(&mut self, record: Hash, body: &[u8]) -> Result<(), TileError> {
        let leaf = leaf_hash(&record);
        self.range.push(leaf);
        self.records.push(record);
        self.bodies.extend_from_slice(body);
        self.bodies.push(b'\n');
        self.bodies_count += 1;
        if self.records.len() as u64 == TILE_WIDTH {
            let n = (self.range.size() - 1) / TILE_WIDTH;
            let bundle = encode_bundle(&self.records);
            self.write(&bundle_path(n, TILE_WIDTH), &bundle)?;
            let bodies = std::mem::take(&mut self.bodies);
            self.write(&bodies_path(n, TILE_WIDTH), &bodies)?;
            self.records.clear();
            self.bodies_count = 0;
        }
        self.push_hash(0, leaf)
    }

    fn push_hash(&mut self, level: u8, hash: Hash) -> Result<(), TileError> {
        let index = usize::from(level);
        let Some((len, last, changed)) = self.levels.get_mut(index) else {
            return Err(TileError::Internal("a tree level beyond the tree"));
        };
        last.push(hash);
        *len += 1;
        *changed = true;
        if last.len() as u64 == TILE_WIDTH {
            let n = (*len - 1) / TILE_WIDTH;
            let data: Vec<u8> = last.concat();
            last.clear();
            *changed = false;
            let parent = Tile::subtree_hash(&data).0;
            self.write(&tile_path(level, n, TILE_WIDTH), &data)?;
            if index + 1 < self.levels.len() {
                self.push_hash(level + 1, parent)?;
            }
        }
        Ok(())
    }

    /// Writes the partial tiles and bundles that changed.
    fn finish(&mut self) -> Result<(), TileError> {
        let size = self.range.size();
        for level in 0..self.levels.len() {
            let (len, last, changed) = &self.levels[level];
            if !*changed || last.is_empty() {
                continue;
            }
            let width = last.len() as u64;
            let path = tile_path(level as u8, len / TILE_WIDTH, width);
            let data = last.concat();
            self.write(&path, &data)?;
        }
        let width = size % TILE_WIDTH;
        if width > 0 && self.bodies_count == width {
            let n = size / TILE_WIDTH;
            let bundle = encode_bundle(&self.records);
            self.write(&bundle_path(n, width), &bundle)?;
            let bodies = std::mem::take(&mut self.bodies);
            self.write(&bodies_path(n, width), &bodies)?;
        }
        Ok(())
    }
}

fn read_required(store: &DirStore, path: &str) -> Result<Vec<u8>, TileError> {
    store.read(path)?.ok_or_else(|| TileError::Malformed {
        path: path.to_owned(),
        detail: "missing: the directory's checkpoint covers it".to_owned(),
    })
}

/// Splits a hash tile into its `width` hashes.
pub(crate) fn parse_hashes(data: &[u8], width: u64) -> Result<Vec<Hash>, String> {
    if data.len() as u64 != width * 32 {
        return Err(format!(
            "{} bytes, {width} hashes need {}",
            data.len(),
            width * 32
        ));
    }
    Ok(data
        .chunks_exact(32)
        .filter_map(|chunk| chunk.try_into().ok())
        .collect())
}

//! Where a published log's files are read from and written to, and the tree's hashes
//! read back from its tiles.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use tlog_tiles::{split_stored_hash_index, HashReader, Tile};

use super::layout::{tile_path, width_at, TILE_HEIGHT, TILE_WIDTH};
use super::TileError;
use crate::merkle::TreeHash;

/// Longest file read from a published log: a full bodies file of 256 large entries.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 20;

/// Read access to a published log: a directory, a URL prefix, anything that maps a
/// path such as `tile/0/000` to bytes.
pub trait TileStore {
    /// The file at `path`, or `None` if there is none (HTTP 404, no such file).
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, TileError>;

    /// A short description for messages (the directory or URL).
    fn describe(&self) -> String;
}

/// A published log in a local directory.
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// The log published in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> DirStore {
        DirStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `bytes` at `path` atomically: to a temporary file beside it, synced, then
    /// renamed over it, so a reader sees the old file or the new one, never a part.
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), TileError> {
        self.write_file(path, bytes, true)
    }

    /// Like [`DirStore::write`], without syncing: the caller syncs the file (and its
    /// directory) with [`DirStore::sync_all`] before anything refers to it.
    pub(crate) fn write_unsynced(&self, path: &str, bytes: &[u8]) -> Result<(), TileError> {
        self.write_file(path, bytes, false)
    }

    /// Syncs the files at `paths` and their directories to disk, several at a time (a
    /// file system commits concurrent syncs together).
    pub(crate) fn sync_all(&self, paths: &[String]) -> Result<(), TileError> {
        let mut targets: Vec<PathBuf> = paths.iter().map(|p| self.dir.join(p)).collect();
        let mut dirs: Vec<PathBuf> = targets
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        dirs.sort();
        dirs.dedup();
        targets.extend(dirs);
        let chunk = targets.len().div_ceil(8).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = targets
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        for target in part {
                            std::fs::File::open(target)
                                .and_then(|f| f.sync_all())
                                .map_err(|source| TileError::Io {
                                    path: target.clone(),
                                    source,
                                })?;
                        }
                        Ok::<(), TileError>(())
                    })
                })
                .collect();
            for worker in workers {
                worker
                    .join()
                    .map_err(|_| TileError::Internal("a sync thread panicked"))??;
            }
            Ok(())
        })
    }

    fn write_file(&self, path: &str, bytes: &[u8], sync: bool) -> Result<(), TileError> {
        let target = self.dir.join(path);
        let io = |source| TileError::Io {
            path: target.clone(),
            source,
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut temp = target.clone().into_os_string();
        temp.push(format!(".tmp-{}", std::process::id()));
        let temp = PathBuf::from(temp);
        let result = (|| {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(bytes)?;
            if sync {
                file.sync_all()?;
            }
            std::fs::rename(&temp, &target)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result.map_err(io)
    }
}

impl TileStore for DirStore {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, TileError> {
        let target = self.dir.join(path);
        let io = |source| TileError::Io {
            path: target.clone(),
            source,
        };
        let file = match std::fs::File::open(&target) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(io(err)),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_FILE_BYTES + 1),
            &mut bytes,
        )
        .map_err(io)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(TileError::Malformed {
                path: path.to_owned(),
                detail: format!("over the {MAX_FILE_BYTES}-byte limit"),
            });
        }
        Ok(Some(bytes))
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}

/// The hashes of the tree of `size` leaves, read from a store's hash tiles (as Go's
/// `tlog.TileHashReader` reads them): any root, inclusion proof or consistency proof of
/// that tree from `tlog_tiles`.
///
/// It does not authenticate tiles itself: a proof built from tampered tiles fails to
/// check against the signed root, which is what callers compare with.
pub struct TileHashes<'s, S: TileStore + ?Sized> {
    store: &'s S,
    size: u64,
    cache: RefCell<HashMap<String, Vec<u8>>>,
    /// The first real error behind a failed read (tlog_tiles's error has no room for it).
    error: RefCell<Option<TileError>>,
}

impl<'s, S: TileStore + ?Sized> TileHashes<'s, S> {
    /// The tree of `size` leaves in `store`.
    pub fn new(store: &'s S, size: u64) -> Self {
        TileHashes {
            store,
            size,
            cache: RefCell::new(HashMap::new()),
            error: RefCell::new(None),
        }
    }

    /// The root of the tree of `size` leaves, computed from the tiles (RFC 9162 §2.1.1).
    pub fn root(&self) -> Result<crate::Hash, TileError> {
        tlog_tiles::tree_hash(self.size, self)
            .map(|h| h.0)
            .map_err(|_| {
                self.take_error()
                    .unwrap_or(TileError::Internal("the tree hash failed"))
            })
    }

    /// Why the last failed read failed, if it was the store (not the tree math).
    pub fn take_error(&self) -> Option<TileError> {
        self.error.borrow_mut().take()
    }

    fn hash(&self, index: u64) -> Result<TreeHash, TileError> {
        let (level, n) = split_stored_hash_index(index);
        let covered = n
            .checked_add(1)
            .and_then(|end| end.checked_shl(u32::from(level)))
            .is_some_and(|end| end <= self.size);
        if !covered {
            return Err(TileError::Internal("a hash outside the tree was asked for"));
        }
        let tile_level = level / TILE_HEIGHT;
        let within = level % TILE_HEIGHT;
        let first = n << within;
        let tile = first / TILE_WIDTH;
        let len = self.size >> (u32::from(tile_level) * u32::from(TILE_HEIGHT));
        let width = width_at(len, tile);
        let path = tile_path(tile_level, tile, width);
        let mut cache = self.cache.borrow_mut();
        if !cache.contains_key(&path) {
            let data = self
                .store
                .read(&path)?
                .ok_or_else(|| TileError::Malformed {
                    path: path.clone(),
                    detail: "missing".to_owned(),
                })?;
            if data.len() as u64 != width * 32 {
                return Err(TileError::Malformed {
                    path,
                    detail: format!("{} bytes, {width} hashes need {}", data.len(), width * 32),
                });
            }
            cache.insert(path.clone(), data);
        }
        let data = cache
            .get(&path)
            .ok_or(TileError::Internal("a cached tile vanished"))?;
        let start = usize::try_from((first - tile * TILE_WIDTH) * 32)
            .map_err(|_| TileError::Internal("tile offset overflows"))?;
        let end = start + (32usize << within);
        let slice = data
            .get(start..end)
            .filter(|s| !s.is_empty())
            .ok_or(TileError::Internal("a hash beyond its tile"))?;
        Ok(Tile::subtree_hash(slice))
    }
}

impl<S: TileStore + ?Sized> HashReader for TileHashes<'_, S> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&index| {
                self.hash(index).map_err(|err| {
                    self.error.borrow_mut().get_or_insert(err);
                    tlog_tiles::Error::IndexesNotInTree
                })
            })
            .collect()
    }
}

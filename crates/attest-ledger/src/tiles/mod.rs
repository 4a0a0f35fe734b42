//! The ledger published as a C2SP `tlog-tiles` log, so outsiders can mirror and watch it
//! from static files, and the witness side (C2SP `tlog-witness`, `tlog-cosignature`).
//!
//! # Layout of a published directory (or URL prefix)
//!
//! ```text
//! checkpoint                      the signed checkpoint note (C2SP tlog-checkpoint), with
//!                                 any witness cosignatures; written last
//! tile/<L>/<N>[.p/<W>]            hash tiles of height 8 (C2SP tlog-tiles): the 256 (or
//!                                 W < 256) hashes at tree level 8·L, 32 bytes each
//! tile/entries/<N>[.p/<W>]        entry bundles (C2SP tlog-tiles): for leaves 256·N…, each
//!                                 record as a big-endian u16 length (always 32) and the
//!                                 entry's 32-byte hash; leaf = SHA-256(0x00 ‖ entry hash)
//! bodies/<N>[.p/<W>]              Attest's extension: the same leaves' canonical bodies,
//!                                 one per line (`\n`-terminated; JCS output never holds a
//!                                 raw newline), exactly the bytes that were hashed
//! ```
//!
//! `<N>` is written in groups of three digits, all but the last prefixed with `x`
//! (`1234067` → `x001/x234/067`). Full tiles and bundles are never rewritten; a partial one
//! (`.p/<W>`) is written anew when the tree grows and older partials are left in place.
//! Bundles of rows the ledger has since pruned stay in the directory, so a mirror keeps
//! the whole history.
//!
//! A tlog-tiles client checks the tree from the hash tiles and entry bundles alone; a
//! body is checked by hashing it to its bundle record, and the chain by each body's
//! `prev` naming the record before it.
//!
//! The pieces:
//! - [`publish`]: writes (or extends) a published directory from a ledger.
//! - [`verify_tiles`]: checks a published log from its files alone, through a [`TileStore`].
//! - [`TileHashes`]: the tree's hashes read from tiles, for proofs (Go's `tlog.TileHashReader`).
//! - [`CosigningKey`], [`CosignerKey`], [`open_cosigned`]: `tlog-cosignature/v1` signatures.
//! - [`Witness`]: the `add-checkpoint` logic of a witness, with its state file.

mod cosign;
mod layout;
mod publish;
mod store;
mod verify;
mod witness;

pub use cosign::{open_cosigned, CosignedCheckpoint, CosignerKey, CosigningKey};
pub use layout::{bodies_path, bundle_path, parse_bundle, tile_path, TILE_HEIGHT, TILE_WIDTH};
pub use publish::{publish, PublishOptions, PublishReport};
pub use store::{DirStore, TileHashes, TileStore};
pub use verify::{check_consistency, check_new_entries};
pub use verify::{verify_tiles, TileProblem, TilesReport, VerifyTilesOptions};
pub use witness::{Witness, WitnessError, MAX_REQUEST_BYTES};

use std::path::PathBuf;

/// Why a published log could not be written or read.
///
/// Verification findings are not errors: they are [`TileProblem`]s in a [`TilesReport`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TileError {
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] crate::LedgerError),
    /// A file of the published directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A published file could not be fetched (HTTP, or another store).
    #[error("cannot fetch {path}: {detail}")]
    Fetch {
        /// The path inside the log.
        path: String,
        /// What went wrong.
        detail: String,
    },
    /// The ledger has no checkpoint to publish.
    #[error("the ledger has no checkpoint to publish; run `attest checkpoint` first")]
    NoCheckpoint,
    /// The published directory is not a prefix of this ledger (another log, or a
    /// history the ledger does not extend), or is ahead of it.
    #[error("{dir} does not hold an earlier state of this ledger: {detail}")]
    Diverged {
        /// The directory.
        dir: PathBuf,
        /// What disagrees.
        detail: String,
    },
    /// The rows needed are no longer in the ledger (pruned) and not yet published.
    #[error("entries {from} to {to} are pruned from the ledger and not in {dir}: publish before pruning, or restore the directory")]
    Pruned {
        /// The first missing seq.
        from: u64,
        /// The last missing seq.
        to: u64,
        /// The directory.
        dir: PathBuf,
    },
    /// The checkpoint note is not usable (malformed, or not signed by a trusted key).
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] crate::CheckpointError),
    /// A published file is malformed, so nothing further can be checked.
    #[error("{path}: {detail}")]
    Malformed {
        /// The path inside the log.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// A bad key text.
    #[error("bad key {origin}: {detail}")]
    BadKey {
        /// Where the key came from.
        origin: String,
        /// What is wrong.
        detail: String,
    },
    /// A tree computation failed where it cannot (a bug, not bad input).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

//! The auditor's bundle: one archive holding a period's or a run's rows and everything
//! needed to check them offline, without the ledger and without Attest.
//!
//! A plain (uncompressed) tar archive, its files in name order, times and owners zeroed,
//! so the same ledger and selection give the same bytes:
//!
//! - `README.md`: what the files are and how to check them (`attest verify-bundle`, or
//!   the Python script shipped in Attest's `docs/`);
//! - `rows.jsonl`: the selected rows' stored bodies, one per line, exactly the hashed
//!   bytes (RFC 8785), in seq order;
//! - `proofs.jsonl`: line *i* is the RFC 9162 inclusion proof of line *i* of
//!   `rows.jsonl` in the tree `checkpoint.note` signs (an [`InclusionProof`] without
//!   its `checkpoint` field: the note is the file);
//! - `checkpoint.note`: the ledger's newest signed checkpoint (C2SP signed note);
//! - `checkpoints/SIZE.note` and `consistency/SIZE.json`: an older signed checkpoint
//!   (the first that covered the selection, and every anchor the exporter was given)
//!   and the RFC 9162 consistency proof from it to `checkpoint.note` (a
//!   [`ConsistencyProof`] without its `*_checkpoint` fields);
//! - `keys.txt`: the verifier keys (signed-note text) that signed those checkpoints —
//!   for the auditor to compare with keys obtained elsewhere: a checker trusts only
//!   keys it is given, never the bundle's own;
//! - `manifest.json`: the origin, the selection, the row count and the sizes.
//!
//! [`InclusionProof`]: crate::InclusionProof
//! [`ConsistencyProof`]: crate::ConsistencyProof

mod check;
mod write;

pub use check::{check_bundle, BundleProblem, BundleReport, MAX_BUNDLE_BYTES};
pub use write::{AuditBundle, Selection};

/// The rows, one canonical body per line.
pub const ROWS: &str = "rows.jsonl";
/// The inclusion proofs, one per row, in the same order.
pub const PROOFS: &str = "proofs.jsonl";
/// The newest signed checkpoint: every inclusion proof is against its tree.
pub const CHECKPOINT: &str = "checkpoint.note";
/// The verifier keys that signed the bundle's checkpoints.
pub const KEYS: &str = "keys.txt";
/// The origin, selection and counts.
pub const MANIFEST: &str = "manifest.json";
/// How to check the bundle.
pub const README: &str = "README.md";
/// The folder of older signed checkpoints, `SIZE.note`.
pub const OLDER_CHECKPOINTS: &str = "checkpoints/";
/// The folder of consistency proofs from each older checkpoint, `SIZE.json`.
pub const CONSISTENCY: &str = "consistency/";

/// Why a bundle could not be written or read at all (a verification finding is a
/// [`BundleProblem`] instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// The ledger could not be read or proved from.
    #[error(transparent)]
    Ledger(#[from] crate::LedgerError),
    /// No row matched the selection.
    #[error("no row matches {selection}")]
    Empty {
        /// The selection, as given.
        selection: String,
    },
    /// A selected row is newer than the newest checkpoint, so no signature covers it.
    #[error("seq {seq} is newer than the newest checkpoint (size {size}): run `attest checkpoint` first")]
    Unsigned {
        /// The newest selected row.
        seq: u64,
        /// The newest checkpoint's size.
        size: u64,
    },
    /// A checkpoint to include did not verify under the keys given.
    #[error("{what} does not verify under the verifier keys given: {detail}")]
    Untrusted {
        /// Which checkpoint.
        what: String,
        /// Why.
        detail: String,
    },
    /// An anchored checkpoint is for a larger tree than the newest checkpoint.
    #[error("the anchored checkpoint of size {size} is larger than the newest checkpoint ({newest}): run `attest checkpoint` first")]
    AnchorAhead {
        /// The anchor's size.
        size: u64,
        /// The newest checkpoint's size.
        newest: u64,
    },
    /// Writing or reading the archive failed.
    #[error("{during}")]
    Io {
        /// What was being done.
        during: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The archive is not a bundle: not tar, too large, or holds something other than
    /// regular files.
    #[error("{0}")]
    NotABundle(String),
}

use std::path::PathBuf;

use thiserror::Error;

/// Why the ledger could not be opened, written or read.
///
/// Verification findings are not errors: they are [`crate::Problem`]s in a
/// [`crate::VerifyReport`]. An error means the ledger could not be checked at all.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The path names a directory, not a ledger file.
    #[error("ledger path {path} is a directory, not a file")]
    IsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// No ledger exists at the path (and the caller asked not to create one).
    #[error("no ledger at {path}")]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The ledger's directory could not be created.
    #[error("cannot create directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The ledger file could not be created (with its owner-only mode).
    #[error("cannot create ledger file {path}")]
    CreateFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed (the file is corrupt, locked too long, not a database, …).
    #[error("sqlite error on {path} while {during}")]
    Sqlite {
        /// The ledger file.
        path: PathBuf,
        /// What the ledger was doing.
        during: &'static str,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is a SQLite database, but of another schema version or another program.
    #[error("{path} has ledger schema version {found}, this build reads version {expected}")]
    SchemaVersion {
        /// The ledger file.
        path: PathBuf,
        /// The version found (or "none").
        found: String,
        /// The version this build reads.
        expected: u32,
    },
    /// The file is not an Attest ledger (empty, or a database without the ledger's
    /// tables); read-only openings report this instead of creating a schema.
    #[error("{path} is not an attest ledger: {detail}")]
    NotALedger {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        detail: String,
    },
    /// An entry could not be put in canonical form.
    #[error("entry cannot be canonicalized")]
    Canonical(#[source] serde_json::Error),
    /// A stored row could not be read for export or listing.
    #[error("stored row seq {seq} is unreadable: {detail}")]
    BadRow {
        /// The row's seq.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
    /// The Merkle tree could not be extended or read (its stored hashes are missing or
    /// malformed).
    #[error("merkle tree error at seq {seq}")]
    Tree {
        /// The seq being appended or proved.
        seq: u64,
        /// The cause.
        #[source]
        source: tlog_tiles::Error,
    },
    /// A key's text is not a valid signed-note key.
    #[error("bad key in {origin}: {detail}")]
    BadKey {
        /// Where the key came from (a path, a flag, an env var).
        origin: String,
        /// What is wrong.
        detail: String,
    },
    /// A PKCS#11 token could not be used (module, token, login, key, signing).
    #[error("pkcs11 token {token:?}: {detail}")]
    Token {
        /// The token's label.
        token: String,
        /// What failed (never the PIN).
        detail: String,
    },
    /// The token does not offer a mechanism the key needs.
    #[error("pkcs11 token {token:?} does not support {mechanism} (Ed25519 needs CKM_EC_EDWARDS_KEY_PAIR_GEN and CKM_EDDSA)")]
    TokenMechanism {
        /// The token's label.
        token: String,
        /// The mechanism it lacks.
        mechanism: String,
    },
    /// A key file could not be read or written.
    #[error("key file {path}")]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A signing key file that group or others may read: the key may be copied already.
    #[error(
        "signing key {path} is readable by group or others (mode bits {mode:03o}): run `chmod 600 {path}` (and consider the key exposed)",
        path = path.display()
    )]
    KeyShared {
        /// The file.
        path: PathBuf,
        /// The group and other permission bits found.
        mode: u32,
    },
    /// The ledger holds no entries, so there is nothing to sign or prove.
    #[error("ledger {path} is empty")]
    Empty {
        /// The ledger file.
        path: PathBuf,
    },
    /// Verifying since a checkpoint needs a key to trust that checkpoint.
    #[error("no trusted verifier key: pass --vkey, --vkey-file or set ATTEST_VKEY")]
    NoTrustedKey,
    /// Verifying since a checkpoint needs a checkpoint.
    #[error("ledger {path} has no checkpoint; run `attest checkpoint` first")]
    NoCheckpoint {
        /// The ledger file.
        path: PathBuf,
    },
    /// A seq or size outside the tree.
    #[error("seq {seq} is outside the tree of size {size}")]
    OutOfRange {
        /// The seq or size asked for.
        seq: u64,
        /// The tree's size.
        size: u64,
    },
    /// The entry's body was pruned.
    #[error("seq {seq} was pruned")]
    Pruned {
        /// The seq asked for.
        seq: u64,
    },
    /// A word that should name a durability mode does not.
    #[error("unknown durability {word:?} (expected full, normal or off)")]
    UnknownDurability {
        /// The word as given.
        word: String,
    },
    /// Writing exported data failed.
    #[error("cannot write output")]
    Output(#[source] std::io::Error),
    #[error("postgres error on {path} while {during}")]
    /// A PostgreSQL statement failed.
    Postgres {
        /// The server, without credentials.
        path: PathBuf,
        /// What the ledger was doing.
        during: &'static str,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },

    #[error("cannot connect to {path}: {detail}")]
    /// No connection to the PostgreSQL server.
    Pool {
        /// The server, without credentials.
        path: PathBuf,
        /// Why.
        detail: String,
    },

    #[error("bad ledger URL: {detail}")]
    /// A `postgres://` location that does not parse (the URL is not repeated: it may
    /// hold a password).
    BadUrl {
        /// Why.
        detail: String,
    },

    #[error("bad tenant name {name:?}: use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit")]
    /// A tenant name that is not allowed.
    BadTenant {
        /// The name given.
        name: String,
    },

    #[error("ledger {path} was opened read-only")]
    /// An append on a ledger opened for reading.
    ReadOnly {
        /// The ledger.
        path: PathBuf,
    },

    #[error("the target ledger {path} is not empty: copy into a new ledger")]
    /// `copy` into a ledger that holds rows.
    NotEmpty {
        /// The target.
        path: PathBuf,
    },

    #[error("the append to {path} may or may not have been written: the connection broke and the outcome could not be read back; run `attest ledger` to see")]
    /// A write whose outcome is unknown: it is not retried, so it is never written twice.
    OutcomeUnknown {
        /// The ledger.
        path: PathBuf,
    },

    #[error("archive line {line}: {detail}")]
    /// An archive file that is not one.
    BadArchive {
        /// The line (1: the header).
        line: usize,
        /// What is wrong.
        detail: String,
    },

    #[error("cannot read input")]
    /// Reading an input file failed.
    Input(#[source] std::io::Error),

    /// A claim that rode with an append found its digest held by an earlier call
    /// ([`crate::CallStep::Claim`]): nothing of the append was written.
    #[error("the call's digest is held by an earlier call: {0:?}")]
    CallHeld(Box<crate::HeldCall>),

    /// A stream sink's name is not one a cursor takes.
    #[error("bad stream sink name {name:?}: use 1 to 64 letters, digits, '-', '_' or '.'")]
    StreamSink {
        /// The name given.
        name: String,
    },

    /// A stream cursor's stored value does not read.
    #[error("stream cursor {key} does not read: {detail}")]
    StreamCursor {
        /// Its key in `attest_meta`.
        key: String,
        /// What is wrong.
        detail: String,
    },

    /// A state the code believes impossible; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// No key is kept for the subject: it was erased before, or never had sealed rows.
    #[error("no key is kept for this subject: it was erased already, or never had sealed rows")]
    SubjectErased,
}

impl LedgerError {
    /// Whether the ledger itself is damaged (a file cut short or overwritten, a row or a
    /// tree hash that does not read): a broken ledger, as a failed verification is, not
    /// a failure to reach one.
    pub fn is_damaged(&self) -> bool {
        match self {
            LedgerError::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ),
            LedgerError::BadRow { .. } | LedgerError::Tree { .. } => true,
            _ => false,
        }
    }
}

//! The rows a ledger hands out: what an append produced, a listing's summary, and a
//! stored row as verify and export read it.

use crate::canonical::{to_hex, Hash};

/// What an append produced: the row's place and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The row's seq.
    pub seq: u64,
    /// SHA-256 of its canonical body.
    pub hash: Hash,
    /// Its timestamp.
    pub ts: String,
}

/// One row as listings show it, read from the indexed columns only. Serializes with
/// the hash as lower-case hex, the form listings and APIs print.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RowSummary {
    /// The row's seq.
    pub seq: u64,
    /// Its timestamp.
    pub ts: String,
    /// The system.
    pub system: String,
    /// The verb.
    pub verb: String,
    /// The agent, if recorded.
    pub agent: Option<String>,
    /// The decision.
    pub decision: String,
    /// The verification level, if the action ran.
    pub level: Option<String>,
    /// The entry hash.
    #[serde(serialize_with = "hex_hash")]
    pub hash: Hash,
}

fn hex_hash<S: serde::Serializer>(hash: &Hash, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&to_hex(hash))
}

/// One stored row, as verify and export read it.
#[derive(Debug)]
pub struct StoredRow<'a> {
    /// The `seq` column.
    pub seq: u64,
    /// The `hash` column (may be any length if the file was edited).
    pub hash: &'a [u8],
    /// The `ts` column.
    pub ts: &'a str,
    /// The `system` column.
    pub system: &'a str,
    /// The `verb` column.
    pub verb: &'a str,
    /// The `agent` column.
    pub agent: Option<&'a str>,
    /// The `decision` column.
    pub decision: &'a str,
    /// The `level` column.
    pub level: Option<&'a str>,
    /// The `run` column (the body's `run_id`).
    pub run: Option<&'a str>,
    /// The `action_id` column.
    pub action_id: Option<&'a str>,
    /// The stored canonical body, exactly the bytes that were hashed.
    pub body: &'a [u8],
}

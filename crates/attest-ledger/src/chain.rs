//! The chain step that makes the public format, written once for every store: from
//! the chain's end (the tip and the tree's right edge) and the records, the rows to
//! store (`seq`, `prev`, `ts`, canonical bytes, entry hash) and the tree hashes they
//! complete.

use tlog_tiles::stored_hash_index;

use crate::canonical::{entry_hash, to_hex, Hash};
use crate::clock::format_ts;
use crate::entry::{Entry, FORMAT_VERSION};
use crate::jcs::write_entry;
use crate::merkle::{leaf_hash, CompactRange};
use crate::{Appended, Clock, LedgerError, Record};

/// The chain's end: the newest row's seq and hash, and the tree over every row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChainEdge {
    pub(crate) seq: u64,
    pub(crate) hash: Hash,
    pub(crate) range: CompactRange,
}

/// One row built for storing.
#[derive(Debug)]
pub(crate) struct BuiltRow {
    pub(crate) seq: u64,
    pub(crate) hash: Hash,
    pub(crate) ts: String,
    /// The canonical body, exactly the bytes hashed (JSON, so UTF-8).
    pub(crate) body: String,
}

/// The rows of one commit, built on an edge.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) rows: Vec<BuiltRow>,
    /// The stored index of `tree[0]`.
    pub(crate) first_tree_index: u64,
    /// The tree hashes the rows complete, in stored-index order.
    pub(crate) tree: Vec<Hash>,
    /// The edge after the last row.
    pub(crate) edge: ChainEdge,
}

impl Built {
    /// What each row's caller is told once the commit holds.
    pub(crate) fn appended(&self) -> Vec<Appended> {
        self.rows
            .iter()
            .map(|row| Appended {
                seq: row.seq,
                hash: row.hash,
                ts: row.ts.clone(),
            })
            .collect()
    }
}

/// Builds `records` as the rows after `edge`, each timestamped by `clock`.
pub(crate) fn build(
    records: &[Record],
    edge: &ChainEdge,
    clock: &dyn Clock,
) -> Result<Built, LedgerError> {
    let mut edge = edge.clone();
    let first_tree_index = stored_hash_index(0, edge.seq);
    let mut rows = Vec::with_capacity(records.len());
    let mut tree = Vec::with_capacity(records.len() * 2);
    let mut body = Vec::with_capacity(1024);
    for record in records {
        let seq = edge.seq + 1;
        let ts = format_ts(clock.now());
        let prev_hex = to_hex(&edge.hash);
        let entry = Entry {
            v: FORMAT_VERSION,
            seq,
            prev: &prev_hex,
            ts: &ts,
            record,
        };
        body.clear();
        write_entry(&mut body, &entry)?;
        let hash = entry_hash(&body);
        let text = String::from_utf8(body.clone())
            .map_err(|_| LedgerError::Internal("canonical JSON is not UTF-8"))?;
        edge.range
            .push_with(leaf_hash(&hash), |node| tree.push(*node));
        edge.seq = seq;
        edge.hash = hash;
        rows.push(BuiltRow {
            seq,
            hash,
            ts,
            body: text,
        });
    }
    Ok(Built {
        rows,
        first_tree_index,
        tree,
        edge,
    })
}

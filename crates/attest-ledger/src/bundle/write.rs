//! Writing a bundle: select the rows, prove each against the newest checkpoint, prove
//! older checkpoints consistent with it, and lay the files out in a fixed order.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;

use serde_json::json;

use super::{
    BundleError, CHECKPOINT, CONSISTENCY, KEYS, MANIFEST, OLDER_CHECKPOINTS, PROOFS, README, ROWS,
};
use crate::{
    open_checkpoint, read_checkpoint_unverified, Ledger, LedgerError, StoredCheckpoint, VerifierKey,
};

/// Which rows a bundle holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The rows whose `ts` is at or after this time (the ledger's own form: RFC 3339
    /// UTC with microseconds, as [`crate::format_ts`] writes it).
    Since(String),
    /// The rows whose `run_id` is this.
    Run(String),
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selection::Since(ts) => write!(f, "--since {ts}"),
            Selection::Run(run) => write!(f, "--run {run}"),
        }
    }
}

impl Selection {
    fn matches(&self, body: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Fields {
            ts: Option<String>,
            run_id: Option<String>,
        }
        let Ok(fields) = serde_json::from_slice::<Fields>(body) else {
            return false;
        };
        match self {
            // Both are the ledger's fixed-width UTC form, so text order is time order.
            Selection::Since(since) => fields.ts.is_some_and(|ts| ts.as_str() >= since.as_str()),
            Selection::Run(run) => fields.run_id.as_deref() == Some(run.as_str()),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        match self {
            Selection::Since(ts) => json!({ "since": ts }),
            Selection::Run(run) => json!({ "run": run }),
        }
    }
}

/// A bundle in memory, file name → bytes, ready to be written as a tar archive.
#[derive(Debug, Clone)]
pub struct AuditBundle {
    files: BTreeMap<String, Vec<u8>>,
    /// How many rows it holds.
    pub rows: u64,
    /// The size of the tree its proofs are against (the newest checkpoint's).
    pub tree_size: u64,
}

impl AuditBundle {
    /// Writes the archive: files in name order, mode 0644, owner 0, time 0, so the same
    /// bundle always gives the same bytes.
    pub fn write_tar(&self, out: impl Write) -> Result<(), BundleError> {
        let io = |source| BundleError::Io {
            during: "writing the bundle".to_owned(),
            source,
        };
        let mut builder = tar::Builder::new(out);
        for (name, bytes) in &self.files {
            let mut header = tar::Header::new_ustar();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_uid(0);
            header.set_gid(0);
            header.set_entry_type(tar::EntryType::Regular);
            builder
                .append_data(&mut header, name, bytes.as_slice())
                .map_err(io)?;
        }
        builder.into_inner().map_err(io)?.flush().map_err(io)
    }

    /// The file names, in archive order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
}

impl Ledger {
    /// Builds the auditor's bundle of the rows `selection` picks: each proved in the
    /// newest checkpoint's tree; the first checkpoint that covered them, and each of
    /// `anchors` (checkpoint notes kept elsewhere), proved consistent with it. Every
    /// checkpoint must verify under `trusted`, whose signers are listed in the bundle.
    pub fn audit_bundle(
        &self,
        selection: &Selection,
        anchors: &[Vec<u8>],
        trusted: &[VerifierKey],
    ) -> Result<AuditBundle, BundleError> {
        let checkpoints = self.checkpoints()?;
        let newest = checkpoints
            .last()
            .ok_or_else(|| LedgerError::NoCheckpoint {
                path: self.path().to_path_buf(),
            })?;
        let body = open_checkpoint(newest.note.as_bytes(), trusted).map_err(|err| {
            BundleError::Untrusted {
                what: format!("the newest checkpoint (size {})", newest.size),
                detail: err.to_string(),
            }
        })?;

        let mut rows = Vec::new();
        let mut seqs = Vec::new();
        self.for_each_row(1, |row| {
            if selection.matches(row.body) {
                rows.extend_from_slice(row.body);
                rows.push(b'\n');
                seqs.push(row.seq);
            }
            Ok(true)
        })?;
        let Some(&last) = seqs.last() else {
            return Err(BundleError::Empty {
                selection: selection.to_string(),
            });
        };
        if last > newest.size {
            return Err(BundleError::Unsigned {
                seq: last,
                size: newest.size,
            });
        }

        let mut proofs = Vec::new();
        for &seq in &seqs {
            let mut proof = self.prove_inclusion(seq, Some(newest.size))?;
            proof.checkpoint = None;
            serde_json::to_writer(&mut proofs, &proof).map_err(json_error)?;
            proofs.push(b'\n');
        }

        let older = older_checkpoints(&checkpoints, newest, last, anchors, trusted)?;
        let mut files = BTreeMap::new();
        for (size, note) in &older {
            let mut proof = self.prove_consistency(*size, Some(newest.size))?;
            proof.old_checkpoint = None;
            proof.new_checkpoint = None;
            let mut text = serde_json::to_vec_pretty(&proof).map_err(json_error)?;
            text.push(b'\n');
            files.insert(format!("{CONSISTENCY}{size}.json"), text);
            files.insert(format!("{OLDER_CHECKPOINTS}{size}.note"), note.clone());
        }

        let notes: Vec<&[u8]> = std::iter::once(newest.note.as_bytes())
            .chain(older.values().map(Vec::as_slice))
            .collect();
        let signers: Vec<String> = trusted
            .iter()
            .filter(|key| {
                notes
                    .iter()
                    .any(|note| open_checkpoint(note, std::slice::from_ref(*key)).is_ok())
            })
            .map(ToString::to_string)
            .collect();
        let manifest = json!({
            "format": "attest-audit-bundle/1",
            "origin": body.origin,
            "selection": selection.to_json(),
            "rows": seqs.len(),
            "first_seq": seqs.first(),
            "last_seq": last,
            "tree_size": newest.size,
            "older_checkpoints": older.keys().collect::<Vec<_>>(),
        });
        let mut manifest = serde_json::to_vec_pretty(&manifest).map_err(json_error)?;
        manifest.push(b'\n');

        files.insert(ROWS.to_owned(), rows);
        files.insert(PROOFS.to_owned(), proofs);
        files.insert(CHECKPOINT.to_owned(), newest.note.clone().into_bytes());
        files.insert(KEYS.to_owned(), (signers.join("\n") + "\n").into_bytes());
        files.insert(MANIFEST.to_owned(), manifest);
        files.insert(
            README.to_owned(),
            readme(&body.origin, selection, seqs.len(), newest.size).into_bytes(),
        );
        Ok(AuditBundle {
            files,
            rows: seqs.len() as u64,
            tree_size: newest.size,
        })
    }
}

/// The older checkpoints to prove consistent with `newest`, by size: the first stored
/// one that covered the newest selected row, and every anchor (each verified, none
/// larger than `newest`). The newest itself is not repeated.
fn older_checkpoints(
    stored: &[StoredCheckpoint],
    newest: &StoredCheckpoint,
    last: u64,
    anchors: &[Vec<u8>],
    trusted: &[VerifierKey],
) -> Result<BTreeMap<u64, Vec<u8>>, BundleError> {
    let mut older = BTreeMap::new();
    if let Some(first) = stored.iter().find(|c| c.size >= last) {
        if first.size < newest.size {
            older.insert(first.size, first.note.clone().into_bytes());
        }
    }
    for note in anchors {
        let size = read_checkpoint_unverified(note)
            .map_err(|err| BundleError::Untrusted {
                what: "an anchored checkpoint".to_owned(),
                detail: err.to_string(),
            })?
            .size;
        if size > newest.size {
            return Err(BundleError::AnchorAhead {
                size,
                newest: newest.size,
            });
        }
        open_checkpoint(note, trusted).map_err(|err| BundleError::Untrusted {
            what: format!("the anchored checkpoint of size {size}"),
            detail: err.to_string(),
        })?;
        if size < newest.size {
            older.entry(size).or_insert_with(|| note.clone());
        }
    }
    Ok(older)
}

fn json_error(err: serde_json::Error) -> BundleError {
    BundleError::Io {
        during: "writing the bundle's JSON".to_owned(),
        source: err.into(),
    }
}

/// The bundle's README: what is inside and the two ways to check it.
fn readme(origin: &str, selection: &Selection, rows: usize, size: u64) -> String {
    format!(
        "# Attest audit bundle\n\n\
         The rows of the ledger `{origin}` selected by `{selection}`: {rows} rows, each proved \
         in the signed tree of {size} entries.\n\n\
         | file | what it is |\n|---|---|\n\
         | `rows.jsonl` | the rows, one per line: exactly the bytes that were hashed (RFC 8785 JSON) |\n\
         | `proofs.jsonl` | line i: the RFC 9162 inclusion proof of line i of `rows.jsonl` (`entry_hash` is the SHA-256 of that line) |\n\
         | `checkpoint.note` | the newest checkpoint: a C2SP signed note (origin, tree size, base64 root), Ed25519 |\n\
         | `checkpoints/N.note`, `consistency/N.json` | an older signed checkpoint (the one that first covered these rows, or an anchor kept elsewhere) and the RFC 9162 consistency proof from it to `checkpoint.note` |\n\
         | `keys.txt` | the verifier keys that signed; compare them with keys you obtained elsewhere, never trust them from here |\n\
         | `manifest.json` | origin, selection, counts |\n\n\
         ## Check it offline\n\n\
         With Attest: `attest verify-bundle BUNDLE.tar --vkey 'KEY'` (exit 0: every row is in the signed tree; \
         exit 1: what failed, naming the file and seq).\n\n\
         Without Attest: `python3 verify_bundle.py BUNDLE.tar 'KEY'` (Attest's `docs/verify_bundle.py`, \
         Python's standard library and the `cryptography` package).\n\n\
         By hand: for each line of `rows.jsonl`, SHA-256 it; the leaf is SHA-256(0x00 || hash); the proof's \
         hashes lead to the root in `checkpoint.note` (RFC 9162 section 2.1.3.2); the note's signature \
         verifies under the key (C2SP signed-note, as Go's golang.org/x/mod/sumdb/note).\n"
    )
}

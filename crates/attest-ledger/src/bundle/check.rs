//! Checking a bundle offline: every row hashed and proved in the signed tree, every
//! older checkpoint signed and consistent with it. Only the caller's keys are trusted.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use serde::Serialize;

use super::{
    BundleError, CHECKPOINT, CONSISTENCY, KEYS, MANIFEST, OLDER_CHECKPOINTS, PROOFS, README, ROWS,
};
use crate::{entry_hash, open_checkpoint, to_hex, ConsistencyProof, InclusionProof, VerifierKey};

/// The largest bundle a checker reads (the caller enforces it on the file).
pub const MAX_BUNDLE_BYTES: u64 = 1 << 30;
/// The most files a bundle may hold (rows are lines of one file, so few are needed).
const MAX_FILES: usize = 10_000;
/// Problems reported before the checker stops listing them.
const MAX_PROBLEMS: usize = 100;

/// One thing in a bundle that does not check, named by file, line and seq.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BundleProblem {
    /// The file inside the bundle.
    pub file: String,
    /// The 1-based line in that file, where it is a line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The row's seq, where one is concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

impl fmt::Display for BundleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, " line {line}")?;
        }
        if let Some(seq) = self.seq {
            write!(f, " (seq {seq})")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// What checking a bundle found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BundleReport {
    /// The log's origin, from the newest checkpoint.
    pub origin: Option<String>,
    /// Rows checked.
    pub rows: u64,
    /// The size of the signed tree the rows are proved in.
    pub tree_size: Option<u64>,
    /// Older checkpoints proved consistent with it, by size.
    pub older_checkpoints: Vec<u64>,
    /// The trusted keys that verified the newest checkpoint.
    pub signers: Vec<String>,
    /// Everything that failed; empty when the bundle checks.
    pub problems: Vec<BundleProblem>,
}

impl BundleReport {
    /// True when nothing failed and there was something to check.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.rows > 0
    }

    fn problem(&mut self, file: &str, line: Option<u64>, seq: Option<u64>, detail: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(BundleProblem {
                file: file.to_owned(),
                line,
                seq,
                detail,
            });
        }
    }
}

/// Checks a bundle's bytes against `trusted` verifier keys. An `Err` means the bytes
/// are not a bundle at all; findings are the report's problems.
pub fn check_bundle(bytes: &[u8], trusted: &[VerifierKey]) -> Result<BundleReport, BundleError> {
    let files = read_files(bytes)?;
    let mut report = BundleReport::default();
    for name in files.keys() {
        if !known(name) {
            report.problem(name, None, None, "not a file a bundle holds".to_owned());
        }
    }
    let text = |name: &str| files.get(name).map(|b| String::from_utf8_lossy(b));
    let Some(newest) = files.get(CHECKPOINT) else {
        report.problem(CHECKPOINT, None, None, "missing".to_owned());
        return Ok(report);
    };
    let body = match open_checkpoint(newest, trusted) {
        Ok(body) => body,
        Err(err) => {
            report.problem(CHECKPOINT, None, None, err.to_string());
            return Ok(report);
        }
    };
    report.origin = Some(body.origin.clone());
    report.tree_size = Some(body.size);
    report.signers = trusted
        .iter()
        .filter(|key| open_checkpoint(newest, std::slice::from_ref(*key)).is_ok())
        .map(ToString::to_string)
        .collect();
    let newest_note = String::from_utf8_lossy(newest).into_owned();

    let rows = files.get(ROWS).map(|b| split_lines(b)).unwrap_or_default();
    let proofs = files
        .get(PROOFS)
        .map(|b| split_lines(b))
        .unwrap_or_default();
    if rows.is_empty() {
        report.problem(ROWS, None, None, "missing or empty".to_owned());
    }
    if rows.len() != proofs.len() {
        report.problem(
            PROOFS,
            None,
            None,
            format!("{} proofs for {} rows", proofs.len(), rows.len()),
        );
    }
    let mut previous = 0;
    for (i, (row, proof)) in rows.iter().zip(&proofs).enumerate() {
        let line = Some(i as u64 + 1);
        let seq = match row_seq(row) {
            Ok(seq) => seq,
            Err(detail) => {
                report.problem(ROWS, line, None, detail);
                continue;
            }
        };
        if seq <= previous {
            report.problem(
                ROWS,
                line,
                Some(seq),
                format!("seq {seq} follows seq {previous}"),
            );
        }
        previous = seq;
        let mut proof: InclusionProof = match serde_json::from_slice(proof) {
            Ok(proof) => proof,
            Err(err) => {
                report.problem(
                    PROOFS,
                    line,
                    Some(seq),
                    format!("not an inclusion proof: {err}"),
                );
                continue;
            }
        };
        if proof.seq != seq {
            report.problem(
                PROOFS,
                line,
                Some(seq),
                format!("proves seq {}, the row is seq {seq}", proof.seq),
            );
            continue;
        }
        let hash = to_hex(&entry_hash(row));
        if proof.entry_hash != hash {
            report.problem(
                ROWS,
                line,
                Some(seq),
                format!(
                    "the row hashes to {hash}, its proof is for {}",
                    proof.entry_hash
                ),
            );
            continue;
        }
        proof.checkpoint = Some(newest_note.clone());
        if let Err(err) = proof.check(trusted) {
            report.problem(PROOFS, line, Some(seq), err.to_string());
            continue;
        }
        report.rows += 1;
    }

    for (name, note) in files.range(OLDER_CHECKPOINTS.to_owned()..) {
        let Some(size) = numbered(name, OLDER_CHECKPOINTS, ".note") else {
            continue;
        };
        let proof_name = format!("{CONSISTENCY}{size}.json");
        let Some(proof) = files.get(&proof_name) else {
            report.problem(&proof_name, None, None, "missing".to_owned());
            continue;
        };
        let mut proof: ConsistencyProof = match serde_json::from_slice(proof) {
            Ok(proof) => proof,
            Err(err) => {
                report.problem(
                    &proof_name,
                    None,
                    None,
                    format!("not a consistency proof: {err}"),
                );
                continue;
            }
        };
        if proof.old_size != size {
            report.problem(
                &proof_name,
                None,
                None,
                format!("proves size {}, not {size}", proof.old_size),
            );
            continue;
        }
        proof.old_checkpoint = Some(String::from_utf8_lossy(note).into_owned());
        proof.new_checkpoint = Some(newest_note.clone());
        match proof.check(trusted) {
            Ok(()) => report.older_checkpoints.push(size),
            Err(err) => report.problem(
                &proof_name,
                None,
                None,
                format!("{name} to {CHECKPOINT}: {err}"),
            ),
        }
    }
    for name in files.keys() {
        if let Some(size) = numbered(name, CONSISTENCY, ".json") {
            if !files.contains_key(&format!("{OLDER_CHECKPOINTS}{size}.note")) {
                report.problem(
                    name,
                    None,
                    None,
                    "no checkpoint of that size beside it".to_owned(),
                );
            }
        }
    }

    // The manifest is not signed; it must still agree with what was checked.
    if let Some(manifest) = text(MANIFEST) {
        let value: serde_json::Value = serde_json::from_str(&manifest).unwrap_or_default();
        if value["rows"].as_u64() != Some(rows.len() as u64)
            || value["tree_size"].as_u64() != Some(body.size)
        {
            report.problem(
                MANIFEST,
                None,
                None,
                "its rows or tree_size disagree with the bundle".to_owned(),
            );
        }
    }
    Ok(report)
}

/// The archive's regular files, name → bytes; anything else is not a bundle.
fn read_files(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, BundleError> {
    if bytes.len() as u64 > MAX_BUNDLE_BYTES {
        return Err(BundleError::NotABundle(format!(
            "{} bytes; a bundle is at most {MAX_BUNDLE_BYTES}",
            bytes.len()
        )));
    }
    let not = |what: String| BundleError::NotABundle(what);
    let mut archive = tar::Archive::new(bytes);
    let mut files = BTreeMap::new();
    let entries = archive
        .entries()
        .map_err(|err| not(format!("not a tar archive: {err}")))?;
    for (i, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|err| not(format!("tar entry {}: {err}", i + 1)))?;
        if files.len() >= MAX_FILES {
            return Err(not(format!("more than {MAX_FILES} files")));
        }
        let name = entry
            .path()
            .map_err(|err| not(format!("tar entry {}: {err}", i + 1)))?
            .to_string_lossy()
            .into_owned();
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(not(format!("{name} is not a regular file")));
        }
        // Bounded by the input: the reader is a slice of `bytes`.
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|source| BundleError::Io {
                during: format!("reading {name} from the bundle"),
                source,
            })?;
        if files.insert(name.clone(), data).is_some() {
            return Err(not(format!("{name} appears twice")));
        }
    }
    if files.is_empty() {
        return Err(not("an empty archive".to_owned()));
    }
    Ok(files)
}

fn known(name: &str) -> bool {
    [README, ROWS, PROOFS, CHECKPOINT, KEYS, MANIFEST].contains(&name)
        || numbered(name, OLDER_CHECKPOINTS, ".note").is_some()
        || numbered(name, CONSISTENCY, ".json").is_some()
}

/// `N` from `PREFIX` `N` `SUFFIX`, canonical digits only.
fn numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// Lines without their `\n`; a last line without one counts too.
fn split_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes.split(|&b| b == b'\n').collect()
}

/// The row's own `seq` field.
fn row_seq(row: &[u8]) -> Result<u64, String> {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_slice::<Seq>(row)
        .map(|s| s.seq)
        .map_err(|err| format!("not a ledger row: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar of `entries`: (name, type, data).
    fn tar_of(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, data) in entries {
            let mut header = tar::Header::new_ustar();
            header.set_entry_type(*kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            if *kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").unwrap();
            }
            builder.append_data(&mut header, name, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn only_regular_files_named_once_make_a_bundle() {
        let regular = tar::EntryType::Regular;
        let link = tar_of(&[(CHECKPOINT, tar::EntryType::Symlink, b"")]);
        assert!(
            matches!(check_bundle(&link, &[]), Err(BundleError::NotABundle(m)) if m.contains("not a regular file"))
        );
        let twice = tar_of(&[(ROWS, regular, b"{}\n"), (ROWS, regular, b"{}\n")]);
        assert!(
            matches!(check_bundle(&twice, &[]), Err(BundleError::NotABundle(m)) if m.contains("twice"))
        );
        assert!(check_bundle(b"", &[]).is_err());
        // An unknown file and no checkpoint: findings, not a pass.
        let odd = tar_of(&[("extra/evil.sh", regular, b"x")]);
        let report = check_bundle(&odd, &[]).unwrap();
        assert!(!report.ok());
        assert!(report.problems.iter().any(|p| p.file == "extra/evil.sh"));
        assert!(report.problems.iter().any(|p| p.file == CHECKPOINT));
    }
}

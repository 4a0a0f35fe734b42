//! An independent recomputation of the chain from `attest export --format jsonl`,
//! with nothing but SHA-256 and a JSON parser.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{attest, demo_ledger};

#[test]
fn exported_lines_hash_to_the_next_prev() {
    let dir = demo_ledger();
    assert_eq!(attest(dir.path(), &["demo"]).status.code(), Some(0));
    let export = attest(dir.path(), &["export", "--format", "jsonl"]);
    assert_eq!(export.status.code(), Some(0));
    let text = String::from_utf8(export.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 12);
    let mut prev = "0".repeat(64);
    for (i, line) in lines.iter().enumerate() {
        let entry: Value = serde_json::from_str(line).unwrap();
        assert_eq!(entry["seq"], i as u64 + 1);
        assert_eq!(entry["v"], 1);
        assert_eq!(entry["prev"], prev.as_str(), "line {}", i + 1);
        prev = hex::encode(Sha256::digest(line.as_bytes()));
    }
    // The last line's hash is the tip verify reports.
    let verify = attest(dir.path(), &["verify", "--json"]);
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["tip"]["hash"], prev.as_str());
}

#[test]
fn exported_lines_are_canonical_json_with_sorted_keys() {
    let dir = demo_ledger();
    let export = attest(dir.path(), &["export"]);
    let text = String::from_utf8(export.stdout).unwrap();
    for line in text.lines() {
        // With ASCII keys and integer numbers, serde_json's compact output of its sorted
        // map is exactly the RFC 8785 form: an independent check of the stored bytes.
        let value: Value = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&value).unwrap(), line);
        assert!(line.starts_with("{\"action_id\":"), "{line}");
    }
}

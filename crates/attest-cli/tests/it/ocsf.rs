//! `attest export --format ocsf`: one OCSF API Activity event per entry, each naming
//! the entry's seq and hash so a SIEM's copy can be checked against the ledger.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{attest, demo_ledger, expect_ok};

#[test]
fn each_entry_is_an_api_activity_event_with_its_seq_and_hash() {
    let dir = demo_ledger();
    let jsonl = expect_ok(&attest(dir.path(), &["export"]));
    let ocsf = expect_ok(&attest(dir.path(), &["export", "--format", "ocsf"]));
    let bodies: Vec<&str> = jsonl.lines().collect();
    let events: Vec<Value> = ocsf
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), bodies.len());
    assert!(!events.is_empty());
    for (body, event) in bodies.iter().zip(&events) {
        let entry: Value = serde_json::from_str(body).unwrap();
        let hash = hex::encode(Sha256::digest(body.as_bytes()));
        assert_eq!(event["class_uid"], 6003, "{event}");
        assert_eq!(event["category_uid"], 6);
        let activity = event["activity_id"].as_u64().unwrap();
        assert_eq!(event["type_uid"], 600_300 + activity);
        assert_eq!(event["metadata"]["sequence"], entry["seq"]);
        assert_eq!(event["metadata"]["uid"], hash.as_str());
        assert_eq!(event["unmapped"]["attest"]["hash"], hash.as_str());
        assert_eq!(event["unmapped"]["attest"]["prev"], entry["prev"]);
        assert_eq!(event["api"]["service"]["name"], entry["system"]);
        assert_eq!(event["api"]["operation"], entry["verb"]);
        assert_eq!(event["metadata"]["original_time"], entry["ts"]);
        assert!(
            event["time"].as_u64().unwrap() > 1_700_000_000_000,
            "{event}"
        );
        assert!(event["metadata"]["product"]["name"] == "Attest");
        // Params never travel: only the hash the entry already holds.
        assert!(!event.to_string().contains("\"params\""), "{event}");
    }
    // The demo refuses nothing but rejects a payment: that one is blocked.
    let blocked: Vec<&Value> = events.iter().filter(|e| e["disposition_id"] == 2).collect();
    assert!(
        blocked.iter().any(|e| e["api"]["operation"] == "pay"),
        "{ocsf}"
    );
}

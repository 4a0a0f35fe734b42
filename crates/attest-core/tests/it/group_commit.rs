//! Group commit through the pipeline: many concurrent actions, one linear chain, and
//! every receipt names the row that holds its action.

use std::collections::HashMap;
use std::sync::Arc;

use attest_core::{Attest, ToolError};

use crate::support::Ran;
use attest_ledger::{entry_hash, to_hex, Ledger, LedgerOptions};
use attest_policy::{Action, Verb};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_times_a_thousand_actions_make_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|task| {
            let attest = attest.clone();
            tokio::spawn(async move {
                let mut receipts = Vec::with_capacity(1000);
                for i in 0..1000 {
                    let action = Action::new("crm", Verb::Update)
                        .with_params(json!({"id": format!("{task}-{i}")}));
                    let receipt = attest
                        .call(action)
                        .run(|_| async { Ok::<_, ToolError>(json!({"id": 1})) })
                        .await
                        .unwrap()
                        .expect_ran();
                    receipts.push(receipt);
                }
                receipts
            })
        })
        .collect();
    let mut receipts = Vec::new();
    for task in tasks {
        receipts.extend(task.await.unwrap());
    }
    assert_eq!(receipts.len(), 64_000);

    let report = ledger.verify().unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    // Each action: an intent row, then its outcome.
    assert_eq!(report.checked, 128_000);

    let mut rows: HashMap<u64, (String, String)> = HashMap::new();
    ledger
        .for_each_row(1, |row| {
            let body: Value = serde_json::from_slice(row.body).unwrap();
            let action_id = body["action_id"].as_str().unwrap().to_owned();
            rows.insert(row.seq, (to_hex(&entry_hash(row.body)), action_id));
            Ok(true)
        })
        .unwrap();
    let mut seqs: Vec<u64> = receipts.iter().map(|r| r.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 64_000);
    for receipt in &receipts {
        let (hash, action_id) = &rows[&receipt.seq];
        assert_eq!(&receipt.entry_hash, hash, "seq {}", receipt.seq);
        assert_eq!(&receipt.action_id, action_id, "seq {}", receipt.seq);
    }
}

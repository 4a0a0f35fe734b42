//! Verify's walk reports the intents no later row of their action follows, on both
//! stores: read off the fast column check, and off the full parse where a body escapes
//! something (the fast path leaves those to it).

use attest_ledger::{Record, SigningKey, VerifyOptions, INTENT};

use crate::both::StoreTester;
use crate::sample_record;

fn intent(n: u64, action: &str) -> Record {
    let mut record = sample_record(n);
    record.action_id = action.to_owned();
    record.execution.status = INTENT.to_owned();
    record.execution.result_hash = None;
    record.verification = None;
    record
}

fn outcome(n: u64, action: &str) -> Record {
    Record {
        action_id: action.to_owned(),
        ..sample_record(n)
    }
}

/// A reason with a quote in it: the body escapes it, so the full parse reads the row.
fn escaped(mut record: Record) -> Record {
    record.reasons = vec!["said \"stop\"".to_owned()];
    record
}

#[test]
fn verify_reports_each_intent_left_without_an_outcome() {
    StoreTester::new("verify_reports_each_intent_left_without_an_outcome", 0).run(|case| {
        let ledger = &case.ledger;
        let mut records = vec![
            intent(1, "closed"),
            outcome(2, "closed"),
            escaped(intent(3, "open-escaped")),
            intent(4, "open-plain"),
            intent(5, "closed-by-escaped"),
        ];
        // Enough rows that the walk runs on a worker thread beside the reader.
        records.extend((6..1600).map(sample_record));
        records.push(escaped(outcome(1600, "closed-by-escaped")));
        ledger.append_batch(&records).unwrap();

        let report = ledger.verify().unwrap();
        assert!(report.is_intact(), "{}: {:?}", case.name(), report.problems);
        let open: Vec<(u64, &str, &str, &str)> = report
            .open_intents
            .iter()
            .map(|i| {
                (
                    i.seq,
                    i.action_id.as_str(),
                    i.system.as_str(),
                    i.verb.as_str(),
                )
            })
            .collect();
        assert_eq!(
            open,
            [
                (3, "open-escaped", "stripe", "pay"),
                (4, "open-plain", "gmail", "send")
            ],
            "{}",
            case.name()
        );

        // Since a checkpoint: only the rows after it are searched.
        let (key, _) = SigningKey::generate("attest.test/intents").unwrap();
        ledger.checkpoint(&key).unwrap();
        ledger
            .append_batch(&[intent(1601, "after"), outcome(1602, "open-plain")])
            .unwrap();
        let trusted = [key.verifier().clone()];
        let since = ledger
            .verify_with(VerifyOptions {
                trusted: &trusted,
                since_checkpoint: true,
                ..VerifyOptions::default()
            })
            .unwrap();
        assert!(since.is_intact(), "{}: {:?}", case.name(), since.problems);
        let open: Vec<&str> = since
            .open_intents
            .iter()
            .map(|i| i.action_id.as_str())
            .collect();
        assert_eq!(open, ["after"], "{}", case.name());
        // The whole ledger again: "open-plain" closed by its late outcome.
        let whole = ledger.verify().unwrap();
        let open: Vec<&str> = whole
            .open_intents
            .iter()
            .map(|i| i.action_id.as_str())
            .collect();
        assert_eq!(open, ["open-escaped", "after"], "{}", case.name());
    });
}

//! Counters and run / action id lookups are filed in bulk (every 64 entries, in the
//! append's transaction); readers take in the entries not filed yet. What a reader
//! sees is the same on either side of a filing, after a batch, after a prune, and in
//! a copy.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use attest_ledger::{Counts, Filter, Ledger, LedgerOptions, SigningKey};

use crate::sample_record;

/// The counts a ledger's rows add up to, tallied here from the rows' columns.
fn tally(ledger: &Ledger) -> Counts {
    let mut counts = Counts::default();
    ledger
        .for_each_row(1, |row| {
            counts.total += 1;
            let bump = |map: &mut BTreeMap<String, u64>, key: Option<&str>| {
                *map.entry(key.unwrap_or("none").to_owned()).or_default() += 1;
            };
            bump(&mut counts.by_decision, Some(row.decision));
            bump(&mut counts.by_level, row.level);
            bump(&mut counts.by_system, Some(row.system));
            bump(&mut counts.by_agent, row.agent);
            let hour = counts.by_hour.entry(row.ts[..13].to_owned()).or_default();
            *hour.entry(row.decision.to_owned()).or_default() += 1;
            Ok(true)
        })
        .unwrap();
    counts
}

fn seqs(ledger: &Ledger, filter: Filter) -> Vec<u64> {
    let mut seqs: Vec<u64> = ledger
        .list_filtered(&filter, 10_000)
        .unwrap()
        .into_iter()
        .map(|row| row.seq)
        .collect();
    seqs.reverse();
    seqs
}

fn by_action(ledger: &Ledger, n: u64) -> Vec<u64> {
    seqs(
        ledger,
        Filter {
            action_id: Some(format!("action-{n}")),
            ..Filter::default()
        },
    )
}

fn by_run(ledger: &Ledger) -> Vec<u64> {
    seqs(
        ledger,
        Filter {
            run: Some("run-1".to_owned()),
            ..Filter::default()
        },
    )
}

#[test]
fn counts_and_lookups_are_the_same_on_either_side_of_a_filing() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default()).unwrap();
    for n in 1..=130 {
        ledger.append(&sample_record(n)).unwrap();
        // Before the first filing, at it, just after, and past the second.
        if [1, 63, 64, 65, 127, 128, 130].contains(&n) {
            assert_eq!(ledger.counts().unwrap(), tally(&ledger), "after {n} rows");
            assert_eq!(by_run(&ledger), (1..=n).collect::<Vec<_>>(), "after {n}");
            for m in [1, n / 2 + 1, n] {
                assert_eq!(by_action(&ledger, m), [m], "action {m} after {n} rows");
            }
            assert!(by_action(&ledger, n + 1).is_empty());
        }
    }
    // Combined with the other filters, and paged by seq.
    let stripe_in_run = seqs(
        &ledger,
        Filter {
            run: Some("run-1".to_owned()),
            system: Some("stripe".to_owned()),
            before: Some(100),
            ..Filter::default()
        },
    );
    assert_eq!(stripe_in_run, (1..100).step_by(2).collect::<Vec<_>>());
}

#[test]
fn a_batch_is_filed_with_its_commit_and_a_second_connection_sees_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let records: Vec<_> = (1..=1000).map(sample_record).collect();
    ledger.append_batch(&records).unwrap();
    let other = Ledger::open(&path, LedgerOptions::default()).unwrap();
    // The other connection appends 10 rows onto a tail it did not write.
    for n in 1001..=1010 {
        other.append(&sample_record(n)).unwrap();
    }
    for reader in [&ledger, &other] {
        assert_eq!(reader.counts().unwrap(), tally(reader));
        assert_eq!(reader.counts().unwrap().total, 1010);
        assert_eq!(by_action(reader, 500), [500]);
        assert_eq!(by_action(reader, 1005), [1005]);
        assert_eq!(by_run(reader).len(), 1010);
    }
    // The first connection's cached edge is stale; its next appends file the lot once.
    for n in 1011..=1100 {
        ledger.append(&sample_record(n)).unwrap();
    }
    assert_eq!(other.counts().unwrap(), tally(&other));
    assert_eq!(other.counts().unwrap().total, 1100);
    assert_eq!(by_run(&other), (1..=1100).collect::<Vec<_>>());
}

#[test]
fn pruned_rows_stay_counted_even_if_they_were_not_filed_yet() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default()).unwrap();
    // 70 rows: 64 filed, 6 not yet.
    for n in 1..=70 {
        ledger.append(&sample_record(n)).unwrap();
    }
    let before = ledger.counts().unwrap();
    let (key, _) = SigningKey::generate("attest.test/filing").unwrap();
    let report = ledger
        .prune(SystemTime::now() + Duration::from_secs(3600), &key)
        .unwrap();
    assert_eq!(report.pruned_through, 69, "all but the newest row");
    assert_eq!(ledger.counts().unwrap(), before);
    assert!(by_action(&ledger, 68).is_empty(), "its row is gone");
    assert_eq!(by_action(&ledger, 70), [70]);
    assert_eq!(by_run(&ledger), [70]);
    for n in 71..=140 {
        ledger.append(&sample_record(n)).unwrap();
    }
    assert_eq!(ledger.counts().unwrap().total, 140);
    assert_eq!(by_run(&ledger), (70..=140).collect::<Vec<_>>());
}

/// A copy files what it copies in steps of 4,096 entries: 5,000 rows cross a step.
#[test]
fn a_copy_files_every_row_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    let source = Ledger::open(dir.path().join("a.sqlite"), LedgerOptions::default()).unwrap();
    let records: Vec<_> = (1..=5000).map(sample_record).collect();
    source.append_batch(&records).unwrap();
    let target = Ledger::open(dir.path().join("b.sqlite"), LedgerOptions::default()).unwrap();
    assert_eq!(source.copy_to(&target).unwrap(), 5000);
    assert_eq!(target.counts().unwrap(), source.counts().unwrap());
    assert_eq!(target.counts().unwrap(), tally(&target));
    for n in [99, 4096, 4097, 5000] {
        assert_eq!(by_action(&target, n), [n]);
    }
    assert_eq!(by_run(&target).len(), 5000);
    // Filed through the copy's tip: the next appends file only their own rows.
    for n in 5001..=5070 {
        target.append(&sample_record(n)).unwrap();
    }
    assert_eq!(target.counts().unwrap(), tally(&target));
    assert_eq!(target.counts().unwrap().total, 5070);
}

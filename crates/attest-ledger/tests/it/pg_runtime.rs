//! A PostgreSQL ledger used from async code: every public call, and dropping the
//! ledger, on a tokio runtime's own thread (the blocking client would panic there if
//! the store did not move its work off the runtime).

use std::time::{Duration, SystemTime};

use attest_ledger::{Filter, Ledger, LedgerOptions, SigningKey};

use crate::{pg_db, sample_record};

/// Opens, appends, reads, checkpoints, prunes, copies and drops, all on this thread.
fn every_call_here(url: &str, dir: &std::path::Path) {
    let ledger = Ledger::open(url, LedgerOptions::default()).unwrap();
    for n in 1..=3 {
        assert_eq!(ledger.append(&sample_record(n)).unwrap().seq, n);
    }
    let batch: Vec<_> = (4..=70).map(sample_record).collect();
    assert_eq!(ledger.append_batch(&batch).unwrap().len(), 67);
    assert_eq!(ledger.tip().unwrap().unwrap().0, 70);
    assert!(ledger.verify().unwrap().is_intact());
    assert_eq!(ledger.list(5).unwrap().len(), 5);
    let by_action = Filter {
        action_id: Some("action-7".into()),
        ..Filter::default()
    };
    assert_eq!(ledger.list_filtered(&by_action, 10).unwrap()[0].seq, 7);
    assert_eq!(ledger.counts().unwrap().total, 70);
    let mut seen = Vec::new();
    ledger
        .for_each_row_at(&[2, 9], |row| {
            seen.push(row.seq);
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, [2, 9]);
    let key = SigningKey::generate("attest.test/runtime").unwrap().0;
    let (checkpoint, new) = ledger.checkpoint(&key).unwrap();
    assert!(new);
    assert_eq!(checkpoint.size, 70);
    let later = SystemTime::now() + Duration::from_secs(3600);
    let mut archive = Vec::new();
    let pruned = ledger.prune_archived(later, &key, &mut archive).unwrap();
    assert_eq!(pruned.pruned_through, 69);
    assert!(ledger.verify().unwrap().is_intact());
    let copy = Ledger::open(dir.join("copy.sqlite"), LedgerOptions::default()).unwrap();
    assert_eq!(ledger.copy_to(&copy).unwrap(), 1);
    let database = ledger.postgres().unwrap();
    // A connection handed out is the caller's to use off the runtime; taking one and
    // giving it back is safe here.
    drop(database.connect().unwrap());
    drop(database);
    drop(ledger);
    let read_only = Ledger::open_read_only(url).unwrap();
    assert_eq!(read_only.tip().unwrap().unwrap().0, 70);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_ledger_is_used_and_dropped_on_a_multi_thread_runtime() {
    let Some(db) = pg_db("a_postgres_ledger_is_used_and_dropped_on_a_multi_thread_runtime") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    every_call_here(&db.url, dir.path());
}

#[tokio::test(flavor = "current_thread")]
async fn a_postgres_ledger_is_used_and_dropped_on_a_current_thread_runtime() {
    let Some(db) = pg_db("a_postgres_ledger_is_used_and_dropped_on_a_current_thread_runtime")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    every_call_here(&db.url, dir.path());
}

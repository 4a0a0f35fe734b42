//! Ledgers written by earlier releases (committed fixtures) open, are upgraded in
//! place, and still verify under their keys, export the same bytes, and append:
//! `v1-ledger.*`, from the release before schema version 2 (18 rows from `attest demo`,
//! checkpoints at 12 and 18), and `v2-ledger.*`, from the release before schema 3
//! (commit 114149d: `attest demo` twice, a checkpoint after each).

use attest_ledger::{Filter, Ledger, LedgerOptions, VerifierKey, VerifyOptions};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/v1-ledger.sqlite"
);

/// The schema versions `attest_schema` records as applied, in order.
fn applied_migrations(conn: &rusqlite::Connection) -> Vec<u32> {
    conn.prepare("SELECT version FROM attest_schema ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn check(ledger: &Ledger) {
    check_fixture(ledger, "v1-ledger");
}

/// `ledger` verifies under fixture `name`'s key and exports exactly its bodies.
fn check_fixture(ledger: &Ledger, name: &str) {
    let fixture = |ext: &str| format!("{}/tests/fixtures/{name}.{ext}", env!("CARGO_MANIFEST_DIR"));
    let trusted = vec![VerifierKey::load(std::path::Path::new(&fixture("pub"))).unwrap()];
    let report = ledger
        .verify_with(VerifyOptions {
            trusted: &trusted,
            require_signature: true,
            ..VerifyOptions::default()
        })
        .unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
    let mut out = Vec::new();
    ledger.export_jsonl(&mut out).unwrap();
    assert_eq!(out, std::fs::read(fixture("jsonl")).unwrap());
}

#[test]
fn a_ledger_written_by_the_previous_release_opens_upgrades_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    std::fs::copy(FIXTURE, &path).unwrap();
    // Read-only, it reads as it is (no upgrade without a write).
    check(&Ledger::open_read_only(&path).unwrap());
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    check(&ledger);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: String = conn
        .query_row(
            "SELECT value FROM attest_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, attest_ledger::SCHEMA_VERSION.to_string());
    assert_eq!(applied_migrations(&conn), [2, 3, 4, 5, 6, 7]);
    // The counters and the new columns were filled from the existing rows.
    let counts = ledger.counts().unwrap();
    assert_eq!(counts.total, 18);
    assert_eq!(counts.by_agent["demo-agent"], 18);
    let first_action: String = {
        let mut id = String::new();
        ledger
            .for_each_row(1, |row| {
                let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
                id = body["action_id"].as_str().unwrap().to_owned();
                Ok(false)
            })
            .unwrap();
        id
    };
    let rows = ledger
        .list_filtered(
            &Filter {
                action_id: Some(first_action),
                ..Filter::default()
            },
            10,
        )
        .unwrap();
    assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
    assert_eq!(ledger.append(&crate::sample_record(19)).unwrap().seq, 19);
    assert!(ledger.verify().unwrap().is_intact());
    assert_eq!(ledger.counts().unwrap().total, 19);
    drop(ledger);
    // Opening it again changes nothing.
    let again = Ledger::open(&path, LedgerOptions::default()).unwrap();
    assert_eq!(again.counts().unwrap().total, 19);
}

/// The fixture, copied to PostgreSQL, exports the same bytes and verifies under its key.
#[test]
fn the_previous_releases_ledger_copies_to_postgres_unchanged() {
    let Some(db) = crate::pg_db("the_previous_releases_ledger_copies_to_postgres_unchanged") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    std::fs::copy(FIXTURE, &path).unwrap();
    let source = Ledger::open_read_only(&path).unwrap();
    let target = Ledger::open(&db.url, LedgerOptions::default()).unwrap();
    assert_eq!(source.copy_to(&target).unwrap(), 18);
    check(&target);
    assert_eq!(target.counts().unwrap().total, 18);
}

/// A ledger as the previous release (schema 2) leaves it: every entry counted as it was
/// appended, `run` and `action_id` indexed on `entries`, no `lookups` table, no
/// `filed_through`. Made here from 64 rows of this release (all filed at the 64th) by
/// undoing schema 3, which adds nothing else. It opens, is upgraded (indexes dropped,
/// lookups filled from the rows), keeps its counts, finds rows by run and action id,
/// and appends.
#[test]
fn a_schema_2_ledger_opens_upgrades_keeps_its_counts_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    for n in 1..=64 {
        ledger.append(&crate::sample_record(n)).unwrap();
    }
    drop(ledger);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE lookups;
         CREATE INDEX entries_action ON entries (action_id);
         CREATE INDEX entries_run ON entries (run, seq) WHERE run IS NOT NULL;
         DELETE FROM attest_meta WHERE key = 'filed_through';
         DELETE FROM attest_schema WHERE version = 3;
         UPDATE attest_meta SET value = '2' WHERE key = 'schema_version';",
    )
    .unwrap();
    drop(conn);
    // Read-only, it reads as schema 2: counters as stored, listings on its indexes.
    let read_only = Ledger::open_read_only(&path).unwrap();
    assert_eq!(read_only.counts().unwrap().total, 64);
    let by_action = |ledger: &Ledger, n: u64| {
        ledger
            .list_filtered(
                &Filter {
                    action_id: Some(format!("action-{n}")),
                    ..Filter::default()
                },
                10,
            )
            .unwrap()
            .into_iter()
            .map(|row| row.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(by_action(&read_only, 7), [7]);
    drop(read_only);

    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let indexes: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('entries_action', 'entries_run')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 0, "schema 3 drops the per-append indexes");
    assert_eq!(ledger.counts().unwrap().total, 64);
    assert_eq!(by_action(&ledger, 7), [7]);
    for n in 65..=100 {
        ledger.append(&crate::sample_record(n)).unwrap();
    }
    let counts = ledger.counts().unwrap();
    assert_eq!(counts.total, 100);
    assert_eq!(counts.by_agent.values().sum::<u64>(), 100);
    assert_eq!(by_action(&ledger, 7), [7]);
    assert_eq!(by_action(&ledger, 99), [99], "an unfiled row is found too");
    let run = ledger
        .list_filtered(
            &Filter {
                run: Some("run-1".to_owned()),
                ..Filter::default()
            },
            1000,
        )
        .unwrap();
    assert_eq!(run.len(), 100);
    assert!(ledger.verify().unwrap().is_intact());
}

/// The previous release's ledger (schema 2, written by `attest demo` at commit 114149d):
/// read-only it reads as it is; opened, it is upgraded to schema 3 (its counters kept, its
/// run and action ids filed in `lookups`, the two per-append indexes dropped), verifies
/// under its key, exports the same bytes, finds its rows, and appends.
#[test]
fn the_previous_releases_schema_2_ledger_opens_upgrades_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/v2-ledger.sqlite"
    );
    std::fs::copy(fixture, &path).unwrap();
    let read_only = Ledger::open_read_only(&path).unwrap();
    check_fixture(&read_only, "v2-ledger");
    let before = read_only.counts().unwrap();
    let rows = before.total;
    assert!(rows > 0);
    drop(read_only);

    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    check_fixture(&ledger, "v2-ledger");
    assert_eq!(ledger.counts().unwrap(), before, "the counters carry over");
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(applied_migrations(&conn), [2, 3, 4, 5, 6, 7]);
    let mut firsts = Vec::new();
    ledger
        .for_each_row(1, |row| {
            firsts.push((row.seq, row.action_id.unwrap().to_owned()));
            Ok(true)
        })
        .unwrap();
    for (seq, action_id) in &firsts {
        let found = ledger
            .list_filtered(
                &Filter {
                    action_id: Some(action_id.clone()),
                    ..Filter::default()
                },
                100,
            )
            .unwrap();
        assert!(found.iter().any(|row| row.seq == *seq), "{action_id}");
    }
    assert_eq!(
        ledger.append(&crate::sample_record(1)).unwrap().seq,
        rows + 1
    );
    assert!(ledger.verify().unwrap().is_intact());
    assert_eq!(ledger.counts().unwrap().total, rows + 1);
}

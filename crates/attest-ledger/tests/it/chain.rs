use attest_ledger::{
    entry_hash, from_hex, to_hex, Ledger, LedgerError, LedgerOptions, GENESIS, SCHEMA_VERSION,
};
use serde_json::Value;

use crate::both::StoreTester;
use crate::{ledger_with, sample_record};

#[test]
fn appends_link_each_body_to_the_previous_hash() {
    StoreTester::new("appends_link_each_body_to_the_previous_hash", 0).run(|case| {
        let ledger = &case.ledger;
        let first = ledger.append(&sample_record(1)).unwrap();
        let second = ledger.append(&sample_record(2)).unwrap();
        assert_eq!((first.seq, second.seq), (1, 2));

        let mut bodies = Vec::new();
        ledger.export_jsonl(&mut bodies).unwrap();
        let lines: Vec<&[u8]> = bodies
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(entry_hash(lines[0]), first.hash);
        assert_eq!(entry_hash(lines[1]), second.hash);

        let one: Value = serde_json::from_slice(lines[0]).unwrap();
        let two: Value = serde_json::from_slice(lines[1]).unwrap();
        assert_eq!(one["v"], 1);
        assert_eq!(one["prev"], to_hex(&GENESIS));
        assert_eq!(two["prev"], to_hex(&first.hash));
        assert_eq!(two["seq"], 2);
        assert_eq!(from_hex(two["prev"].as_str().unwrap()), Some(first.hash));
        // Absent optional fields are left out, not written as null.
        assert!(one.get("owner").is_none());
        assert!(!String::from_utf8_lossy(lines[0]).contains("null"));
    });
}

#[test]
fn stored_bodies_are_canonical_json() {
    StoreTester::new("stored_bodies_are_canonical_json", 5).run(|case| {
        let mut bodies = Vec::new();
        case.ledger.export_jsonl(&mut bodies).unwrap();
        for line in bodies.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let value: Value = serde_json::from_slice(line).unwrap();
            assert_eq!(attest_ledger::canonical_bytes(&value).unwrap(), line);
        }
    });
}

#[test]
fn an_intact_ledger_verifies_and_reports_its_tip() {
    StoreTester::new("an_intact_ledger_verifies_and_reports_its_tip", 50).run(|case| {
        let report = case.ledger.verify().unwrap();
        assert!(report.is_intact(), "{}: {:?}", case.name(), report.problems);
        assert_eq!(report.checked, 50);
        assert_eq!(report.tip, case.ledger.tip().unwrap());
    });
}

#[test]
fn listing_reads_columns_newest_first() {
    StoreTester::new("listing_reads_columns_newest_first", 10).run(|case| {
        let rows = case.ledger.list(3).unwrap();
        let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![10, 9, 8], "{}", case.name());
        assert_eq!(rows[0].system, "gmail");
        assert_eq!(rows[0].level.as_deref(), Some("acknowledged"));
    });
}

#[test]
fn reopening_continues_the_same_chain() {
    StoreTester::new("reopening_continues_the_same_chain", 3).run(|case| {
        let ledger = case.reopen();
        assert_eq!(
            ledger.append(&sample_record(4)).unwrap().seq,
            4,
            "{}",
            case.name()
        );
        assert!(ledger.verify().unwrap().is_intact());
        // The ledger that was open chains onto the other's row, not its cached tip.
        assert_eq!(
            case.ledger.append(&sample_record(5)).unwrap().seq,
            5,
            "{}",
            case.name()
        );
        assert!(case.ledger.verify().unwrap().is_intact());
    });
}

#[test]
fn a_directory_is_not_a_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let err = Ledger::open(dir.path(), LedgerOptions::default()).unwrap_err();
    assert!(matches!(err, LedgerError::IsDirectory { .. }), "{err}");
}

#[test]
fn a_missing_ledger_is_not_created_when_asked_not_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.sqlite");
    let options = LedgerOptions {
        create: false,
        ..LedgerOptions::default()
    };
    let err = Ledger::open(&path, options).unwrap_err();
    assert!(matches!(err, LedgerError::NotFound { .. }), "{err}");
    assert!(!path.exists());
}

#[test]
fn a_corrupt_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    std::fs::write(
        &path,
        b"this is not a database, just text that is long enough",
    )
    .unwrap();
    let err = Ledger::open(&path, LedgerOptions::default()).unwrap_err();
    assert!(matches!(err, LedgerError::Sqlite { .. }), "{err}");
    assert!(err.to_string().contains("ledger.sqlite"), "{err}");
}

#[test]
fn another_schema_version_is_refused() {
    let (dir, ledger) = ledger_with(1);
    drop(ledger);
    let path = dir.path().join("ledger.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE attest_meta SET value = '99' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    drop(conn);
    let err = Ledger::open(&path, LedgerOptions::default()).unwrap_err();
    match err {
        LedgerError::SchemaVersion {
            found, expected, ..
        } => {
            assert_eq!(found, "99");
            assert_eq!(expected, SCHEMA_VERSION);
        }
        other => panic!("expected a schema version error, got {other}"),
    }
}

#[test]
fn another_programs_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("CREATE TABLE customers (id INTEGER)", [])
        .unwrap();
    drop(conn);
    let err = Ledger::open(&path, LedgerOptions::default()).unwrap_err();
    assert!(matches!(err, LedgerError::SchemaVersion { .. }), "{err}");
}

/// A ledger written by an earlier release carries six secondary indexes on
/// `entries`; opening it drops them (no query uses them) and the two the listing
/// filters used before `lookups` took their place, and it verifies and appends.
#[test]
fn a_ledger_with_the_previous_releases_indexes_opens_verifies_and_appends() {
    let (dir, ledger) = ledger_with(3);
    drop(ledger);
    let path = dir.path().join("ledger.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    for column in ["system", "verb", "agent", "decision", "level", "ts"] {
        conn.execute_batch(&format!(
            "CREATE INDEX entries_{column} ON entries({column})"
        ))
        .unwrap();
    }
    drop(conn);
    let ledger = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entries' ORDER BY name")
        .unwrap();
    let indexes: Vec<String> = stmt
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(indexes.is_empty(), "{indexes:?}");
    assert!(ledger.verify().unwrap().is_intact());
    assert_eq!(ledger.append(&sample_record(4)).unwrap().seq, 4);
    assert!(ledger.verify().unwrap().is_intact());
}

/// Appends never checkpoint the WAL themselves; the ledger's checkpoint thread does, and
/// keeps the WAL bounded: 4,000 appends write tens of MiB of frames (the entry's leaf
/// per commit, and every 64 commits the tree hashes, counters and lookups filed in
/// bulk), yet the file stays
/// within two size limits (the limit is applied when the WAL starts over, and on a
/// loaded machine the thread starts it over a little late).
#[test]
fn the_wal_stays_bounded_with_checkpoints_off_the_append_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let options = LedgerOptions {
        durability: attest_ledger::Durability::Normal,
        ..LedgerOptions::default()
    };
    let ledger = Ledger::open(&path, options).unwrap();
    let wal = dir.path().join("ledger.sqlite-wal");
    let mut largest = 0;
    for n in 1..=4_000 {
        ledger.append(&sample_record(n)).unwrap();
        if n % 100 == 0 {
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
    }
    assert!(largest < 32 << 20, "the WAL grew to {largest} bytes");
    assert!(ledger.verify().unwrap().is_intact());
}

//! The PostgreSQL store against a real server: each test makes a database of its own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use attest_ledger::{
    Archive, Filter, Ledger, LedgerOptions, SigningKey, VerifierKey, VerifyOptions,
};

use crate::{pg_db, sample_record};

fn key() -> SigningKey {
    SigningKey::generate("attest.test/ledger").unwrap().0
}

fn open(url: &str, tenant: Option<&str>) -> Ledger {
    Ledger::open(
        url,
        LedgerOptions {
            tenant: tenant.map(str::to_owned),
            ..LedgerOptions::default()
        },
    )
    .unwrap()
}

fn verified(ledger: &Ledger, key: &SigningKey) {
    let trusted: Vec<VerifierKey> = vec![key.verifier().clone()];
    let report = ledger
        .verify_with(VerifyOptions {
            trusted: &trusted,
            require_signature: true,
            ..VerifyOptions::default()
        })
        .unwrap();
    assert!(report.is_intact(), "{:?}", report.problems);
}

fn export(ledger: &Ledger) -> Vec<u8> {
    let mut out = Vec::new();
    ledger.export_jsonl(&mut out).unwrap();
    out
}

#[test]
fn postgres_appends_verify_checkpoint_prove_list_and_count() {
    let Some(db) = pg_db("postgres_appends_verify_checkpoint_prove_list_and_count") else {
        return;
    };
    let ledger = open(&db.url, None);
    assert!(ledger.is_postgres());
    assert!(!ledger.path().to_string_lossy().contains("password"));
    let records: Vec<_> = (1..=40).map(sample_record).collect();
    let appended = ledger.append_batch(&records).unwrap();
    assert_eq!(appended.last().unwrap().seq, 40);
    for n in 41..=70 {
        assert_eq!(ledger.append(&sample_record(n)).unwrap().seq, n);
    }
    assert!(ledger.verify().unwrap().is_intact());
    let key = key();
    let (checkpoint, new) = ledger.checkpoint(&key).unwrap();
    assert!(new);
    assert_eq!(checkpoint.size, 70);
    assert_eq!(ledger.root_at(70).unwrap(), checkpoint.root);
    verified(&ledger, &key);
    let trusted = vec![key.verifier().clone()];
    for seq in [1, 33, 64, 70] {
        ledger
            .prove_inclusion(seq, None)
            .unwrap()
            .check(&trusted)
            .unwrap();
    }
    ledger.append(&sample_record(71)).unwrap();
    ledger.checkpoint(&key).unwrap();
    ledger
        .prove_consistency(70, None)
        .unwrap()
        .check(&trusted)
        .unwrap();

    let rows = ledger
        .list_filtered(
            &Filter {
                action_id: Some("action-33".into()),
                ..Filter::default()
            },
            10,
        )
        .unwrap();
    assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [33]);
    let gmail = ledger
        .list_filtered(
            &Filter {
                system: Some("gmail".into()),
                agent: Some("agent-1".into()),
                ..Filter::default()
            },
            100,
        )
        .unwrap();
    assert!(!gmail.is_empty());
    assert!(gmail
        .iter()
        .all(|r| r.system == "gmail" && r.agent.as_deref() == Some("agent-1")));
    let counts = ledger.counts().unwrap();
    assert_eq!(counts.total, 71);
    assert_eq!(counts.by_system["gmail"] + counts.by_system["stripe"], 71);
    assert_eq!(counts.by_level["acknowledged"], 71);
    assert_eq!(counts.by_hour.values().map(|m| m["act"]).sum::<u64>(), 71);

    // A second open of the same database sees the same chain and appends to it.
    let again = open(&db.url, None);
    assert_eq!(again.append(&sample_record(72)).unwrap().seq, 72);
    assert_eq!(ledger.append(&sample_record(73)).unwrap().seq, 73);
    assert!(ledger.verify().unwrap().is_intact());
}

/// Eight ledgers (two connection strings, as two hosts would have) with four threads
/// each append at once: one chain, no gap, no duplicate, verified.
#[test]
fn postgres_writers_on_two_connection_strings_extend_one_chain() {
    let Some(db) = pg_db("postgres_writers_on_two_connection_strings_extend_one_chain") else {
        return;
    };
    let urls = [db.url.clone(), db.other_url()];
    let ledgers: Vec<Arc<Ledger>> = (0..8).map(|i| Arc::new(open(&urls[i % 2], None))).collect();
    let mut handles = Vec::new();
    for (l, ledger) in ledgers.iter().enumerate() {
        for t in 0..4u64 {
            let ledger = Arc::clone(ledger);
            handles.push(std::thread::spawn(move || {
                for n in 0..15u64 {
                    ledger
                        .append(&sample_record(10_000 * (l as u64 + 1) + 100 * t + n))
                        .unwrap();
                }
            }));
        }
    }
    for h in handles {
        h.join().unwrap();
    }
    let ledger = &ledgers[0];
    assert_eq!(ledger.tip().unwrap().unwrap().0, 8 * 4 * 15);
    assert!(ledger.verify().unwrap().is_intact());
    let mut ids = HashSet::new();
    ledger
        .for_each_row(1, |row| {
            let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
            assert!(ids.insert(body["action_id"].as_str().unwrap().to_owned()));
            Ok(true)
        })
        .unwrap();
    assert_eq!(ids.len(), 480);
    assert_eq!(ledger.counts().unwrap().total, 480);
}

#[test]
fn postgres_tenants_have_their_own_chains_trees_and_checkpoints() {
    let Some(db) = pg_db("postgres_tenants_have_their_own_chains_trees_and_checkpoints") else {
        return;
    };
    let acme = open(&db.url, Some("acme"));
    let globex = open(&db.url, Some("globex"));
    let default = open(&db.url, None);
    for n in 1..=5 {
        assert_eq!(acme.append(&sample_record(n)).unwrap().seq, n);
    }
    for n in 1..=3 {
        assert_eq!(globex.append(&sample_record(100 + n)).unwrap().seq, n);
    }
    assert!(default.tip().unwrap().is_none());
    let (acme_key, globex_key) = (
        SigningKey::generate("attest.test/acme").unwrap().0,
        SigningKey::generate("attest.test/globex").unwrap().0,
    );
    assert_eq!(acme.checkpoint(&acme_key).unwrap().0.size, 5);
    assert_eq!(globex.checkpoint(&globex_key).unwrap().0.size, 3);
    verified(&acme, &acme_key);
    verified(&globex, &globex_key);
    assert_eq!(acme.checkpoints().unwrap().len(), 1);
    assert_eq!(acme.counts().unwrap().total, 5);
    assert_eq!(globex.counts().unwrap().total, 3);
    assert!(Ledger::open(
        &db.url,
        LedgerOptions {
            tenant: Some("Bad Name".into()),
            ..LedgerOptions::default()
        }
    )
    .is_err());
}

/// Backends are cut (`pg_terminate_backend`) again and again while a writer appends:
/// every append that returned is in the chain exactly once, and the chain verifies.
#[test]
fn postgres_connections_cut_mid_append_lose_and_duplicate_nothing() {
    let Some(db) = pg_db("postgres_connections_cut_mid_append_lose_and_duplicate_nothing") else {
        return;
    };
    let ledger = Arc::new(open(&db.url, None));
    let name = db.url.rsplit('/').next().unwrap().to_owned();
    let done = Arc::new(AtomicBool::new(false));
    let killer = {
        let done = Arc::clone(&done);
        let admin = format!("{}/test", crate::pg_server());
        std::thread::spawn(move || {
            let mut client = ::postgres::Client::connect(&admin, ::postgres::NoTls).unwrap();
            let mut cuts = 0u64;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(15));
                let killed = client
                    .query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                         WHERE datname = $1 AND pid <> pg_backend_pid()",
                        &[&name],
                    )
                    .unwrap();
                cuts += killed.len() as u64;
            }
            cuts
        })
    };
    let mut writers = Vec::new();
    for t in 0..4u64 {
        let ledger = Arc::clone(&ledger);
        writers.push(std::thread::spawn(move || {
            let mut ok = Vec::new();
            for n in 0..60u64 {
                let record = sample_record(1000 * t + n);
                if ledger.append(&record).is_ok() {
                    ok.push(record.action_id);
                }
            }
            ok
        }));
    }
    let mut acknowledged = Vec::new();
    for w in writers {
        acknowledged.extend(w.join().unwrap());
    }
    done.store(true, Ordering::Relaxed);
    let cuts = killer.join().unwrap();
    assert!(cuts > 0, "no connection was cut");
    let rows = each_acknowledged_once(&db.url, &acknowledged);
    eprintln!(
        "{} of 240 appends acknowledged through {cuts} cut connections; {rows} rows",
        acknowledged.len(),
    );
}

/// Checks the chain at `url` verifies, holds every acknowledged action id, and holds no
/// action id twice; returns its row count.
pub(crate) fn each_acknowledged_once(url: &str, acknowledged: &[String]) -> usize {
    let check = open(url, None);
    assert!(check.verify().unwrap().is_intact());
    let mut seen = std::collections::HashMap::new();
    check
        .for_each_row(1, |row| {
            let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
            let id = body["action_id"].as_str().unwrap().to_owned();
            if let Some(earlier) = seen.insert(id.clone(), (row.seq, row.ts.to_owned())) {
                panic!(
                    "{id} was appended twice: at {earlier:?} and {}, {}",
                    row.seq, row.ts
                );
            }
            Ok(true)
        })
        .unwrap();
    for id in acknowledged {
        assert!(
            seen.contains_key(id),
            "{id} was acknowledged but is not in the ledger"
        );
    }
    seen.len()
}

/// SQLite → PostgreSQL → SQLite: the same bytes, roots and signed checkpoints; all
/// three verify under the key, prove the same, and each keeps appending.
#[test]
fn copy_round_trip_keeps_every_byte_and_signed_root() {
    let Some(db) = pg_db("copy_round_trip_keeps_every_byte_and_signed_root") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key = key();
    let source = Ledger::open(dir.path().join("a.sqlite"), LedgerOptions::default()).unwrap();
    // More than 64 rows: the SQLite tree's unwritten tail is part of the copy.
    for chunk in (1..=150).collect::<Vec<u64>>().chunks(37) {
        let records: Vec<_> = chunk.iter().map(|&n| sample_record(n)).collect();
        source.append_batch(&records).unwrap();
        source.checkpoint(&key).unwrap();
    }
    source.append(&sample_record(151)).unwrap();
    let pg = open(&db.url, Some("copied"));
    assert_eq!(source.copy_to(&pg).unwrap(), 151);
    let back = Ledger::open(dir.path().join("b.sqlite"), LedgerOptions::default()).unwrap();
    assert_eq!(pg.copy_to(&back).unwrap(), 151);
    for ledger in [&source, &pg, &back] {
        verified(ledger, &key);
        assert_eq!(export(ledger), export(&source));
        assert_eq!(ledger.checkpoints().unwrap(), source.checkpoints().unwrap());
        assert_eq!(ledger.root_at(151).unwrap(), source.root_at(151).unwrap());
        assert_eq!(
            ledger.prove_inclusion(100, None).unwrap(),
            source.prove_inclusion(100, None).unwrap()
        );
        assert_eq!(ledger.counts().unwrap().total, 151);
    }
    // A copy lands only in an empty ledger.
    assert!(source.copy_to(&pg).is_err());
    assert_eq!(pg.append(&sample_record(152)).unwrap().seq, 152);
    assert_eq!(back.append(&sample_record(152)).unwrap().seq, 152);
    verified(&pg, &key);
}

/// A prune writes what it removes to an archive that verifies against the ledger and
/// proves inclusion of a removed entry; both stores.
#[test]
fn prune_archive_verifies_and_proves_on_both_stores() {
    let dir = tempfile::tempdir().unwrap();
    let db = pg_db("prune_archive_verifies_and_proves_on_both_stores");
    let mut ledgers =
        vec![Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap()];
    if let Some(db) = &db {
        ledgers.push(open(&db.url, None));
    }
    let key = key();
    let trusted = vec![key.verifier().clone()];
    for ledger in &ledgers {
        let records: Vec<_> = (1..=20).map(sample_record).collect();
        ledger.append_batch(&records).unwrap();
        let mut archive = Vec::new();
        // Everything is older than a cutoff in the future; the newest row stays.
        let cutoff = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        let report = ledger.prune_archived(cutoff, &key, &mut archive).unwrap();
        assert_eq!(report.removed, 19);
        let archive = Archive::read(&archive[..]).unwrap();
        assert_eq!((archive.first, archive.last), (1, 19));
        let report = ledger.verify_archive(&archive, &trusted).unwrap();
        assert!(report.is_intact(), "{:?}", report.problems);
        assert!(report.signatures_checked);
        assert!(matches!(
            ledger.prove_inclusion(5, None),
            Err(attest_ledger::LedgerError::Pruned { seq: 5 })
        ));
        ledger
            .prove_inclusion_archived(5, None, &archive)
            .unwrap()
            .check(&trusted)
            .unwrap();
        verified(ledger, &key);
        // An edited archive row is caught.
        let mut edited = archive.clone();
        let body = String::from_utf8(edited.bodies[3].clone()).unwrap();
        edited.bodies[3] = body.replace("action-4", "action-X").into_bytes();
        let report = ledger.verify_archive(&edited, &trusted).unwrap();
        assert!(!report.is_intact());
        assert!(ledger.prove_inclusion_archived(4, None, &edited).is_err());
    }
}

/// A database of PostgreSQL schema 1 (counters upserted on every append, run and
/// action ids found through indexes on `entries`) upgrades to schema 2 on open: its
/// rows are filed in `lookups`, its counters kept, and it verifies, lists, counts and
/// appends, filing every 64 entries from then on.
#[test]
fn a_postgres_ledger_of_schema_1_upgrades_to_filing_in_bulk() {
    let Some(db) = pg_db("a_postgres_ledger_of_schema_1_upgrades_to_filing_in_bulk") else {
        return;
    };
    let key = key();
    {
        let ledger = open(&db.url, None);
        let records: Vec<_> = (1..=100).map(sample_record).collect();
        ledger.append_batch(&records).unwrap();
    }
    // Back to what schema 1 held: every entry counted (as its appends upserted), no
    // lookups, no filing extent, the two indexes.
    let mut client = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
    client
        .batch_execute(
            "DROP TABLE lookups;
             DROP TABLE window_keys;
             DROP TABLE window_entries;
             DROP TABLE idempotency_keys;
             DROP TABLE call_digests;
             DROP TABLE subject_keys;
             DELETE FROM attest_meta WHERE key = 'filed_through';
             DELETE FROM attest_schema WHERE version IN (2, 3, 4, 5, 6);
             DELETE FROM counters;
             INSERT INTO counters (tenant, dim, key, hour, n)
                 SELECT tenant, 'decision', decision, '', count(*) FROM entries GROUP BY tenant, decision
                 UNION ALL SELECT tenant, 'level', coalesce(level, ''), '', count(*) FROM entries GROUP BY tenant, coalesce(level, '')
                 UNION ALL SELECT tenant, 'system', system, '', count(*) FROM entries GROUP BY tenant, system
                 UNION ALL SELECT tenant, 'agent', coalesce(agent, ''), '', count(*) FROM entries GROUP BY tenant, coalesce(agent, '')
                 UNION ALL SELECT tenant, 'decision', decision, left(ts, 13), count(*) FROM entries GROUP BY tenant, decision, left(ts, 13);
             CREATE INDEX entries_action ON entries (tenant, action_id);
             CREATE INDEX entries_run ON entries (tenant, run, seq) WHERE run IS NOT NULL;",
        )
        .unwrap();
    let before = ::postgres::Client::connect(&db.url, ::postgres::NoTls)
        .unwrap()
        .query_one("SELECT max(version) FROM attest_schema", &[])
        .unwrap()
        .get::<_, Option<i32>>(0);
    assert_eq!(before, Some(1));
    let ledger = open(&db.url, None);
    let versions: Vec<i32> = client
        .query("SELECT version FROM attest_schema ORDER BY version", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6]);
    let filed: String = client
        .query_one(
            "SELECT value FROM attest_meta WHERE tenant = '' AND key = 'filed_through'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(filed, "100");
    assert_eq!(ledger.counts().unwrap().total, 100);
    let by_action = Filter {
        action_id: Some("action-42".into()),
        ..Filter::default()
    };
    assert_eq!(ledger.list_filtered(&by_action, 5).unwrap()[0].seq, 42);
    // Appends after the upgrade: filed at 164, the rest in the unfiled tail.
    for n in 101..=170 {
        ledger.append(&sample_record(n)).unwrap();
    }
    let filed: String = client
        .query_one(
            "SELECT value FROM attest_meta WHERE tenant = '' AND key = 'filed_through'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(filed, "164");
    let counts = ledger.counts().unwrap();
    assert_eq!(counts.total, 170);
    assert_eq!(counts.by_system.values().sum::<u64>(), 170);
    for id in ["action-150", "action-169"] {
        let filter = Filter {
            action_id: Some(id.into()),
            ..Filter::default()
        };
        assert_eq!(ledger.list_filtered(&filter, 5).unwrap().len(), 1, "{id}");
    }
    let run = Filter {
        run: Some("run-1".into()),
        ..Filter::default()
    };
    assert_eq!(ledger.list_filtered(&run, 1000).unwrap().len(), 170);
    ledger.checkpoint(&key).unwrap();
    verified(&ledger, &key);
}

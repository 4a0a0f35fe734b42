//! The Merkle tree, checkpoints, proofs, verify-since and prune on a real SQLite file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::{
    entry_hash, leaf_hash, sign_checkpoint, Clock, CompactRange, Ledger, LedgerError,
    LedgerOptions, ProblemKind, Record, SigningKey, VerifierKey, VerifyOptions, VerifyReport,
};
use rusqlite::Connection;

use crate::both::StoreTester;
use crate::{ledger_with, sample_record, ManualClock};

fn key() -> SigningKey {
    SigningKey::generate("attest.test/ledger").unwrap().0
}

fn trusted(key: &SigningKey) -> Vec<VerifierKey> {
    vec![key.verifier().clone()]
}

fn verify(ledger: &Ledger, key: &SigningKey, since: bool) -> VerifyReport {
    let trusted = trusted(key);
    ledger
        .verify_with(VerifyOptions {
            trusted: &trusted,
            since_checkpoint: since,
            ..VerifyOptions::default()
        })
        .unwrap()
}

fn edit(dir: &tempfile::TempDir, sql: &str) {
    let conn = Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    conn.execute_batch(sql).unwrap();
}

fn kinds(report: &VerifyReport) -> Vec<(u64, ProblemKind)> {
    report.problems.iter().map(|p| (p.seq, p.kind)).collect()
}

fn append(ledger: &Ledger, from: u64, count: u64) {
    let records: Vec<Record> = (from..from + count).map(sample_record).collect();
    ledger.append_batch(&records).unwrap();
}

#[test]
fn the_stored_root_is_the_root_over_exported_entry_hashes() {
    StoreTester::new("the_stored_root_is_the_root_over_exported_entry_hashes", 37).run(|case| {
        let ledger = &case.ledger;
        let mut bodies = Vec::new();
        ledger.export_jsonl(&mut bodies).unwrap();
        let mut range = CompactRange::new();
        for line in bodies.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            range.push(leaf_hash(&entry_hash(line)));
            assert_eq!(ledger.root_at(range.size()).unwrap(), range.root());
        }
        assert_eq!(range.size(), 37);
    });
}

#[test]
fn an_empty_ledger_cannot_be_checkpointed() {
    StoreTester::new("an_empty_ledger_cannot_be_checkpointed", 0).run(|case| {
        let ledger = &case.ledger;
        assert!(matches!(
            ledger.checkpoint(&key()),
            Err(LedgerError::Empty { .. })
        ));
    });
}

#[test]
fn a_checkpoint_is_a_signed_note_of_the_current_tree() {
    StoreTester::new("a_checkpoint_is_a_signed_note_of_the_current_tree", 12).run(|case| {
        let ledger = &case.ledger;
        let key = key();
        let (cp, new) = ledger.checkpoint(&key).unwrap();
        assert!(new);
        assert_eq!(cp.size, 12);
        assert_eq!(cp.root, ledger.root_at(12).unwrap());
        let body = attest_ledger::open_checkpoint(cp.note.as_bytes(), &trusted(&key)).unwrap();
        assert_eq!(
            (body.size, body.root, body.origin.as_str()),
            (12, cp.root, "attest.test/ledger")
        );
        let (again, new) = ledger.checkpoint(&key).unwrap();
        assert!(!new);
        assert_eq!(again, cp);
        let report = verify(ledger, &key, false);
        assert!(report.is_intact(), "{:?}", report.problems);
        assert!(report.signatures_checked);
        assert_eq!(report.checkpoint.unwrap().size, 12);
    });
}

#[test]
fn without_a_trusted_key_the_report_says_signatures_were_not_checked() {
    StoreTester::new(
        "without_a_trusted_key_the_report_says_signatures_were_not_checked",
        3,
    )
    .run(|case| {
        let ledger = &case.ledger;
        ledger.checkpoint(&key()).unwrap();
        let report = ledger.verify().unwrap();
        assert!(report.is_intact());
        assert!(!report.signatures_checked);
        assert!(
            report.notes.iter().any(|n| n.contains("not checked")),
            "{:?}",
            report.notes
        );
        let err = ledger
            .verify_with(VerifyOptions {
                since_checkpoint: true,
                ..VerifyOptions::default()
            })
            .unwrap_err();
        assert!(matches!(err, LedgerError::NoTrustedKey));
    });
}

#[test]
fn every_inclusion_and_consistency_proof_checks_and_a_flipped_bit_fails() {
    StoreTester::new(
        "every_inclusion_and_consistency_proof_checks_and_a_flipped_bit_fails",
        21,
    )
    .run(|case| {
        let ledger = &case.ledger;
        let key = key();
        ledger.checkpoint(&key).unwrap();
        let trusted = trusted(&key);
        for seq in 1..=21 {
            let proof = ledger.prove_inclusion(seq, None).unwrap();
            assert_eq!(proof.tree_size, 21);
            proof.check(&trusted).unwrap();
            for i in 0..proof.proof.len() {
                let mut bad = proof.clone();
                bad.proof[i] = flip_b64(&bad.proof[i]);
                assert!(bad.check(&trusted).is_err(), "seq {seq} element {i}");
            }
            let mut bad = proof.clone();
            bad.entry_hash = attest_ledger::to_hex(&[1u8; 32]);
            assert!(bad.check(&trusted).is_err());
        }
        for old in 1..=21 {
            let proof = ledger.prove_consistency(old, None).unwrap();
            proof.check_path().unwrap();
            for i in 0..proof.proof.len() {
                let mut bad = proof.clone();
                bad.proof[i] = flip_b64(&bad.proof[i]);
                assert!(bad.check_path().is_err());
            }
        }
        let other = SigningKey::generate("attest.test/ledger").unwrap().0;
        let proof = ledger.prove_inclusion(5, None).unwrap();
        assert!(proof.check(&[other.verifier().clone()]).is_err());
        assert!(matches!(
            ledger.prove_inclusion(22, None),
            Err(LedgerError::OutOfRange { .. })
        ));
    });
}

fn flip_b64(text: &str) -> String {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let mut bytes = engine.decode(text).unwrap();
    bytes[7] ^= 0x10;
    engine.encode(bytes)
}

#[test]
fn verify_since_checkpoint_checks_only_the_new_rows_and_their_extension() {
    StoreTester::new("verify_since_checkpoint_checks_only_the_new_rows_and_their_extension", 50).run(|case| {
        let ledger = &case.ledger;
        let key = key();
        ledger.checkpoint(&key).unwrap();
        append(ledger, 51, 100);
        let report = verify(ledger, &key, true);
        assert!(report.is_intact(), "{:?}", report.problems);
        assert_eq!(report.checked, 100);
        assert_eq!(report.checkpoint.as_ref().unwrap().size, 50);

        case.edit(
            "UPDATE entries SET body = replace(body, 'target-120', 'target-XXX') WHERE seq = 120",
            "UPDATE entries SET body = convert_to(replace(convert_from(body, 'UTF8'), 'target-120', 'target-XXX'), 'UTF8') WHERE seq = 120",
        );
        assert_eq!(
            kinds(&verify(ledger, &key, true))[0],
            (120, ProblemKind::HashMismatch)
        );
    });
}

#[test]
fn verify_since_checkpoint_catches_a_rewritten_checkpointed_entry() {
    let (dir, ledger) = ledger_with(10);
    let key = key();
    ledger.checkpoint(&key).unwrap();
    append(&ledger, 11, 5);
    // Rewrite entry 10 and its hash column consistently: only the signed tree knows.
    let conn = Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    let body: String = conn
        .query_row("SELECT body FROM entries WHERE seq = 10", [], |r| r.get(0))
        .unwrap();
    let forged = body.replace("target-10", "target-XX");
    conn.execute(
        "UPDATE entries SET body = ?1, hash = ?2 WHERE seq = 10",
        rusqlite::params![forged, &entry_hash(forged.as_bytes())[..]],
    )
    .unwrap();
    let report = verify(&ledger, &key, true);
    assert!(
        kinds(&report).contains(&(10, ProblemKind::CheckpointMismatch)),
        "{:?}",
        report.problems
    );
}

#[test]
fn a_tail_truncated_below_the_newest_checkpoint_is_caught() {
    StoreTester::new("a_tail_truncated_below_the_newest_checkpoint_is_caught", 10).run(|case| {
        let ledger = &case.ledger;
        let key = key();
        ledger.checkpoint(&key).unwrap();
        case.edit(
            "DELETE FROM entries WHERE seq >= 9",
            "DELETE FROM entries WHERE seq >= 9",
        );
        let report = verify(ledger, &key, false);
        assert_eq!(kinds(&report)[0], (9, ProblemKind::Truncated));
        let report = verify(ledger, &key, true);
        assert!(
            kinds(&report).contains(&(9, ProblemKind::Truncated)),
            "{:?}",
            report.problems
        );
    });
}

#[test]
fn a_checkpoint_signed_by_another_key_is_caught() {
    StoreTester::new("a_checkpoint_signed_by_another_key_is_caught", 6).run(|case| {
        let ledger = &case.ledger;
        let key = key();
        let stranger = SigningKey::generate("attest.test/ledger").unwrap().0;
        ledger.checkpoint(&stranger).unwrap();
        let report = verify(ledger, &key, false);
        assert_eq!(kinds(&report), vec![(6, ProblemKind::BadSignature)]);
    });
}

#[test]
fn a_swapped_checkpoint_for_another_root_is_caught() {
    let (dir, ledger) = ledger_with(8);
    let key = key();
    ledger.checkpoint(&key).unwrap();
    let forged_root = [7u8; 32];
    let note = sign_checkpoint(&key, 8, &forged_root).unwrap();
    let conn = Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    conn.execute(
        "UPDATE checkpoints SET note = ?1, root = ?2 WHERE size = 8",
        rusqlite::params![note, &forged_root[..]],
    )
    .unwrap();
    let report = verify(&ledger, &key, false);
    assert_eq!(kinds(&report), vec![(8, ProblemKind::CheckpointMismatch)]);
}

#[test]
fn a_deleted_checkpoint_is_caught_against_an_anchor() {
    let (dir, ledger) = ledger_with(8);
    let key = key();
    let (cp, _) = ledger.checkpoint(&key).unwrap();
    append(&ledger, 9, 3);
    let anchors = vec![("anchors.txt".to_owned(), cp.note.into_bytes())];
    let trusted = trusted(&key);
    let run = |ledger: &Ledger| {
        ledger
            .verify_with(VerifyOptions {
                trusted: &trusted,
                anchors: &anchors,
                ..VerifyOptions::default()
            })
            .unwrap()
    };
    assert!(run(&ledger).is_intact());
    edit(&dir, "DELETE FROM checkpoints");
    let report = run(&ledger);
    assert_eq!(kinds(&report), vec![(8, ProblemKind::CheckpointMissing)]);
    assert!(report.problems[0].detail.contains("anchors.txt"));
}

#[test]
fn a_ledger_that_does_not_extend_an_anchored_checkpoint_is_caught() {
    // The anchor comes from another history of the same log (same key, same size).
    let (_other_dir, other) = ledger_with(0);
    append(&other, 100, 5);
    let key = key();
    let (foreign, _) = other.checkpoint(&key).unwrap();
    let (_dir, ledger) = ledger_with(9);
    let anchors = vec![("elsewhere.note".to_owned(), foreign.note.into_bytes())];
    let trusted = trusted(&key);
    let report = ledger
        .verify_with(VerifyOptions {
            trusted: &trusted,
            anchors: &anchors,
            ..VerifyOptions::default()
        })
        .unwrap();
    assert!(
        kinds(&report).contains(&(5, ProblemKind::CheckpointMismatch)),
        "{:?}",
        report.problems
    );
}

#[test]
fn an_edited_tree_hash_is_caught() {
    // 64 rows: appends write tree hashes 64 leaves at a time.
    let (dir, ledger) = ledger_with(64);
    edit(
        &dir,
        "UPDATE tree_hashes SET hash = zeroblob(32) WHERE idx = 3",
    );
    let report = ledger.verify().unwrap();
    assert_eq!(kinds(&report), vec![(3, ProblemKind::TreeMismatch)]);
}

#[test]
fn prune_removes_old_rows_behind_a_checkpoint_and_everything_still_checks() {
    let dir = tempfile::tempdir().unwrap();
    let day = 86_400;
    let clock = Arc::new(ManualClock(AtomicU64::new(1_800_000_000)));
    let options = LedgerOptions {
        clock: clock.clone(),
        ..LedgerOptions::default()
    };
    let ledger = Ledger::open(dir.path().join("ledger.sqlite"), options).unwrap();
    append(&ledger, 1, 30); // old
    clock.0.fetch_add(40 * day, Ordering::SeqCst);
    append(&ledger, 31, 10); // recent
    let key = key();
    let cutoff = clock.now() - Duration::from_secs(30 * day);
    let report = ledger.prune(cutoff, &key).unwrap();
    assert_eq!(
        (
            report.removed,
            report.pruned_through,
            report.checkpoint.size
        ),
        (30, 30, 40)
    );
    assert_eq!(ledger.list(100).unwrap().len(), 10);

    let full = verify(&ledger, &key, false);
    assert!(full.is_intact(), "{:?}", full.problems);
    assert_eq!(full.checked, 10);
    for seq in 31..=40 {
        ledger
            .prove_inclusion(seq, None)
            .unwrap()
            .check(&trusted(&key))
            .unwrap();
    }
    assert!(matches!(
        ledger.prove_inclusion(5, None),
        Err(LedgerError::Pruned { seq: 5 })
    ));
    append(&ledger, 41, 5);
    assert!(verify(&ledger, &key, true).is_intact());
    assert!(verify(&ledger, &key, false).is_intact());
    // Pruning again removes nothing new; the newest row always stays.
    assert_eq!(
        ledger
            .prune(clock.now() + Duration::from_secs(day), &key)
            .unwrap()
            .pruned_through,
        44
    );
    assert_eq!(ledger.list(100).unwrap().len(), 1);
    assert!(verify(&ledger, &key, false).is_intact());

    // Editing the remembered boundary hash breaks the link to the first kept row.
    edit(
        &dir,
        "UPDATE attest_meta SET value = '00' || substr(value, 3) WHERE key = 'pruned_hash'",
    );
    assert!(!verify(&ledger, &key, false).is_intact());
}

/// Appends keep the newest leaves' tree hashes in memory and write them in bulk. Until
/// then a reader in another connection computes them from the entries: roots, every
/// inclusion and consistency proof and verify agree with the entries; the writer
/// vanishing without writing them (as in a crash) changes nothing, and the next writer
/// carries on from the file.
#[test]
fn proofs_roots_and_verify_cover_the_unwritten_tail_of_tree_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let writer = Ledger::open(&path, LedgerOptions::default()).unwrap();
    for n in 1..=70 {
        writer.append(&sample_record(n)).unwrap();
    }
    let stored_rows: u64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM tree_hashes", [], |r| r.get(0))
        .unwrap();
    // 70 leaves have 2·70 − popcount(70) = 137 stored hashes; not all are written yet.
    assert!(stored_rows < 137, "{stored_rows} tree rows written");

    let reader = Ledger::open(&path, LedgerOptions::default()).unwrap();
    let mut bodies = Vec::new();
    reader.export_jsonl(&mut bodies).unwrap();
    let mut range = CompactRange::new();
    let mut roots = Vec::new();
    for line in bodies.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        range.push(leaf_hash(&entry_hash(line)));
        roots.push(range.root());
        assert_eq!(reader.root_at(range.size()).unwrap(), range.root());
    }
    for seq in 1..=70 {
        let proof = reader.prove_inclusion(seq, Some(70)).unwrap();
        assert_eq!(proof.root, base64_of(&roots[69]));
    }
    for old in 1..=70 {
        let proof = reader.prove_consistency(old, Some(70)).unwrap();
        proof.check_path().unwrap();
    }
    assert!(reader.verify().unwrap().is_intact());

    // The writer goes away with its tail unwritten; the reader appends and checkpoints.
    drop(writer);
    let key = key();
    reader.append(&sample_record(71)).unwrap();
    let (checkpoint, _) = reader.checkpoint(&key).unwrap();
    assert_eq!(checkpoint.size, 71);
    range.push(leaf_hash(&reader.tip().unwrap().unwrap().1));
    assert_eq!(checkpoint.root, range.root());
    let stored_rows: u64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM tree_hashes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored_rows, 2 * 71 - u64::from(71u64.count_ones()));
    let report = verify(&reader, &key, false);
    assert!(report.is_intact(), "{:?}", report.problems);
}

fn base64_of(hash: &[u8; 32]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(hash)
}

//! Publishing as C2SP tlog-tiles, checking from the tiles alone, and the witness.

use std::collections::BTreeMap;
use std::path::Path;

use attest_ledger::tiles::{
    check_consistency, check_new_entries, publish, verify_tiles, CosigningKey, DirStore,
    PublishOptions, TileHashes, VerifyTilesOptions, Witness, WitnessError,
};
use attest_ledger::{read_checkpoint_unverified, Ledger, Record, SigningKey};

use crate::{ledger_with, sample_record};

/// Every file under `dir`, by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn append(ledger: &Ledger, from: u64, to: u64) {
    let records: Vec<Record> = (from..=to).map(sample_record).collect();
    for chunk in records.chunks(5000) {
        ledger.append_batch(chunk).unwrap();
    }
}

/// What `verify_tiles` says of `dir` under `key`.
fn check(dir: &Path, key: &SigningKey) -> attest_ledger::tiles::TilesReport {
    verify_tiles(
        &DirStore::new(dir),
        VerifyTilesOptions {
            trusted: std::slice::from_ref(key.verifier()),
            ..VerifyTilesOptions::default()
        },
    )
    .unwrap()
}

fn intact(dir: &Path, key: &SigningKey) -> attest_ledger::tiles::TilesReport {
    let report = check(dir, key);
    assert!(report.is_intact(), "{report:?}");
    report
}

/// Publishing step by step across tile boundaries (and past 2¹⁶ entries, so a level-2
/// tile exists) gives the same files as publishing once, plus the older partial tiles;
/// every step verifies, and the tiles' root is the checkpoint's.
#[test]
fn incremental_publishing_equals_publishing_once() {
    let (dir, ledger) = ledger_with(0);
    let (key, _) = SigningKey::generate("attest.test/tiles").unwrap();
    let steps = [1u64, 3, 255, 256, 257, 511, 513, 65_536 + 300];
    let stepwise = dir.path().join("stepwise");
    let mut done = 0;
    for &size in &steps {
        append(&ledger, done + 1, size);
        done = size;
        let (checkpoint, _) = ledger.checkpoint(&key).unwrap();
        let report = publish(&ledger, &stepwise, PublishOptions::default()).unwrap();
        assert_eq!(report.size, size);
        let verified = intact(&stepwise, &key);
        assert_eq!(verified.checked, size);
        let root = TileHashes::new(&DirStore::new(&stepwise), size)
            .root()
            .unwrap();
        assert_eq!(root, checkpoint.root);
        // Publishing again writes only the checkpoint.
        let again = publish(&ledger, &stepwise, PublishOptions::default()).unwrap();
        assert_eq!((again.previous_size, again.files), (size, 1));
    }
    let once = dir.path().join("once");
    publish(&ledger, &once, PublishOptions::default()).unwrap();
    let (once, stepwise) = (files(&once), files(&stepwise));
    for (path, bytes) in &once {
        assert_eq!(stepwise.get(path), Some(bytes), "{path}");
    }
    assert!(
        once.contains_key("tile/2/000.p/1"),
        "{:?}",
        once.keys().last()
    );
    assert!(once.contains_key("tile/1/000"));
    // The extra files are the older partial tiles and bundles, nothing else.
    for path in stepwise.keys().filter(|p| !once.contains_key(*p)) {
        assert!(path.contains(".p/"), "{path}");
    }
}

/// A full tile rewritten after publication, a bundle record, a body, a missing file: each
/// is named by `verify_tiles`.
#[test]
fn rewritten_tiles_bundles_and_bodies_are_caught() {
    let (dir, ledger) = ledger_with(600);
    let (key, _) = SigningKey::generate("attest.test/tiles").unwrap();
    ledger.checkpoint(&key).unwrap();
    let out = dir.path().join("pub");
    publish(&ledger, &out, PublishOptions::default()).unwrap();
    intact(&out, &key);
    type Tamper = fn(&mut Vec<u8>);
    let cases: [(&str, Tamper); 4] = [
        ("tile/0/000", |b| b[40] ^= 1),
        ("tile/1/000.p/2", |b| b[0] ^= 1),
        ("tile/entries/001", |b| b[2] ^= 1),
        ("bodies/002.p/88", |b| {
            let at = b.iter().position(|c| *c == b'7').unwrap();
            b[at] = b'8';
        }),
    ];
    for (path, tamper) in cases {
        let file = out.join(path);
        let original = std::fs::read(&file).unwrap();
        let mut bytes = original.clone();
        tamper(&mut bytes);
        std::fs::write(&file, &bytes).unwrap();
        let report = check(&out, &key);
        assert!(!report.is_intact(), "{path}");
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.path.starts_with(path.split('.').next().unwrap())
                    || p.path == "checkpoint"),
            "{path}: {:?}",
            report.problems
        );
        std::fs::write(&file, &original).unwrap();
    }
    std::fs::remove_file(out.join("bodies/001")).unwrap();
    let report = check(&out, &key);
    assert_eq!(report.problems[0].path, "bodies/001");
    assert_eq!(report.problems[0].seq, Some(257));
    // Another key's view of the log is not trusted.
    let (other, _) = SigningKey::generate("attest.test/tiles").unwrap();
    let report = check(&out, &other);
    assert!(!report.is_intact());
}

/// A directory that another ledger published is refused, and so is one ahead of the
/// ledger.
#[test]
fn publishing_over_another_history_is_refused() {
    let (_a, first) = ledger_with(300);
    let (dir, second) = ledger_with(0);
    append(&second, 2, 301);
    let (key, _) = SigningKey::generate("attest.test/tiles").unwrap();
    first.checkpoint(&key).unwrap();
    second.checkpoint(&key).unwrap();
    let out = dir.path().join("pub");
    publish(&first, &out, PublishOptions::default()).unwrap();
    let err = publish(&second, &out, PublishOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("does not hold an earlier state"),
        "{err}"
    );
}

/// Two histories of the same size signed by the same key: `check_consistency` calls it
/// a split view; a longer honest tree is proved consistent from its tiles.
#[test]
fn consistency_from_tiles_and_split_views() {
    let (dir, ledger) = ledger_with(700);
    let (key, _) = SigningKey::generate("attest.test/tiles").unwrap();
    let (old, _) = ledger.checkpoint(&key).unwrap();
    append(&ledger, 701, 1500);
    ledger.checkpoint(&key).unwrap();
    let out = dir.path().join("pub");
    publish(&ledger, &out, PublishOptions::default()).unwrap();
    let store = DirStore::new(&out);
    let old = read_checkpoint_unverified(old.note.as_bytes()).unwrap();
    let new = read_checkpoint_unverified(&std::fs::read(out.join("checkpoint")).unwrap()).unwrap();
    assert_eq!(check_consistency(&store, &old, &new).unwrap(), Ok(()));
    let mut forked = old.clone();
    forked.root[0] ^= 1;
    assert!(check_consistency(&store, &forked, &new).unwrap().is_err());
    let mut same_size = new.clone();
    same_size.root[5] ^= 1;
    let split = check_consistency(&store, &same_size, &new)
        .unwrap()
        .unwrap_err();
    assert!(split.contains("split view"), "{split}");
    assert!(check_consistency(&store, &new, &old).unwrap().is_err());
    // The entries added since `old`, from their files: fine, until a new body changes.
    assert_eq!(check_new_entries(&store, &old, &new).unwrap(), vec![]);
    let bodies = out.join("bodies/003");
    let original = std::fs::read(&bodies).unwrap();
    let edited = String::from_utf8(original.clone())
        .unwrap()
        .replacen("gmail", "gmaiL", 1);
    std::fs::write(&bodies, edited).unwrap();
    let problems = check_new_entries(&store, &old, &new).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        (problems[0].path.as_str(), problems[0].seq.is_some()),
        ("bodies/003", true)
    );
    std::fs::write(&bodies, original).unwrap();
    // A record swapped in a new bundle: the new entries no longer lead to the root.
    let bundle = out.join("tile/entries/004");
    let mut bytes = std::fs::read(&bundle).unwrap();
    bytes[2] ^= 1;
    std::fs::write(&bundle, &bytes).unwrap();
    let problems = check_new_entries(&store, &old, &new).unwrap();
    assert!(
        problems.iter().any(|p| p.path == "checkpoint"),
        "{problems:?}"
    );
}

fn request(old: u64, proof: &[String], note: &str) -> Vec<u8> {
    let mut body = format!("old {old}\n");
    for line in proof {
        body.push_str(line);
        body.push('\n');
    }
    body.push('\n');
    body.push_str(note);
    body.into_bytes()
}

/// The witness: cosigns the first checkpoint, asks for the right old size (409 with its
/// size), checks the consistency proof (422), refuses a split view of the same size
/// (409), an unknown log (404) and a bad signature (403), and remembers across restarts.
#[test]
fn the_witness_follows_c2sp_tlog_witness() {
    let (dir, ledger) = ledger_with(10);
    let (log, _) = SigningKey::generate("attest.test/tiles").unwrap();
    let (_, witness_text) = SigningKey::generate("witness.test/w").unwrap();
    let state = dir.path().join("witness.json");
    let open = || {
        Witness::open(
            CosigningKey::from_text(&witness_text, "test").unwrap(),
            vec![log.verifier().clone()],
            &state,
        )
        .unwrap()
    };
    let witness = open();
    let (first, _) = ledger.checkpoint(&log).unwrap();
    let line = witness
        .add_checkpoint(&request(0, &[], &first.note), 1_700_000_000)
        .unwrap();
    assert!(line.starts_with("\u{2014} witness.test/w "), "{line}");
    let cosigned = format!("{}{line}", first.note);
    let opened = attest_ledger::tiles::open_cosigned(
        cosigned.as_bytes(),
        std::slice::from_ref(log.verifier()),
        std::slice::from_ref(witness.key().verifier()),
    )
    .unwrap();
    assert_eq!(opened.cosigned_by, ["witness.test/w"]);

    append(&ledger, 11, 40);
    let (second, _) = ledger.checkpoint(&log).unwrap();
    let stale = witness
        .add_checkpoint(&request(0, &[], &second.note), 2)
        .unwrap_err();
    assert!(
        matches!(stale, WitnessError::Conflict { latest: 10, .. }),
        "{stale}"
    );
    assert_eq!(stale.status(), 409);
    let proof = ledger.prove_consistency(10, Some(40)).unwrap().proof;
    let mut bad = proof.clone();
    bad[0] = bad[1].clone();
    let err = witness
        .add_checkpoint(&request(10, &bad, &second.note), 3)
        .unwrap_err();
    assert_eq!(err.status(), 422, "{err}");
    let err = witness
        .add_checkpoint(&request(41, &[], &second.note), 3)
        .unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    witness
        .add_checkpoint(&request(10, &proof, &second.note), 4)
        .unwrap();

    // Another history of 40 entries, signed by the log's key: a split view.
    let (_other_dir, other) = ledger_with(0);
    append(&other, 1000, 1039);
    let (fork, _) = other.checkpoint(&log).unwrap();
    assert_eq!(fork.size, 40);
    drop(witness);
    let witness = open();
    let err = witness
        .add_checkpoint(&request(40, &[], &fork.note), 5)
        .unwrap_err();
    assert!(
        matches!(err, WitnessError::SplitView { size: 40, .. }),
        "{err}"
    );
    assert_eq!(err.status(), 409);
    // The same checkpoint again is cosigned again (a fresher timestamp).
    witness
        .add_checkpoint(&request(40, &[], &second.note), 6)
        .unwrap();

    let (stranger, _) = SigningKey::generate("attest.test/other").unwrap();
    let unknown = attest_ledger::sign_checkpoint(&stranger, 40, &second.root).unwrap();
    let err = witness
        .add_checkpoint(&request(0, &[], &unknown), 7)
        .unwrap_err();
    assert_eq!(err.status(), 404, "{err}");
    let (impostor, _) = SigningKey::generate("attest.test/tiles").unwrap();
    let forged = attest_ledger::sign_checkpoint(&impostor, 50, &[1; 32]).unwrap();
    let err = witness
        .add_checkpoint(&request(40, &[], &forged), 8)
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err}");
    for garbage in [
        &b""[..],
        b"old 01\n\n",
        b"new 1\n\n",
        b"old 1\nnot base64\n\n",
    ] {
        let err = witness.add_checkpoint(garbage, 9).unwrap_err();
        assert_eq!(err.status(), 400, "{garbage:?}: {err}");
    }
}

/// Rows pruned after they were published stay in the directory: the log keeps growing
/// on top of them and still verifies end to end; a fresh directory cannot be published
/// from a pruned ledger, and says why.
#[test]
fn bundles_of_pruned_rows_stay_published() {
    let (dir, ledger) = ledger_with(700);
    let (key, _) = SigningKey::generate("attest.test/tiles").unwrap();
    ledger.checkpoint(&key).unwrap();
    let out = dir.path().join("pub");
    publish(&ledger, &out, PublishOptions::default()).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let pruned = ledger.prune(later, &key).unwrap();
    assert_eq!(pruned.pruned_through, 699);
    append(&ledger, 701, 1000);
    ledger.checkpoint(&key).unwrap();
    let report = publish(&ledger, &out, PublishOptions::default()).unwrap();
    assert_eq!((report.previous_size, report.size), (700, 1000));
    assert_eq!(intact(&out, &key).checked, 1000);
    let fresh = publish(
        &ledger,
        &dir.path().join("fresh"),
        PublishOptions::default(),
    );
    let err = fresh.unwrap_err();
    assert!(
        matches!(
            err,
            attest_ledger::tiles::TileError::Pruned {
                from: 1,
                to: 699,
                ..
            }
        ),
        "{err}"
    );
}

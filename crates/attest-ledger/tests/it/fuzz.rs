//! The fuzz campaign's ledger part (issue 14): signed notes, checkpoints, keys and proofs
//! from anyone never panic, and a changed note never verifies as something else. Bounded
//! in cases so that it runs in `cargo test` in a few seconds.

use attest_ledger::{
    open_checkpoint, read_checkpoint_unverified, sign_checkpoint, split_notes, ConsistencyProof,
    InclusionProof, SigningKey, VerifierKey,
};
use proptest::prelude::*;

fn signed() -> (SigningKey, String) {
    let key = SigningKey::generate("attest.test/fuzz").unwrap().0;
    let note = sign_checkpoint(&key, 7, &[3u8; 32]).unwrap();
    (key, note)
}

/// Hex, base64-ish and odd strings, the shapes proof fields come in.
fn hashish() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-f]{64}",
        "[0-9a-fA-F]{0,70}",
        "[A-Za-z0-9+/=]{0,48}",
        ".{0,20}",
    ]
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..40,
        Just(u64::MAX),
        Just(u64::MAX / 2 + 1),
        any::<u64>()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn notes_of_any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let (key, _) = signed();
        let _ = open_checkpoint(&bytes, &[key.verifier().clone()]);
        let _ = read_checkpoint_unverified(&bytes);
        let _ = split_notes(&bytes);
    }

    #[test]
    fn a_changed_note_never_verifies_as_another_checkpoint(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        insert in any::<bool>(),
    ) {
        let (key, note) = signed();
        let original = open_checkpoint(note.as_bytes(), &[key.verifier().clone()]).unwrap();
        let mut bytes = note.into_bytes();
        let i = at.index(bytes.len());
        if insert {
            bytes.insert(i, byte);
        } else {
            bytes[i] = byte;
        }
        if let Ok(body) = open_checkpoint(&bytes, &[key.verifier().clone()]) {
            prop_assert_eq!(body, original);
        }
    }

    #[test]
    fn key_texts_never_panic(text in ".{0,200}", tail in "[A-Za-z0-9+/=]{0,60}") {
        let _ = VerifierKey::parse(&text, "fuzz");
        let _ = SigningKey::from_text(&text, "fuzz");
        let _ = VerifierKey::parse(&format!("attest.test+1a2b3c4d+{tail}"), "fuzz");
        let _ = SigningKey::from_text(&format!("PRIVATE+KEY+attest.test+1a2b3c4d+{tail}"), "fuzz");
    }

    #[test]
    fn proofs_of_any_shape_never_panic(
        seq in size(), index in size(), tree_size in size(),
        entry_hash in hashish(), root in hashish(),
        proof in proptest::collection::vec(hashish(), 0..12),
        old_size in size(), new_size in size(),
        checkpoint in proptest::option::of(".{0,200}"),
    ) {
        let (key, _) = signed();
        let inclusion = InclusionProof {
            seq, index, tree_size, entry_hash: entry_hash.clone(), proof: proof.clone(),
            root: root.clone(), checkpoint: checkpoint.clone(),
        };
        let _ = inclusion.check(&[key.verifier().clone()]);
        let consistency = ConsistencyProof {
            old_size, new_size, old_root: entry_hash, new_root: root, proof,
            old_checkpoint: checkpoint.clone(), new_checkpoint: checkpoint,
        };
        let _ = consistency.check(&[key.verifier().clone()]);
        let _ = consistency.check_path();
    }

    #[test]
    fn proof_files_of_any_json_never_panic(text in ".{0,300}") {
        let _ = serde_json::from_str::<InclusionProof>(&text);
        let _ = serde_json::from_str::<ConsistencyProof>(&text);
    }
}

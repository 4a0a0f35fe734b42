//! Checkpoints: C2SP `tlog-checkpoint` texts (origin, tree size, base64 root), signed
//! as C2SP `signed-note`s with Ed25519.
//!
//! ```text
//! <origin>\n<tree size>\n<base64 root hash>\n
//! \n
//! — <key name> <base64(key hash[0:4] ‖ Ed25519 signature)>\n
//! ```

use signed_note::{Note, VerifierList};
use tlog_tiles::Checkpoint;

use crate::canonical::Hash;
use crate::merkle::TreeHash;
use crate::{LedgerError, SigningKey, VerifierKey};

/// Longest note accepted, in bytes: a checkpoint with a few signatures is under 1 KiB.
pub const MAX_NOTE_BYTES: usize = 64 * 1024;

/// What a checkpoint says: the tree of `size` entries has root `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointBody {
    /// The log's name (the signing key's name).
    pub origin: String,
    /// Number of entries covered.
    pub size: u64,
    /// The Merkle root over them.
    pub root: Hash,
}

/// Signs a checkpoint for a tree of `size` entries with root `root`; returns the note.
pub fn sign_checkpoint(key: &SigningKey, size: u64, root: &Hash) -> Result<String, LedgerError> {
    let checkpoint = Checkpoint::new(key.name(), size, TreeHash(*root), "")
        .map_err(|_| LedgerError::Internal("a valid key name made a malformed checkpoint"))?;
    let mut note = Note::new(&checkpoint.to_bytes(), &[])
        .map_err(|_| LedgerError::Internal("a checkpoint text is not a valid note text"))?;
    note.add_sigs(&[key.signer()])
        .map_err(|_| LedgerError::Token {
            token: key.name().to_owned(),
            detail: "the signing key did not sign the checkpoint".to_owned(),
        })?;
    String::from_utf8(note.to_bytes())
        .map_err(|_| LedgerError::Internal("a signed note is not UTF-8"))
}

/// Opens a signed checkpoint: at least one signature must verify under one of
/// `trusted`, and the origin must be that key's name.
pub fn open_checkpoint(
    note: &[u8],
    trusted: &[VerifierKey],
) -> Result<CheckpointBody, CheckpointError> {
    open_checkpoint_signed(note, trusted).map(|(body, _)| body)
}

/// [`open_checkpoint`], with the trusted keys whose signatures verified: with several
/// keys of one log trusted (a key rotation), which one signed this checkpoint.
pub fn open_checkpoint_signed<'k>(
    note: &[u8],
    trusted: &'k [VerifierKey],
) -> Result<(CheckpointBody, Vec<&'k VerifierKey>), CheckpointError> {
    let (text, signed_by) = open_note(note, trusted)?;
    let body = parse_body(&text)?;
    if !signed_by.iter().any(|key| key.name() == body.origin) {
        return Err(CheckpointError::Signature(format!(
            "signed by {}, but the checkpoint's origin is {}",
            signed_by
                .iter()
                .map(|key| key.name())
                .collect::<Vec<_>>()
                .join(", "),
            body.origin
        )));
    }
    let signers = signed_by
        .into_iter()
        .filter(|key| key.name() == body.origin)
        .collect();
    Ok((body, signers))
}

/// Opens any signed note Attest writes (a checkpoint, the release's SHA256SUMS.note): at
/// least one signature must verify under one of `trusted`. Returns the note's text and
/// the trusted keys whose signatures verified.
pub fn open_note<'k>(
    note: &[u8],
    trusted: &'k [VerifierKey],
) -> Result<(Vec<u8>, Vec<&'k VerifierKey>), CheckpointError> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(CheckpointError::TooLarge(note.len()));
    }
    let parsed = Note::from_bytes(note).map_err(|e| CheckpointError::Malformed(e.to_string()))?;
    let verifiers = trusted
        .iter()
        .map(|key| {
            key.verifier()
                .map(|v| Box::new(v) as Box<dyn signed_note::Verifier>)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| CheckpointError::Malformed("unusable verifier key".to_owned()))?;
    let (verified, _) = parsed
        .verify(&VerifierList::new(verifiers))
        .map_err(|e| CheckpointError::Signature(e.to_string()))?;
    let signed_by = trusted
        .iter()
        .filter(|key| {
            verified
                .iter()
                .any(|sig| sig.name() == key.name() && sig.id() == key.key_id())
        })
        .collect();
    Ok((parsed.text().to_vec(), signed_by))
}

/// Reads a checkpoint's text without checking any signature: for showing what a
/// stored note claims when no trusted key was given. Never a basis for trust.
pub fn read_checkpoint_unverified(note: &[u8]) -> Result<CheckpointBody, CheckpointError> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(CheckpointError::TooLarge(note.len()));
    }
    let parsed = Note::from_bytes(note).map_err(|e| CheckpointError::Malformed(e.to_string()))?;
    parse_body(parsed.text())
}

pub(crate) fn parse_body(text: &[u8]) -> Result<CheckpointBody, CheckpointError> {
    let checkpoint = Checkpoint::from_bytes(text)
        .map_err(|_| CheckpointError::Malformed("not a tlog-checkpoint text".to_owned()))?;
    Ok(CheckpointBody {
        origin: checkpoint.origin().to_owned(),
        size: checkpoint.size(),
        root: checkpoint.hash().0,
    })
}

/// Splits a file of signed notes written one after another (an anchor file) into
/// notes. A note is its text, a blank line, then signature lines starting with `—`.
pub fn split_notes(file: &[u8]) -> Vec<Vec<u8>> {
    let mut notes = Vec::new();
    let mut current = Vec::new();
    let mut in_signatures = false;
    for line in file.split_inclusive(|b| *b == b'\n') {
        let is_signature = line.starts_with("\u{2014} ".as_bytes());
        if in_signatures && !is_signature {
            notes.push(std::mem::take(&mut current));
            in_signatures = false;
        }
        if in_signatures || !(current.is_empty() && line == b"\n") {
            current.extend_from_slice(line);
        }
        if is_signature {
            in_signatures = true;
        }
    }
    if !current.is_empty() {
        notes.push(current);
    }
    notes
}

/// Why a checkpoint note was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Over [`MAX_NOTE_BYTES`].
    #[error("note is {0} bytes, over the 64 KiB limit")]
    TooLarge(usize),
    /// Not a signed note, or its text is not a checkpoint.
    #[error("malformed checkpoint note: {0}")]
    Malformed(String),
    /// No signature verifies under a trusted key.
    #[error("signature not verified: {0}")]
    Signature(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO_SKEY: &str =
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    const GO_VKEY: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    const GO_TEXT: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    const GO_NOTE: &str = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";

    /// The signed-note example of `golang.org/x/mod/sumdb/note`'s documentation: our
    /// signer makes the same bytes (Ed25519 is deterministic) and the note verifies.
    #[test]
    fn the_go_documentation_note_signs_and_verifies_identically() {
        let key = SigningKey::from_text(GO_SKEY, "go docs").unwrap();
        let mut note = Note::new(GO_TEXT.as_bytes(), &[]).unwrap();
        note.add_sigs(&[key.signer()]).unwrap();
        assert_eq!(String::from_utf8(note.to_bytes()).unwrap(), GO_NOTE);

        let vkey = VerifierKey::parse(GO_VKEY, "go docs").unwrap();
        let parsed = Note::from_bytes(GO_NOTE.as_bytes()).unwrap();
        let list = VerifierList::new(vec![Box::new(vkey.verifier().unwrap())]);
        assert!(parsed.verify(&list).is_ok());
        let tampered = GO_NOTE.replace("cryptography", "cryptographY");
        let parsed = Note::from_bytes(tampered.as_bytes()).unwrap();
        assert!(parsed.verify(&list).is_err());
    }

    #[test]
    fn a_signed_checkpoint_opens_under_its_key_only() {
        let (key, _) = SigningKey::generate("attest.test/log").unwrap();
        let (other, _) = SigningKey::generate("attest.test/log").unwrap();
        let root = [9u8; 32];
        let note = sign_checkpoint(&key, 42, &root).unwrap();
        assert!(note.starts_with("attest.test/log\n42\n"));
        let body = open_checkpoint(note.as_bytes(), std::slice::from_ref(key.verifier())).unwrap();
        assert_eq!((body.size, body.root), (42, root));
        let err = open_checkpoint(note.as_bytes(), std::slice::from_ref(other.verifier()));
        assert!(matches!(err, Err(CheckpointError::Signature(_))), "{err:?}");
        assert!(open_checkpoint(note.as_bytes(), &[]).is_err());
        let forged = note.replace("\n42\n", "\n43\n");
        assert!(open_checkpoint(forged.as_bytes(), std::slice::from_ref(key.verifier())).is_err());
        assert_eq!(
            read_checkpoint_unverified(forged.as_bytes()).unwrap().size,
            43
        );
    }

    #[test]
    fn notes_written_one_after_another_split_back_apart() {
        let (key, _) = SigningKey::generate("k").unwrap();
        let first = sign_checkpoint(&key, 1, &[1; 32]).unwrap();
        let second = sign_checkpoint(&key, 2, &[2; 32]).unwrap();
        let file = format!("{first}{second}\n{first}");
        let notes = split_notes(file.as_bytes());
        assert_eq!(notes.len(), 3);
        assert_eq!(notes[0], first.as_bytes());
        assert_eq!(notes[1], second.as_bytes());
        assert_eq!(notes[2], first.as_bytes());
        assert!(split_notes(b"").is_empty());
    }

    #[test]
    fn malformed_and_oversized_notes_are_refused() {
        let (key, _) = SigningKey::generate("k").unwrap();
        let trusted = std::slice::from_ref(key.verifier());
        assert!(matches!(
            open_checkpoint(&vec![b'a'; MAX_NOTE_BYTES + 1], trusted),
            Err(CheckpointError::TooLarge(_))
        ));
        assert!(open_checkpoint(b"just text", trusted).is_err());
        assert!(open_checkpoint(b"", trusted).is_err());
    }
}

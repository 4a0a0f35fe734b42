//! Witness cosignatures (C2SP `tlog-cosignature/v1`, Ed25519, key type 0x04).
//!
//! A cosignature line is `— <witness name> base64(key id ‖ u64 timestamp ‖ signature)`,
//! where the signature covers `cosignature/v1\ntime <timestamp>\n` followed by the
//! checkpoint text, and the key id is the first four bytes of
//! SHA-256(name ‖ `\n` ‖ 0x04 ‖ public key).

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use ed25519_dalek::Verifier as _;
use signed_note::{Note, Signature, VerifierList};

use super::TileError;
use crate::checkpoint::parse_body;
use crate::keys::read_private;
use crate::{CheckpointBody, CheckpointError, VerifierKey, MAX_NOTE_BYTES};

/// The key type byte of an Ed25519 `cosignature/v1` key.
const ALG_COSIGNATURE_V1: u8 = 0x04;

/// A witness's private key: an Ed25519 key in the signed-note private-key text (what
/// `attest keygen` writes) or on a PKCS#11 token, used for `cosignature/v1` signatures.
pub struct CosigningKey {
    name: String,
    signing: crate::SigningKey,
    verifier: CosignerKey,
}

impl fmt::Debug for CosigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CosigningKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CosigningKey {
    /// Parses a private key's text; `origin` names it in errors.
    pub fn from_text(text: &str, origin: &str) -> Result<CosigningKey, TileError> {
        CosigningKey::from_signing_key(crate::SigningKey::from_text(text, origin)?)
    }

    /// The witness key `signing` is (a key file's, or a token's: see
    /// [`crate::SigningKey::from_token`]); its name is the witness's name.
    pub fn from_signing_key(signing: crate::SigningKey) -> Result<CosigningKey, TileError> {
        let public = signing
            .verifier()
            .ed25519_public()
            .ok_or(TileError::Internal(
                "an accepted verifier key is not Ed25519",
            ))?;
        let name = signing.name().to_owned();
        let verifier = CosignerKey::from_public(&name, &public);
        Ok(CosigningKey {
            name,
            signing,
            verifier,
        })
    }

    /// Reads a private key file; refuses one that group or others may read.
    pub fn load(path: &Path) -> Result<CosigningKey, TileError> {
        let text = read_private(path)?;
        CosigningKey::from_text(&text, &path.display().to_string())
    }

    /// The witness's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The matching cosignature verifier key, `<name>+<id>+base64(0x04 ‖ public key)`.
    pub fn verifier(&self) -> &CosignerKey {
        &self.verifier
    }

    /// The signature line cosigning the checkpoint `text` at `timestamp` (seconds since
    /// the Unix epoch), ending in a newline.
    pub fn cosign(&self, text: &[u8], timestamp: u64) -> Result<String, TileError> {
        let mut message = format!("cosignature/v1\ntime {timestamp}\n").into_bytes();
        message.extend_from_slice(text);
        let signature =
            self.signing
                .signer()
                .sign(&message)
                .map_err(|_| crate::LedgerError::Token {
                    token: self.name.clone(),
                    detail: "the witness key did not sign the cosignature".to_owned(),
                })?;
        let mut bytes = timestamp.to_be_bytes().to_vec();
        bytes.extend_from_slice(&signature);
        let line = Signature::new(self.name.clone(), self.verifier.key_id, bytes)
            .map_err(|_| TileError::Internal("a valid key name made a bad signature line"))?
            .to_bytes();
        String::from_utf8(line).map_err(|_| TileError::Internal("a signature line is not UTF-8"))
    }
}

/// A witness's public key for `cosignature/v1` signatures:
/// `<name>+<hex key id>+base64(0x04 ‖ public key)`.
#[derive(Clone, PartialEq, Eq)]
pub struct CosignerKey {
    text: String,
    name: String,
    key_id: u32,
    public: ed25519_dalek::VerifyingKey,
}

impl fmt::Debug for CosignerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for CosignerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl CosignerKey {
    fn from_public(name: &str, public: &[u8; 32]) -> CosignerKey {
        let mut encoded = vec![ALG_COSIGNATURE_V1];
        encoded.extend_from_slice(public);
        let key_id = signed_note::key_id(name, &encoded);
        let text = format!(
            "{name}+{key_id:08x}+{}",
            base64::engine::general_purpose::STANDARD.encode(&encoded)
        );
        CosignerKey {
            text,
            name: name.to_owned(),
            key_id,
            // A 32-byte array from a signing key is always a valid point.
            public: ed25519_dalek::VerifyingKey::from_bytes(public).unwrap_or_default(),
        }
    }

    /// Parses a cosignature verifier key; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<CosignerKey, TileError> {
        let text = text.trim();
        let bad = |detail: &str| TileError::BadKey {
            origin: origin.to_owned(),
            detail: detail.to_owned(),
        };
        // The base64 part may itself hold '+'.
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(id), Some(encoded)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("not <name>+<key id>+<base64>"));
        };
        if !signed_note::is_key_name_valid(name) {
            return Err(bad("invalid key name"));
        }
        let id = (id.len() == 8)
            .then(|| u32::from_str_radix(id, 16).ok())
            .flatten()
            .ok_or_else(|| bad("the key id is not 8 hex digits"))?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| bad("key data is not base64"))?;
        let public: [u8; 32] = match decoded.split_first() {
            Some((&ALG_COSIGNATURE_V1, public)) => public
                .try_into()
                .map_err(|_| bad("Ed25519 key data is not 32 bytes"))?,
            Some((&0x01, _)) => {
                return Err(bad(
                    "an Ed25519 note key (type 0x01), not a cosignature/v1 key (type 0x04)",
                ))
            }
            _ => return Err(bad("not a cosignature/v1 key (type 0x04)")),
        };
        if signed_note::key_id(name, &decoded) != id {
            return Err(bad("key id does not match the key"));
        }
        let public = ed25519_dalek::VerifyingKey::from_bytes(&public)
            .map_err(|_| bad("not a valid Ed25519 key"))?;
        Ok(CosignerKey {
            text: text.to_owned(),
            name: name.to_owned(),
            key_id: id,
            public,
        })
    }

    /// The witness's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl signed_note::Verifier for CosignerKey {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.key_id
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Some((timestamp, signature)) = sig.split_first_chunk::<8>() else {
            return false;
        };
        let timestamp = u64::from_be_bytes(*timestamp);
        let Ok(signature) = ed25519_dalek::Signature::from_slice(signature) else {
            return false;
        };
        if timestamp == 0 || timestamp >= 1 << 63 {
            return false;
        }
        let mut message = format!("cosignature/v1\ntime {timestamp}\n").into_bytes();
        message.extend_from_slice(msg);
        self.public.verify(&message, &signature).is_ok()
    }
}

/// A checkpoint opened with the log's keys and witnesses' keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignedCheckpoint {
    /// What it says.
    pub body: CheckpointBody,
    /// The log key whose signature verified (its name is the origin).
    pub signed_by: String,
    /// The witnesses whose cosignatures verified, each once, in note order.
    pub cosigned_by: Vec<String>,
}

/// Opens a checkpoint note: a signature by one of the log keys `trusted` whose name is
/// the origin is required; cosignatures by `witnesses` are checked and named. A
/// signature line of a known key that does not verify rejects the whole note (as
/// signed-note requires); lines of unknown keys are ignored.
pub fn open_cosigned(
    note: &[u8],
    trusted: &[VerifierKey],
    witnesses: &[CosignerKey],
) -> Result<CosignedCheckpoint, CheckpointError> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(CheckpointError::TooLarge(note.len()));
    }
    let parsed = Note::from_bytes(note).map_err(|e| CheckpointError::Malformed(e.to_string()))?;
    let mut verifiers: Vec<Box<dyn signed_note::Verifier>> = Vec::new();
    for key in trusted {
        let verifier = key
            .verifier()
            .map_err(|_| CheckpointError::Malformed("unusable verifier key".to_owned()))?;
        verifiers.push(Box::new(verifier));
    }
    for witness in witnesses {
        verifiers.push(Box::new(witness.clone()));
    }
    let (verified, _) = parsed
        .verify(&VerifierList::new(verifiers))
        .map_err(|e| CheckpointError::Signature(e.to_string()))?;
    let body = parse_body(parsed.text())?;
    let is_log_key = |sig: &Signature| {
        trusted
            .iter()
            .any(|k| k.name() == sig.name() && k.key_id() == sig.id())
    };
    let signed_by = verified
        .iter()
        .find(|sig| is_log_key(sig) && sig.name() == body.origin)
        .map(|sig| sig.name().to_owned())
        .ok_or_else(|| {
            CheckpointError::Signature(format!(
                "no signature by a trusted key of the log {:?}",
                body.origin
            ))
        })?;
    let mut cosigned_by: Vec<String> = Vec::new();
    for sig in &verified {
        let is_witness = witnesses
            .iter()
            .any(|w| w.name == sig.name() && w.key_id == sig.id());
        if is_witness && !cosigned_by.iter().any(|n| n == sig.name()) {
            cosigned_by.push(sig.name().to_owned());
        }
    }
    Ok(CosignedCheckpoint {
        body,
        signed_by,
        cosigned_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sign_checkpoint, SigningKey};

    #[test]
    fn a_cosignature_opens_under_its_witness_key_only() {
        let (log, _) = SigningKey::generate("attest.test/log").unwrap();
        let (_, witness_text) = SigningKey::generate("witness.test/w1").unwrap();
        let witness = CosigningKey::from_text(&witness_text, "test").unwrap();
        let (_, other_text) = SigningKey::generate("witness.test/w1").unwrap();
        let other = CosigningKey::from_text(&other_text, "test").unwrap();
        let note = sign_checkpoint(&log, 5, &[3; 32]).unwrap();
        let text = &note.as_bytes()[..note.find("\n\n").unwrap() + 1];
        let line = witness.cosign(text, 1_700_000_000).unwrap();
        let cosigned = format!("{note}{line}");
        let key = CosignerKey::parse(&witness.verifier().to_string(), "test").unwrap();
        assert_eq!(&key, witness.verifier());
        let trusted = std::slice::from_ref(log.verifier());
        let opened =
            open_cosigned(cosigned.as_bytes(), trusted, std::slice::from_ref(&key)).unwrap();
        assert_eq!(opened.cosigned_by, vec!["witness.test/w1".to_owned()]);
        assert_eq!(opened.body.size, 5);
        // Another witness key of the same name: not counted (unknown key id).
        let opened = open_cosigned(cosigned.as_bytes(), trusted, &[other.verifier().clone()]);
        assert!(opened.unwrap().cosigned_by.is_empty());
        // A cosignature over another checkpoint fails the whole note.
        let forged = format!("{}{line}", sign_checkpoint(&log, 6, &[3; 32]).unwrap());
        assert!(open_cosigned(forged.as_bytes(), trusted, std::slice::from_ref(&key)).is_err());
        // A witness alone is not the log.
        assert!(open_cosigned(cosigned.as_bytes(), &[], &[key]).is_err());
        // Keys whose base64 holds '+' (the separator of the other parts) parse back.
        for _ in 0..40 {
            let (_, text) = SigningKey::generate("witness.test/w2").unwrap();
            let key = CosigningKey::from_text(&text, "test").unwrap();
            let parsed = CosignerKey::parse(&key.verifier().to_string(), "test").unwrap();
            assert_eq!(&parsed, key.verifier());
        }
        // An Ed25519 note key is not a cosignature key.
        assert!(CosignerKey::parse(&log.verifier().to_string(), "test").is_err());
    }
}

//! Signing and verifier keys in the C2SP signed-note text encodings:
//! `PRIVATE+KEY+<name>+<keyhash>+<base64>` and `<name>+<keyhash>+<base64>`, so Go's
//! `golang.org/x/mod/sumdb/note` and any other signed-note implementation read them.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use signed_note::{Signer, StandardSigner, StandardVerifier, Verifier};

use crate::LedgerError;

/// Longest key file read, in bytes: a key is about 100.
const MAX_KEY_FILE: u64 = 4096;

/// The Ed25519 algorithm byte in signed-note key encodings.
const ALG_ED25519: u8 = 0x01;

/// A private Ed25519 key that signs checkpoints.
pub struct SigningKey {
    /// A key file's signer, or a PKCS#11 token's (the private key stays there).
    signer: Box<dyn Signer + Send + Sync>,
    verifier: VerifierKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the key itself.
        f.debug_struct("SigningKey")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh key named `name` from the operating system's random numbers, with its
    /// private text encoding (write that to a 0600 file with [`SigningKey::write_new`]).
    pub fn generate(name: &str) -> Result<(SigningKey, String), LedgerError> {
        if !signed_note::is_key_name_valid(name) {
            return Err(LedgerError::BadKey {
                origin: "--name".to_owned(),
                detail: format!("{name:?} is not a valid key name (non-empty, no spaces or '+')"),
            });
        }
        let (private, _) = signed_note::generate_key(&mut rand_core::OsRng, name);
        let key = SigningKey::from_text(&private, "generated key")?;
        Ok((key, private))
    }

    /// Parses a private key's text encoding; `origin` names it in errors.
    pub fn from_text(text: &str, origin: &str) -> Result<SigningKey, LedgerError> {
        let text = text.trim();
        let bad = |detail: &str| LedgerError::BadKey {
            origin: origin.to_owned(),
            detail: detail.to_owned(),
        };
        let signer = StandardSigner::new(text)
            .map_err(|e| bad(&format!("not a signed-note private key: {e}")))?;
        let seed = ed25519_seed(text, origin)?;
        let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
        let verifier_text = signed_note::new_ed25519_verifier_key(signer.name(), &public);
        let verifier = VerifierKey::parse(&verifier_text, origin)?;
        if verifier.key_id() != signer.key_id() {
            return Err(bad("key hash does not match the key"));
        }
        Ok(SigningKey {
            signer: Box::new(signer),
            verifier,
        })
    }

    /// The key a PKCS#11 URI names (`pkcs11:token=…;object=…?module-path=…`), logged in
    /// with `pin`: signing happens on the token.
    pub fn from_token(uri: &crate::TokenKeyUri, pin: &str) -> Result<SigningKey, LedgerError> {
        let (signer, verifier) = crate::pkcs11::open_token_key(uri, pin)?;
        Ok(SigningKey {
            signer: Box::new(signer),
            verifier,
        })
    }

    /// Reads a private key file; refuses one that group or others may read.
    pub fn load(path: &Path) -> Result<SigningKey, LedgerError> {
        let text = read_private(path)?;
        SigningKey::from_text(&text, &path.display().to_string())
    }

    /// Writes `private` (a key's text encoding) to a new file with mode 0600, creating
    /// its directory; refuses to overwrite an existing file.
    pub fn write_new(path: &Path, private: &str) -> Result<(), LedgerError> {
        write_private(path, private)
    }

    /// The key's name: the checkpoint origin.
    pub fn name(&self) -> &str {
        self.signer.name()
    }

    /// The matching verifier key.
    pub fn verifier(&self) -> &VerifierKey {
        &self.verifier
    }

    pub(crate) fn signer(&self) -> &dyn Signer {
        self.signer.as_ref()
    }
}

/// Reads a private key file's text; refuses one that group or others may read.
pub(crate) fn read_private(path: &Path) -> Result<String, LedgerError> {
    let metadata = std::fs::metadata(path).map_err(|source| LedgerError::KeyFile {
        path: path.to_path_buf(),
        source,
    })?;
    let shared = crate::private::shared_bits(&metadata);
    if shared != 0 {
        return Err(LedgerError::KeyShared {
            path: path.to_path_buf(),
            mode: shared,
        });
    }
    read_small(path)
}

/// Writes a private key's text to a new 0600 file (see [`SigningKey::write_new`]).
pub(crate) fn write_private(path: &Path, private: &str) -> Result<(), LedgerError> {
    let io = |source| LedgerError::KeyFile {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::private::create_dir_all(dir).map_err(io)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io)?;
    writeln!(file, "{private}").map_err(io)?;
    file.sync_all().map_err(io)
}

/// The Ed25519 seed of a private key's text encoding,
/// `PRIVATE+KEY+<name>+<id>+<base64(0x01 ‖ seed)>`; `origin` names it in errors.
pub(crate) fn ed25519_seed(text: &str, origin: &str) -> Result<[u8; 32], LedgerError> {
    let bad = |detail: &str| LedgerError::BadKey {
        origin: origin.to_owned(),
        detail: detail.to_owned(),
    };
    let encoded = text
        .trim()
        .splitn(5, '+')
        .nth(4)
        .ok_or_else(|| bad("no key data"))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| bad("key data is not base64"))?;
    match decoded.split_first() {
        Some((&ALG_ED25519, seed)) => seed
            .try_into()
            .map_err(|_| bad("Ed25519 key data is not 32 bytes")),
        _ => Err(bad("not an Ed25519 key")),
    }
}

/// A public key that checks checkpoint signatures: `<name>+<keyhash>+<base64>`.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifierKey {
    text: String,
    name: String,
    key_id: u32,
}

impl fmt::Debug for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl VerifierKey {
    /// Parses a verifier key's text encoding; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<VerifierKey, LedgerError> {
        let text = text.trim();
        let verifier = StandardVerifier::new(text).map_err(|e| LedgerError::BadKey {
            origin: origin.to_owned(),
            detail: format!("not a signed-note verifier key: {e}"),
        })?;
        Ok(VerifierKey {
            name: verifier.name().to_owned(),
            key_id: verifier.key_id(),
            text: text.to_owned(),
        })
    }

    /// Reads a verifier key file.
    pub fn load(path: &Path) -> Result<VerifierKey, LedgerError> {
        let text = read_small(path)?;
        VerifierKey::parse(&text, &path.display().to_string())
    }

    /// The key's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The signed-note key id (the first four bytes of the key hash).
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// The Ed25519 public key, from the text's `base64(0x01 ‖ key)` (after the name and
    /// the key hash: the base64 itself may hold '+').
    pub(crate) fn ed25519_public(&self) -> Option<[u8; 32]> {
        let encoded = self.text.splitn(3, '+').nth(2)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        match bytes.split_first() {
            Some((&ALG_ED25519, public)) => public.try_into().ok(),
            _ => None,
        }
    }

    /// A signed-note verifier for this key.
    pub(crate) fn verifier(&self) -> Result<StandardVerifier, LedgerError> {
        StandardVerifier::new(&self.text)
            .map_err(|_| LedgerError::Internal("an accepted verifier key no longer parses"))
    }
}

fn read_small(path: &Path) -> Result<String, LedgerError> {
    let io = |source| LedgerError::KeyFile {
        path: PathBuf::from(path),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(io)?;
    if metadata.len() > MAX_KEY_FILE {
        return Err(LedgerError::BadKey {
            origin: path.display().to_string(),
            detail: format!(
                "file is {} bytes; a key is under {MAX_KEY_FILE}",
                metadata.len()
            ),
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_round_trips_through_its_text() {
        let (key, private) = SigningKey::generate("attest.example/ledger").unwrap();
        assert!(private.starts_with("PRIVATE+KEY+attest.example/ledger+"));
        let again = SigningKey::from_text(&private, "test").unwrap();
        assert_eq!(again.verifier().to_string(), key.verifier().to_string());
        assert!(key
            .verifier()
            .to_string()
            .starts_with("attest.example/ledger+"));
        assert!(!format!("{key:?}").contains(&private));
    }

    #[test]
    fn go_documentation_keys_parse() {
        // The example keys from golang.org/x/mod/sumdb/note's package documentation.
        let private =
            "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
        let public = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
        let key = SigningKey::from_text(private, "go docs").unwrap();
        assert_eq!(key.verifier().to_string(), public);
        assert_eq!(
            VerifierKey::parse(public, "go docs").unwrap().name(),
            "PeterNeumann"
        );
    }

    #[test]
    fn malformed_keys_are_named_errors() {
        for text in [
            "",
            "PRIVATE+KEY+x",
            "name+0000+AAAA",
            "PRIVATE+KEY+n+00000000+!!!!",
        ] {
            let err = SigningKey::from_text(text, "key.txt").unwrap_err();
            assert!(err.to_string().contains("key.txt"), "{err}");
        }
        assert!(VerifierKey::parse("nope", "v").is_err());
        assert!(SigningKey::generate("has space").is_err());
    }

    #[test]
    fn a_key_file_is_private_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/signing.key");
        let (_, private) = SigningKey::generate("t").unwrap();
        SigningKey::write_new(&path, &private).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(SigningKey::write_new(&path, &private).is_err());
        assert_eq!(SigningKey::load(&path).unwrap().name(), "t");
    }
}

//! Checkpoint signing keys kept in a PKCS#11 token (an HSM, a cloud KMS's PKCS#11
//! library, SoftHSM2): the private key is generated on the token and never leaves it;
//! Attest asks the token to sign (Ed25519, `CKM_EDDSA`). The note format is unchanged.
//!
//! A key is named by an RFC 7512 URI:
//! `pkcs11:token=LABEL;object=NAME?module-path=/usr/lib/softhsm/libsofthsm2.so`, where
//! `object` is the key's label on the token and also its signed-note name (the
//! checkpoint origin). The user PIN is never part of the URI or the configuration.

use std::path::PathBuf;

use cryptoki::context::{CInitializeArgs, Pkcs11};
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;

use crate::{LedgerError, VerifierKey};

/// DER of the Ed25519 object identifier (1.3.101.112), the curve's `CKA_EC_PARAMS`.
const ED25519_OID: [u8; 5] = [0x06, 0x03, 0x2b, 0x65, 0x70];

/// A key's place on a token, parsed from its `pkcs11:` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenKeyUri {
    /// The token's label.
    pub token: String,
    /// The key's label, which is also its signed-note name.
    pub object: String,
    /// The token's PKCS#11 module (shared library).
    pub module: PathBuf,
}

impl TokenKeyUri {
    /// Parses `pkcs11:token=…;object=…?module-path=…`. Values are taken literally;
    /// percent-encoding and other attributes are refused rather than guessed at.
    pub fn parse(uri: &str) -> Result<TokenKeyUri, LedgerError> {
        let bad = |detail: String| LedgerError::BadKey {
            origin: "pkcs11 URI".to_owned(),
            detail,
        };
        let rest = uri
            .strip_prefix("pkcs11:")
            .ok_or_else(|| bad("does not start with `pkcs11:`".to_owned()))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (mut token, mut object, mut module) = (None, None, None);
        let attrs = path.split(';').chain(query.split('&'));
        for attr in attrs.filter(|a| !a.is_empty()) {
            let (key, value) = attr
                .split_once('=')
                .ok_or_else(|| bad(format!("{attr:?} is not NAME=VALUE")))?;
            if value.is_empty() || value.contains('%') {
                return Err(bad(format!("{key}: an empty or percent-encoded value")));
            }
            let slot = match key {
                "token" => &mut token,
                "object" => &mut object,
                "module-path" => &mut module,
                other => return Err(bad(format!("unsupported attribute {other:?}"))),
            };
            if slot.replace(value.to_owned()).is_some() {
                return Err(bad(format!("{key} given twice")));
            }
        }
        Ok(TokenKeyUri {
            token: token.ok_or_else(|| bad("no token=".to_owned()))?,
            object: object.ok_or_else(|| bad("no object=".to_owned()))?,
            module: module
                .ok_or_else(|| bad("no module-path=".to_owned()))?
                .into(),
        })
    }
}

/// A signed-note signer whose Ed25519 private key stays on the token.
pub(crate) struct TokenSigner {
    // A session is one thread's at a time (PKCS#11 sessions are not reentrant).
    session: std::sync::Mutex<Session>,
    key: ObjectHandle,
    name: String,
    key_id: u32,
}

impl signed_note::Signer for TokenSigner {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.key_id
    }

    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, ed25519_dalek::SignatureError> {
        let mechanism = Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure));
        let session = self
            .session
            .lock()
            .map_err(|_| ed25519_dalek::SignatureError::new())?;
        session
            .sign(&mechanism, self.key, msg)
            .map_err(|_| ed25519_dalek::SignatureError::new())
    }
}

/// Generates an Ed25519 key pair on the token `uri` names, labelled `uri.object`;
/// refuses when a key of that label exists. Returns its verifier key.
pub fn generate_token_key(uri: &TokenKeyUri, pin: &str) -> Result<VerifierKey, LedgerError> {
    let session = login(uri, pin, true, &[MechanismType::ECC_EDWARDS_KEY_PAIR_GEN])?;
    if !find(&session, uri, ObjectClass::PRIVATE_KEY)?.is_empty() {
        return Err(token_error(
            uri,
            format!("a key labelled {:?} already exists", uri.object),
        ));
    }
    let label = uri.object.as_bytes().to_vec();
    let public = [
        Attribute::Token(true),
        Attribute::Verify(true),
        Attribute::EcParams(ED25519_OID.to_vec()),
        Attribute::Label(label.clone()),
    ];
    let private = [
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Label(label),
    ];
    session
        .generate_key_pair(&Mechanism::EccEdwardsKeyPairGen, &public, &private)
        .map_err(|e| token_error(uri, format!("generating an Ed25519 key pair: {e}")))?;
    verifier_of(&session, uri)
}

/// Opens the key `uri` names for signing, with its verifier key.
pub(crate) fn open_token_key(
    uri: &TokenKeyUri,
    pin: &str,
) -> Result<(TokenSigner, VerifierKey), LedgerError> {
    let session = login(uri, pin, false, &[MechanismType::EDDSA])?;
    let verifier = verifier_of(&session, uri)?;
    let key = match find(&session, uri, ObjectClass::PRIVATE_KEY)?.as_slice() {
        [key] => *key,
        [] => {
            return Err(token_error(
                uri,
                format!("no private key labelled {:?}", uri.object),
            ))
        }
        _ => {
            return Err(token_error(
                uri,
                format!("several private keys labelled {:?}", uri.object),
            ))
        }
    };
    let signer = TokenSigner {
        session: std::sync::Mutex::new(session),
        key,
        name: verifier.name().to_owned(),
        key_id: verifier.key_id(),
    };
    Ok((signer, verifier))
}

/// Loads the module, finds the token, checks it offers `mechanisms`, and logs in.
fn login(
    uri: &TokenKeyUri,
    pin: &str,
    write: bool,
    mechanisms: &[MechanismType],
) -> Result<Session, LedgerError> {
    let ctx = Pkcs11::new(&uri.module)
        .map_err(|e| token_error(uri, format!("cannot load {}: {e}", uri.module.display())))?;
    match ctx.initialize(CInitializeArgs::OsThreads) {
        Ok(()) | Err(cryptoki::error::Error::AlreadyInitialized) => {}
        Err(e) => return Err(token_error(uri, format!("C_Initialize: {e}"))),
    }
    let slot = token_slot(&ctx, uri)?;
    let offered = ctx
        .get_mechanism_list(slot)
        .map_err(|e| token_error(uri, format!("C_GetMechanismList: {e}")))?;
    for mechanism in mechanisms {
        if !offered.contains(mechanism) {
            return Err(LedgerError::TokenMechanism {
                token: uri.token.clone(),
                mechanism: mechanism.to_string(),
            });
        }
    }
    let session = if write {
        ctx.open_rw_session(slot)
    } else {
        ctx.open_ro_session(slot)
    }
    .map_err(|e| token_error(uri, format!("C_OpenSession: {e}")))?;
    let pin = AuthPin::new(pin.into());
    match session.login(UserType::User, Some(&pin)) {
        Ok(())
        | Err(cryptoki::error::Error::Pkcs11(cryptoki::error::RvError::UserAlreadyLoggedIn, _)) => {
        }
        // The PIN itself is never in the message.
        Err(e) => return Err(token_error(uri, format!("C_Login as user: {e}"))),
    }
    Ok(session)
}

fn token_slot(ctx: &Pkcs11, uri: &TokenKeyUri) -> Result<Slot, LedgerError> {
    let slots = ctx
        .get_slots_with_token()
        .map_err(|e| token_error(uri, format!("C_GetSlotList: {e}")))?;
    for slot in slots {
        let info = ctx
            .get_token_info(slot)
            .map_err(|e| token_error(uri, format!("C_GetTokenInfo: {e}")))?;
        if info.label().trim_end() == uri.token {
            return Ok(slot);
        }
    }
    Err(token_error(uri, "no token with that label".to_owned()))
}

fn find(
    session: &Session,
    uri: &TokenKeyUri,
    class: ObjectClass,
) -> Result<Vec<ObjectHandle>, LedgerError> {
    session
        .find_objects(&[
            Attribute::Class(class),
            Attribute::Label(uri.object.as_bytes().to_vec()),
        ])
        .map_err(|e| token_error(uri, format!("C_FindObjects: {e}")))
}

/// The verifier key of the public half on the token: `CKA_EC_POINT` is the 32-byte
/// Ed25519 point, bare or DER-wrapped in an OCTET STRING (tokens differ).
fn verifier_of(session: &Session, uri: &TokenKeyUri) -> Result<VerifierKey, LedgerError> {
    let public = match find(session, uri, ObjectClass::PUBLIC_KEY)?.as_slice() {
        [key] => *key,
        _ => {
            return Err(token_error(
                uri,
                format!("not exactly one public key labelled {:?}", uri.object),
            ))
        }
    };
    let attrs = session
        .get_attributes(public, &[AttributeType::EcPoint])
        .map_err(|e| token_error(uri, format!("C_GetAttributeValue: {e}")))?;
    let point = attrs
        .into_iter()
        .find_map(|a| match a {
            Attribute::EcPoint(point) => Some(point),
            _ => None,
        })
        .ok_or_else(|| token_error(uri, "the public key has no CKA_EC_POINT".to_owned()))?;
    let raw: [u8; 32] = match point.as_slice() {
        [0x04, 0x20, rest @ ..] if rest.len() == 32 => rest.try_into().ok(),
        bare if bare.len() == 32 => bare.try_into().ok(),
        _ => None,
    }
    .ok_or_else(|| token_error(uri, "CKA_EC_POINT is not an Ed25519 point".to_owned()))?;
    let public = ed25519_dalek::VerifyingKey::from_bytes(&raw)
        .map_err(|e| token_error(uri, format!("CKA_EC_POINT: {e}")))?;
    let text = signed_note::new_ed25519_verifier_key(&uri.object, &public);
    VerifierKey::parse(&text, "the token's public key")
}

fn token_error(uri: &TokenKeyUri, detail: String) -> LedgerError {
    LedgerError::Token {
        token: uri.token.clone(),
        detail,
    }
}

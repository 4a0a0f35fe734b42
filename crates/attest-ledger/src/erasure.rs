//! Personal fields and their erasure by crypto-shredding.
//!
//! A row's personal fields (those the configuration names: a target, named params in
//! the preview) can be sealed under a key of the person they are about, the subject
//! ([`Ledger::seal`]): each field reads `"sealed"` in the body, and the optional
//! `"sealed"` object holds its ciphertext (ChaCha20-Poly1305, RFC 8439; a random 12-byte
//! nonce; associated data the row's `action_id`, a zero byte and the field's path, so a
//! ciphertext cannot be moved to another row or field) and the subject's blind index
//! (HMAC-SHA-256 of the subject under a secret, so rows can be found by subject without
//! naming it). The subject keys and the blind-index secret live in the store beside
//! the chain (`subject_keys`, `attest_meta`), never in a body.
//!
//! Erasure ([`Ledger::erase`]) deletes the subject's key and appends an erasure row (the
//! optional `"erasure"` object: blind index, who asked, how many rows) in one
//! transaction: after a crash either both happened or neither. No stored byte changes,
//! so the chain, the tree, every checkpoint and proof still verify; the ciphertext can
//! no longer be opened, and every view reads the field as `"erased"` ([`Revealer`]).
//!
//! What erasure cannot reach: copies of the key or of the opened fields made before it
//! (a backup of the store, an export of a view), and anything a reader was shown. The
//! hashed bodies (exports in `jsonl`, bundles, published tiles, a mirror) hold only the
//! ciphertext; with the key gone it stays unreadable wherever it was copied.

use std::collections::HashMap;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::{Erasure, Execution, Ledger, LedgerError, Record, Sealed};

/// What a sealed field reads in the body.
pub const SEALED: &str = "sealed";
/// What a sealed field reads in every view once its subject's key is gone.
pub const ERASED: &str = "erased";
/// The prefix of a preview field's path in [`Sealed::fields`].
const PREVIEW: &str = "params_preview.";

/// A kept key as the store lists it: the subject's blind index, and the key.
pub(crate) type KeptKey = ([u8; 32], [u8; 32]);

/// A subject's key as the store hands it out: the blind index it is kept under, and the
/// key. Never printed.
#[derive(Clone)]
pub struct SubjectKey {
    index: [u8; 32],
    key: [u8; 32],
}

impl std::fmt::Debug for SubjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubjectKey")
            .field("index", &hex::encode(self.index))
            .finish_non_exhaustive()
    }
}

/// A key's destruction riding in an append's transaction: the key at `index` is deleted
/// after the row is written (none there: nothing is written, [`LedgerError::SubjectErased`]),
/// then `before_commit` runs, then the transaction commits.
pub(crate) struct Forget<'f> {
    pub(crate) index: [u8; 32],
    pub(crate) before_commit: Option<&'f (dyn Fn() + Sync)>,
}

/// What [`Ledger::erase`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erased {
    /// The key is gone and the erasure row is at `seq`.
    Done {
        /// The erasure row's seq.
        seq: u64,
        /// How many rows held fields sealed under the key.
        rows: u64,
        /// The subject's blind index (lower-case hex).
        subject: String,
    },
    /// No key is kept for the subject: it was erased before (or never had sealed rows).
    /// Nothing was written.
    Already {
        /// The subject's blind index (lower-case hex).
        subject: String,
    },
}

impl Ledger {
    /// The subject's blind index: HMAC-SHA-256 of the subject (trimmed, lower case)
    /// under the secret kept in `attest_meta`, with a label of its own.
    pub fn subject_index(&self, subject: &str) -> Result<[u8; 32], LedgerError> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key_secret()?)
            .map_err(|_| LedgerError::Internal("an HMAC key of 32 bytes"))?;
        mac.update(b"attest erasure subject v1\0");
        mac.update(subject.trim().to_lowercase().as_bytes());
        Ok(mac.finalize().into_bytes().into())
    }

    /// The subject's key, made and stored now if it has none.
    pub fn subject_key(&self, subject: &str) -> Result<SubjectKey, LedgerError> {
        let index = self.subject_index(subject)?;
        let mut fresh = [0u8; 32];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut fresh);
        let key = self
            .store
            .subject_key(&index, Some(&fresh))?
            .ok_or(LedgerError::Internal(
                "a subject key was stored and not read back",
            ))?;
        Ok(SubjectKey { index, key })
    }

    /// Seals the fields of `record` named by `fields` (`target`, or a name in its
    /// params preview) under `subject`'s key: each reads [`SEALED`] and its ciphertext
    /// goes to `record.sealed`. A record with none of them is left as it is. An error
    /// (the key could not be read or stored) leaves the record unwritable: the caller
    /// must not append it unsealed.
    pub fn seal(
        &self,
        record: &mut Record,
        subject: &str,
        fields: &[String],
    ) -> Result<(), LedgerError> {
        let present = |name: &str| match name {
            "target" => record.target.is_some(),
            _ => record.params_preview.contains_key(name),
        };
        if !fields.iter().any(|name| present(name)) {
            return Ok(());
        }
        let key = self.subject_key(subject)?;
        let mut sealed = Sealed {
            fields: Default::default(),
            subject: hex::encode(key.index),
        };
        for name in fields {
            let (path, slot) = if name == "target" {
                let Some(target) = record.target.as_mut() else {
                    continue;
                };
                let value = Value::String(std::mem::replace(target, SEALED.to_owned()));
                ("target".to_owned(), value)
            } else {
                let Some(value) = record.params_preview.get_mut(name.as_str()) else {
                    continue;
                };
                let value = std::mem::replace(value, Value::String(SEALED.to_owned()));
                (format!("{PREVIEW}{name}"), value)
            };
            let text = key.seal(&record.action_id, &path, &slot)?;
            sealed.fields.insert(path, text);
        }
        record.sealed = Some(sealed);
        Ok(())
    }

    /// A reader that opens sealed fields in parsed bodies: every subject key kept now,
    /// read once (not inside a row walk, which holds the store's connection).
    pub fn revealer(&self) -> Result<Revealer, LedgerError> {
        let keys = self
            .store
            .subject_keys()?
            .into_iter()
            .map(|(index, key)| (hex::encode(index), key))
            .collect();
        Ok(Revealer { keys })
    }

    /// Erases `subject`: deletes its key and appends an erasure row naming its blind
    /// index, `requested_by` and the count of rows sealed under the key, in one
    /// transaction. `before_commit` runs inside it, after both writes (a drill's pause).
    /// A subject with no key is [`Erased::Already`], and nothing is written.
    pub fn erase(
        &self,
        subject: &str,
        requested_by: &str,
        before_commit: Option<&(dyn Fn() + Sync)>,
    ) -> Result<Erased, LedgerError> {
        let index = self.subject_index(subject)?;
        let hex_index = hex::encode(index);
        if self.store.subject_key(&index, None)?.is_none() {
            return Ok(Erased::Already { subject: hex_index });
        }
        // Counted before the transaction: a row sealed under the key by a writer racing
        // this erasure is unreadable too, but may be missing from the count.
        let needle = format!("\"subject\":\"{hex_index}\"}}");
        let mut rows = 0u64;
        self.for_each_row(1, |row| {
            if contains(row.body, needle.as_bytes()) {
                let entry: Value =
                    serde_json::from_slice(row.body).map_err(|e| LedgerError::BadRow {
                        seq: row.seq,
                        detail: format!("body is not JSON: {e}"),
                    })?;
                if entry.pointer("/sealed/subject").and_then(Value::as_str) == Some(&hex_index) {
                    rows += 1;
                }
            }
            Ok(true)
        })?;
        let record = erasure_record(&hex_index, rows, requested_by)?;
        let forget = Forget {
            index,
            before_commit,
        };
        match self.append_forgetting(&record, &forget) {
            Ok(appended) => Ok(Erased::Done {
                seq: appended.seq,
                rows,
                subject: hex_index,
            }),
            Err(LedgerError::SubjectErased) => Ok(Erased::Already { subject: hex_index }),
            Err(err) => Err(err),
        }
    }
}

/// Opens sealed fields in parsed bodies for the views (listings, exports, the dashboard).
pub struct Revealer {
    keys: HashMap<String, [u8; 32]>,
}

impl std::fmt::Debug for Revealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revealer").finish_non_exhaustive()
    }
}

impl Revealer {
    /// A stored body as the views show it: the body itself when it seals nothing, else
    /// its JSON with the sealed fields opened or `"erased"` ([`Revealer::reveal`]). Not
    /// the hashed bytes: never hash or prove what this returns.
    pub fn shown<'b>(&self, body: &'b [u8]) -> std::borrow::Cow<'b, [u8]> {
        if !contains(body, b"\"sealed\":{") {
            return std::borrow::Cow::Borrowed(body);
        }
        let Ok(mut entry) = serde_json::from_slice::<Value>(body) else {
            return std::borrow::Cow::Borrowed(body);
        };
        self.reveal(&mut entry);
        match serde_json::to_vec(&entry) {
            Ok(bytes) => std::borrow::Cow::Owned(bytes),
            Err(_) => std::borrow::Cow::Borrowed(body),
        }
    }

    /// Puts each sealed field of `entry` back as it was, or [`ERASED`] where it cannot
    /// be opened (the key is gone, or the ciphertext does not open under it), and
    /// replaces the ciphertext with `{"subject", "state"}` (`open` or `erased`). A body without `sealed` is
    /// left as it is.
    pub fn reveal(&self, entry: &mut Value) {
        let Some(object) = entry.as_object_mut() else {
            return;
        };
        let Some(sealed) = object.get("sealed") else {
            return;
        };
        let Ok(sealed) = serde_json::from_value::<Sealed>(sealed.clone()) else {
            return;
        };
        let action_id = object
            .get("action_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let key = self.keys.get(&sealed.subject).copied();
        let mut erased = key.is_none();
        for (path, text) in &sealed.fields {
            let opened = key.and_then(|key| open(&key, &action_id, path, text));
            let value = opened.unwrap_or_else(|| {
                erased = true;
                Value::String(ERASED.to_owned())
            });
            if path == "target" {
                object.insert("target".to_owned(), value);
            } else if let Some(name) = path.strip_prefix(PREVIEW) {
                if let Some(Value::Object(preview)) = object.get_mut("params_preview") {
                    preview.insert(name.to_owned(), value);
                }
            }
        }
        let mut summary = Map::new();
        summary.insert("subject".to_owned(), Value::String(sealed.subject));
        let state = if erased { ERASED } else { "open" };
        summary.insert("state".to_owned(), Value::String(state.to_owned()));
        object.insert("sealed".to_owned(), Value::Object(summary));
    }
}

impl SubjectKey {
    /// The sealed text of `value` at `path` in the row of `action_id`.
    fn seal(&self, action_id: &str, path: &str, value: &Value) -> Result<String, LedgerError> {
        let plain = crate::canonical::canonical_bytes(value)?;
        let mut nonce = [0u8; 12];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut nonce);
        let aad = associated(action_id, path);
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.key));
        let sealed = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &plain,
                    aad: &aad,
                },
            )
            .map_err(|_| LedgerError::Internal("sealing a field failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(base64::engine::general_purpose::STANDARD.encode(out))
    }
}

/// The field's value, or `None` when it does not open under `key`.
fn open(key: &[u8; 32], action_id: &str, path: &str, text: &str) -> Option<Value> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    if bytes.len() < 12 {
        return None;
    }
    let (nonce, sealed) = bytes.split_at(12);
    let aad = associated(action_id, path);
    let cipher = ChaCha20Poly1305::new(Key::from_slice(key));
    let plain = cipher
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: sealed,
                aad: &aad,
            },
        )
        .ok()?;
    serde_json::from_slice(&plain).ok()
}

/// The associated data: the row's action id, a zero byte (an action id holds none), the
/// field's path.
fn associated(action_id: &str, path: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(action_id.len() + 1 + path.len());
    aad.extend_from_slice(action_id.as_bytes());
    aad.push(0);
    aad.extend_from_slice(path.as_bytes());
    aad
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The erasure row: decision and execution `recorded`, system `attest`, verb `delete`,
/// no target (the subject is named only by its blind index).
fn erasure_record(subject: &str, rows: u64, requested_by: &str) -> Result<Record, LedgerError> {
    let mut id = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut id);
    Ok(Record {
        action_id: format!("erasure-{}", hex::encode(id)),
        run_id: None,
        agent: None,
        agent_auth: None,
        actor: Some(requested_by.to_owned()),
        call: None,
        owner: None,
        system: "attest".to_owned(),
        verb: "delete".to_owned(),
        target: None,
        target_class: "none".to_owned(),
        source: "manual".to_owned(),
        decision: "recorded".to_owned(),
        tier: "very_high".to_owned(),
        reasons: vec!["erasure: the subject's key was destroyed".to_owned()],
        rules_fired: Vec::new(),
        params_hash: crate::to_hex(&crate::value_hash(&Value::Object(Map::new()))?),
        params_preview: Map::new(),
        result_ids: Vec::new(),
        confirm: None,
        execution: Execution {
            status: "recorded".to_owned(),
            result_hash: None,
            error_hash: None,
        },
        verification: None,
        idempotency_key: None,
        replay_of: None,
        imported: None,
        shadow: None,
        grant: None,
        sealed: None,
        erasure: Some(Erasure {
            requested_by: requested_by.to_owned(),
            rows,
            subject: subject.to_owned(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_opens_only_in_its_own_row_and_path_under_its_key() {
        let key = SubjectKey {
            index: [1; 32],
            key: [7; 32],
        };
        let value = Value::String("ada@example.com".to_owned());
        let text = key.seal("a1", "target", &value).unwrap();
        assert_eq!(open(&key.key, "a1", "target", &text), Some(value));
        assert_eq!(open(&key.key, "a2", "target", &text), None);
        assert_eq!(open(&key.key, "a1", "params_preview.to", &text), None);
        assert_eq!(open(&[8; 32], "a1", "target", &text), None);
        assert_eq!(open(&key.key, "a1", "target", "not base64!"), None);
        assert_eq!(open(&key.key, "a1", "target", "AAAA"), None);
    }
}

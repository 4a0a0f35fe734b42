//! HMAC-SHA256 signatures over request bodies, and the checks that go with them.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

/// A shared secret (webhook secret, Slack token or signing secret, link key).
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// Wraps secret bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }

    /// The secret's bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Why a signed request or link was not accepted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// A required header or parameter is missing.
    #[error("missing {field}")]
    Missing {
        /// The header or parameter.
        field: &'static str,
    },
    /// A header or parameter is not in the expected form.
    #[error("malformed {field}")]
    Malformed {
        /// The header or parameter.
        field: &'static str,
    },
    /// The timestamp is too far from now (a replay, or a clock far off).
    #[error("stale {field}: {age_secs} s from now, the limit is {limit_secs} s")]
    Stale {
        /// The header or parameter.
        field: &'static str,
        /// How far from now, in seconds.
        age_secs: u64,
        /// The tolerance, in seconds.
        limit_secs: u64,
    },
    /// The signature does not match.
    #[error("bad signature in {field}")]
    Mismatch {
        /// The header or parameter.
        field: &'static str,
    },
}

/// Lower-case hex HMAC-SHA256 of the concatenated `parts`.
pub(crate) fn hmac_hex(secret: &Secret, parts: &[&[u8]]) -> String {
    hex::encode(mac(secret, parts).finalize().into_bytes())
}

/// Checks a hex HMAC-SHA256 in constant time.
pub(crate) fn check_hmac(
    secret: &Secret,
    parts: &[&[u8]],
    signature_hex: &str,
    field: &'static str,
) -> Result<(), SignatureError> {
    let expected = hex::decode(signature_hex).map_err(|_| SignatureError::Malformed { field })?;
    mac(secret, parts)
        .verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch { field })
}

fn mac(secret: &Secret, parts: &[&[u8]]) -> Hmac<Sha256> {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.expose())
        .unwrap_or_else(|_| <Hmac<Sha256> as Mac>::new(&Default::default()));
    for part in parts {
        mac.update(part);
    }
    mac
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_secs(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Parses a Unix-seconds timestamp and checks it is within `tolerance` of `now`.
#[cfg(feature = "http")]
pub(crate) fn check_fresh(
    timestamp: Option<&str>,
    field: &'static str,
    now: SystemTime,
    tolerance: std::time::Duration,
) -> Result<u64, SignatureError> {
    let text = timestamp.ok_or(SignatureError::Missing { field })?;
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::Malformed { field });
    }
    let ts: u64 = text
        .parse()
        .map_err(|_| SignatureError::Malformed { field })?;
    let age = unix_secs(now).abs_diff(ts);
    if age > tolerance.as_secs() {
        return Err(SignatureError::Stale {
            field,
            age_secs: age,
            limit_secs: tolerance.as_secs(),
        });
    }
    Ok(ts)
}

//! Resume tokens: random, unguessable, shown once, stored only as a hash.

use std::fmt;

use rand_core::{OsRng, RngCore};
use sha2::{Digest, Sha256};

use super::ApprovalError;

/// The prefix every resume token starts with, so one is recognisable in a config or a log
/// scanner.
pub const TOKEN_PREFIX: &str = "atr_";

/// A resume token: 256 random bits, hex, with [`TOKEN_PREFIX`].
///
/// Whoever holds it may resume the approved action, so it is a secret: `Debug` and
/// `Display` show only its prefix, and the store keeps only its SHA-256.
#[derive(Clone, PartialEq, Eq)]
pub struct ResumeToken(String);

impl ResumeToken {
    /// A fresh token from the operating system's random number generator.
    pub fn generate() -> Result<ResumeToken, ApprovalError> {
        random_token(TOKEN_PREFIX).map(ResumeToken)
    }

    /// Wraps a token a caller presents.
    pub fn new(token: impl Into<String>) -> ResumeToken {
        ResumeToken(token.into())
    }

    /// The token's text, to hand to whoever will resume.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True when `text` looks like a token rather than an id.
    pub fn looks_like_token(text: &str) -> bool {
        text.starts_with(TOKEN_PREFIX)
    }

    /// The lower-case hex SHA-256 the store keeps instead of the token.
    pub(crate) fn hash(&self) -> String {
        hash_token(&self.0)
    }
}

/// `prefix` and 256 random bits, hex: a personal approver or agent token.
pub(crate) fn random_token(prefix: &str) -> Result<String, ApprovalError> {
    let mut bytes = [0u8; 32];
    OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(ApprovalError::Random)?;
    Ok(format!("{prefix}{}", hex::encode(bytes)))
}

pub(crate) fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl fmt::Debug for ResumeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResumeToken({TOKEN_PREFIX}…)")
    }
}

impl fmt::Display for ResumeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TOKEN_PREFIX}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_and_never_printed() {
        let a = ResumeToken::generate().unwrap();
        let b = ResumeToken::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 64);
        assert!(!format!("{a:?} {a}").contains(&a.expose()[TOKEN_PREFIX.len()..]));
        assert!(ResumeToken::looks_like_token(a.expose()));
    }
}

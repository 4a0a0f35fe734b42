//! The verification levels, strongest first.

use std::fmt;

/// How an outcome was established, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Read back from the system of record, and it matched.
    Verified,
    /// The caller's own check passed.
    VerifiedCustom,
    /// The result carries an id, `ok`, or a 2xx status.
    Acknowledged,
    /// Nothing checkable came back.
    AttestedOnly,
    /// A check ran and contradicted the result.
    Unverified,
}

impl Level {
    /// The word used in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Verified => "verified",
            Level::VerifiedCustom => "verified-custom",
            Level::Acknowledged => "acknowledged",
            Level::AttestedOnly => "attested-only",
            Level::Unverified => "unverified",
        }
    }
}

impl Level {
    /// The level a ledger word names (see [`Level::as_str`]); `None` for any other word.
    pub fn parse(word: &str) -> Option<Level> {
        [
            Level::Verified,
            Level::VerifiedCustom,
            Level::Acknowledged,
            Level::AttestedOnly,
            Level::Unverified,
        ]
        .into_iter()
        .find(|level| level.as_str() == word)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

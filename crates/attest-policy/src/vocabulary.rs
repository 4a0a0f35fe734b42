use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::PolicyError;

/// What an action does to its system: four reads and eleven writes.
///
/// The words are kept from the system Attest re-implements, so policies and ledgers
/// written for it read the same here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// Read one thing's content.
    Read,
    /// Search a collection.
    Search,
    /// Get one item.
    Get,
    /// List a collection.
    List,
    /// Create a new item.
    Create,
    /// Change an existing item.
    Update,
    /// Remove an item.
    Delete,
    /// Send a message to someone.
    Send,
    /// Reply in an existing thread.
    Reply,
    /// Give someone access.
    Share,
    /// Upload a file.
    Upload,
    /// Move money.
    Pay,
    /// Approve or sign something.
    Approve,
    /// Run code, a job or a deployment.
    Execute,
    /// A write that fits no other verb (also: an unrecognised call).
    Write,
}

impl Verb {
    /// Every verb, reads first.
    pub const ALL: [Verb; 15] = [
        Verb::Read,
        Verb::Search,
        Verb::Get,
        Verb::List,
        Verb::Create,
        Verb::Update,
        Verb::Delete,
        Verb::Send,
        Verb::Reply,
        Verb::Share,
        Verb::Upload,
        Verb::Pay,
        Verb::Approve,
        Verb::Execute,
        Verb::Write,
    ];

    const EXPECTED: &'static str = "read, search, get, list, create, update, delete, send, reply, share, upload, pay, approve, execute, write";

    /// The word used in policies and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Search => "search",
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
            Verb::Send => "send",
            Verb::Reply => "reply",
            Verb::Share => "share",
            Verb::Upload => "upload",
            Verb::Pay => "pay",
            Verb::Approve => "approve",
            Verb::Execute => "execute",
            Verb::Write => "write",
        }
    }

    /// True for the four verbs that change nothing.
    pub fn is_read(self) -> bool {
        matches!(self, Verb::Read | Verb::Search | Verb::Get | Verb::List)
    }

    /// The risk tier a verb carries when nothing overrides it.
    pub fn default_risk(self) -> Risk {
        match self {
            Verb::Read | Verb::Search | Verb::Get | Verb::List => Risk::Low,
            Verb::Update | Verb::Write | Verb::Upload => Risk::Medium,
            Verb::Send
            | Verb::Reply
            | Verb::Create
            | Verb::Share
            | Verb::Approve
            | Verb::Execute => Risk::High,
            Verb::Delete | Verb::Pay => Risk::VeryHigh,
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Verb {
    type Err = PolicyError;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        let lower = word.trim().to_ascii_lowercase();
        Verb::ALL
            .into_iter()
            .find(|verb| verb.as_str() == lower)
            .ok_or_else(|| PolicyError::UnknownVerb {
                word: word.to_owned(),
                expected: Verb::EXPECTED,
            })
    }
}

/// How much harm an action can do if it is wrong, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads.
    Low,
    /// Reversible writes: update, write, upload.
    Medium,
    /// Writes others see: send, reply, create, share, approve, execute.
    High,
    /// Writes that cannot be taken back: delete, pay.
    VeryHigh,
}

impl Risk {
    /// The word used in policies and the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::VeryHigh => "very_high",
        }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Risk {
    type Err = PolicyError;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        match word.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "low" => Ok(Risk::Low),
            "medium" => Ok(Risk::Medium),
            "high" => Ok(Risk::High),
            "very_high" | "veryhigh" => Ok(Risk::VeryHigh),
            _ => Err(PolicyError::UnknownRisk {
                word: word.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_round_trip_through_their_words() {
        for verb in Verb::ALL {
            assert_eq!(verb.as_str().parse::<Verb>().unwrap(), verb);
        }
        assert!("frobnicate".parse::<Verb>().is_err());
    }

    #[test]
    fn tiers_follow_the_design_table() {
        let reads = Verb::ALL.iter().filter(|v| v.is_read()).count();
        assert_eq!(reads, 4);
        assert_eq!(Verb::Update.default_risk(), Risk::Medium);
        assert_eq!(Verb::Send.default_risk(), Risk::High);
        assert_eq!(Verb::Pay.default_risk(), Risk::VeryHigh);
        assert_eq!(Verb::Delete.default_risk(), Risk::VeryHigh);
        assert!(Risk::VeryHigh > Risk::High && Risk::High > Risk::Medium);
        assert_eq!("very-high".parse::<Risk>().unwrap(), Risk::VeryHigh);
    }
}

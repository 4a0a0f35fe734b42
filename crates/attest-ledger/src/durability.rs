use std::fmt;
use std::str::FromStr;

use crate::LedgerError;

/// How hard an append works to survive a crash before it returns.
///
/// A process crash loses nothing in any mode (the write-ahead log is in the OS's
/// hands once the commit returns). The modes differ on power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Sync the write-ahead log on every commit: an acknowledged row survives power loss.
    #[default]
    Full,
    /// Sync only at WAL checkpoints: power loss can drop the most recent commits,
    /// never corrupt the chain.
    Normal,
    /// Never sync: power loss can drop recent commits; for throwaway ledgers.
    Off,
}

impl Durability {
    /// The word used on the command line and in `ATTEST_DURABILITY`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Full => "full",
            Durability::Normal => "normal",
            Durability::Off => "off",
        }
    }

    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
            Durability::Off => "OFF",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Durability {
    type Err = LedgerError;

    fn from_str(word: &str) -> Result<Self, Self::Err> {
        match word.trim().to_ascii_lowercase().as_str() {
            "full" => Ok(Durability::Full),
            "normal" => Ok(Durability::Normal),
            "off" => Ok(Durability::Off),
            _ => Err(LedgerError::UnknownDurability {
                word: word.to_owned(),
            }),
        }
    }
}

//! How a ledger is opened.

use std::sync::Arc;

use crate::{Clock, Durability, SystemClock};

/// How to open a ledger.
#[derive(Clone)]
pub struct LedgerOptions {
    /// Sync policy for appends.
    pub durability: Durability,
    /// Where `ts` comes from.
    pub clock: Arc<dyn Clock>,
    /// Create the file (and its directory) when it does not exist.
    pub create: bool,
    /// The tenant whose chain to open: in PostgreSQL a chain of its own in the same
    /// database; in SQLite a file of its own beside the default one
    /// (`ledger.sqlite` → `ledger.tenant-NAME.sqlite`). `None`: the default chain.
    pub tenant: Option<String>,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            durability: Durability::Full,
            clock: Arc::new(SystemClock),
            create: true,
            tenant: None,
        }
    }
}

impl std::fmt::Debug for LedgerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOptions")
            .field("durability", &self.durability)
            .field("create", &self.create)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

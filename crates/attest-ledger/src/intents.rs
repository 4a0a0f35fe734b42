//! Intents without an outcome, found while rows are read in seq order: an intent row
//! (`execution.status` is [`INTENT`]) that no later row of the same action follows.
//! Verify finds them in its walk (the fields it already picks out of each body); other
//! readers feed [`OpenIntents`] from their own pass.

use std::collections::HashMap;

use serde::Serialize;

/// The execution status of an intent row: cleared to run, outcome not yet recorded.
pub const INTENT: &str = "intent";

/// An intent row that no later row of the same action follows: the action may have
/// run, and nothing in the ledger says how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenIntent {
    /// The intent row's seq.
    pub seq: u64,
    /// The action's id.
    pub action_id: String,
    /// The system acted on.
    pub system: String,
    /// The verb.
    pub verb: String,
}

/// The intents still open among the rows seen so far; memory grows with the open
/// intents only (an outcome row closes its action's intent).
#[derive(Debug, Default)]
pub struct OpenIntents {
    /// By action id: the intent's seq, system and verb (the id is the key, kept once).
    open: HashMap<String, (u64, String, String)>,
}

impl OpenIntents {
    /// Takes the next row, in seq order: an intent opens its action, any other row of
    /// the action closes it.
    pub fn see(&mut self, seq: u64, action_id: &str, system: &str, verb: &str, intent: bool) {
        if intent {
            self.open.insert(
                action_id.to_owned(),
                (seq, system.to_owned(), verb.to_owned()),
            );
        } else if !self.open.is_empty() {
            self.open.remove(action_id);
        }
    }

    /// Whether no intent is open: a row that is not an intent then changes nothing.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The open intents, oldest first.
    pub fn into_sorted(self) -> Vec<OpenIntent> {
        let mut open: Vec<OpenIntent> = self
            .open
            .into_iter()
            .map(|(action_id, (seq, system, verb))| OpenIntent {
                seq,
                action_id,
                system,
                verb,
            })
            .collect();
        open.sort_by_key(|intent| intent.seq);
        open
    }
}

//! What a read-back found, and how that becomes a level and ledger evidence.

use serde_json::{Map, Value};

use super::compare::{cut, cut_text, FieldResult};
use super::Level;

/// What a read-back driver found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Finding {
    /// The record was read and the intended fields compared with it.
    ///
    /// All fields matching is `verified`; any mismatch is `unverified`; no field
    /// compared at all is `acknowledged` ("found; nothing comparable").
    Compared(Evidence),
    /// The check could not run (network, timeout, 404, not JSON, no credential, …):
    /// the level degrades to what the result itself acknowledges, and `reason` is kept.
    Degraded {
        /// Why, in words safe for the ledger.
        reason: String,
        /// What was known before it stopped (ids, status).
        evidence: Evidence,
    },
}

/// Ids, status and per-field results: what the ledger keeps of a read-back. Never
/// bodies, headers or secrets.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Evidence {
    /// What was used: a recipe's name, an OpenAPI operation, a URL pattern.
    pub source: Option<String>,
    /// The ids the read used (`{"id": "msg_1"}`), values cut to 120 characters.
    pub ids: Map<String, Value>,
    /// The HTTP status of the read.
    pub status: Option<u16>,
    /// How many attempts the read took, when more than one.
    pub attempts: Option<u32>,
    /// Each compared field.
    pub fields: Vec<FieldResult>,
}

impl Evidence {
    /// Evidence naming `source`.
    pub fn new(source: impl Into<String>) -> Self {
        Evidence {
            source: Some(source.into()),
            ..Evidence::default()
        }
    }

    /// Adds an id (cut to 120 characters).
    pub fn id(&mut self, name: &str, value: &str) {
        self.ids
            .insert(name.to_owned(), Value::String(cut_text(value)));
    }

    /// Whether every compared field matched (and at least one was compared).
    pub fn matched(&self) -> Option<bool> {
        if self.fields.is_empty() {
            None
        } else {
            Some(self.fields.iter().all(|f| f.ok))
        }
    }

    fn into_map(self) -> Map<String, Value> {
        let mut map = Map::new();
        if let Some(source) = self.source {
            map.insert("source".to_owned(), Value::String(cut_text(&source)));
        }
        if !self.ids.is_empty() {
            let ids = self.ids.into_iter().map(|(k, v)| (k, cut(&v))).collect();
            map.insert("ids".to_owned(), Value::Object(ids));
        }
        if let Some(status) = self.status {
            map.insert("status".to_owned(), Value::from(status));
        }
        if let Some(attempts) = self.attempts.filter(|a| *a > 1) {
            map.insert("attempts".to_owned(), Value::from(attempts));
        }
        if !self.fields.is_empty() {
            let fields = self.fields.iter().map(FieldResult::to_json).collect();
            map.insert("fields".to_owned(), Value::Array(fields));
        }
        map
    }
}

impl Finding {
    /// A finding for a check that could not run.
    pub fn degraded(reason: impl Into<String>, evidence: Evidence) -> Self {
        Finding::Degraded {
            reason: reason.into(),
            evidence,
        }
    }

    /// The level this finding earns; `ack` is what the result alone acknowledges
    /// (used when the check could not run).
    pub fn level(&self, ack: Level) -> Level {
        match self {
            Finding::Compared(evidence) => match evidence.matched() {
                Some(true) => Level::Verified,
                Some(false) => Level::Unverified,
                None => Level::Acknowledged,
            },
            Finding::Degraded { .. } => ack,
        }
    }

    /// Whether the check matched: `None` when nothing was compared.
    pub fn matched(&self) -> Option<bool> {
        match self {
            Finding::Compared(evidence) => evidence.matched(),
            Finding::Degraded { .. } => None,
        }
    }

    /// The ledger evidence: ids, status, fields, and a `note` (nothing comparable) or
    /// `degraded` (why the check could not run).
    pub(crate) fn into_evidence(self) -> Map<String, Value> {
        match self {
            Finding::Compared(evidence) => {
                let nothing = evidence.fields.is_empty();
                let mut map = evidence.into_map();
                if nothing {
                    map.insert(
                        "note".to_owned(),
                        Value::String("found; nothing comparable".to_owned()),
                    );
                }
                map
            }
            Finding::Degraded { reason, evidence } => {
                let mut map = evidence.into_map();
                map.insert("degraded".to_owned(), Value::String(cut_text(&reason)));
                map
            }
        }
    }
}

//! What a read-back found, and how that becomes a level and ledger evidence.

use serde_json::{Map, Value};

use super::compare::{cut, cut_text, FieldResult, Rule};
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

    /// Compares a write's `params` with the `record` read back: each top-level param
    /// the record also has (nulls skipped). With `expect_id`, the record's `id` must
    /// equal it (and an id check alone compares nothing the caller intended). A record
    /// that is not a JSON object degrades.
    pub fn from_record(
        mut evidence: Evidence,
        params: &Value,
        record: &Value,
        expect_id: Option<&str>,
    ) -> Self {
        let Value::Object(record) = record else {
            return Finding::degraded("the record read back is not a JSON object", evidence);
        };
        let Some(params) = params.as_object() else {
            return Finding::Compared(evidence);
        };
        let mut fields = Vec::new();
        if let Some(id) = expect_id {
            let want = Value::String(id.to_owned());
            fields.push(FieldResult::compare(
                "id",
                &want,
                record.get("id"),
                Rule::Auto,
                false,
            ));
        }
        for (key, want) in params {
            if want.is_null() || (expect_id.is_some() && key == "id") {
                continue;
            }
            if let Some(got) = record.get(key) {
                fields.push(FieldResult::compare(
                    key,
                    want,
                    Some(got),
                    Rule::Auto,
                    false,
                ));
            }
        }
        if fields.len() == 1 && expect_id.is_some() && fields.iter().all(|f| f.ok) {
            fields.clear();
        }
        evidence.fields = fields;
        Finding::Compared(evidence)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_record_is_compared_field_by_field() {
        let params = json!({"title": "a", "body": "b", "draft": null});
        let record = json!({"id": "1", "title": "a", "body": "b", "x": 1});
        let found = Finding::from_record(Evidence::new("t"), &params, &record, None);
        assert_eq!(found.level(Level::Acknowledged), Level::Verified);
        let Finding::Compared(evidence) = &found else {
            panic!("{found:?}")
        };
        let names: Vec<&str> = evidence.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["body", "title"]);

        let changed = json!({"title": "a", "body": "c"});
        let found = Finding::from_record(Evidence::new("t"), &params, &changed, None);
        assert_eq!(found.level(Level::Acknowledged), Level::Unverified);
    }

    #[test]
    fn the_id_alone_is_nothing_comparable_and_a_non_object_degrades() {
        let params = json!({"id": "1"});
        let record = json!({"id": "1", "other": 2});
        let found = Finding::from_record(Evidence::new("t"), &params, &record, Some("1"));
        assert_eq!(found.level(Level::AttestedOnly), Level::Acknowledged);
        let wrong = json!({"id": "2"});
        let found = Finding::from_record(Evidence::new("t"), &params, &wrong, Some("1"));
        assert_eq!(found.level(Level::AttestedOnly), Level::Unverified);
        let text = json!("text");
        let found = Finding::from_record(Evidence::new("t"), &params, &text, None);
        assert!(matches!(found, Finding::Degraded { .. }));
        assert_eq!(found.level(Level::AttestedOnly), Level::AttestedOnly);
    }
}

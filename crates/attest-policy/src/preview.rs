use serde_json::{Map, Value};

/// Longest string kept in a preview, in characters.
pub const PREVIEW_MAX_CHARS: usize = 120;

/// Most items of a list kept in a preview.
const PREVIEW_MAX_ITEMS: usize = 20;

/// Keys whose values may appear in the ledger (besides any key ending in `_id`).
const ALLOWED_KEYS: &[&str] = &[
    "to",
    "cc",
    "recipient",
    "recipients",
    "channel",
    "id",
    "name",
    "title",
    "subject",
    "email",
    "url",
    "path",
    "status",
    "amount",
    "currency",
    "role",
    "labels",
];

/// The part of `params` that may be written to the ledger.
///
/// Only top-level keys on the allow-list (and `*_id` keys) survive, unless their name is
/// a credential's (`session_id`, [`crate::is_credential_name`]); strings are redacted
/// ([`crate::redact_text`]: URLs lose user info, query and tokens, and credential shapes
/// such as `sk_live_…` go), strings are cut to
/// [`PREVIEW_MAX_CHARS`] characters, lists to 20 items, and nested objects are dropped,
/// because an allow-listed key can still hold a body nobody vetted.
pub fn params_preview(params: &Value) -> Map<String, Value> {
    let Value::Object(map) = params else {
        return Map::new();
    };
    map.iter()
        .filter(|(key, _)| preview_allows(key))
        .filter_map(|(key, value)| preview_value(value).map(|v| (key.clone(), v)))
        .collect()
}

/// Whether a param's value may appear in the ledger: the allow-list (`to`, `title`,
/// `amount`, …) and any key ending in `_id`. Anything else is kept as a fingerprint at most.
pub fn preview_allows(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    (ALLOWED_KEYS.contains(&lower.as_str()) || lower.ends_with("_id"))
        && !crate::redact::is_credential_name(&lower)
}

fn preview_value(value: &Value) -> Option<Value> {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => Some(value.clone()),
        Value::String(text) => Some(Value::String(truncate(&crate::redact_text(text)))),
        Value::Array(items) => Some(Value::Array(
            items
                .iter()
                .filter(|item| !item.is_array() && !item.is_object())
                .take(PREVIEW_MAX_ITEMS)
                .filter_map(preview_value)
                .collect(),
        )),
        Value::Object(_) => None,
    }
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(PREVIEW_MAX_CHARS) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keeps_allowed_keys_and_drops_the_rest() {
        let params = json!({
            "to": "a@x.io", "body": "secret body", "api_key": "sk_live_1",
            "customer_id": "cus_1", "labels": ["a", {"x": 1}], "subject": {"nested": "no"}
        });
        let preview = params_preview(&params);
        assert_eq!(
            Value::Object(preview),
            json!({"to": "a@x.io", "customer_id": "cus_1", "labels": ["a"]})
        );
    }

    #[test]
    fn cuts_long_strings_on_character_boundaries() {
        let long = "é".repeat(500);
        let preview = params_preview(&json!({ "title": long }));
        let kept = preview["title"].as_str().unwrap();
        assert_eq!(kept.chars().count(), PREVIEW_MAX_CHARS);
    }

    #[test]
    fn urls_lose_user_info_query_and_tokens() {
        let preview = params_preview(&json!({
            "url": "https://hooks.slack.com/services/T0/B0/XXXXXXXXXXXXXXXXXXXXXXXX",
            "path": "https://u:pw@x.io/a?sig=1",
            "labels": ["https://x.io/?token=t"],
        }));
        assert_eq!(
            Value::Object(preview),
            json!({"url": "https://hooks.slack.com/services/T0/B0/[redacted]",
                   "path": "https://x.io/a", "labels": ["https://x.io/"]})
        );
    }

    #[test]
    fn credentials_never_reach_a_preview() {
        let preview = params_preview(&json!({
            "session_id": "s3cr3t", "title": "key sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "customer_id": "cus_1",
        }));
        assert_eq!(
            Value::Object(preview),
            json!({"title": "key [redacted]", "customer_id": "cus_1"})
        );
    }

    #[test]
    fn non_objects_preview_to_nothing() {
        assert!(params_preview(&json!(["to"])).is_empty());
        assert!(params_preview(&json!("to")).is_empty());
    }
}

//! The acknowledgement driver: does the result itself claim the write happened?

use serde_json::{Map, Value};

/// Whether a result acknowledges the write: the acknowledgement driver.
///
/// Not acknowledged: `null`, an object with a truthy `error`, or `ok`/`success`/
/// `sent`/`created`/… set to `false`. Acknowledged: `ok`/`success` true, an `id` or
/// `*_id`/`*Id` field, a 2xx `status`/`status_code`, or any of these nested one or two
/// levels down (GraphQL envelopes such as `{"data":{"issueCreate":{"issue":{"id":…}}}}`).
pub fn acknowledges(result: &Value) -> bool {
    match result {
        Value::Object(map) => {
            if refuses(map) {
                return false;
            }
            claims(map, 0)
        }
        Value::Bool(ok) => *ok,
        _ => false,
    }
}

const SUCCESS_FLAGS: &[&str] = &[
    "ok",
    "success",
    "succeeded",
    "sent",
    "created",
    "updated",
    "deleted",
    "done",
];

fn refuses(map: &Map<String, Value>) -> bool {
    let has_error = map
        .get("error")
        .or_else(|| map.get("errors"))
        .is_some_and(|e| !matches!(e, Value::Null | Value::Bool(false)) && !is_empty(e));
    let flag_false = SUCCESS_FLAGS
        .iter()
        .any(|flag| map.get(*flag) == Some(&Value::Bool(false)));
    has_error || flag_false
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::String(text) => text.is_empty(),
        _ => false,
    }
}

fn claims(map: &Map<String, Value>, depth: usize) -> bool {
    let flag_true = SUCCESS_FLAGS
        .iter()
        .any(|flag| map.get(*flag) == Some(&Value::Bool(true)));
    let has_id = map.iter().any(|(key, value)| {
        (key == "id" || key.ends_with("_id") || key.ends_with("Id")) && is_id(value)
    });
    let ok_status = ["status", "status_code", "statusCode"].iter().any(|key| {
        map.get(*key)
            .and_then(Value::as_u64)
            .is_some_and(|s| (200..300).contains(&s))
    });
    if flag_true || has_id || ok_status {
        return true;
    }
    depth < 3
        && map.values().any(|value| match value {
            Value::Object(inner) => !refuses(inner) && claims(inner, depth + 1),
            _ => false,
        })
}

fn is_id(value: &Value) -> bool {
    match value {
        Value::String(text) => !text.trim().is_empty(),
        Value::Number(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn acknowledgement_truth_table() {
        let acknowledged = [
            json!({"id": "msg_1"}),
            json!({"message_id": "m1"}),
            json!({"threadId": "t1"}),
            json!({"ok": true}),
            json!({"status": 201}),
            json!({"data": {"issueCreate": {"issue": {"id": "abc"}}}}),
            json!(true),
        ];
        for result in acknowledged {
            assert!(acknowledges(&result), "{result}");
        }
        let not = [
            Value::Null,
            json!({}),
            json!({"error": "boom"}),
            json!({"errors": [{"message": "bad"}], "data": {"x": {"id": "1"}}}),
            json!({"ok": false, "id": "1"}),
            json!({"sent": false}),
            json!({"status": 500}),
            json!({"id": ""}),
            json!("sent"),
            json!([{"id": 1}]),
            json!(false),
        ];
        for result in not {
            assert!(!acknowledges(&result), "{result}");
        }
        assert!(acknowledges(&json!({"error": null, "id": 3})));
        assert!(acknowledges(&json!({"errors": [], "ok": true})));
    }
}

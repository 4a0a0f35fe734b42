//! Verification: how sure Attest is that an action did what it claimed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use attest_ledger::Verification;
use attest_policy::Action;
use serde_json::{Map, Value};

use crate::ToolError;

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

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

type CheckFuture = Pin<Box<dyn Future<Output = Result<bool, ToolError>> + Send>>;
type CheckFn = dyn Fn(&Action, &Value) -> CheckFuture + Send + Sync;

/// The caller's own check that an action landed: `Ok(true)` confirms, `Ok(false)`
/// contradicts, an error means it could not run (and the outcome degrades, it is never
/// called unverified).
pub struct CustomCheck(Box<CheckFn>);

impl fmt::Debug for CustomCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CustomCheck")
    }
}

impl CustomCheck {
    /// A check that runs at once.
    pub fn sync(
        check: impl Fn(&Action, &Value) -> Result<bool, ToolError> + Send + Sync + 'static,
    ) -> Self {
        CustomCheck(Box::new(move |action, result| {
            let outcome = check(action, result);
            Box::pin(async move { outcome })
        }))
    }

    /// A check that awaits something (a read from another service, say). The closure
    /// gets borrowed values and must return a future that owns what it needs.
    pub fn future<Fut>(check: impl Fn(&Action, &Value) -> Fut + Send + Sync + 'static) -> Self
    where
        Fut: Future<Output = Result<bool, ToolError>> + Send + 'static,
    {
        CustomCheck(Box::new(move |action, result| {
            Box::pin(check(action, result))
        }))
    }

    async fn run(&self, action: &Action, result: &Value) -> Result<bool, ToolError> {
        (self.0)(action, result).await
    }
}

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

/// Verifies a result: the custom check when there is one, else the acknowledgement driver.
pub(crate) async fn verify(
    action: &Action,
    result: &Value,
    check: Option<&CustomCheck>,
) -> (Level, Verification) {
    let ack_level = if acknowledges(result) {
        Level::Acknowledged
    } else {
        Level::AttestedOnly
    };
    let Some(check) = check else {
        return (ack_level, verification(ack_level, "ack", None, Map::new()));
    };
    match check.run(action, result).await {
        Ok(true) => (
            Level::VerifiedCustom,
            verification(Level::VerifiedCustom, "custom", Some(true), Map::new()),
        ),
        Ok(false) => (
            Level::Unverified,
            verification(Level::Unverified, "custom", Some(false), Map::new()),
        ),
        Err(_) => {
            // The error text may carry tokens or bodies; the ledger keeps only that it failed.
            let mut evidence = Map::new();
            evidence.insert(
                "degraded".to_owned(),
                Value::String("custom check could not run".to_owned()),
            );
            (ack_level, verification(ack_level, "custom", None, evidence))
        }
    }
}

fn verification(
    level: Level,
    method: &str,
    matched: Option<bool>,
    evidence: Map<String, Value>,
) -> Verification {
    Verification {
        level: level.as_str().to_owned(),
        method: method.to_owned(),
        matched,
        evidence,
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

//! The MCP proxy's idempotency keys: where a `tools/call` carries one, the result kept
//! to replay, and a replay as a tool result.
//!
//! A key is read from the call's `_meta` (`idempotencyKey`) or, where SEP-3182 places
//! it, from the `tools/call` params (`idempotencyKey`). The SDK keeps only the params it
//! knows, so [`lift_params_key`] moves a params key into `_meta` as a frame is read (a
//! stdio line, or a body POSTed to `--listen`);
//! a frame that names two different keys (or a key that is not a string) is read as
//! having a bad key, and the call is refused. A replay is the first call's result (up
//! to [`MAX_REPLAY_BYTES`] of it) with `_meta` marking it: `"attest/replayed": true`,
//! and the first call's receipt under `_attest`.

use attest_core::{check_key, IdempotencyError};
use rmcp::model::{CallToolResult, ServerResult};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{json, Value};

use crate::gateway::replay::MAX_REPLAY_BYTES;

/// The name of the key, in `_meta` and (SEP-3182) in the params.
pub(crate) const KEY_FIELD: &str = "idempotencyKey";

/// The `_meta` field marking a replayed result.
pub(crate) const REPLAYED_FIELD: &str = "attest/replayed";

/// Moves a `tools/call`'s `params.idempotencyKey` into `params._meta`, where the SDK keeps
/// it; `line` is the frame's bytes. `None` when nothing is to move (the frame is read as
/// it is); else the frame, rewritten. Two different keys become a key that is not a
/// string, so the call is refused rather than run under either.
pub(crate) fn lift_params_key(line: &[u8]) -> Option<Value> {
    // Most frames name no key: the check is a byte search, not a parse.
    if !line
        .windows(KEY_FIELD.len())
        .any(|w| w == KEY_FIELD.as_bytes())
    {
        return None;
    }
    let mut message: Value = serde_json::from_slice(line).ok()?;
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let params = message.get_mut("params")?.as_object_mut()?;
    let key = params.remove(KEY_FIELD)?;
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        // `_meta` that is not an object: the SDK refuses the frame as it would anyway.
        return Some(message);
    };
    match meta.get(KEY_FIELD) {
        Some(existing) if existing != &key => {
            meta.insert(
                KEY_FIELD.to_owned(),
                json!({"two different keys": [existing, key]}),
            );
        }
        _ => {
            meta.insert(KEY_FIELD.to_owned(), key);
        }
    }
    Some(message)
}

/// The call's key, from its `_meta`: `Ok(None)` without one.
pub(crate) fn key_of(
    meta: &serde_json::Map<String, Value>,
) -> Result<Option<String>, IdempotencyError> {
    match meta.get(KEY_FIELD) {
        None => Ok(None),
        Some(Value::String(key)) => check_key(key).map(|()| Some(key.clone())),
        Some(_) => Err(IdempotencyError::BadKey),
    }
}

/// The `Authorization` a `--listen` request carried (`None` over stdio, or without one).
pub(crate) fn credential_of(context: &RequestContext<RoleServer>) -> Option<Vec<u8>> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    let value = parts.headers.get(http::header::AUTHORIZATION)?;
    Some(value.as_bytes().to_vec())
}

/// The bytes kept for a result (`None` over the bound).
pub(crate) fn keep(result: &ServerResult) -> Option<Vec<u8>> {
    let bytes = serde_json::to_vec(result).ok()?;
    (bytes.len() <= MAX_REPLAY_BYTES).then_some(bytes)
}

/// The kept result, marked a replay; `None` when nothing (or nothing readable) was kept.
pub(crate) fn replayed(kept: Option<&[u8]>) -> Option<ServerResult> {
    let mut result: ServerResult = serde_json::from_slice(kept?).ok()?;
    mark(&mut result);
    Some(result)
}

/// Marks `result` a replay in its `_meta`.
pub(crate) fn mark(result: &mut ServerResult) {
    if let ServerResult::CallToolResult(call) = result {
        mark_call(call);
    }
}

/// Marks a tool result a replay in its `_meta`.
pub(crate) fn mark_call(call: &mut CallToolResult) {
    call.meta
        .get_or_insert_with(rmcp::model::MetaObject::new)
        .0
        .insert(REPLAYED_FIELD.to_owned(), Value::Bool(true));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifted(frame: Value) -> Option<Value> {
        lift_params_key(frame.to_string().as_bytes())
    }

    #[test]
    fn a_params_key_moves_into_meta() {
        let call = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let moved = lifted(call(json!({"name": "t", "idempotencyKey": "k1"}))).unwrap();
        assert_eq!(moved["params"]["_meta"]["idempotencyKey"], "k1");
        assert!(moved["params"].get("idempotencyKey").is_none());
        let same = lifted(call(
            json!({"name": "t", "idempotencyKey": "k1", "_meta": {"idempotencyKey": "k1", "x": 1}}),
        ))
        .unwrap();
        assert_eq!(
            same["params"]["_meta"],
            json!({"idempotencyKey": "k1", "x": 1})
        );
        let two = lifted(call(
            json!({"name": "t", "idempotencyKey": "k1", "_meta": {"idempotencyKey": "k2"}}),
        ))
        .unwrap();
        let meta = two["params"]["_meta"].as_object().unwrap().clone();
        assert_eq!(key_of(&meta), Err(IdempotencyError::BadKey));
        // Nothing to move: the frame is read as it came.
        assert!(lifted(call(json!({"name": "t", "_meta": {"idempotencyKey": "k"}}))).is_none());
        assert!(lifted(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"idempotencyKey": "k"}})).is_none());
        assert!(lift_params_key(b"{not json idempotencyKey").is_none());
    }

    #[test]
    fn keys_in_meta_are_strings() {
        let meta = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(key_of(&meta(json!({}))), Ok(None));
        assert_eq!(
            key_of(&meta(json!({"idempotencyKey": "k"}))),
            Ok(Some("k".to_owned()))
        );
        assert_eq!(
            key_of(&meta(json!({"idempotencyKey": 7}))),
            Err(IdempotencyError::BadKey)
        );
        assert_eq!(
            key_of(&meta(json!({"idempotencyKey": ""}))),
            Err(IdempotencyError::BadKey)
        );
    }
}

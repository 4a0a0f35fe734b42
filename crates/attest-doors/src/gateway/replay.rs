//! The gateway's idempotency keys: `Idempotency-Key` read from a request, the first
//! response kept to replay, and a replay or a refusal as HTTP.
//!
//! What is kept is the upstream's status, the response headers on [`REPLAYED_HEADERS`]
//! (never `Set-Cookie` or any other header), and the body, up to [`MAX_REPLAY_BYTES`];
//! a response over the bound is not kept, and a retry then gets a 409 naming the first
//! call's row instead. It is kept in the ledger's side table (never chained, never
//! exported) until the key expires.

use attest_core::{check_key, Receipt};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::gateway::rejection::Rejection;

/// The request header that carries a key (IETF `draft-ietf-httpapi-idempotency-key-header`).
pub(crate) const KEY_HEADER: &str = "idempotency-key";

/// The response header that marks a replay (Stripe's name).
pub(crate) const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The largest response body kept to replay.
pub(crate) const MAX_REPLAY_BYTES: usize = 1 << 20;

/// The upstream response headers a replay carries: what describes the body and the
/// record, nothing that sets or carries a credential or a session.
pub(crate) const REPLAYED_HEADERS: &[&str] = &[
    "cache-control",
    "content-encoding",
    "content-language",
    "content-location",
    "content-type",
    "etag",
    "last-modified",
    "link",
    "location",
    "request-id",
    "retry-after",
    "x-request-id",
];

/// The request's idempotency key: `Ok(None)` without one; `Err` with why (a 400) for a
/// key that is not text, is repeated, or is not 1 to 255 visible ASCII characters.
pub(crate) fn key_of(headers: &HeaderMap) -> Result<Option<String>, String> {
    let mut values = headers.get_all(KEY_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("{KEY_HEADER} is sent more than once"));
    }
    // A structured-field string (`"abc"`, the draft's form) or a bare token.
    let text = value
        .to_str()
        .map_err(|_| format!("{KEY_HEADER} is not text"))?;
    let key = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    check_key(key).map_err(|err| format!("{KEY_HEADER}: {err}"))?;
    Ok(Some(key.to_owned()))
}

/// The credential a request carried upstream, which an idempotency key is bound to when
/// no agent is authenticated: every `Authorization`, `Cookie` and credential-named
/// header (`X-Api-Key`, `X-Auth-Token`, …), names and values length-prefixed in name
/// order. Attest keeps only a keyed fingerprint of it.
pub(crate) fn credential_of(headers: &HeaderMap) -> Vec<u8> {
    let mut carried: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
        .filter(|(name, _)| {
            *name != KEY_HEADER
                && (matches!(*name, "authorization" | "proxy-authorization" | "cookie")
                    || attest_policy::is_credential_name(name))
        })
        .collect();
    // Stable whatever order the client sent them in (a repeated header keeps its order).
    carried.sort_by_key(|(name, _)| *name);
    let mut bytes = Vec::new();
    for (name, value) in carried {
        for part in [name.as_bytes(), value] {
            bytes.extend_from_slice(&(part.len() as u64).to_be_bytes());
            bytes.extend_from_slice(part);
        }
    }
    bytes
}

/// A response as kept: its head as JSON on the first line, then the body's bytes.
#[derive(Debug, Serialize, Deserialize)]
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

/// The bytes kept for a response (`None` when its body is over the bound).
pub(crate) fn keep(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Option<Vec<u8>> {
    if body.len() > MAX_REPLAY_BYTES {
        return None;
    }
    let head = Head {
        status: status.as_u16(),
        headers: headers
            .iter()
            .filter(|(name, _)| REPLAYED_HEADERS.contains(&name.as_str()))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect(),
    };
    let mut bytes = serde_json::to_vec(&head).ok()?;
    bytes.push(b'\n');
    bytes.extend_from_slice(body);
    Some(bytes)
}

/// The bytes kept for a JSON answer of the gateway's own (a 502).
pub(crate) fn keep_json(status: StatusCode, body: &Value) -> Option<Vec<u8>> {
    let mut headers = HeaderMap::new();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    keep(status, &headers, &serde_json::to_vec(body).ok()?)
}

/// The answer to a retry of a call that ran: the kept response, marked a replay; or,
/// when none was kept, a 409 naming the first call's row.
pub(crate) fn replayed(receipt: &Receipt, kept: Option<&[u8]>) -> Response {
    let mut response = match kept.and_then(unkeep) {
        Some((head, body)) => {
            let mut response = Response::new(Body::from(body));
            *response.status_mut() =
                StatusCode::from_u16(head.status).unwrap_or(StatusCode::BAD_GATEWAY);
            for (name, value) in head.headers {
                if let (Ok(name), Ok(value)) =
                    (HeaderName::try_from(name), HeaderValue::try_from(value))
                {
                    response.headers_mut().append(name, value);
                }
            }
            crate::gateway::add_receipt_headers(response.headers_mut(), receipt);
            response
        }
        None => Rejection::NotReplayable {
            error: format!(
                "a request with this {KEY_HEADER} already ran (seq {}); its response was not \
                 kept (over {MAX_REPLAY_BYTES} bytes, or its process stopped before it could \
                 keep it and the outcome was read back from the vendor), so it cannot be \
                 replayed. The upstream was not called again",
                receipt.seq
            ),
            receipt: receipt.clone(),
        }
        .into_response(),
    };
    response.headers_mut().insert(
        HeaderName::from_static(REPLAYED_HEADER),
        HeaderValue::from_static("true"),
    );
    response
}

fn unkeep(bytes: &[u8]) -> Option<(Head, Bytes)> {
    let split = bytes.iter().position(|b| *b == b'\n')?;
    let head: Head = serde_json::from_slice(&bytes[..split]).ok()?;
    Some((head, Bytes::copy_from_slice(&bytes[split + 1..])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_responses_carry_only_safe_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("set-cookie", HeaderValue::from_static("session=s3cret"));
        headers.insert("authorization", HeaderValue::from_static("Bearer s3cret"));
        headers.insert("x-upstream-token", HeaderValue::from_static("s3cret"));
        headers.insert("location", HeaderValue::from_static("/v1/notes/1"));
        let kept = keep(StatusCode::CREATED, &headers, b"{\"id\":1}").unwrap();
        assert!(!String::from_utf8_lossy(&kept).contains("s3cret"));
        let (head, body) = unkeep(&kept).unwrap();
        assert_eq!(head.status, 201);
        let names: Vec<&str> = head.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["content-type", "location"]);
        assert_eq!(&body[..], b"{\"id\":1}");
        assert!(keep(StatusCode::OK, &headers, &vec![b'x'; MAX_REPLAY_BYTES + 1]).is_none());
    }

    #[test]
    fn keys_are_read_from_the_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(key_of(&headers).unwrap(), None);
        headers.insert(KEY_HEADER, HeaderValue::from_static("\"8e03978e\""));
        assert_eq!(key_of(&headers).unwrap().as_deref(), Some("8e03978e"));
        headers.insert(KEY_HEADER, HeaderValue::from_static("plain-1"));
        assert_eq!(key_of(&headers).unwrap().as_deref(), Some("plain-1"));
        headers.append(KEY_HEADER, HeaderValue::from_static("plain-2"));
        assert!(key_of(&headers).unwrap_err().contains("more than once"));
        let mut headers = HeaderMap::new();
        headers.insert(KEY_HEADER, HeaderValue::from_static(""));
        assert!(key_of(&headers).unwrap_err().contains("visible ASCII"));
    }
}

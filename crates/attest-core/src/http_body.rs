//! An HTTP request body as an action's params, and the params back as the body to send.
//!
//! A JSON object body is the params. Any other body is kept byte for byte under
//! [`RAW_BODY_KEY`] (`{"content_type", "text"}`, or `"base64"` when it is not UTF-8), so
//! the approver sees it and a resumed call sends it unchanged; a form body
//! (`application/x-www-form-urlencoded`) also has its fields at the top level, where
//! policy conditions and the approver's edits see them. The raw body is not on the
//! preview allow-list, so like every param it reaches the ledger only as part of the
//! params hash.

use std::borrow::Cow;
use std::io::Read;

use base64::Engine;
use serde_json::{json, Map, Value};

/// The params key that holds a non-JSON body as it was sent.
pub const RAW_BODY_KEY: &str = "$raw_body";

/// Largest body read once its content codings are undone, in bytes: a few kilobytes of
/// gzip can expand to gigabytes (a decompression bomb), and a body over this is not read.
pub const MAX_DECODED_BYTES: usize = 8 * 1024 * 1024;

/// Why a request body cannot be read the way its server would read it. The gateway answers
/// it with [`UnreadableBody::status`] and never forwards the request; detection judges such
/// a request by its riskiest verb.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnreadableBody {
    /// A `Content-Encoding` Attest does not decode.
    #[error("content coding {0:?} is not one Attest reads (gzip, x-gzip, deflate, br, identity)")]
    UnknownCoding(String),
    /// The body is over [`MAX_DECODED_BYTES`] once decoded.
    #[error("the body is over {cap} bytes once its content coding is undone")]
    TooLarge {
        /// The cap, in bytes.
        cap: usize,
    },
    /// The body is not valid in the coding it names.
    #[error("the body is not valid {coding}")]
    Corrupt {
        /// The coding (`gzip`, `deflate`, `br`).
        coding: &'static str,
    },
}

impl UnreadableBody {
    /// The HTTP status for a request with such a body: 413 for a body too large once
    /// decoded, 415 (Unsupported Media Type) otherwise.
    pub fn status(&self) -> u16 {
        match self {
            UnreadableBody::TooLarge { .. } => 413,
            _ => 415,
        }
    }
}

/// The body with its `Content-Encoding` undone, as a server that honours the header
/// reads it: codings are listed in the order they were applied (`gzip, br`), so they are
/// undone last first; `identity` and an absent header leave the body as it is.
pub fn decode_content<'b>(
    content_encoding: Option<&str>,
    body: &'b [u8],
) -> Result<Cow<'b, [u8]>, UnreadableBody> {
    let mut decoded = Cow::Borrowed(body);
    let Some(header) = content_encoding else {
        return Ok(decoded);
    };
    for coding in header.rsplit(',').map(str::trim).filter(|c| !c.is_empty()) {
        let coding = coding.to_ascii_lowercase();
        let next = match coding.as_str() {
            "identity" => continue,
            "gzip" | "x-gzip" => inflate(flate2::read::MultiGzDecoder::new(&decoded[..]), "gzip")?,
            // `deflate` is zlib-wrapped (RFC 9110); servers that meet a raw deflate stream
            // read it too, so both count.
            "deflate" => inflate(flate2::read::ZlibDecoder::new(&decoded[..]), "deflate")
                .or_else(|_| inflate(flate2::read::DeflateDecoder::new(&decoded[..]), "deflate"))?,
            "br" => inflate(
                brotli_decompressor::Decompressor::new(&decoded[..], 4096),
                "br",
            )?,
            _ => return Err(UnreadableBody::UnknownCoding(coding)),
        };
        decoded = Cow::Owned(next);
    }
    Ok(decoded)
}

/// Reads a decoder to its end, at most [`MAX_DECODED_BYTES`].
fn inflate(decoder: impl Read, coding: &'static str) -> Result<Vec<u8>, UnreadableBody> {
    let mut out = Vec::new();
    let cap = MAX_DECODED_BYTES;
    decoder
        .take(u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|_| UnreadableBody::Corrupt { coding })?;
    if out.len() > cap {
        return Err(UnreadableBody::TooLarge { cap });
    }
    Ok(out)
}

/// The params for a request with this `Content-Type` and body.
pub fn body_params(content_type: Option<&str>, body: &[u8]) -> Value {
    if body.is_empty() {
        return json!({});
    }
    if let Ok(value @ Value::Object(_)) = serde_json::from_slice::<Value>(body) {
        if value.get(RAW_BODY_KEY).is_none() {
            return value;
        }
    }
    let mut raw = Map::new();
    raw.insert("content_type".to_owned(), json!(content_type));
    let mut params = Map::new();
    match std::str::from_utf8(body) {
        Ok(text) => {
            raw.insert("text".to_owned(), json!(text));
            if is_form(content_type) {
                params = form_fields(body);
                params.remove(RAW_BODY_KEY);
            }
        }
        Err(_) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(body);
            raw.insert("base64".to_owned(), json!(encoded));
        }
    }
    params.insert(RAW_BODY_KEY.to_owned(), Value::Object(raw));
    Value::Object(params)
}

/// The body and `Content-Type` to send for these params: the raw body as it was held
/// (a form re-encoded from its fields only when an approver edited them), else the
/// params as JSON (nothing for empty params).
pub fn params_body(params: &Value) -> (Vec<u8>, Option<String>) {
    let Some(raw) = params.get(RAW_BODY_KEY) else {
        return match params {
            Value::Object(map) if map.is_empty() => (Vec::new(), None),
            _ => (
                serde_json::to_vec(params).unwrap_or_default(),
                Some("application/json".to_owned()),
            ),
        };
    };
    let content_type = raw["content_type"].as_str().map(str::to_owned);
    let original = match (raw["text"].as_str(), raw["base64"].as_str()) {
        (Some(text), _) => text.as_bytes().to_vec(),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap_or_default(),
        (None, None) => Vec::new(),
    };
    if is_form(content_type.as_deref()) {
        let mut fields = params.as_object().cloned().unwrap_or_default();
        fields.remove(RAW_BODY_KEY);
        if fields != form_fields(&original) {
            return (encode_form(&fields).into_bytes(), content_type);
        }
    }
    (original, content_type)
}

/// True for `application/x-www-form-urlencoded` (parameters ignored).
pub fn is_form(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|ct| {
            ct.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// A form's fields: a name given once is a string, a name repeated is an array.
fn form_fields(body: &[u8]) -> Map<String, Value> {
    let mut fields = Map::new();
    for (name, value) in form_urlencoded::parse(body) {
        let value = Value::String(value.into_owned());
        match fields.get_mut(name.as_ref()) {
            None => {
                fields.insert(name.into_owned(), value);
            }
            Some(Value::Array(values)) => values.push(value),
            Some(first) => *first = Value::Array(vec![first.take(), value]),
        }
    }
    fields
}

fn encode_form(fields: &Map<String, Value>) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        let values = match value {
            Value::Array(values) => values.clone(),
            other => vec![other.clone()],
        };
        for value in values {
            match value {
                Value::String(text) => out.append_pair(name, &text),
                Value::Null => out.append_key_only(name),
                other => out.append_pair(name, &other.to_string()),
            };
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &str = "application/x-www-form-urlencoded";

    #[test]
    fn a_form_is_kept_byte_for_byte_and_its_fields_are_params() {
        let body = b"amount=2500&to=acct%2B1&tag=a&tag=b&note=caf%C3%A9+ok";
        let params = body_params(Some(FORM), body);
        assert_eq!(params["amount"], "2500");
        assert_eq!(params["to"], "acct+1");
        assert_eq!(params["tag"], json!(["a", "b"]));
        assert_eq!(params["note"], "café ok");
        assert_eq!(params_body(&params), (body.to_vec(), Some(FORM.to_owned())));
        // An approver's edit re-encodes the form from its fields.
        let mut edited = params.clone();
        edited["amount"] = json!("100");
        let (sent, _) = params_body(&edited);
        assert_eq!(
            form_fields(&sent).get("amount"),
            Some(&json!("100")),
            "{}",
            String::from_utf8_lossy(&sent)
        );
    }

    #[test]
    fn text_binary_and_json_bodies_round_trip() {
        for (content_type, body) in [
            (Some("text/plain"), b"hello, world\n".to_vec()),
            (
                Some("application/octet-stream"),
                vec![0, 159, 146, 150, 255],
            ),
            (Some("application/json"), b"[1, 2]".to_vec()),
            (None, b"not json".to_vec()),
        ] {
            let params = body_params(content_type, &body);
            assert!(params.get(RAW_BODY_KEY).is_some(), "{params}");
            assert_eq!(
                params_body(&params),
                (body, content_type.map(str::to_owned))
            );
        }
        let object = body_params(Some("application/json"), br#"{"a": 1}"#);
        assert_eq!(object, json!({"a": 1}));
        assert_eq!(
            params_body(&object),
            (br#"{"a":1}"#.to_vec(), Some("application/json".to_owned()))
        );
        assert_eq!(params_body(&body_params(None, b"")), (Vec::new(), None));
    }
}

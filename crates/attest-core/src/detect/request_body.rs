//! A request's query and body read the way the servers behind a gateway read them.
//!
//! A server undoes a body's layers before it acts on it: its content coding (`gzip`,
//! `deflate`, `br`), its charset (a UTF-8 byte-order mark, UTF-16, UTF-32, Latin-1), then
//! its media type (JSON, a form, `multipart/form-data`, `application/graphql`). Detection
//! undoes the same layers and takes from each what could change the verb: `_method`
//! overrides (Rails, Laravel, Symfony, Express's `method-override`) and GraphQL documents
//! (`query` in JSON, a form or the query string, the `operations` part of a GraphQL
//! multipart request). JSON is read entry by entry, so a key given twice counts twice, and
//! query strings split on `;` as well as `&` (Rack does). Wherever a layer cannot be read
//! (an unknown coding or charset, a body too large once decompressed, a multipart body
//! without its boundary) the reading [`gave up`](BodyReading::gave_up), and detection
//! judges the request by the riskiest verb there is.

use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::url::percent_decode;
use crate::http_body::decode_content;

/// The query and form field that frameworks (Rails, Laravel, Symfony) read as the method.
pub(crate) const METHOD_FIELD: &str = "_method";

/// The field that carries a GraphQL document in JSON, forms and query strings.
const QUERY_FIELD: &str = "query";

/// The part of a GraphQL multipart request that holds its operations (JSON).
const OPERATIONS_PART: &str = "operations";

/// Most parts read from a multipart body; one with more gave up.
const MAX_PARTS: usize = 256;

/// The headers that say how a body is to be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Declared<'a> {
    /// `Content-Type`, with its parameters (`charset`, `boundary`).
    pub(crate) content_type: Option<&'a str>,
    /// `Content-Encoding`.
    pub(crate) content_encoding: Option<&'a str>,
}

/// What a query string and body could make a server do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BodyReading {
    /// Every `_method` value, from the query, a JSON body, a form or a multipart part.
    pub(crate) overrides: Vec<String>,
    /// Every GraphQL document, wherever it was found.
    pub(crate) documents: Vec<String>,
    /// True when the body is a GraphQL request (JSON with a `query`, `application/graphql`,
    /// a multipart `operations` part), so its operations, not its method, say what it does.
    pub(crate) graphql_request: bool,
    /// The body as text when it is not JSON, a form or multipart: a bare GraphQL document
    /// when it is sent to a GraphQL endpoint.
    pub(crate) bare_text: Option<String>,
    /// True when some layer could not be read: the request is judged as the riskiest verb.
    pub(crate) gave_up: bool,
}

/// Reads the `_method` overrides and GraphQL documents of a query string and a body.
pub(crate) fn read_request(
    query: &str,
    declared: Declared<'_>,
    body: Option<&[u8]>,
) -> BodyReading {
    let mut reading = BodyReading::default();
    read_pairs(query, &mut reading);
    let Some(body) = body.filter(|b| !b.is_empty()) else {
        return reading;
    };
    let Ok(body) = decode_content(declared.content_encoding, body) else {
        reading.gave_up = true;
        return reading;
    };
    let media = MediaType::parse(declared.content_type);
    let Some(text) = text_of(&body, media.charset.as_deref()) else {
        reading.gave_up = true;
        return reading;
    };
    let Some(text) = text else {
        // Not text in any charset: no server reads a method or a document from it, unless
        // it says it is one of the types that carry them.
        reading.gave_up = media.carries_fields();
        return reading;
    };
    if media.essence.starts_with("multipart/") {
        match media.boundary.as_deref() {
            Some(boundary) => read_multipart(&text, boundary, &mut reading),
            None => reading.gave_up = true,
        }
        return reading;
    }
    if media.essence == "application/graphql" {
        reading.graphql_request = true;
        reading.documents.push(text);
        return reading;
    }
    if read_json(&text, &mut reading) {
        return reading;
    }
    if media.essence == "application/x-www-form-urlencoded" || looks_like_form(&text) {
        read_pairs(&text, &mut reading);
        return reading;
    }
    reading.bare_text = Some(text);
    reading
}

/// Reads `_method` and `query` from `a=1&b=2;c=3` pairs, names and values percent-decoded.
fn read_pairs(text: &str, reading: &mut BodyReading) {
    for pair in text.split(['&', ';']) {
        let Some((name, value)) = pair.split_once('=') else {
            continue;
        };
        match percent_decode(name).as_str() {
            METHOD_FIELD => reading.overrides.push(percent_decode(value)),
            QUERY_FIELD => reading.documents.push(percent_decode(value)),
            _ => {}
        }
    }
}

/// True for a body that reads as a form (`a=1&b=2`), not JSON or a GraphQL document.
fn looks_like_form(text: &str) -> bool {
    text.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'%')
        && text.contains('=')
        && !text.contains('{')
}

/// Reads a JSON body: one object or a batch of them, every entry of each (a key given twice
/// counts twice). False when the text is not JSON.
fn read_json(text: &str, reading: &mut BodyReading) -> bool {
    let Ok(body) = serde_json::from_str::<JsonBody>(text) else {
        return false;
    };
    let objects = match body {
        JsonBody::One(entries) => vec![entries],
        JsonBody::Batch(batch) => batch,
        JsonBody::Other => return true,
    };
    for Entries(entries) in objects {
        for (name, value) in entries {
            match (name.as_str(), value) {
                (METHOD_FIELD, Value::String(method)) => reading.overrides.push(method),
                (QUERY_FIELD, Value::String(document)) => {
                    reading.graphql_request = true;
                    reading.documents.push(document);
                }
                // A `query` that is not a string (a persisted query's null, an object):
                // a GraphQL server may still run something, so nothing is known.
                (QUERY_FIELD, _) => reading.gave_up = true,
                _ => {}
            }
        }
    }
    true
}

/// A JSON body: one object, a batch of objects, or anything else.
enum JsonBody {
    One(Entries),
    Batch(Vec<Entries>),
    Other,
}

/// The entries of a JSON object in the order given, duplicates kept.
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match JsonBody::deserialize(deserializer)? {
            JsonBody::One(entries) => Ok(entries),
            // An element of a batch that is not an object has no entries to judge.
            JsonBody::Batch(_) | JsonBody::Other => Ok(Entries(Vec::new())),
        }
    }
}

impl<'de> Deserialize<'de> for JsonBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonBodyVisitor)
    }
}

struct JsonBodyVisitor;

impl<'de> Visitor<'de> for JsonBodyVisitor {
    type Value = JsonBody;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonBody, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<String, Value>()? {
            entries.push(entry);
        }
        Ok(JsonBody::One(Entries(entries)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsonBody, A::Error> {
        let mut batch = Vec::new();
        while let Some(entries) = seq.next_element::<Entries>()? {
            batch.push(entries);
        }
        Ok(JsonBody::Batch(batch))
    }

    fn visit_bool<E>(self, _: bool) -> Result<JsonBody, E> {
        Ok(JsonBody::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<JsonBody, E> {
        Ok(JsonBody::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<JsonBody, E> {
        Ok(JsonBody::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<JsonBody, E> {
        Ok(JsonBody::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<JsonBody, E> {
        Ok(JsonBody::Other)
    }
    fn visit_unit<E>(self) -> Result<JsonBody, E> {
        Ok(JsonBody::Other)
    }
}

/// Reads a `multipart/form-data` body: `_method` fields, a `query` field, and the JSON of
/// an `operations` part (the GraphQL multipart request spec).
fn read_multipart(text: &str, boundary: &str, reading: &mut BodyReading) {
    let delimiter = format!("--{boundary}");
    let mut parts = text.split(delimiter.as_str());
    // Whatever precedes the first delimiter is a preamble; no part at all gave up.
    if parts.next().is_none() {
        reading.gave_up = true;
        return;
    }
    let mut closed = false;
    for (count, part) in parts.enumerate() {
        if count >= MAX_PARTS {
            reading.gave_up = true;
            return;
        }
        if part.starts_with("--") {
            closed = true;
            break;
        }
        let part = part
            .strip_prefix("\r\n")
            .or_else(|| part.strip_prefix('\n'));
        let Some((head, content)) =
            part.and_then(|p| p.split_once("\r\n\r\n").or_else(|| p.split_once("\n\n")))
        else {
            reading.gave_up = true;
            return;
        };
        let content = content
            .strip_suffix("\r\n")
            .or_else(|| content.strip_suffix('\n'))
            .unwrap_or(content);
        match part_name(head).as_deref() {
            Some(METHOD_FIELD) => reading.overrides.push(content.to_owned()),
            Some(QUERY_FIELD) => {
                reading.graphql_request = true;
                reading.documents.push(content.to_owned());
            }
            Some(OPERATIONS_PART) => {
                let before = reading.documents.len();
                if !read_json(content, reading) || reading.documents.len() == before {
                    reading.gave_up = true;
                }
                reading.graphql_request = true;
            }
            _ => {}
        }
    }
    if !closed {
        reading.gave_up = true;
    }
}

/// The `name` of a part's `Content-Disposition: form-data; name="…"`.
fn part_name(head: &str) -> Option<String> {
    let disposition = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then_some(value)
    })?;
    parameter(disposition, "name")
}

/// A parameter of a header value (`; name="x"`, `; charset=utf-8`), unquoted.
fn parameter(value: &str, wanted: &str) -> Option<String> {
    value.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim().eq_ignore_ascii_case(wanted).then(|| {
            let value = value.trim();
            value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value)
                .to_owned()
        })
    })
}

/// A `Content-Type` taken apart.
struct MediaType {
    /// The type and subtype, lower-case (`""` when absent).
    essence: String,
    charset: Option<String>,
    boundary: Option<String>,
}

impl MediaType {
    fn parse(content_type: Option<&str>) -> MediaType {
        let value = content_type.unwrap_or("");
        MediaType {
            essence: value
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase(),
            charset: parameter(value, "charset").map(|c| c.to_ascii_lowercase()),
            boundary: parameter(value, "boundary").filter(|b| !b.is_empty()),
        }
    }

    /// True for the types servers read fields or documents from.
    fn carries_fields(&self) -> bool {
        let essence = self.essence.as_str();
        essence.ends_with("json")
            || essence.ends_with("+json")
            || essence.starts_with("multipart/")
            || essence == "application/x-www-form-urlencoded"
            || essence == "application/graphql"
    }
}

/// The body as text, in the charset its byte-order mark, its `charset` or its first bytes
/// (RFC 4627's null patterns) say. `None` when the charset is one Attest does not read (the
/// reading gives up); `Some(None)` when the bytes are not text.
fn text_of(body: &[u8], charset: Option<&str>) -> Option<Option<String>> {
    let boms: [(&[u8], Charset); 5] = [
        (&[0x00, 0x00, 0xFE, 0xFF], Charset::Utf32Be),
        (&[0xFF, 0xFE, 0x00, 0x00], Charset::Utf32Le),
        (&[0xEF, 0xBB, 0xBF], Charset::Utf8),
        (&[0xFE, 0xFF], Charset::Utf16Be),
        (&[0xFF, 0xFE], Charset::Utf16Le),
    ];
    if let Some((bom, charset)) = boms.iter().find(|(bom, _)| body.starts_with(bom)) {
        return Some(charset.decode(body.get(bom.len()..).unwrap_or(&[])));
    }
    let charset = match charset {
        Some(name) => Charset::named(name)?,
        None => Charset::sniffed(body),
    };
    Some(charset.decode(body))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charset {
    Utf8,
    Utf16Be,
    Utf16Le,
    Utf32Be,
    Utf32Le,
    Latin1,
}

impl Charset {
    fn named(name: &str) -> Option<Charset> {
        Some(match name.trim() {
            "utf-8" | "utf8" | "us-ascii" | "ascii" => Charset::Utf8,
            "utf-16be" => Charset::Utf16Be,
            "utf-16le" | "utf-16" => Charset::Utf16Le,
            "utf-32be" => Charset::Utf32Be,
            "utf-32le" | "utf-32" => Charset::Utf32Le,
            "iso-8859-1" | "latin1" | "latin-1" | "windows-1252" | "cp1252" => Charset::Latin1,
            _ => return None,
        })
    }

    /// RFC 4627 section 3: JSON text's first two characters are ASCII, so the nulls among
    /// its first four bytes give its encoding away.
    fn sniffed(body: &[u8]) -> Charset {
        match body {
            [0, 0, 0, _, ..] => Charset::Utf32Be,
            [0, _, 0, _, ..] => Charset::Utf16Be,
            [_, 0, 0, 0, ..] => Charset::Utf32Le,
            [_, 0, _, 0, ..] => Charset::Utf16Le,
            _ => Charset::Utf8,
        }
    }

    fn decode(self, bytes: &[u8]) -> Option<String> {
        match self {
            Charset::Utf8 => std::str::from_utf8(bytes).ok().map(str::to_owned),
            Charset::Latin1 => Some(bytes.iter().map(|&b| char::from(b)).collect()),
            Charset::Utf16Be | Charset::Utf16Le => {
                let units = bytes.chunks_exact(2).map(|pair| match (self, pair) {
                    (Charset::Utf16Be, &[hi, lo]) => u16::from_be_bytes([hi, lo]),
                    (_, &[lo, hi]) => u16::from_le_bytes([lo, hi]),
                    _ => 0xFFFD,
                });
                char::decode_utf16(units)
                    .collect::<Result<String, _>>()
                    .ok()
            }
            Charset::Utf32Be | Charset::Utf32Le => bytes
                .chunks_exact(4)
                .map(|quad| {
                    let quad: [u8; 4] = quad.try_into().ok()?;
                    let code = if self == Charset::Utf32Be {
                        u32::from_be_bytes(quad)
                    } else {
                        u32::from_le_bytes(quad)
                    };
                    char::from_u32(code)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(content_type: Option<&str>, body: &[u8]) -> BodyReading {
        read_request(
            "",
            Declared {
                content_type,
                content_encoding: None,
            },
            Some(body),
        )
    }

    #[test]
    fn every_value_of_a_key_given_twice_counts() {
        let found = read(
            Some("application/json"),
            br#"{"query": "{ a }", "_method": "PUT", "query": "mutation { b }", "_method": "DELETE"}"#,
        );
        assert_eq!(found.documents, ["{ a }", "mutation { b }"]);
        assert_eq!(found.overrides, ["PUT", "DELETE"]);
        assert!(found.graphql_request && !found.gave_up);
    }

    #[test]
    fn byte_order_marks_and_other_charsets_are_read() {
        let json = r#"{"query": "mutation { deleteRepository }"}"#;
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend_from_slice(json.as_bytes());
        let utf16le: Vec<u8> = json.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let utf16be: Vec<u8> = json.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let utf32le: Vec<u8> = json
            .chars()
            .flat_map(|c| u32::from(c).to_le_bytes())
            .collect();
        for body in [bom, utf16le, utf16be, utf32le] {
            let found = read(Some("application/json"), &body);
            assert_eq!(
                found.documents,
                ["mutation { deleteRepository }"],
                "{body:?}"
            );
        }
        let found = read(Some("application/json; charset=koi8-r"), json.as_bytes());
        assert!(found.gave_up);
    }

    #[test]
    fn forms_queries_and_multipart_bodies_are_read() {
        let found = read_request(
            "x=1;%5Fmethod=DELETE&query=mutation%7Bb%7D",
            Declared::default(),
            None,
        );
        assert_eq!(found.overrides, ["DELETE"]);
        assert_eq!(found.documents, ["mutation{b}"]);
        let found = read(
            Some("application/x-www-form-urlencoded"),
            b"query=mutation+%7B+deleteRepository+%7D&_method=DELETE",
        );
        assert_eq!(found.documents, ["mutation { deleteRepository }"]);
        assert_eq!(found.overrides, ["DELETE"]);
        let multipart = "--XyZ\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n\
                         {\"query\": \"mutation { deleteRepository }\"}\r\n--XyZ\r\n\
                         Content-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--XyZ--\r\n";
        let found = read(
            Some("multipart/form-data; boundary=\"XyZ\""),
            multipart.as_bytes(),
        );
        assert_eq!(found.documents, ["mutation { deleteRepository }"]);
        assert_eq!(found.overrides, ["DELETE"]);
        assert!(!found.gave_up);
        assert!(read(Some("multipart/form-data"), multipart.as_bytes()).gave_up);
        assert!(
            read(
                Some("multipart/form-data; boundary=Q"),
                multipart.as_bytes()
            )
            .gave_up
        );
    }

    #[test]
    fn unreadable_codings_give_up() {
        let found = read_request(
            "",
            Declared {
                content_type: Some("application/json"),
                content_encoding: Some("compress"),
            },
            Some(b"x"),
        );
        assert!(found.gave_up);
        let found = read(Some("application/octet-stream"), &[0xff, 0x00, 0x9f]);
        assert!(!found.gave_up);
        let found = read(Some("application/json"), &[0xff, 0x00, 0x9f]);
        assert!(found.gave_up);
    }
}

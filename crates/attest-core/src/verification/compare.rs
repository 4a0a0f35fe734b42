//! Field comparison: does what the system of record holds match what was intended?
//!
//! The rules (the same for every driver):
//! - text is compared with whitespace collapsed (`"a  b\n"` equals `"a b"`);
//! - email addresses case-insensitively, and wanted addresses must appear among the
//!   addresses found (`"Bob <BOB@x.io>, c@y.io"` holds `bob@x.io`);
//! - numbers are equal across strings and numbers (`5 == "5"`, `5 == 5.0`);
//! - RFC 3339 times are equal when they name the same instant;
//! - a wanted list must be a subset of what is there; a wanted object's fields must
//!   each match the field of the same name.

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The longest value, in characters, that evidence keeps.
pub const EVIDENCE_MAX_CHARS: usize = 120;

/// How one field is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Rule {
    /// The rules in the module docs.
    #[default]
    Auto,
    /// The wanted text appears somewhere in what is there (whitespace collapsed).
    Contains,
}

/// The result of comparing one intended field with what was read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldResult {
    /// The field's name.
    pub field: String,
    /// What was intended, cut to [`EVIDENCE_MAX_CHARS`]; only a fingerprint for a field
    /// off the preview allow-list or marked private.
    pub want: Value,
    /// What the system of record holds, cut the same way; `null` when absent.
    pub got: Value,
    /// Whether they match.
    pub ok: bool,
}

impl FieldResult {
    /// Compares `want` with `got` under `rule` and keeps short evidence of both. A field
    /// that is not on the preview allow-list ([`attest_policy::preview_allows`]: a
    /// `password`, a `signing_secret`, a message body), or is marked `private`, keeps only a
    /// fingerprint of each value: the ledger can never be redacted.
    pub(crate) fn compare(
        field: &str,
        want: &Value,
        got: Option<&Value>,
        rule: Rule,
        private: bool,
    ) -> Self {
        let ok = match rule {
            Rule::Auto => matches(want, got),
            Rule::Contains => contains(want, got),
        };
        let private = private || !attest_policy::preview_allows(field);
        let show = |value: Option<&Value>| match value {
            None | Some(Value::Null) => Value::Null,
            Some(value) if private => Value::String(fingerprint(value)),
            Some(value) => cut(value),
        };
        FieldResult {
            field: field.to_owned(),
            want: show(Some(want)),
            got: show(got),
            ok,
        }
    }

    /// The evidence object: `{"field","want","got","ok"}`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("field".to_owned(), Value::String(self.field.clone()));
        map.insert("want".to_owned(), self.want.clone());
        map.insert("got".to_owned(), self.got.clone());
        map.insert("ok".to_owned(), Value::Bool(self.ok));
        Value::Object(map)
    }
}

/// A value short enough and safe for evidence: URLs redacted
/// ([`attest_policy::redact_urls_in`]: no user info, query or token), strings cut to
/// [`EVIDENCE_MAX_CHARS`] characters (the last one `…` when cut), lists and objects written
/// as compact JSON and cut the same way; numbers, booleans and null as they are.
pub fn cut(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(cut_text(text)),
        Value::Array(_) | Value::Object(_) => Value::String(cut_text(&value.to_string())),
        other => other.clone(),
    }
}

/// Text for evidence: URLs redacted, then cut to [`EVIDENCE_MAX_CHARS`] characters.
pub(crate) fn cut_text(text: &str) -> String {
    let text = attest_policy::redact_urls_in(text);
    if text.chars().count() <= EVIDENCE_MAX_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(EVIDENCE_MAX_CHARS - 1).collect();
    out.push('…');
    out
}

/// `sha256:` and the first 16 hex digits of a value's SHA-256 (strings hashed as
/// their text, anything else as compact JSON): enough to tell values apart, not to
/// read them.
pub(crate) fn fingerprint(value: &Value) -> String {
    let digest = match value {
        Value::String(text) => Sha256::digest(collapse(text).as_bytes()),
        other => Sha256::digest(other.to_string().as_bytes()),
    };
    let hex = hex::encode(digest);
    format!("sha256:{}", hex.get(..16).unwrap_or(&hex))
}

/// Whether `got` holds what `want` describes, by the rules in the module docs.
pub(crate) fn matches(want: &Value, got: Option<&Value>) -> bool {
    let Some(got) = got.filter(|g| !g.is_null()) else {
        return want.is_null();
    };
    match want {
        Value::Null => true,
        Value::Object(fields) => match got {
            Value::Object(have) => fields
                .iter()
                .all(|(key, value)| value.is_null() || matches(value, have.get(key))),
            _ => false,
        },
        Value::Array(items) => {
            if let Some(wanted) = all_addresses(items) {
                return wanted_addresses_found(&wanted, got);
            }
            let have: Vec<&Value> = match got {
                Value::Array(have) => have.iter().collect(),
                other => vec![other],
            };
            items
                .iter()
                .all(|item| have.iter().any(|h| matches(item, Some(h))))
        }
        Value::String(text) => match_text(text, got),
        Value::Number(_) => match got {
            Value::Array(have) => have.iter().any(|h| matches(want, Some(h))),
            _ => same_number(want, got),
        },
        Value::Bool(b) => match got {
            Value::Bool(have) => b == have,
            Value::String(text) => text.trim().eq_ignore_ascii_case(&b.to_string()),
            _ => false,
        },
    }
}

fn match_text(text: &str, got: &Value) -> bool {
    if let Some(wanted) = addresses(text) {
        return wanted_addresses_found(&wanted, got);
    }
    match got {
        Value::String(have) => {
            if let (Some(a), Some(b)) = (instant(text), instant(have)) {
                return a == b;
            }
            collapse(text) == collapse(have)
                || (is_number_text(text) && same_number_text(text, have))
        }
        Value::Number(_) => same_number(&Value::String(text.to_owned()), got),
        Value::Bool(b) => text.trim().eq_ignore_ascii_case(&b.to_string()),
        Value::Array(have) => have.iter().any(|h| match_text(text, h)),
        Value::Object(_) | Value::Null => false,
    }
}

fn contains(want: &Value, got: Option<&Value>) -> bool {
    let Some(got) = got else { return false };
    let mut texts = Vec::new();
    strings(got, &mut texts);
    let have = collapse(&texts.join(" "));
    match want {
        Value::String(text) => have.contains(&collapse(text)),
        Value::Array(items) => items.iter().all(|item| contains(item, Some(got))),
        Value::Null => true,
        other => have.contains(&other.to_string()),
    }
}

/// Every string in a value, depth first.
fn strings<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

pub(crate) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn same_number(want: &Value, got: &Value) -> bool {
    match (number_text(want), number_text(got)) {
        (Some(a), Some(b)) => same_number_text(&a, &b),
        _ => false,
    }
}

fn number_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(text) if is_number_text(text) => Some(text.trim().to_owned()),
        _ => None,
    }
}

fn is_number_text(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && t.parse::<f64>().is_ok_and(f64::is_finite)
}

fn same_number_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if let (Ok(x), Ok(y)) = (a.parse::<i128>(), b.parse::<i128>()) {
        return x == y;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y || (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()),
        _ => false,
    }
}

/// The addresses in `text` when it is nothing but addresses (`a@x.io, Bob <b@y.io>`).
fn addresses(text: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = text
        .split([',', ';'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return None;
    }
    parts.into_iter().map(address).collect()
}

/// One address, bare or as `Name <addr>`, lower-cased.
fn address(part: &str) -> Option<String> {
    let inner = match (part.rfind('<'), part.rfind('>')) {
        (Some(open), Some(close)) if open < close => &part[open + 1..close],
        _ => part,
    };
    let inner = inner.trim().trim_start_matches("mailto:");
    let (local, domain) = inner.split_once('@')?;
    let valid = !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !inner.contains(char::is_whitespace)
        && !domain.contains('@');
    valid.then(|| inner.to_ascii_lowercase())
}

fn all_addresses(items: &[Value]) -> Option<Vec<String>> {
    if items.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for item in items {
        out.extend(addresses(item.as_str()?)?);
    }
    Some(out)
}

fn wanted_addresses_found(wanted: &[String], got: &Value) -> bool {
    let mut texts = Vec::new();
    strings(got, &mut texts);
    let found: Vec<String> = texts
        .iter()
        .flat_map(|t| t.split([',', ';']))
        .filter_map(|p| address(p.trim()))
        .collect();
    wanted.iter().all(|w| found.contains(w))
}

/// An RFC 3339 date-time (`T` or space; offset optional, read as UTC) as seconds
/// since the epoch and nanoseconds.
fn instant(text: &str) -> Option<(i64, u32)> {
    let t = text.trim();
    let b = t.as_bytes();
    if b.len() < 19 || !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = t.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())
            .flatten()
    };
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let mut rest = &t[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let padded: String = frac[..digits]
            .chars()
            .chain("000000000".chars())
            .take(9)
            .collect();
        nanos = padded.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let (h, m) = rest[1..].split_once(':')?;
            if h.len() != 2 || m.len() != 2 {
                return None;
            }
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn m(want: Value, got: Value) -> bool {
        matches(&want, Some(&got))
    }

    #[test]
    fn text_numbers_and_booleans() {
        assert!(m(json!("Hello  world\n"), json!("Hello world")));
        assert!(!m(json!("Hello world"), json!("Hello, world")));
        assert!(m(json!(5), json!("5")));
        assert!(m(json!("5"), json!(5)));
        assert!(m(json!(5), json!(5.0)));
        assert!(m(json!("1500"), json!(1500)));
        assert!(!m(json!(1500), json!(150)));
        assert!(m(json!(true), json!("true")));
        assert!(!m(json!(true), json!(false)));
        assert!(!matches(&json!("x"), None));
        assert!(!m(json!("x"), Value::Null));
    }

    #[test]
    fn emails() {
        assert!(m(json!("BOB@x.io"), json!("Bob <bob@X.io>, c@y.io")));
        assert!(m(json!("bob@x.io, c@y.io"), json!("c@y.io; bob@x.io")));
        assert!(!m(json!("bob@x.io"), json!("Bobby <bobby@x.io>")));
        assert!(m(
            json!(["a@x.io", "b@x.io"]),
            json!(["B@x.io", "a@X.io", "z@x.io"])
        ));
        assert!(!m(json!(["a@x.io", "q@x.io"]), json!(["a@x.io"])));
    }

    #[test]
    fn lists_objects_and_times() {
        assert!(m(json!(["bug"]), json!(["bug", "p1"])));
        assert!(!m(json!(["bug", "p2"]), json!(["bug", "p1"])));
        assert!(m(json!([["a", 5]]), json!([["a", "5"], ["b", "6"]])));
        assert!(m(
            json!({"a": 1, "b": "x"}),
            json!({"a": "1", "b": "x", "c": 3})
        ));
        assert!(!m(json!({"a": 1}), json!({"a": 2})));
        assert!(m(
            json!("2024-05-01T10:00:00Z"),
            json!("2024-05-01T12:00:00+02:00")
        ));
        assert!(m(
            json!("2024-05-01T10:00:00"),
            json!("2024-05-01T10:00:00.0000000")
        ));
        assert!(!m(
            json!("2024-05-01T10:00:00Z"),
            json!("2024-05-01T10:30:00Z")
        ));
    }

    #[test]
    fn contains_and_evidence() {
        assert!(contains(
            &json!("hello world"),
            Some(&json!(["<p>hello", " world</p>"]))
        ));
        assert!(!contains(&json!("bye"), Some(&json!("hello"))));
        let long = "x".repeat(500);
        let r = FieldResult::compare("title", &json!(long), Some(&json!(long)), Rule::Auto, false);
        assert!(r.ok);
        assert_eq!(r.want.as_str().unwrap().chars().count(), EVIDENCE_MAX_CHARS);
        let p = FieldResult::compare("body", &json!("secret"), None, Rule::Auto, true);
        assert!(!p.ok);
        assert!(p.want.as_str().unwrap().starts_with("sha256:"));
        assert_eq!(p.got, Value::Null);
    }

    #[test]
    fn fields_off_the_allow_list_are_fingerprints_and_urls_are_redacted() {
        for field in ["password", "signing_secret", "private_key", "body"] {
            let r = FieldResult::compare(
                field,
                &json!("hunter2"),
                Some(&json!("hunter2")),
                Rule::Auto,
                false,
            );
            assert!(r.ok);
            assert_eq!(r.want, r.got);
            assert!(r.want.as_str().unwrap().starts_with("sha256:"), "{field}");
        }
        let hook = "https://hooks.slack.com/services/T0/B0/XXXXXXXXXXXXXXXXXXXXXXXX?x=1";
        let r = FieldResult::compare("url", &json!(hook), Some(&json!(hook)), Rule::Auto, false);
        assert_eq!(
            r.want,
            json!("https://hooks.slack.com/services/T0/B0/[redacted]")
        );
    }
}

//! `params:` conditions in a rule's match: JSON-pointer paths into the action's
//! params with `eq, ne, gt, gte, lt, lte, in, regex, exists`.
//!
//! ```yaml
//! params:
//!   /amount: { gt: 50000 }
//!   /to: { regex: '@acme\.com$' }
//! ```
//!
//! Semantics, chosen so an `act` rule never fires on a value it did not check:
//! - the value at the path is looked up once; a missing value and `null` are absent;
//! - `exists: true` holds when the value is present, `exists: false` when absent;
//! - every other operator needs a present value, except `ne`, which holds for an
//!   absent one;
//! - when the value is a list, the operator must hold for **every** element (and the
//!   list must not be empty);
//! - `gt, gte, lt, lte` compare numbers; a string holding a number counts as that
//!   number (form-encoded APIs send amounts as strings); anything else is false;
//! - `eq, ne, in` compare a string, number or boolean; numbers compare by value, so
//!   `5` equals `5.0` and `"5"`;
//! - `regex` searches strings (anchor with `^…$`); non-strings do not match.
//!
//! All operators of one path must hold, and all paths must hold.

use std::fmt;

use regex::{Regex, RegexBuilder};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::de::{checked_map, Key, OrderedMap, Word, W};
use crate::file::Leaf;

/// Most bytes a compiled regex may take: a pathological pattern is an error at load
/// time, not a slow evaluation.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A compiled RFC 6901 JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer {
    text: Box<str>,
    tokens: Box<[Token]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    key: Box<str>,
    /// The token as an array index, when it is one (`0`, `12`; not `01`).
    index: Option<usize>,
}

impl Pointer {
    /// The pointer as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Looks the pointer up in `value`; `None` when it is missing or `null`.
    pub(crate) fn resolve<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let mut current = value;
        for token in self.tokens.iter() {
            current = match current {
                Value::Object(map) => map.get(&*token.key)?,
                Value::Array(items) => items.get(token.index?)?,
                _ => return None,
            };
        }
        (!current.is_null()).then_some(current)
    }
}

impl Word for Pointer {
    const EXPECTING: &'static str = "a JSON pointer such as /amount";

    fn from_word(word: &str) -> Result<Self, String> {
        let text = word.trim();
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "params path {text:?} is not a JSON pointer (write \"/{}\")",
                text
            ));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            let key = unescape(raw).ok_or_else(|| {
                format!("params path {text:?}: `~` must be followed by 0 or 1 (RFC 6901)")
            })?;
            let index = if key == "0" || (!key.starts_with('0') && !key.is_empty()) {
                key.parse::<usize>().ok()
            } else {
                None
            };
            tokens.push(Token {
                key: key.into(),
                index,
            });
        }
        Ok(Pointer {
            text: text.into(),
            tokens: tokens.into(),
        })
    }
}

impl Key for Pointer {
    fn key_text(&self) -> &str {
        &self.text
    }
}

fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// A string, number or boolean to compare with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    /// Compared exactly.
    Str(Box<str>),
    /// Compared by value.
    Num(f64),
    /// Compared exactly.
    Bool(bool),
}

impl Scalar {
    fn equals(&self, value: &Value) -> bool {
        match (self, value) {
            (Scalar::Str(want), Value::String(got)) => **want == **got,
            (Scalar::Num(want), got) => number(got) == Some(*want),
            (Scalar::Bool(want), Value::Bool(got)) => want == got,
            _ => false,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Str(s) => write!(f, "{s:?}"),
            Scalar::Num(n) => write!(f, "{n}"),
            Scalar::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl Visitor<'_> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number or boolean")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.into()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Num(v as f64))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Num(v as f64))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
        if v.is_finite() {
            Ok(Scalar::Num(v))
        } else {
            Err(E::custom("numbers must be finite"))
        }
    }
}

/// A number to compare with: finite, written as a YAML number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bound(f64);

impl<'de> Deserialize<'de> for Bound {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Scalar::deserialize(deserializer)? {
            Scalar::Num(n) => Ok(Bound(n)),
            other => Err(de::Error::custom(format!(
                "expected a number, found {other} (write it without quotes)"
            ))),
        }
    }
}

/// A compiled regex.
#[derive(Debug, Clone)]
pub(crate) struct Pattern(Regex);

impl Word for Pattern {
    const EXPECTING: &'static str = "a regular expression";

    fn from_word(word: &str) -> Result<Self, String> {
        RegexBuilder::new(word)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map(Pattern)
            .map_err(|e| {
                // The regex crate's message spans several lines; keep it on one.
                let detail = e.to_string();
                let detail = detail
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("invalid")
                    .trim()
                    .trim_start_matches("error: ")
                    .to_owned();
                format!("bad regex {word:?}: {detail}")
            })
    }
}

/// One operator.
#[derive(Debug, Clone)]
enum Op {
    Eq(Scalar),
    Ne(Scalar),
    Gt(f64),
    Gte(f64),
    Lt(f64),
    Lte(f64),
    In(Box<[Scalar]>),
    Regex(Regex),
    Exists(bool),
}

impl Op {
    /// Whether the operator holds for one present, non-list value.
    fn holds_for(&self, value: &Value) -> bool {
        match self {
            Op::Eq(want) => want.equals(value),
            Op::Ne(want) => !want.equals(value),
            Op::Gt(bound) => number(value).is_some_and(|n| n > *bound),
            Op::Gte(bound) => number(value).is_some_and(|n| n >= *bound),
            Op::Lt(bound) => number(value).is_some_and(|n| n < *bound),
            Op::Lte(bound) => number(value).is_some_and(|n| n <= *bound),
            Op::In(options) => options.iter().any(|o| o.equals(value)),
            Op::Regex(re) => value.as_str().is_some_and(|s| re.is_match(s)),
            Op::Exists(want) => *want,
        }
    }

    /// Whether the operator holds for the value found at the path (`None`: absent).
    fn holds(&self, found: Option<&Value>) -> bool {
        match (self, found) {
            (Op::Exists(want), found) => found.is_some() == *want,
            (Op::Ne(_), None) => true,
            (_, None) => false,
            (_, Some(Value::Array(items))) => {
                !items.is_empty() && items.iter().all(|item| self.holds_for(item))
            }
            (_, Some(value)) => self.holds_for(value),
        }
    }
}

pub(crate) fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
        _ => None,
    }
}

/// The operators of one path, as written in YAML.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    eq: Option<Scalar>,
    ne: Option<Scalar>,
    gt: Option<Bound>,
    gte: Option<Bound>,
    lt: Option<Bound>,
    lte: Option<Bound>,
    #[serde(rename = "in")]
    any_of: Option<Vec<Scalar>>,
    regex: Option<W<Pattern>>,
    exists: Option<bool>,
}

/// The operators of one path, all of which must hold.
#[derive(Debug, Clone)]
pub(crate) struct Condition(Box<[Op]>);

impl Condition {
    fn check(raw: RawCondition) -> Result<Condition, String> {
        let mut ops = Vec::new();
        ops.extend(raw.eq.map(Op::Eq));
        ops.extend(raw.ne.map(Op::Ne));
        ops.extend(raw.gt.map(|Bound(b)| Op::Gt(b)));
        ops.extend(raw.gte.map(|Bound(b)| Op::Gte(b)));
        ops.extend(raw.lt.map(|Bound(b)| Op::Lt(b)));
        ops.extend(raw.lte.map(|Bound(b)| Op::Lte(b)));
        if let Some(options) = raw.any_of {
            if options.is_empty() {
                return Err("`in` needs at least one value".to_owned());
            }
            ops.push(Op::In(options.into()));
        }
        ops.extend(raw.regex.map(|W(Pattern(re))| Op::Regex(re)));
        ops.extend(raw.exists.map(Op::Exists));
        if ops.is_empty() {
            return Err(
                "no operator (expected one or more of eq, ne, gt, gte, lt, lte, in, regex, exists)"
                    .to_owned(),
            );
        }
        Ok(Condition(ops.into()))
    }
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a mapping of operators such as { gt: 50000 }",
            Condition::check,
        )
    }
}

/// The `params:` block of a match: every path's operators must hold.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParamConditions(Box<[(Pointer, Condition)]>);

impl ParamConditions {
    /// True when there are no conditions.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether every condition holds for `params`.
    pub(crate) fn matches(&self, params: &Value) -> bool {
        self.0.iter().all(|(pointer, condition)| {
            let found = pointer.resolve(params);
            condition.0.iter().all(|op| op.holds(found))
        })
    }
}

impl<'de> Deserialize<'de> for ParamConditions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let OrderedMap(entries) =
            OrderedMap::<Pointer, Leaf<Condition>>::deserialize(deserializer)?;
        Ok(ParamConditions(
            entries
                .into_iter()
                .filter_map(|(pointer, condition)| match condition {
                    Leaf::Value(condition) => Some((pointer, condition)),
                    Leaf::Absent | Leaf::Skipped => None,
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn conditions(yaml: &str) -> ParamConditions {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn check(yaml: &str, params: Value) -> bool {
        conditions(yaml).matches(&params)
    }

    #[test]
    fn pointers_follow_rfc_6901() {
        let p = Pointer::from_word("/a~1b/0/c~0d").unwrap();
        let v = json!({"a/b": [{"c~d": 7}]});
        assert_eq!(p.resolve(&v), Some(&json!(7)));
        assert_eq!(
            Pointer::from_word("/x/01")
                .unwrap()
                .resolve(&json!({"x": [1, 2]})),
            None
        );
        assert_eq!(
            Pointer::from_word("/x/01")
                .unwrap()
                .resolve(&json!({"x": {"01": 3}})),
            Some(&json!(3))
        );
        assert_eq!(
            Pointer::from_word("/n")
                .unwrap()
                .resolve(&json!({"n": null})),
            None
        );
        assert!(Pointer::from_word("amount")
            .unwrap_err()
            .contains("\"/amount\""));
        assert!(Pointer::from_word("/a~2").is_err());
    }

    #[test]
    fn comparisons() {
        assert!(check("/amount: {gt: 50000}", json!({"amount": 60000})));
        assert!(!check("/amount: {gt: 50000}", json!({"amount": 50000})));
        assert!(check("/amount: {gte: 50000}", json!({"amount": 50000})));
        assert!(check("/amount: {lt: 10}", json!({"amount": "9.5"})));
        assert!(check("/amount: {lte: 10}", json!({"amount": 10})));
        assert!(!check("/amount: {lt: 10}", json!({"amount": "ten"})));
        assert!(!check("/amount: {gt: 1}", json!({})));
        assert!(check("/amount: {gt: 1, lt: 5}", json!({"amount": 3})));
        assert!(!check("/amount: {gt: 1, lt: 5}", json!({"amount": 6})));
    }

    #[test]
    fn equality_and_membership() {
        assert!(check("/status: {eq: paid}", json!({"status": "paid"})));
        assert!(!check("/status: {eq: paid}", json!({"status": "Paid"})));
        assert!(check("/n: {eq: 5}", json!({"n": 5.0})));
        assert!(check("/n: {eq: 5}", json!({"n": "5"})));
        assert!(check("/ok: {eq: true}", json!({"ok": true})));
        assert!(!check("/ok: {eq: true}", json!({"ok": "true"})));
        assert!(check("/status: {ne: paid}", json!({"status": "open"})));
        assert!(check("/status: {ne: paid}", json!({})));
        assert!(!check("/status: {ne: paid}", json!({"status": "paid"})));
        assert!(check("/cur: {in: [usd, eur]}", json!({"cur": "eur"})));
        assert!(!check("/cur: {in: [usd, eur]}", json!({"cur": "gbp"})));
    }

    #[test]
    fn regex_and_exists() {
        let acme = r"/to: {regex: '@acme\.com$'}";
        assert!(check(acme, json!({"to": "bob@acme.com"})));
        assert!(!check(acme, json!({"to": "bob@acme.com.evil.io"})));
        assert!(!check(acme, json!({"to": 5})));
        assert!(check("/x: {exists: true}", json!({"x": 0})));
        assert!(!check("/x: {exists: true}", json!({"x": null})));
        assert!(check("/x: {exists: false}", json!({})));
        assert!(!check("/x: {exists: false}", json!({"x": "y"})));
    }

    #[test]
    fn lists_must_hold_for_every_element() {
        let acme = r"/to: {regex: '@acme\.com$'}";
        assert!(check(acme, json!({"to": ["a@acme.com", "b@acme.com"]})));
        assert!(!check(acme, json!({"to": ["a@acme.com", "b@evil.io"]})));
        assert!(!check(acme, json!({"to": []})));
        assert!(check("/to: {ne: x@y.io}", json!({"to": ["a@b.io"]})));
        assert!(!check(
            "/to: {ne: x@y.io}",
            json!({"to": ["a@b.io", "x@y.io"]})
        ));
    }

    #[test]
    fn bad_conditions_are_errors_at_their_line() {
        let cases = [
            ("/a: {gt: '5'}\n", 1, "expected a number"),
            ("/a: {eq: 1}\n/b: {regex: '('}\n", 2, "bad regex"),
            ("/a: {}\n", 1, "no operator"),
            (
                "/a: {eq: 1}\n/b: {between: 1}\n",
                2,
                "unknown field `between`",
            ),
            ("/a: {in: []}\n", 1, "`in` needs at least one value"),
            ("/a: {eq: [1]}\n", 1, "expected a string, number or boolean"),
            ("a: {eq: 1}\n", 1, "not a JSON pointer"),
            ("/a: {eq: 1}\n/a: {eq: 2}\n", 2, "duplicate key"),
            ("/a: 5\n", 1, "a mapping of operators"),
        ];
        for (yaml, line, message) in cases {
            let err = serde_yaml::from_str::<ParamConditions>(yaml).unwrap_err();
            assert_eq!(err.location().unwrap().line(), line, "{yaml}: {err}");
            assert!(err.to_string().contains(message), "{yaml}: {err}");
        }
    }
}

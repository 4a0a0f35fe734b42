//! Paths into JSON: RFC 6901 JSON Pointers with two additions for vendor shapes.
//!
//! - `*` takes every element of a list (or every value of an object):
//!   `/attendees/*/email` is the list of attendee addresses.
//! - `[key=value]` takes the first list element whose `key` equals `value`
//!   (case-insensitively): `/payload/headers/[name=To]/value` is Gmail's To header.
//!   The value may be a template: `/messages/[ts={id}]`.
//!
//! A digit segment indexes a list, `~0`/`~1` escape `~`/`/` as in RFC 6901.

use serde_json::Value;

use super::template::{Encoding, Template, Vars};

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer {
    segments: Vec<Segment>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    All,
    Select { key: String, value: Template },
}

impl Pointer {
    /// Parses `text`: empty (the whole document) or `/`-separated segments.
    /// The one key a pointer such as `/issue_number` names, else `None`.
    pub(crate) fn single_key(&self) -> Option<&str> {
        match self.segments.as_slice() {
            [Segment::Key(key)] => Some(key),
            _ => None,
        }
    }

    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Ok(Pointer {
                segments: Vec::new(),
                text: String::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!("pointer {text:?} must start with `/`"));
        };
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            let segment = if raw == "*" {
                Segment::All
            } else if let Some(inner) = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                let (key, value) = inner
                    .split_once('=')
                    .ok_or_else(|| format!("selector [{inner}] in {text:?} needs `key=value`"))?;
                if key.is_empty() {
                    return Err(format!("selector [{inner}] in {text:?} has no key"));
                }
                Segment::Select {
                    key: key.to_owned(),
                    value: Template::parse(value)?,
                }
            } else {
                Segment::Key(raw.replace("~1", "/").replace("~0", "~"))
            };
            segments.push(segment);
        }
        Ok(Pointer {
            segments,
            text: text.to_owned(),
        })
    }

    /// The pointer as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pointer collects several values (has a `*`).
    pub(crate) fn is_multi(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::All))
    }

    /// The value at this path: `None` when absent; with `*`, the list of every value
    /// found (`None` when that list is empty).
    pub(crate) fn lookup(&self, root: &Value, vars: Option<&Vars<'_>>) -> Option<Value> {
        let mut found = Vec::new();
        walk(root, &self.segments, vars, &mut found);
        if self.is_multi() {
            let values: Vec<Value> = found.into_iter().cloned().collect();
            (!values.is_empty()).then_some(Value::Array(values))
        } else {
            found.first().map(|v| (*v).clone())
        }
    }

    /// Whether a value is present (not null) at this path.
    pub(crate) fn present(&self, root: &Value) -> bool {
        matches!(self.lookup(root, None), Some(v) if !v.is_null())
    }
}

fn walk<'v>(
    value: &'v Value,
    segments: &[Segment],
    vars: Option<&Vars<'_>>,
    out: &mut Vec<&'v Value>,
) {
    let Some((first, rest)) = segments.split_first() else {
        out.push(value);
        return;
    };
    match first {
        Segment::Key(key) => {
            let next = match value {
                Value::Object(map) => map.get(key),
                Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            if let Some(next) = next {
                walk(next, rest, vars, out);
            }
        }
        Segment::All => match value {
            Value::Array(items) => items.iter().for_each(|item| walk(item, rest, vars, out)),
            Value::Object(map) => map.values().for_each(|item| walk(item, rest, vars, out)),
            _ => {}
        },
        Segment::Select { key, value: want } => {
            let Value::Array(items) = value else { return };
            let want = match vars {
                Some(vars) => want.render(vars, Encoding::Plain).ok(),
                None => Some(want.as_str().to_owned()),
            };
            let Some(want) = want else { return };
            let hit = items.iter().find(|item| {
                item.get(key)
                    .and_then(super::template::scalar_text)
                    .is_some_and(|text| text.eq_ignore_ascii_case(&want))
            });
            if let Some(hit) = hit {
                walk(hit, rest, vars, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_indexes_wildcards_and_selectors() {
        let doc = json!({
            "payload": {"headers": [{"name": "Subject", "value": "Hi"}, {"name": "To", "value": "a@x.io"}]},
            "attendees": [{"email": "a@x.io"}, {"email": "b@x.io"}],
            "a/b": 1
        });
        let get = |p: &str| Pointer::parse(p).unwrap().lookup(&doc, None);
        assert_eq!(
            get("/payload/headers/[name=to]/value"),
            Some(json!("a@x.io"))
        );
        assert_eq!(get("/payload/headers/1/name"), Some(json!("To")));
        assert_eq!(get("/attendees/*/email"), Some(json!(["a@x.io", "b@x.io"])));
        assert_eq!(get("/a~1b"), Some(json!(1)));
        assert_eq!(get(""), Some(doc.clone()));
        assert_eq!(get("/nope/*/x"), None);
        assert_eq!(get("/payload/headers/[name=Cc]/value"), None);
    }

    #[test]
    fn selector_values_are_templates() {
        let doc = json!({"messages": [{"ts": "1.1", "text": "a"}, {"ts": "2.2", "text": "b"}]});
        let params = json!({});
        let vars = Vars {
            base: None,
            id: Some("2.2"),
            params: &params,
            result: &params,
        };
        let p = Pointer::parse("/messages/[ts={id}]/text").unwrap();
        assert_eq!(p.lookup(&doc, Some(&vars)), Some(json!("b")));
    }

    #[test]
    fn rejects_bad_pointers() {
        for bad in ["a", "/[x]", "/[=1]", "/[a={]"] {
            assert!(Pointer::parse(bad).is_err(), "{bad}");
        }
    }
}

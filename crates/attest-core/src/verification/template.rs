//! Templates in recipes: `{base}/users/me/messages/{id}?q={channel}`.
//!
//! A placeholder names one value:
//! - `{base}`: the system's base URL (never encoded);
//! - `{id}`: the id the recipe takes from the result or the params;
//! - `{name}` or `{a.b}`: a param, by top-level key or dotted path;
//! - `{result.name}`: a field of the tool's result, by dotted path.
//!
//! Filters follow a `|`: `{properties|keys}` joins an object's keys with commas;
//! `{calendarId|or:primary}` gives a default when the value is missing.

use std::fmt;

use serde_json::Value;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    parts: Vec<Part>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var(Var),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Var {
    name: Name,
    filter: Option<Filter>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    Base,
    Id,
    Param(Vec<String>),
    Result(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Filter {
    Keys,
    Or(String),
}

/// One segment of a read URL's path: literal text, or a param's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathPart {
    /// Text the path must hold.
    Literal(String),
    /// A param taken from the path.
    Param(String),
}

/// What placeholders are filled from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Vars<'a> {
    pub(crate) base: Option<&'a str>,
    pub(crate) id: Option<&'a str>,
    pub(crate) params: &'a Value,
    pub(crate) result: &'a Value,
}

/// How values are written into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Percent-encoded as a URL path segment or query value.
    Url,
    /// As they are (headers, GraphQL variables).
    Plain,
}

impl Template {
    /// Parses `text`; the error says what is wrong with which placeholder.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let after = &rest[open + 1..];
            let close = after
                .find('}')
                .ok_or_else(|| format!("unclosed `{{` in template {text:?}"))?;
            let inner = &after[..close];
            if inner.contains('{') {
                return Err(format!("nested `{{` in template {text:?}"));
            }
            parts.push(Part::Var(parse_var(inner)?));
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("`}}` without `{{` in template {text:?}"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(Template {
            parts,
            text: text.to_owned(),
        })
    }

    /// The template as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the template uses `{id}`.
    pub(crate) fn uses_id(&self) -> bool {
        self.vars().any(|var| var.name == Name::Id)
    }

    /// The path after `{base}` as segments, each a literal or a placeholder's name
    /// (`{id}` is named `id_name`): `{base}/repos/{owner}/{repo}/issues/{id}` gives
    /// `repos`, `{owner}`, `{repo}`, `issues`, `{issue_number}`. `None` when the template
    /// does not start with `{base}/`, has a query, or a segment mixes text and a
    /// placeholder or uses a filter.
    pub(crate) fn path_pattern(&self, id_name: Option<&str>) -> Option<Vec<PathPart>> {
        let (first, rest) = self.parts.split_first()?;
        if !matches!(
            first,
            Part::Var(Var {
                name: Name::Base,
                ..
            })
        ) {
            return None;
        }
        let mut segments = Vec::new();
        let mut open = false;
        for part in rest {
            match part {
                Part::Literal(text) => {
                    let tail = text.strip_prefix('/')?;
                    if tail.contains(['?', '#']) {
                        return None;
                    }
                    segments.extend(
                        tail.split('/')
                            .filter(|piece| !piece.is_empty())
                            .map(|piece| PathPart::Literal(piece.to_owned())),
                    );
                    open = text.ends_with('/');
                }
                Part::Var(var) => {
                    if !open || var.filter.is_some() {
                        return None;
                    }
                    let name = match &var.name {
                        Name::Id => id_name?.to_owned(),
                        Name::Param(path) if path.len() == 1 => path[0].clone(),
                        _ => return None,
                    };
                    segments.push(PathPart::Param(name));
                    open = false;
                }
            }
        }
        (!segments.is_empty()).then_some(segments)
    }

    /// Whether the template uses `{base}`.
    pub(crate) fn uses_base(&self) -> bool {
        self.vars().any(|var| var.name == Name::Base)
    }

    fn vars(&self) -> impl Iterator<Item = &Var> {
        self.parts.iter().filter_map(|part| match part {
            Part::Var(var) => Some(var),
            Part::Literal(_) => None,
        })
    }

    /// Whether every placeholder other than `{base}` has a value.
    pub(crate) fn resolvable(&self, vars: &Vars<'_>) -> bool {
        self.vars()
            .filter(|var| var.name != Name::Base)
            .all(|var| var.value(vars).is_some())
    }

    /// Fills the placeholders; `Err` names the first one without a value.
    pub(crate) fn render(&self, vars: &Vars<'_>, encoding: Encoding) -> Result<String, String> {
        let mut out = String::with_capacity(self.text.len() + 32);
        for part in &self.parts {
            match part {
                Part::Literal(text) => out.push_str(text),
                Part::Var(var) => {
                    let value = var.value(vars).ok_or_else(|| var.to_string())?;
                    if var.name == Name::Base || encoding == Encoding::Plain {
                        out.push_str(&value);
                    } else {
                        percent_encode(&value, &mut out);
                    }
                }
            }
        }
        Ok(out)
    }

    /// When the template is exactly one placeholder, its value with its JSON type kept
    /// (for GraphQL variables); otherwise the rendered string.
    pub(crate) fn render_value(&self, vars: &Vars<'_>) -> Result<Value, String> {
        if let [Part::Var(var)] = self.parts.as_slice() {
            if var.filter.is_none() {
                if let Some(value) = var.raw(vars) {
                    return Ok(value.clone());
                }
            }
        }
        self.render(vars, Encoding::Plain).map(Value::String)
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Name::Base => f.write_str("{base}"),
            Name::Id => f.write_str("{id}"),
            Name::Param(path) => write!(f, "{{{}}}", path.join(".")),
            Name::Result(path) => write!(f, "{{result.{}}}", path.join(".")),
        }
    }
}

impl Var {
    fn raw<'v>(&self, vars: &Vars<'v>) -> Option<&'v Value> {
        match &self.name {
            Name::Base | Name::Id => None,
            Name::Param(path) => dotted(vars.params, path),
            Name::Result(path) => dotted(vars.result, path),
        }
    }

    fn value(&self, vars: &Vars<'_>) -> Option<String> {
        let found = match &self.name {
            Name::Base => vars.base.map(str::to_owned),
            Name::Id => vars.id.map(str::to_owned),
            Name::Param(_) | Name::Result(_) => {
                let raw = self.raw(vars);
                match (&self.filter, raw) {
                    (Some(Filter::Keys), Some(Value::Object(map))) if !map.is_empty() => {
                        Some(map.keys().cloned().collect::<Vec<_>>().join(","))
                    }
                    (Some(Filter::Keys), _) => None,
                    (_, Some(value)) => scalar_text(value),
                    (_, None) => None,
                }
            }
        };
        match (found, &self.filter) {
            (Some(text), _) if !text.is_empty() => Some(text),
            (_, Some(Filter::Or(default))) => Some(default.clone()),
            _ => None,
        }
    }
}

/// A value as text for a template: strings as they are, numbers and booleans
/// written out, a list of those joined with commas; objects and null have none.
pub(crate) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(items) => {
            let texts: Option<Vec<String>> = items.iter().map(scalar_text).collect();
            texts.filter(|t| !t.is_empty()).map(|t| t.join(","))
        }
        Value::Null | Value::Object(_) => None,
    }
}

fn dotted<'v>(root: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(root, |value, key| match value {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

fn parse_var(inner: &str) -> Result<Var, String> {
    let (name, filter) = match inner.split_once('|') {
        Some((name, filter)) => (name.trim(), Some(parse_filter(filter.trim())?)),
        None => (inner.trim(), None),
    };
    if name.is_empty() {
        return Err("empty placeholder `{}`".to_owned());
    }
    let path = |text: &str| -> Result<Vec<String>, String> {
        let keys: Vec<String> = text.split('.').map(str::to_owned).collect();
        if keys.iter().any(|k| k.is_empty()) {
            return Err(format!("placeholder {{{inner}}} has an empty path segment"));
        }
        Ok(keys)
    };
    let name = match name {
        "base" => Name::Base,
        "id" => Name::Id,
        _ => match name.strip_prefix("result.") {
            Some(rest) => Name::Result(path(rest)?),
            None => Name::Param(path(name)?),
        },
    };
    if matches!(name, Name::Base | Name::Id) && filter.is_some() {
        return Err(format!("{{{inner}}}: `base` and `id` take no filter"));
    }
    Ok(Var { name, filter })
}

fn parse_filter(text: &str) -> Result<Filter, String> {
    if text == "keys" {
        return Ok(Filter::Keys);
    }
    match text.strip_prefix("or:") {
        Some(default) if !default.is_empty() => Ok(Filter::Or(default.to_owned())),
        _ => Err(format!(
            "unknown filter `{text}` (expected `keys` or `or:DEFAULT`)"
        )),
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub(crate) fn percent_encode(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn renders_params_result_id_and_filters() {
        let params = json!({"channel": "C 1", "props": {"a": 1, "b": 2}, "n": {"k": 5}});
        let result = json!({"ts": "1.2"});
        let vars = Vars {
            base: Some("http://h/api"),
            id: Some("x/y"),
            params: &params,
            result: &result,
        };
        let t = Template::parse(
            "{base}/m/{id}?c={channel}&ts={result.ts}&p={props|keys}&k={n.k}&cal={cal|or:primary}",
        )
        .unwrap();
        assert_eq!(
            t.render(&vars, Encoding::Url).unwrap(),
            "http://h/api/m/x%2Fy?c=C%201&ts=1.2&p=a%2Cb&k=5&cal=primary"
        );
        assert!(t.uses_id() && t.uses_base() && t.resolvable(&vars));
        let missing = Template::parse("{base}/{nope}").unwrap();
        assert!(!missing.resolvable(&vars));
        assert_eq!(missing.render(&vars, Encoding::Url).unwrap_err(), "{nope}");
        let typed = Template::parse("{n.k}").unwrap();
        assert_eq!(typed.render_value(&vars).unwrap(), json!(5));
    }

    #[test]
    fn rejects_bad_templates() {
        for bad in ["{", "a}", "{}", "{a|nope}", "{id|keys}", "{a..b}", "{a{b}}"] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }
}

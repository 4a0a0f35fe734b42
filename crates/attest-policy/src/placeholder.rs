//! Rule R3's detector: template slots an agent forgot to fill (`[Client name]`,
//! `{{first_name}}`, `<COMPANY NAME>`).

use std::fmt::Write as _;

use serde_json::Value;

/// How deep into params strings are scanned; deeper values are ignored.
const MAX_DEPTH: usize = 32;

/// Longest placeholder recognised, in bytes, delimiters included.
const MAX_LEN: usize = 64;

/// Upper-case HTML tags, which look like `<UPPER CASE>` but are markup.
const HTML_TAGS: &[&str] = &[
    "A", "B", "I", "U", "P", "BR", "HR", "EM", "LI", "UL", "OL", "TD", "TR", "TH", "DIV", "PRE",
    "SPAN", "BODY", "HEAD", "HTML", "TABLE", "STRONG", "CENTER",
];

/// An unfilled placeholder: where it is and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placeholder<'a> {
    /// A JSON pointer to the string that holds it (`/body`, `/items/0/text`; empty
    /// when the params are the string itself).
    pub(crate) path: String,
    /// The placeholder as written.
    pub(crate) text: &'a str,
}

/// The first placeholder in any string of `params` (depth-first, in key order).
pub(crate) fn find_placeholder(params: &Value) -> Option<Placeholder<'_>> {
    find_in(params, &Path::Root, 0)
}

/// A JSON pointer built on the stack while walking; turned into a `String` only
/// when a placeholder is found.
enum Path<'p> {
    Root,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    fn render(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Key(parent, key) => {
                parent.render(out);
                out.push('/');
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Path::Index(parent, index) => {
                parent.render(out);
                let _ = write!(out, "/{index}");
            }
        }
    }
}

fn find_in<'a>(value: &'a Value, path: &Path<'_>, depth: usize) -> Option<Placeholder<'a>> {
    if depth > MAX_DEPTH {
        return None;
    }
    match value {
        Value::String(text) => scan(text).map(|found| {
            let mut rendered = String::new();
            path.render(&mut rendered);
            Placeholder {
                path: rendered,
                text: found,
            }
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| find_in(item, &Path::Index(path, i), depth + 1)),
        Value::Object(map) => map
            .iter()
            .find_map(|(key, item)| find_in(item, &Path::Key(path, key), depth + 1)),
        _ => None,
    }
}

/// The first placeholder in `text`, if any.
pub(crate) fn scan(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    for at in memchr::memchr3_iter(b'{', b'[', b'<', bytes) {
        let found = match bytes[at] {
            b'{' => curly(bytes, at),
            b'[' => square(bytes, at),
            _ => angle(bytes, at),
        };
        if let Some(end) = found {
            // All delimiters are ASCII, so `at` and `end` are character boundaries.
            return text.get(at..end);
        }
    }
    None
}

/// The end (exclusive) of a placeholder opened by `open` at `at` and closed by the
/// first `close` within [`MAX_LEN`] bytes, or `None`.
fn closing(bytes: &[u8], from: usize, close: &[u8], forbidden: &[u8]) -> Option<usize> {
    let limit = bytes.len().min(from + MAX_LEN);
    let mut i = from;
    while i + close.len() <= limit {
        if bytes[i..].starts_with(close) {
            return Some(i);
        }
        if forbidden.contains(&bytes[i]) {
            return None;
        }
        i += 1;
    }
    None
}

/// `{{name}}`, but not `${{ expression }}` (CI templates) or `{{}}`.
fn curly(bytes: &[u8], at: usize) -> Option<usize> {
    if !bytes[at..].starts_with(b"{{") || (at > 0 && bytes[at - 1] == b'$') {
        return None;
    }
    let inner_start = at + 2;
    let close = closing(bytes, inner_start, b"}}", b"{\n")?;
    let inner = &bytes[inner_start..close];
    inner
        .iter()
        .any(|&b| b.is_ascii_alphanumeric() || b >= 0x80)
        .then_some(close + 2)
}

/// `[Client name]`, but not `items[idx]` (indexing), `[1]` (a citation), `[x]` (a
/// checkbox) or `[text](url)` (a Markdown link).
fn square(bytes: &[u8], at: usize) -> Option<usize> {
    if at > 0 {
        let before = bytes[at - 1];
        if before.is_ascii_alphanumeric() || matches!(before, b'_' | b']' | b')' | b'[') {
            return None;
        }
    }
    let close = closing(bytes, at + 1, b"]", b"[\n")?;
    let inner = &bytes[at + 1..close];
    let letters = inner.iter().filter(|b| b.is_ascii_alphabetic()).count();
    if letters < 2 || bytes.get(close + 1) == Some(&b'(') {
        return None;
    }
    Some(close + 1)
}

/// `<FIRST NAME>` or `<COMPANY_NAME>`: upper-case letters, digits, spaces, `_` and
/// `-`, starting with a letter, and not an HTML tag.
fn angle(bytes: &[u8], at: usize) -> Option<usize> {
    let close = closing(bytes, at + 1, b">", b"<\n")?;
    let inner = &bytes[at + 1..close];
    let first = *inner.first()?;
    let letters = inner.iter().filter(|b| b.is_ascii_uppercase()).count();
    let shape = first.is_ascii_uppercase()
        && inner.iter().all(|&b| {
            b.is_ascii_uppercase() || b.is_ascii_digit() || matches!(b, b' ' | b'_' | b'-')
        });
    if !shape || letters < 2 {
        return None;
    }
    let word = std::str::from_utf8(inner).ok()?;
    if HTML_TAGS.contains(&word) {
        return None;
    }
    Some(close + 1)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_each_kind() {
        assert_eq!(scan("Dear [Client Name],"), Some("[Client Name]"));
        assert_eq!(scan("Hi {{first_name}}!"), Some("{{first_name}}"));
        assert_eq!(scan("Hi {{ name }}!"), Some("{{ name }}"));
        assert_eq!(scan("From <COMPANY NAME> team"), Some("<COMPANY NAME>"));
        assert_eq!(scan("ref <TICKET_ID>"), Some("<TICKET_ID>"));
        assert_eq!(scan("([insert date])"), Some("[insert date]"));
    }

    #[test]
    fn leaves_ordinary_text_alone() {
        for text in [
            "Hello Bob, see you at 10.",
            "items[idx] = 1",
            "see [1] and [2]",
            "- [x] done",
            "read [the docs](https://x.io)",
            "run: ${{ secrets.TOKEN }}",
            "<b>bold</b> and <BR> and <DIV>",
            "a < b and c > d",
            "email <bob@x.io>",
            "{{}} and {{ }}",
            "unclosed [Client name",
            "<Mixed Case>",
            "",
        ] {
            assert_eq!(scan(text), None, "{text}");
        }
    }

    #[test]
    fn reports_the_path_of_the_first_hit() {
        let params = json!({"to": "a@x.io", "items": [{"text": "ok"}, {"text": "Dear [Name]"}]});
        let found = find_placeholder(&params).unwrap();
        assert_eq!(found.path, "/items/1/text");
        assert_eq!(found.text, "[Name]");
        let escaped = json!({"a/b": {"c~d": "{{x}}"}});
        assert_eq!(find_placeholder(&escaped).unwrap().path, "/a~1b/c~0d");
        assert_eq!(find_placeholder(&json!("{{x}}")).unwrap().path, "");
        assert!(find_placeholder(&json!({"n": 1, "b": true})).is_none());
    }

    #[test]
    fn multibyte_text_is_safe() {
        assert_eq!(scan("é[Nom du client]è"), Some("[Nom du client]"));
        assert_eq!(scan("日本語 {{名前}}"), Some("{{名前}}"));
        assert_eq!(scan("日本語 {{name}}"), Some("{{name}}"));
    }
}

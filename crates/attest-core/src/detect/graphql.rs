//! GraphQL: the verb and target of `POST …/graphql` come from the operation in the body.
//!
//! Only as much of the document is read as it takes to find the operation's kind and its
//! first field: `mutation { issueCreate(…) { … } }` is create/issue, `query { issues { … } }`
//! is list/issues. The reader is a small hand-written scanner with a size cap; it skips
//! strings, comments, arguments and fragments, and gives up (`None`) on anything odd.

use serde::Deserialize;

use super::registry::Registry;
use super::tokenize::{Segments, Words, MAX_WORDS};
use super::tool_name::{apply_noun_rules, join_words, MAX_TARGET_WORDS};
use attest_policy::Verb;

/// Largest body read for an operation, in bytes.
pub(crate) const MAX_BODY_BYTES: usize = 256 * 1024;

/// How far into a body to look for a `"query"` key when the path does not say GraphQL.
const SNIFF_BYTES: usize = 256;

/// The kind of a GraphQL operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Query,
    Mutation,
    Subscription,
}

/// The part of an operation detection uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    pub(crate) kind: Kind,
    /// The first field selected (`issueCreate`).
    pub(crate) field: String,
}

/// A field read as system-free detection: verb, target, and whether a verb word was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldDetection {
    pub(crate) verb: Verb,
    pub(crate) target: Option<String>,
    pub(crate) recognised: bool,
}

#[derive(Deserialize)]
struct Request {
    query: Option<String>,
    #[serde(rename = "operationName")]
    operation_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Body {
    One(Request),
    Batch(Vec<Request>),
}

/// True when a JSON body near its start has a `"query"` key (a GraphQL request sent to a
/// path that does not say so, as monday.com's `/v2` is).
pub(crate) fn looks_like_graphql(body: &[u8]) -> bool {
    let head = body.get(..SNIFF_BYTES.min(body.len())).unwrap_or(&[]);
    let starts_json = head
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{' || b == b'[');
    starts_json && head.windows(7).any(|w| w == b"\"query\"")
}

/// The operation in a request body: JSON (`{"query": …, "operationName": …}`, or a batch,
/// whose first request counts) or a bare GraphQL document.
pub(crate) fn operation_from_body(body: &[u8]) -> Option<Operation> {
    if body.len() > MAX_BODY_BYTES {
        return None;
    }
    match serde_json::from_slice::<Body>(body) {
        Ok(Body::One(request)) => from_request(&request),
        Ok(Body::Batch(requests)) => requests.first().and_then(from_request),
        Err(_) => std::str::from_utf8(body)
            .ok()
            .and_then(|doc| first_operation(doc, None)),
    }
}

/// The operation in a GET request's `query=` parameter.
pub(crate) fn operation_from_query(query: &str) -> Option<Operation> {
    let (mut document, mut name) = (None, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("query", value)) => document = Some(percent_decode(value)),
            Some(("operationName", value)) => name = Some(percent_decode(value)),
            _ => {}
        }
    }
    first_operation(&document?, name.as_deref())
}

fn from_request(request: &Request) -> Option<Operation> {
    first_operation(request.query.as_deref()?, request.operation_name.as_deref())
}

/// Verb and target from an operation's first field.
pub(crate) fn detect_field(registry: &Registry, operation: &Operation) -> FieldDetection {
    let words = Words::new(&operation.field, Segments::Dotted);
    let n = words.len().min(MAX_WORDS);
    let verb_of = |i: usize| {
        registry
            .verbs
            .get(words.word(i))
            .copied()
            .filter(|v| operation.kind == Kind::Mutation || v.is_read())
    };
    // Fields are named verb-first (`createIssue`) or verb-last (`issueCreate`). When both
    // ends are verb words (`refundCreate`), a verb's own name beats an alias.
    let first = (0..n).find(|&i| verb_of(i).is_some());
    let last = (0..n).rev().find(|&i| verb_of(i).is_some());
    let verb_at = match (first, last) {
        (Some(f), Some(l)) if f != l && f == 0 && l == n - 1 => {
            let canonical = |i: usize| verb_of(i).is_some_and(|v| v.as_str() == words.word(i));
            if canonical(l) && !canonical(f) {
                Some(l)
            } else {
                Some(f)
            }
        }
        (Some(f), Some(l)) if f != 0 && l == n - 1 => Some(l),
        (f, _) => f,
    };
    let verb = verb_at.and_then(verb_of);
    let mut target = [0usize; MAX_TARGET_WORDS];
    let mut len = 0;
    for i in (0..n).filter(|&i| Some(i) != verb_at && !registry.is_filler(words.word(i))) {
        if let Some(slot) = target.get_mut(len) {
            *slot = i;
            len += 1;
        }
    }
    let target = target.get(..len).unwrap_or(&[]);
    let verb = match (operation.kind, verb) {
        (_, Some(v)) => Some(apply_noun_rules(
            registry,
            v,
            verb_at.map_or("", |i| words.word(i)),
            &words,
            target,
        )),
        (Kind::Mutation, None) => None,
        (Kind::Query | Kind::Subscription, None) => {
            let last = target.last().map_or("", |&i| words.word(i));
            Some(
                if last.len() > 2 && last.ends_with('s') && !last.ends_with("ss") {
                    Verb::List
                } else {
                    Verb::Get
                },
            )
        }
    };
    FieldDetection {
        verb: verb.unwrap_or(Verb::Write),
        target: join_words(&words, target),
        recognised: verb.is_some(),
    }
}

/// Finds the operation named `wanted` (or the first operation) and its first field.
pub(crate) fn first_operation(document: &str, wanted: Option<&str>) -> Option<Operation> {
    if document.len() > MAX_BODY_BYTES {
        return None;
    }
    let mut scan = Scanner {
        bytes: document.as_bytes(),
        at: 0,
    };
    let mut first: Option<Operation> = None;
    loop {
        let token = scan.next_token()?;
        let (kind, name) = match token {
            Token::Punct(b'{') => (Kind::Query, None),
            Token::Name("query") => (Kind::Query, scan.operation_header()?),
            Token::Name("mutation") => (Kind::Mutation, scan.operation_header()?),
            Token::Name("subscription") => (Kind::Subscription, scan.operation_header()?),
            Token::Name("fragment") => {
                scan.skip_to_open_brace()?;
                scan.skip_block()?;
                continue;
            }
            Token::End => return first,
            _ => return first,
        };
        let field = scan.first_field()?;
        let operation = Operation {
            kind,
            field: field.to_owned(),
        };
        match wanted {
            None => return Some(operation),
            Some(wanted) if name == Some(wanted) => return Some(operation),
            Some(_) => {
                if first.is_none() {
                    first = Some(operation);
                }
                scan.skip_rest_of_block()?;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Name(&'a str),
    Punct(u8),
    Spread,
    End,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips whitespace, commas, comments and strings.
    fn skip_ignored(&mut self) -> Option<()> {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | b',' => self.at += 1,
                0xEF if self.bytes.get(self.at..self.at + 3) == Some(&[0xEF, 0xBB, 0xBF]) => {
                    self.at += 3;
                }
                b'#' => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.at += 1;
                    }
                }
                b'"' => self.skip_string()?,
                _ => break,
            }
        }
        Some(())
    }

    fn skip_string(&mut self) -> Option<()> {
        if self.bytes.get(self.at..self.at + 3) == Some(b"\"\"\"") {
            self.at += 3;
            while self.at < self.bytes.len() {
                if self.bytes.get(self.at..self.at + 3) == Some(b"\"\"\"") {
                    self.at += 3;
                    return Some(());
                }
                self.at += if self.peek() == Some(b'\\') { 2 } else { 1 };
            }
            return None;
        }
        self.at += 1;
        while let Some(b) = self.peek() {
            self.at += 1;
            match b {
                b'\\' => self.at += 1,
                b'"' => return Some(()),
                b'\n' => return None,
                _ => {}
            }
        }
        None
    }

    fn next_token(&mut self) -> Option<Token<'a>> {
        self.skip_ignored()?;
        let Some(b) = self.peek() else {
            return Some(Token::End);
        };
        if b == b'_' || b.is_ascii_alphabetic() {
            let start = self.at;
            while self
                .peek()
                .is_some_and(|b| b == b'_' || b.is_ascii_alphanumeric())
            {
                self.at += 1;
            }
            let name = std::str::from_utf8(self.bytes.get(start..self.at)?).ok()?;
            return Some(Token::Name(name));
        }
        if self.bytes.get(self.at..self.at + 3) == Some(b"...") {
            self.at += 3;
            return Some(Token::Spread);
        }
        self.at += 1;
        Some(Token::Punct(b))
    }

    /// After `query`/`mutation`/`subscription`: the optional name, variables and
    /// directives, up to and including the `{`.
    fn operation_header(&mut self) -> Option<Option<&'a str>> {
        let mut name = None;
        loop {
            match self.next_token()? {
                Token::Punct(b'{') => return Some(name),
                Token::Name(n) if name.is_none() => name = Some(n),
                Token::Punct(b'(') => self.skip_balanced(b'(', b')')?,
                Token::Punct(b'@') | Token::Name(_) => {}
                _ => return None,
            }
        }
    }

    /// Inside a selection set: the first field's name (after an alias, skipping spreads and `__typename`).
    fn first_field(&mut self) -> Option<&'a str> {
        loop {
            match self.next_token()? {
                Token::Name("__typename") => {}
                Token::Name(name) => {
                    let save = self.at;
                    if self.next_token()? == Token::Punct(b':') {
                        if let Token::Name(field) = self.next_token()? {
                            return Some(field);
                        }
                        return None;
                    }
                    self.at = save;
                    return Some(name);
                }
                Token::Spread => {
                    // `...Fragment` or `... on Type { … }`: skip it.
                    if let Token::Name("on") = self.next_token()? {
                        self.skip_to_open_brace()?;
                        self.skip_block()?;
                    }
                }
                _ => return None,
            }
        }
    }

    fn skip_to_open_brace(&mut self) -> Option<()> {
        loop {
            match self.next_token()? {
                Token::Punct(b'{') => return Some(()),
                Token::End => return None,
                _ => {}
            }
        }
    }

    /// Skips to the `}` that closes a block whose `{` was just read.
    fn skip_block(&mut self) -> Option<()> {
        self.skip_balanced(b'{', b'}')
    }

    /// Skips the rest of the operation whose first field was just read.
    fn skip_rest_of_block(&mut self) -> Option<()> {
        self.skip_block()
    }

    fn skip_balanced(&mut self, open: u8, close: u8) -> Option<()> {
        let mut depth = 1usize;
        loop {
            match self.next_token()? {
                Token::Punct(b) if b == open => depth += 1,
                Token::Punct(b) if b == close => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
                Token::End => return None,
                _ => {}
            }
        }
    }
}

/// Decodes `%XX` and `+` in a query value; bad escapes are kept as they are.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|&c| (c as char).to_digit(16));
        match b {
            b'%' => match (hex(i + 1), hex(i + 2)) {
                (Some(hi), Some(lo)) => {
                    out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                    i += 3;
                    continue;
                }
                _ => out.push(b),
            },
            b'+' => out.push(b' '),
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(doc: &str) -> Option<(Kind, String)> {
        first_operation(doc, None).map(|o| (o.kind, o.field))
    }

    #[test]
    fn finds_the_first_field_of_each_kind() {
        assert_eq!(
            op("mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success } }"),
            Some((Kind::Mutation, "issueCreate".to_owned()))
        );
        assert_eq!(
            op("{ viewer { login } }"),
            Some((Kind::Query, "viewer".to_owned()))
        );
        assert_eq!(
            op("# comment\nquery { me: viewer { id } }"),
            Some((Kind::Query, "viewer".to_owned()))
        );
        assert_eq!(
            op("fragment F on Issue { id }\nquery Q { ...F issues(filter: {title: \"a}\"}) { nodes { id } } }"),
            Some((Kind::Query, "issues".to_owned()))
        );
        assert_eq!(
            op("subscription { onEvent { id } }").map(|o| o.0),
            Some(Kind::Subscription)
        );
        assert_eq!(op(""), None);
        assert_eq!(op("mutation {"), None);
        assert_eq!(op("\"unterminated"), None);
    }

    #[test]
    fn the_named_operation_is_chosen() {
        let doc = "query A { issues { id } } mutation B { issueDelete(id: \"1\") { success } }";
        let found = first_operation(doc, Some("B")).unwrap();
        assert_eq!(
            (found.kind, found.field.as_str()),
            (Kind::Mutation, "issueDelete")
        );
        let found = first_operation(doc, Some("Missing")).unwrap();
        assert_eq!(found.field, "issues");
    }

    #[test]
    fn bodies_in_json_batches_and_raw() {
        let body = br#"{"query":"mutation { createIssue(input: {}) { issue { id } } }","variables":{"a":[1,2]}}"#;
        assert_eq!(operation_from_body(body).unwrap().field, "createIssue");
        let batch = br#"[{"query":"{ viewer { id } }"}]"#;
        assert_eq!(operation_from_body(batch).unwrap().field, "viewer");
        assert_eq!(
            operation_from_body(b"{ items { id } }").unwrap().field,
            "items"
        );
        assert!(operation_from_body(b"\xff\xfe").is_none());
        assert!(looks_like_graphql(br#"  {"query": "{ boards { id } }"}"#));
        assert!(!looks_like_graphql(br#"{"name": "x"}"#));
    }

    #[test]
    fn query_strings_are_decoded() {
        let found = operation_from_query("query=%7B%20viewer%20%7B%20id%20%7D%20%7D&x=1").unwrap();
        assert_eq!(found.field, "viewer");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%ff"), "\u{fffd}");
    }
}

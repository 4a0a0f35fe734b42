//! GraphQL: the verb and target of `POST …/graphql` come from the operations in the body.
//!
//! Every root field of every operation counts, in every request of a batch, and the riskiest
//! wins: `mutation { addStar deleteRepository }` is a delete, and so is a batch whose second
//! request deletes. The operation name is not trusted to pick one: whatever a server might
//! run is judged. Fields reached through fragment spreads at the root (`mutation { ...F }`)
//! count too. `mutation { issueCreate(…) { … } }` is create/issue, `query { issues { … } }`
//! is list/issues. The reader is a small hand-written scanner with size caps; it skips
//! strings, comments, arguments and sub-selections, and gives up (`None`) on anything odd;
//! a document it gives up on makes the call the riskiest verb (see `url.rs`).

use std::collections::HashMap;

use super::registry::Registry;
use super::tokenize::{Segments, Words, MAX_WORDS};
use super::tool_name::{apply_noun_rules, join_words, MAX_TARGET_WORDS};
use attest_policy::{Risk, Verb};

/// Largest body read for an operation, in bytes.
pub(crate) const MAX_BODY_BYTES: usize = 256 * 1024;

/// The kind of a GraphQL operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Query,
    Mutation,
    Subscription,
}

/// One root field of an operation: what detection reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    pub(crate) kind: Kind,
    /// The field selected at the root (`issueCreate`).
    pub(crate) field: String,
}

/// Most root fields read from one request; a request with more is not read (the riskiest verb).
pub(crate) const MAX_ROOT_FIELDS: usize = 256;

/// How deep fragment spreads at the root are followed.
const MAX_SPREAD_DEPTH: usize = 8;

/// A field read as system-free detection: verb, target, and whether a verb word was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldDetection {
    pub(crate) verb: Verb,
    pub(crate) target: Option<String>,
    pub(crate) recognised: bool,
}

/// True when `document` reads as GraphQL to a server: after ignored tokens it opens with a
/// selection set or an operation or fragment keyword. A `query` value that does not (`cats`,
/// `select 1`) is a search, not a document; one that does but cannot be read is a document
/// the scanner gave up on.
pub(crate) fn looks_like_document(document: &str) -> bool {
    let mut scan = Scanner {
        bytes: document.as_bytes(),
        at: 0,
    };
    matches!(
        scan.next_token(),
        Some(Token::Punct(b'{'))
            | Some(Token::Name(
                "query" | "mutation" | "subscription" | "fragment"
            ))
    ) || document.contains('{') && document.contains("mutation")
}

impl FieldDetection {
    /// The riskier of two fields' readings: the higher tier (a field without a verb word
    /// counts as high), then the one without a verb word; `self` on a tie.
    pub(crate) fn riskier(self, other: FieldDetection) -> FieldDetection {
        let danger = |found: &FieldDetection| {
            let risk = found.verb.default_risk();
            let risk = if found.recognised {
                risk
            } else {
                risk.max(Risk::High)
            };
            (risk, !found.recognised)
        };
        if danger(&other) > danger(&self) {
            other
        } else {
            self
        }
    }
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

/// An entry of a selection set at the root: a field, or a spread of a named fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item<'a> {
    Field(&'a str),
    Spread(&'a str),
}

/// Every root field of every operation in `document`, with root fragment spreads followed.
pub(crate) fn root_fields(document: &str) -> Option<Vec<Operation>> {
    if document.len() > MAX_BODY_BYTES {
        return None;
    }
    let mut scan = Scanner {
        bytes: document.as_bytes(),
        at: 0,
    };
    let mut operations: Vec<(Kind, Vec<Item<'_>>)> = Vec::new();
    let mut fragments: HashMap<&str, Vec<Item<'_>>> = HashMap::new();
    loop {
        let kind = match scan.next_token()? {
            Token::Punct(b'{') => Kind::Query,
            Token::Name("query") => {
                scan.operation_header()?;
                Kind::Query
            }
            Token::Name("mutation") => {
                scan.operation_header()?;
                Kind::Mutation
            }
            Token::Name("subscription") => {
                scan.operation_header()?;
                Kind::Subscription
            }
            Token::Name("fragment") => {
                let Token::Name(name) = scan.next_token()? else {
                    return None;
                };
                scan.skip_to_open_brace()?;
                let mut items = Vec::new();
                scan.selection_set(&mut items)?;
                fragments.insert(name, items);
                continue;
            }
            Token::End => break,
            _ => return None,
        };
        let mut items = Vec::new();
        scan.selection_set(&mut items)?;
        operations.push((kind, items));
    }
    let mut found = Vec::new();
    for (kind, items) in &operations {
        expand(*kind, items, &fragments, 0, &mut found)?;
    }
    Some(found)
}

/// Adds the fields of `items` (following spreads) to `out`; `None` past the caps.
fn expand(
    kind: Kind,
    items: &[Item<'_>],
    fragments: &HashMap<&str, Vec<Item<'_>>>,
    depth: usize,
    out: &mut Vec<Operation>,
) -> Option<()> {
    if depth > MAX_SPREAD_DEPTH {
        return None;
    }
    for item in items {
        match *item {
            Item::Field(field) => {
                if out.len() >= MAX_ROOT_FIELDS {
                    return None;
                }
                out.push(Operation {
                    kind,
                    field: field.to_owned(),
                });
            }
            Item::Spread(name) => {
                // A spread of a fragment the document does not define is an error the
                // server reports; nothing runs.
                if let Some(inner) = fragments.get(name) {
                    expand(kind, inner, fragments, depth + 1, out)?;
                }
            }
        }
    }
    Some(())
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
    fn operation_header(&mut self) -> Option<()> {
        loop {
            match self.next_token()? {
                Token::Punct(b'{') => return Some(()),
                Token::Punct(b'(') => self.skip_balanced(b'(', b')')?,
                Token::Punct(b'@') | Token::Name(_) => {}
                _ => return None,
            }
        }
    }

    /// Inside a selection set whose `{` was just read: its fields (after an alias) and
    /// fragment spreads, up to the closing `}`. Inline fragments (`... on T { … }`) are
    /// read as part of this set; arguments, directives and sub-selections are skipped.
    fn selection_set(&mut self, out: &mut Vec<Item<'a>>) -> Option<()> {
        loop {
            match self.next_token()? {
                Token::Punct(b'}') => return Some(()),
                Token::Name(name) => {
                    let save = self.at;
                    let field = if self.next_token()? == Token::Punct(b':') {
                        let Token::Name(field) = self.next_token()? else {
                            return None;
                        };
                        field
                    } else {
                        self.at = save;
                        name
                    };
                    if field != "__typename" {
                        out.push(Item::Field(field));
                    }
                    self.skip_field_rest()?;
                }
                Token::Spread => {
                    let save = self.at;
                    match self.next_token()? {
                        Token::Name("on") => {
                            self.skip_to_open_brace()?;
                            self.selection_set(out)?;
                        }
                        Token::Name(fragment) => {
                            out.push(Item::Spread(fragment));
                            self.skip_directives()?;
                        }
                        Token::Punct(b'{' | b'@') => {
                            self.at = save;
                            self.skip_to_open_brace()?;
                            self.selection_set(out)?;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// After a field's name: its arguments, directives and sub-selection, if any.
    fn skip_field_rest(&mut self) -> Option<()> {
        let save = self.at;
        if self.next_token()? == Token::Punct(b'(') {
            self.skip_balanced(b'(', b')')?;
        } else {
            self.at = save;
        }
        self.skip_directives()?;
        let save = self.at;
        if self.next_token()? == Token::Punct(b'{') {
            self.skip_block()?;
        } else {
            self.at = save;
        }
        Some(())
    }

    /// `@name` and `@name(…)`, as many as there are.
    fn skip_directives(&mut self) -> Option<()> {
        loop {
            let save = self.at;
            if self.next_token()? != Token::Punct(b'@') {
                self.at = save;
                return Some(());
            }
            let Token::Name(_) = self.next_token()? else {
                return None;
            };
            let save = self.at;
            if self.next_token()? == Token::Punct(b'(') {
                self.skip_balanced(b'(', b')')?;
            } else {
                self.at = save;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(doc: &str) -> Option<Vec<(Kind, String)>> {
        root_fields(doc).map(|found| found.into_iter().map(|o| (o.kind, o.field)).collect())
    }

    fn one(kind: Kind, field: &str) -> Option<Vec<(Kind, String)>> {
        Some(vec![(kind, field.to_owned())])
    }

    #[test]
    fn finds_the_root_fields_of_each_kind() {
        assert_eq!(
            fields("mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success } }"),
            one(Kind::Mutation, "issueCreate")
        );
        assert_eq!(fields("{ viewer { login } }"), one(Kind::Query, "viewer"));
        assert_eq!(
            fields("# comment\nquery { me: viewer { id } }"),
            one(Kind::Query, "viewer")
        );
        assert_eq!(
            fields("fragment F on Issue { id }\nquery Q { issues(filter: {title: \"a}\"}) { nodes { id } } }"),
            one(Kind::Query, "issues")
        );
        assert_eq!(
            fields("subscription { onEvent { id } }"),
            one(Kind::Subscription, "onEvent")
        );
        assert_eq!(fields(""), Some(vec![]));
        assert_eq!(fields("mutation {"), None);
        assert_eq!(fields("\"unterminated"), None);
    }

    #[test]
    fn every_root_field_of_every_operation_counts() {
        assert_eq!(
            fields("mutation { addStar(input: {}) { clientMutationId } deleteRepository(input: {}) { x } }"),
            Some(vec![
                (Kind::Mutation, "addStar".to_owned()),
                (Kind::Mutation, "deleteRepository".to_owned())
            ])
        );
        let doc = "query A { issues { id } } mutation B { issueDelete(id: \"1\") @skip(if: false) { success } }";
        assert_eq!(fields(doc).unwrap().len(), 2);
        // Fields hidden in fragments and inline fragments at the root are found.
        let doc = "mutation { ...F ... on Mutation { b } ... @include(if: true) { c } } fragment F on Mutation { a ...G } fragment G on Mutation { d }";
        let names: Vec<String> = fields(doc).unwrap().into_iter().map(|f| f.1).collect();
        assert_eq!(names, ["a", "d", "b", "c"]);
        // Fragments that spread each other forever are not followed forever.
        assert_eq!(
            fields("mutation { ...F } fragment F on Mutation { ...F }"),
            None
        );
    }

    #[test]
    fn documents_are_told_from_searches() {
        for document in [
            "{ a }",
            "  # c\n query Q { a }",
            "mutation{",
            "fragment F on X { a }",
        ] {
            assert!(looks_like_document(document), "{document}");
        }
        for search in ["cats", "select * from t", "", "name:\"x\""] {
            assert!(!looks_like_document(search), "{search}");
        }
    }
}

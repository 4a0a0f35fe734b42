//! Case-insensitive `*` patterns, compiled once and matched without allocating.

use std::fmt;

use crate::de::{Key, Word};

/// A pattern where `*` matches any run of characters (including none) and every
/// other character matches itself, ignoring ASCII case.
///
/// Non-ASCII characters match exactly. There is no `?`, no character class and no
/// escape: policy authors who need more write a `params:` regex.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Glob {
    /// The pattern as written, for messages.
    text: Box<str>,
    kind: Kind,
}

#[derive(Clone, PartialEq, Eq)]
enum Kind {
    /// `*`: everything.
    Any,
    /// No `*`: the whole text, ignoring ASCII case.
    Exact(Box<[u8]>),
    /// The literal pieces between stars (lower-cased), and whether the pattern is
    /// anchored at each end (does not start / end with `*`).
    Pieces {
        pieces: Box<[Box<[u8]>]>,
        anchored_start: bool,
        anchored_end: bool,
    },
}

impl Glob {
    /// Compiles `pattern`; an empty pattern is an error because it can only match
    /// an empty string, which is never what its author meant.
    pub(crate) fn new(pattern: &str) -> Result<Glob, String> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err("empty pattern".to_owned());
        }
        let lower = trimmed.to_ascii_lowercase();
        let kind = if lower.bytes().all(|b| b == b'*') {
            Kind::Any
        } else if !lower.contains('*') {
            Kind::Exact(lower.as_bytes().into())
        } else {
            Kind::Pieces {
                pieces: lower
                    .split('*')
                    .filter(|piece| !piece.is_empty())
                    .map(|piece| piece.as_bytes().into())
                    .collect(),
                anchored_start: !lower.starts_with('*'),
                anchored_end: !lower.ends_with('*'),
            }
        };
        Ok(Glob {
            text: trimmed.into(),
            kind,
        })
    }

    /// The pattern as written (trimmed).
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `text` matches the whole pattern.
    pub(crate) fn matches(&self, text: &str) -> bool {
        let text = text.as_bytes();
        match &self.kind {
            Kind::Any => true,
            Kind::Exact(want) => text.eq_ignore_ascii_case(want),
            Kind::Pieces {
                pieces,
                anchored_start,
                anchored_end,
            } => match_pieces(pieces, *anchored_start, *anchored_end, text),
        }
    }
}

impl Word for Glob {
    const EXPECTING: &'static str = "a pattern where * matches anything";

    fn from_word(word: &str) -> Result<Self, String> {
        Glob::new(word)
    }
}

impl Key for Glob {
    fn key_text(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.text)
    }
}

/// Matches literal pieces separated by stars. Greedy leftmost search is exact for
/// `*`-only patterns: if a piece can be placed, placing it as early as possible never
/// prevents the later pieces from being placed.
fn match_pieces(
    pieces: &[Box<[u8]>],
    anchored_start: bool,
    anchored_end: bool,
    text: &[u8],
) -> bool {
    let mut rest = text;
    let mut middle = pieces;
    if anchored_start {
        let Some((first, others)) = middle.split_first() else {
            return rest.is_empty();
        };
        if !starts_with_ignore_case(rest, first) {
            return false;
        }
        rest = &rest[first.len()..];
        middle = others;
    }
    let mut last: Option<&[u8]> = None;
    if anchored_end {
        let Some((final_piece, others)) = middle.split_last() else {
            // Anchored at both ends with one piece and no star between: handled by Exact,
            // but stay correct if it ever happens.
            return rest.is_empty();
        };
        last = Some(final_piece);
        middle = others;
    }
    for piece in middle {
        match find_ignore_case(rest, piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    match last {
        Some(final_piece) => {
            rest.len() >= final_piece.len()
                && rest[rest.len() - final_piece.len()..].eq_ignore_ascii_case(final_piece)
        }
        None => true,
    }
}

fn starts_with_ignore_case(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn find_ignore_case(text: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > text.len() {
        return None;
    }
    (0..=text.len() - needle.len())
        .find(|&at| text[at..at + needle.len()].eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Glob::new(pattern).unwrap().matches(text)
    }

    #[test]
    fn literals_ignore_ascii_case() {
        assert!(m("Gmail", "gmail"));
        assert!(m("gmail", "GMAIL"));
        assert!(!m("gmail", "gmail2"));
        assert!(!m("gmail", "gmai"));
    }

    #[test]
    fn stars_match_any_run() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("g*", "gmail"));
        assert!(m("*mail", "gmail"));
        assert!(m("*ma*", "gmail"));
        assert!(m("g*l", "gl"));
        assert!(!m("g*l", "g"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXcYb"));
        assert!(m("*@ACME.com", "bob@acme.COM"));
        assert!(!m("*@acme.com", "bob@acme.com.evil.io"));
        assert!(m("a**b", "ab"));
        // The last piece must not overlap the middle ones.
        assert!(!m("*ab*ab", "ab"));
        assert!(m("*ab*ab", "abab"));
    }

    #[test]
    fn empty_patterns_are_errors() {
        assert!(Glob::new("").is_err());
        assert!(Glob::new("   ").is_err());
        assert!(matches!(Glob::new("**").unwrap().kind, Kind::Any));
    }

    #[test]
    fn non_ascii_matches_exactly() {
        assert!(m("é*", "école"));
        assert!(!m("É*", "école"));
    }
}

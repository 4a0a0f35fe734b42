//! Splitting a name into lower-case words.
//!
//! `mcp__github__createPullRequest`, `stripe.Transfer.create` and `list-mail-messages`
//! all become plain words. Words end at any ASCII character that is not a letter or a
//! digit and at camelCase humps (`issueCreate` → `issue create`, `HTMLPage` → `html page`).
//! Letters followed by digits stay together (`s3`, `v2`, `oauth2`). Non-ASCII text is kept
//! inside words as it is.

/// Most words kept from one name; later words are ignored.
pub(crate) const MAX_WORDS: usize = 24;

/// Longest prefix of a name that is read, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 512;

/// Which separators start a new segment as well as a new word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Segments {
    /// SDK paths and names: `.`, `/`, `:`, `(` and `)` (`gmail.users().messages().send`).
    Dotted,
    /// URL paths: only `/` (`chat.postMessage` is one segment).
    Slashes,
}

/// The words of a name, lower-cased, each with the segment it came from.
#[derive(Debug)]
pub(crate) struct Words {
    text: String,
    spans: [(u16, u16, u8); MAX_WORDS],
    len: usize,
}

impl Words {
    /// Splits `name` (at most [`MAX_NAME_BYTES`] of it, into at most [`MAX_WORDS`] words).
    pub(crate) fn new(name: &str, segments: Segments) -> Words {
        let original = prefix(name, MAX_NAME_BYTES);
        let text = original.to_ascii_lowercase();
        let bytes = original.as_bytes();
        let mut words = Words {
            text,
            spans: [(0, 0, 0); MAX_WORDS],
            len: 0,
        };
        let mut segment: u8 = 0;
        let mut pending_break = false;
        let mut start: Option<usize> = None;
        for (i, &b) in bytes.iter().enumerate() {
            let in_word = b >= 0x80 || b.is_ascii_alphanumeric();
            if !in_word {
                if let Some(s) = start.take() {
                    words.push(s, i, segment);
                }
                pending_break |= match segments {
                    Segments::Dotted => matches!(b, b'.' | b'/' | b':' | b'(' | b')'),
                    Segments::Slashes => b == b'/',
                };
                continue;
            }
            match start {
                None => {
                    if pending_break && words.len > 0 {
                        segment = segment.saturating_add(1);
                    }
                    pending_break = false;
                    start = Some(i);
                }
                Some(s) if is_hump(bytes, i) => {
                    words.push(s, i, segment);
                    start = Some(i);
                }
                Some(_) => {}
            }
            if words.len == MAX_WORDS {
                start = None;
                break;
            }
        }
        if let Some(s) = start {
            words.push(s, bytes.len(), segment);
        }
        words
    }

    fn push(&mut self, start: usize, end: usize, segment: u8) {
        if let Some(slot) = self.spans.get_mut(self.len) {
            // Both fit: the text is at most MAX_NAME_BYTES long.
            *slot = (
                u16::try_from(start).unwrap_or(u16::MAX),
                u16::try_from(end).unwrap_or(u16::MAX),
                segment,
            );
            self.len += 1;
        }
    }

    /// How many words there are.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Word `i`, or `""` past the end.
    pub(crate) fn word(&self, i: usize) -> &str {
        self.spans
            .get(i)
            .filter(|_| i < self.len)
            .and_then(|&(s, e, _)| self.text.get(usize::from(s)..usize::from(e)))
            .unwrap_or("")
    }

    /// True when word `i + 1` continues word `i`'s name in the same segment, joined by
    /// `_`, `-` or a camelCase hump rather than by `.` (`merge_requests`, not `search.messages`).
    pub(crate) fn joined_to_next(&self, i: usize) -> bool {
        let (Some(&(_, end, seg)), Some(&(start, _, next_seg))) =
            (self.spans.get(i), self.spans.get(i + 1))
        else {
            return false;
        };
        i + 1 < self.len
            && seg == next_seg
            && self
                .text
                .get(usize::from(end)..usize::from(start))
                .is_some_and(|gap| !gap.contains(['.', '/', ':']))
    }

    /// The segment word `i` came from (0 past the end).
    pub(crate) fn segment(&self, i: usize) -> u8 {
        self.spans
            .get(i)
            .filter(|_| i < self.len)
            .map_or(0, |&(_, _, seg)| seg)
    }
}

/// The longest prefix of `text` no longer than `max` bytes that ends on a character boundary.
pub(crate) fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or("")
}

/// A camelCase hump starts at `i`: `aB`, `1B`, or the `P` of `HTMLParser`.
fn is_hump(bytes: &[u8], i: usize) -> bool {
    let (Some(&prev), Some(&cur)) = (bytes.get(i.wrapping_sub(1)), bytes.get(i)) else {
        return false;
    };
    if !cur.is_ascii_uppercase() {
        return false;
    }
    if prev.is_ascii_lowercase() || prev.is_ascii_digit() {
        return true;
    }
    prev.is_ascii_uppercase() && bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase)
}

/// `v1`, `v2`, `v1beta`, `v3beta1`: a version word, which says nothing about the action.
pub(crate) fn is_version(word: &str) -> bool {
    let Some(rest) = word.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let tail = rest.get(digits..).unwrap_or("");
    tail.is_empty()
        || ["alpha", "beta"].iter().any(|t| {
            tail.strip_prefix(t)
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(name: &str) -> Vec<String> {
        let words = Words::new(name, Segments::Dotted);
        (0..words.len()).map(|i| words.word(i).to_owned()).collect()
    }

    #[test]
    fn splits_on_separators_and_humps() {
        assert_eq!(
            split("mcp__github__create_issue"),
            ["mcp", "github", "create", "issue"]
        );
        assert_eq!(split("issueCreate"), ["issue", "create"]);
        assert_eq!(split("HTMLParser"), ["html", "parser"]);
        assert_eq!(split("getHTTPStatus"), ["get", "http", "status"]);
        assert_eq!(split("API-post-page"), ["api", "post", "page"]);
        assert_eq!(split("s3.put_object"), ["s3", "put", "object"]);
        assert_eq!(split("  send  email "), ["send", "email"]);
        assert_eq!(split("files_upload_v2"), ["files", "upload", "v2"]);
        assert!(split("").is_empty());
        assert!(split("__--..").is_empty());
    }

    #[test]
    fn segments_follow_dots_and_parentheses() {
        let words = Words::new("gmail.users().messages().send()", Segments::Dotted);
        let segs: Vec<u8> = (0..words.len()).map(|i| words.segment(i)).collect();
        assert_eq!(segs, [0, 1, 2, 3]);
        let words = Words::new("/api/chat.postMessage", Segments::Slashes);
        let segs: Vec<u8> = (0..words.len()).map(|i| words.segment(i)).collect();
        assert_eq!(segs, [0, 1, 1, 1]);
    }

    #[test]
    fn long_and_odd_names_are_bounded() {
        let long = "a_".repeat(10_000);
        assert_eq!(Words::new(&long, Segments::Dotted).len(), MAX_WORDS);
        let words = Words::new("créer_facture_ünïcode", Segments::Dotted);
        assert_eq!(words.word(0), "créer");
        assert_eq!(words.word(99), "");
        let multibyte = "é".repeat(600);
        assert!(Words::new(&multibyte, Segments::Dotted).word(0).len() <= MAX_NAME_BYTES);
    }

    #[test]
    fn versions() {
        for word in ["v1", "v2", "v1beta", "v3beta1", "v1alpha"] {
            assert!(is_version(word), "{word}");
        }
        for word in ["v", "view", "vb1", "s3", "verify"] {
            assert!(!is_version(word), "{word}");
        }
    }
}

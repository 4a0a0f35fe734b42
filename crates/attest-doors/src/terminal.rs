//! Text from the ledger (or from an agent, through the ledger) on a person's terminal.
//!
//! Every field an agent or an upstream controls can carry bytes a terminal obeys: ESC
//! sequences that rewrite the screen or the title, CR that overprints a line, BEL, C1
//! controls, and Unicode bidi overrides that show `refuse` where the bytes say `act`.
//! Human-readable output passes such fields through [`escape`] — the one place this is
//! done — so what a person reads is what the ledger holds. JSON output is already escaped.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character (C0, DEL, C1) and every bidi control shown as
/// `\u{…}`, and a backslash doubled, so an escaped field cannot imitate an escape.
/// Text without any is returned as it is.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if needs_escape(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c == '\\' || c.is_control() || is_bidi_control(c)
}

/// The Unicode bidirectional formatting characters (UAX #9): marks, embeddings,
/// overrides and isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_untouched() {
        assert!(matches!(escape("github.create plan"), Cow::Borrowed(_)));
        assert_eq!(escape("café ✓"), "café ✓");
    }

    #[test]
    fn controls_and_bidi_overrides_are_shown_not_obeyed() {
        assert_eq!(escape("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape("ok\rrefuse"), "ok\\u{d}refuse");
        assert_eq!(escape("\u{7}\u{7f}\u{9b}"), "\\u{7}\\u{7f}\\u{9b}");
        assert_eq!(escape("x\u{202e}tca"), "x\\u{202e}tca");
        assert_eq!(escape("\u{2066}a\u{2069}"), "\\u{2066}a\\u{2069}");
        assert_eq!(escape("line\nnext\t"), "line\\u{a}next\\u{9}");
        // A literal backslash-u in a field cannot pass for an escaped control.
        assert_eq!(escape("\\u{1b}\u{1b}"), "\\\\u{1b}\\u{1b}");
    }
}

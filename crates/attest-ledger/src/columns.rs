//! Checking a row's columns against its body without parsing the body into values.
//!
//! Verify must confirm, for every row, that the body is a v1 entry whose `v`, `seq`,
//! `prev`, `ts`, `system`, `verb`, `agent`, `decision`, `verification.level`, `run_id`
//! and `action_id` agree with the chain and the row's columns. Bodies are canonical JSON written by this
//! crate: no whitespace, and escapes only where a string needs them. [`agrees`] walks
//! such a body once, validating its JSON syntax as it goes and picking out those
//! members as byte slices, and answers only "all of it agrees". Anything else (a
//! backslash, whitespace, non-integer `seq`, `null`, a duplicate member, deep nesting, a
//! disagreement) makes it answer `false`, and verify parses the body fully to say what
//! is wrong, so the fast path can only ever skip work, never a finding.

use crate::canonical::{is_hex_of, Hash};
use crate::StoredRow;

/// Deeper nesting than this is left to the full parser (serde_json's own limit is 128).
const MAX_DEPTH: usize = 64;

/// A body that agrees, and what verify's walk learns from it besides.
pub(crate) struct Agreed {
    /// `execution.status` is [`crate::INTENT`]: the row opens its action.
    pub(crate) intent: bool,
}

/// Whether `row`'s body is a well-formed entry that agrees with its columns, its seq
/// and `prev` (the hash of the row before); `None` when it does not.
pub(crate) fn agrees(row: &StoredRow<'_>, prev: &Hash) -> Option<Agreed> {
    // Invalid UTF-8 anywhere is ruled out without a pass of its own: outside strings
    // the scanner accepts ASCII tokens only, and `string` checks each string's bytes.
    let mut members = Members::default();
    let mut scanner = Scanner {
        bytes: row.body,
        at: 0,
    };
    if scanner.top(&mut members).is_none() || scanner.at != row.body.len() {
        return None;
    }
    let (Some(v), Some(seq), Some(body_prev), Some(ts), Some(system), Some(verb), Some(decision)) = (
        members.v,
        members.seq,
        members.prev,
        members.ts,
        members.system,
        members.verb,
        members.decision,
    ) else {
        return None;
    };
    // `verification` without a `level` is not an entry; the full parse says so.
    if members.verification && members.level.is_none() {
        return None;
    }
    let agrees = v == b"1"
        && parse_u64(seq) == Some(row.seq)
        && std::str::from_utf8(body_prev).is_ok_and(|text| is_hex_of(text, prev))
        && ts == row.ts.as_bytes()
        && system == row.system.as_bytes()
        && verb == row.verb.as_bytes()
        && decision == row.decision.as_bytes()
        && members.agent == row.agent.map(str::as_bytes)
        && members.level == row.level.map(str::as_bytes)
        && members.run_id == row.run.map(str::as_bytes)
        && members.action_id == row.action_id.map(str::as_bytes);
    agrees.then(|| Agreed {
        intent: members.status == Some(crate::INTENT.as_bytes()),
    })
}

/// How many bytes at the start of `bytes` are neither `"`, `\` nor a control
/// character (nor, with `ASCII_ONLY`, a byte of a multi-byte character): where a string
/// without escapes ends, or where it stops being plain ASCII. Strings are most of a
/// body, so this reads eight bytes at a time; `plain_prefix_is_the_first_special_byte`
/// holds it to the byte-by-byte answer.
fn plain_prefix<const ASCII_ONLY: bool>(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // A byte's high bit is set where it is zero; a borrow can only wrongly flag bytes
    // above a truly flagged one, so the lowest flag is exact.
    let zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in words.by_ref() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        let word = u64::from_le_bytes(eight);
        let special = zero(word ^ (ONES * u64::from(b'"')))
            | zero(word ^ (ONES * u64::from(b'\\')))
            // Below 0x20: subtracting 0x20 borrows, and the byte had no high bit.
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGH)
            // A high bit is a byte of its own: exact, and it borrows from nothing.
            | if ASCII_ONLY { word & HIGH } else { 0 };
        if special != 0 {
            // Little-endian: the lowest set bit is the first special byte.
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20 || (ASCII_ONLY && b >= 0x80))
        .unwrap_or(words.remainder().len())
}

/// The members verify compares, as raw bytes (string contents without quotes).
#[derive(Default)]
struct Members<'a> {
    v: Option<&'a [u8]>,
    seq: Option<&'a [u8]>,
    prev: Option<&'a [u8]>,
    ts: Option<&'a [u8]>,
    system: Option<&'a [u8]>,
    verb: Option<&'a [u8]>,
    agent: Option<&'a [u8]>,
    decision: Option<&'a [u8]>,
    level: Option<&'a [u8]>,
    run_id: Option<&'a [u8]>,
    action_id: Option<&'a [u8]>,
    /// Whether `verification` was seen (its `level` may still be absent).
    verification: bool,
    /// `execution.status`.
    status: Option<&'a [u8]>,
    /// Whether `execution` was seen.
    execution: bool,
}

/// A strict JSON reader for canonical bodies; every method returns `None` on anything
/// it does not accept, invalid UTF-8 included.
struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// The top-level object, keeping the members verify needs.
    fn top(&mut self, members: &mut Members<'a>) -> Option<()> {
        self.object(1, |scanner, name| {
            let slot = match name {
                b"v" => &mut members.v,
                b"seq" => &mut members.seq,
                b"prev" => &mut members.prev,
                b"ts" => &mut members.ts,
                b"system" => &mut members.system,
                b"verb" => &mut members.verb,
                b"agent" => &mut members.agent,
                b"decision" => &mut members.decision,
                b"run_id" => &mut members.run_id,
                b"action_id" => &mut members.action_id,
                b"verification" => {
                    return scanner.member_of(
                        &mut members.verification,
                        b"level",
                        &mut members.level,
                    )
                }
                b"execution" => {
                    return scanner.member_of(
                        &mut members.execution,
                        b"status",
                        &mut members.status,
                    )
                }
                _ => return scanner.value(2),
            };
            if slot.is_some() {
                return None;
            }
            *slot = Some(if matches!(name, b"v" | b"seq") {
                scanner.number()?
            } else {
                scanner.string()?
            });
            Some(())
        })
    }

    /// A nested object met once (`seen`), keeping its string member `wanted` in `slot`
    /// (once).
    fn member_of(
        &mut self,
        seen: &mut bool,
        wanted: &[u8],
        slot: &mut Option<&'a [u8]>,
    ) -> Option<()> {
        if std::mem::replace(seen, true) {
            return None;
        }
        self.object(2, |scanner, name| {
            if name == wanted {
                if slot.is_some() {
                    return None;
                }
                *slot = Some(scanner.string()?);
                Some(())
            } else {
                scanner.value(3)
            }
        })
    }

    /// An object; `member` reads each member's value after its name and colon.
    fn object(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let name = self.string()?;
            self.eat(b':')?;
            member(self, name)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }

    /// Any value, validated and skipped.
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth, |scanner, _| scanner.value(depth + 1)),
            b'[' => {
                if depth > MAX_DEPTH {
                    return None;
                }
                self.at += 1;
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    if self.eat(b',').is_none() {
                        return self.eat(b']');
                    }
                }
            }
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// A string without escapes or control characters; returns its contents.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        // One pass for the common case, an ASCII string; from the first byte of a
        // multi-byte character on, a second scan for the end and a UTF-8 check.
        let mut end = start + plain_prefix::<true>(self.bytes.get(start..)?);
        let ascii = *self.bytes.get(end)? < 0x80;
        if !ascii {
            end += plain_prefix::<false>(self.bytes.get(end..)?);
        }
        (*self.bytes.get(end)? == b'"').then_some(())?;
        let text = &self.bytes[start..end];
        // No multi-byte character holds a quote or a backslash byte, so a string
        // ends where its bytes do and is valid UTF-8 on its own or not at all.
        if !ascii && std::str::from_utf8(text).is_err() {
            return None;
        }
        self.at = end + 1;
        Some(text)
    }

    /// A number in JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        Some(&self.bytes[start..self.at])
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

/// Plain decimal digits as a `u64`; anything else (a sign, a fraction, overflow) is `None`.
fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))?
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::entry::Entry;
    use crate::jcs::write_entry;
    use crate::{ChainChecker, Execution, Record, Verification};

    fn record(text: &str, n: u64) -> Record {
        let mut preview = serde_json::Map::new();
        preview.insert("note".into(), text.into());
        preview.insert(
            "n".into(),
            serde_json::json!([n, -1.5e3, true, null, {"k": {}}]),
        );
        Record {
            action_id: format!("a{n}"),
            run_id: (n % 2 == 1).then(|| format!("run{text}")),
            agent: (n % 2 == 0).then(|| text.to_owned()),
            agent_auth: None,
            actor: None,
            call: None,
            owner: None,
            system: format!("sys{text}"),
            verb: "send".into(),
            target: Some(text.into()),
            target_class: "none".into(),
            source: "manual".into(),
            decision: "act".into(),
            tier: "high".into(),
            reasons: vec![text.into()],
            rules_fired: vec![],
            params_hash: "00".repeat(32),
            params_preview: preview,
            result_ids: Vec::new(),
            confirm: None,
            execution: Execution {
                status: "ok".into(),
                result_hash: None,
                error_hash: None,
            },
            verification: (n % 3 != 0).then(|| Verification {
                level: "acknowledged".into(),
                method: "ack".into(),
                matched: Some(true),
                evidence: serde_json::Map::new(),
            }),
            idempotency_key: None,
            replay_of: None,
            imported: None,
            shadow: None,
            grant: None,
            sealed: None,
            erasure: None,
        }
    }

    fn body(record: &Record, seq: u64, prev: &Hash) -> Vec<u8> {
        let prev = crate::to_hex(prev);
        let entry = Entry {
            v: 1,
            seq,
            prev: &prev,
            ts: "2026-12-01T07:00:00Z",
            record,
        };
        let mut out = Vec::new();
        write_entry(&mut out, &entry).unwrap();
        out
    }

    fn row<'a>(record: &'a Record, seq: u64, body: &'a [u8]) -> StoredRow<'a> {
        StoredRow {
            seq,
            hash: &[],
            ts: "2026-12-01T07:00:00Z",
            system: &record.system,
            verb: &record.verb,
            agent: record.agent.as_deref(),
            decision: &record.decision,
            level: record.verification.as_ref().map(|v| v.level.as_str()),
            run: record.run_id.as_deref(),
            action_id: Some(&record.action_id),
            body,
        }
    }

    /// Whether the fast path agrees.
    fn agrees(row: &StoredRow<'_>, prev: &Hash) -> bool {
        super::agrees(row, prev).is_some()
    }

    /// Whether the full parse finds no problem with the body (hash aside).
    fn full_parse_agrees(row: &StoredRow<'_>, prev: Hash) -> bool {
        let mut checker = ChainChecker::resume_after(row.seq - 1, prev);
        checker.check_body_fully(row);
        checker.finish().problems.is_empty()
    }

    #[test]
    fn a_written_entry_agrees_and_each_wrong_column_does_not() {
        let prev = [3u8; 32];
        for n in 1..=6 {
            let record = record("plain", n);
            let bytes = body(&record, n, &prev);
            let good = row(&record, n, &bytes);
            assert!(agrees(&good, &prev), "{}", String::from_utf8_lossy(&bytes));
            assert!(!agrees(&good, &[4u8; 32]));
            assert!(!agrees(
                &StoredRow {
                    seq: n + 1,
                    ..row(&record, n, &bytes)
                },
                &prev
            ));
            assert!(!agrees(
                &StoredRow {
                    system: "other",
                    ..row(&record, n, &bytes)
                },
                &prev
            ));
            assert!(!agrees(
                &StoredRow {
                    ts: "2026",
                    ..row(&record, n, &bytes)
                },
                &prev
            ));
            assert!(!agrees(
                &StoredRow {
                    run: Some("another run"),
                    ..row(&record, n, &bytes)
                },
                &prev
            ));
            assert!(!agrees(
                &StoredRow {
                    action_id: None,
                    ..row(&record, n, &bytes)
                },
                &prev
            ));
            assert!(!agrees(
                &StoredRow {
                    agent: Some("x"),
                    level: None,
                    ..good
                },
                &prev
            ));
        }
    }

    #[test]
    fn the_fast_path_says_whether_a_row_is_an_intent() {
        let prev = [3u8; 32];
        for status in ["intent", "ok", "intents", "pending"] {
            let mut record = record("plain", 1);
            record.execution.status = status.to_owned();
            let bytes = body(&record, 1, &prev);
            let agreed = super::agrees(&row(&record, 1, &bytes), &prev).unwrap();
            assert_eq!(agreed.intent, status == crate::INTENT, "{status}");
        }
    }

    #[test]
    fn invalid_utf8_inside_a_string_does_not_agree() {
        let prev = [3u8; 32];
        let record = record("caf\u{e9}", 1);
        let mut bytes = body(&record, 1, &prev);
        assert!(agrees(&row(&record, 1, &bytes), &prev));
        // The first é (in the params preview, which no column repeats) loses its second
        // byte: a lead byte with no continuation, inside an otherwise good string.
        let at = bytes.windows(2).position(|w| w == [0xC3, 0xA9]).unwrap();
        bytes[at + 1] = b'x';
        // (The full parse skips the preview without reading it as text; the body's
        // hash is what catches such an edit. The fast path only has to not agree.)
        assert!(!agrees(&row(&record, 1, &bytes), &prev));
    }

    proptest! {
        #[test]
        fn plain_prefix_is_the_first_special_byte(
            bytes in prop::collection::vec(
                prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), 0x1fu8..=0x21, 0x7fu8..=0x81],
                0..40,
            ),
        ) {
            let slow = |ascii_only: bool| bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20 || (ascii_only && b >= 0x80))
                .unwrap_or(bytes.len());
            prop_assert_eq!(plain_prefix::<false>(&bytes), slow(false));
            prop_assert_eq!(plain_prefix::<true>(&bytes), slow(true));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The fast path never agrees where the full parse finds a problem: over
        /// written entries with arbitrary text, and over the same bodies with one byte
        /// replaced, inserted or removed.
        #[test]
        fn the_fast_path_never_agrees_where_the_full_parse_objects(
            text in ".{0,12}",
            n in 1u64..50,
            edit in 0usize..3,
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let prev = [5u8; 32];
            let record = record(&text, n);
            let mut bytes = body(&record, n, &prev);
            let clean = row(&record, n, &bytes);
            let escapes = bytes.contains(&b'\\');
            prop_assert!(escapes || agrees(&clean, &prev));
            prop_assert!(full_parse_agrees(&clean, prev));
            let i = at.index(bytes.len());
            match edit {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => { bytes.remove(i); }
            }
            let edited = row(&record, n, &bytes);
            if agrees(&edited, &prev) {
                prop_assert!(full_parse_agrees(&edited, prev), "{}", String::from_utf8_lossy(&bytes));
            }
        }
    }
}

//! The one path from an entry to its hash: RFC 8785 bytes, then SHA-256.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::LedgerError;

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// The `prev` of the first entry: 32 zero bytes.
pub const GENESIS: Hash = [0u8; 32];

/// The RFC 8785 (JSON Canonicalization Scheme) bytes of `value`.
///
/// Keys are sorted by their UTF-16 code units, numbers use ECMAScript's shortest
/// round-trip form, and no whitespace is emitted (RFC 8785 §3.2).
pub fn canonical_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, LedgerError> {
    serde_json_canonicalizer::to_vec(value).map_err(LedgerError::Canonical)
}

/// The RFC 8785 bytes of a free-form JSON value, written by the ledger's own writer
/// (byte-identical to [`canonical_bytes`], without serde's per-key buffers).
fn canonical_value_bytes(value: &serde_json::Value) -> Result<Vec<u8>, LedgerError> {
    let mut out = Vec::with_capacity(128);
    crate::jcs::write_value(&mut out, value)?;
    Ok(out)
}

/// SHA-256 of a JSON value's RFC 8785 bytes: how params and results are fingerprinted.
pub fn value_hash(value: &serde_json::Value) -> Result<Hash, LedgerError> {
    Ok(Sha256::digest(canonical_value_bytes(value)?).into())
}

/// The entry hash: SHA-256 over the stored canonical bytes (DESIGN.md, "Entry hash").
pub fn entry_hash(canonical: &[u8]) -> Hash {
    Sha256::digest(canonical).into()
}

/// Lower-case hex, the form hashes take inside entries.
pub fn to_hex(hash: &Hash) -> String {
    // `hex::encode` builds its string a `char` at a time (2% of a whole action in its
    // profile); its slice encoder writes the 64 bytes straight.
    let mut text = [0u8; 64];
    // 64 bytes is exactly twice 32: the encoder cannot refuse the slice.
    let _ = hex::encode_to_slice(hash, &mut text);
    // Hex digits are ASCII: never the empty default.
    std::str::from_utf8(&text)
        .map(str::to_owned)
        .unwrap_or_default()
}

/// Whether `text` is exactly the lower-case hex of `hash`, without decoding it.
pub(crate) fn is_hex_of(text: &str, hash: &Hash) -> bool {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let text = text.as_bytes();
    text.len() == 64
        && hash.iter().zip(text.chunks_exact(2)).all(|(byte, pair)| {
            pair[0] == DIGITS[usize::from(byte >> 4)] && pair[1] == DIGITS[usize::from(byte & 15)]
        })
}

/// Parses 64 lower-case hex digits; anything else is `None`.
pub fn from_hex(text: &str) -> Option<Hash> {
    if text.len() != 64 || text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut hash = [0u8; 32];
    hex::decode_to_slice(text, &mut hash).ok()?;
    Some(hash)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn to_hex_is_the_hex_crates_lower_case_hex() {
        for seed in 0u8..=255 {
            let hash: Hash =
                std::array::from_fn(|i| seed.wrapping_mul(31) ^ (i as u8).wrapping_mul(7));
            assert_eq!(to_hex(&hash), hex::encode(hash));
            assert!(is_hex_of(&to_hex(&hash), &hash));
        }
    }

    fn canonical_of(text: &str) -> String {
        let value: Value = serde_json::from_str(text).unwrap();
        String::from_utf8(canonical_bytes(&value).unwrap()).unwrap()
    }

    /// RFC 8785 §3.2.2.3 and Appendix B: ECMAScript number serialization.
    #[test]
    fn numbers_follow_rfc8785_appendix_b() {
        let cases = [
            ("0", "0"),
            ("-0", "0"),
            ("1E30", "1e+30"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("333333333.33333329", "333333333.3333333"),
            ("9007199254740992", "9007199254740992"),
            ("295147905179352830000", "295147905179352830000"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ];
        for (input, expected) in cases {
            assert_eq!(canonical_of(input), expected, "number {input}");
        }
    }

    /// RFC 8785 §3.2.3: keys sort by UTF-16 code units, not by UTF-8 bytes or chars.
    #[test]
    fn keys_sort_by_utf16_code_units() {
        let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
            \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
            \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonical_of(input), expected);
    }

    /// RFC 8785 §3.2.2.2: only the mandatory escapes; other characters as UTF-8.
    #[test]
    fn strings_use_minimal_escapes() {
        let value = json!({"s": "\u{20ac}$\u{000F}\u{000a}A'\u{0042}\u{0022}\u{005c}\\\"/"});
        let canonical = String::from_utf8(canonical_bytes(&value).unwrap()).unwrap();
        assert_eq!(canonical, r#"{"s":"€$\u000f\nA'B\"\\\\\"/"}"#);
    }

    #[test]
    fn hex_round_trips_and_rejects_malformed() {
        let hash = entry_hash(b"abc");
        assert_eq!(
            to_hex(&hash),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(from_hex(&to_hex(&hash)), Some(hash));
        assert_eq!(from_hex(&to_hex(&hash).to_uppercase()), None);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex(&"zz".repeat(32)), None);
        assert!(is_hex_of(&to_hex(&hash), &hash));
        assert!(!is_hex_of(&to_hex(&hash).to_uppercase(), &hash));
        assert!(!is_hex_of(&to_hex(&hash)[..62], &hash));
        assert!(!is_hex_of(&to_hex(&GENESIS), &hash));
    }
}

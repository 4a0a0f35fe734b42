//! URL redaction: the one function every URL goes through before it reaches the ledger.
//!
//! The ledger is append-only and hash-chained, so a secret written to it can never be
//! removed. URLs carry secrets in three places, and [`redact_url`] removes all three:
//! - user info (`https://user:password@host/`): dropped;
//! - the query and fragment (`?access_token=…`, `#token=…`): dropped;
//! - path segments that are credentials: the secret part of webhook URLs
//!   (`hooks.slack.com/services/T…/B…/<secret>`, `discord.com/api/webhooks/<id>/<token>`),
//!   the segment after a word such as `token`, `key` or `secret`, and any segment that looks
//!   like a long random token (24 or more letters and digits, mixed). Each becomes
//!   [`REDACTED`]. UUIDs are ids, and kept.
//!
//! Text that is not a URL comes back unchanged; nothing here fails or panics.

/// What a token-bearing path segment becomes.
pub const REDACTED: &str = "[redacted]";

/// The shortest segment that counts as a random token.
const MIN_TOKEN_CHARS: usize = 24;

/// Path words after which the next segment is a credential.
const SECRET_WORDS: &[&str] = &[
    "token",
    "tokens",
    "key",
    "keys",
    "apikey",
    "api_key",
    "api-key",
    "secret",
    "secrets",
    "password",
    "passwd",
    "signature",
    "sig",
    "auth",
    "access_token",
    "credentials",
];

/// `url` with user info, query and fragment dropped and token-bearing path segments
/// replaced by [`REDACTED`]. Works on absolute and scheme-relative URLs; other text is
/// returned as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = split_scheme(url) else {
        return url.to_owned();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host_port.to_ascii_lowercase();
    let host = host.split(':').next().unwrap_or("");
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    out.push_str(host_port);
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let keep_until = webhook_keep(host, &segments);
    let mut after_secret_word = false;
    for (i, segment) in segments.iter().enumerate() {
        out.push('/');
        let secret = keep_until.is_some_and(|keep| i >= keep)
            || (after_secret_word && !segment.is_empty())
            || looks_like_token(segment);
        out.push_str(if secret { REDACTED } else { segment });
        after_secret_word = SECRET_WORDS.contains(&segment.to_ascii_lowercase().as_str());
    }
    out
}

/// `text` with every URL in it (`scheme://…`, or `//…` at the start of a word) redacted
/// by [`redact_url`]; a URL ends at whitespace or a quote.
pub fn redact_urls_in(text: &str) -> String {
    if !text.contains("//") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_url(rest) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let end = from
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(from.len());
        let (url, after) = from.split_at(end);
        out.push_str(&redact_url(url));
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Where the next URL starts: the scheme before a `://`, or a `//` that starts a word.
fn find_url(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    text.match_indices("//").map(|(at, _)| at).find_map(|at| {
        if at > 0 && bytes.get(at - 1) == Some(&b':') {
            let scheme_start = bytes
                .get(..at - 1)
                .unwrap_or(&[])
                .iter()
                .rposition(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
                .map_or(0, |p| p + 1);
            return (scheme_start < at - 1).then_some(scheme_start);
        }
        let starts_word = at == 0
            || bytes.get(at - 1).is_some_and(|b| {
                b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'(' | b'<')
            });
        let followed = bytes
            .get(at + 2)
            .is_some_and(|b| !b.is_ascii_whitespace() && *b != b'/');
        (starts_word && followed).then_some(at)
    })
}

/// `("https://", "host/path…")`, or `("//", …)` for a scheme-relative URL.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    if let Some(at) = url.find("://") {
        let scheme = url.get(..at)?;
        let valid = scheme
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        return valid.then(|| {
            (
                url.get(..at + 3).unwrap_or(""),
                url.get(at + 3..).unwrap_or(""),
            )
        });
    }
    url.strip_prefix("//").map(|rest| ("//", rest))
}

/// For webhook hosts, the index of the first path segment that is the secret.
fn webhook_keep(host: &str, segments: &[&str]) -> Option<usize> {
    let first = segments.first().map(|s| s.to_ascii_lowercase());
    let second = segments.get(1).map(|s| s.to_ascii_lowercase());
    match host {
        // hooks.slack.com/services/T…/B…/<secret>, /workflows/…/<secret>, /triggers/…
        "hooks.slack.com" => Some(if first.as_deref() == Some("services") {
            3
        } else {
            1
        }),
        // discord.com/api/webhooks/<id>/<token>
        "discord.com" | "discordapp.com" | "ptb.discord.com" | "canary.discord.com"
            if first.as_deref() == Some("api") && second.as_deref() == Some("webhooks") =>
        {
            Some(3)
        }
        _ if host.ends_with(".webhook.office.com") || host == "webhook.office.com" => Some(1),
        _ => None,
    }
}

/// A long run of letters and digits, mixed: what random tokens look like (UUIDs excepted).
fn looks_like_token(segment: &str) -> bool {
    let token_chars = segment
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'%'));
    token_chars
        && segment.len() >= MIN_TOKEN_CHARS
        && segment.bytes().any(|b| b.is_ascii_digit())
        && segment.bytes().any(|b| b.is_ascii_alphabetic())
        && !is_uuid(segment)
}

/// `550e8400-e29b-41d4-a716-446655440000`.
fn is_uuid(segment: &str) -> bool {
    let groups: Vec<&str> = segment.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_query_and_fragment_are_dropped() {
        assert_eq!(
            redact_url("https://bob:hunter2@api.example.com:8443/v1/notes?access_token=abc#x"),
            "https://api.example.com:8443/v1/notes"
        );
        assert_eq!(redact_url("//cdn.example.com/a?b"), "//cdn.example.com/a");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("/relative?x=1"), "/relative?x=1");
    }

    #[test]
    fn token_bearing_segments_are_redacted() {
        assert_eq!(
            redact_url(
                "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
            ),
            "https://hooks.slack.com/services/T00000000/B00000000/[redacted]"
        );
        assert_eq!(
            redact_url("https://discord.com/api/webhooks/123456/abcDEF-ghi_jkl"),
            "https://discord.com/api/webhooks/123456/[redacted]"
        );
        assert_eq!(
            redact_url("https://api.example.com/v1/token/short/next"),
            "https://api.example.com/v1/token/[redacted]/next"
        );
        assert_eq!(
            redact_url("https://x.io/files/a1B2c3D4e5F6g7H8i9J0k1L2m3/meta"),
            "https://x.io/files/[redacted]/meta"
        );
        let id = "https://x.io/v1/items/550e8400-e29b-41d4-a716-446655440000";
        assert_eq!(redact_url(id), id);
        assert_eq!(
            redact_url("https://api.github.com/repos/o/r/issues/7"),
            "https://api.github.com/repos/o/r/issues/7"
        );
    }

    #[test]
    fn urls_inside_text_are_redacted() {
        assert_eq!(
            redact_urls_in("GET https://u:p@x.io/a?k=1 then HTTP://y.io/b#f."),
            "GET https://x.io/a then HTTP://y.io/b"
        );
        assert_eq!(redact_urls_in("no urls here"), "no urls here");
        assert_eq!(redact_urls_in("see //u:p@x.io/a?b"), "see //x.io/a");
        assert_eq!(
            redact_urls_in("ftp://u:p@x.io/ and a//b and x://"),
            "ftp://x.io/ and a//b and x://"
        );
        assert_eq!(redact_urls_in("https://"), "https://");
    }
}

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
//! Path parameters (`/x;jsessionid=…`) go the way of the query. Beyond URLs, every string
//! that reaches the ledger, a log, an export or printed settings passes [`redact_text`]:
//! URLs as above, and anything shaped like a credential from one maintained list
//! ([`TOKEN_SHAPES`]: Stripe, Slack, AWS, GitHub, GitLab, OpenAI and Anthropic keys, JWTs,
//! `Bearer`/`Basic` credentials, private key blocks) becomes [`REDACTED`]. Settings that
//! must stay usable (`postgres://…?sslmode=require`) go through [`redact_url_credentials`],
//! which keeps the URL but hides its password and credential parameters.
//!
//! Text that is not a URL comes back unchanged; nothing here fails or panics.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

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

/// The shapes of credentials, wherever they appear in text: one list, kept here. Each
/// match becomes [`REDACTED`]; for `Bearer`/`Basic` the scheme word is kept.
pub const TOKEN_SHAPES: &[&str] = &[
    // Stripe secret and restricted keys, webhook secrets.
    r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{8,}",
    r"\bwhsec_[0-9A-Za-z]{16,}",
    // Slack bot, user, app and refresh tokens.
    r"\bxox[abprse]-[0-9A-Za-z-]{8,}",
    r"\bxapp-[0-9A-Za-z-]{8,}",
    // AWS access key ids (long-term and temporary).
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    // GitHub tokens, GitLab personal tokens.
    r"\bgh[pousr]_[0-9A-Za-z]{20,}",
    r"\bgithub_pat_[0-9A-Za-z_]{20,}",
    r"\bglpat-[0-9A-Za-z_-]{20,}",
    // OpenAI and Anthropic keys.
    r"\bsk-(?:proj-|ant-)?[0-9A-Za-z_-]{20,}",
    // JSON Web Tokens.
    r"\beyJ[0-9A-Za-z_-]{4,}\.[0-9A-Za-z_-]{4,}\.[0-9A-Za-z_-]*",
    // A private key block.
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
];

/// HTTP credentials after their scheme word (`Authorization: Bearer …`).
const SCHEME_CREDENTIAL: &str = r"(?i)\b(bearer|basic)\s+([0-9A-Za-z._~+/=-]{8,})";

static SHAPES: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(&TOKEN_SHAPES.join("|")).ok());
static SCHEME: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(SCHEME_CREDENTIAL).ok());

/// Parameter and field names whose values are credentials, as words of a name
/// (`session_id`, `X-Api-Key`, `jsessionid`, `client_secret`).
const CREDENTIAL_WORDS: &[&str] = &[
    "session",
    "sessionid",
    "jsessionid",
    "phpsessid",
    "sid",
    "cookie",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "apikey",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "signature",
    "sig",
    "otp",
    "bearer",
    "jwt",
];

/// True when a parameter, field or header name holds a credential: one of its words
/// (split at `_`, `-`, `.` and spaces) is a credential word, or it is an `*_key`/`*key`.
pub fn is_credential_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(['_', '-', '.', ' '])
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().any(|word| CREDENTIAL_WORDS.contains(word))
        || words
            .last()
            .is_some_and(|w| *w == "key" || w.ends_with("apikey"))
        || lower.ends_with("token")
        || lower.ends_with("secret")
}

/// `text` with every URL redacted ([`redact_urls_in`]) and every credential shape
/// ([`TOKEN_SHAPES`], `Bearer …`) replaced by [`REDACTED`]: the one pass every string makes
/// on its way to the ledger, a log, an export or printed settings.
pub fn redact_text(text: &str) -> String {
    let urls = redact_urls_in(text);
    redact_shapes(&urls).into_owned()
}

/// `text` with credential shapes replaced; URLs left as they are.
fn redact_shapes(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    if let Some(shapes) = SHAPES.as_ref() {
        if shapes.is_match(&out) {
            out = Cow::Owned(shapes.replace_all(&out, REDACTED).into_owned());
        }
    }
    if let Some(scheme) = SCHEME.as_ref() {
        if scheme.is_match(&out) {
            let replaced = scheme.replace_all(&out, |caps: &regex::Captures<'_>| {
                let whole = caps.get(0).map_or("", |m| m.as_str());
                let credential = caps.get(2).map_or("", |m| m.as_str());
                // `basic authentication` is prose; a credential has more than letters.
                if credential.bytes().all(|b| b.is_ascii_alphabetic()) {
                    return whole.to_owned();
                }
                format!("{} {REDACTED}", caps.get(1).map_or("", |m| m.as_str()))
            });
            out = Cow::Owned(replaced.into_owned());
        }
    }
    out
}

/// A URL kept usable for settings people read (`attest config check`): its password and
/// the values of credential parameters ([`is_credential_name`]) become [`REDACTED`],
/// everything else stays. Other text gets [`redact_text`].
pub fn redact_url_credentials(url: &str) -> String {
    let Some((scheme, rest)) = split_scheme(url) else {
        return redact_text(url);
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = match before_query.find('/') {
        Some(at) => before_query.split_at(at),
        None => (before_query, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:{REDACTED}@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let mut out = format!("{scheme}{authority}{}", redact_shapes(path));
    if !query.is_empty() {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if is_credential_name(name) => format!("{name}={REDACTED}"),
                _ => redact_shapes(pair).into_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

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
        // `;name=value` path parameters (`;jsessionid=…`) are dropped like the query.
        let segment = segment.split(';').next().unwrap_or("");
        let secret = keep_until.is_some_and(|keep| i >= keep)
            || (after_secret_word && !segment.is_empty())
            || looks_like_token(segment);
        out.push_str(if secret { REDACTED } else { segment });
        after_secret_word = SECRET_WORDS.contains(&segment.to_ascii_lowercase().as_str());
    }
    redact_shapes(&out).into_owned()
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

    #[test]
    fn path_parameters_go_like_the_query() {
        assert_eq!(
            redact_url("https://x.io/app;jsessionid=ABC123/cart;api_key=k1?x=1"),
            "https://x.io/app/cart"
        );
    }

    #[test]
    fn credential_shapes_are_redacted_in_any_text() {
        for secret in [
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "rk_live_abcdefgh12345678",
            "sk_test_abcdefgh12345678",
            "xoxb-1234567890-abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "ASIAIOSFODNN7EXAMPLE",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature-x",
        ] {
            let text = redact_text(&format!("key {secret} here"));
            assert_eq!(text, "key [redacted] here", "{secret}");
        }
        assert_eq!(
            redact_text("Authorization: Bearer abc.def-ghi_jkl"),
            "Authorization: Bearer [redacted]"
        );
        assert_eq!(
            redact_text("create issue 7 in repo o/r"),
            "create issue 7 in repo o/r"
        );
    }

    #[test]
    fn settings_urls_keep_their_shape_but_not_their_password() {
        assert_eq!(
            redact_url_credentials(
                "postgres://app:hunter2@db:5432/attest?sslmode=require&password=x"
            ),
            "postgres://app:[redacted]@db:5432/attest?sslmode=require&password=[redacted]"
        );
        assert_eq!(redact_url_credentials("ledger.sqlite"), "ledger.sqlite");
    }

    #[test]
    fn credential_names_are_told_from_ids() {
        for name in [
            "session",
            "session_id",
            "sid",
            "Cookie",
            "jsessionid",
            "api_key",
            "X-Api-Key",
            "client_secret",
            "access_token",
            "apiKey",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in ["customer_id", "title", "to", "amount", "issue_id", "monkey"] {
            assert!(!is_credential_name(name), "{name}");
        }
    }
}

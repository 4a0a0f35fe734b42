//! Rule R2's raw material: the addresses an action reaches, and whose they are.

use std::borrow::Cow;

use serde_json::Value;

use crate::de::Word;
use crate::{Action, TargetClass};

/// Param keys (compared ignoring ASCII case) whose values hold recipients, at any depth.
const RECIPIENT_KEYS: &[&str] = &[
    "to",
    "cc",
    "bcc",
    "email",
    "emails",
    "attendees",
    "recipient",
    "recipients",
    "share_with",
    "invitees",
    "members",
];

/// How deep into params recipients are looked for; deeper values are ignored.
const MAX_DEPTH: usize = 32;

/// The longest host name DNS allows.
const MAX_HOST: usize = 253;

/// Calls `visit` with the host part (after the last `@`) of every address in the
/// action's target and in its recipient params, in document order. A host may be
/// empty or odd when the address is malformed; callers treat those as external.
pub(crate) fn for_each_recipient_host<'a>(action: &'a Action, visit: &mut dyn FnMut(&'a str)) {
    for_each_recipient(action, &mut |address| {
        if let Some((_, host)) = address.rsplit_once('@') {
            visit(host.trim_end_matches('.'));
        }
    });
}

/// Calls `visit` with every address (`bob@acme.com`, without a display name) in the
/// action's target and in its recipient params, in document order.
pub(crate) fn for_each_recipient<'a>(action: &'a Action, visit: &mut dyn FnMut(&'a str)) {
    if let Some(target) = &action.target {
        addresses_in(target, visit);
    }
    walk(&action.params, false, 0, visit);
}

fn walk<'a>(value: &'a Value, in_recipients: bool, depth: usize, visit: &mut dyn FnMut(&'a str)) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(text) if in_recipients => addresses_in(text, visit),
        Value::Array(items) => {
            for item in items {
                walk(item, in_recipients, depth + 1, visit);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let is_recipient_key = RECIPIENT_KEYS
                    .iter()
                    .any(|name| name.eq_ignore_ascii_case(key));
                walk(item, in_recipients || is_recipient_key, depth + 1, visit);
            }
        }
        _ => {}
    }
}

/// Calls `visit` with each address in a string such as `a@x.io, Bob <b@y.io>; c@z.io`.
fn addresses_in<'a>(text: &'a str, visit: &mut dyn FnMut(&'a str)) {
    if memchr::memchr(b'@', text.as_bytes()).is_none() {
        return;
    }
    for part in text.split([',', ';']) {
        let address = match (part.find('<'), part.rfind('>')) {
            (Some(open), Some(close)) if open < close => &part[open + 1..close],
            _ => part,
        };
        let address = address.trim();
        if address.contains('@') {
            visit(address);
        }
    }
}

/// The organisation's own domains and the known ones, lower case.
#[derive(Debug, Clone, Default)]
pub(crate) struct Domains {
    /// The organisation's domains: mail to them is internal.
    pub(crate) internal: Vec<DomainName>,
    /// Partners: mail to them is known.
    pub(crate) known: Vec<DomainName>,
}

impl Domains {
    /// The class of a recipient host: internal (own domains, or the actor's
    /// registered domain), known (configured list), else external. A malformed host
    /// is external.
    pub(crate) fn classify(&self, host: &str, actor_domain: Option<&str>) -> TargetClass {
        with_lower_case(host, |host| {
            if !is_plausible_host(host) {
                return TargetClass::External;
            }
            // The Public Suffix List is consulted only when the host is within the
            // actor's registered domain, to confirm it (`evil.github.io` is within
            // `github.io` but is its own registered domain).
            let same_as_actor = actor_domain
                .is_some_and(|actor| is_within(host, actor) && registered_domain(host) == actor);
            if same_as_actor || self.internal.iter().any(|d| d.covers(host)) {
                TargetClass::Internal
            } else if self.known.iter().any(|d| d.covers(host)) {
                TargetClass::Known
            } else {
                TargetClass::External
            }
        })
        .unwrap_or(TargetClass::External)
    }
}

/// The registered domain of an actor written as an address (`alice@eu.acme.com` →
/// `acme.com`), lower case; `None` when the actor is not an address. Allocates only
/// when the actor has upper-case letters.
pub(crate) fn actor_domain(actor: &str) -> Option<Cow<'_, str>> {
    let (_, host) = actor.trim().rsplit_once('@')?;
    let host = host.trim().trim_end_matches('>').trim_end_matches('.');
    if !is_plausible_host(host) {
        return None;
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        let lower = host.to_ascii_lowercase();
        Some(Cow::Owned(registered_domain(&lower).to_owned()))
    } else {
        Some(Cow::Borrowed(registered_domain(host)))
    }
}

/// The registered domain (`mail.acme.co.uk` → `acme.co.uk`), or the host itself when
/// the Public Suffix List has none (a bare suffix, `localhost`).
fn registered_domain(host: &str) -> &str {
    psl::domain_str(host).unwrap_or(host)
}

fn is_plausible_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= MAX_HOST
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_' || b >= 0x80)
}

/// Runs `f` on the ASCII-lower-cased `text` without allocating (the Public Suffix
/// List is lower case); `None` when `text` is longer than a host can be.
fn with_lower_case<R>(text: &str, f: impl FnOnce(&str) -> R) -> Option<R> {
    if !text.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some(f(text));
    }
    if text.len() > MAX_HOST {
        return None;
    }
    let mut buffer = [0u8; MAX_HOST];
    let lower = &mut buffer[..text.len()];
    lower.copy_from_slice(text.as_bytes());
    lower.make_ascii_lowercase();
    std::str::from_utf8(lower).ok().map(f)
}

/// A configured domain (`acme.com`), lower case; it covers its subdomains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DomainName(Box<str>);

impl DomainName {
    /// Whether `host` (lower case) is this domain or one of its subdomains.
    fn covers(&self, host: &str) -> bool {
        is_within(host, &self.0)
    }
}

/// Whether `host` is `domain` or a subdomain of it (both lower case). A host whose
/// registered domain is `domain` always is, so this needs no Public Suffix lookup.
fn is_within(host: &str, domain: &str) -> bool {
    host == domain
        || (host.len() > domain.len()
            && host.ends_with(domain)
            && host.as_bytes()[host.len() - domain.len() - 1] == b'.')
}

impl Word for DomainName {
    const EXPECTING: &'static str = "a domain name such as acme.com";

    fn from_word(word: &str) -> Result<Self, String> {
        let lower = word.trim().trim_end_matches('.').to_ascii_lowercase();
        if lower.contains('@') {
            return Err(format!(
                "{word:?} is an address, not a domain (write {:?})",
                lower.rsplit('@').next().unwrap_or("")
            ));
        }
        if lower.is_empty()
            || lower.starts_with('.')
            || !is_plausible_host(&lower)
            || !lower.contains('.') && lower != "localhost"
        {
            return Err(format!("{word:?} is not a domain name"));
        }
        Ok(DomainName(lower.into()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verb;

    fn hosts(action: &Action) -> Vec<String> {
        let mut found = Vec::new();
        for_each_recipient_host(action, &mut |h| found.push(h.to_owned()));
        found
    }

    #[test]
    fn collects_from_target_and_nested_params() {
        let action = Action::new("gmail", Verb::Send)
            .with_target("Boss <boss@acme.com>")
            .with_params(json!({
                "message": {"To": "a@x.io, Bob <b@y.io>; c@z.io", "body": "mail me at me@spam.io"},
                "cc": ["d@w.io"],
                "attendees": [{"email": "e@v.io", "displayName": "E"}],
                "share_with": {"members": ["f@u.io"]},
                "subject": "not@collected.io"
            }));
        let mut found = hosts(&action);
        found.sort();
        assert_eq!(
            found,
            ["acme.com", "u.io", "v.io", "w.io", "x.io", "y.io", "z.io"]
        );
    }

    #[test]
    fn ignores_strings_without_addresses() {
        let action = Action::new("slack", Verb::Send)
            .with_params(json!({"members": ["U123"], "to": "#general"}));
        assert!(hosts(&action).is_empty());
    }

    fn domains(internal: &[&str], known: &[&str]) -> Domains {
        let parse = |list: &[&str]| {
            list.iter()
                .map(|d| DomainName::from_word(d).unwrap())
                .collect()
        };
        Domains {
            internal: parse(internal),
            known: parse(known),
        }
    }

    #[test]
    fn classifies_by_registered_domain() {
        let d = domains(&["acme.com"], &["partner.co.uk"]);
        assert_eq!(d.classify("acme.com", None), TargetClass::Internal);
        assert_eq!(d.classify("Mail.ACME.com", None), TargetClass::Internal);
        assert_eq!(d.classify("notacme.com", None), TargetClass::External);
        assert_eq!(d.classify("eu.partner.co.uk", None), TargetClass::Known);
        assert_eq!(d.classify("co.uk", None), TargetClass::External);
        assert_eq!(d.classify("", None), TargetClass::External);
        assert_eq!(d.classify("bad host", None), TargetClass::External);
        assert_eq!(
            d.classify("sub.home.io", Some("home.io")),
            TargetClass::Internal
        );
    }

    #[test]
    fn actor_domains_are_registered_domains() {
        let domain = actor_domain("Alice <alice@EU.Acme.co.uk>");
        assert_eq!(domain.as_deref(), Some("acme.co.uk"));
        assert_eq!(
            actor_domain("alice@eu.acme.com").as_deref(),
            Some("acme.com")
        );
        assert!(actor_domain("alice").is_none());
        assert!(actor_domain("alice@").is_none());
    }

    #[test]
    fn configured_domains_are_checked() {
        assert!(DomainName::from_word("bob@acme.com")
            .unwrap_err()
            .contains("\"acme.com\""));
        assert!(DomainName::from_word("").is_err());
        assert!(DomainName::from_word("acme").is_err());
        assert!(DomainName::from_word("ac me.com").is_err());
        assert_eq!(
            DomainName::from_word("ACME.com.").unwrap(),
            DomainName("acme.com".into())
        );
    }
}

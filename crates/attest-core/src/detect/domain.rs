//! From a host (and its path) to a system.
//!
//! Exact hosts first (`www.googleapis.com`, whose paths say gmail, calendar or drive), then
//! the host's domains from the most specific up (`acme.atlassian.net` → `atlassian.net`).
//! A host the registry does not know is named after its registered domain, using the
//! compiled-in Public Suffix List: `api.someweirdcrm.io` → `someweirdcrm`,
//! `mail.acme.co.uk` → `acme`. IP addresses and single labels are `unknown`.
//!
//! A host is a known system only through its registered domain (or an exact host): the
//! registry's `github.com` covers `api.github.com`, never `api.github.xyz` or
//! `github.com.evil.io`. An unknown host whose label would read as a known system's name
//! (`stripe.xyz` → `stripe`) is named after its whole registered domain (`stripe.xyz`)
//! instead, so that rules written for the real system never match a look-alike.

use std::net::IpAddr;

use super::registry::{HostRule, Registry, SysId};

/// What a host says about the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostSystem<'h> {
    /// A system in the registry.
    Known(SysId),
    /// Not in the registry: the label of the registered domain.
    Named(&'h str),
    /// No name to give (no host, an IP address, `localhost`).
    Unknown,
}

/// The system of `host` (lower-case, without port) given the path's segments (lower-case).
pub(crate) fn host_system<'h>(
    registry: &Registry,
    host: &'h str,
    segments: &[&str],
) -> HostSystem<'h> {
    let host = host.trim_end_matches('.');
    if host.is_empty() {
        return HostSystem::Unknown;
    }
    if let Some(id) = registry
        .hosts
        .get(host)
        .and_then(|rule| pick(rule, segments))
    {
        return HostSystem::Known(id);
    }
    let mut rest = host;
    loop {
        if let Some(id) = registry
            .domains
            .get(rest)
            .and_then(|rule| pick(rule, segments))
        {
            return HostSystem::Known(id);
        }
        match rest.split_once('.') {
            Some((_, parent)) if parent.contains('.') => rest = parent,
            _ => break,
        }
    }
    match registered_name(host) {
        Some((label, domain)) if registry.system_named(label).is_some() => {
            HostSystem::Named(domain)
        }
        Some((label, _)) => HostSystem::Named(label),
        None => HostSystem::Unknown,
    }
}

/// The first path rule that matches, else the rule's own system.
fn pick(rule: &HostRule, segments: &[&str]) -> Option<SysId> {
    rule.paths
        .iter()
        .find(|(words, _)| contains_run(segments, words))
        .map(|(_, id)| *id)
        .or(rule.system)
}

/// True when `run` appears in `segments` as consecutive items.
fn contains_run(segments: &[&str], run: &[Box<str>]) -> bool {
    !run.is_empty()
        && segments
            .windows(run.len())
            .any(|window| window.iter().zip(run).all(|(a, b)| *a == &**b))
}

/// The first label of the registered domain and the domain itself, or `None` for IPs and
/// names without one.
fn registered_name(host: &str) -> Option<(&str, &str)> {
    if host.parse::<IpAddr>().is_ok() || host.contains(':') {
        return None;
    }
    let domain = psl::domain_str(host)?;
    let label = domain.split('.').next()?;
    (!label.is_empty()).then_some((label, domain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_hosts_are_named_after_their_registered_domain() {
        assert_eq!(
            registered_name("api.someweirdcrm.io"),
            Some(("someweirdcrm", "someweirdcrm.io"))
        );
        assert_eq!(
            registered_name("mail.acme.co.uk"),
            Some(("acme", "acme.co.uk"))
        );
        assert_eq!(registered_name("127.0.0.1"), None);
        assert_eq!(registered_name("::1"), None);
        assert_eq!(registered_name("localhost"), None);
    }

    #[test]
    fn paths_refine_shared_hosts() {
        let registry = Registry::shared();
        let name = |host, segments: &[&str]| match host_system(registry, host, segments) {
            HostSystem::Known(id) => registry.system_name(id).to_owned(),
            HostSystem::Named(name) => format!("named:{name}"),
            HostSystem::Unknown => "unknown".to_owned(),
        };
        assert_eq!(
            name("www.googleapis.com", &["gmail", "users", "messages"]),
            "gmail"
        );
        assert_eq!(
            name("www.googleapis.com", &["calendar", "calendars", "events"]),
            "calendar"
        );
        assert_eq!(
            name("acme.atlassian.net", &["rest", "api", "issue"]),
            "jira"
        );
        assert_eq!(
            name("acme.atlassian.net", &["wiki", "rest", "api", "content"]),
            "confluence"
        );
        assert_eq!(name("api.github.com", &["user"]), "github");
        assert_eq!(name("api.someweirdcrm.io", &[]), "named:someweirdcrm");
        // Look-alikes of known systems are named after their whole registered domain.
        assert_eq!(name("api.github.xyz", &[]), "named:github.xyz");
        assert_eq!(name("stripe.xyz", &["v1", "refunds"]), "named:stripe.xyz");
        assert_eq!(name("github.com.evil.io", &[]), "named:evil");
        assert_eq!(name("api.gh.io", &[]), "named:gh.io");
        assert_eq!(name("", &[]), "unknown");
        assert_eq!(name(".", &[]), "unknown");
    }
}

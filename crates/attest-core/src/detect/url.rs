//! Detection from an HTTP method and URL (and, for GraphQL, the body).
//!
//! The URL is split by hand rather than parsed: detection needs only host, path and
//! query names, must accept relative URLs and anything else an agent sends, and must not
//! allocate more than it has to. Nothing is percent-decoded, so bytes that would decode to
//! invalid UTF-8 are just part of an id-like segment.
//!
//! Path segments that are versions (`v1`, `v1.0`, `2010-04-01`) or look like ids
//! (`cus_NffrFeUfNV2Hib`, `PROJ-123`, `12345`, `a@b.c`, `%2F…`) are skipped, as are the names
//! after words listed in `skip_after` (`repos/{owner}/{repo}`). Then:
//! - GET (and HEAD, OPTIONS): a read verb in the path (`conversations.list`), else search
//!   (`/search`, `q=`), else get for an item or a singular noun, else list;
//! - DELETE: delete;
//! - POST: a verb in the path (`/messages/send`, `chat.postMessage`), else a GraphQL
//!   operation, else update for an item, else create;
//! - PUT, PATCH: a strong verb in the path (send, reply, share, upload, pay, approve,
//!   execute), else update.

use std::borrow::Cow;

use attest_policy::{Source, Verb};

use super::domain::{host_system, HostSystem};
use super::graphql;
use super::registry::Registry;
use super::request_body::{read_request, BodyReading, Declared};
use super::tokenize::{Segments, Words, MAX_NAME_BYTES};
use super::tool_name::{apply_noun_rules, join_words, MAX_TARGET_WORDS};
use super::{Detection, UNKNOWN_SYSTEM};

/// Most path segments looked at.
const MAX_SEGMENTS: usize = 32;

/// Longest path read, in bytes.
const MAX_PATH_BYTES: usize = 2048;

/// A URL split into the parts detection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UrlParts<'a> {
    /// The host as written, without user info or port; `""` for relative URLs.
    pub(crate) host: &'a str,
    /// The path, from its first `/` (or the whole of a relative URL without a host).
    pub(crate) path: &'a str,
    /// The query string without `?`.
    pub(crate) query: &'a str,
    /// The scheme (`https`), `""` when the URL has none.
    pub(crate) scheme: &'a str,
    /// The port as written, `""` when the URL has none.
    pub(crate) port: &'a str,
}

/// Splits an absolute, scheme-relative or relative URL. Never fails.
pub(crate) fn split_url(url: &str) -> UrlParts<'_> {
    let url = url.trim();
    let url = url.split_once('#').map_or(url, |(before, _)| before);
    let (rest, query) = url.split_once('?').unwrap_or((url, ""));
    let (scheme, after_scheme) = match rest.split_once("://") {
        Some((scheme, after)) if is_scheme(scheme) => (scheme, Some(after)),
        _ => ("", rest.strip_prefix("//")),
    };
    let (authority, path) = match after_scheme {
        Some(after) => split_at_slash(after),
        None => {
            let (first, path) = split_at_slash(rest);
            if looks_like_host(first) {
                (first, path)
            } else {
                ("", rest)
            }
        }
    };
    UrlParts {
        host: host_of(authority),
        path,
        query,
        scheme,
        port: port_of(authority),
    }
}

/// The port of an authority, `""` when it names none.
fn port_of(authority: &str) -> &str {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let after_host = match host_port.find(']') {
        Some(end) if host_port.starts_with('[') => host_port.get(end + 1..).unwrap_or(""),
        _ => host_port,
    };
    match after_host.rsplit_once(':') {
        Some((_, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => port,
        _ => "",
    }
}

/// The origins (`scheme://host:port`, the port made explicit) a URL may be served from:
/// its own, or with no scheme written, the http and https ones. A host is its scheme,
/// host and port: two services on one host are two systems.
pub(crate) fn origin_keys(scheme: &str, host: &str, port: &str) -> Vec<String> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() {
        return Vec::new();
    }
    let schemes: &[&str] = if scheme.is_empty() {
        &["http", "https"]
    } else {
        &[scheme]
    };
    schemes
        .iter()
        .filter_map(|scheme| {
            let scheme = scheme.to_ascii_lowercase();
            let port = match (port, scheme.as_str()) {
                ("", "http") => "80",
                ("", "https") => "443",
                ("", _) => return None,
                (port, _) => port,
            };
            Some(format!("{scheme}://{host}:{port}"))
        })
        .collect()
}

fn is_scheme(text: &str) -> bool {
    text.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn split_at_slash(text: &str) -> (&str, &str) {
    match text.find('/') {
        Some(at) => (text.get(..at).unwrap_or(""), text.get(at..).unwrap_or("")),
        None => (text, ""),
    }
}

/// `api.github.com` or `localhost:8080` at the start of a URL without a scheme.
fn looks_like_host(first: &str) -> bool {
    let host = host_of(first);
    !host.is_empty()
        && !host.starts_with('.')
        && (host.contains('.') || first.contains(':'))
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':'))
}

/// The host of an authority: user info and port removed, IPv6 brackets kept.
fn host_of(authority: &str) -> &str {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return match host_port.find(']') {
            Some(end) => host_port.get(..=end).unwrap_or(""),
            None => host_port,
        };
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    }
}

/// A Unicode host as clients resolve it: its IDNA ASCII form, so `ａｐｉ．ｇｉｔｈｕｂ．ｃｏｍ`
/// (full-width letters and dots) is the `api.github.com` a client would reach. A host IDNA
/// rejects stays as written (lower-cased): an unknown system, whose writes ask.
fn ascii_host(host: &str) -> String {
    match url::Host::parse(host) {
        Ok(url::Host::Domain(ascii)) => ascii,
        _ => host.to_lowercase(),
    }
}

/// The HTTP methods detection tells apart. Only `GET` and `HEAD` are reads: anything else
/// (`OPTIONS` and unknown methods included) may change state on some server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Read,
    Post,
    Put,
    Delete,
    Other,
}

fn method_of(method: &str) -> Method {
    let method = method.trim();
    let is = |name: &str| method.eq_ignore_ascii_case(name);
    if is("GET") || is("HEAD") {
        Method::Read
    } else if is("POST") {
        Method::Post
    } else if is("PUT") || is("PATCH") {
        Method::Put
    } else if is("DELETE") {
        Method::Delete
    } else {
        Method::Other
    }
}

/// Detects an HTTP call by its riskiest reading.
///
/// A request's shape can hide its verb from a reader that takes it at face value, so every
/// reading a server might make is judged and the riskiest wins ([`Detection::riskier`]):
/// - the method, and every `_method` override in the query or the body, and every GraphQL
///   document in either ([`request_body`](super::request_body) reads them as servers do);
/// - the path as sent, percent-decoded (repeatedly, so `%252F` counts), with `\` as `/` and
///   dot segments resolved, and each of those with `;` parameters dropped or read as `/`;
/// - where a layer of the body or a GraphQL document cannot be read, the riskiest verb.
///
/// Method-override headers are the caller's to add ([`Registry::detect_http_request`]).
pub(crate) fn detect_http(
    registry: &Registry,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
) -> Detection {
    detect_http_declared(registry, method, url, Declared::default(), body)
}

/// [`detect_http`] with the headers that say how the body is read.
pub(crate) fn detect_http_declared(
    registry: &Registry,
    method: &str,
    url: &str,
    declared: Declared<'_>,
    body: Option<&[u8]>,
) -> Detection {
    let parts = split_url(url);
    let reading = read_request(parts.query, declared, body);
    let mut methods = vec![method_of(method)];
    // A comma-listed value is each method it names, and the whole list (an unknown one).
    let listed = reading.overrides.iter().flat_map(|value| {
        std::iter::once(value.as_str()).chain(value.split(',').filter(|_| value.contains(',')))
    });
    for value in listed {
        let overridden = method_of(value);
        if !methods.contains(&overridden) {
            methods.push(overridden);
        }
    }
    let graphql = GraphqlReading::of(&reading);
    // At most five methods and six paths: thirty readings at worst.
    let paths = path_readings(parts.path);
    let mut riskiest: Option<Detection> = None;
    for &method in &methods {
        for path in &paths {
            let reading = UrlParts { path, ..parts };
            let found = detect_one(registry, method, reading, &graphql);
            riskiest = Some(match riskiest {
                Some(so_far) => so_far.riskier(found),
                None => found,
            });
        }
    }
    let found = riskiest.unwrap_or_else(|| Detection::unrecognised(Source::Url));
    if reading.gave_up || graphql.gave_up {
        // A parser gave up where a server would not: judged as the riskiest verb.
        return found.as_riskiest_verb();
    }
    found
}

/// The GraphQL operations a request carries, wherever they were found.
#[derive(Debug, Default)]
struct GraphqlReading {
    /// Every root field of every document that parsed.
    operations: Vec<graphql::Operation>,
    /// The body is a GraphQL request: its operations replace the method's reading.
    request: bool,
    /// The body as text, a bare document when sent to a GraphQL endpoint.
    bare: Option<Vec<graphql::Operation>>,
    /// A document that looks like GraphQL but could not be read.
    gave_up: bool,
}

impl GraphqlReading {
    fn of(reading: &BodyReading) -> GraphqlReading {
        let mut found = GraphqlReading {
            request: reading.graphql_request,
            ..GraphqlReading::default()
        };
        for document in &reading.documents {
            match graphql::root_fields(document) {
                Some(operations) => found.operations.extend(operations),
                None if graphql::looks_like_document(document) => found.gave_up = true,
                None => {}
            }
        }
        if found.operations.len() > graphql::MAX_ROOT_FIELDS {
            found.gave_up = true;
        }
        found.bare = reading.bare_text.as_deref().map(|text| {
            graphql::root_fields(text).unwrap_or_else(|| {
                if graphql::looks_like_document(text) {
                    found.gave_up = true;
                }
                Vec::new()
            })
        });
        found
    }
}

/// The readings of a path a server might make: as sent, and decoded and normalised; each
/// of those with `;` parameters dropped and with `;` read as `/`.
fn path_readings(path: &str) -> Vec<Cow<'_, str>> {
    let mut readings: Vec<Cow<'_, str>> = vec![Cow::Borrowed(path)];
    let plain = !path.contains(['%', '\\', ';'])
        && !path
            .split('/')
            .any(|segment| segment == "." || segment == "..");
    if plain {
        return readings;
    }
    let normalised = normalise(path);
    if normalised != path {
        readings.push(Cow::Owned(normalised));
    }
    for at in 0..readings.len() {
        let Some(reading) = readings.get(at).filter(|r| r.contains(';')) else {
            continue;
        };
        let dropped: String = reading
            .split('/')
            .map(|segment| segment.split(';').next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("/");
        let slashed = reading.replace(';', "/");
        readings.push(Cow::Owned(dropped));
        readings.push(Cow::Owned(slashed));
    }
    readings
}

/// A path percent-decoded until it stops changing (at most four times), `\` read as `/`,
/// and `.`/`..` segments resolved.
fn normalise(path: &str) -> String {
    let mut text = path.to_owned();
    for _ in 0..4 {
        if !text.contains('%') {
            break;
        }
        let decoded = percent_decode_path(&text);
        if decoded == text {
            break;
        }
        text = decoded;
    }
    let text = text.replace('\\', "/");
    if !text.split('/').any(|s| s == "." || s == "..") {
        return text;
    }
    let mut kept: Vec<&str> = Vec::new();
    for segment in text.split('/') {
        match segment {
            "." => {}
            ".." => {
                if kept.len() > 1 {
                    kept.pop();
                }
            }
            other => kept.push(other),
        }
    }
    kept.join("/")
}

/// Decodes `%XX` and `+` in a query value; bad escapes are kept as they are.
pub(crate) fn percent_decode(value: &str) -> String {
    decode(value, true)
}

/// Decodes `%XX` in a path (`+` is a plus there); bad escapes are kept as they are.
pub(crate) fn percent_decode_path(path: &str) -> String {
    decode(path, false)
}

fn decode(value: &str, plus_is_space: bool) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|&c| (c as char).to_digit(16));
        match b {
            b'%' => match (hex(i + 1), hex(i + 2)) {
                (Some(hi), Some(lo)) => {
                    out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                    i += 3;
                    continue;
                }
                _ => out.push(b),
            },
            b'+' if plus_is_space => out.push(b' '),
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Detects one reading of an HTTP call.
fn detect_one(
    registry: &Registry,
    method: Method,
    parts: UrlParts<'_>,
    graphql: &GraphqlReading,
) -> Detection {
    let path = super::tokenize::prefix(parts.path, MAX_PATH_BYTES);
    let lower_path = path.to_ascii_lowercase();

    // Keep the path segments that name resources.
    let mut kept = [(0usize, 0usize); MAX_SEGMENTS];
    let mut kept_len = 0;
    let mut skip = 0u8;
    let mut is_item = false;
    let mut offset = 0;
    for raw in lower_path.split('/') {
        let start = offset;
        offset += raw.len() + 1;
        // Google's custom methods: `people:createContact`, `{id}:batchUpdate`.
        let (segment, method) = match raw.rsplit_once(':') {
            Some((head, method))
                if !method.is_empty() && method.bytes().all(|b| b.is_ascii_alphabetic()) =>
            {
                (head, Some(start + head.len() + 1))
            }
            _ => (raw, None),
        };
        if segment.is_empty() {
        } else if skip > 0 {
            skip -= 1;
            is_item = true;
        } else if is_version_segment(segment) {
        } else if is_id_like(segment) {
            is_item = true;
        } else {
            is_item = false;
            if let Some(slot) = kept.get_mut(kept_len) {
                *slot = (start, start + segment.len());
                kept_len += 1;
            }
            if let Some(&count) = registry.skip_after.get(segment) {
                skip = count;
            }
        }
        if let Some(method_start) = method {
            if let Some(slot) = kept.get_mut(kept_len) {
                *slot = (method_start, start + raw.len());
                kept_len += 1;
            }
        }
    }
    let kept = kept.get(..kept_len).unwrap_or(&[]);
    let mut segments: [&str; MAX_SEGMENTS] = [""; MAX_SEGMENTS];
    for (slot, &(s, e)) in segments.iter_mut().zip(kept) {
        *slot = lower_path.get(s..e).unwrap_or("");
    }
    let segments = segments.get(..kept_len).unwrap_or(&[]);

    let host: Cow<'_, str> = if !parts.host.is_ascii() {
        Cow::Owned(ascii_host(parts.host))
    } else if parts.host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(parts.host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(parts.host)
    };
    // A base URL's origin (scheme, host and port) before the host alone.
    let by_origin = if registry.origins.is_empty() {
        None
    } else {
        origin_keys(parts.scheme, &host, parts.port)
            .iter()
            .find_map(|key| registry.origins.get(key.as_str()).copied())
    };
    let found = match by_origin {
        Some(id) => HostSystem::Known(id),
        None => host_system(registry, &host, segments),
    };
    let (system, known_host) = match found {
        HostSystem::Known(id) => (Cow::Borrowed(registry.system_name(id)), true),
        HostSystem::Named(name) => (Cow::Borrowed(name), false),
        HostSystem::Unknown => (Cow::Borrowed(UNKNOWN_SYSTEM), false),
    };

    // The resource words, with their camelCase humps (`sendMail`), from the original path.
    let mut clean = String::with_capacity(path.len());
    for &(s, e) in kept {
        clean.push('/');
        clean.push_str(path.get(s..e).unwrap_or(""));
    }
    let words = Words::new(&clean, Segments::Slashes);
    let verb_in_path = |accept: fn(Verb) -> bool| path_verb(registry, &words, accept);

    let is_graphql = (0..words.len()).any(|i| words.word(i) == "graphql");
    // A write verb the path names is a reading too (`POST /notes/delete` with a
    // GraphQL-looking body).
    let named_write = match method {
        Method::Post => verb_in_path(|v| !v.is_read()),
        _ => None,
    };
    // At a GraphQL endpoint (its path, or a known host's body that is a GraphQL request, as
    // monday.com's `/v2` takes) a GET or POST does what its operations do; anywhere else
    // operations are one more reading, since a REST server would act on the method.
    let endpoint = (is_graphql || (graphql.request && known_host))
        && matches!(method, Method::Post | Method::Read)
        && named_write.is_none();
    let mut operations: Vec<&graphql::Operation> = graphql.operations.iter().collect();
    if is_graphql {
        operations.extend(graphql.bare.iter().flatten());
    }
    let operation_reading = operations
        .into_iter()
        .map(|operation| graphql::detect_field(registry, operation))
        .reduce(graphql::FieldDetection::riskier)
        .map(|field| Detection {
            face_verb: None,
            system: system.to_string(),
            verb: field.verb,
            target: field.target,
            source: Source::Url,
            recognised: known_host && field.recognised,
            risk: None,
        });
    if endpoint {
        if let Some(found) = operation_reading {
            return found;
        }
        if is_graphql {
            let mut found = Detection::unrecognised(Source::Url);
            found.system = system.into_owned();
            return found;
        }
    }

    // A read verb in a write's path (`POST /search`) is believed only for a host the
    // registry knows; on any other host the path is the caller's to shape.
    let post_accepts: fn(Verb) -> bool = if known_host {
        |_| true
    } else {
        |verb| !verb.is_read()
    };
    let (verb, verb_at) = match method {
        Method::Read => match verb_in_path(Verb::is_read) {
            Some((at, verb)) => (Some(verb), Some(at)),
            None if segments.contains(&"search") || has_search_param(registry, parts.query) => {
                (Some(Verb::Search), None)
            }
            None if is_item || !is_plural(registry, &words) => (Some(Verb::Get), None),
            None => (Some(Verb::List), None),
        },
        Method::Delete => (Some(Verb::Delete), None),
        Method::Post => match verb_in_path(post_accepts) {
            Some((at, verb)) => (Some(verb), Some(at)),
            None if is_item => (Some(Verb::Update), None),
            None => (Some(Verb::Create), None),
        },
        Method::Put => match verb_in_path(is_strong) {
            Some((at, verb)) => (Some(verb), Some(at)),
            None => (Some(Verb::Update), None),
        },
        Method::Other => (None, None),
    };

    let mut target = [0usize; MAX_TARGET_WORDS];
    let len = url_target(registry, &words, verb_at, &mut target);
    let target = target.get(..len).unwrap_or(&[]);
    let verb_word = verb_at.map_or("", |i| words.word(i));
    let verb = verb.map(|v| apply_noun_rules(registry, v, verb_word, &words, target));
    // Noun rules may turn a write's verb into a read (`POST …/query`); on an unknown host
    // that is the caller's shaping again.
    let verb = verb.filter(|v| method == Method::Read || known_host || !v.is_read());
    let found = Detection {
        face_verb: None,
        system: system.into_owned(),
        verb: verb.unwrap_or(match method {
            Method::Post => Verb::Create,
            _ => Verb::Write,
        }),
        target: join_words(&words, target),
        source: Source::Url,
        recognised: known_host && verb.is_some(),
        risk: None,
    };
    match operation_reading {
        Some(operations) => found.riskier(operations),
        None => found,
    }
}

/// Verbs strong enough to beat PUT/PATCH's update.
fn is_strong(verb: Verb) -> bool {
    matches!(
        verb,
        Verb::Send
            | Verb::Reply
            | Verb::Share
            | Verb::Upload
            | Verb::Pay
            | Verb::Approve
            | Verb::Execute
    )
}

/// The first accepted verb word of the last path segment (`chat.postMessage`,
/// `/messages/send`), else the last strong one anywhere (`/upload/drive/v3/files`), so that
/// resource names such as ClickUp's `/list/{id}/task` do not read as verbs.
fn path_verb(
    registry: &Registry,
    words: &Words,
    accept: fn(Verb) -> bool,
) -> Option<(usize, Verb)> {
    let n = words.len();
    if n == 0 {
        return None;
    }
    let last_segment = words.segment(n - 1);
    let mut in_last = None;
    let mut strong = None;
    for i in 0..n {
        let Some(&verb) = registry.verbs.get(words.word(i)) else {
            continue;
        };
        if !accept(verb) || is_compound(registry, words, i) {
            continue;
        }
        if words.segment(i) == last_segment {
            if in_last.is_none() {
                in_last = Some((i, verb));
            }
        } else if is_strong(verb) {
            strong = Some((i, verb));
        }
    }
    in_last.or(strong)
}

/// A write verb word that starts a plural noun (`merge_requests`) names a resource.
fn is_compound(registry: &Registry, words: &Words, i: usize) -> bool {
    let is_write = registry
        .verbs
        .get(words.word(i))
        .is_some_and(|verb| !verb.is_read());
    is_write && words.joined_to_next(i) && {
        let next = words.word(i + 1);
        !registry.is_filler(next) && next.len() > 2 && next.ends_with('s') && !next.ends_with("ss")
    }
}

/// The words of the last segment that has any besides the verb and fillers; verb words of the
/// last segment are left out too (`PUT /pulls/1/merge` → `pulls`), earlier ones are nouns
/// (`/transfer/create` → `transfer`).
fn url_target(
    registry: &Registry,
    words: &Words,
    verb_at: Option<usize>,
    out: &mut [usize; MAX_TARGET_WORDS],
) -> usize {
    let last_segment = words.segment(words.len().saturating_sub(1));
    let is_noun = |i: usize| {
        Some(i) != verb_at
            && !registry.is_filler(words.word(i))
            && !(words.segment(i) == last_segment
                && registry.verbs.contains_key(words.word(i))
                && !is_compound(registry, words, i))
    };
    let Some(segment) = (0..words.len())
        .rev()
        .find(|&i| is_noun(i))
        .map(|i| words.segment(i))
    else {
        return 0;
    };
    let mut len = 0;
    for i in (0..words.len()).filter(|&i| words.segment(i) == segment && is_noun(i)) {
        if let Some(slot) = out.get_mut(len) {
            *slot = i;
            len += 1;
        }
    }
    len
}

/// True when the last resource word looks plural (`messages`, `payment_intents`).
fn is_plural(registry: &Registry, words: &Words) -> bool {
    let Some(last) = (0..words.len())
        .rev()
        .map(|i| words.word(i))
        .find(|w| !registry.is_filler(w))
    else {
        return false;
    };
    matches!(last, "children" | "people")
        || (last.len() > 2 && last.ends_with('s') && !last.ends_with("ss") && !last.ends_with("us"))
}

fn has_search_param(registry: &Registry, query: &str) -> bool {
    query
        .split('&')
        .map(|pair| pair.split_once('=').map_or(pair, |(name, _)| name))
        .any(|name| registry.search_params.contains_key(name))
}

/// `v1`, `v1.0`, `v2beta1`, `2010-04-01`, `beta`: a version, not a resource.
fn is_version_segment(segment: &str) -> bool {
    if segment == "beta" || segment == "latest" {
        return true;
    }
    if let Some(rest) = segment.strip_prefix('v') {
        if rest.bytes().next().is_some_and(|b| b.is_ascii_digit())
            && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        {
            return true;
        }
    }
    super::tokenize::is_version(segment)
        || (segment.contains('.') && segment.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        || (segment.len() >= 7
            && segment.bytes().all(|b| b.is_ascii_digit() || b == b'-')
            && segment.contains('-'))
}

/// True for segments that are ids or names rather than resource words.
pub(crate) fn is_id_like(segment: &str) -> bool {
    if segment.len() > MAX_NAME_BYTES / 4 {
        return true;
    }
    if segment.bytes().any(|b| {
        matches!(
            b,
            b'@' | b'{'
                | b'}'
                | b'%'
                | b'='
                | b'+'
                | b','
                | b'~'
                | b':'
                | b'$'
                | b'!'
                | b'*'
                | b'\''
                | b'('
                | b')'
                | b'|'
        ) || b >= 0x80
    }) {
        return true;
    }
    let digits = segment.bytes().filter(u8::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    if digits == segment.len() || (digits >= 2 && segment.len() >= 6) || segment.len() >= 10 {
        return true;
    }
    // `PROJ-123`, `cus_4x`: a part that mixes in digits, joined to another part.
    segment.contains(['-', '_'])
        && segment.split(['-', '_', '.']).any(|part| {
            part.bytes().any(|b| b.is_ascii_digit()) && !super::tokenize::is_version(part)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_in_every_shape() {
        let parts = split_url("https://user:pw@API.GitHub.com:443/repos/a/b?q=1#frag");
        assert_eq!(
            (parts.host, parts.path, parts.query),
            ("API.GitHub.com", "/repos/a/b", "q=1")
        );
        let parts = split_url("http://[::1]:8080/x");
        assert_eq!((parts.host, parts.path), ("[::1]", "/x"));
        let parts = split_url("/v1/customers?limit=3");
        assert_eq!(
            (parts.host, parts.path, parts.query),
            ("", "/v1/customers", "limit=3")
        );
        let parts = split_url("api.stripe.com/v1/charges");
        assert_eq!((parts.host, parts.path), ("api.stripe.com", "/v1/charges"));
        let parts = split_url("//cdn.example.com/a");
        assert_eq!(parts.host, "cdn.example.com");
        let parts = split_url("repos/a/b");
        assert_eq!((parts.host, parts.path), ("", "repos/a/b"));
        let parts = split_url("");
        assert_eq!((parts.host, parts.path, parts.query), ("", "", ""));
        let parts = split_url("localhost:3000/api");
        assert_eq!((parts.host, parts.path), ("localhost", "/api"));
    }

    #[test]
    fn ids_and_versions_are_recognised() {
        for id in [
            "12345",
            "cus_nffrfeufnv2hib",
            "proj-123",
            "c024be91l",
            "a@b.c",
            "%2fpath",
            "{id}",
            "550e8400-e29b-41d4-a716-446655440000",
        ] {
            assert!(is_id_like(id), "{id}");
        }
        for word in [
            "messages",
            "payment_intents",
            "oauth2",
            "s3",
            "hello-world",
            "chat.postmessage",
            "me",
        ] {
            assert!(!is_id_like(word), "{word}");
        }
        for version in ["v1", "v1.0", "v3beta1", "2010-04-01", "beta"] {
            assert!(is_version_segment(version), "{version}");
        }
        assert!(!is_version_segment("view"));
    }

    fn http(method: &str, url: &str) -> (String, Verb, Option<String>, bool) {
        let found = detect_http(Registry::shared(), method, url, None);
        (found.system, found.verb, found.target, found.recognised)
    }

    #[test]
    fn methods_follow_the_rules() {
        let gh = "https://api.github.com";
        assert_eq!(http("GET", &format!("{gh}/repos/o/r/issues")).1, Verb::List);
        assert_eq!(
            http("GET", &format!("{gh}/repos/o/r/issues/7")).1,
            Verb::Get
        );
        assert_eq!(
            http("GET", &format!("{gh}/search/issues?q=x")).1,
            Verb::Search
        );
        assert_eq!(
            http("POST", &format!("{gh}/repos/o/r/issues")).1,
            Verb::Create
        );
        assert_eq!(
            http("PATCH", &format!("{gh}/repos/o/r/issues/7")).1,
            Verb::Update
        );
        assert_eq!(http("DELETE", &format!("{gh}/repos/o/r")).1, Verb::Delete);
        assert_eq!(
            http("PUT", &format!("{gh}/repos/o/r/pulls/1/merge")).1,
            Verb::Update
        );
        let merge_requests = "https://gitlab.com/api/v4/projects/1/merge_requests";
        assert_eq!(http("POST", merge_requests).1, Verb::Create);
        assert_eq!(
            http("POST", "https://api.dropboxapi.com/2/files/delete_v2").1,
            Verb::Delete
        );
        let (system, verb, target, recognised) = http("FROB", &format!("{gh}/user"));
        assert_eq!(
            (system.as_str(), verb, recognised),
            ("github", Verb::Write, false)
        );
        assert_eq!(target.as_deref(), Some("user"));
    }

    #[test]
    fn unknown_hosts_are_named_but_not_recognised() {
        let (system, verb, _, recognised) = http("POST", "https://api.someweirdcrm.io/v2/leads");
        assert_eq!(
            (system.as_str(), verb, recognised),
            ("someweirdcrm", Verb::Create, false)
        );
        let (system, _, _, _) = http("GET", "http://[2001:db8::1]:8443/x");
        assert_eq!(system, UNKNOWN_SYSTEM);
    }
}

//! Detection from names: MCP tool names, SDK paths and plain function names.
//!
//! The steps, each a lookup in the [`Registry`]:
//! 1. strip an `mcp__server__` prefix (the server is the system hint) and split into words;
//! 2. an exact override wins (`slack_add_reaction` → update);
//! 3. the system: two words then one off the front (`google_calendar_…`), else the MCP
//!    server, else a system named later in the name (`search_gmail_messages`); an umbrella
//!    system (`google`, `microsoft`) is narrowed by a noun (`list-mail-messages` → outlook);
//! 4. the verb: the first verb word of a tool or function name, or a riskier write verb
//!    word anywhere after it (`get_delete_repository` deletes, `get_send_email` sends), the
//!    last of an SDK path
//!    (`github.get_repo().create_issue` creates);
//! 5. noun rules (`create_refund` → pay), then the target from the words left over.

use attest_policy::{Risk, Source, Verb};

use super::registry::{Registry, SysId};
use super::tokenize::{Segments, Words, MAX_WORDS};
use super::{Detection, UNKNOWN_SYSTEM};

/// Most words in a target.
pub(crate) const MAX_TARGET_WORDS: usize = 8;

/// Which kind of name is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// An MCP tool name: the first verb word decides, unless a riskier write word follows.
    Tool,
    /// An SDK path: the last verb word decides, the target is the nearest resource.
    Sdk,
    /// A function name: like a tool, but a guess.
    Function,
}

impl Style {
    fn source(self) -> Source {
        match self {
            Style::Tool => Source::Mcp,
            Style::Sdk => Source::Sdk,
            Style::Function => Source::Heuristic,
        }
    }
}

/// Splits `mcp__server__tool` into (`server`, `tool`); other names are returned whole.
pub(crate) fn split_mcp_prefix(name: &str) -> (Option<&str>, &str) {
    let trimmed = name.trim();
    let Some(head) = trimmed.get(..5) else {
        return (None, trimmed);
    };
    if !head.eq_ignore_ascii_case("mcp__") {
        return (None, trimmed);
    }
    let rest = trimmed.get(5..).unwrap_or("");
    match rest.split_once("__") {
        Some((server, tool)) if !server.is_empty() && !tool.is_empty() => (Some(server), tool),
        _ => (None, rest),
    }
}

/// Detects a tool name, SDK path or function name.
pub(crate) fn detect_name(
    registry: &Registry,
    name: &str,
    server: Option<&str>,
    style: Style,
) -> Detection {
    let (prefix_server, tool) = split_mcp_prefix(name);
    let hint = server
        .or(prefix_server)
        .and_then(|server| server_system(registry, server));
    let words = Words::new(tool, Segments::Dotted);
    let n = words.len();
    let verbs = verb_table(registry, &words);
    // Words that are neither system, verb nor target.
    let mut used = [false; MAX_WORDS];
    for (i, slot) in used.iter_mut().enumerate().take(n) {
        *slot = registry.is_filler(words.word(i));
    }

    // The system off the front.
    let first = (0..n).find(|&i| !used[i]);
    let front = first.and_then(|at| registry.system_at(&words, at).map(|(id, w)| (id, at, w)));
    if let Some((_, at, width)) = front {
        for slot in used.iter_mut().skip(at).take(width) {
            *slot = true;
        }
    }

    // Exact overrides.
    if let Some(found) = find_override(registry, &words, &verbs, front, hint, style) {
        return found;
    }

    let umbrella = front.map(|(id, _, _)| id).or(hint);
    let mut system = match (front, hint) {
        (Some((id, _, _)), _) if !registry.is_umbrella(id) => Some(id),
        (_, Some(id)) if !registry.is_umbrella(id) => Some(id),
        _ => None,
    };
    // An umbrella named by the front or the server is narrowed by a noun.
    // A system named later in the name; its word stays the target if nothing else is left.
    let mut named_later: Option<usize> = None;
    if system.is_none() {
        if let Some((id, at)) = umbrella.and_then(|id| route(registry, id, &words, &mut used)) {
            system = Some(id);
            named_later = at;
        }
    }
    if system.is_none() {
        for i in 0..n {
            if used[i] || verbs[i].is_some() {
                continue;
            }
            if let Some((id, width)) = registry.system_at(&words, i) {
                for slot in used.iter_mut().skip(i).take(width) {
                    *slot = true;
                }
                let routed = route(registry, id, &words, &mut used);
                system = routed.map(|(routed, _)| routed).or(Some(id));
                named_later = Some(i);
                break;
            }
        }
    }
    if system.is_none() {
        system = umbrella;
    }
    // Other words naming the same system are not the target (`search_stripe_documentation`).
    if let Some(id) = system {
        let mut i = 0;
        while i < n {
            if !used[i] && verbs[i].is_none() {
                if let Some((found, width)) = registry.system_at(&words, i) {
                    if found == id {
                        for slot in used.iter_mut().skip(i).take(width) {
                            *slot = true;
                        }
                        named_later.get_or_insert(i);
                        i += width;
                        continue;
                    }
                }
            }
            i += 1;
        }
    }

    // The verb.
    let candidates = (0..n).filter(|&i| !used[i]);
    let verb_at = match style {
        // The first verb word of the last segment that has one (`ses.send_email` sends).
        Style::Sdk => candidates
            .clone()
            .rfind(|&i| verbs[i].is_some())
            .and_then(|last| {
                candidates
                    .clone()
                    .find(|&i| words.segment(i) == words.segment(last) && verbs[i].is_some())
            }),
        // The first verb word, unless a riskier verb word stands anywhere after it:
        // `get_delete_repository`, `list_and_delete` and `search_and_destroy` delete,
        // `get_send_email` sends, whatever word leads.
        Style::Tool | Style::Function => {
            let first = candidates.clone().find(|&i| verbs[i].is_some());
            let riskiest_later = candidates
                .clone()
                .filter(|&i| Some(i) > first && counts_anywhere(words.word(i), verbs[i]))
                .fold(None, |best: Option<usize>, i| match best {
                    Some(b) if rank(verbs[b]) >= rank(verbs[i]) => Some(b),
                    _ => Some(i),
                });
            match (first, riskiest_later) {
                (Some(f), Some(l)) if rank(verbs[l]) > rank(verbs[f]) => Some(l),
                _ => first,
            }
        }
    };
    let verb = verb_at.and_then(|i| verbs[i]);

    // The target.
    let mut target = [0usize; MAX_TARGET_WORDS];
    let mut len = match (style, verb_at) {
        (Style::Sdk, Some(at)) => sdk_target(&words, &used, at, &mut target),
        _ => name_target(&words, &verbs, &used, verb_at, &mut target),
    };
    if len == 0 {
        if let Some(at) = named_later {
            target[0] = at;
            len = 1;
        }
    }
    let target = &target[..len.min(MAX_TARGET_WORDS)];
    let verb_word = verb_at.map_or("", |i| words.word(i));
    let verb = verb.map(|v| apply_noun_rules(registry, v, verb_word, &words, target));

    let recognised = system.is_some() && verb.is_some();
    Detection {
        face_verb: None,
        system: system
            .map_or(UNKNOWN_SYSTEM, |id| registry.system_name(id))
            .to_owned(),
        verb: verb.unwrap_or(Verb::Write),
        target: join_words(&words, target),
        source: style.source(),
        recognised,
        risk: None,
    }
}

/// Detects a tool on a server the user named: the server is the system (its canonical name
/// when the registry knows it, else the name itself in lower case), unless it is an umbrella
/// (`google`), which the tool name narrows as usual. The call is recognised when the verb is.
pub(crate) fn detect_on_named_server(registry: &Registry, name: &str, server: &str) -> Detection {
    let named = server.trim();
    let mut found = detect_name(registry, name, Some(named), Style::Tool);
    if named.is_empty() {
        return found;
    }
    let words = Words::new(named, Segments::Dotted);
    let system = match registry.system_at(&words, 0) {
        Some((id, width)) if width == words.len() => {
            if registry.is_umbrella(id) {
                return found;
            }
            registry.system_name(id).to_owned()
        }
        _ => named.to_ascii_lowercase(),
    };
    // Without a system, detection reports no call as recognised: whether it found a verb is
    // whether the name holds a verb word (the override path recognises by itself).
    let verb_found = found.recognised
        || (found.system == UNKNOWN_SYSTEM && {
            let (_, tool) = split_mcp_prefix(name);
            let words = Words::new(tool, Segments::Dotted);
            (0..words.len()).any(|i| {
                !registry.is_filler(words.word(i)) && registry.verbs.contains_key(words.word(i))
            })
        });
    found.system = system;
    found.recognised = verb_found;
    found
}

/// The system an umbrella's first routed noun names (`mail` under microsoft → outlook).
/// A word that names the routed system itself (`gmail`) is used up, and its position
/// returned; a noun (`messages`) stays in the target.
fn route(
    registry: &Registry,
    umbrella: SysId,
    words: &Words,
    used: &mut [bool; MAX_WORDS],
) -> Option<(SysId, Option<usize>)> {
    let (at, routed) = (0..words.len())
        .filter(|&i| !used[i])
        .find_map(|i| registry.route(umbrella, words.word(i)).map(|id| (i, id)))?;
    if let Some((id, width)) = registry.system_at(words, at) {
        if id == routed {
            for slot in used.iter_mut().skip(at).take(width) {
                *slot = true;
            }
            return Some((routed, Some(at)));
        }
    }
    Some((routed, None))
}

/// The system an MCP server's name points to (`@modelcontextprotocol/server-github` → github).
/// The system a server name names; when it names several, the last: a host
/// application puts its own name first (Claude Code calls claude.ai's Gmail connector
/// `claude_ai_Gmail`, which is Gmail, not Anthropic).
fn server_system(registry: &Registry, server: &str) -> Option<SysId> {
    let words = Words::new(server, Segments::Dotted);
    let mut named = None;
    let mut i = 0;
    while i < words.len() {
        match registry.system_at(&words, i) {
            Some((id, width)) if !registry.is_filler(words.word(i)) => {
                named = Some(id);
                i += width.max(1);
            }
            _ => i += 1,
        }
    }
    named
}

fn find_override(
    registry: &Registry,
    words: &Words,
    verbs: &[Option<Verb>; MAX_WORDS],
    front: Option<(SysId, usize, usize)>,
    hint: Option<SysId>,
    style: Style,
) -> Option<Detection> {
    if registry.overrides.is_empty() {
        return None;
    }
    let (system, start) = match (front, hint) {
        (Some((id, at, width)), _) => (Some(id), at + width),
        (None, Some(id)) => (Some(id), 0),
        (None, None) => (None, 0),
    };
    let mut buffer = [0u8; KEY_BUFFER];
    let limit = registry.longest_override;
    let found = system
        .and_then(|id| {
            let key = key_in(&mut buffer, limit, registry.system_name(id), words, start)?;
            registry.overrides.get(key)
        })
        .or_else(|| {
            registry
                .overrides
                .get(key_in(&mut buffer, limit, "", words, 0)?)
        })?;
    let system = found.system.or(system);
    let mut target = [0usize; MAX_TARGET_WORDS];
    let mut used = [false; MAX_WORDS];
    for (i, slot) in used.iter_mut().enumerate().take(words.len()) {
        *slot = i < start || registry.is_filler(words.word(i));
    }
    let verb_at = (start..words.len()).find(|&i| verbs[i].is_some());
    let len = name_target(words, verbs, &used, verb_at, &mut target);
    Some(Detection {
        face_verb: None,
        system: system
            .map_or(UNKNOWN_SYSTEM, |id| registry.system_name(id))
            .to_owned(),
        verb: found.verb,
        target: join_words(words, target.get(..len).unwrap_or(&[])),
        source: style.source(),
        recognised: true,
        risk: found.risk,
    })
}

/// Room for an override key on the stack; longer names have no override.
const KEY_BUFFER: usize = 160;

/// The override key `system:word_word` written into `buffer`, or `None` when it is longer
/// than `limit` (the longest key in the registry) or the buffer.
fn key_in<'b>(
    buffer: &'b mut [u8; KEY_BUFFER],
    limit: usize,
    system: &str,
    words: &Words,
    start: usize,
) -> Option<&'b str> {
    let mut len = 0;
    let mut push = |part: &str| -> Option<()> {
        let end = len + part.len();
        if end > limit {
            return None;
        }
        buffer.get_mut(len..end)?.copy_from_slice(part.as_bytes());
        len = end;
        Some(())
    };
    push(system)?;
    push(":")?;
    for i in start..words.len() {
        if i > start {
            push("_")?;
        }
        push(words.word(i))?;
    }
    std::str::from_utf8(buffer.get(..len)?).ok()
}

/// Verb words that name their verb wherever they stand in a tool name: the canonical
/// write verbs and the synonyms that are not also nouns. The others count only first,
/// because tool names use them as nouns (`get_pull_request`, `get_commit`, `list_tags`,
/// `get_run`, `get_refund`, `read_email`, `get_merge_request_diffs`).
const ANYWHERE_WORDS: [&str; 20] = [
    "create", "update", "delete", "send", "reply", "share", "upload", "pay", "approve", "execute",
    "write", "remove", "destroy", "drop", "purge", "erase", "wipe", "post", "publish", "transfer",
];

/// Whether a verb word after the first one can take over: every delete word (a delete
/// hidden behind a read is the case that matters most), and [`ANYWHERE_WORDS`].
fn counts_anywhere(word: &str, verb: Option<Verb>) -> bool {
    match verb {
        Some(Verb::Delete) => true,
        Some(verb) => !verb.is_read() && ANYWHERE_WORDS.contains(&word),
        None => false,
    }
}

/// How risky a verb word reads: its tier, a delete above a payment of the same tier.
fn rank(verb: Option<Verb>) -> (Option<Risk>, bool) {
    (verb.map(Verb::default_risk), verb == Some(Verb::Delete))
}

/// The verb of each word, looked up once.
fn verb_table(registry: &Registry, words: &Words) -> [Option<Verb>; MAX_WORDS] {
    let mut verbs = [None; MAX_WORDS];
    for (i, slot) in verbs.iter_mut().enumerate().take(words.len()) {
        *slot = registry.verbs.get(words.word(i)).copied();
    }
    verbs
}

/// The target of a tool or function name: the words left over, less a second verb
/// chained to the first by `or`/`and` (`create_or_update_file` → `file`).
fn name_target(
    words: &Words,
    verbs: &[Option<Verb>; MAX_WORDS],
    used: &[bool; MAX_WORDS],
    verb_at: Option<usize>,
    out: &mut [usize; MAX_TARGET_WORDS],
) -> usize {
    let n = words.len();
    let mut skip_until = 0;
    if let Some(at) = verb_at {
        let mut j = at + 1;
        while matches!(words.word(j), "or" | "and") && verbs.get(j + 1).is_some_and(Option::is_some)
        {
            j += 2;
        }
        if j < n {
            skip_until = j;
        }
    }
    let mut len = 0;
    for (i, &is_used) in used.iter().enumerate().take(n) {
        if is_used || Some(i) == verb_at || (verb_at.is_some_and(|at| i > at) && i < skip_until) {
            continue;
        }
        if let Some(slot) = out.get_mut(len) {
            *slot = i;
            len += 1;
        }
    }
    len
}

/// The target of an SDK path: the other words of the verb's segment, else those of the
/// nearest segment before it (`stripe.Transfer.create` → `transfer`).
fn sdk_target(
    words: &Words,
    used: &[bool; MAX_WORDS],
    verb_at: usize,
    out: &mut [usize; MAX_TARGET_WORDS],
) -> usize {
    let is_noun = |i: usize| !used[i] && i != verb_at;
    let mut segment = words.segment(verb_at);
    loop {
        let mut len = 0;
        for i in (0..words.len()).filter(|&i| words.segment(i) == segment && is_noun(i)) {
            if let Some(slot) = out.get_mut(len) {
                *slot = i;
                len += 1;
            }
        }
        if len > 0 || segment == 0 {
            return len;
        }
        segment -= 1;
    }
}

/// Applies the first noun rule whose verb and nouns match.
///
/// `verb_word` is the word the verb came from, if any: a rule's `unless` words cancel it
/// there too (`draft_gmail_message` is not sent).
pub(crate) fn apply_noun_rules(
    registry: &Registry,
    verb: Verb,
    verb_word: &str,
    words: &Words,
    target: &[usize],
) -> Verb {
    for rule in &registry.noun_rules {
        if rule.turns.contains(&verb)
            && target
                .iter()
                .any(|&i| rule.nouns.contains_key(words.word(i)))
            && !rule.unless.contains_key(verb_word)
            && !target
                .iter()
                .any(|&i| rule.unless.contains_key(words.word(i)))
        {
            return rule.into;
        }
    }
    verb
}

/// The target words joined with `_`, or `None` when there are none.
pub(crate) fn join_words(words: &Words, target: &[usize]) -> Option<String> {
    if target.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(24);
    for (k, &i) in target.iter().enumerate() {
        if k > 0 {
            out.push('_');
        }
        out.push_str(words.word(i));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, server: Option<&str>) -> Detection {
        let registry = Registry::shared();
        detect_name(registry, name, server, Style::Tool)
    }

    #[test]
    fn mcp_prefixes_are_split() {
        assert_eq!(
            split_mcp_prefix("mcp__github__create_issue"),
            (Some("github"), "create_issue")
        );
        assert_eq!(split_mcp_prefix("MCP__a__b__c"), (Some("a"), "b__c"));
        assert_eq!(split_mcp_prefix("mcp__"), (None, ""));
        assert_eq!(split_mcp_prefix("mcp"), (None, "mcp"));
        assert_eq!(split_mcp_prefix("mcp__x"), (None, "x"));
    }

    #[test]
    fn the_server_is_a_hint_and_the_front_of_the_name_beats_it() {
        let found = tool("create_issue", Some("@modelcontextprotocol/server-github"));
        assert_eq!(
            (found.system.as_str(), found.verb),
            ("github", Verb::Create)
        );
        let found = tool("slack_post_message", Some("zapier"));
        assert_eq!((found.system.as_str(), found.verb), ("slack", Verb::Send));
        let found = tool("list_teams", Some("linear"));
        assert_eq!(found.system, "linear");
    }

    #[test]
    fn umbrellas_route_by_noun_and_yield_to_named_systems() {
        let found = tool("list-mail-messages", Some("ms-365"));
        assert_eq!((found.system.as_str(), found.verb), ("outlook", Verb::List));
        let found = tool("search_gmail_messages", Some("google-workspace"));
        assert_eq!(found.system, "gmail");
        assert_eq!(found.target.as_deref(), Some("messages"));
    }

    #[test]
    fn targets_drop_chained_verbs_but_keep_lone_nouns() {
        let found = tool("create_or_update_file", Some("github"));
        assert_eq!(found.target.as_deref(), Some("file"));
        let found = tool("send_email", None);
        assert_eq!(
            (found.verb, found.target.as_deref()),
            (Verb::Send, Some("email"))
        );
        assert!(!found.recognised);
    }

    #[test]
    fn sdk_paths_take_the_last_verb() {
        let registry = Registry::shared();
        let found = detect_name(registry, "stripe.Transfer.create", None, Style::Sdk);
        assert_eq!((found.system.as_str(), found.verb), ("stripe", Verb::Pay));
        assert_eq!(found.target.as_deref(), Some("transfer"));
        let found = detect_name(
            registry,
            "gmail.users().messages().send()",
            None,
            Style::Sdk,
        );
        assert_eq!(found.verb, Verb::Send);
        assert_eq!(found.target.as_deref(), Some("messages"));
    }

    #[test]
    fn the_riskiest_write_word_anywhere_wins_and_noun_like_words_only_lead() {
        for (name, verb) in [
            ("get_send_email", Verb::Send),
            ("list_and_create_user", Verb::Create),
            ("search_and_destroy", Verb::Delete),
            ("get_delete_repository", Verb::Delete),
            ("read_then_upload_file", Verb::Upload),
            ("list_and_pay_invoice", Verb::Pay),
            ("create_and_delete_branch", Verb::Delete),
            ("update_and_publish_page", Verb::Send),
            // A less risky word after the first does not lower it.
            ("create_or_update_file", Verb::Create),
            ("send_and_update_status", Verb::Send),
            // Noun-like synonyms count only first.
            ("get_pull_request", Verb::Get),
            ("get_commit", Verb::Get),
            ("list_tags", Verb::List),
            ("get_run", Verb::Get),
            ("get_refund", Verb::Get),
            ("read_email", Verb::Read),
            ("get_merge_request_diffs", Verb::Get),
        ] {
            assert_eq!(tool(name, None).verb, verb, "{name}");
        }
    }

    #[test]
    fn nothing_known_is_unknown_write() {
        for name in ["", "   ", "__", "zzqx", "mcp____", "💥💥"] {
            let found = tool(name, None);
            assert_eq!(found.system, UNKNOWN_SYSTEM, "{name}");
            assert_eq!(found.verb, Verb::Write, "{name}");
            assert!(!found.recognised, "{name}");
        }
    }
}

//! The detection registry compiled into lookup tables.
//!
//! A registry is built once from YAML (the compiled-in `policies/registry.yaml`, then any
//! file of the user's) and then only read: every lookup on the detection path is a hash of
//! a short word into a table built here, with no regular expressions and no parsing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

use attest_policy::{Risk, Verb};

use super::spec::{RegistryFile, MAX_REGISTRY_BYTES};
use super::tokenize::{is_version, Segments, Words};
use super::{DetectError, DetectInput, Detection};

/// The registry compiled into the binary.
pub(crate) const BUILTIN_YAML: &str = include_str!("../../../../policies/registry.yaml");

/// The name the compiled-in registry has in error messages.
pub(crate) const BUILTIN_ORIGIN: &str = "policies/registry.yaml (built in)";

/// An index into [`Registry::systems`].
pub(crate) type SysId = u16;

/// FNV-1a: the tables hold short words from a trusted file, so a fast hash is enough.
#[derive(Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A hash map keyed by short words.
pub(crate) type Table<V> = HashMap<Box<str>, V, BuildHasherDefault<Fnv>>;

/// One system: its canonical name and, for an umbrella system, the nouns that route to others.
#[derive(Debug, Clone)]
pub(crate) struct SystemEntry {
    pub(crate) name: Box<str>,
    pub(crate) routes: Table<SysId>,
}

/// What a host (or a domain and its subdomains) maps to.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostRule {
    /// The system when no path rule matches.
    pub(crate) system: Option<SysId>,
    /// Path words (consecutive, anywhere in the path) → system, tried in order.
    pub(crate) paths: Vec<(Vec<Box<str>>, SysId)>,
}

/// A noun rule compiled: see `noun_rules` in the registry file.
#[derive(Debug, Clone)]
pub(crate) struct NounRule {
    pub(crate) nouns: Table<()>,
    pub(crate) turns: Vec<Verb>,
    pub(crate) into: Verb,
    pub(crate) unless: Table<()>,
}

/// A fixed answer for one exact tool name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Override {
    pub(crate) system: Option<SysId>,
    pub(crate) verb: Verb,
    pub(crate) risk: Option<Risk>,
}

/// The detection registry: systems and their aliases, hosts and path rules, verb words,
/// noun rules and per-tool overrides, compiled into lookup tables.
///
/// [`Registry::builtin`] is the compiled-in `policies/registry.yaml`;
/// [`Registry::default_with`] adds a file of the user's on top of it (the later file wins
/// where both say something about the same word, host or tool). `Registry::default()` is
/// empty: it recognises nothing, so every write asks.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub(crate) systems: Vec<SystemEntry>,
    /// One-word names and aliases → system.
    pub(crate) names: Table<SysId>,
    /// Two-word aliases: first word → second word → system.
    pub(crate) pairs: Table<Table<SysId>>,
    pub(crate) verbs: Table<Verb>,
    pub(crate) noise: Table<()>,
    pub(crate) noun_rules: Vec<NounRule>,
    /// `system:rest_of_name` or `:whole_name` → override.
    pub(crate) overrides: Table<Override>,
    pub(crate) longest_override: usize,
    pub(crate) hosts: Table<HostRule>,
    /// Base URLs' origins (`http://127.0.0.1:4555`) → system, tried before `hosts`.
    pub(crate) origins: Table<SysId>,
    pub(crate) domains: Table<HostRule>,
    pub(crate) skip_after: Table<u8>,
    pub(crate) search_params: Table<()>,
}

impl Registry {
    /// The compiled-in registry (`policies/registry.yaml`).
    pub fn builtin() -> Result<Registry, DetectError> {
        Registry::from_yaml(BUILTIN_YAML, BUILTIN_ORIGIN)
    }

    /// A registry built from one YAML text alone; `origin` names it in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Registry, DetectError> {
        let mut registry = Registry::default();
        registry.extend_yaml(text, origin)?;
        Ok(registry)
    }

    /// The compiled-in registry with the user's YAML text on top; `origin` names it in errors.
    pub fn default_with(text: &str, origin: &str) -> Result<Registry, DetectError> {
        let mut registry = Registry::builtin()?;
        registry.extend_yaml(text, origin)?;
        Ok(registry)
    }

    /// Adds a YAML text on top of this registry. Nothing changes unless the whole text is valid.
    pub fn extend_yaml(&mut self, text: &str, origin: &str) -> Result<(), DetectError> {
        let file = RegistryFile::parse(text, origin)?;
        let mut next = self.clone();
        next.apply(file, origin)?;
        *self = next;
        Ok(())
    }

    /// Reads a registry file and adds it on top of this registry.
    pub fn extend_file(&mut self, path: &Path) -> Result<(), DetectError> {
        let text = read_capped(path)?;
        self.extend_yaml(&text, &path.display().to_string())
    }

    /// Fixes the system and verb of one exact tool name, beating every other rule.
    ///
    /// The name is split like any tool name, so `register("crm_push", …)` also matches
    /// `crmPush` and `crm.push`. A name that starts with a known system (`slack_add_reaction`)
    /// also matches the rest of the name on that system's MCP server (`add_reaction`).
    pub fn register(&mut self, name: &str, system: &str, verb: Verb) {
        let system = system.trim();
        let id = if system.is_empty() {
            None
        } else {
            self.intern(system).ok()
        };
        self.insert_override(
            name,
            Override {
                system: id,
                verb,
                risk: None,
            },
        );
    }

    /// Makes the host of `base_url` (a configured base URL such as `ATTEST_BASE_URL_GITHUB`'s,
    /// for a self-hosted or proxied vendor) that system's, exactly: detection then knows it as
    /// it knows the vendor's own domain. An empty system or a URL without a host is ignored.
    ///
    /// A base URL with a scheme names its origin (scheme, host and port): two systems on
    /// one host, told apart by their ports, are each their own.
    pub fn base_url(&mut self, system: &str, base_url: &str) {
        let parts = super::url::split_url(base_url);
        let host = parts.host.trim_end_matches('.').to_ascii_lowercase();
        let system = system.trim();
        if host.is_empty() || system.is_empty() {
            return;
        }
        let Ok(id) = self.intern(system) else {
            return;
        };
        if !parts.scheme.is_empty() {
            for key in super::url::origin_keys(parts.scheme, &host, parts.port) {
                self.origins.insert(key.into(), id);
            }
            return;
        }
        self.hosts.insert(
            host.into(),
            HostRule {
                system: Some(id),
                paths: Vec::new(),
            },
        );
    }

    /// [`Registry::base_url`] for every system whose `ATTEST_BASE_URL_<SYSTEM>` is set in
    /// `env` (the variable read-back uses for the same vendor).
    pub fn base_urls_from(&mut self, env: &dyn crate::verification::Env) {
        let found: Vec<(String, String)> = self
            .systems()
            .filter_map(|name| {
                let url = env.var(&crate::verification::base_url_var(name))?;
                Some((name.to_owned(), url))
            })
            .collect();
        for (system, url) in found {
            self.base_url(&system, &url);
        }
    }

    /// Detects the system, verb and target of one call. Never fails and never panics:
    /// what it cannot make sense of is `unknown`/`write` with `recognised: false`.
    pub fn detect(&self, input: &DetectInput<'_>) -> Detection {
        // A child of the action's span when detection runs inside the call.
        let _step = crate::telemetry::step("detect").entered();
        match *input {
            DetectInput::Tool { name, server } => {
                super::tool_name::detect_name(self, name, server, super::tool_name::Style::Tool)
            }
            DetectInput::NamedServerTool { name, server } => {
                super::tool_name::detect_on_named_server(self, name, server)
            }
            DetectInput::Sdk { path } => {
                super::tool_name::detect_name(self, path, None, super::tool_name::Style::Sdk)
            }
            DetectInput::Function { name } => {
                super::tool_name::detect_name(self, name, None, super::tool_name::Style::Function)
            }
            DetectInput::Http { method, url, body } => {
                super::url::detect_http(self, method, url, body)
            }
            DetectInput::Shell { command } => super::shell::detect_command(self, command),
            DetectInput::CodingTool { name, input } => {
                super::coding_tool::detect_coding_tool(self, name, input)
            }
            DetectInput::Manual { system, verb } => Detection::manual(system, verb),
        }
    }

    /// The canonical names of every system, in no particular order.
    pub fn systems(&self) -> impl Iterator<Item = &str> {
        self.systems.iter().map(|s| &*s.name)
    }

    /// The canonical system for a name or alias (`gh` → `github`, `google_calendar` → `calendar`).
    pub fn system_named(&self, name: &str) -> Option<&str> {
        let words = Words::new(name, Segments::Dotted);
        let (id, width) = self.system_at(&words, 0)?;
        (width == words.len()).then(|| self.system_name(id))
    }

    /// The verb a single word means (`forward` → send), if the registry knows it.
    pub fn verb_word(&self, word: &str) -> Option<Verb> {
        self.verbs.get(word.to_ascii_lowercase().as_str()).copied()
    }

    /// How many words have a verb.
    pub fn verb_word_count(&self) -> usize {
        self.verbs.len()
    }

    pub(crate) fn system_name(&self, id: SysId) -> &str {
        self.systems
            .get(usize::from(id))
            .map_or("unknown", |s| &*s.name)
    }

    pub(crate) fn is_umbrella(&self, id: SysId) -> bool {
        self.systems
            .get(usize::from(id))
            .is_some_and(|s| !s.routes.is_empty())
    }

    pub(crate) fn route(&self, umbrella: SysId, word: &str) -> Option<SysId> {
        self.systems
            .get(usize::from(umbrella))
            .and_then(|s| s.routes.get(word).copied())
    }

    /// A word that carries no meaning: a noise word, a version or a number.
    pub(crate) fn is_filler(&self, word: &str) -> bool {
        self.noise.contains_key(word)
            || is_version(word)
            || word.bytes().all(|b| b.is_ascii_digit())
    }

    /// The system named by the words starting at `at` (two-word aliases first), and how many words it took.
    pub(crate) fn system_at(&self, words: &Words, at: usize) -> Option<(SysId, usize)> {
        let first = words.word(at);
        if first.is_empty() {
            return None;
        }
        if at + 1 < words.len() {
            if let Some(id) = self
                .pairs
                .get(first)
                .and_then(|second| second.get(words.word(at + 1)))
            {
                return Some((*id, 2));
            }
        }
        self.names.get(first).map(|id| (*id, 1))
    }

    fn intern(&mut self, name: &str) -> Result<SysId, DetectError> {
        if let Some(pos) = self.systems.iter().position(|s| &*s.name == name) {
            return SysId::try_from(pos).map_err(|_| too_many_systems());
        }
        let id = SysId::try_from(self.systems.len()).map_err(|_| too_many_systems())?;
        self.systems.push(SystemEntry {
            name: name.into(),
            routes: Table::default(),
        });
        self.add_alias(name, id);
        Ok(id)
    }

    fn add_alias(&mut self, alias: &str, id: SysId) {
        match alias.split_once('_') {
            Some((first, second)) if !second.contains('_') => {
                self.pairs
                    .entry(first.into())
                    .or_default()
                    .insert(second.into(), id);
            }
            Some(_) => {}
            None => {
                self.names.insert(alias.into(), id);
            }
        }
    }

    /// The override key of a name: `system:rest` when it starts with a system, else `:name`.
    fn insert_override(&mut self, name: &str, value: Override) {
        let words = Words::new(name, Segments::Dotted);
        let (system, start) = match self.system_at(&words, 0) {
            Some((id, width)) => (self.system_name(id).to_owned(), width),
            None => (String::new(), 0),
        };
        let key = override_key(&system, &words, start);
        self.longest_override = self.longest_override.max(key.len());
        self.overrides.insert(key.into(), value);
        if !system.is_empty() {
            // The whole name works too, from a server that is not the system's own.
            let whole = override_key("", &words, 0);
            self.longest_override = self.longest_override.max(whole.len());
            self.overrides.insert(whole.into(), value);
        }
    }

    fn apply(&mut self, file: RegistryFile, origin: &str) -> Result<(), DetectError> {
        let systems_too_many = |_| DetectError::Invalid {
            origin: origin.to_owned(),
            field: "systems".to_owned(),
            message: format!("more than {} systems", SysId::MAX),
        };
        for (name, spec) in &file.systems {
            let id = self.intern(name.as_str()).map_err(systems_too_many)?;
            for alias in &spec.aliases {
                self.add_alias(alias.as_str(), id);
            }
            for domain in &spec.domains {
                let (bare, _) = domain.split_wildcard();
                self.domains.entry(bare.into()).or_default().system = Some(id);
            }
        }
        for (name, spec) in &file.systems {
            let id = self.intern(name.as_str()).map_err(systems_too_many)?;
            for (word, target) in &spec.routes {
                let target = self.intern(target.as_str()).map_err(systems_too_many)?;
                if let Some(entry) = self.systems.get_mut(usize::from(id)) {
                    entry.routes.insert(word.as_str().into(), target);
                }
            }
        }
        for spec in &file.hosts {
            let mut rule = HostRule {
                system: None,
                paths: Vec::with_capacity(spec.paths.len()),
            };
            if let Some(name) = &spec.system {
                rule.system = Some(self.intern(name.as_str()).map_err(systems_too_many)?);
            }
            for path in &spec.paths {
                let id = self
                    .intern(path.system.as_str())
                    .map_err(systems_too_many)?;
                let words = path.contains.words().iter().map(|w| w.as_str().into());
                rule.paths.push((words.collect(), id));
            }
            let (bare, wildcard) = spec.host.split_wildcard();
            let table = if wildcard {
                &mut self.domains
            } else {
                &mut self.hosts
            };
            table.insert(bare.into(), rule);
        }
        for (verb, words) in &file.verbs {
            for word in words {
                self.verbs.insert(word.as_str().into(), *verb);
            }
        }
        for word in &file.noise {
            self.noise.insert(word.as_str().into(), ());
        }
        for rule in &file.noun_rules {
            self.noun_rules.push(NounRule {
                nouns: rule.nouns.iter().map(|w| (w.as_str().into(), ())).collect(),
                turns: rule.turns.clone(),
                into: rule.into,
                unless: rule
                    .unless
                    .iter()
                    .map(|w| (w.as_str().into(), ()))
                    .collect(),
            });
        }
        for (word, count) in &file.skip_after {
            self.skip_after.insert(word.as_str().into(), *count);
        }
        for word in &file.search_params {
            self.search_params.insert(word.as_str().into(), ());
        }
        for spec in &file.overrides {
            let system = match &spec.system {
                Some(name) => Some(self.intern(name.as_str()).map_err(systems_too_many)?),
                None => None,
            };
            self.insert_override(
                &spec.tool,
                Override {
                    system,
                    verb: spec.verb,
                    risk: spec.risk,
                },
            );
        }
        Ok(())
    }
}

/// `system:word_word_word` from the words of a name starting at `start`, fillers included.
pub(crate) fn override_key(system: &str, words: &Words, start: usize) -> String {
    let mut key = String::with_capacity(system.len() + 32);
    key.push_str(system);
    key.push(':');
    for i in start..words.len() {
        if i > start {
            key.push('_');
        }
        key.push_str(words.word(i));
    }
    key
}

fn too_many_systems() -> DetectError {
    DetectError::Invalid {
        origin: "register".to_owned(),
        field: "systems".to_owned(),
        message: format!("more than {} systems", SysId::MAX),
    }
}

fn read_capped(path: &Path) -> Result<String, DetectError> {
    let io = |source| DetectError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_REGISTRY_BYTES as u64 {
        return Err(DetectError::TooLarge {
            origin: path.display().to_string(),
            limit: MAX_REGISTRY_BYTES,
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_registry_loads_and_is_large_enough() {
        let registry = Registry::builtin().unwrap();
        assert!(
            registry.systems().count() >= 65,
            "{}",
            registry.systems().count()
        );
        assert!(registry.verb_word_count() >= 100);
        assert_eq!(registry.system_named("gh"), Some("github"));
        assert_eq!(registry.system_named("google_calendar"), Some("calendar"));
        assert_eq!(registry.system_named("pg"), Some("postgres"));
        assert_eq!(registry.system_named("frobnicator"), None);
        assert_eq!(registry.verb_word("Forward"), Some(Verb::Send));
    }

    #[test]
    fn every_listed_system_is_present() {
        let registry = Registry::builtin().unwrap();
        let listed = "gmail calendar drive contacts docs sheets slides slack hubspot notion linear \
            outlook teams onedrive sharepoint zoho_crm zoho_books zoho_people jira confluence github \
            gitlab zoom fireflies salesforce freshdesk intercom stripe razorpay quickbooks xero asana \
            clickup monday zendesk calendly docusign dropbox box airtable trello twilio sendgrid \
            resend mailchimp discord telegram whatsapp shopify aws gcp azure postgres filesystem";
        let known: Vec<&str> = registry.systems().collect();
        for name in listed.split_whitespace() {
            assert!(known.contains(&name), "missing {name}");
        }
    }

    #[test]
    fn verb_words_are_never_system_names() {
        let registry = Registry::builtin().unwrap();
        for word in registry.verbs.keys() {
            assert!(!registry.names.contains_key(word), "{word} is both");
            assert!(
                !registry.noise.contains_key(word),
                "{word} is noise and a verb"
            );
        }
    }

    #[test]
    fn a_later_file_wins_and_a_bad_one_changes_nothing() {
        let mut registry = Registry::builtin().unwrap();
        registry
            .extend_yaml("verbs:\n  share: [post]\n", "mine.yaml")
            .unwrap();
        assert_eq!(registry.verb_word("post"), Some(Verb::Share));
        let before = registry.verb_word_count();
        let err = registry
            .extend_yaml("verbs:\n  share: [zzz]\nbogus: 1\n", "bad.yaml")
            .unwrap_err();
        assert!(err.to_string().starts_with("bad.yaml:3:"), "{err}");
        assert_eq!(registry.verb_word_count(), before);
        assert_eq!(registry.verb_word("zzz"), None);
    }

    #[test]
    fn files_are_read_and_missing_files_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("extra.yaml");
        std::fs::write(&path, "systems:\n  acme_crm:\n    aliases: [acme]\n").unwrap();
        let mut registry = Registry::builtin().unwrap();
        registry.extend_file(&path).unwrap();
        assert_eq!(registry.system_named("acme"), Some("acme_crm"));
        let missing = dir.path().join("nope.yaml");
        let err = registry.extend_file(&missing).unwrap_err();
        assert!(matches!(err, DetectError::Io { .. }));
        assert!(err.to_string().contains("nope.yaml"));
    }
}

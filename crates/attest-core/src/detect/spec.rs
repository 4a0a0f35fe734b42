//! The detection registry as it is written in YAML: the data model and its parser.
//!
//! Every struct rejects unknown keys and every word is checked as it is read, so a
//! typo fails with the file, line and column of the bad value rather than being ignored.

use std::collections::{BTreeMap, HashMap};

use attest_policy::{Risk, Verb};
use serde::de::{self, Deserializer};
use serde::Deserialize;

use super::DetectError;

/// Largest registry file accepted, in bytes.
pub(crate) const MAX_REGISTRY_BYTES: usize = 4 * 1024 * 1024;

/// One registry file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegistryFile {
    /// System name → aliases, domains and (for umbrella systems) noun routes.
    #[serde(default)]
    pub(crate) systems: BTreeMap<Name, SystemSpec>,
    /// Hosts shared by several systems, told apart by their paths.
    #[serde(default)]
    pub(crate) hosts: Vec<HostSpec>,
    /// Verb → the words that mean it.
    #[serde(default)]
    pub(crate) verbs: HashMap<Verb, Vec<Word>>,
    /// Words that carry no meaning in a name (`batch`, `async`, `the`, `api`).
    #[serde(default)]
    pub(crate) noise: Vec<Word>,
    /// Nouns that change the verb (`create_refund` → pay).
    #[serde(default)]
    pub(crate) noun_rules: Vec<NounRuleSpec>,
    /// Path words followed by names rather than resources (`repos: 2` skips owner and repo).
    #[serde(default)]
    pub(crate) skip_after: BTreeMap<Word, u8>,
    /// Query parameters that make a GET a search (`q`, `query`, `jql`).
    #[serde(default)]
    pub(crate) search_params: Vec<Word>,
    /// Exact tool names with a fixed system, verb and perhaps risk.
    #[serde(default)]
    pub(crate) overrides: Vec<OverrideSpec>,
}

/// One system.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SystemSpec {
    /// Other names for it; two-word aliases are written `google_calendar`.
    #[serde(default)]
    pub(crate) aliases: Vec<Alias>,
    /// Domains whose hosts (the domain itself and every subdomain) belong to it.
    #[serde(default)]
    pub(crate) domains: Vec<Host>,
    /// For an umbrella system (`google`, `microsoft`): noun → the system it means.
    #[serde(default)]
    pub(crate) routes: BTreeMap<Word, Name>,
}

/// A host whose paths say which system a call is for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostSpec {
    /// `www.googleapis.com`, or `*.atlassian.net` for a domain and all its subdomains.
    pub(crate) host: Host,
    /// The system when no path rule matches.
    #[serde(default)]
    pub(crate) system: Option<Name>,
    /// Rules tried in order; the first that matches wins.
    #[serde(default)]
    pub(crate) paths: Vec<PathSpec>,
}

/// A path rule: these path words, one after another, anywhere in the path.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathSpec {
    /// Words separated by `/`, such as `/me/messages`.
    pub(crate) contains: PathWords,
    /// The system the rule names.
    pub(crate) system: Name,
}

/// A rule that turns some verbs into another when a noun is present.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NounRuleSpec {
    /// The nouns (`payment`, `refunds`).
    pub(crate) nouns: Vec<Word>,
    /// The verbs changed (`create`, `update`, `write`).
    pub(crate) turns: Vec<Verb>,
    /// The verb they become (`pay`).
    pub(crate) into: Verb,
    /// Words that cancel the rule (`payment_link` is not a payment, `email_draft` is not sent).
    #[serde(default)]
    pub(crate) unless: Vec<Word>,
}

/// An exact tool name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverrideSpec {
    /// The tool name, matched after the same splitting as any name
    /// (`slack_add_reaction` also matches `slack.addReaction`, and `add_reaction` on a slack server).
    pub(crate) tool: String,
    /// The system; the detected one when absent.
    #[serde(default)]
    pub(crate) system: Option<Name>,
    /// The verb.
    pub(crate) verb: Verb,
    /// A risk tier that replaces the verb's.
    #[serde(default)]
    pub(crate) risk: Option<Risk>,
}

impl RegistryFile {
    /// Parses one registry file; `origin` names it in errors.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<RegistryFile, DetectError> {
        if text.len() > MAX_REGISTRY_BYTES {
            return Err(DetectError::TooLarge {
                origin: origin.to_owned(),
                limit: MAX_REGISTRY_BYTES,
            });
        }
        if text.trim().is_empty() {
            return Ok(RegistryFile::default());
        }
        let file: RegistryFile =
            serde_yaml::from_str(text).map_err(|source| DetectError::Parse {
                origin: origin.to_owned(),
                line: source.location().map_or(0, |l| l.line()),
                column: source.location().map_or(0, |l| l.column()),
                source,
            })?;
        file.check_words_are_unique(origin)?;
        Ok(file)
    }

    /// A word under two verbs in one file is a mistake, not an override.
    fn check_words_are_unique(&self, origin: &str) -> Result<(), DetectError> {
        let mut seen: HashMap<&str, Verb> = HashMap::new();
        for verb in Verb::ALL {
            for word in self.verbs.get(&verb).into_iter().flatten() {
                if let Some(first) = seen.insert(word.as_str(), verb) {
                    if first != verb {
                        return Err(DetectError::Invalid {
                            origin: origin.to_owned(),
                            field: "verbs".to_owned(),
                            message: format!(
                                "`{}` is listed under both `{first}` and `{verb}`",
                                word.as_str()
                            ),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// A single lower-case word: letters and digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Word(String);

impl Word {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// A system name: lower-case letters, digits and `_`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Name(String);

impl Name {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// An alias: one word, or two joined by `_`.
#[derive(Debug, Clone)]
pub(crate) struct Alias(String);

impl Alias {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// A lower-case host name, perhaps starting with `*.`.
#[derive(Debug, Clone)]
pub(crate) struct Host(String);

impl Host {
    /// The host without a leading `*.`, and whether it had one.
    pub(crate) fn split_wildcard(&self) -> (&str, bool) {
        match self.0.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (&self.0, false),
        }
    }
}

/// Path words written as `/me/messages`.
#[derive(Debug, Clone)]
pub(crate) struct PathWords(Vec<String>);

impl PathWords {
    pub(crate) fn words(&self) -> &[String] {
        &self.0
    }
}

fn is_word(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn read_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    String::deserialize(deserializer)
}

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = read_string(deserializer)?;
        if is_word(&text) {
            Ok(Word(text))
        } else {
            Err(de::Error::custom(format!(
                "`{text}` is not a word: use lower-case letters and digits only"
            )))
        }
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = read_string(deserializer)?;
        if text.split('_').all(is_word) && text.len() <= 64 {
            Ok(Name(text))
        } else {
            Err(de::Error::custom(format!(
                "`{text}` is not a system name: use lower-case letters, digits and `_`"
            )))
        }
    }
}

impl<'de> Deserialize<'de> for Alias {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = read_string(deserializer)?;
        let words = text.split('_').count();
        if text.split('_').all(is_word) && words <= 2 {
            Ok(Alias(text))
        } else {
            Err(de::Error::custom(format!(
                "`{text}` is not an alias: use one or two lower-case words joined by `_`"
            )))
        }
    }
}

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = read_string(deserializer)?;
        let bare = text.strip_prefix("*.").unwrap_or(&text);
        let ok = !bare.is_empty()
            && bare.len() <= 253
            && bare.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            });
        if ok {
            Ok(Host(text))
        } else {
            Err(de::Error::custom(format!(
                "`{text}` is not a host: use a lower-case name such as `api.example.com` or `*.example.com`"
            )))
        }
    }
}

impl<'de> Deserialize<'de> for PathWords {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = read_string(deserializer)?;
        let words: Vec<String> = text
            .split('/')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        let ok = !words.is_empty()
            && words.iter().all(|w| {
                w.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.')
                })
            });
        if ok {
            Ok(PathWords(words))
        } else {
            Err(de::Error::custom(format!(
                "`{text}` is not a path rule: use lower-case words separated by `/`"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_an_empty_registry() {
        let file = RegistryFile::parse("  \n# nothing\n", "empty.yaml").unwrap();
        assert!(file.systems.is_empty() && file.overrides.is_empty());
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_line() {
        let text = "systems:\n  acme:\n    aliases: [ac]\n    colour: red\n";
        let err = RegistryFile::parse(text, "mine.yaml").unwrap_err();
        match err {
            DetectError::Parse { origin, line, .. } => {
                assert_eq!(origin, "mine.yaml");
                assert_eq!(line, 4);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn bad_words_name_their_line() {
        let text = "noise: [ok]\nverbs:\n  send: [post, Bad Word]\n";
        let err = RegistryFile::parse(text, "mine.yaml").unwrap_err();
        assert!(matches!(err, DetectError::Parse { line: 3, .. }), "{err:?}");
        assert!(err.to_string().starts_with("mine.yaml:3:"), "{err}");
    }

    #[test]
    fn a_word_under_two_verbs_is_an_error() {
        let text = "verbs:\n  send: [post]\n  create: [post]\n";
        let err = RegistryFile::parse(text, "mine.yaml").unwrap_err();
        assert!(matches!(err, DetectError::Invalid { .. }), "{err:?}");
    }

    #[test]
    fn hosts_and_aliases_are_checked() {
        assert!(RegistryFile::parse("hosts:\n  - host: Bad_Host\n", "x").is_err());
        assert!(RegistryFile::parse("systems:\n  a:\n    aliases: [a_b_c]\n", "x").is_err());
        assert!(RegistryFile::parse("systems:\n  a:\n    domains: ['*.a.io']\n", "x").is_ok());
    }
}

//! `labels:`: names for classes of resources (paths, URLs, tables, systems, actions),
//! which `when:` conditions ask history about as `run.touched("NAME")`.
//!
//! ```yaml
//! labels:
//!   sensitive:
//!     paths: ["secrets/*", "*/secrets/*", "*.pem"]
//!     tables: [customers]
//!     urls: ["https://vault.acme.com/*"]
//!     systems: [hr]
//!     actions: ["stripe.list:customer*"]
//! ```
//!
//! An action touches a label when one of the label's patterns matches it: `paths`,
//! `urls` and `tables` match the resources its params name (see
//! [`crate::history::resources`]), `systems` its system, `actions` the action as an
//! action pattern. Patterns are [`Glob`]s: `*` matches any run of characters, `/`
//! included.

use serde::de::Deserializer;
use serde::Deserialize;

use crate::action_pattern::ActionPattern;
use crate::de::{checked_map, Key, List, OrderedMap, Word};
use crate::glob::Glob;
use crate::history::{resources, Resource};
use crate::Action;

/// Every label of a policy, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Labels(Vec<(String, Label)>);

impl Labels {
    /// The section as read.
    pub(crate) fn from_section(section: OrderedMap<LabelName, Label>) -> Labels {
        Labels(section.0.into_iter().map(|(k, v)| (k.0, v)).collect())
    }

    /// The label called `name` (names ignore ASCII case).
    pub(crate) fn get(&self, name: &str) -> Option<&Label> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, label)| label)
    }
}

/// A label's name.
#[derive(Debug, Clone)]
pub(crate) struct LabelName(pub(crate) String);

impl Word for LabelName {
    const EXPECTING: &'static str = "a label name such as sensitive";

    fn from_word(word: &str) -> Result<Self, String> {
        let name = word.trim();
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            Ok(LabelName(name.to_owned()))
        } else {
            Err(format!(
                "label name {name:?} must be letters, digits, _, - and ."
            ))
        }
    }
}

impl Key for LabelName {
    fn key_text(&self) -> &str {
        &self.0
    }
}

/// One label's patterns.
#[derive(Debug, Clone)]
pub(crate) struct Label {
    paths: Vec<Glob>,
    urls: Vec<Glob>,
    tables: Vec<Glob>,
    systems: Vec<Glob>,
    actions: Vec<ActionPattern>,
}

impl Label {
    /// Whether `action` touches a resource of this label.
    pub(crate) fn touched_by(&self, action: &Action) -> bool {
        if self.systems.iter().any(|g| g.matches(&action.system))
            || self.actions.iter().any(|p| p.matches(action))
        {
            return true;
        }
        resources(action).iter().any(|(kind, name)| {
            let globs = match kind {
                Resource::Path => &self.paths,
                Resource::Url => &self.urls,
                Resource::Table => &self.tables,
                Resource::Target => return false,
            };
            globs.iter().any(|g| g.matches(name))
        })
    }

    fn check(raw: RawLabel) -> Result<Label, String> {
        let label = Label {
            paths: raw.paths.0,
            urls: raw.urls.0,
            tables: raw.tables.0,
            systems: raw.systems.0,
            actions: raw.actions.0,
        };
        if label.paths.is_empty()
            && label.urls.is_empty()
            && label.tables.is_empty()
            && label.systems.is_empty()
            && label.actions.is_empty()
        {
            return Err("a label needs paths, urls, tables, systems or actions".to_owned());
        }
        Ok(label)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLabel {
    #[serde(default)]
    paths: List<Glob>,
    #[serde(default)]
    urls: List<Glob>,
    #[serde(default)]
    tables: List<Glob>,
    #[serde(default)]
    systems: List<Glob>,
    #[serde(default)]
    actions: List<ActionPattern>,
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a label such as {paths: [\"*/secrets/*\"], tables: [customers]}",
            Label::check,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verb;

    #[test]
    fn a_label_matches_paths_urls_tables_systems_and_actions() {
        let label: Label = serde_yaml::from_str(
            "{paths: ['*/secrets/*'], urls: ['https://vault.acme.com/*'], tables: [customers], systems: [hr]}",
        )
        .unwrap();
        let read = |params| Action::new("files", Verb::Read).with_params(params);
        assert!(label.touched_by(&read(json!({"file_path": "/app/secrets/x"}))));
        assert!(!label.touched_by(&read(json!({"file_path": "/app/src/x"}))));
        assert!(label.touched_by(&read(json!({"url": "https://vault.acme.com/v1/kv"}))));
        assert!(label.touched_by(&read(json!({"table": "Customers"}))));
        assert!(label.touched_by(&Action::new("hr", Verb::List)));
        assert!(!label.touched_by(&Action::new("gmail", Verb::List)));
        let err = serde_yaml::from_str::<Label>("{}").unwrap_err().to_string();
        assert!(err.contains("a label needs"), "{err}");
    }
}

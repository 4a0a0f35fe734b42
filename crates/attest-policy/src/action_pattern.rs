//! `system.verb[:target]` patterns: the organisation lists (R0), per-action risk
//! overrides and the `action:` match key.

use std::fmt;

use crate::de::{Key, Word};
use crate::glob::Glob;
use crate::recipients::for_each_recipient;
use crate::sets::VerbSet;
use crate::Action;

/// A compiled `system.verb[:target]` pattern.
///
/// The system part is a [`Glob`] (it may contain dots: the verb is after the last dot
/// before any `:`); the verb part is a glob over the fifteen verbs and must match at
/// least one; the optional target part is a glob over the action's target (an action
/// without a target has the empty target). A target part holding `@` is an address
/// pattern: it matches the action's recipients (its target and the recipient params R2
/// reads), because detection names what a send acts on (`message`), not who receives it.
/// `*` alone matches every action.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ActionPattern {
    text: Box<str>,
    system: Glob,
    verbs: VerbSet,
    target: Option<Glob>,
}

impl ActionPattern {
    /// Compiles `pattern`, or says what is wrong with it.
    pub(crate) fn new(pattern: &str) -> Result<ActionPattern, String> {
        let text = pattern.trim();
        if text.bytes().all(|b| b == b'*') && !text.is_empty() {
            return Ok(ActionPattern {
                text: text.into(),
                system: Glob::new("*")?,
                verbs: VerbSet::ALL,
                target: None,
            });
        }
        let (system_verb, target) = match text.split_once(':') {
            Some((head, target)) => (head, Some(target)),
            None => (text, None),
        };
        let Some((system, verb)) = system_verb.rsplit_once('.') else {
            return Err(format!(
                "action pattern {text:?} names no verb (expected system.verb[:target], e.g. \"{}.*\")",
                if system_verb.is_empty() { "gmail" } else { system_verb }
            ));
        };
        let system =
            Glob::new(system).map_err(|e| format!("action pattern {text:?}: system: {e}"))?;
        let verbs =
            VerbSet::from_glob(verb).map_err(|e| format!("action pattern {text:?}: {e}"))?;
        let target = match target {
            Some(target) => Some(
                Glob::new(target).map_err(|e| format!("action pattern {text:?}: target: {e}"))?,
            ),
            None => None,
        };
        Ok(ActionPattern {
            text: text.into(),
            system,
            verbs,
            target,
        })
    }

    /// The pattern as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `action` matches. An address pattern needs every recipient to match (and at
    /// least one), so that a rule or risk override that relaxes for one domain never lets a
    /// copy to another through.
    pub(crate) fn matches(&self, action: &Action) -> bool {
        self.matches_with(action, Recipients::Every)
    }

    /// Whether `action` matches, an address pattern matching when any recipient does: for
    /// the organisation lists, which only make a decision stricter.
    pub(crate) fn matches_any_recipient(&self, action: &Action) -> bool {
        self.matches_with(action, Recipients::Any)
    }

    /// Whether the pattern names addresses (`gmail.send:*@evil.io`), which are read from
    /// the action's params.
    pub(crate) fn reads_recipients(&self) -> bool {
        self.target.is_some() && has_address_target(&self.text)
    }

    /// [`ActionPattern::matches`] with addresses taken to match (a replay that does not
    /// know them asks whether the rest does).
    pub(crate) fn matches_but_recipients(&self, action: &Action) -> bool {
        if self.reads_recipients() {
            self.verbs.contains(action.verb) && self.system.matches(&action.system)
        } else {
            self.matches(action)
        }
    }

    /// Whether `action` did what the pattern names, for history's `did`: it matches, or
    /// its system and verb do and the target part matches a resource the params name
    /// (`files.read:*secrets/*` matches a read of `/app/secrets/x`).
    pub(crate) fn did(&self, action: &Action) -> bool {
        if self.matches(action) {
            return true;
        }
        let Some(glob) = &self.target else {
            return false;
        };
        !has_address_target(&self.text)
            && self.verbs.contains(action.verb)
            && self.system.matches(&action.system)
            && crate::history::resources(action)
                .iter()
                .any(|(_, name)| glob.matches(name))
    }

    fn matches_with(&self, action: &Action, recipients: Recipients) -> bool {
        self.verbs.contains(action.verb)
            && self.system.matches(&action.system)
            && match &self.target {
                None => true,
                Some(glob) if !has_address_target(&self.text) => {
                    glob.matches(action.target.as_deref().unwrap_or(""))
                }
                Some(glob) => {
                    let (mut seen, mut any, mut all) = (false, false, true);
                    for_each_recipient(action, &mut |address| {
                        let hit = glob.matches(address);
                        seen = true;
                        any |= hit;
                        all &= hit;
                    });
                    match recipients {
                        Recipients::Any => any,
                        Recipients::Every => seen && all,
                    }
                }
            }
    }
}

/// How an address pattern treats several recipients.
#[derive(Clone, Copy)]
enum Recipients {
    Any,
    Every,
}

/// Whether the target part (after the first `:`) of a pattern holds `@`.
fn has_address_target(text: &str) -> bool {
    text.split_once(':')
        .is_some_and(|(_, target)| target.contains('@'))
}

impl Word for ActionPattern {
    const EXPECTING: &'static str = "an action pattern such as gmail.send or stripe.*";

    fn from_word(word: &str) -> Result<Self, String> {
        ActionPattern::new(word)
    }
}

impl Key for ActionPattern {
    fn key_text(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for ActionPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActionPattern({:?})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verb;

    fn m(pattern: &str, action: &Action) -> bool {
        ActionPattern::new(pattern).unwrap().matches(action)
    }

    #[test]
    fn system_verb_and_target_parts() {
        let send = Action::new("gmail", Verb::Send).with_target("bob@rival.io");
        assert!(m("gmail.send", &send));
        assert!(m("GMAIL.*", &send));
        assert!(m("*.send", &send));
        assert!(m("*", &send));
        assert!(m("gmail.s*", &send));
        assert!(m("gmail.send:*@rival.io", &send));
        assert!(!m("gmail.send:*@acme.com", &send));
        assert!(!m("gmail.reply", &send));
        assert!(!m("slack.*", &send));
        // An address pattern matches the recipients, whatever the detected target.
        let to_board = Action::new("gmail", Verb::Send)
            .with_target("message")
            .with_params(serde_json::json!({"to": "Chair <chair@board.acme.com>"}));
        assert!(m("gmail.send:*@board.acme.com", &to_board));
        assert!(m("gmail.send:message", &to_board));
        let mixed = to_board
            .clone()
            .with_params(serde_json::json!({"to": ["bob@acme.com", "chair@board.acme.com"]}));
        let pattern = ActionPattern::new("gmail.send:*@board.acme.com").unwrap();
        assert!(!pattern.matches(&mixed), "relaxing needs every recipient");
        assert!(pattern.matches_any_recipient(&mixed), "org lists need one");
        assert!(!pattern.matches_any_recipient(&Action::new("gmail", Verb::Send)));
        // No target: the target part sees the empty string.
        let list = Action::new("gmail", Verb::List);
        assert!(m("gmail.list:*", &list));
        assert!(!m("gmail.list:x*", &list));
    }

    #[test]
    fn systems_may_contain_dots() {
        let action = Action::new("google.drive", Verb::Share);
        assert!(m("google.drive.share", &action));
        assert!(m("google.*.share", &action));
    }

    #[test]
    fn bad_patterns_say_why() {
        let err = ActionPattern::new("gmail").unwrap_err();
        assert!(err.contains("names no verb"), "{err}");
        assert!(err.contains("gmail.*"), "{err}");
        let err = ActionPattern::new("gmail.frobnicate").unwrap_err();
        assert!(err.contains("unknown verb"), "{err}");
        assert!(ActionPattern::new(".send").is_err());
        assert!(ActionPattern::new("gmail.send:").is_err());
        assert!(ActionPattern::new("").is_err());
    }
}

//! The policy file's schema, and the parse that checks it.
//!
//! ```yaml
//! version: 1                      # optional; 1 is the only version
//! domains: {internal: [acme.com], known: [partner.io]}
//! groups: {finance: [ann@acme.com, bob@acme.com]}
//! org:                            # rule R0
//!   blocked: ["stripe.delete"]
//!   approval_required: ["github.execute:*prod*"]
//! risk: {"stripe.pay": very_high} # per-action tier overrides, first match wins
//! agents:                         # per-agent rules, tried before `policies`
//!   support-*: [ {name: .., match: {..}, decision: ..} ]
//! policies: [ {name: .., match: {..}, decision: .., approvers: [..], reason: ..} ]
//! ```
//!
//! Every value is checked while it is read (see `de.rs`), so an error carries the
//! line and column of the offending node.
//!
//! ## Finding every problem, not just the first
//!
//! serde stops at the first error. To report them all, each rule and each top-level
//! section is read through a [`Slot`]. A parse numbers the slots in document order and
//! records the innermost slot an error happened in; the lint then parses again with
//! that slot skipped (read as "anything"), until the file parses or an error happens
//! outside every slot. The numbering is stable across passes because slots do not
//! nest. The state lives in a thread-local installed only for the duration of one
//! parse, because serde's derived code cannot carry it.

use std::cell::RefCell;

use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;

use crate::action_pattern::ActionPattern;
use crate::de::{Key, List, OneOrMany, OrderedMap, Text, Word, W};
use crate::glob::Glob;
use crate::recipients::{DomainName, Domains};
use crate::rule::Rule;
use crate::Risk;

/// The whole file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyFile {
    #[serde(default)]
    #[allow(dead_code)] // checked while read; there is only one version to act on.
    pub(crate) version: Option<W<Version>>,
    #[serde(default)]
    pub(crate) domains: Slot<DomainsSection>,
    #[serde(default)]
    pub(crate) groups: Slot<OrderedMap<GroupName, OneOrMany<Text>>>,
    #[serde(default)]
    pub(crate) org: Slot<OrgSection>,
    #[serde(default)]
    pub(crate) risk: Slot<OrderedMap<ActionPattern, W<Risk>>>,
    #[serde(default)]
    pub(crate) agents: OrderedMap<Glob, Vec<Slot<Rule>>>,
    #[serde(default)]
    pub(crate) policies: Vec<Slot<Rule>>,
}

/// `version: 1`.
pub(crate) struct Version;

impl Word for Version {
    const EXPECTING: &'static str = "the policy format version, 1";

    fn from_word(word: &str) -> Result<Self, String> {
        if word.trim() == "1" {
            Ok(Version)
        } else {
            Err(format!(
                "unsupported policy version {:?} (this attest reads version 1)",
                word.trim()
            ))
        }
    }
}

/// `domains: {internal: [...], known: [...]}`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct DomainsSection {
    #[serde(default)]
    internal: List<DomainName>,
    #[serde(default)]
    known: List<DomainName>,
}

impl DomainsSection {
    /// The configured domains.
    pub(crate) fn into_domains(self) -> Domains {
        Domains {
            internal: self.internal.0,
            known: self.known.0,
        }
    }
}

/// `org: {blocked: [...], approval_required: [...]}` (rule R0).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct OrgSection {
    #[serde(default)]
    pub(crate) blocked: List<ActionPattern>,
    #[serde(default)]
    pub(crate) approval_required: List<ActionPattern>,
}

/// A group's name: a non-empty word without `@` (so it cannot be mistaken for an
/// address).
pub(crate) struct GroupName(pub(crate) String);

impl Word for GroupName {
    const EXPECTING: &'static str = "a group name";

    fn from_word(word: &str) -> Result<Self, String> {
        let name = word.trim();
        if name.is_empty() {
            return Err("empty group name".to_owned());
        }
        if name.contains('@') {
            return Err(format!(
                "group name {name:?} looks like an address (group names have no @)"
            ));
        }
        Ok(GroupName(name.to_owned()))
    }
}

impl Key for GroupName {
    fn key_text(&self) -> &str {
        &self.0
    }
}

/// A value read through a numbered slot (see the module docs). `None` only when the
/// lint skipped it, or when the key was absent.
pub(crate) struct Slot<T>(pub(crate) Option<T>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Slot<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let index = with_state(|state| {
            let index = state.next_slot;
            state.next_slot += 1;
            (index, state.skip.contains(&index))
        });
        if let Some((_, true)) = index {
            IgnoredAny::deserialize(deserializer)?;
            return Ok(Slot(None));
        }
        T::deserialize(deserializer)
            .map(|v| Slot(Some(v)))
            .inspect_err(|_| {
                if let Some((index, _)) = index {
                    with_state(|state| {
                        // The innermost slot sees the error first; keep its number.
                        state.failed.get_or_insert(index);
                    });
                }
            })
    }
}

/// One parse's state.
struct State {
    next_slot: usize,
    skip: Vec<usize>,
    failed: Option<usize>,
    rule_names: Vec<String>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    STATE.with(|cell| cell.borrow_mut().as_mut().map(f))
}

/// Records a rule name, or says it is taken. Outside a parse (a rule read on its own)
/// there is nothing to compare with.
pub(crate) fn claim_rule_name(name: &str) -> Result<(), String> {
    with_state(|state| {
        if state
            .rule_names
            .iter()
            .any(|other| other.eq_ignore_ascii_case(name))
        {
            return Err(format!(
                "duplicate rule name {name:?} (rules_fired must say which rule spoke)"
            ));
        }
        state.rule_names.push(name.to_owned());
        Ok(())
    })
    .unwrap_or(Ok(()))
}

/// Removes the state when the parse ends, whatever way it ends.
struct StateGuard;

impl Drop for StateGuard {
    fn drop(&mut self) {
        STATE.with(|cell| cell.borrow_mut().take());
    }
}

/// The outcome of one parse: the file, or the first error and the slot it was in.
pub(crate) struct Parsed {
    pub(crate) result: Result<PolicyFile, serde_yaml::Error>,
    pub(crate) failed_slot: Option<usize>,
}

/// Parses `text`, reading the slots numbered in `skip` as "anything".
pub(crate) fn parse(text: &str, skip: &[usize]) -> Parsed {
    STATE.with(|cell| {
        *cell.borrow_mut() = Some(State {
            next_slot: 0,
            skip: skip.to_vec(),
            failed: None,
            rule_names: Vec::new(),
        });
    });
    let _guard = StateGuard;
    let result = serde_yaml::from_str::<PolicyFile>(text);
    let failed_slot = with_state(|state| state.failed).flatten();
    Parsed {
        result,
        failed_slot,
    }
}

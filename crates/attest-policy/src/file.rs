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
//! dedupe: {window: 60s}           # optional: a write repeating one that ran asks
//! calendars: {office_hours: {zone: Europe/Berlin, days: [mon, fri], hours: "09:00-17:00"}}
//! labels: {sensitive: {paths: ["*/secrets/*"], tables: [customers]}}
//! ```
//!
//! Every value is checked while it is read (see `de.rs`), so an error carries the
//! line and column of the offending node.
//!
//! ## Finding every problem, not just the first
//!
//! serde stops at the first error. To report them all, each top-level section, each
//! rule, and each value inside a rule (its name, decision, approvers, every `match` key,
//! every `params` condition) and each organisation list is read through a [`Slot`] or a
//! [`Leaf`]. A parse numbers them by their path (the n-th slot inside the m-th slot …)
//! and records the innermost one an error happened in; the lint then parses again with
//! that one skipped (read as "anything"), until the file parses or an error happens
//! outside every slot. A path stays the same across passes, because skipping a slot only
//! drops the slots inside it. A skipped leaf reads as absent, and the checks of the rule
//! around it do not complain about what is missing because of it. The state lives in a
//! thread-local installed only for the duration of one parse, because serde's derived
//! code cannot carry it.

use std::cell::RefCell;

use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;

use crate::action_pattern::ActionPattern;
use crate::calendar::{CalendarName, Window};
use crate::de::{Key, List, OneOrMany, OrderedMap, Text, Word, W};
use crate::dedupe::DedupeRule;
use crate::glob::Glob;
use crate::labels::{Label, LabelName};
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
    #[serde(default)]
    pub(crate) dedupe: Slot<DedupeRule>,
    #[serde(default)]
    pub(crate) calendars: Slot<OrderedMap<CalendarName, Window>>,
    #[serde(default)]
    pub(crate) labels: Slot<OrderedMap<LabelName, Label>>,
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
    pub(crate) blocked: Leaf<List<ActionPattern>>,
    #[serde(default)]
    pub(crate) approval_required: Leaf<List<ActionPattern>>,
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
        Ok(match Leaf::deserialize(deserializer)? {
            Leaf::Value(value) => Slot(Some(value)),
            Leaf::Absent | Leaf::Skipped => Slot(None),
        })
    }
}

/// A value inside a rule or section, read through a numbered slot of its own so that the
/// lint finds the mistakes next to it too. Outside a lint it is never skipped.
///
/// Other YAML formats use it the same way to report every mistake
/// ([`lint_slots`](crate::lint_slots)): a file reads its parts (recipes, say) as
/// `Leaf<Part>`, and a load outside the lint treats anything but [`Leaf::Value`] as absent.
#[derive(Debug, Default)]
pub enum Leaf<T> {
    /// The value as read.
    Value(T),
    /// The key was not there.
    #[default]
    Absent,
    /// The lint skipped it after reporting its mistake.
    Skipped,
}

impl<T> Leaf<T> {
    /// The value; `T::default()` when absent or skipped.
    pub fn or_default(self) -> T
    where
        T: Default,
    {
        match self {
            Leaf::Value(value) => value,
            Leaf::Absent | Leaf::Skipped => T::default(),
        }
    }

    /// The value of a required key: `Ok(None)` when the lint skipped it, an error
    /// naming the key when it is missing.
    pub fn required(self, key: &str) -> Result<Option<T>, String> {
        match self {
            Leaf::Value(value) => Ok(Some(value)),
            Leaf::Skipped => Ok(None),
            Leaf::Absent => Err(format!("missing field `{key}`")),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Leaf<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if with_state(|state| state.enter(SlotKind::Value)) == Some(true) {
            IgnoredAny::deserialize(deserializer)?;
            return Ok(Leaf::Skipped);
        }
        let result = T::deserialize(deserializer);
        with_state(|state| state.leave(result.is_err(), SlotKind::Value));
        result.map(Leaf::Value)
    }
}

/// Runs one of a part's own checks (one that looks at several of its values, such as "a
/// `graphql` read needs `method: post`") in a numbered slot of its own, so that the lint
/// ([`lint_slots`](crate::lint_slots)) reports every failing check of a part, each once,
/// rather than skipping the whole part after the first. Call it inside the part's
/// deserialization, after its values are read, once per check and unconditionally (the
/// check itself decides whether it applies), so that each check keeps its number across
/// passes. Outside a lint it only runs `check`; in a lint, a check already reported is not
/// run again.
pub fn check_slot(check: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    if with_state(|state| state.enter(SlotKind::Check)) == Some(true) {
        return Ok(());
    }
    let result = check();
    with_state(|state| state.leave(result.is_err(), SlotKind::Check));
    result
}

/// A slot is a value read through [`Leaf`] (which may hold slots of its own) or a check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    Value,
    Check,
}

impl State {
    /// Numbers the next slot among its siblings and enters it; true when this pass skips
    /// it (a slot whose mistake an earlier pass reported), and then it is not entered.
    fn enter(&mut self, slot: SlotKind) -> bool {
        let index = self.counters.last().copied().unwrap_or(0);
        if let Some(last) = self.counters.last_mut() {
            *last += 1;
        }
        self.path.push(index);
        if self.skip.contains(&self.path) {
            self.path.pop();
            return true;
        }
        if slot == SlotKind::Value {
            self.counters.push(0);
        }
        false
    }

    /// Leaves the slot entered last, noting it when it failed: the innermost slot sees an
    /// error first, so the first failure noted is where the mistake is.
    fn leave(&mut self, failed: bool, slot: SlotKind) {
        if failed && self.failed.is_none() {
            self.failed = Some(self.path.clone());
        }
        if slot == SlotKind::Value {
            self.counters.pop();
        }
        self.path.pop();
    }
}

/// One parse's state.
struct State {
    /// The path of the slot being read: its index among its siblings, at each depth.
    path: Vec<usize>,
    /// How many slots each open slot (and the top level) has seen so far.
    counters: Vec<usize>,
    skip: Vec<Vec<usize>>,
    failed: Option<Vec<usize>>,
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

/// A slot's path: its index among its siblings at each depth.
pub(crate) type SlotPath = Vec<usize>;

/// The outcome of one parse: the file, or the first error and the slot it was in.
pub(crate) struct Parsed<T = PolicyFile> {
    pub(crate) result: Result<T, serde_yaml::Error>,
    pub(crate) failed_slot: Option<SlotPath>,
}

/// Parses `text` as a policy file, reading the slots at the paths in `skip` as "anything".
pub(crate) fn parse(text: &str, skip: &[SlotPath]) -> Parsed {
    parse_as(text, skip)
}

/// Parses `text` as any YAML document whose parts are read through [`Leaf`]s or [`Slot`]s.
pub(crate) fn parse_as<T: serde::de::DeserializeOwned>(text: &str, skip: &[SlotPath]) -> Parsed<T> {
    STATE.with(|cell| {
        *cell.borrow_mut() = Some(State {
            path: Vec::new(),
            counters: vec![0],
            skip: skip.to_vec(),
            failed: None,
            rule_names: Vec::new(),
        });
    });
    let _guard = StateGuard;
    let result = serde_yaml::from_str::<T>(text);
    let failed_slot = with_state(|state| state.failed.take()).flatten();
    Parsed {
        result,
        failed_slot,
    }
}

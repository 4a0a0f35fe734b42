//! One YAML rule: `name`, `match`, `decision`, `approvers`, `reason`, and a window
//! condition `limit` (see `limit.rs`) and duplicate window `dedupe` (see `dedupe.rs`).

use serde::de::Deserializer;
use serde::Deserialize;

use crate::action_pattern::ActionPattern;
use crate::approval::{ApproversSpec, RawQuorumCheck, Wait};
use crate::de::{checked_map, OneOrMany, Text, Word, W};
use crate::dedupe::DedupeRule;
use crate::file::Leaf;
use crate::glob::Glob;
use crate::limit::Limit;
use crate::params::ParamConditions;
use crate::recipients::for_each_recipient_host;
use crate::sets::{ClassSet, RiskSet, VerbSet};
use crate::when::When;
use crate::{Action, Decision, Risk, TargetClass};

/// What a rule's match sees besides the action: what the built-in rules worked out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    /// The action being decided.
    pub(crate) action: &'a Action,
    /// Its final risk tier.
    pub(crate) tier: Risk,
    /// Its target class (R2).
    pub(crate) class: TargetClass,
}

/// A compiled `match:` block: every key present must match (AND); a key's list
/// matches when any item does (OR); an absent key matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct Match {
    systems: Box<[Glob]>,
    verbs: Option<VerbSet>,
    classes: Option<ClassSet>,
    target_domains: Box<[Glob]>,
    actors: Box<[Glob]>,
    agents: Box<[Glob]>,
    risks: Option<RiskSet>,
    actions: Box<[ActionPattern]>,
    recognised: Option<bool>,
    params: ParamConditions,
}

impl Match {
    /// Whether the action (with the built-in rules' facts) matches.
    ///
    /// Cheap keys are tested first; `target_domain` and `params` last.
    pub(crate) fn matches(&self, facts: &Facts<'_>) -> bool {
        let action = facts.action;
        self.keys_match(facts, |p| p.matches(action))
            && (self.target_domains.is_empty() || self.every_host_matches(action))
            && (self.params.is_empty() || self.params.matches(&action.params))
    }

    /// Every key but `target_domain` and `params`, an `action:` pattern judged by
    /// `pattern`.
    fn keys_match(&self, facts: &Facts<'_>, pattern: impl Fn(&ActionPattern) -> bool) -> bool {
        let action = facts.action;
        self.verbs.is_none_or(|set| set.contains(action.verb))
            && self.risks.is_none_or(|set| set.contains(facts.tier))
            && self.classes.is_none_or(|set| set.contains(facts.class))
            && self.recognised.is_none_or(|want| want == action.recognised)
            && any_glob(&self.systems, &action.system)
            && any_glob(&self.actors, action.actor.as_deref().unwrap_or(""))
            && any_glob(&self.agents, action.agent.as_deref().unwrap_or(""))
            && (self.actions.is_empty() || self.actions.iter().any(pattern))
    }

    /// [`Match::matches`] for a recorded action whose raw params may be unknown (a
    /// replay sees the ledger's allow-listed preview only): `None` when the keys that
    /// need no params hold and the answer turns on params the record does not have
    /// (`params`, `target_domain`, an `action:` pattern naming addresses).
    pub(crate) fn matches_recorded(
        &self,
        facts: &Facts<'_>,
        params_complete: bool,
    ) -> Option<bool> {
        if params_complete || !self.reads_params() {
            return Some(self.matches(facts));
        }
        let action = facts.action;
        if self.keys_match(facts, |p| p.matches_but_recipients(action)) {
            None
        } else {
            Some(false)
        }
    }

    /// Whether matching reads the action's params (recipients included).
    fn reads_params(&self) -> bool {
        !self.params.is_empty()
            || !self.target_domains.is_empty()
            || self.actions.iter().any(ActionPattern::reads_recipients)
    }

    /// `target_domain`: every recipient's host (or its registered domain) matches one
    /// of the globs, and there is at least one recipient. "Every" so that an `act`
    /// rule for one domain never lets a message to another domain through.
    fn every_host_matches(&self, action: &Action) -> bool {
        let mut seen = false;
        let mut all = true;
        for_each_recipient_host(action, &mut |host| {
            seen = true;
            let registered = psl::domain_str(host).unwrap_or(host);
            all &= self
                .target_domains
                .iter()
                .any(|g| g.matches(host) || g.matches(registered));
        });
        seen && all
    }
}

/// The cheap keys of a match (verb, risk, target class) as masks, kept in an array
/// apart from the rules so that scanning many rules touches few cache lines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefilter {
    verbs: VerbSet,
    risks: RiskSet,
    classes: ClassSet,
}

impl Prefilter {
    /// False when the rule certainly does not match; true when it may.
    pub(crate) fn admits(&self, facts: &Facts<'_>) -> bool {
        self.verbs.contains(facts.action.verb)
            && self.risks.contains(facts.tier)
            && self.classes.contains(facts.class)
    }
}

impl Match {
    /// The match's prefilter.
    pub(crate) fn prefilter(&self) -> Prefilter {
        Prefilter {
            verbs: self.verbs.unwrap_or(VerbSet::ALL),
            risks: self.risks.unwrap_or(RiskSet::ALL),
            classes: self.classes.unwrap_or(ClassSet::ALL),
        }
    }
}

fn any_glob(globs: &[Glob], text: &str) -> bool {
    globs.is_empty() || globs.iter().any(|g| g.matches(text))
}

/// `match:` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatch {
    #[serde(default)]
    system: Leaf<OneOrMany<Glob>>,
    #[serde(default)]
    verb: Leaf<OneOrMany<VerbSet>>,
    #[serde(default)]
    target: Leaf<OneOrMany<TargetClass>>,
    #[serde(default)]
    target_domain: Leaf<OneOrMany<Glob>>,
    #[serde(default)]
    actor: Leaf<OneOrMany<Glob>>,
    #[serde(default)]
    agent: Leaf<OneOrMany<Glob>>,
    #[serde(default)]
    risk: Leaf<OneOrMany<Risk>>,
    #[serde(default)]
    action: Leaf<OneOrMany<ActionPattern>>,
    #[serde(default)]
    recognised: Leaf<bool>,
    #[serde(default)]
    params: Leaf<ParamConditions>,
}

impl Match {
    fn check(raw: RawMatch) -> Result<Match, String> {
        Ok(Match {
            systems: raw.system.or_default().0.into(),
            verbs: raw.verb.or_default().0.into_iter().reduce(VerbSet::union),
            classes: raw
                .target
                .or_default()
                .0
                .into_iter()
                .map(ClassSet::one)
                .reduce(ClassSet::union),
            target_domains: raw.target_domain.or_default().0.into(),
            actors: raw.actor.or_default().0.into(),
            agents: raw.agent.or_default().0.into(),
            risks: raw
                .risk
                .or_default()
                .0
                .into_iter()
                .map(RiskSet::one)
                .reduce(RiskSet::union),
            actions: raw.action.or_default().0.into(),
            recognised: match raw.recognised {
                Leaf::Value(want) => Some(want),
                Leaf::Absent | Leaf::Skipped => None,
            },
            params: raw.params.or_default(),
        })
    }
}

impl<'de> Deserialize<'de> for Match {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a match block such as { verb: send, target: external }",
            Match::check,
        )
    }
}

/// A decision a rule may take: `act`, `ask` or `refuse` (`recorded` is not a
/// decision a policy can make).
struct RuleDecision(Decision);

impl Word for RuleDecision {
    const EXPECTING: &'static str = "act, ask or refuse";

    fn from_word(word: &str) -> Result<Self, String> {
        match word.trim().to_ascii_lowercase().as_str() {
            "act" => Ok(RuleDecision(Decision::Act)),
            "ask" => Ok(RuleDecision(Decision::Ask)),
            "refuse" => Ok(RuleDecision(Decision::Refuse)),
            _ => Err(format!(
                "unknown decision {:?} (expected act, ask or refuse)",
                word.trim()
            )),
        }
    }
}

/// A rule's name: not empty, and not one of the built-in rules' names.
struct RuleName(String);

impl Word for RuleName {
    const EXPECTING: &'static str = "a rule name";

    fn from_word(word: &str) -> Result<Self, String> {
        let name = word.trim();
        if name.is_empty() {
            return Err("empty rule name".to_owned());
        }
        if ["R0", "R1", "R2", "R3", "R4"]
            .iter()
            .any(|builtin| builtin.eq_ignore_ascii_case(name))
        {
            return Err(format!(
                "rule name {name:?} is reserved for a built-in rule"
            ));
        }
        Ok(RuleName(name.to_owned()))
    }
}

/// A rule as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    name: Leaf<W<RuleName>>,
    // A leaf of its own: an unknown key inside `match` is reported, and the rule's other
    // values are still read for their own mistakes.
    #[serde(rename = "match", default)]
    matcher: Leaf<Match>,
    #[serde(default)]
    when: Leaf<W<When>>,
    #[serde(default)]
    decision: Leaf<W<RuleDecision>>,
    #[serde(default)]
    approvers: Leaf<ApproversSpec>,
    #[serde(default)]
    remind_after: Leaf<W<Wait>>,
    #[serde(default)]
    escalate_after: Leaf<W<Wait>>,
    #[serde(default)]
    escalate_to: Leaf<OneOrMany<Text>>,
    #[serde(default)]
    expire_after: Leaf<W<Wait>>,
    #[serde(default)]
    reason: Leaf<W<Text>>,
    #[serde(default)]
    limit: Leaf<Limit>,
    #[serde(default)]
    dedupe: Leaf<DedupeRule>,
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// Its name, recorded in `rules_fired`.
    pub(crate) name: String,
    /// When it applies.
    pub(crate) matcher: Match,
    /// Its `when:` condition, judged after `match:` holds.
    pub(crate) when: Option<When>,
    /// What it decides.
    pub(crate) decision: Decision,
    /// Who may approve, when it asks: people or group names.
    pub(crate) approvers: Vec<String>,
    /// How many must, when the rule wrote a quorum.
    pub(crate) quorum: Option<RawQuorumCheck>,
    /// `remind_after`, `escalate_after`, `escalate_to`, `expire_after`.
    pub(crate) waits: Waits,
    /// Its reason, recorded in `reasons`.
    pub(crate) reason: String,
    /// Its window condition: the rule fires only when the call would cross it.
    pub(crate) limit: Option<Limit>,
    /// Whether `reason` was written (a limit's figures follow a written reason).
    pub(crate) reason_written: bool,
    /// Its duplicate window (`dedupe:`), for the calls it matches.
    pub(crate) dedupe: Option<DedupeRule>,
}

impl Rule {
    fn check(raw: RawRule) -> Result<Rule, String> {
        // A name or decision the lint skipped (its mistake is reported) leaves nothing to
        // check against: the rest of the rule is still read for its own mistakes.
        let name = raw.name.required("name")?.map(|W(RuleName(name))| name);
        let matcher = raw.matcher.required("match")?.unwrap_or_default();
        let has_limit = !matches!(raw.limit, Leaf::Absent);
        let limit = match raw.limit {
            Leaf::Value(limit) => Some(limit),
            Leaf::Absent | Leaf::Skipped => None,
        };
        // A rule with a limit asks by default: a person decides whether to go over.
        let decision = match raw.decision {
            Leaf::Absent if has_limit => Some(Decision::Ask),
            decision => decision
                .required("decision")?
                .map(|W(RuleDecision(decision))| decision),
        };
        let ApproversSpec {
            names: approvers,
            quorum,
        } = raw.approvers.or_default();
        let wait = |leaf: Leaf<W<Wait>>| match leaf {
            Leaf::Value(W(Wait(d))) => Some(d.as_secs()),
            Leaf::Absent | Leaf::Skipped => None,
        };
        let waits = Waits {
            remind_after: wait(raw.remind_after),
            escalate_after: wait(raw.escalate_after),
            escalate_to: raw
                .escalate_to
                .or_default()
                .0
                .into_iter()
                .map(|Text(t)| t)
                .collect(),
            expire_after: wait(raw.expire_after),
        };
        let label = name.as_deref().unwrap_or("");
        if let Some(decision) = decision {
            if !approvers.is_empty() && decision != Decision::Ask {
                return Err(format!(
                    "rule {label:?}: approvers only apply to decision ask (this rule decides {decision})"
                ));
            }
            if !waits.is_empty() && decision != Decision::Ask {
                return Err(format!(
                    "rule {label:?}: remind_after, escalate_after and expire_after only apply to decision ask (this rule decides {decision})"
                ));
            }
        }
        waits.check(label)?;
        if let Some(name) = &name {
            crate::file::claim_rule_name(name)?;
        }
        let (name, decision) = (name.unwrap_or_default(), decision.unwrap_or(Decision::Ask));
        let (reason, reason_written) = match raw.reason {
            Leaf::Value(W(Text(reason))) => (reason, true),
            Leaf::Absent | Leaf::Skipped => (format!("rule {name}: {decision}"), false),
        };
        let dedupe = match raw.dedupe {
            Leaf::Value(dedupe) => Some(dedupe),
            Leaf::Absent | Leaf::Skipped => None,
        };
        let when = match raw.when {
            Leaf::Value(W(when)) => Some(when),
            Leaf::Absent | Leaf::Skipped => None,
        };
        Ok(Rule {
            name,
            matcher,
            when,
            decision,
            approvers,
            quorum,
            waits,
            reason,
            limit,
            reason_written,
            dedupe,
        })
    }
}

/// A rule's waits, in seconds, and who it escalates to (not yet resolved).
#[derive(Debug, Clone, Default)]
pub(crate) struct Waits {
    pub(crate) remind_after: Option<u64>,
    pub(crate) escalate_after: Option<u64>,
    pub(crate) escalate_to: Vec<String>,
    pub(crate) expire_after: Option<u64>,
}

impl Waits {
    fn is_empty(&self) -> bool {
        self.remind_after.is_none()
            && self.escalate_after.is_none()
            && self.expire_after.is_none()
            && self.escalate_to.is_empty()
    }

    /// Escalation needs both when and to whom; a step at or after expiry never fires.
    fn check(&self, label: &str) -> Result<(), String> {
        match (self.escalate_after, self.escalate_to.is_empty()) {
            (Some(_), true) => {
                return Err(format!(
                    "rule {label:?}: escalate_after needs escalate_to: [group or person]"
                ))
            }
            (None, false) => {
                return Err(format!(
                    "rule {label:?}: escalate_to needs escalate_after (how long to wait first)"
                ))
            }
            _ => {}
        }
        if let Some(expire) = self.expire_after {
            for (key, wait) in [
                ("remind_after", self.remind_after),
                ("escalate_after", self.escalate_after),
            ] {
                if wait.is_some_and(|wait| wait >= expire) {
                    return Err(format!(
                        "rule {label:?}: {key} must be shorter than expire_after (it would never fire)"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a rule with name, match and decision",
            Rule::check,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verb;

    fn rule(yaml: &str) -> Rule {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn facts(action: &Action) -> Facts<'_> {
        Facts {
            action,
            tier: action.base_risk(),
            class: TargetClass::External,
        }
    }

    #[test]
    fn keys_and_together_and_lists_or() {
        let r = rule("name: x\nmatch: {system: [gmail, outlook], verb: send, target: external}\ndecision: ask\n");
        let send = Action::new("Gmail", Verb::Send);
        assert!(r.matcher.matches(&facts(&send)));
        assert!(r
            .matcher
            .matches(&facts(&Action::new("outlook", Verb::Send))));
        assert!(!r.matcher.matches(&facts(&Action::new("slack", Verb::Send))));
        assert!(!r
            .matcher
            .matches(&facts(&Action::new("gmail", Verb::Reply))));
        let internal = Facts {
            class: TargetClass::Internal,
            ..facts(&send)
        };
        assert!(!r.matcher.matches(&internal));
    }

    #[test]
    fn empty_match_matches_everything() {
        let r = rule("name: all\nmatch: {}\ndecision: act\n");
        assert!(r.matcher.matches(&facts(&Action::new("x", Verb::Pay))));
        assert_eq!(r.reason, "rule all: act");
    }

    #[test]
    fn actor_agent_risk_action_recognised_and_params() {
        let r = rule(concat!(
            "name: x\n",
            "match:\n",
            "  actor: '*@acme.com'\n",
            "  agent: support-*\n",
            "  risk: [high, very_high]\n",
            "  action: stripe.*\n",
            "  recognised: true\n",
            "  params: {/amount: {gt: 100}}\n",
            "decision: ask\n",
        ));
        let good = Action::new("stripe", Verb::Pay)
            .with_actor("ann@ACME.com")
            .with_agent("support-bot")
            .with_params(json!({"amount": 500}));
        assert!(r.matcher.matches(&facts(&good)));
        let mut bad = good.clone();
        bad.recognised = false;
        assert!(!r.matcher.matches(&facts(&bad)));
        assert!(!r
            .matcher
            .matches(&facts(&good.clone().with_actor("eve@evil.io"))));
        assert!(!r
            .matcher
            .matches(&facts(&good.clone().with_agent("sales-bot"))));
        assert!(!r
            .matcher
            .matches(&facts(&good.clone().with_risk(Risk::Low))));
        assert!(!r
            .matcher
            .matches(&facts(&good.clone().with_params(json!({"amount": 5})))));
        let mut no_actor = good.clone();
        no_actor.actor = None;
        assert!(!r.matcher.matches(&facts(&no_actor)));
    }

    #[test]
    fn target_domain_needs_every_recipient() {
        let r = rule("name: x\nmatch: {target_domain: acme.com}\ndecision: act\n");
        let ok = Action::new("gmail", Verb::Send)
            .with_params(json!({"to": ["a@acme.com", "b@eu.acme.com"]}));
        assert!(r.matcher.matches(&facts(&ok)));
        let mixed = Action::new("gmail", Verb::Send)
            .with_params(json!({"to": ["a@acme.com", "b@evil.io"]}));
        assert!(!r.matcher.matches(&facts(&mixed)));
        assert!(!r.matcher.matches(&facts(&Action::new("gmail", Verb::Send))));
    }

    #[test]
    fn checks_decisions_names_and_approvers() {
        let err = |yaml: &str| serde_yaml::from_str::<Rule>(yaml).unwrap_err().to_string();
        assert!(err("name: x\nmatch: {}\ndecision: maybe\n").contains("unknown decision \"maybe\""));
        assert!(err("name: x\nmatch: {}\ndecision: recorded\n").contains("unknown decision"));
        assert!(err("name: R3\nmatch: {}\ndecision: act\n").contains("reserved"));
        assert!(err("name: x\nmatch: {}\ndecision: act\napprovers: [a]\n")
            .contains("approvers only apply"));
        assert!(err("name: x\ndecision: act\n").contains("missing field `match`"));
        assert!(
            err("name: x\nmatch: {verbs: send}\ndecision: act\n").contains("unknown field `verbs`")
        );
        assert!(err("name: x\nmatch: {recognised: }\ndecision: act\n").contains("invalid type"));
        let ok = rule("name: x\nmatch: {}\ndecision: ASK\napprovers: finance\nreason: why\n");
        assert_eq!(ok.decision, Decision::Ask);
        assert_eq!(ok.approvers, ["finance"]);
        assert_eq!(ok.reason, "why");
        assert!(ok.quorum.is_none());
    }

    #[test]
    fn quorums_and_waits_are_read_and_checked() {
        let err = |yaml: &str| serde_yaml::from_str::<Rule>(yaml).unwrap_err().to_string();
        let ok = rule(concat!(
            "name: pay\nmatch: {}\ndecision: ask\n",
            "approvers: {from: [finance], count: 2}\n",
            "remind_after: 1h\nescalate_after: 4h\nescalate_to: [cfo]\nexpire_after: 1d\n",
        ));
        assert_eq!(ok.approvers, ["finance"]);
        assert_eq!(ok.quorum.as_ref().map(|q| q.count), Some(2));
        assert_eq!(
            (
                ok.waits.remind_after,
                ok.waits.escalate_after,
                ok.waits.expire_after
            ),
            (Some(3600), Some(4 * 3600), Some(86400))
        );
        assert_eq!(ok.waits.escalate_to, ["cfo"]);
        for (bad, says) in [
            ("escalate_after: 1h\n", "escalate_after needs escalate_to"),
            ("escalate_to: cfo\n", "escalate_to needs escalate_after"),
            (
                "remind_after: 2h\nexpire_after: 1h\n",
                "remind_after must be shorter",
            ),
            ("expire_after: soon\n", "is not a length"),
            ("remind_after: 0s\n", "shorter than a second"),
        ] {
            let text = format!("name: x\nmatch: {{}}\ndecision: ask\n{bad}");
            assert!(err(&text).contains(says), "{bad}: {}", err(&text));
        }
        assert!(err("name: x\nmatch: {}\ndecision: act\nexpire_after: 1h\n")
            .contains("only apply to decision ask"));
    }
}

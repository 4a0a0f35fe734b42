//! [`PolicyEngine`]: the built-in rules R0–R4 plus a YAML policy's rules.

use std::ops::ControlFlow;
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::action_pattern::ActionPattern;
use crate::calendar::Calendars;
use crate::dedupe::DedupeRule;
use crate::file::{parse, PolicyFile};
use crate::glob::Glob;
use crate::history::{Fact, History, HistoryRead, Mark, Question};
use crate::labels::Labels;
use crate::limit::Reading;
use crate::lint::{check_policy_text, problem};
use crate::placeholder::find_placeholder;
use crate::policy::risk_rule;
use crate::recipients::{actor_domain, for_each_recipient_host, Domains};
use crate::replay::{Recorded, Replayed};
use crate::rule::{Facts, Prefilter, Rule};
use crate::when::{Held, Scope, When};
use crate::{
    Action, Decision, Escalation, Policy, PolicyError, Quorum, QuorumGroup, Risk, TargetClass,
    Verdict,
};

/// The default policy's YAML text (`policies/default.yaml`), for showing to users.
pub const DEFAULT_POLICY_YAML: &str = include_str!("../../../policies/default.yaml");

/// The origin named in errors about the built-in default policy.
const DEFAULT_ORIGIN: &str = "policies/default.yaml";

/// A loaded policy: the built-in rules R0–R4 configured and extended by a YAML file.
///
/// For each action, in order:
/// 1. the **tier**: the action's explicit risk, else the first matching `risk:`
///    override, else [`Action::base_risk`] (delete very high, an unrecognised write
///    high, else by verb);
/// 2. **R0** organisation lists: `blocked` refuses (even reads) and nothing later can
///    change that; `approval_required` asks;
/// 3. **R1** owner: notes when the connection's owner is not the actor;
/// 4. **R2** target class of a write, from its recipients (the worst wins), unless the
///    action already carries one;
/// 5. **R3** placeholders in a write's params: ask, and hold until a person fills them;
/// 6. the first matching YAML rule, per-agent rules (`agents:`) before `policies:`;
///    else **R4**: low and medium risk act, high and very high ask.
///
/// The decision is the strictest of R0, R3 and step 6 (refuse > ask > act), so an
/// `act` rule never undoes an organisation rule or a placeholder hold. Every rule that
/// spoke is in `rules_fired`, with its reason at the same position in `reasons`.
///
/// Loading compiles every pattern and regex once; evaluating allocates only the
/// verdict's strings.
#[derive(Debug, Clone)]
pub struct PolicyEngine {
    domains: Domains,
    blocked: Vec<ActionPattern>,
    approval_required: Vec<ActionPattern>,
    risk_overrides: Vec<(ActionPattern, Risk)>,
    agents: Vec<(Glob, RuleList)>,
    rules: RuleList,
    /// The top-level duplicate window, for every write.
    dedupe: Option<DedupeRule>,
    /// `calendars:`, for `when:` conditions.
    calendars: Calendars,
    /// `labels:`, for history's `touched`.
    labels: Labels,
    /// Every history question a `when:` asks, each once, with a `did` pattern compiled.
    questions: Vec<(Question, Option<ActionPattern>)>,
}

/// What a `when:` condition is judged against besides the action.
#[derive(Clone, Copy)]
struct Moment<'a> {
    /// The call's time; `None` when a replayed row does not say.
    now: Option<DateTime<Utc>>,
    calendars: &'a Calendars,
    /// The call's history answers, when gathered.
    history: Option<&'a History>,
    /// Whether the policy asks history questions at all.
    asks_history: bool,
    /// A replay: a question it has no answers for is undecidable, not a failure.
    replay: bool,
}

/// A rule the match admitted, with what its `when:` said when it could not be judged.
type Admitted<'r> = (&'r CompiledRule, Option<String>);

/// Rules in order, with their prefilters in a parallel array.
#[derive(Debug, Clone, Default)]
struct RuleList {
    filters: Vec<Prefilter>,
    rules: Vec<CompiledRule>,
}

impl RuleList {
    fn new(rules: Vec<CompiledRule>) -> RuleList {
        RuleList {
            filters: rules.iter().map(|r| r.rule.matcher.prefilter()).collect(),
            rules,
        }
    }

    fn len(&self) -> usize {
        self.rules.len()
    }

    /// Shows `visit` the rules that match, in order, until it breaks; `Err` names the
    /// first rule whose match turns on params a record does not have (only when
    /// `params_complete` is false).
    fn each_match<'r>(
        &'r self,
        facts: &Facts<'_>,
        params_complete: bool,
        moment: Moment<'_>,
        scope: &mut Option<Scope>,
        visit: &mut dyn FnMut(Admitted<'r>) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, &'r CompiledRule> {
        for (filter, rule) in self.filters.iter().zip(&self.rules) {
            if !filter.admits(facts) {
                continue;
            }
            match rule.rule.matcher.matches_recorded(facts, params_complete) {
                Some(true) => {
                    let admitted = match &rule.rule.when {
                        None => (rule, None),
                        Some(when) => match judge_when(when, facts, params_complete, moment, scope)
                        {
                            None => return Err(rule),
                            Some(Held::No) => continue,
                            Some(Held::Yes) => (rule, None),
                            Some(Held::Failed(why)) => {
                                if !When::failed_applies(rule.rule.decision) {
                                    continue;
                                }
                                (rule, Some(why))
                            }
                        },
                    };
                    if visit(admitted).is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Some(false) => {}
                None => return Err(rule),
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// A `when:` judged for a call: `None` when it reads what a replayed row does not keep
/// (params it lacks, or the time).
fn judge_when(
    when: &When,
    facts: &Facts<'_>,
    params_complete: bool,
    moment: Moment<'_>,
    scope: &mut Option<Scope>,
) -> Option<Held> {
    if when.reads_params && !params_complete {
        return None;
    }
    if !when.questions.is_empty() && moment.history.is_none() && moment.replay {
        return None;
    }
    let now = match moment.now {
        Some(now) => now,
        None if when.reads_time => return None,
        None => DateTime::<Utc>::UNIX_EPOCH,
    };
    if let Some(held) = when.judge_natively(facts) {
        return Some(held);
    }
    // Built by the first condition the call reaches, for every later one.
    let history = moment.asks_history.then_some(moment.history);
    let scope = scope.get_or_insert_with(|| Scope::new(facts, now, moment.calendars, history));
    Some(when.judge(scope))
}

/// A rule with its approvers' groups resolved.
#[derive(Debug, Clone)]
struct CompiledRule {
    rule: Rule,
    approver_members: Vec<String>,
    quorum: Option<Quorum>,
    escalation: Option<Box<Escalation>>,
}

impl CompiledRule {
    fn new(rule: Rule, groups: &[(String, Vec<String>)]) -> CompiledRule {
        let quorum = rule.quorum.as_ref().map(|q| Quorum {
            need: q.count,
            each: if q.each {
                rule.approvers
                    .iter()
                    .map(|name| QuorumGroup {
                        name: name.clone(),
                        members: resolve(std::slice::from_ref(name), groups),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            reject: q.reject,
        });
        let waits = &rule.waits;
        let escalation = Escalation {
            remind_after: waits.remind_after,
            escalate_after: waits.escalate_after,
            escalate_to: waits.escalate_to.clone(),
            escalate_members: resolve(&waits.escalate_to, groups),
            expire_after: waits.expire_after,
        };
        CompiledRule {
            approver_members: resolve(&rule.approvers, groups),
            quorum,
            escalation: (!escalation.is_empty()).then(|| Box::new(escalation)),
            rule,
        }
    }
}

impl PolicyEngine {
    /// Loads a policy from YAML text. `origin` names the text in errors (usually the
    /// file name). The first problem is returned as [`PolicyError::Yaml`] with its
    /// line and column; [`lint`](crate::lint) lists them all.
    pub fn from_yaml(text: &str, origin: &str) -> Result<PolicyEngine, PolicyError> {
        check_policy_text(text, origin)?;
        let file = parse(text, &[])
            .result
            .map_err(|e| PolicyError::from(problem(&e, origin)))?;
        let engine = PolicyEngine::compile(file);
        if let Some(message) = engine.unknown_names().into_iter().next() {
            return Err(PolicyError::Yaml {
                origin: origin.to_owned(),
                line: 0,
                column: 0,
                message,
            });
        }
        Ok(engine)
    }

    /// The built-in default policy ([`DEFAULT_POLICY_YAML`]).
    pub fn default_policy() -> Result<PolicyEngine, PolicyError> {
        PolicyEngine::from_yaml(DEFAULT_POLICY_YAML, DEFAULT_ORIGIN)
    }

    /// The action's risk tier: its explicit risk, else the policy's first matching
    /// `risk:` override, else [`Action::base_risk`].
    pub fn tier(&self, action: &Action) -> Risk {
        if let Some(risk) = action.risk {
            return risk;
        }
        self.risk_overrides
            .iter()
            .find(|(pattern, _)| pattern.matches(action))
            .map_or_else(|| action.base_risk(), |(_, risk)| *risk)
    }

    /// How many YAML rules the policy has, per-agent rules included.
    pub fn rule_count(&self) -> usize {
        self.rules.len() + self.agents.iter().map(|(_, r)| r.len()).sum::<usize>()
    }

    fn compile(file: PolicyFile) -> PolicyEngine {
        let groups: Vec<(String, Vec<String>)> = file
            .groups
            .0
            .map(|map| {
                map.0
                    .into_iter()
                    .map(|(name, members)| (name.0, members.0.into_iter().map(|m| m.0).collect()))
                    .collect()
            })
            .unwrap_or_default();
        let compile_rules = |slots: Vec<crate::file::Slot<Rule>>| {
            RuleList::new(
                slots
                    .into_iter()
                    .filter_map(|slot| slot.0)
                    .map(|rule| CompiledRule::new(rule, &groups))
                    .collect(),
            )
        };
        let org = file.org.0.unwrap_or_default();
        let mut engine = PolicyEngine {
            domains: file.domains.0.map(|d| d.into_domains()).unwrap_or_default(),
            blocked: org.blocked.or_default().0,
            approval_required: org.approval_required.or_default().0,
            risk_overrides: file
                .risk
                .0
                .map(|map| map.0.into_iter().map(|(p, r)| (p, r.0)).collect())
                .unwrap_or_default(),
            agents: file
                .agents
                .0
                .into_iter()
                .map(|(agent, rules)| (agent, compile_rules(rules)))
                .collect(),
            rules: compile_rules(file.policies),
            dedupe: file.dedupe.0,
            calendars: file
                .calendars
                .0
                .map(Calendars::from_section)
                .unwrap_or_default(),
            labels: file.labels.0.map(Labels::from_section).unwrap_or_default(),
            questions: Vec::new(),
        };
        let mut questions: Vec<(Question, Option<ActionPattern>)> = Vec::new();
        for compiled in engine.all_rules() {
            let Some(when) = &compiled.rule.when else {
                continue;
            };
            for question in &when.questions {
                if questions.iter().any(|(q, _)| q == question) {
                    continue;
                }
                let pattern = match &question.fact {
                    Fact::Did(text) => ActionPattern::new(text.as_str()).ok(),
                    Fact::Touched(_) => None,
                };
                questions.push((question.clone(), pattern));
            }
        }
        engine.questions = questions;
        engine
    }

    /// Every YAML rule: each agent's, then `policies:`.
    fn all_rules(&self) -> impl Iterator<Item = &CompiledRule> {
        self.agents
            .iter()
            .map(|(_, list)| list)
            .chain([&self.rules])
            .flat_map(|list| list.rules.iter())
    }

    /// Whether a rule's `when:` asks history questions.
    pub fn asks_history(&self) -> bool {
        !self.questions.is_empty()
    }

    /// The history reads `action` needs: one per question asked by a rule whose `match:`
    /// admits it (none when no such rule asks history, so most calls read nothing).
    /// A read without a key (the call names no run, or no agent) is answered no.
    pub fn history_reads(&self, action: &Action) -> Vec<HistoryRead> {
        if self.questions.is_empty() {
            return Vec::new();
        }
        let tier = self.tier(action);
        let class = match action.target_class {
            Some(class) => class,
            None if !action.verb.is_read() => self.classify(action).0,
            None => TargetClass::None,
        };
        let facts = Facts {
            action,
            tier,
            class,
        };
        let agent = action.agent.as_deref().unwrap_or("");
        let lists = self
            .agents
            .iter()
            .filter(|(glob, _)| action.agent.is_some() && glob.matches(agent))
            .map(|(_, list)| list)
            .chain([&self.rules]);
        let mut reads: Vec<HistoryRead> = Vec::new();
        for list in lists {
            for (filter, compiled) in list.filters.iter().zip(&list.rules) {
                let Some(when) = &compiled.rule.when else {
                    continue;
                };
                if when.questions.is_empty()
                    || !filter.admits(&facts)
                    || !compiled.rule.matcher.matches(&facts)
                {
                    continue;
                }
                for question in &when.questions {
                    let id = question.id();
                    if !reads.iter().any(|r| r.question == id) {
                        reads.push(HistoryRead {
                            question: id,
                            key: question.key(action),
                            per_secs: question.per_secs(),
                        });
                    }
                }
            }
        }
        reads
    }

    /// The marks `action` leaves when it runs: for each question a `when:` asks that it
    /// answers yes to (it did what a `did` pattern names, it touched a label), one key
    /// under its run or agent.
    pub fn marks(&self, action: &Action) -> Vec<Mark> {
        let mut marks: Vec<Mark> = Vec::new();
        for (question, pattern) in &self.questions {
            let yes = match (&question.fact, pattern) {
                (Fact::Did(_), Some(pattern)) => pattern.did(action),
                (Fact::Did(_), None) => false,
                (Fact::Touched(label), _) => self
                    .labels
                    .get(label)
                    .is_some_and(|label| label.touched_by(action)),
            };
            let Some(key) = question.key(action).filter(|_| yes) else {
                continue;
            };
            match marks.iter_mut().find(|m| m.key == key) {
                Some(mark) => mark.per_secs = mark.per_secs.max(question.per_secs()),
                None => marks.push(Mark {
                    key,
                    per_secs: question.per_secs(),
                }),
            }
        }
        marks
    }

    /// One line for each `calendar.NAME` a rule's `when:` reads that `calendars:` does
    /// not define, and each label `touched` asks about that `labels:` does not.
    pub(crate) fn unknown_names(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for compiled in self.all_rules() {
            let Some(when) = &compiled.rule.when else {
                continue;
            };
            for name in when.calendars.iter().filter(|n| !self.calendars.has(n)) {
                problems.push(format!(
                    "rule {:?}: when: reads calendar.{name}, which calendars: does not define",
                    compiled.rule.name
                ));
            }
            for question in &when.questions {
                if let Fact::Touched(label) = &question.fact {
                    if self.labels.get(label).is_none() {
                        problems.push(format!(
                            "rule {:?}: when: asks {}, but labels: does not define {label:?}",
                            compiled.rule.name,
                            question.id()
                        ));
                    }
                }
            }
        }
        problems
    }

    /// Shows `visit` the matching YAML rules in order, the action's agent's rules first,
    /// until it breaks (`Err`: see [`RuleList::each_match`]).
    fn each_match<'r>(
        &'r self,
        facts: &Facts<'_>,
        params_complete: bool,
        (now, history, replay): (Option<DateTime<Utc>>, Option<&History>, bool),
        visit: &mut dyn FnMut(Admitted<'r>) -> ControlFlow<()>,
    ) -> Result<(), &'r CompiledRule> {
        let moment = Moment {
            now,
            calendars: &self.calendars,
            history,
            asks_history: !self.questions.is_empty(),
            replay,
        };
        let mut scope = None;
        if let Some(agent) = facts.action.agent.as_deref() {
            for (glob, rules) in &self.agents {
                if glob.matches(agent)
                    && rules
                        .each_match(facts, params_complete, moment, &mut scope, visit)?
                        .is_break()
                {
                    return Ok(());
                }
            }
        }
        self.rules
            .each_match(facts, params_complete, moment, &mut scope, visit)
            .map(drop)
    }

    /// Decides a recorded action again, from what its ledger row kept: see
    /// [`Recorded`]. A decision that turns on params the row does not have is
    /// [`Replayed::Undecidable`], naming the rule, never guessed.
    pub fn replay(&self, action: &Action, recorded: Recorded) -> Replayed {
        self.replay_with(action, recorded, None)
    }

    /// [`PolicyEngine::replay`] with the answers to the action's history questions,
    /// worked out from the rows before it (`None`: a rule whose `when:` asks history is
    /// undecidable).
    pub fn replay_with(
        &self,
        action: &Action,
        recorded: Recorded,
        history: Option<&History>,
    ) -> Replayed {
        match self.decide(action, recorded, (history, true)) {
            // A window's figure is what had run by then, which one row does not say.
            Ok(verdict) => match (verdict.windows.first(), &verdict.dedupe) {
                (Some(window), _) => Replayed::Undecidable {
                    rule: window.rule.clone(),
                },
                // Whether the same call had run just before is not in one row either:
                // undecidable only where a duplicate would change the decision.
                (None, Some(dedupe))
                    if strictness(dedupe.decision) > strictness(verdict.decision) =>
                {
                    Replayed::Undecidable {
                        rule: dedupe.rule.clone(),
                    }
                }
                (None, _) => Replayed::Decided(Box::new(Verdict {
                    dedupe: None,
                    ..verdict
                })),
            },
            Err(rule) => Replayed::Undecidable { rule },
        }
    }

    /// R2: the worst class among the action's recipients, and a host of that class.
    fn classify<'a>(&self, action: &'a Action) -> (TargetClass, &'a str) {
        // The actor's registered domain, looked up only if there is a recipient.
        let mut actor = None;
        let mut worst = (TargetClass::None, "");
        for_each_recipient_host(action, &mut |host| {
            let actor = actor
                .get_or_insert_with(|| action.actor.as_deref().and_then(actor_domain))
                .as_deref();
            let class = self.domains.classify(host, actor);
            if class > worst.0 {
                worst = (class, host);
            }
        });
        worst
    }
}

/// Approvers with group names replaced by the groups' members, without duplicates.
fn resolve(approvers: &[String], groups: &[(String, Vec<String>)]) -> Vec<String> {
    let mut members: Vec<String> = Vec::new();
    for approver in approvers {
        let group = groups
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(approver));
        let people = match group {
            Some((_, people)) => people.as_slice(),
            None => std::slice::from_ref(approver),
        };
        for person in people {
            if !members.iter().any(|m| m.eq_ignore_ascii_case(person)) {
                members.push(person.clone());
            }
        }
    }
    members
}

/// How strict a decision is: refuse > ask > act.
fn strictness(decision: Decision) -> u8 {
    match decision {
        Decision::Act | Decision::Recorded => 0,
        Decision::Ask => 1,
        Decision::Refuse => 2,
    }
}

/// The stricter of two decisions.
fn stricter(a: Decision, b: Decision) -> Decision {
    if strictness(b) > strictness(a) {
        b
    } else {
        a
    }
}

impl Verdict {
    fn note(&mut self, rule: &str, reason: String) {
        self.rules_fired.push(rule.to_owned());
        self.reasons.push(reason);
    }
}

impl Policy for PolicyEngine {
    fn evaluate(&self, action: &Action) -> Result<Verdict, PolicyError> {
        self.evaluate_at(action, SystemTime::now())
    }

    /// `at` is what `when:` conditions read as `now`.
    fn evaluate_at(&self, action: &Action, at: SystemTime) -> Result<Verdict, PolicyError> {
        self.decide_live(action, at, None)
    }

    fn evaluate_with(
        &self,
        action: &Action,
        at: SystemTime,
        history: &History,
    ) -> Result<Verdict, PolicyError> {
        self.decide_live(action, at, Some(history))
    }

    fn history_reads(&self, action: &Action) -> Vec<HistoryRead> {
        PolicyEngine::history_reads(self, action)
    }

    fn marks(&self, action: &Action) -> Vec<Mark> {
        PolicyEngine::marks(self, action)
    }
}

impl PolicyEngine {
    /// A live action's verdict at `at`, with its history answers when gathered.
    fn decide_live(
        &self,
        action: &Action,
        at: SystemTime,
        history: Option<&History>,
    ) -> Result<Verdict, PolicyError> {
        let recorded = Recorded {
            at: Some(at),
            ..Recorded::COMPLETE
        };
        self.decide(action, recorded, (history, false))
            .map_err(|_| PolicyError::Internal("a live action's params were taken as unknown"))
    }

    /// The verdict, or the name of the rule whose answer turns on params that
    /// `known` says are not there (never with [`Recorded::COMPLETE`]). Where a parser gave
    /// up on the call ([`crate::Extra::face_verb`]), both readings are judged and the
    /// stricter verdict stands, with the other's budget and rate windows: a rule written
    /// for the face verb (a `limit` whose amount cannot be read) is never escaped by the
    /// substituted verb.
    fn decide(
        &self,
        action: &Action,
        known: Recorded,
        history: (Option<&History>, bool),
    ) -> Result<Verdict, String> {
        let verdict = self.decide_one(action, known, history)?;
        let Some(face) = action.extra.face_verb.filter(|face| *face != action.verb) else {
            return Ok(verdict);
        };
        let mut on_face = action.clone();
        on_face.verb = face;
        on_face.extra.face_verb = None;
        let on_face = self.decide_one(&on_face, known, history)?;
        let (mut kept, other) = if strictness(on_face.decision) > strictness(verdict.decision) {
            (on_face, verdict)
        } else {
            (verdict, on_face)
        };
        // A rule both readings met counts the call once.
        for window in other.windows {
            if !kept.windows.iter().any(|w| w.key == window.key) {
                kept.windows.push(window);
            }
        }
        Ok(kept)
    }

    /// [`PolicyEngine::decide`] for one reading of the call.
    fn decide_one(
        &self,
        action: &Action,
        known: Recorded,
        (history, replay): (Option<&History>, bool),
    ) -> Result<Verdict, String> {
        let complete = known.params_complete;
        let now = known.at.map(DateTime::<Utc>::from);
        let tier = self.tier(action);
        let mut verdict = Verdict {
            decision: Decision::Act,
            tier,
            reasons: Vec::with_capacity(3),
            rules_fired: Vec::with_capacity(3),
            target_class: TargetClass::None,
            approvers: Vec::new(),
            approver_members: Vec::new(),
            hold: false,
            windows: Vec::new(),
            quorum: None,
            escalation: None,
            dedupe: None,
        };
        // The strictest built-in decision so far, and the rule that made it.
        let mut floor: Option<(Decision, &'static str)> = None;

        // A tier the tool's own annotation set says so, naming the annotation.
        if let (Some(hint), Some(_)) = (&action.extra.risk_hint, action.risk) {
            verdict.note(
                "annotation",
                format!(
                    "the tool's own annotation {hint} makes it {} risk",
                    tier.as_str()
                ),
            );
        }

        // R0 reads addresses from params: a record without them cannot say.
        let org_reads_params = self
            .blocked
            .iter()
            .chain(&self.approval_required)
            .any(|p| p.reads_recipients() && p.matches_but_recipients(action));
        if !complete && org_reads_params {
            return Err("R0".to_owned());
        }
        // R0: organisation lists.
        if let Some(pattern) = self
            .blocked
            .iter()
            .find(|p| p.matches_any_recipient(action))
        {
            floor = Some((Decision::Refuse, "R0"));
            verdict.note(
                "R0",
                format!(
                    "the organisation blocks {}.{} (org rule {})",
                    action.system,
                    action.verb,
                    pattern.as_str()
                ),
            );
        } else if let Some(pattern) = self
            .approval_required
            .iter()
            .find(|p| p.matches_any_recipient(action))
        {
            floor = Some((Decision::Ask, "R0"));
            verdict.note(
                "R0",
                format!(
                    "the organisation requires approval for {}.{} (org rule {})",
                    action.system,
                    action.verb,
                    pattern.as_str()
                ),
            );
        }

        // R1: someone else's connection.
        if let (Some(owner), Some(actor)) = (action.owner.as_deref(), action.actor.as_deref()) {
            if !owner.trim().eq_ignore_ascii_case(actor.trim()) {
                verdict.note(
                    "R1",
                    format!("runs on {owner}'s connection on behalf of {actor}"),
                );
            }
        }

        // R2: who a write reaches.
        let is_write = !action.verb.is_read();
        if let Some(given) = action.target_class {
            verdict.target_class = given;
            if is_write && given != TargetClass::None {
                verdict.note(
                    "R2",
                    format!("target class {}, as given by the caller", given.as_str()),
                );
            }
        } else if is_write {
            let (class, host) = self.classify(action);
            verdict.target_class = class;
            let reason = match class {
                TargetClass::None => None,
                TargetClass::Internal => Some("reaches internal recipients only".to_owned()),
                TargetClass::Known => Some(format!("reaches a known domain ({host})")),
                TargetClass::External => Some(if host.is_empty() {
                    "reaches a malformed address, treated as external".to_owned()
                } else {
                    format!("reaches an external recipient ({host})")
                }),
            };
            if let Some(reason) = reason {
                verdict.note("R2", reason);
            }
        }

        if let Some((Decision::Refuse, _)) = floor {
            verdict.decision = Decision::Refuse;
            return Ok(verdict);
        }

        // R3: unfilled placeholders hold a write.
        let mut placeholder = false;
        if is_write && !complete {
            // What the record says the params held (R3 fired when it was decided).
            match known.placeholders {
                Some(true) => {
                    placeholder = true;
                    floor = Some((Decision::Ask, floor.map_or("R3", |(_, rule)| rule)));
                    verdict.note(
                        "R3",
                        "unfilled placeholder in params (as recorded)".to_owned(),
                    );
                }
                Some(false) => {}
                None => return Err("R3".to_owned()),
            }
        } else if is_write {
            if let Some(found) = find_placeholder(&action.params) {
                placeholder = true;
                floor = Some((Decision::Ask, floor.map_or("R3", |(_, rule)| rule)));
                let place = if found.path.is_empty() {
                    "params".to_owned()
                } else {
                    found.path
                };
                verdict.note(
                    "R3",
                    format!(
                        "unfilled placeholder {} in {place}: fill before it leaves",
                        found.text
                    ),
                );
            }
        }

        // The first YAML rule, else R4.
        let facts = Facts {
            action,
            tier,
            class: verdict.target_class,
        };
        // The first matching rule without a limit decides, else R4. A limit rule met on
        // the way decides only if its window is crossed: its window goes with the
        // verdict, carrying the verdict it would make.
        let mut windows = Vec::new();
        let mut chosen: Option<(&CompiledRule, Option<String>)> = None;
        // What the deciding rule's `when:` said, when it could not be judged.
        let mut chosen_failure: Option<String> = None;
        let mut replay_blind: Option<&CompiledRule> = None;
        // The first matching rule's duplicate window, a limit rule's included.
        let mut dedupe: Option<crate::Dedupe> = None;
        self.each_match(&facts, complete, (now, history, replay), &mut |(
            compiled,
            failed,
        )| {
            let rule = &compiled.rule;
            let failed = failed.map(|why| {
                format!(
                    "when: {} could not be judged ({why}): the riskiest reading, the rule applies",
                    rule.when.as_ref().map_or("", |w| w.source.as_str())
                )
            });
            if dedupe.is_none() {
                dedupe = rule.dedupe.as_ref().map(|d| d.window(&rule.name));
            }
            let Some(limit) = &rule.limit else {
                chosen = Some((compiled, None));
                chosen_failure = failed;
                return ControlFlow::Break(());
            };
            if !complete {
                // What ran then is not in a record of one row.
                replay_blind = Some(compiled);
                return ControlFlow::Break(());
            }
            match limit.read(&rule.name, action) {
                Reading::Applies(why) => {
                    chosen = Some((compiled, Some(why)));
                    chosen_failure = failed;
                    ControlFlow::Break(())
                }
                Reading::Window { key, scope, adds } => {
                    let mut over = verdict.clone();
                    let base = rule.reason_written.then(|| rule.reason.clone());
                    let at = conclude(
                        &mut over,
                        (floor, placeholder),
                        Some((compiled, Some(base.unwrap_or_default()))),
                        action,
                        tier,
                    );
                    windows.push(limit.window(&rule.name, key, scope, adds, over, at));
                    ControlFlow::Continue(())
                }
            }
        })
        .map_err(|rule| rule.rule.name.clone())?;
        if let Some(rule) = replay_blind {
            return Err(rule.rule.name.clone());
        }
        let chosen = chosen.map(|(compiled, why)| {
            let rule = &compiled.rule;
            let mut reason = why.map(|why| {
                if rule.reason_written {
                    format!("{}: {why}", rule.reason)
                } else {
                    why
                }
            });
            // Which `when:` held, or that it could not be judged.
            if let Some(when) = &rule.when {
                let base = reason.take().unwrap_or_else(|| rule.reason.clone());
                reason = Some(match &chosen_failure {
                    Some(failed) => format!("{base} ({failed})"),
                    None => format!("{base} (when: {} held)", when.source),
                });
            }
            (compiled, reason)
        });
        conclude(&mut verdict, (floor, placeholder), chosen, action, tier);
        verdict.windows = windows;
        // A duplicate of a write: the rule's window, else the top level's. A refusal
        // needs none: nothing stricter could follow.
        if !action.verb.is_read() && verdict.decision != Decision::Refuse {
            verdict.dedupe =
                dedupe.or_else(|| self.dedupe.as_ref().map(|d| d.window(crate::DEDUPE_RULE)));
        }
        Ok(verdict)
    }
}

/// Ends a verdict with the rule that decides (its reason, or `reason` in its stead), or
/// R4 when none does, under the built-in rules' `floor`; returns where the deciding
/// rule's reason is in `verdict.reasons`.
fn conclude(
    verdict: &mut Verdict,
    (floor, placeholder): (Option<(Decision, &'static str)>, bool),
    rule: Option<(&CompiledRule, Option<String>)>,
    action: &Action,
    tier: Risk,
) -> usize {
    let floor_decision = floor.map_or(Decision::Act, |(d, _)| d);
    let at = verdict.reasons.len();
    if let Some((compiled, reason)) = rule {
        let rule = &compiled.rule;
        let decision = stricter(floor_decision, rule.decision);
        let own = reason.unwrap_or_else(|| rule.reason.clone());
        let reason = match floor {
            Some((d, by)) if strictness(d) > strictness(rule.decision) => {
                format!("{own} (but {by} makes it {d})")
            }
            _ => own,
        };
        verdict.note(&rule.name, reason);
        if decision == Decision::Ask && rule.decision == Decision::Ask {
            verdict.approvers.clone_from(&rule.approvers);
            verdict
                .approver_members
                .clone_from(&compiled.approver_members);
            verdict.quorum.clone_from(&compiled.quorum);
            verdict.escalation.clone_from(&compiled.escalation);
        }
        verdict.decision = decision;
    } else {
        let (decision, reason) = risk_rule(action, tier);
        if strictness(decision) >= strictness(floor_decision) {
            verdict.note("R4", reason);
        }
        verdict.decision = stricter(floor_decision, decision);
    }
    verdict.hold = placeholder && verdict.decision == Decision::Ask;
    at
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verb;

    fn engine(yaml: &str) -> PolicyEngine {
        PolicyEngine::from_yaml(yaml, "test.yaml").unwrap()
    }

    #[test]
    fn the_default_policy_loads() {
        let policy = PolicyEngine::default_policy().unwrap();
        assert!(policy.rule_count() >= 4);
    }

    #[test]
    fn an_empty_policy_is_r0_to_r4_alone() {
        let policy = engine("policies: []\n");
        let v = policy.evaluate(&Action::new("gmail", Verb::List)).unwrap();
        assert_eq!(
            (v.decision, v.rules_fired.as_slice()),
            (Decision::Act, ["R4".to_owned()].as_slice())
        );
        let v = policy.evaluate(&Action::new("gmail", Verb::Send)).unwrap();
        assert_eq!(v.decision, Decision::Ask);
    }

    #[test]
    fn tier_order_explicit_then_override_then_base() {
        let policy = engine("risk: {\"stripe.pay:cus_vip*\": medium, \"stripe.*\": very_high}\n");
        let vip = Action::new("stripe", Verb::Pay).with_target("cus_vip_1");
        assert_eq!(policy.tier(&vip), Risk::Medium);
        let create = Action::new("stripe", Verb::Create);
        assert_eq!(policy.tier(&create), Risk::VeryHigh);
        assert_eq!(
            policy.tier(&create.clone().with_risk(Risk::Medium)),
            Risk::Medium
        );
        assert_eq!(
            policy.tier(&Action::new("gmail", Verb::Delete)),
            Risk::VeryHigh
        );
        assert_eq!(
            policy.tier(&Action::new("gmail", Verb::Update)),
            Risk::Medium
        );
    }

    #[test]
    fn approvers_resolve_groups_without_duplicates() {
        let groups = vec![(
            "finance".to_owned(),
            vec!["a@x.io".to_owned(), "b@x.io".to_owned()],
        )];
        let out = resolve(
            &[
                "Finance".to_owned(),
                "b@x.io".to_owned(),
                "c@x.io".to_owned(),
            ],
            &groups,
        );
        assert_eq!(out, ["a@x.io", "b@x.io", "c@x.io"]);
    }

    #[test]
    fn placeholders_in_params_hold_writes_only() {
        let policy = engine("policies: []\n");
        let params = json!({"body": "Dear [Client Name],"});
        let v = policy
            .evaluate(&Action::new("gmail", Verb::Update).with_params(params.clone()))
            .unwrap();
        assert!(v.hold);
        assert_eq!(v.decision, Decision::Ask);
        assert_eq!(v.rules_fired, ["R3"]);
        assert!(
            v.reasons[0].contains("[Client Name] in /body: fill before it leaves"),
            "{:?}",
            v.reasons
        );
        let read = policy
            .evaluate(&Action::new("gmail", Verb::Search).with_params(params))
            .unwrap();
        assert!(!read.hold);
        assert_eq!(read.decision, Decision::Act);
    }

    const BUDGET: &str = concat!(
        "policies:\n",
        "  - name: budget\n",
        "    match: {system: stripe, verb: pay}\n",
        "    limit: {sum: /amount, max: 500, per: 24h, by: [agent]}\n",
        "  - name: payments-act\n",
        "    match: {system: stripe}\n",
        "    decision: act\n",
    );

    #[test]
    fn a_limit_rule_returns_its_window_and_the_next_rule_decides_under_it() {
        let policy = engine(BUDGET);
        let pay = Action::new("stripe", Verb::Pay)
            .with_agent("bot")
            .with_params(json!({"amount": 45}));
        let v = policy.evaluate(&pay).unwrap();
        assert_eq!(v.decision, Decision::Act);
        assert_eq!(v.rules_fired, ["payments-act"]);
        let [window] = v.windows.as_slice() else {
            panic!("one window: {:?}", v.windows)
        };
        assert_eq!(
            (window.rule.as_str(), window.max, window.adds),
            ("budget", 500.0, 45.0)
        );
        assert_eq!(window.per_secs, 24 * 3600);
        let crossed = window.crossed(480.0);
        assert_eq!(crossed.decision, Decision::Ask, "a limit asks by default");
        assert_eq!(crossed.rules_fired, ["budget"]);
        assert_eq!(
            crossed.reasons,
            ["agent bot spent 480 of 500 in 24h; this call adds 45 (/amount)"]
        );
        assert!(crossed.windows.is_empty());
    }

    #[test]
    fn an_amount_that_is_not_a_number_is_the_riskiest_reading() {
        let policy = engine(BUDGET);
        let pay = Action::new("stripe", Verb::Pay).with_params(json!({"amount": "a lot"}));
        let v = policy.evaluate(&pay).unwrap();
        assert_eq!(v.decision, Decision::Ask);
        assert_eq!(v.rules_fired, ["budget"]);
        assert!(v.windows.is_empty());
        assert!(
            v.reasons[0].contains("/amount is not a number") && v.reasons[0].contains("applies"),
            "{:?}",
            v.reasons
        );
    }

    #[test]
    fn a_call_a_parser_gave_up_on_is_judged_on_its_face_too() {
        let policy = engine(&format!(
            "{BUDGET}  - name: deletes\n    match: {{verb: delete}}\n    decision: act\n"
        ));
        // Read as a delete (which acts), on its face a payment whose amount cannot be
        // read: the budget's own decision (ask) stands, the stricter of the two.
        let mut gave_up =
            Action::new("stripe", Verb::Delete).with_params(json!("{\"amount\": 1e400}"));
        gave_up.extra.face_verb = Some(Verb::Pay);
        let v = policy.evaluate(&gave_up).unwrap();
        assert_eq!(
            (v.decision, v.rules_fired.as_slice()),
            (Decision::Ask, &["budget".to_owned()][..])
        );
        // A readable amount: the face reading's window goes with the stricter verdict.
        gave_up.params = json!({"amount": 45});
        let v = policy.evaluate(&gave_up).unwrap();
        assert_eq!(v.windows.len(), 1, "{v:?}");
        assert_eq!(v.windows[0].rule, "budget");
        // Without the face reading, the budget was escaped.
        gave_up.extra.face_verb = None;
        assert!(policy.evaluate(&gave_up).unwrap().windows.is_empty());
    }

    const DEDUPE: &str = concat!(
        "dedupe: {window: 60s}\n",
        "policies:\n",
        "  - name: refunds\n",
        "    match: {system: stripe, verb: pay}\n",
        "    decision: act\n",
        "    dedupe: {window: 10m, decision: refuse}\n",
        "  - name: blocked\n",
        "    match: {system: github, verb: delete}\n",
        "    decision: refuse\n",
        "  - name: rest\n",
        "    match: {}\n",
        "    decision: act\n",
    );

    #[test]
    fn a_write_carries_its_rules_dedupe_window_else_the_top_levels() {
        let policy = engine(DEDUPE);
        let pay = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 5}));
        let v = policy.evaluate(&pay).unwrap();
        assert_eq!(v.decision, Decision::Act);
        let dedupe = v.dedupe.expect("the rule's window");
        assert_eq!(
            (dedupe.rule.as_str(), dedupe.window_secs, dedupe.decision),
            ("refunds", 600, Decision::Refuse)
        );
        let send = policy.evaluate(&Action::new("gmail", Verb::Send)).unwrap();
        let dedupe = send.dedupe.expect("the top level's window");
        assert_eq!(
            (dedupe.rule.as_str(), dedupe.window_secs, dedupe.decision),
            ("dedupe", 60, Decision::Ask)
        );
        // Reads are never duplicates; a refusal needs no window.
        let read = policy
            .evaluate(&Action::new("gmail", Verb::Search))
            .unwrap();
        assert_eq!(read.dedupe, None);
        let refused = policy
            .evaluate(&Action::new("github", Verb::Delete))
            .unwrap();
        assert_eq!(refused.decision, Decision::Refuse);
        assert_eq!(refused.dedupe, None);
        // Without `dedupe:` nothing is suppressed.
        let off = engine(BUDGET)
            .evaluate(&Action::new("gmail", Verb::Send))
            .unwrap();
        assert_eq!(off.dedupe, None);
    }

    #[test]
    fn a_dedupe_is_replayed_only_where_a_duplicate_would_not_change_the_decision() {
        let policy = engine(DEDUPE);
        let recorded = Recorded {
            params_complete: true,
            placeholders: Some(false),
            at: None,
        };
        let pay = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 5}));
        assert_eq!(
            policy.replay(&pay, recorded),
            Replayed::Undecidable {
                rule: "refunds".to_owned()
            }
        );
        let strict = engine(concat!(
            "dedupe: {window: 60s}\n",
            "policies:\n",
            "  - name: sends\n",
            "    match: {verb: send}\n",
            "    decision: ask\n",
        ));
        let Replayed::Decided(v) = strict.replay(&Action::new("gmail", Verb::Send), recorded)
        else {
            panic!("an ask stays an ask whether or not the same call ran")
        };
        assert_eq!((v.decision, v.dedupe), (Decision::Ask, None));
    }

    #[test]
    fn a_limit_rule_cannot_be_replayed_from_one_row() {
        let policy = engine(BUDGET);
        let pay = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 5}));
        for params_complete in [false, true] {
            let recorded = Recorded {
                params_complete,
                placeholders: Some(false),
                at: None,
            };
            assert_eq!(
                policy.replay(&pay, recorded),
                Replayed::Undecidable {
                    rule: "budget".to_owned()
                }
            );
        }
    }
}

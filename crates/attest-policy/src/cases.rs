//! Policy test cases: expected decisions kept next to a policy and run in CI
//! (`attest policy test FILE CASES.yaml`).
//!
//! ```yaml
//! cases:
//!   - name: a refund over 500 dollars asks
//!     action:                  # system and verb are required
//!       system: stripe
//!       verb: pay
//!       target: cus_123        # optional: target, params, actor, owner, agent,
//!       params: {amount: 60000} #   risk, recognised (default true), target_class
//!     expect:
//!       decision: ask          # required
//!       rules: [refund-limit]  # optional: these rules fired, in this order
//!       hold: false            # optional; also tier, target_class
//!   - name: the same refund, as the gateway sees it
//!     call:                    # instead of action: a tool call or an HTTP request,
//!       method: POST           #   which the caller's resolver runs through detection
//!       url: https://api.stripe.com/v1/refunds
//!       body: {charge: ch_1, amount: 60000}
//!     expect: {decision: ask}
//!   - name: a deploy on Friday evening in Berlin is refused
//!     now: 2026-03-27T16:30:00Z  # optional: the time `when:` conditions read
//!     action: {system: github, verb: execute}
//!     expect: {decision: refuse}
//! ```
//!
//! attest-policy knows nothing of detection: a case with a `call` needs a resolver
//! ([`run_cases_with`]); `attest policy test` passes attest-core's detection.

use std::fmt;
use std::time::SystemTime;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{checked_map, OneOrMany, Text, Word, W};
use crate::lint::{check_size, problem};
use crate::{Action, Decision, History, Policy, PolicyError, Risk, TargetClass, Verb, Verdict};

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// True when every expectation held.
    pub passed: bool,
    /// One line per expectation that did not hold (empty when passed).
    pub failures: Vec<String>,
    /// What the policy decided; `None` when it could not decide.
    pub verdict: Option<Verdict>,
}

/// The outcome of a cases file, case by case, in file order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseReport {
    /// Where the cases came from, as the caller named it.
    pub origin: String,
    /// One result per case.
    pub results: Vec<CaseResult>,
}

impl CaseReport {
    /// How many cases passed.
    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.passed).count()
    }

    /// How many cases failed.
    pub fn failed(&self) -> usize {
        self.results.len() - self.passed()
    }

    /// True when every case passed.
    pub fn all_passed(&self) -> bool {
        self.results.iter().all(|r| r.passed)
    }
}

impl fmt::Display for CaseReport {
    /// One line per case (`ok` or `FAIL`, with the failures indented below), then
    /// `N of M cases passed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for result in &self.results {
            let mark = if result.passed { "ok  " } else { "FAIL" };
            writeln!(f, "{mark} {}", result.name)?;
            for failure in &result.failures {
                writeln!(f, "       {failure}")?;
            }
        }
        write!(
            f,
            "{} of {} cases passed ({})",
            self.passed(),
            self.results.len(),
            self.origin
        )
    }
}

/// A tool call or HTTP request a case gives instead of an action (`call:`), for a
/// resolver to run through detection.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct CaseCall {
    /// An MCP tool name (`gmail_send_message`).
    pub tool: Option<String>,
    /// The MCP server the user named for the tool (`--server hr`): the system.
    pub server: Option<String>,
    /// The tool's arguments.
    pub params: Option<Value>,
    /// An HTTP method (`POST`), with `url`.
    pub method: Option<String>,
    /// The request's URL.
    pub url: Option<String>,
    /// The request's body: a JSON value, or a string sent as it is (a form body).
    pub body: Option<Value>,
    /// Who acts.
    pub actor: Option<String>,
    /// Whose connection the call runs on.
    pub owner: Option<String>,
    /// The agent making the call.
    pub agent: Option<String>,
}

impl CaseCall {
    /// The request body's bytes: a string as it is, any other value as JSON.
    pub fn body_bytes(&self) -> Option<Vec<u8>> {
        match &self.body {
            None => None,
            Some(Value::String(text)) => Some(text.as_bytes().to_vec()),
            Some(value) => Some(value.to_string().into_bytes()),
        }
    }

    /// Sets the actor, owner and agent the case gives on the resolved action.
    pub fn fill_people(&self, action: &mut Action) {
        action.actor.clone_from(&self.actor);
        action.owner.clone_from(&self.owner);
        action.agent.clone_from(&self.agent);
    }
}

/// Turns a case's call into the action detection makes of it, or says why it cannot.
pub type CallResolver<'a> = &'a dyn Fn(&CaseCall) -> Result<Action, String>;

/// Runs the cases in `text` (a cases YAML file named `origin`) against `policy`.
///
/// An invalid cases file is a [`PolicyError::Yaml`] with its line; a case whose
/// action the policy cannot decide fails with the error as its reason. A case that
/// gives a `call` fails here, since resolving it needs detection: use [`run_cases_with`].
pub fn run_cases(policy: &dyn Policy, text: &str, origin: &str) -> Result<CaseReport, PolicyError> {
    run_cases_with(policy, text, origin, &|_| {
        Err(
            "this case gives a call, which needs detection: run it with `attest policy test`"
                .to_owned(),
        )
    })
}

/// Runs the cases in `text` against `policy`, turning each `call:` into an action with
/// `resolve` (detection, in attest-core).
pub fn run_cases_with(
    policy: &dyn Policy,
    text: &str,
    origin: &str,
    resolve: CallResolver<'_>,
) -> Result<CaseReport, PolicyError> {
    check_size(text, origin)?;
    let file: CasesFile =
        serde_yaml::from_str(text).map_err(|e| PolicyError::from(problem(&e, origin)))?;
    let results = file
        .cases
        .into_iter()
        .map(|case| run_case(policy, case, resolve))
        .collect();
    Ok(CaseReport {
        origin: origin.to_owned(),
        results,
    })
}

fn run_case(policy: &dyn Policy, case: Case, resolve: CallResolver<'_>) -> CaseResult {
    let failed = |name: String, why: String| CaseResult {
        name,
        passed: false,
        failures: vec![why],
        verdict: None,
    };
    let mut action = match case.given.resolve(resolve) {
        Ok(action) => action,
        Err(why) => return failed(case.name.0, why),
    };
    // The case and its history are one run, of the case's agent unless an earlier
    // action names another.
    action.run_id.get_or_insert_with(|| CASE_RUN.to_owned());
    let mut marks = Vec::new();
    for (n, earlier) in case.history.into_iter().enumerate() {
        let mut earlier = match earlier.resolve(resolve) {
            Ok(earlier) => earlier,
            Err(why) => return failed(case.name.0, format!("history item {}: {why}", n + 1)),
        };
        earlier.run_id.get_or_insert_with(|| CASE_RUN.to_owned());
        if earlier.agent.is_none() {
            earlier.agent.clone_from(&action.agent);
        }
        marks.extend(policy.marks(&earlier));
    }
    let history = History::from_marks(&policy.history_reads(&action), &marks);
    let decided = policy.evaluate_with(&action, case.now.unwrap_or_else(SystemTime::now), &history);
    let verdict = match decided {
        Ok(verdict) => verdict,
        Err(e) => return failed(case.name.0, format!("the policy could not decide: {e}")),
    };
    let failures = case.expect.failures(&verdict);
    CaseResult {
        name: case.name.0,
        passed: failures.is_empty(),
        failures,
        verdict: Some(verdict),
    }
}

/// The run a case's action and its `history:` belong to, unless they name one.
const CASE_RUN: &str = "policy-test-case";

/// A cases file.
struct CasesFile {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCasesFile {
    cases: Vec<Case>,
}

impl<'de> Deserialize<'de> for CasesFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a mapping with a cases list",
            |raw: RawCasesFile| {
                if raw.cases.is_empty() {
                    return Err("no cases (a cases file needs at least one)".to_owned());
                }
                Ok(CasesFile { cases: raw.cases })
            },
        )
    }
}

struct Case {
    name: Text,
    given: Given,
    /// The time the case's action is made (`now:`), for `when:` conditions.
    now: Option<SystemTime>,
    /// What the run did before (`history:`), in order, for history questions.
    history: Vec<Given>,
    expect: Expect,
}

/// A case's `now:`, an RFC 3339 time such as `2026-03-27T15:30:00Z`.
struct CaseTime(SystemTime);

impl Word for CaseTime {
    const EXPECTING: &'static str = "an RFC 3339 time such as 2026-03-27T15:30:00Z";

    fn from_word(word: &str) -> Result<Self, String> {
        humantime::parse_rfc3339_weak(word.trim())
            .map(CaseTime)
            .map_err(|e| format!("now: {word:?} is not an RFC 3339 time in UTC ({e})"))
    }
}

/// What a case decides: an action as written, or a call for detection.
enum Given {
    Action(Box<CaseAction>),
    Call(Box<CaseCall>),
}

impl Given {
    /// The action, a call's through `resolve`.
    fn resolve(self, resolve: CallResolver<'_>) -> Result<Action, String> {
        match self {
            Given::Action(action) => Ok(action.into_action()),
            Given::Call(call) => {
                resolve(&call).map_err(|why| format!("the call could not be resolved: {why}"))
            }
        }
    }

    fn check(
        action: Option<Box<CaseAction>>,
        call: Option<Box<CaseCall>>,
    ) -> Result<Given, String> {
        Ok(match (action, call) {
            (Some(action), None) => Given::Action(action),
            (None, Some(call)) => {
                let tool = call.tool.is_some();
                let http = call.method.is_some() || call.url.is_some();
                if tool == http {
                    return Err("a call gives either tool (with server and params) \
                                or method and url (with body)"
                        .to_owned());
                }
                if http && (call.method.is_none() || call.url.is_none()) {
                    return Err("an HTTP call needs both method and url".to_owned());
                }
                Given::Call(call)
            }
            _ => return Err("a case gives an action or a call: one of the two".to_owned()),
        })
    }
}

/// One earlier action of a case's `history:`: an action or a call, as a case gives.
struct Earlier(Given);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEarlier {
    #[serde(default)]
    action: Option<Box<CaseAction>>,
    #[serde(default)]
    call: Option<Box<CaseCall>>,
}

impl<'de> Deserialize<'de> for Earlier {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "an earlier action: {action: {...}} or {call: {...}}",
            |raw: RawEarlier| Given::check(raw.action, raw.call).map(Earlier),
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: Text,
    #[serde(default)]
    action: Option<Box<CaseAction>>,
    #[serde(default)]
    call: Option<Box<CaseCall>>,
    #[serde(default)]
    now: Option<W<CaseTime>>,
    #[serde(default)]
    history: Vec<Earlier>,
    expect: Expect,
}

impl<'de> Deserialize<'de> for Case {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a case: name, action or call, expect",
            |raw: RawCase| {
                let given = Given::check(raw.action, raw.call)?;
                Ok(Case {
                    name: raw.name,
                    given,
                    now: raw.now.map(|W(CaseTime(at))| at),
                    history: raw
                        .history
                        .into_iter()
                        .map(|Earlier(given)| given)
                        .collect(),
                    expect: raw.expect,
                })
            },
        )
    }
}

/// The action of a case: the fields a policy looks at.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseAction {
    system: Text,
    verb: W<Verb>,
    #[serde(default)]
    target: Option<Text>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    actor: Option<Text>,
    #[serde(default)]
    owner: Option<Text>,
    #[serde(default)]
    agent: Option<Text>,
    #[serde(default)]
    risk: Option<W<Risk>>,
    #[serde(default)]
    recognised: Option<bool>,
    #[serde(default)]
    target_class: Option<W<TargetClass>>,
}

impl CaseAction {
    fn into_action(self) -> Action {
        let mut action = Action::new(self.system.0, self.verb.0);
        action.target = self.target.map(|t| t.0);
        if let Some(params) = self.params {
            action.params = params;
        }
        action.actor = self.actor.map(|t| t.0);
        action.owner = self.owner.map(|t| t.0);
        action.agent = self.agent.map(|t| t.0);
        action.risk = self.risk.map(|r| r.0);
        action.recognised = self.recognised.unwrap_or(true);
        action.target_class = self.target_class.map(|c| c.0);
        action
    }
}

/// A decision a case may expect (`recorded` included, for policies of other makes).
struct ExpectedDecision(Decision);

impl Word for ExpectedDecision {
    const EXPECTING: &'static str = "act, ask, refuse or recorded";

    fn from_word(word: &str) -> Result<Self, String> {
        let decision = match word.trim().to_ascii_lowercase().as_str() {
            "act" => Decision::Act,
            "ask" => Decision::Ask,
            "refuse" => Decision::Refuse,
            "recorded" => Decision::Recorded,
            _ => {
                return Err(format!(
                    "unknown decision {:?} (expected act, ask, refuse or recorded)",
                    word.trim()
                ))
            }
        };
        Ok(ExpectedDecision(decision))
    }
}

/// What a case expects.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    decision: W<ExpectedDecision>,
    #[serde(default)]
    rules: OneOrMany<Text>,
    #[serde(default)]
    hold: Option<bool>,
    #[serde(default)]
    tier: Option<W<Risk>>,
    #[serde(default)]
    target_class: Option<W<TargetClass>>,
}

impl Expect {
    fn failures(&self, verdict: &Verdict) -> Vec<String> {
        let mut failures = Vec::new();
        let want = self.decision.0 .0;
        if verdict.decision != want {
            failures.push(format!(
                "decision: expected {want}, got {} ({})",
                verdict.decision,
                verdict.reasons.join("; ")
            ));
        }
        if !self.rules.0.is_empty() && !is_subsequence(&self.rules.0, &verdict.rules_fired) {
            failures.push(format!(
                "rules: expected [{}] in this order, got [{}]",
                self.rules
                    .0
                    .iter()
                    .map(|t| t.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                verdict.rules_fired.join(", ")
            ));
        }
        if let Some(hold) = self.hold {
            if verdict.hold != hold {
                failures.push(format!("hold: expected {hold}, got {}", verdict.hold));
            }
        }
        if let Some(W(tier)) = self.tier {
            if verdict.tier != tier {
                failures.push(format!("tier: expected {tier}, got {}", verdict.tier));
            }
        }
        if let Some(W(class)) = self.target_class {
            if verdict.target_class != class {
                failures.push(format!(
                    "target_class: expected {}, got {}",
                    class.as_str(),
                    verdict.target_class.as_str()
                ));
            }
        }
        failures
    }
}

/// Whether every `wanted` rule fired, in this order (others may fire between them).
fn is_subsequence(wanted: &[Text], fired: &[String]) -> bool {
    let mut fired = fired.iter();
    wanted
        .iter()
        .all(|want| fired.any(|f| f.eq_ignore_ascii_case(&want.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RiskTierPolicy;

    #[test]
    fn passing_and_failing_cases() {
        let text = concat!(
            "cases:\n",
            "  - name: reads act\n",
            "    action: {system: gmail, verb: list}\n",
            "    expect: {decision: act, rules: [R4], tier: low, hold: false}\n",
            "  - name: wrong on purpose\n",
            "    action: {system: gmail, verb: send}\n",
            "    expect: {decision: act, rules: [R9], target_class: external}\n",
        );
        let report = run_cases(&RiskTierPolicy, text, "cases.yaml").unwrap();
        assert_eq!((report.passed(), report.failed()), (1, 1));
        assert!(!report.all_passed());
        let failures = &report.results[1].failures;
        assert_eq!(failures.len(), 3, "{failures:?}");
        assert!(failures[0].starts_with("decision: expected act, got ask"));
        let shown = report.to_string();
        assert!(
            shown.contains("ok   reads act\nFAIL wrong on purpose\n"),
            "{shown}"
        );
        assert!(
            shown.ends_with("1 of 2 cases passed (cases.yaml)"),
            "{shown}"
        );
    }

    #[test]
    fn bad_cases_files_name_the_line() {
        let cases = [
            ("cases:\n  - name: x\n    action: {system: a, verb: sned}\n    expect: {decision: act}\n", 3, "unknown verb"),
            ("cases:\n  - name: x\n    action: {system: a, verb: send}\n    expect: {decision: maybe}\n", 4, "unknown decision"),
            ("cases:\n  - name: x\n    action: {system: a, verb: send, colour: red}\n    expect: {decision: act}\n", 3, "unknown field `colour`"),
            ("cases: []\n", 1, "no cases"),
        ];
        for (text, line, message) in cases {
            let err = run_cases(&RiskTierPolicy, text, "c.yaml").unwrap_err();
            let PolicyError::Yaml {
                line: got,
                message: said,
                ..
            } = &err
            else {
                panic!("{err}");
            };
            assert_eq!(*got, line, "{text}: {err}");
            assert!(said.contains(message), "{text}: {err}");
        }
    }

    #[test]
    fn rules_are_matched_in_order() {
        let t = |s: &str| Text(s.to_owned());
        let fired = ["R0".to_owned(), "R2".to_owned(), "x".to_owned()];
        assert!(is_subsequence(&[t("R0"), t("x")], &fired));
        assert!(!is_subsequence(&[t("x"), t("R0")], &fired));
        assert!(is_subsequence(&[], &fired));
    }
}

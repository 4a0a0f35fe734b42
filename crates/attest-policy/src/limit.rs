//! A rule's window condition (`limit:`): a budget or a rate over what already ran.
//!
//! ```yaml
//! - name: payment-budget
//!   match: {system: stripe, verb: pay}
//!   limit: {sum: /amount, max: 500, per: 24h, by: [agent, param:/currency]}
//!   decision: ask            # the default for a rule with a limit
//! - name: send-rate
//!   match: {verb: send}
//!   limit: {count: 50, per: 1h, by: [agent]}
//! ```
//!
//! A rule with a limit fires only when the call would cross its window: a `count`
//! limit on the (count + 1)th matching call that ran within `per`, a `sum` limit when
//! the sum of the params at the pointer, this call's amount included, would exceed
//! `max` (reaching it exactly is allowed). Otherwise the rules after it are tried as
//! if it had not matched.
//!
//! Policy stays pure: it cannot know what ran. It returns the windows to check with
//! the verdict ([`Verdict::windows`]), each with the verdict that applies when it is
//! crossed ([`Window::crossed`]); the pipeline reads and reserves the figures in the
//! ledger before the call runs.
//!
//! `by` splits a window per value of each key: `agent`, `system`, `verb`, `actor`,
//! `run`, `target`, and `param:/pointer` for a value in the call's params (a currency,
//! say: `by: [agent, param:/currency]`). A missing value is a value of its own (empty).
//!
//! An amount that is not a number at the pointer (missing, a list, a word, a negative
//! number) cannot be counted safely: the riskiest reading applies (the rule fires),
//! and its reason says so. A string holding a number counts as that number, as in
//! `params:` conditions. Amounts are summed as 64-bit floating point numbers: whole
//! minor units (cents) are exact up to 2^53.

use std::fmt;
use std::time::Duration;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{checked_map, OneOrMany, Word, W};
use crate::file::Leaf;
use crate::params::{number, Pointer};
use crate::{Action, Verdict};

/// A compiled `limit:`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limit {
    measure: Measured,
    per: Per,
    by: Vec<ByKey>,
}

#[derive(Debug, Clone, PartialEq)]
enum Measured {
    Count(u64),
    Sum { pointer: Pointer, max: f64 },
}

/// What a window adds up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Calls: each call that ran adds one.
    Count,
    /// The number at a JSON pointer into each call's params.
    Sum {
        /// The pointer, as written (`/amount`).
        pointer: String,
    },
}

/// One window a call is counted in, and what applies when it would cross it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The rule that carries the limit.
    pub rule: String,
    /// The window's key: the rule and its `by` values, unambiguously encoded (the
    /// ledger stores a hash of it, never the values).
    pub key: String,
    /// Who the window is about, for reasons: `agent pay-bot, system stripe`.
    pub scope: String,
    /// What it adds up.
    pub measure: Measure,
    /// The cap: calls for a count, the most the sum may reach for a sum.
    pub max: f64,
    /// How far back the window reaches, in seconds.
    pub per_secs: u64,
    /// The window's length as written (`24h`).
    pub per: String,
    /// What this call adds: 1 for a count, its amount for a sum.
    pub adds: f64,
    /// The verdict when the call would cross the window; its reason at `reason_at`
    /// is the rule's, and [`Window::crossed`] puts the figures in it.
    pub over: Box<Verdict>,
    /// Where the limit rule's reason is in `over.reasons`.
    pub reason_at: usize,
}

impl Window {
    /// Whether a call adding [`Window::adds`] to a window standing at `figure` crosses
    /// it: the sum after this call would exceed the cap (reaching it is allowed).
    pub fn crosses(&self, figure: f64) -> bool {
        figure + self.adds > self.max
    }

    /// The verdict for a call that crosses the window standing at `figure`, its reason
    /// naming the figures: "agent X spent 480 of 500 in 24h; this call adds 45".
    pub fn crossed(&self, figure: f64) -> Verdict {
        let mut verdict = (*self.over).clone();
        let figures = self.describe(figure);
        if let Some(reason) = verdict.reasons.get_mut(self.reason_at) {
            *reason = if reason.is_empty() {
                figures
            } else {
                format!("{reason}: {figures}")
            };
        }
        verdict.windows.clear();
        verdict
    }

    /// The window's figure in words, with what this call adds.
    pub fn describe(&self, figure: f64) -> String {
        let scope = &self.scope;
        let per = &self.per;
        match &self.measure {
            Measure::Count => format!(
                "{scope} made {} of {} calls allowed in {per}; this call would be call {}",
                Amount(figure),
                Amount(self.max),
                Amount(figure + 1.0)
            ),
            Measure::Sum { pointer } => format!(
                "{scope} spent {} of {} in {per}; this call adds {} ({pointer})",
                Amount(figure),
                Amount(self.max),
                Amount(self.adds)
            ),
        }
    }

    /// The window's current figure in words, without a call: what `policy explain` shows.
    pub fn standing(&self, figure: f64) -> String {
        let (scope, per) = (&self.scope, &self.per);
        match &self.measure {
            Measure::Count => format!(
                "{scope}: {} of {} calls in {per}",
                Amount(figure),
                Amount(self.max)
            ),
            Measure::Sum { pointer } => format!(
                "{scope}: {} of {} in {per} (sum of {pointer})",
                Amount(figure),
                Amount(self.max)
            ),
        }
    }
}

/// A number as people write it: `480`, `12.5`.
struct Amount(f64);

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Rust prints whole floats without a fraction (`480`), and others in their
        // shortest exact form.
        write!(f, "{}", self.0)
    }
}

/// What a limit makes of one call.
pub(crate) enum Reading {
    /// Count it in this window (which the pipeline checks).
    Window {
        key: String,
        scope: String,
        adds: f64,
    },
    /// The amount cannot be counted: the rule applies, for this reason.
    Applies(String),
}

impl Limit {
    /// Reads the call: its window key and what it adds, or why the rule applies at once.
    pub(crate) fn read(&self, rule: &str, action: &Action) -> Reading {
        let adds = match &self.measure {
            Measured::Count(_) => 1.0,
            Measured::Sum { pointer, .. } => match amount(pointer, &action.params) {
                Ok(adds) => adds,
                Err(why) => {
                    return Reading::Applies(format!(
                        "the amount at {} {why}, so the limit cannot count it and applies",
                        pointer.as_str()
                    ))
                }
            },
        };
        let values: Vec<Option<String>> = self.by.iter().map(|by| by.value(action)).collect();
        let mut key: Vec<&str> = Vec::with_capacity(1 + 2 * self.by.len());
        key.push(rule);
        let mut scope = Vec::with_capacity(self.by.len());
        for (by, value) in self.by.iter().zip(&values) {
            let value = value.as_deref();
            scope.push(format!("{} {}", by.label(), value.unwrap_or("(none)")));
            key.push(by.label());
            key.push(value.unwrap_or(""));
        }
        // A JSON array of strings: no value can run into the next.
        let key = Value::from(key).to_string();
        let scope = if scope.is_empty() {
            "all matching calls".to_owned()
        } else {
            scope.join(", ")
        };
        Reading::Window { key, scope, adds }
    }

    /// The window for a reading, with the verdict when it is crossed.
    pub(crate) fn window(
        &self,
        rule: &str,
        key: String,
        scope: String,
        adds: f64,
        over: Verdict,
        reason_at: usize,
    ) -> Window {
        let (measure, max) = match &self.measure {
            Measured::Count(count) => (Measure::Count, *count as f64),
            Measured::Sum { pointer, max } => (
                Measure::Sum {
                    pointer: pointer.as_str().to_owned(),
                },
                *max,
            ),
        };
        Window {
            rule: rule.to_owned(),
            key,
            scope,
            measure,
            max,
            per_secs: self.per.0.as_secs(),
            per: self.per.1.clone(),
            adds,
            over: Box::new(over),
            reason_at,
        }
    }
}

/// The amount at `pointer`: a finite number that is not negative.
fn amount(pointer: &Pointer, params: &Value) -> Result<f64, &'static str> {
    let Some(found) = pointer.resolve(params) else {
        return Err("is missing");
    };
    match number(found) {
        Some(n) if n >= 0.0 => Ok(n),
        Some(_) => Err("is negative"),
        None => Err("is not a number"),
    }
}

/// A window's length: a positive duration such as `1h`, `24h`, `30m`, `7d`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Per(pub(crate) Duration, pub(crate) String);

impl Word for Per {
    const EXPECTING: &'static str = "a window length such as 1h, 24h or 7d";

    fn from_word(word: &str) -> Result<Self, String> {
        positive_duration(word, "window").map(|duration| Per(duration, word.trim().to_owned()))
    }
}

/// A length such as `1h`, `24h`, `30m`, `7d`: positive and at least a second; `what`
/// names it in errors (`window`, `wait`).
pub(crate) fn positive_duration(word: &str, what: &str) -> Result<Duration, String> {
    let text = word.trim();
    if text.starts_with('-') {
        return Err(format!(
            "{what} {text:?} is negative (write a length such as 24h)"
        ));
    }
    let duration = humantime::parse_duration(text)
        .map_err(|err| format!("{what} {text:?} is not a length such as 1h, 24h or 7d ({err})"))?;
    if duration.as_secs() == 0 {
        return Err(format!(
            "{what} {text:?} is shorter than a second: nothing would count"
        ));
    }
    Ok(duration)
}

/// A key of `by:`.
#[derive(Debug, Clone, PartialEq)]
enum ByKey {
    Agent,
    System,
    Verb,
    Actor,
    Run,
    Target,
    Param(Pointer, String),
}

impl ByKey {
    fn label(&self) -> &str {
        match self {
            ByKey::Agent => "agent",
            ByKey::System => "system",
            ByKey::Verb => "verb",
            ByKey::Actor => "actor",
            ByKey::Run => "run",
            ByKey::Target => "target",
            ByKey::Param(_, label) => label,
        }
    }

    fn value(&self, action: &Action) -> Option<String> {
        match self {
            ByKey::Agent => action.agent.clone(),
            ByKey::System => Some(action.system.to_ascii_lowercase()),
            ByKey::Verb => Some(action.verb.as_str().to_owned()),
            ByKey::Actor => action.actor.clone(),
            ByKey::Run => action.run_id.clone(),
            ByKey::Target => action.target.clone(),
            ByKey::Param(pointer, _) => match pointer.resolve(&action.params)? {
                Value::String(s) => Some(s.trim().to_owned()),
                other => Some(other.to_string()),
            },
        }
    }
}

impl Word for ByKey {
    const EXPECTING: &'static str = "agent, system, verb, actor, run, target or param:/pointer";

    fn from_word(word: &str) -> Result<Self, String> {
        let text = word.trim();
        if let Some(pointer) = text.strip_prefix("param:") {
            let pointer = Pointer::from_word(pointer)?;
            return Ok(ByKey::Param(pointer, text.to_owned()));
        }
        Ok(match text.to_ascii_lowercase().as_str() {
            "agent" => ByKey::Agent,
            "system" => ByKey::System,
            "verb" => ByKey::Verb,
            "actor" => ByKey::Actor,
            "run" => ByKey::Run,
            "target" => ByKey::Target,
            _ => {
                return Err(format!(
                    "unknown `by` key {text:?} (expected {})",
                    Self::EXPECTING
                ))
            }
        })
    }
}

/// The cap of a `sum` limit: a finite number, not negative.
struct Max(f64);

impl Word for Max {
    const EXPECTING: &'static str = "a number (the most the sum may reach)";

    fn from_word(word: &str) -> Result<Self, String> {
        match word.trim().parse::<f64>() {
            Ok(max) if max.is_finite() && max >= 0.0 => Ok(Max(max)),
            Ok(_) => Err(format!(
                "max {:?} must be a number of 0 or more",
                word.trim()
            )),
            Err(_) => Err(format!("max {:?} is not a number", word.trim())),
        }
    }
}

/// The cap of a `count` limit: a whole number of calls, 1 or more.
struct Count(u64);

impl Word for Count {
    const EXPECTING: &'static str = "a whole number of calls, 1 or more";

    fn from_word(word: &str) -> Result<Self, String> {
        match word.trim().parse::<u64>() {
            Ok(0) => Err(
                "count 0 would hold every call: write a count of 1 or more, or drop the limit"
                    .to_owned(),
            ),
            Ok(count) => Ok(Count(count)),
            Err(_) => Err(format!(
                "count {:?} is not a whole number of calls, 1 or more",
                word.trim()
            )),
        }
    }
}

/// A `sum` pointer: a JSON pointer into the call's params.
struct SumPointer(Pointer);

impl Word for SumPointer {
    const EXPECTING: &'static str = "a JSON pointer into the call's params, such as /amount";

    fn from_word(word: &str) -> Result<Self, String> {
        Pointer::from_word(word).map(SumPointer).map_err(|_| {
            format!(
                "sum {:?} is not a JSON pointer into the call's params (write sum: /amount)",
                word.trim()
            )
        })
    }
}

/// `limit:` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimit {
    #[serde(default)]
    count: Leaf<OneWord<Count>>,
    #[serde(default)]
    sum: Leaf<OneWord<SumPointer>>,
    #[serde(default)]
    max: Leaf<OneWord<Max>>,
    #[serde(default)]
    per: Leaf<W<Per>>,
    #[serde(default)]
    by: Leaf<OneOrMany<ByKey>>,
}

/// A [`Word`] that may be written as a YAML number as well as a string.
struct OneWord<T>(T);

impl<'de, T: Word> Deserialize<'de> for OneWord<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let OneOrMany(mut items) = OneOrMany::<T>::deserialize(deserializer)?;
        match (items.pop(), items.is_empty()) {
            (Some(item), true) => Ok(OneWord(item)),
            _ => Err(serde::de::Error::custom(format!(
                "expected one value: {}",
                T::EXPECTING
            ))),
        }
    }
}

/// A leaf's value, when it was read.
fn value<T>(leaf: Leaf<T>) -> Option<T> {
    match leaf {
        Leaf::Value(v) => Some(v),
        Leaf::Absent | Leaf::Skipped => None,
    }
}

impl Limit {
    fn check(raw: RawLimit) -> Result<Limit, String> {
        let skipped = matches!(raw.count, Leaf::Skipped)
            || matches!(raw.sum, Leaf::Skipped)
            || matches!(raw.max, Leaf::Skipped)
            || matches!(raw.per, Leaf::Skipped);
        let per = match raw.per {
            Leaf::Value(W(per)) => Some(per),
            Leaf::Skipped => None,
            Leaf::Absent => {
                return Err("a limit needs `per`, its window's length (per: 24h)".to_owned())
            }
        };
        let count = value(raw.count).map(|OneWord(Count(c))| c);
        let sum = value(raw.sum).map(|OneWord(SumPointer(p))| p);
        let max = value(raw.max).map(|OneWord(Max(m))| m);
        let measure = match (count, sum, max) {
            (Some(_), Some(_), _) => {
                return Err("a limit has either `count` or `sum`, not both".to_owned())
            }
            (Some(_), None, Some(_)) => {
                return Err(
                    "a count limit's cap is its `count`: `max` belongs to a sum limit".to_owned(),
                )
            }
            (Some(count), None, None) => Some(Measured::Count(count)),
            (None, Some(pointer), Some(max)) => Some(Measured::Sum { pointer, max }),
            (None, Some(_), None) if !skipped => {
                return Err("a sum limit needs `max`, the most the sum may reach".to_owned())
            }
            (None, None, _) if !skipped => {
                return Err(
                    "a limit needs `count` (calls) or `sum` (a params pointer) with `max`"
                        .to_owned(),
                )
            }
            _ => None,
        };
        let by = raw.by.or_default().0;
        for (i, key) in by.iter().enumerate() {
            if by[..i].iter().any(|other| other.label() == key.label()) {
                return Err(format!("`by` names {:?} twice", key.label()));
            }
        }
        match (measure, per) {
            (Some(measure), Some(per)) => Ok(Limit { measure, per, by }),
            // A part the lint skipped was reported; nothing to build.
            _ => Ok(Limit {
                measure: Measured::Count(1),
                per: Per(Duration::from_secs(1), "1s".to_owned()),
                by,
            }),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a limit such as {count: 50, per: 1h} or {sum: /amount, max: 500, per: 24h}",
            Limit::check,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verb;

    fn limit(yaml: &str) -> Result<Limit, String> {
        serde_yaml::from_str::<Limit>(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn reads_count_and_sum_limits() {
        let count = limit("{count: 50, per: 1h, by: [agent]}").unwrap();
        assert_eq!(count.measure, Measured::Count(50));
        assert_eq!(count.per.0, Duration::from_secs(3600));
        let sum =
            limit("{sum: /amount, max: 500, per: 24h, by: [agent, system, 'param:/currency']}")
                .unwrap();
        assert!(matches!(sum.measure, Measured::Sum { max, .. } if max == 500.0));
        assert_eq!(sum.by.len(), 3);
    }

    #[test]
    fn rejects_bad_limits_by_field() {
        let cases = [
            ("{count: 5, per: 1h, every: 2}", "unknown field `every`"),
            ("{sum: amount, max: 5, per: 1h}", "is not a JSON pointer"),
            ("{sum: 12, max: 5, per: 1h}", "is not a JSON pointer"),
            ("{count: 5, per: 0s}", "shorter than a second"),
            ("{count: 5, per: -1h}", "is negative"),
            ("{count: 5, per: soon}", "is not a length"),
            ("{count: 5, sum: /a, max: 1, per: 1h}", "not both"),
            ("{per: 1h}", "needs `count`"),
            ("{sum: /a, per: 1h}", "needs `max`"),
            ("{count: 5, max: 3, per: 1h}", "`max` belongs to a sum"),
            ("{count: 5}", "needs `per`"),
            ("{count: 0, per: 1h}", "count 0"),
            ("{count: -3, per: 1h}", "not a whole number"),
            ("{sum: /a, max: -1, per: 1h}", "0 or more"),
            ("{sum: /a, max: lots, per: 1h}", "not a number"),
            ("{count: 5, per: 1h, by: [agent, agent]}", "twice"),
            ("{count: 5, per: 1h, by: [colour]}", "unknown `by` key"),
        ];
        for (yaml, want) in cases {
            let err = limit(yaml).unwrap_err();
            assert!(err.contains(want), "{yaml}: {err}");
        }
    }

    #[test]
    fn reads_a_call_into_its_window_key_or_the_riskiest_reading() {
        let sum =
            limit("{sum: /amount, max: 500, per: 24h, by: [agent, 'param:/currency']}").unwrap();
        let pay = Action::new("stripe", Verb::Pay)
            .with_agent("bot")
            .with_params(json!({"amount": 45, "currency": "usd"}));
        let Reading::Window { key, scope, adds } = sum.read("budget", &pay) else {
            panic!("a number is read")
        };
        assert_eq!(adds, 45.0);
        assert_eq!(key, r#"["budget","agent","bot","param:/currency","usd"]"#);
        assert_eq!(scope, "agent bot, param:/currency usd");
        for params in [
            json!({"amount": "lots"}),
            json!({}),
            json!({"amount": -5}),
            json!({"amount": [1]}),
        ] {
            let Reading::Applies(why) =
                sum.read("budget", &pay.clone().with_params(params.clone()))
            else {
                panic!("{params} is not an amount")
            };
            assert!(why.contains("/amount") && why.contains("applies"), "{why}");
        }
        let as_text = pay.clone().with_params(json!({"amount": "12.5"}));
        assert!(
            matches!(sum.read("budget", &as_text), Reading::Window { adds, .. } if adds == 12.5)
        );
    }

    #[test]
    fn crossing_is_exceeding_the_cap() {
        let sum = limit("{sum: /amount, max: 500, per: 24h, by: [agent]}").unwrap();
        let over = Verdict::new(crate::Decision::Ask, crate::Risk::VeryHigh, "budget", "");
        let window = sum.window("budget", "k".into(), "agent X".into(), 45.0, over, 0);
        assert!(
            !window.crosses(455.0),
            "reaching the cap exactly is allowed"
        );
        assert!(window.crosses(480.0));
        let verdict = window.crossed(480.0);
        assert_eq!(
            verdict.reasons,
            ["agent X spent 480 of 500 in 24h; this call adds 45 (/amount)"]
        );
        let count = limit("{count: 2, per: 1h}").unwrap();
        let over = Verdict::new(crate::Decision::Ask, crate::Risk::High, "rate", "too many");
        let window = count.window("rate", "k".into(), "all".into(), 1.0, over, 0);
        assert!(!window.crosses(1.0) && window.crosses(2.0));
        assert!(window.crossed(2.0).reasons[0].starts_with("too many: all made 2 of 2 calls"));
    }
}

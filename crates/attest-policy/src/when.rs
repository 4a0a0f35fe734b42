//! A rule's `when:` condition: one expression in the Common Expression Language (CEL),
//! compiled when the policy loads and judged for each call the rule's `match:` admits.
//!
//! The variables an expression may read (any other name is an error at load):
//!
//! | name | what |
//! |---|---|
//! | `action` | a map: `system`, `verb`, `target`, `tier`, `class` (R2's target class), `recognised`, `tool` |
//! | `params` | the call's params (a map, or whatever JSON the call carried) |
//! | `agent`, `actor`, `owner`, `run` | strings; empty when the call names none |
//! | `agent_auth` | a map: `auth` (`token`, `jwt`, `unauthenticated`, or empty) and `owner` (the proven agent's person) |
//! | `now` | the time of the call, a CEL `timestamp`: `now.getHours('Europe/Berlin')`, `now.getDayOfWeek('Europe/Berlin')` (0 is Sunday), `now.getDate(zone)`, `now.getMonth(zone)` (0 is January), `now.getFullYear(zone)` |
//! | `calendar` | a map from each `calendars:` name to whether `now` is inside it |
//!
//! And four questions of history (see `history.rs`): `run.did("PATTERN")`,
//! `run.touched("LABEL")`, `agent.did("PATTERN", "24h")`, `agent.touched("LABEL", "24h")`,
//! each with literal strings, so that what a call must read is known at load.
//!
//! An expression that cannot be judged for a call (a missing key, a type error, a
//! value that is not a boolean) takes the riskiest reading: a rule that asks or refuses
//! applies, a rule that acts does not, and the verdict's reason says so.

use std::sync::{Arc, LazyLock};

use cel::extractors::Arguments;
use cel::objects::Key;
use cel::{Context, Env, ExecutionError, Program, Value};
use chrono::{DateTime, FixedOffset, Utc};

use crate::calendar::Calendars;
use crate::de::Word;
use crate::history::{questions, Fact, History, Question, Whose};
use crate::rule::Facts;
use crate::when_native::{Native, Said};
use crate::Decision;

/// The names an expression may read.
const VARIABLES: [&str; 9] = [
    "action",
    "params",
    "agent",
    "actor",
    "owner",
    "run",
    "agent_auth",
    "now",
    "calendar",
];

/// The standard environment, built once: every context borrows it.
pub(crate) static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A compiled `when:` expression.
#[derive(Clone)]
pub(crate) struct When {
    /// The expression as written, for reasons and errors.
    pub(crate) source: String,
    program: Arc<Program>,
    /// Whether it reads `params` (a replay without them cannot judge it).
    pub(crate) reads_params: bool,
    /// Whether it reads the time (`now` or `calendar`).
    pub(crate) reads_time: bool,
    /// The calendars it names (`calendar.NAME`), checked against `calendars:` at load.
    pub(crate) calendars: Vec<String>,
    /// The history questions it asks (`run.did(…)`, `run.touched(…)`, …).
    pub(crate) questions: Vec<Question>,
    /// Its native form, when it is in the subset [`Native`] judges without the
    /// interpreter (which still judges every call the native form is unsure of).
    pub(crate) native: Option<Arc<Native>>,
}

impl std::fmt::Debug for When {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("When").field(&self.source).finish()
    }
}

/// What a `when:` said of one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Held {
    /// True: the rule applies.
    Yes,
    /// False: the rule does not apply.
    No,
    /// It could not be judged (the message says why).
    Failed(String),
}

impl Word for When {
    const EXPECTING: &'static str = "a CEL expression such as params.amount > 500";

    fn from_word(word: &str) -> Result<Self, String> {
        let source = word.trim();
        if source.is_empty() {
            return Err("empty when: expression".to_owned());
        }
        let program = Program::compile(source).map_err(|errors| {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| e.pos);
            let msg = first.map_or_else(|| errors.to_string(), |e| e.msg.clone());
            format!("when: {source:?}: CEL syntax error at line {line}, column {column} of the expression: {msg}")
        })?;
        let references = program.references();
        let mut variables = references.variables();
        variables.sort_unstable();
        if let Some(unknown) = variables.iter().find(|v| !VARIABLES.contains(v)) {
            return Err(format!(
                "when: {source:?}: unknown variable {unknown:?} at column {} of the expression (known: {})",
                source.find(*unknown).map_or(1, |at| at + 1),
                VARIABLES.join(", ")
            ));
        }
        let calendars = calendar_names(source);
        let questions =
            questions(program.expression()).map_err(|e| format!("when: {source:?}: {e}"))?;
        let native = Native::compile(&program.expression().expr).map(Arc::new);
        Ok(When {
            native,
            questions,
            source: source.to_owned(),
            reads_params: variables.contains(&"params"),
            reads_time: variables.contains(&"now") || variables.contains(&"calendar"),
            calendars,
            program: Arc::new(program),
        })
    }
}

/// A JSON value as CEL sees it: a whole number that fits is an `int` (CEL does not mix
/// `int` and `uint` in arithmetic, and JSON has no unsigned numbers), else a `double`.
pub(crate) fn from_json(value: &serde_json::Value) -> Value {
    use serde_json::Value as Json;
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        Json::Object(map) => Value::from(
            map.iter()
                .map(|(k, v)| (Key::from(k.as_str()), from_json(v)))
                .collect::<std::collections::HashMap<_, _>>(),
        ),
    }
}

/// The names after `calendar.` in an expression.
fn calendar_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("calendar.") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "calendar.".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The variables of one call, built once for every `when:` the call reaches.
pub(crate) struct Scope(Context<'static, 'static>);

impl Scope {
    /// The variables for the call in `facts`, at `now`.
    /// `history`: `Some` when the policy asks history questions (with the call's
    /// answers, when the caller gathered them).
    pub(crate) fn new(
        facts: &Facts<'_>,
        now: DateTime<Utc>,
        calendars: &Calendars,
        history: Option<Option<&History>>,
    ) -> Scope {
        let action = facts.action;
        let mut context = Context::with_env(Arc::clone(&ENV));
        let text = |s: Option<&str>| Value::from(s.unwrap_or(""));
        let map = |entries: Vec<(&str, Value)>| {
            Value::from(
                entries
                    .into_iter()
                    .map(|(k, v)| (Key::from(k), v))
                    .collect::<std::collections::HashMap<_, _>>(),
            )
        };
        context.add_variable_from_value(
            "action",
            map(vec![
                ("system", Value::from(action.system.as_str())),
                ("verb", Value::from(action.verb.as_str())),
                ("target", text(action.target.as_deref())),
                ("tier", Value::from(facts.tier.as_str())),
                ("class", Value::from(facts.class.as_str())),
                ("recognised", Value::Bool(action.recognised)),
                ("tool", text(action.extra.tool_name.as_deref())),
            ]),
        );
        context.add_variable_from_value(
            "agent_auth",
            map(vec![
                ("auth", text(action.extra.agent_auth.as_deref())),
                ("owner", text(action.extra.agent_owner.as_deref())),
            ]),
        );
        for (name, value) in [
            ("agent", &action.agent),
            ("actor", &action.actor),
            ("owner", &action.owner),
            ("run", &action.run_id),
        ] {
            context.add_variable_from_value(name, text(value.as_deref()));
        }
        context.add_variable_from_value("params", from_json(&action.params));
        let fixed: DateTime<FixedOffset> = now.fixed_offset();
        context.add_variable_from_value("now", Value::Timestamp(fixed));
        let inside: Vec<(&str, Value)> = calendars
            .iter()
            .map(|(name, window)| (name.as_str(), Value::Bool(window.contains(now))))
            .collect();
        context.add_variable_from_value("calendar", map(inside));
        if let Some(history) = history {
            let history = history.cloned().map(Arc::new);
            for function in ["did", "touched"] {
                let history = history.clone();
                // Declared once per call, in a fresh context: neither name is a
                // standard overload, so this cannot conflict.
                let _ = context.add_function(function, move |Arguments(args): Arguments| {
                    ask(function, history.as_deref(), &args)
                });
            }
        }
        Scope(context)
    }
}

/// The answer to one history question, asked as `function(args…)`.
fn ask(function: &str, history: Option<&History>, args: &[Value]) -> Result<Value, ExecutionError> {
    let text = |at: usize| match args.get(at) {
        Some(Value::String(s)) => Ok(s.trim().to_owned()),
        _ => Err(ExecutionError::function_error(
            function,
            "expects literal strings",
        )),
    };
    let whose = match args.len() {
        1 => Whose::Run,
        2 => {
            let period = text(1)?;
            let per = humantime::parse_duration(&period)
                .map_err(|e| ExecutionError::function_error(function, e))?;
            Whose::Agent(per.as_secs())
        }
        n => return Err(ExecutionError::invalid_argument_count(1, n)),
    };
    let fact = if function == "did" {
        Fact::Did(text(0)?)
    } else {
        Fact::Touched(text(0)?)
    };
    let question = Question { whose, fact }.id();
    let history = history.ok_or_else(|| {
        ExecutionError::function_error(function, "the run's history was not gathered for this call")
    })?;
    history.answer(&question).map(Value::Bool).ok_or_else(|| {
        ExecutionError::function_error(
            function,
            format!("{question} was not answered for this call"),
        )
    })
}

impl When {
    /// Judges the expression natively, when it can: `None` sends the call to the
    /// interpreter ([`When::judge`]).
    pub(crate) fn judge_natively(&self, facts: &Facts<'_>) -> Option<Held> {
        match self.native.as_ref()?.judge(facts) {
            Said::True => Some(Held::Yes),
            Said::False => Some(Held::No),
            Said::Unsure => None,
        }
    }

    /// Judges the expression over the call's variables.
    pub(crate) fn judge(&self, scope: &Scope) -> Held {
        match self.program.execute(&scope.0) {
            Ok(Value::Bool(true)) => Held::Yes,
            Ok(Value::Bool(false)) => Held::No,
            Ok(other) => Held::Failed(format!("gave {other:?}, not true or false")),
            Err(e) => Held::Failed(e.to_string()),
        }
    }

    /// Whether a rule deciding `decision` applies when this expression failed: the
    /// riskiest reading, so an ask or refuse applies and an act does not.
    pub(crate) fn failed_applies(decision: Decision) -> bool {
        decision != Decision::Act
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Action, Risk, TargetClass, Verb};

    fn when(text: &str) -> Result<When, String> {
        When::from_word(text)
    }

    fn facts(action: &Action) -> Facts<'_> {
        Facts {
            action,
            tier: Risk::High,
            class: TargetClass::External,
        }
    }

    #[test]
    fn a_syntax_error_names_the_expressions_column() {
        let err = when("params.amount > ").unwrap_err();
        assert!(err.contains("column"), "{err}");
        assert!(err.contains("\"params.amount >\""), "{err}");
        let err = when("parms.amount > 5").unwrap_err();
        assert!(
            err.contains("unknown variable \"parms\" at column 1"),
            "{err}"
        );
    }

    #[test]
    fn or_not_comparisons_and_arithmetic_across_params() {
        let w = when(
            "(params.amount > 500 || params.customer_age_days < 30) && !(agent in ['finance']) && params.amount * 2 > params.floor",
        )
        .unwrap();
        let calendars = Calendars::default();
        let now = Utc::now();
        let judge = |a: &Action| w.judge(&Scope::new(&facts(a), now, &calendars, None));
        let big = Action::new("stripe", Verb::Pay)
            .with_agent("support")
            .with_params(json!({"amount": 900, "customer_age_days": 400, "floor": 10}));
        assert_eq!(judge(&big), Held::Yes);
        assert_eq!(judge(&big.clone().with_agent("finance")), Held::No);
        let small_new = big
            .clone()
            .with_params(json!({"amount": 20, "customer_age_days": 3, "floor": 10}));
        assert_eq!(judge(&small_new), Held::Yes);
        let missing = big.clone().with_params(json!({"customer_age_days": 400}));
        assert!(
            matches!(judge(&missing), Held::Failed(ref m) if m.contains("amount")),
            "{:?}",
            judge(&missing)
        );
    }

    #[test]
    fn calendar_names_are_read_from_the_text() {
        assert_eq!(
            calendar_names("calendar.office_hours || !calendar.freeze && mycalendar.x"),
            ["office_hours", "freeze"]
        );
    }
}

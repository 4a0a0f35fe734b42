//! A bounded grant's condition: what each call made under the grant must meet, one
//! expression in the Common Expression Language over the call's `params`
//! (`params.amount <= 50 && params.currency == "EUR"`).
//!
//! The same compiler and the same reading of JSON as a rule's `when:` (an integer is a CEL
//! `int`, any other number a `double`), so a condition means in a grant what it means in
//! a rule. Only `params` may be read: the grant itself binds the agent, system, verb and
//! rule, and a condition is about the arguments. A condition that cannot be judged for a
//! call (a missing field, a type error, a value that is not a boolean) does not hold: the
//! call is not covered, and is asked about as policy says.

use std::sync::Arc;

use cel::{Context, Program, Value};

use crate::when::{from_json, ENV};
use crate::{Action, PolicyError};

/// The longest condition accepted, in characters.
pub const MAX_BOUND_CHARS: usize = 2000;

/// The only variable a condition may read.
const PARAMS: &str = "params";

/// A compiled grant condition.
#[derive(Clone)]
pub struct Bound {
    source: String,
    program: Arc<Program>,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Bound").field(&self.source).finish()
    }
}

impl Bound {
    /// Compiles `text`; an empty, over-long or invalid expression, or one that reads
    /// anything but `params`, is [`PolicyError::BadBound`] naming the column.
    pub fn parse(text: &str) -> Result<Bound, PolicyError> {
        let source = text.trim();
        let bad = |message: String| PolicyError::BadBound {
            bound: source.chars().take(80).collect(),
            message,
        };
        if source.is_empty() {
            return Err(bad("empty condition".to_owned()));
        }
        if source.chars().count() > MAX_BOUND_CHARS {
            return Err(bad(format!("longer than {MAX_BOUND_CHARS} characters")));
        }
        let program = Program::compile(source).map_err(|errors| {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| e.pos);
            let msg = first.map_or_else(|| errors.to_string(), |e| e.msg.clone());
            bad(format!(
                "CEL syntax error at line {line}, column {column}: {msg}"
            ))
        })?;
        let references = program.references();
        if let Some(other) = references.variables().into_iter().find(|v| *v != PARAMS) {
            return Err(bad(format!(
                "reads {other:?} at column {}; a grant's condition reads only params",
                source.find(other).map_or(1, |at| at + 1)
            )));
        }
        Ok(Bound {
            source: source.to_owned(),
            program: Arc::new(program),
        })
    }

    /// The condition as written (trimmed).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether `action`'s params meet the condition: `Err` with the reason when it
    /// cannot be judged (which the caller reads as "not covered").
    pub fn holds(&self, action: &Action) -> Result<bool, String> {
        let mut context = Context::with_env(Arc::clone(&ENV));
        context.add_variable_from_value(PARAMS, from_json(&action.params));
        match self.program.execute(&context) {
            Ok(Value::Bool(held)) => Ok(held),
            Ok(other) => Err(format!("gave {other:?}, not true or false")),
            Err(err) => Err(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Verb;

    fn refund(params: serde_json::Value) -> Action {
        Action::new("stripe", Verb::Pay).with_params(params)
    }

    #[test]
    fn a_condition_holds_for_params_inside_it_and_not_outside() {
        let bound = Bound::parse(r#"params.amount <= 50 && params.currency == "EUR""#).unwrap();
        assert_eq!(
            bound.holds(&refund(json!({"amount": 50, "currency": "EUR"}))),
            Ok(true)
        );
        assert_eq!(
            bound.holds(&refund(json!({"amount": 49.5, "currency": "EUR"}))),
            Ok(true)
        );
        assert_eq!(
            bound.holds(&refund(json!({"amount": 51, "currency": "EUR"}))),
            Ok(false)
        );
        assert_eq!(
            bound.holds(&refund(json!({"amount": 5, "currency": "USD"}))),
            Ok(false)
        );
    }

    #[test]
    fn a_condition_that_cannot_be_judged_is_an_error_not_a_yes() {
        let bound = Bound::parse("params.amount <= 50").unwrap();
        assert!(bound.holds(&refund(json!({"currency": "EUR"}))).is_err());
        assert!(bound.holds(&refund(json!({"amount": "50"}))).is_err());
        let bound = Bound::parse("params.amount").unwrap();
        assert!(bound.holds(&refund(json!({"amount": 1}))).is_err());
    }

    #[test]
    fn a_bad_condition_names_its_column_and_only_params_may_be_read() {
        let err = Bound::parse("params.amount <= ").unwrap_err().to_string();
        assert!(err.contains("column"), "{err}");
        let err = Bound::parse("agent == \"x\" && params.amount < 5")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reads \"agent\" at column 1; a grant's condition reads only params"),
            "{err}"
        );
        assert!(Bound::parse("  ").is_err());
        assert!(Bound::parse(&"1 < 2 && ".repeat(400)).is_err());
    }
}

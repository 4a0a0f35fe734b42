//! A native evaluator for the `when:` expressions most rules are written in:
//! comparisons of the call's fields and params with literals, joined by `&&`, `||` and
//! `!`, `in` a list of literals, and a string's `startsWith`, `endsWith` and
//! `contains`. Deciding a call is a hot path (every rule a call reaches judges its
//! condition), and the CEL interpreter costs about twenty times a `params:` condition
//! (issue 51's benchmark row), most of it in building its values and walking its
//! program; this reads the action's JSON where it lies.
//!
//! It is a fast path, never a second meaning: an expression it does not know is not
//! compiled here, and whenever a call takes it off the well-typed road (a missing key,
//! a type CEL would compare otherwise, a value that is not a boolean) it answers
//! [`Native::Unsure`] and the CEL interpreter judges the call, errors and all. The
//! tests check it against the interpreter as an oracle.

use cel::common::ast::{operators, CallExpr, Expr, LiteralValue};
use serde_json::Value as Json;

use crate::rule::Facts;

/// A compiled expression of the native subset.
#[derive(Debug, Clone)]
pub(crate) enum Native {
    Literal(Lit),
    /// A variable and the fields selected from it: `params.refund.amount`.
    Path(Root, Vec<String>),
    And(Box<Native>, Box<Native>),
    Or(Box<Native>, Box<Native>),
    Not(Box<Native>),
    Compare(Op, Box<Native>, Box<Native>),
    /// `x in [literals]`.
    In(Box<Native>, Vec<Lit>),
    /// `s.startsWith(t)`, `s.endsWith(t)`, `s.contains(t)`.
    Text(TextOp, Box<Native>, Box<Native>),
}

/// A literal as CEL reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// The variables the native subset reads (`now`, `calendar` and history questions are
/// left to the interpreter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Root {
    Params,
    Action,
    Agent,
    Actor,
    Owner,
    Run,
    AgentAuth,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum TextOp {
    StartsWith,
    EndsWith,
    Contains,
}

/// A value met while judging: borrowed from the action where it can be.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    /// A JSON object or array (only selected from, never compared here).
    Json(&'a Json),
    /// The `action` or `agent_auth` map.
    Map(Root),
}

/// What the native path said of a call: `Unsure` hands the call to the interpreter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Said {
    True,
    False,
    Unsure,
}

impl Native {
    /// The native form of `expr`, when every part of it is in the subset.
    pub(crate) fn compile(expr: &Expr) -> Option<Native> {
        match expr {
            Expr::Literal(literal) => Some(Native::Literal(lit(literal)?)),
            Expr::Ident(_) | Expr::Select(_) => path(expr),
            Expr::Call(call) => Self::call(call),
            _ => None,
        }
    }

    fn call(call: &CallExpr) -> Option<Native> {
        let arg = |at: usize| call.args.get(at).and_then(|a| Native::compile(&a.expr));
        let two = || Some((Box::new(arg(0)?), Box::new(arg(1)?)));
        if let Some(target) = &call.target {
            let op = match call.func_name.as_str() {
                "startsWith" => TextOp::StartsWith,
                "endsWith" => TextOp::EndsWith,
                "contains" => TextOp::Contains,
                _ => return None,
            };
            if call.args.len() != 1 {
                return None;
            }
            let text = Native::compile(&target.expr)?;
            return Some(Native::Text(op, Box::new(text), Box::new(arg(0)?)));
        }
        let arity = call.args.len();
        let op = match (call.func_name.as_str(), arity) {
            (operators::LOGICAL_AND, 2) => {
                let (a, b) = two()?;
                return Some(Native::And(a, b));
            }
            (operators::LOGICAL_OR, 2) => {
                let (a, b) = two()?;
                return Some(Native::Or(a, b));
            }
            (operators::LOGICAL_NOT, 1) => return Some(Native::Not(Box::new(arg(0)?))),
            (operators::IN, 2) => {
                let Expr::List(list) = &call.args.get(1)?.expr else {
                    return None;
                };
                let items = list
                    .elements
                    .iter()
                    .map(|item| match &item.expr {
                        Expr::Literal(literal) => lit(literal),
                        _ => None,
                    })
                    .collect::<Option<Vec<Lit>>>()?;
                return Some(Native::In(Box::new(arg(0)?), items));
            }
            (operators::EQUALS, 2) => Op::Eq,
            (operators::NOT_EQUALS, 2) => Op::Ne,
            (operators::LESS, 2) => Op::Lt,
            (operators::LESS_EQUALS, 2) => Op::Le,
            (operators::GREATER, 2) => Op::Gt,
            (operators::GREATER_EQUALS, 2) => Op::Ge,
            _ => return None,
        };
        let (a, b) = two()?;
        Some(Native::Compare(op, a, b))
    }

    /// Judges the expression for the call in `facts`.
    pub(crate) fn judge(&self, facts: &Facts<'_>) -> Said {
        match self.value(facts) {
            Some(Val::Bool(true)) => Said::True,
            Some(Val::Bool(false)) => Said::False,
            _ => Said::Unsure,
        }
    }

    /// The expression's value, `None` where the interpreter must say.
    fn value<'a>(&'a self, facts: &Facts<'a>) -> Option<Val<'a>> {
        match self {
            Native::Literal(literal) => Some(literal.val()),
            Native::Path(root, fields) => select(facts, *root, fields),
            // Left to right, as the interpreter short-circuits: a left side that
            // settles the answer settles it; any doubt goes to the interpreter.
            Native::And(a, b) => match a.value(facts)? {
                Val::Bool(false) => Some(Val::Bool(false)),
                Val::Bool(true) => match b.value(facts)? {
                    Val::Bool(right) => Some(Val::Bool(right)),
                    _ => None,
                },
                _ => None,
            },
            Native::Or(a, b) => match a.value(facts)? {
                Val::Bool(true) => Some(Val::Bool(true)),
                Val::Bool(false) => match b.value(facts)? {
                    Val::Bool(right) => Some(Val::Bool(right)),
                    _ => None,
                },
                _ => None,
            },
            Native::Not(a) => match a.value(facts)? {
                Val::Bool(b) => Some(Val::Bool(!b)),
                _ => None,
            },
            Native::Compare(op, a, b) => {
                compare(*op, a.value(facts)?, b.value(facts)?).map(Val::Bool)
            }
            Native::In(a, items) => {
                let needle = a.value(facts)?;
                let mut found = false;
                for item in items {
                    found |= equal(needle, item.val())?;
                }
                Some(Val::Bool(found))
            }
            Native::Text(op, text, part) => {
                let (Val::Str(text), Val::Str(part)) = (text.value(facts)?, part.value(facts)?)
                else {
                    return None;
                };
                Some(Val::Bool(match op {
                    TextOp::StartsWith => text.starts_with(part),
                    TextOp::EndsWith => text.ends_with(part),
                    TextOp::Contains => text.contains(part),
                }))
            }
        }
    }
}

impl Lit {
    fn val(&self) -> Val<'_> {
        match self {
            Lit::Null => Val::Null,
            Lit::Bool(b) => Val::Bool(*b),
            Lit::Int(i) => Val::Int(*i),
            Lit::Float(f) => Val::Float(*f),
            Lit::Str(s) => Val::Str(s),
        }
    }
}

fn lit(literal: &LiteralValue) -> Option<Lit> {
    Some(match literal {
        LiteralValue::Null => Lit::Null,
        LiteralValue::Boolean(b) => Lit::Bool(**b),
        LiteralValue::Int(i) => Lit::Int(**i),
        LiteralValue::Double(f) => Lit::Float(**f),
        LiteralValue::String(s) => Lit::Str(s.inner().to_owned()),
        // Unsigned and bytes literals compare by rules this path does not repeat.
        LiteralValue::UInt(_) | LiteralValue::Bytes(_) => return None,
    })
}

/// `a.b.c` as a root variable and its fields.
fn path(expr: &Expr) -> Option<Native> {
    let mut fields = Vec::new();
    let mut at = expr;
    loop {
        match at {
            Expr::Select(select) if !select.test => {
                fields.push(select.field.clone());
                at = &select.operand.expr;
            }
            Expr::Ident(name) => {
                let root = match name.as_str() {
                    "params" => Root::Params,
                    "action" => Root::Action,
                    "agent" => Root::Agent,
                    "actor" => Root::Actor,
                    "owner" => Root::Owner,
                    "run" => Root::Run,
                    "agent_auth" => Root::AgentAuth,
                    _ => return None,
                };
                fields.reverse();
                return Some(Native::Path(root, fields));
            }
            _ => return None,
        }
    }
}

/// The value `root.fields…` names for the call, as the interpreter's scope holds it.
fn select<'a>(facts: &Facts<'a>, root: Root, fields: &'a [String]) -> Option<Val<'a>> {
    let action = facts.action;
    let text = |s: &'a Option<String>| Val::Str(s.as_deref().unwrap_or(""));
    let mut value = match root {
        Root::Params => json(&action.params),
        Root::Agent => text(&action.agent),
        Root::Actor => text(&action.actor),
        Root::Owner => text(&action.owner),
        Root::Run => text(&action.run_id),
        Root::Action | Root::AgentAuth => Val::Map(root),
    };
    for field in fields {
        value = match value {
            Val::Json(Json::Object(map)) => json(map.get(field)?),
            Val::Map(Root::Action) => match field.as_str() {
                "system" => Val::Str(action.system.as_str()),
                "verb" => Val::Str(action.verb.as_str()),
                "target" => text(&action.target),
                "tier" => Val::Str(facts.tier.as_str()),
                "class" => Val::Str(facts.class.as_str()),
                "recognised" => Val::Bool(action.recognised),
                "tool" => text(&action.extra.tool_name),
                _ => return None,
            },
            Val::Map(_) => match field.as_str() {
                "auth" => text(&action.extra.agent_auth),
                "owner" => text(&action.extra.agent_owner),
                _ => return None,
            },
            _ => return None,
        };
    }
    Some(value)
}

/// A JSON value as the interpreter's scope holds it (`when::from_json`): a whole number
/// that fits is an `int`, else a `double`.
fn json(value: &Json) -> Val<'_> {
    match value {
        Json::Null => Val::Null,
        Json::Bool(b) => Val::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Val::Int(i),
            None => Val::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Val::Str(s),
        Json::Array(_) | Json::Object(_) => Val::Json(value),
    }
}

/// `a op b` where both are scalars of one kind (ints and doubles mixed as the
/// interpreter mixes them); `None` for anything else.
fn compare(op: Op, a: Val<'_>, b: Val<'_>) -> Option<bool> {
    use std::cmp::Ordering;
    if let Op::Eq | Op::Ne = op {
        let same = equal(a, b)?;
        return Some(if op == Op::Eq { same } else { !same });
    }
    let order: Ordering = match (a, b) {
        (Val::Int(a), Val::Int(b)) => a.cmp(&b),
        (Val::Float(a), Val::Float(b)) => a.partial_cmp(&b)?,
        (Val::Int(a), Val::Float(b)) => (a as f64).partial_cmp(&b)?,
        (Val::Float(a), Val::Int(b)) => a.partial_cmp(&(b as f64))?,
        (Val::Str(a), Val::Str(b)) => a.cmp(b),
        (Val::Bool(a), Val::Bool(b)) => a.cmp(&b),
        _ => return None,
    };
    Some(match op {
        Op::Lt => order.is_lt(),
        Op::Le => order.is_le(),
        Op::Gt => order.is_gt(),
        Op::Ge => order.is_ge(),
        Op::Eq => order.is_eq(),
        Op::Ne => order.is_ne(),
    })
}

/// `a == b` for scalars; `None` for lists, maps and kinds the interpreter would judge
/// by its own rules.
fn equal(a: Val<'_>, b: Val<'_>) -> Option<bool> {
    Some(match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(a), Val::Bool(b)) => a == b,
        (Val::Int(a), Val::Int(b)) => a == b,
        (Val::Float(a), Val::Float(b)) => a == b,
        (Val::Int(a), Val::Float(b)) | (Val::Float(b), Val::Int(a)) => (a as f64) == b,
        (Val::Str(a), Val::Str(b)) => a == b,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use crate::calendar::Calendars;
    use crate::de::Word;
    use crate::rule::Facts;
    use crate::when::{Held, Scope, When};
    use crate::{Action, Risk, TargetClass, Verb};

    /// Expressions of the native subset and beyond it, over params of every kind.
    const EXPRESSIONS: &[&str] = &[
        "params.amount > 500",
        "params.amount >= 500.5",
        "params.amount < 10 || params.new_customer == true",
        "(params.amount > 500 || params.customer_age_days < 30) && !(agent in ['finance'])",
        "params.amount != 3",
        "params.amount == 3.0",
        "params.currency in ['EUR', 'USD']",
        "params.currency in ['EUR', 7]",
        "params.to.endsWith('@acme.com')",
        "!params.to.startsWith('ops') && params.to.contains('@')",
        "action.system == 'stripe' && action.verb == 'pay'",
        "action.tier == 'high' && action.class == 'external' && action.recognised",
        "action.target == '' && action.tool == ''",
        "agent_auth.auth == 'token' || agent_auth.owner == ''",
        "run == 'r1' || actor == 'ann' || owner == ''",
        "params.nested.level > 2",
        "params.flag",
        "params.amount",
        "params.name < 'm'",
        "params.ok == null",
        "params.missing == 1 && false",
        "false && params.missing == 1",
        "true || params.missing == 1",
        "params.amount * 2 > 10",
        "size(params.to) > 3",
    ];

    fn params() -> Vec<serde_json::Value> {
        vec![
            json!({"amount": 900, "customer_age_days": 400, "to": "bob@acme.com",
                   "currency": "EUR", "nested": {"level": 3}, "flag": true,
                   "name": "alice", "ok": null, "new_customer": false}),
            json!({"amount": 3, "customer_age_days": 3, "to": "ops@other.org",
                   "currency": "GBP", "nested": {"level": "x"}, "flag": "yes",
                   "name": "zed", "ok": 1, "new_customer": true}),
            json!({"amount": 500.5, "to": 42, "currency": 7, "nested": [1],
                   "name": 5, "new_customer": "no"}),
            json!({"amount": "900", "to": "", "currency": null}),
            json!({"amount": 1e300, "to": "a@acme.com"}),
            json!({"amount": -2, "to": "ops"}),
            json!([1, 2, 3]),
            json!(null),
            json!({}),
        ]
    }

    /// Wherever the native path decides, it decides as the CEL interpreter does; and it
    /// does decide the plain comparisons rules are written in.
    #[test]
    fn the_native_path_agrees_with_the_interpreter_wherever_it_decides() {
        let calendars = Calendars::default();
        let now = Utc::now();
        let mut decided = 0;
        for source in EXPRESSIONS {
            let when = When::from_word(source).unwrap();
            for params in params() {
                for agent in ["finance", "support"] {
                    let action = Action::new("stripe", Verb::Pay)
                        .with_agent(agent)
                        .with_params(params.clone());
                    let facts = Facts {
                        action: &action,
                        tier: Risk::High,
                        class: TargetClass::External,
                    };
                    let oracle = when.judge(&Scope::new(&facts, now, &calendars, None));
                    if let Some(native) = when.judge_natively(&facts) {
                        decided += 1;
                        assert_eq!(native, oracle, "{source} over {params}, agent {agent}");
                    }
                }
            }
        }
        assert!(
            decided > 150,
            "the native path decided only {decided} calls"
        );
    }

    #[test]
    fn the_plain_comparisons_are_native_and_the_rest_is_left_to_the_interpreter() {
        for native in [
            "params.amount > 500 && !(agent in ['finance'])",
            "params.to.endsWith('@acme.com') || action.system == 'stripe'",
        ] {
            assert!(
                When::from_word(native).unwrap().native.is_some(),
                "{native}"
            );
        }
        for interpreted in [
            "params.amount * 2 > 10",
            "size(params.to) > 3",
            "now.getHours('Europe/Berlin') > 16",
            "calendar.office_hours",
            "run.did('files.read:secrets/*')",
            "has(params.amount)",
        ] {
            assert!(
                When::from_word(interpreted).unwrap().native.is_none(),
                "{interpreted}"
            );
        }
    }

    #[test]
    fn a_call_off_the_well_typed_road_goes_to_the_interpreter() {
        let when = When::from_word("params.amount > 500").unwrap();
        for params in [json!({}), json!({"amount": "900"}), json!(null)] {
            let action = Action::new("stripe", Verb::Pay).with_params(params.clone());
            let facts = Facts {
                action: &action,
                tier: Risk::High,
                class: TargetClass::External,
            };
            assert_eq!(when.judge_natively(&facts), None, "{params}");
            let said = when.judge(&Scope::new(&facts, Utc::now(), &Calendars::default(), None));
            assert!(matches!(said, Held::Failed(_)), "{params}: {said:?}");
        }
    }
}

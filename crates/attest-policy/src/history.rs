//! What happened earlier in a run: the questions a rule's `when:` asks of history
//! (`run.did("files.read:*secrets/*")`, `run.touched("sensitive")`, and the same of the
//! agent over a period: `agent.did(PATTERN, "24h")`, `agent.touched(LABEL, "24h")`),
//! the marks an action leaves for later calls to find, and the answers a caller hands
//! back.
//!
//! Policy does no I/O. For each call the caller asks which reads the rules that match
//! it need ([`PolicyEngine::history_reads`](crate::PolicyEngine::history_reads)): none
//! when no such rule's `when:` reads history (decided from the compiled expressions).
//! It answers each read from what it stored (attest-core: the ledger's window table,
//! one read) and decides with [`Policy::evaluate_with`](crate::Policy::evaluate_with).
//! An action that runs leaves its marks ([`PolicyEngine::marks`](crate::PolicyEngine::marks)):
//! one key per question it answers yes to, under its run and its agent. A question
//! left unanswered cannot be judged, which takes the riskiest reading.

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::IdedExpr;

use crate::action_pattern::ActionPattern;
use crate::Action;

/// The period a run-scoped mark is kept for: "the rest of the run" (a run longer than
/// this forgets what it did before).
pub const RUN_PERIOD_SECS: u64 = 30 * 24 * 3600;

/// Whose history a question reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Whose {
    /// This call's run (`run.did(…)`).
    Run,
    /// This call's agent, within the last `per` seconds (`agent.did(…, "24h")`).
    Agent(u64),
}

/// What a question asks of an earlier action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Fact {
    /// It matched an action pattern (its target part matched against the target or
    /// a resource the params name).
    Did(String),
    /// It touched a resource of a `labels:` label.
    Touched(String),
}

impl Fact {
    fn key_part(&self) -> String {
        match self {
            Fact::Did(pattern) => format!("did\u{1f}{pattern}"),
            Fact::Touched(label) => format!("touched\u{1f}{label}"),
        }
    }
}

/// One question a `when:` asks, as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Question {
    pub(crate) whose: Whose,
    pub(crate) fact: Fact,
}

impl Question {
    /// The question's name among a call's answers: what the CEL function looks up.
    pub(crate) fn id(&self) -> String {
        let (function, arg) = match &self.fact {
            Fact::Did(pattern) => ("did", pattern),
            Fact::Touched(label) => ("touched", label),
        };
        match self.whose {
            Whose::Run => format!("run.{function}({arg:?})"),
            Whose::Agent(per) => format!("agent.{function}({arg:?}, {per}s)"),
        }
    }

    /// The stored key this question reads for `action`: `None` when the action has no
    /// run (or agent) to ask about, and the answer is no.
    pub(crate) fn key(&self, action: &Action) -> Option<String> {
        let (scope, name) = match self.whose {
            Whose::Run => ("run", action.run_id.as_deref()?),
            Whose::Agent(_) => ("agent", action.agent.as_deref()?),
        };
        Some(format!(
            "attest.history\u{1f}{scope}\u{1f}{name}\u{1f}{}",
            self.fact.key_part()
        ))
    }

    /// How far back the question reads.
    pub(crate) fn per_secs(&self) -> u64 {
        match self.whose {
            Whose::Run => RUN_PERIOD_SECS,
            Whose::Agent(per) => per,
        }
    }
}

/// One read a call needs: whether anything was stored under `key` in the last
/// `per_secs` seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRead {
    /// The question, as the CEL function names it (`run.touched("sensitive")`).
    pub question: String,
    /// The stored key (names a run or agent; a store keeps its hash only). `None`: the
    /// call names no run (or agent) to ask about, nothing is read, the answer is no.
    pub key: Option<String>,
    /// How far back to look.
    pub per_secs: u64,
}

/// A mark an action leaves when it runs: store `key`, keep it `per_secs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The stored key (the same text a later [`HistoryRead`] names).
    pub key: String,
    /// How long the longest question on it reads back.
    pub per_secs: u64,
}

/// The answers to a call's history questions, by question.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    answers: HashMap<String, bool>,
}

impl History {
    /// No answers: every question is unanswered (the riskiest reading).
    pub fn unanswered() -> History {
        History::default()
    }

    /// The answers to `reads`, `found[i]` saying whether `reads[i]`'s key was stored (a
    /// read without a key is answered no whatever `found` says).
    pub fn answered(reads: &[HistoryRead], found: &[bool]) -> History {
        History {
            answers: reads
                .iter()
                .zip(found)
                .map(|(read, found)| (read.question.clone(), *found && read.key.is_some()))
                .collect(),
        }
    }

    /// The answers an in-memory history gives: `reads` answered yes where one of the
    /// `earlier` marks has its key (policy test cases, replay).
    pub fn from_marks(reads: &[HistoryRead], earlier: &[Mark]) -> History {
        let found: Vec<bool> = reads
            .iter()
            .map(|read| {
                read.key
                    .as_ref()
                    .is_some_and(|key| earlier.iter().any(|mark| &mark.key == key))
            })
            .collect();
        History::answered(reads, &found)
    }

    /// The answer to the question named `id`.
    pub(crate) fn answer(&self, id: &str) -> Option<bool> {
        self.answers.get(id).copied()
    }

    /// Every question answered yes, in a stable order (for explanations).
    pub fn held(&self) -> Vec<&str> {
        let mut held: Vec<&str> = self
            .answers
            .iter()
            .filter(|(_, yes)| **yes)
            .map(|(id, _)| id.as_str())
            .collect();
        held.sort_unstable();
        held
    }
}

/// The history questions in an expression, or what is wrong with one: each call of
/// `did` or `touched` must be `run.did("PATTERN")`, `run.touched("LABEL")`,
/// `agent.did("PATTERN", "PERIOD")` or `agent.touched("LABEL", "PERIOD")` with
/// literal strings, so that the questions are known when the policy loads.
pub(crate) fn questions(expr: &IdedExpr) -> Result<Vec<Question>, String> {
    let mut found = Vec::new();
    walk(expr, &mut found)?;
    Ok(found)
}

fn walk(expr: &IdedExpr, found: &mut Vec<Question>) -> Result<(), String> {
    match &expr.expr {
        Expr::Call(call) => {
            if call.func_name == "did" || call.func_name == "touched" {
                let question = question(&call.func_name, call.target.as_deref(), &call.args)?;
                if !found.contains(&question) {
                    found.push(question);
                }
            }
            if let Some(target) = &call.target {
                walk(target, found)?;
            }
            for arg in &call.args {
                walk(arg, found)?;
            }
        }
        Expr::Comprehension(c) => {
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(part, found)?;
            }
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, found)?;
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, found)?;
                    walk(&entry.value, found)?;
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    walk(&field.value, found)?;
                }
            }
        }
        Expr::Select(select) => walk(&select.operand, found)?,
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
    Ok(())
}

fn question(
    function: &str,
    target: Option<&IdedExpr>,
    args: &[IdedExpr],
) -> Result<Question, String> {
    let usage = || {
        format!(
            "{function} is asked as run.{function}(\"{0}\") or agent.{function}(\"{0}\", \"24h\"), with literal strings",
            if function == "did" { "files.read:*secrets/*" } else { "sensitive" }
        )
    };
    let literal = |arg: &IdedExpr| match &arg.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_owned()),
        _ => None,
    };
    let whose = match (target.map(|t| &t.expr), args.len()) {
        (Some(Expr::Ident(name)), 1) if name == "run" => Whose::Run,
        (Some(Expr::Ident(name)), 2) if name == "agent" => {
            let period = args.get(1).and_then(literal).ok_or_else(usage)?;
            let per = humantime::parse_duration(period.trim()).map_err(|e| {
                format!("{function}: period {period:?} is not a duration such as 24h ({e})")
            })?;
            if per.as_secs() == 0 {
                return Err(format!(
                    "{function}: period {period:?} must be at least a second"
                ));
            }
            Whose::Agent(per.as_secs())
        }
        _ => return Err(usage()),
    };
    let arg = args.first().and_then(literal).ok_or_else(usage)?;
    let fact = if function == "did" {
        ActionPattern::new(&arg).map_err(|e| format!("did: {e}"))?;
        Fact::Did(arg.trim().to_owned())
    } else {
        Fact::Touched(arg.trim().to_owned())
    };
    Ok(Question { whose, fact })
}

/// The resources an action names: its target, and the string values of the params
/// keys that name a file, URL or table (`file_path`, `path`, `notebook_path`, `paths`,
/// `url`, `uri`, `table`), at the top level.
pub(crate) fn resources(action: &Action) -> Vec<(Resource, &str)> {
    let mut found = Vec::new();
    if let Some(target) = action.target.as_deref() {
        found.push((Resource::Target, target));
    }
    let Some(params) = action.params.as_object() else {
        return found;
    };
    for (key, kind) in [
        ("file_path", Resource::Path),
        ("path", Resource::Path),
        ("notebook_path", Resource::Path),
        ("paths", Resource::Path),
        ("url", Resource::Url),
        ("uri", Resource::Url),
        ("table", Resource::Table),
    ] {
        match params.get(key) {
            Some(serde_json::Value::String(s)) => found.push((kind, s.as_str())),
            Some(serde_json::Value::Array(items)) => found.extend(
                items
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(|s| (kind, s)),
            ),
            _ => {}
        }
    }
    found
}

/// What kind of resource a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    /// The action's target.
    Target,
    /// A file path.
    Path,
    /// A URL.
    Url,
    /// A table.
    Table,
}

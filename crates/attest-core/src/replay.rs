//! Replaying a candidate policy over recorded history (`attest policy replay`): each
//! recorded action decided again from what its row kept, and the difference from what
//! was decided then, as transitions (`act → ask`) by the candidate's rules.
//!
//! One streaming pass over the rows in seq order; memory holds the tallies and the
//! actions still open (an intent or a pending ask whose outcome row has not come yet),
//! never the rows. An action counts once: its stage rows (intent, pending ask) stand
//! for it only when no later row of the same action ends it. What was decided then is
//! the row's `decision` — for a shadow-mode row, the verdict it was not held to (its
//! `shadow.decision`); for an imported row, the source's decision.
//!
//! A row keeps the params' hash and an allow-listed preview only (see
//! [`attest_policy::Recorded`]): a candidate rule whose answer turns on params the row
//! does not have is counted as undecidable under its name, never guessed. Two facts a
//! row does not keep are read from what it does: whether detection recognised the call
//! (taken as recognised unless the recorded tier is `high` for a medium-risk write, the
//! tier an unrecognised write gets), and, when the params are incomplete, the target
//! class (the recorded one: a candidate's `domains:` are applied only to rows whose
//! params are complete).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

use attest_ledger::{to_hex, value_hash, Ledger, LedgerError};
use attest_policy::{Action, Decision, PolicyEngine, Recorded, Replayed, Risk, TargetClass, Verb};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::record::INTENT;

/// Example seqs kept per transition.
pub const EXAMPLES_KEPT: usize = 5;

/// Which recorded actions to replay; every field narrows (all `None`: every row).
#[derive(Debug, Clone, Default)]
pub struct ReplayScope {
    /// Rows appended at or after this time.
    pub since: Option<SystemTime>,
    /// Rows of this run.
    pub run: Option<String>,
    /// Rows of this agent.
    pub agent: Option<String>,
}

/// The difference a candidate policy makes to recorded history.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayReport {
    /// Actions replayed (decided again, or undecidable).
    pub actions: u64,
    /// Actions the candidate decides as they were decided then.
    pub unchanged: u64,
    /// Decisions that change, by from, to and the candidate's rules, busiest first.
    pub transitions: Vec<Transition>,
    /// Rules whose conditions need params the ledger never keeps, with the number of
    /// actions each left undecided, busiest first.
    pub undecidable: Vec<Undecidable>,
}

/// Actions whose decision changes from `from` to `to`, the candidate's rules saying so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    /// What was decided then (`act`, `ask`, `refuse`, `recorded`).
    pub from: String,
    /// What the candidate decides.
    pub to: String,
    /// How many actions.
    pub count: u64,
    /// The rules that fired in the candidate's verdict, in order.
    pub rules: Vec<String>,
    /// The first rows, by seq.
    pub examples: Vec<u64>,
    /// The first rows as `system.verb target`, beside their seqs.
    #[serde(skip)]
    pub example_labels: Vec<String>,
}

/// A rule that could not be judged on some actions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undecidable {
    /// The rule (`R0`, `R3` or a YAML rule's name).
    pub rule: String,
    /// How many actions.
    pub count: u64,
}

/// The fields of a body a replay reads.
#[derive(Deserialize)]
struct RowView<'a> {
    #[serde(borrow, default)]
    action_id: Cow<'a, str>,
    #[serde(borrow, default)]
    ts: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    run_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    agent: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    actor: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    owner: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    system: Cow<'a, str>,
    #[serde(borrow, default)]
    verb: Cow<'a, str>,
    #[serde(borrow, default)]
    target: Option<Cow<'a, str>>,
    #[serde(default)]
    target_class: Option<TargetClass>,
    #[serde(default)]
    source: attest_policy::Source,
    #[serde(borrow, default)]
    decision: Cow<'a, str>,
    #[serde(borrow, default)]
    tier: Cow<'a, str>,
    #[serde(borrow, default)]
    rules_fired: Vec<Cow<'a, str>>,
    #[serde(borrow, default)]
    params_hash: Cow<'a, str>,
    #[serde(default)]
    params_preview: Map<String, Value>,
    #[serde(borrow, default)]
    execution: Option<Status<'a>>,
    #[serde(default)]
    imported: Option<Value>,
    #[serde(borrow, default)]
    shadow: Option<ShadowView<'a>>,
    #[serde(borrow, default)]
    call: Option<CallView<'a>>,
}

#[derive(Deserialize)]
struct Status<'a> {
    #[serde(borrow, default)]
    status: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ShadowView<'a> {
    #[serde(borrow, default)]
    decision: Cow<'a, str>,
    #[serde(borrow, default)]
    rules_fired: Vec<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct CallView<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    server: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool: Option<Cow<'a, str>>,
}

/// One action's replay: what it was, what it becomes (or the rule that cannot say).
#[derive(Debug, Clone)]
struct Judged {
    seq: u64,
    label: String,
    from: String,
    to: Result<(String, Vec<String>), String>,
}

/// A transition's key: from, to and the candidate's rules.
type TransitionKey = (String, String, Vec<String>);

/// A transition's count and its first example rows (seqs and labels).
type TransitionCount = (u64, Vec<u64>, Vec<String>);

#[derive(Default)]
struct Tally {
    actions: u64,
    unchanged: u64,
    transitions: BTreeMap<TransitionKey, TransitionCount>,
    undecidable: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, judged: Judged) {
        self.actions += 1;
        match judged.to {
            Err(rule) => *self.undecidable.entry(rule).or_default() += 1,
            Ok((to, _)) if to == judged.from => self.unchanged += 1,
            Ok((to, rules)) => {
                let entry = self
                    .transitions
                    .entry((judged.from, to, rules))
                    .or_default();
                entry.0 += 1;
                if entry.1.len() < EXAMPLES_KEPT {
                    entry.1.push(judged.seq);
                    entry.2.push(judged.label);
                }
            }
        }
    }

    fn report(self) -> ReplayReport {
        let mut transitions: Vec<Transition> = self
            .transitions
            .into_iter()
            .map(
                |((from, to, rules), (count, examples, example_labels))| Transition {
                    from,
                    to,
                    count,
                    rules,
                    examples,
                    example_labels,
                },
            )
            .collect();
        transitions.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.examples.cmp(&b.examples))
        });
        let mut undecidable: Vec<Undecidable> = self
            .undecidable
            .into_iter()
            .map(|(rule, count)| Undecidable { rule, count })
            .collect();
        undecidable.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.rule.cmp(&b.rule)));
        ReplayReport {
            actions: self.actions,
            unchanged: self.unchanged,
            transitions,
            undecidable,
        }
    }
}

/// Replays `candidate` over the rows of `ledger` that `scope` selects; `progress` is
/// told each seq read (every 4,096 rows, and the last).
pub fn replay(
    ledger: &Ledger,
    candidate: &PolicyEngine,
    scope: &ReplayScope,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplayReport, LedgerError> {
    let start = match scope.since {
        Some(since) => first_seq_at_or_after(ledger, since)?,
        None => 1,
    };
    let mut tally = Tally::default();
    // Stage rows waiting for the row that ends their action: action id -> judgement.
    let mut open: HashMap<String, Judged> = HashMap::new();
    let mut last = 0;
    ledger.for_each_row(start, |row| {
        last = row.seq;
        if row.seq % 4_096 == 0 {
            progress(row.seq);
        }
        if scope.run.as_deref().is_some_and(|run| row.run != Some(run))
            || scope
                .agent
                .as_deref()
                .is_some_and(|agent| row.agent != Some(agent))
        {
            return Ok(true);
        }
        let Ok(view) = serde_json::from_slice::<RowView<'_>>(row.body) else {
            // Not an entry: verify's to report.
            return Ok(true);
        };
        let stage = view
            .execution
            .as_ref()
            .is_some_and(|e| e.status == INTENT || e.status == "pending");
        let judged = judge(candidate, row.seq, &view);
        let id = view.action_id.as_ref();
        // A later row of the action supersedes its stage row: the action counts once.
        open.remove(id);
        if stage && !id.is_empty() {
            open.insert(id.to_owned(), judged);
        } else {
            tally.add(judged);
        }
        Ok(true)
    })?;
    progress(last);
    // Stage rows nothing ended (a crash after the intent, an ask nobody answered).
    let mut left: Vec<Judged> = open.into_values().collect();
    left.sort_by_key(|j| j.seq);
    for judged in left {
        tally.add(judged);
    }
    Ok(tally.report())
}

/// One row decided again.
fn judge(candidate: &PolicyEngine, seq: u64, view: &RowView<'_>) -> Judged {
    let from = match &view.shadow {
        Some(shadow) => shadow.decision.to_string(),
        None => view.decision.to_string(),
    };
    let label = match &view.target {
        Some(target) => format!("{}.{} {target}", view.system, view.verb),
        None => format!("{}.{}", view.system, view.verb),
    };
    let to = match view.verb.parse::<Verb>().ok() {
        Some(verb) => {
            let (action, recorded) = action_of(view, verb);
            match candidate.replay(&action, recorded) {
                Replayed::Decided(verdict) => {
                    let verdict = *verdict;
                    Ok((verdict.decision.as_str().to_owned(), verdict.rules_fired))
                }
                Replayed::Undecidable { rule } => Err(rule),
            }
        }
        // A verb this build does not know (a row from a newer writer): not judged.
        None => Err(format!("verb {}", view.verb)),
    };
    Judged {
        seq,
        label,
        from,
        to,
    }
}

/// When the row's action was made, for `when:` conditions that read the time: an
/// imported row's source time where it kept one, else the row's own.
fn row_time(view: &RowView<'_>) -> Option<SystemTime> {
    let imported = view
        .imported
        .as_ref()
        .and_then(|imported| imported.get("ts"))
        .and_then(Value::as_str);
    imported
        .or(view.ts.as_deref())
        .and_then(|ts| humantime::parse_rfc3339_weak(ts).ok())
}

/// The action a row describes, and what the row lets a replay know of its params.
fn action_of(view: &RowView<'_>, verb: Verb) -> (Action, Recorded) {
    let hashes_to =
        |params: &Value| value_hash(params).is_ok_and(|hash| to_hex(&hash) == view.params_hash);
    let mut params = Value::Object(view.params_preview.clone());
    let mut complete = hashes_to(&params);
    // An action recorded with no params at all (`null`, as an import of a source
    // without them writes): its empty preview is the whole of it, so every rule that
    // reads params, R3 included, is decided.
    if !complete && view.params_preview.is_empty() && hashes_to(&Value::Null) {
        params = Value::Null;
        complete = true;
    }
    let rules: &[Cow<'_, str>] = match &view.shadow {
        Some(shadow) => &shadow.rules_fired,
        None => &view.rules_fired,
    };
    // Whether a policy decided the row, so that its rules say whether R3 fired.
    let decided = view.imported.is_none()
        && view.decision != Decision::Recorded.as_str()
        && !rules.iter().any(|r| r == "policy-error");
    let recorded = Recorded {
        params_complete: complete,
        placeholders: decided.then(|| rules.iter().any(|r| r == "R3")),
        at: row_time(view),
    };
    let mut action = Action::new(view.system.as_ref(), verb).with_params(params);
    action.id = view.action_id.to_string();
    action.agent = view.agent.as_deref().map(str::to_owned);
    action.actor = view.actor.as_deref().map(str::to_owned);
    action.owner = view.owner.as_deref().map(str::to_owned);
    action.run_id = view.run_id.as_deref().map(str::to_owned);
    action.target = view.target.as_deref().map(str::to_owned);
    action.source = view.source;
    // An unrecognised write is recorded at `high` whatever its verb's own tier.
    action.recognised =
        !(view.tier == Risk::High.as_str() && !verb.is_read() && verb.default_risk() < Risk::High);
    if !complete {
        action.target_class = view.target_class;
    }
    if let Some(call) = &view.call {
        action.extra.method = call.method.as_deref().map(str::to_owned);
        action.extra.url = call.url.as_deref().map(str::to_owned);
        action.extra.server = call.server.as_deref().map(str::to_owned);
        action.extra.tool_name = call.tool.as_deref().map(str::to_owned);
    }
    (action, recorded)
}

/// The first seq whose row was appended at or after `time` (rows are appended in time
/// order), by bisection on seq: O(log n) point reads.
pub fn first_seq_at_or_after(ledger: &Ledger, time: SystemTime) -> Result<u64, LedgerError> {
    let Some((tip, _)) = ledger.tip()? else {
        return Ok(1);
    };
    let at = |seq: u64| -> Result<Option<(u64, SystemTime)>, LedgerError> {
        let mut found = None;
        ledger.for_each_row(seq, |row| {
            let ts = humantime::parse_rfc3339_weak(row.ts).unwrap_or(SystemTime::UNIX_EPOCH);
            found = Some((row.seq, ts));
            Ok(false)
        })?;
        Ok(found)
    };
    let (mut low, mut high) = (1u64, tip + 1);
    while low < high {
        let mid = low + (high - low) / 2;
        match at(mid)? {
            Some((seq, ts)) if ts < time => low = seq + 1,
            _ => high = mid,
        }
    }
    Ok(low)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row(params: &Value, preview: Value, imported: bool) -> Value {
        let hash = to_hex(&value_hash(params).unwrap());
        let mut row = json!({
            "action_id": "a1", "system": "crm", "verb": "update", "decision": "act",
            "tier": "medium", "rules_fired": [], "params_hash": hash,
            "params_preview": preview, "ts": "2026-03-27T15:30:00Z",
        });
        if imported {
            row["imported"] = json!({"ts": "2026-03-27T10:00:00Z"});
        }
        row
    }

    #[test]
    fn a_row_recorded_without_params_is_decidable() {
        // An imported action with no params at all (null) and one with `{}`: nothing
        // in them can hold a placeholder, so R3 is decided, not undecidable.
        for params in [Value::Null, json!({})] {
            let body = row(&params, json!({}), true).to_string();
            let view: RowView<'_> = serde_json::from_str(&body).unwrap();
            let (action, recorded) = action_of(&view, Verb::Update);
            assert!(recorded.params_complete, "{params}");
            assert_eq!(action.params, params);
        }
        // Params the preview does not carry stay unknown.
        let body = row(&json!({"body": "Dear [Name]"}), json!({}), true).to_string();
        let view: RowView<'_> = serde_json::from_str(&body).unwrap();
        assert!(!action_of(&view, Verb::Update).1.params_complete);
    }

    #[test]
    fn a_row_is_replayed_at_its_own_time() {
        let body = row(&json!({}), json!({}), false).to_string();
        let view: RowView<'_> = serde_json::from_str(&body).unwrap();
        assert_eq!(
            action_of(&view, Verb::Update).1.at,
            humantime::parse_rfc3339("2026-03-27T15:30:00Z").ok()
        );
        // An imported row: the source's time, not the append's.
        let body = row(&json!({}), json!({}), true).to_string();
        let view: RowView<'_> = serde_json::from_str(&body).unwrap();
        assert_eq!(
            action_of(&view, Verb::Update).1.at,
            humantime::parse_rfc3339("2026-03-27T10:00:00Z").ok()
        );
    }
}

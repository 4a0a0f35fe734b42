//! Tracing spans over the pipeline, for traces (OpenTelemetry) and latency metrics.
//!
//! One span per action (`attest.action`), with a child for each step it takes:
//! `detect`, `policy`, `gate`, `run`, `verify`, `append`. Their attributes come from the
//! action and the row: ids, agent, system, verb, decision, seq, level, status. Params,
//! results, targets' contents and errors never become attributes or events.
//!
//! Without a subscriber (the default) a span costs a branch; the binary installs one
//! only when traces or metrics are wanted.

use attest_ledger::{Appended, Record};
use attest_policy::Action;
use tracing::field::Empty;
use tracing::Span;

/// The name of the span that covers one action.
pub const ACTION_SPAN: &str = "attest.action";
/// The name of the span that covers one ledger append.
pub const APPEND_SPAN: &str = "append";

/// The span of one action.
pub(crate) fn action_span(action: &Action) -> Span {
    tracing::info_span!(
        "attest.action",
        attest.action_id = %action.id,
        attest.run_id = action.run_id.as_deref().unwrap_or(""),
        attest.agent = action.agent.as_deref().unwrap_or(""),
        attest.system = %action.system,
        attest.verb = %action.verb,
        attest.decision = Empty,
        attest.seq = Empty,
    )
}

/// A step's span; `name` is one of `detect`, `policy`, `gate`, `run`, `verify`.
pub(crate) fn step(name: &'static str) -> Span {
    match name {
        "detect" => tracing::info_span!("detect"),
        "policy" => tracing::info_span!("policy", attest.decision = Empty),
        "gate" => tracing::info_span!("gate"),
        "run" => tracing::info_span!("run", attest.status = Empty),
        "verify" => tracing::info_span!("verify", attest.level = Empty),
        _ => tracing::info_span!("step"),
    }
}

/// The span of one append, with the row's fields.
pub(crate) fn append_span(record: &Record) -> Span {
    tracing::info_span!(
        "append",
        attest.decision = %record.decision,
        attest.status = %record.execution.status,
        attest.level = record.verification.as_ref().map_or("", |v| v.level.as_str()),
        attest.tier = %record.tier,
        attest.target_class = %record.target_class,
        attest.seq = Empty,
        attest.hash = Empty,
    )
}

/// Notes the appended row on the append span and its action's span.
pub(crate) fn appended(span: &Span, row: &Appended) {
    span.record("attest.seq", row.seq);
    span.record("attest.hash", attest_ledger::to_hex(&row.hash).as_str());
    Span::current().record("attest.seq", row.seq);
}

/// Notes the decision on the current (action) span and on `step`.
pub(crate) fn decided(step: &Span, decision: &str) {
    step.record("attest.decision", decision);
    Span::current().record("attest.decision", decision);
}

//! The servers: routers over `attest-core` types, apart from the code that serves them.
//! The approval inbox (`attest serve`), and what puts Attest where agents already call
//! tools: the MCP proxy, the MCP server and the HTTP gateway. None decides anything itself.
//!
//! What they share lives here: how `ask` is answered ([`Mode`], [`gate_for`]) and the
//! receipt they hand back ([`receipt_json`]).
//!
//! # Pending mode and the approval store
//!
//! `--mode pending` means "hold the call, give the agent a token, resume after
//! `attest confirm`". That needs the durable approval store (issue 7), which this build
//! does not have. Until it lands, pending mode fails closed: an `ask` is rejected with a
//! note saying why, and nothing runs. The seam is [`gate_for`] (where a store-backed
//! gate goes) and each server's `pending` branch (where the resume token is returned).

pub(crate) mod gateway;
pub(crate) mod inbox;
pub(crate) mod mcp_proxy;
pub(crate) mod mcp_server;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use attest_core::ToolError;
use attest_core::{AutoGate, Gate, GateDecision, Receipt, RejectGate};
use attest_policy::{Action, Verdict};
use clap::ValueEnum;
use serde_json::{json, Value};

/// How a server answers when policy says `ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// The configured gate answers, and the call waits for it up to `--timeout`.
    Block,
    /// The call is held and the agent gets a token to resume it (needs the approval store).
    Pending,
    /// Every `ask` is approved as `auto`: for demos only.
    Auto,
}

/// The note on a rejection when pending mode has no approval store to park the call in.
pub(crate) const PENDING_UNAVAILABLE: &str =
    "pending approvals need the approval store, which is not available in this build; \
     nothing ran (use --mode block, or --mode auto for demos)";

/// The gate for `mode`: what answers `ask`, bounded by `timeout`.
///
/// - `block`: nobody can be asked from this build yet (the approval store is issue 7),
///   so the answer is a rejection; once a store-backed gate exists it goes here and
///   waits up to `timeout` for `attest confirm`.
/// - `pending`: rejects with [`PENDING_UNAVAILABLE`] until the store lands.
/// - `auto`: approves as `auto`.
pub(crate) fn gate_for(mode: Mode, timeout: Duration) -> TimeoutGate {
    let inner: Arc<dyn Gate> = match mode {
        Mode::Block => Arc::new(RejectGate),
        Mode::Pending => Arc::new(NoStoreGate),
        Mode::Auto => Arc::new(AutoGate::approve("auto")),
    };
    TimeoutGate { inner, timeout }
}

/// Waits for another gate up to a limit; no answer in time is a rejection.
pub(crate) struct TimeoutGate {
    inner: Arc<dyn Gate>,
    timeout: Duration,
}

#[async_trait]
impl Gate for TimeoutGate {
    async fn decide(&self, action: &Action, verdict: &Verdict) -> GateDecision {
        match tokio::time::timeout(self.timeout, self.inner.decide(action, verdict)).await {
            Ok(decision) => decision,
            Err(_) => GateDecision::Reject {
                approver: "nobody".to_owned(),
                channel: "timeout".to_owned(),
                note: Some(format!(
                    "no answer within {} s, so the action does not run",
                    self.timeout.as_secs()
                )),
            },
        }
    }
}

/// Pending mode without an approval store: fail closed and say why.
struct NoStoreGate;

#[async_trait]
impl Gate for NoStoreGate {
    async fn decide(&self, _action: &Action, _verdict: &Verdict) -> GateDecision {
        GateDecision::Reject {
            approver: "nobody".to_owned(),
            channel: "pending".to_owned(),
            note: Some(PENDING_UNAVAILABLE.to_owned()),
        }
    }
}

/// The receipt as the servers show it: `{"seq","action_id","decision","level",…}`.
pub(crate) fn receipt_json(receipt: &Receipt) -> Value {
    json!({
        "seq": receipt.seq,
        "action_id": receipt.action_id,
        "entry_hash": receipt.entry_hash,
        "decision": receipt.decision.as_str(),
        "level": receipt.level.map(|l| l.as_str()),
        "approver": receipt.approver,
        "reasons": receipt.reasons,
    })
}

/// An error and its causes, one line: `a: b: c`.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Every field the write sent (other than the id) that the read shows must be equal.
/// Nothing to compare means the check could not run (an error), not a contradiction.
pub(crate) fn compare_fields(sent: &Value, read: &Value, id_arg: &str) -> Result<bool, ToolError> {
    let (Some(sent), Some(read)) = (sent.as_object(), read.as_object()) else {
        return Err("the write's params or the read are not JSON objects".into());
    };
    let mut compared = 0usize;
    for (field, value) in sent {
        if field == id_arg || field == "id" {
            continue;
        }
        if let Some(found) = read.get(field) {
            if found != value {
                return Ok(false);
            }
            compared += 1;
        }
    }
    if compared == 0 {
        return Err("the read shows none of the fields the write sent".into());
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use attest_policy::{Decision, Risk, Verb};

    use super::*;

    struct Never;

    #[async_trait]
    impl Gate for Never {
        async fn decide(&self, _action: &Action, _verdict: &Verdict) -> GateDecision {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_gate_that_never_answers_is_a_rejection() {
        let gate = TimeoutGate {
            inner: Arc::new(Never),
            timeout: Duration::from_millis(10),
        };
        let action = Action::new("x", Verb::Send);
        let verdict = Verdict::new(Decision::Ask, Risk::High, "R4", "high");
        match gate.decide(&action, &verdict).await {
            GateDecision::Reject { channel, note, .. } => {
                assert_eq!(channel, "timeout");
                assert!(note.unwrap().contains("no answer"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn modes_pick_their_gates() {
        let action = Action::new("x", Verb::Send);
        let verdict = Verdict::new(Decision::Ask, Risk::High, "R4", "high");
        let auto = gate_for(Mode::Auto, Duration::from_secs(1));
        assert!(matches!(
            auto.decide(&action, &verdict).await,
            GateDecision::Approve { .. }
        ));
        let pending = gate_for(Mode::Pending, Duration::from_secs(1));
        match pending.decide(&action, &verdict).await {
            GateDecision::Reject { note, .. } => assert_eq!(note.unwrap(), PENDING_UNAVAILABLE),
            other => panic!("{other:?}"),
        }
        let block = gate_for(Mode::Block, Duration::from_secs(1));
        assert!(matches!(
            block.decide(&action, &verdict).await,
            GateDecision::Reject { .. }
        ));
    }
}

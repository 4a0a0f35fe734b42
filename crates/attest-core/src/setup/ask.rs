//! How a door answers when policy says `ask`: the approval store (waiting, or holding at
//! once), or approving everything (demos), behind a guard that turns a gate that never
//! answers into a rejection.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use attest_policy::{Action, Verdict};

use crate::approvals::{ApprovalStore, Notifier, StoreGate};
use crate::{AutoGate, Gate, GateDecision};

/// Grace beyond the wait before the guard gives up on the store's own wait.
const GATE_GRACE: Duration = Duration::from_secs(5);

/// How `ask` is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AskMode {
    /// A person is asked through the approval store; the call waits up to the wait, then
    /// comes back held with its resume token.
    #[default]
    Block,
    /// The call is held at once and the caller gets a token to resume it.
    Pending,
    /// Every `ask` is approved as `auto`: for demos only.
    Auto,
}

impl AskMode {
    /// `block`, `pending`, `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            AskMode::Block => "block",
            AskMode::Pending => "pending",
            AskMode::Auto => "auto",
        }
    }

    /// The gate for this mode: the approval store (telling each of `notifiers` of each
    /// new request) waiting up to `wait` or holding at once, or approving as `auto`;
    /// guarded so that no answer shortly after `wait` is a rejection. An approval given
    /// through the store may be used for `use_by` after it is given. `same_call`: an ask
    /// finds the request an earlier attempt of the same call filed
    /// ([`StoreGate::same_call`]).
    pub fn gate(
        self,
        store: Arc<ApprovalStore>,
        wait: Duration,
        use_by: Duration,
        notifiers: Vec<Arc<dyn Notifier>>,
        same_call: bool,
    ) -> TimeoutGate {
        let with_notifiers = |mut gate: StoreGate| {
            for notifier in notifiers {
                gate = gate.notifier(notifier);
            }
            gate
        };
        let inner: Arc<dyn Gate> = match self {
            AskMode::Block => Arc::new(with_notifiers(
                StoreGate::new(store)
                    .use_by(use_by)
                    .wait(wait)
                    .same_call(same_call),
            )),
            AskMode::Pending => Arc::new(with_notifiers(
                StoreGate::new(store).use_by(use_by).same_call(same_call),
            )),
            AskMode::Auto => Arc::new(AutoGate::approve("auto")),
        };
        TimeoutGate::new(inner, wait.saturating_add(GATE_GRACE))
    }
}

/// Waits for another gate up to a limit; no answer in time is a rejection.
pub struct TimeoutGate {
    inner: Arc<dyn Gate>,
    timeout: Duration,
}

impl TimeoutGate {
    /// `inner`, rejected when it has not answered within `timeout`.
    pub fn new(inner: Arc<dyn Gate>, timeout: Duration) -> TimeoutGate {
        TimeoutGate { inner, timeout }
    }
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
        let gate = TimeoutGate::new(Arc::new(Never), Duration::from_millis(10));
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
    async fn auto_mode_approves() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = attest_ledger::Ledger::open(
            dir.path().join("l.sqlite"),
            attest_ledger::LedgerOptions::default(),
        )
        .unwrap();
        let store = Arc::new(ApprovalStore::open(&ledger).unwrap());
        let action = Action::new("x", Verb::Send);
        let verdict = Verdict::new(Decision::Ask, Risk::High, "R4", "high");
        let auto = AskMode::Auto.gate(
            store,
            Duration::from_secs(1),
            Duration::from_secs(1),
            Vec::new(),
            false,
        );
        assert!(matches!(
            auto.decide(&action, &verdict).await,
            GateDecision::Approve { .. }
        ));
    }
}

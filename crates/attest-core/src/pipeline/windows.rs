//! Budgets and rates: a verdict's windows (its `limit:` rules) checked against what ran,
//! in the ledger, before the call runs.
//!
//! Policy returns the windows with the verdict it gives while none is crossed
//! ([`Verdict::windows`]). Here, before anything runs:
//! - a verdict that would run the call (`act`) checks and counts it in one atomic step
//!   ([`attest_ledger::Ledger::reserve_windows`]): of two callers racing at a cap, in any
//!   process on any host, one crosses;
//! - a crossed window's verdict applies instead ([`attest_policy::Window::crossed`]: ask
//!   by default, with the figures in its reason), and nothing is counted;
//! - a verdict that asks reads the figures only (a crossed window's verdict names them);
//!   the call counts when it runs, after a person approved it, even over the cap;
//! - a refusal is not counted and not checked.
//!
//! A call counted but not run (its intent could not be recorded) is taken back. A
//! window that cannot be read or written refuses the call: fail closed.

use std::sync::Arc;

use attest_ledger::{Ledger, Reservation, WindowClaim};
use attest_policy::{Action, Decision, Verdict, Window};

use super::Attest;
use crate::AttestError;

/// The windows a call is counted in, and whether it already is.
#[derive(Debug, Clone, Default)]
pub(super) struct Counting {
    claims: Vec<WindowClaim>,
    /// Counted by the check (`reserve_windows`); else counted when the call runs.
    reserved: bool,
}

impl Counting {
    /// Nothing to count.
    pub(super) fn none() -> Counting {
        Counting::default()
    }

    /// Adds a window the call is counted in already (a grant's use): counted again
    /// (a no-op) when it runs, taken back with the rest when it does not.
    pub(super) fn also(&mut self, claim: WindowClaim) {
        self.claims.push(claim);
    }

    /// Whether the check counted the call already (in at least one window).
    pub(super) fn counted_now(&self) -> bool {
        self.reserved && !self.claims.is_empty()
    }

    /// More to count when the call runs.
    pub(super) fn add(&mut self, claims: Vec<WindowClaim>) {
        self.claims.extend(claims);
    }

    /// More that was counted now, with what the check counted (if anything).
    pub(super) fn reserved_with(&mut self, claims: Vec<WindowClaim>) {
        self.claims.extend(claims);
        self.reserved = true;
    }
}

/// The ledger's claim for a policy window.
fn claim(window: &Window) -> WindowClaim {
    WindowClaim {
        key: window.key.clone(),
        per: std::time::Duration::from_secs(window.per_secs),
        max: window.max,
        adds: window.adds,
    }
}

/// The verdict of the first window `figures` say is crossed, if any.
fn first_crossed(windows: &[Window], figures: &[f64]) -> Option<Verdict> {
    windows
        .iter()
        .zip(figures)
        .find(|(window, figure)| window.crosses(**figure))
        .map(|(window, figure)| window.crossed(*figure))
}

impl Attest {
    /// Checks `verdict`'s windows for the action `action_id` (see the module docs): the
    /// verdict that applies, without its windows, and what to count when the call runs.
    /// `reserve`: a verdict of `act` counts the call now, atomically (false in shadow
    /// mode, where nothing is enforced and the call is counted when it runs).
    pub(super) async fn windowed(
        &self,
        action: &Action,
        mut verdict: Verdict,
        reserve: bool,
    ) -> (Verdict, Counting) {
        let checked = match self.check_windows(&action.id, &mut verdict, reserve).await {
            Ok(mut counting) => match self.mark(action, &verdict, reserve, &mut counting).await {
                Ok(()) => Ok(counting),
                Err(err) => {
                    self.release(&action.id, &counting).await;
                    Err(err)
                }
            },
            Err(err) => Err(err),
        };
        match checked {
            Ok(counting) => {
                verdict.windows.clear();
                (verdict, counting)
            }
            Err(err) => (
                super::undecided(
                    action,
                    &format!(
                        "a budget or rate window could not be checked: {}",
                        crate::error_chain(&err)
                    ),
                ),
                Counting::none(),
            ),
        }
    }

    async fn check_windows(
        &self,
        action_id: &str,
        verdict: &mut Verdict,
        reserve: bool,
    ) -> Result<Counting, AttestError> {
        if verdict.windows.is_empty() || verdict.decision == Decision::Refuse {
            return Ok(Counting::none());
        }
        let claims: Vec<WindowClaim> = verdict.windows.iter().map(claim).collect();
        if reserve && verdict.decision == Decision::Act {
            let id = action_id.to_owned();
            let asked = claims.clone();
            let reservation = self
                .on_ledger(move |ledger| ledger.reserve_windows(&id, &asked))
                .await?;
            return Ok(match reservation {
                Reservation::Counted { .. } => Counting {
                    claims,
                    reserved: true,
                },
                Reservation::Crossed { index, figure } => {
                    if let Some(window) = verdict.windows.get(index) {
                        *verdict = window.crossed(figure);
                    }
                    Counting {
                        claims,
                        reserved: false,
                    }
                }
            });
        }
        let asked = claims.clone();
        let figures = self
            .on_ledger(move |ledger| ledger.window_figures(&asked))
            .await?;
        if let Some(crossed) = first_crossed(&verdict.windows, &figures) {
            *verdict = crossed;
        }
        Ok(Counting {
            claims,
            reserved: false,
        })
    }

    /// Counts a call that is about to run in its windows, unless the check already did.
    pub(super) async fn count_before_run(
        &self,
        action_id: &str,
        counting: &Counting,
    ) -> Result<(), AttestError> {
        if counting.reserved || counting.claims.is_empty() {
            return Ok(());
        }
        let id = action_id.to_owned();
        let claims = counting.claims.clone();
        self.on_ledger(move |ledger| ledger.count_windows(&id, &claims))
            .await
    }

    /// Takes back a call's counts when it did not run after all.
    pub(super) async fn release(&self, action_id: &str, counting: &Counting) {
        if counting.claims.is_empty() {
            return;
        }
        let id = action_id.to_owned();
        let claims = counting.claims.clone();
        // Best effort: a count left behind only makes the window stricter.
        if let Err(err) = self
            .on_ledger(move |ledger| ledger.release_windows(&id, &claims))
            .await
        {
            tracing::warn!(error = %crate::error_chain(&err), "a window count was not taken back");
        }
    }

    /// Counts an action reported after it ran in the windows of the `limit:` rules it
    /// matches. Its row is already written: a window that cannot be counted is logged,
    /// and the record stands.
    pub(super) async fn count_recorded(&self, action: &Action) {
        let Ok(verdict) = self.policy.evaluate(action) else {
            return;
        };
        let mut claims: Vec<WindowClaim> = verdict.windows.iter().map(claim).collect();
        claims.extend(self.mark_claims(action));
        if claims.is_empty() {
            return;
        }
        let counting = Counting {
            claims,
            reserved: false,
        };
        if let Err(err) = self.count_before_run(&action.id, &counting).await {
            tracing::warn!(error = %crate::error_chain(&err), "a recorded action was not counted in its windows");
        }
    }

    /// Runs a blocking ledger call: off the async workers, unless the writer is idle.
    pub(super) async fn on_ledger<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Ledger) -> Result<T, attest_ledger::LedgerError> + Send + 'static,
    ) -> Result<T, AttestError> {
        // A SQLite ledger with an idle writer: on this thread, as an idle writer's append
        // is (two thread hand-offs cost more than a side table's point read or write;
        // the slot keeps it to one runtime thread at a time).
        if let Some((ledger, _slot)) = self.writer.idle_ledger() {
            return call(ledger).map_err(AttestError::Ledger);
        }
        let ledger = Arc::clone(&self.ledger);
        tokio::task::spawn_blocking(move || call(&ledger))
            .await
            .map_err(AttestError::Writer)?
            .map_err(AttestError::Ledger)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use attest_ledger::LedgerOptions;
    use attest_policy::{PolicyEngine, Verb};
    use serde_json::json;

    use crate::{AutoGate, Gate, Outcome};

    use super::*;

    const BUDGET: &str = "policies:
  - name: budget
    match: {system: stripe, verb: pay}
    limit: {sum: /amount, max: 100, per: 24h, by: [agent]}
  - name: payments
    match: {system: stripe, verb: pay}
    decision: act
";

    fn attest(dir: &tempfile::TempDir, gate: impl Gate + 'static) -> Attest {
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        Attest::builder()
            .ledger(ledger)
            .policy(PolicyEngine::from_yaml(BUDGET, "budget.yaml").unwrap())
            .gate(gate)
            .agent("pay-bot")
            .build()
            .unwrap()
    }

    /// Pays `amount` through `attest`; the tool counts how often it ran.
    async fn pay(attest: &Attest, amount: u64, ran: &AtomicUsize) -> Outcome<serde_json::Value> {
        let action = Action::new("stripe", Verb::Pay).with_params(json!({"amount": amount}));
        attest
            .call(action)
            .run(|_| async {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, crate::ToolError>(json!({"id": "ch_1"}))
            })
            .await
            .unwrap()
    }

    fn figure(attest: &Attest) -> f64 {
        let claim = WindowClaim {
            key: r#"["budget","agent","pay-bot"]"#.to_owned(),
            per: std::time::Duration::from_secs(24 * 3600),
            max: 100.0,
            adds: 0.0,
        };
        attest.ledger().window_figures(&[claim]).unwrap()[0]
    }

    #[tokio::test]
    async fn a_crossing_call_asks_and_a_rejection_counts_nothing_an_approval_runs_over_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let rejecting = attest(&dir, AutoGate::reject("ops"));
        for _ in 0..2 {
            assert!(matches!(
                pay(&rejecting, 50, &ran).await,
                Outcome::Ran { .. }
            ));
        }
        let Outcome::Rejected { receipt, .. } = pay(&rejecting, 1, &ran).await else {
            panic!("the call over the cap is asked about, and this gate rejects")
        };
        assert_eq!(receipt.decision, Decision::Ask);
        assert_eq!(
            receipt.reasons,
            ["agent pay-bot spent 100 of 100 in 24h; this call adds 1 (/amount)"]
        );
        assert_eq!((ran.load(Ordering::SeqCst), figure(&rejecting)), (2, 100.0));

        let approving = attest(&dir, AutoGate::approve("ann"));
        let Outcome::Ran { receipt, .. } = pay(&approving, 5, &ran).await else {
            panic!("an approved call runs over the cap")
        };
        assert_eq!(receipt.approver.as_deref(), Some("ann"));
        assert_eq!((ran.load(Ordering::SeqCst), figure(&approving)), (3, 105.0));
    }

    #[tokio::test]
    async fn a_window_that_cannot_be_read_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let attest = attest(&dir, AutoGate::approve("ann"));
        let conn = rusqlite::Connection::open(dir.path().join("l.sqlite")).unwrap();
        conn.execute_batch("DROP TABLE window_entries").unwrap();
        let Outcome::Refused { receipt } = pay(&attest, 5, &ran).await else {
            panic!("fail closed")
        };
        assert!(
            receipt.reasons[0].contains("a budget or rate window could not be checked"),
            "{:?}",
            receipt.reasons
        );
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }
}

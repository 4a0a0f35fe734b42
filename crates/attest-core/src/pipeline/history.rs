//! What happened earlier in the run, for policy's history questions (`run.touched(…)`,
//! `run.did(…)`, `agent.…` over a period): the answers read from the ledger before
//! policy decides, and the marks an action leaves before it runs.
//!
//! Both live in the ledger's window table ([`attest_ledger::Ledger::window_figures`],
//! [`attest_ledger::Ledger::count_windows`]), beside the chain, under keys stored as
//! their SHA-256 only. A call reads only when a rule that asks history matches it
//! (policy says which: [`attest_policy::Policy::history_reads`]), in one read
//! transaction for all its questions. A call that would run leaves its marks before it
//! runs, as a budget counts it, so that a call deciding after it in any process sees
//! them: a read that decides before the mark is written decides before the marked call
//! ran, and what it sends cannot hold what that call reads. A call that does not run
//! after all takes its marks back with its window counts. History that cannot be read,
//! or marks that cannot be written, refuse the call: fail closed.

use std::time::{Duration, SystemTime};

use attest_ledger::WindowClaim;
use attest_policy::{Action, Decision, History, Verdict};

use super::windows::Counting;
use super::{undecided, Attest};
use crate::error_chain;

/// A history key as a window claim: never crossed, each action counted once.
fn claim(key: String, per_secs: u64) -> WindowClaim {
    WindowClaim {
        key,
        per: Duration::from_secs(per_secs),
        max: f64::INFINITY,
        adds: 1.0,
    }
}

impl Attest {
    /// Policy's verdict with the answers to the history questions of the rules that
    /// match `action`, read from the ledger now; without such a rule, no read.
    pub(super) async fn evaluate_gathered(&self, action: &Action) -> Verdict {
        let reads = self.policy.history_reads(action);
        if reads.is_empty() || action.extra.protected.is_some() {
            return self.evaluate(action);
        }
        let claims: Vec<WindowClaim> = reads
            .iter()
            .filter_map(|read| read.key.clone().map(|key| claim(key, read.per_secs)))
            .collect();
        let figures = if claims.is_empty() {
            Ok(Vec::new())
        } else {
            self.on_ledger(move |ledger| ledger.window_figures(&claims))
                .await
        };
        let figures = match figures {
            Ok(figures) => figures,
            Err(err) => {
                return undecided(
                    action,
                    &format!("the run's history could not be read: {}", error_chain(&err)),
                )
            }
        };
        // The keyed reads' figures in order; a read without a key is answered no.
        let mut figures = figures.into_iter();
        let found: Vec<bool> = reads
            .iter()
            .map(|read| read.key.is_some() && figures.next().is_some_and(|f| f > 0.0))
            .collect();
        let history = History::answered(&reads, &found);
        self.judged(
            action,
            self.policy
                .evaluate_with(action, SystemTime::now(), &history),
        )
    }

    /// The marks `action` leaves when it runs, as window claims.
    pub(super) fn mark_claims(&self, action: &Action) -> Vec<WindowClaim> {
        self.policy
            .marks(action)
            .into_iter()
            .map(|mark| claim(mark.key, mark.per_secs))
            .collect()
    }

    /// Adds the marks of a call `verdict` lets run to what `counting` counts: now when
    /// the call is counted now (`reserve` and `act`), else when it runs.
    pub(super) async fn mark(
        &self,
        action: &Action,
        verdict: &Verdict,
        reserve: bool,
        counting: &mut Counting,
    ) -> Result<(), crate::AttestError> {
        if verdict.decision == Decision::Refuse {
            return Ok(());
        }
        let marks = self.mark_claims(action);
        if marks.is_empty() {
            return Ok(());
        }
        if reserve && verdict.decision == Decision::Act {
            let id = action.id.clone();
            let counted = marks.clone();
            self.on_ledger(move |ledger| ledger.count_windows(&id, &counted))
                .await?;
            counting.reserved_with(marks);
        } else {
            counting.add(marks);
        }
        Ok(())
    }
}

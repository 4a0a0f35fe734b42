//! Retries and duplicates: a write is checked against the earlier calls with the same
//! digest (the whole call, as approvals bind to it: [`action_digest`]) before it runs.
//!
//! The ledger keeps, beside the chain, one row per digest of a write in flight or that
//! ran within its dedupe window ([`attest_ledger::Ledger::claim_call`]); the check is
//! one lookup. For a call that would run now (`act`), the check and the claim are one
//! atomic step that rides in the transaction of its intent row
//! ([`attest_ledger::CallStep::Claim`]): one commit for both, group-committed with other
//! actions' rows, and no lookup before. Of two retries racing, in any process on any
//! host, one writes its intent with the claim; the other finds the digest held there,
//! writes nothing, and is decided again, claiming apart in a transaction of its own, so
//! that what holds the digest (an open call, a duplicate) decides as below. The finish
//! rides with the outcome row in the same way.
//!
//! - The same call ran within the verdict's dedupe window (a rule's or the policy's
//!   `dedupe:`): [`Dedupe::duplicate`] applies (ask, or refuse), with "the same call ran
//!   at seq N, 12 s ago".
//! - An earlier attempt is still open (its intent has no outcome): a retry never runs
//!   blindly. If the earlier attempt's process is known to be gone (see
//!   [`crate::liveness`]): with no intent recorded, it never ran, and the retry is
//!   decided afresh; with its outcome recorded after all, likewise; with an intent only,
//!   a read-back recipe that can look the record up from the call reconciles it (an
//!   outcome row for the earlier action: `ok`, verified, and the retry asks; or
//!   `not_run`, and the retry is decided afresh). Otherwise (the process may be
//!   running, no recipe, a read that cannot tell) the retry asks a person, saying the
//!   earlier attempt's outcome is unknown.
//! - A call a person approved runs whatever holds its digest, and claims it.
//!
//! A claim is finished when the outcome is recorded (kept for the dedupe window when it
//! ran), and taken back when the call does not run after all. A check that cannot read
//! or write the table refuses the call: fail closed. In shadow mode nothing is enforced:
//! the check is a read, and the call claims its digest when it runs.

use std::time::{Duration, SystemTime};

use attest_ledger::{CallCheck, CallClaim, CallStep, HeldCall, Record};
use attest_policy::{Action, Decision, Dedupe, Verdict};

use super::Attest;
use crate::approvals::action_digest;
use crate::intents::{found_outcome, Found, FoundBy, IntentRow};
use crate::record::INTENT;
use crate::verification::{read_outcome, ReadOutcome};
use crate::{liveness, AttestError, Receipt};

/// The rule a retry held by an earlier attempt fires as.
pub const RETRY_RULE: &str = "retry";

/// A write's digest and whether this call holds it.
#[derive(Debug, Clone, Default)]
pub(super) struct Calling {
    /// The call's digest; `None`: nothing to track (a read, a refusal).
    digest: Option<String>,
    /// Claimed by the check; else claimed when the call runs.
    claimed: bool,
    /// For a call that would run now: claimed, on the check's terms, in the transaction
    /// of its intent row (one commit for both). A call that finds the digest held there
    /// (a retry racing it, a duplicate) writes nothing and is decided again, claiming
    /// apart.
    with_intent: Option<CallClaim>,
    /// How long the digest blocks duplicates once the call ran (its dedupe window).
    keep: Duration,
}

impl Calling {
    /// Nothing to track.
    pub(super) fn none() -> Calling {
        Calling::default()
    }

    /// The step that rides with the intent of the call `action_id`, about to run: the
    /// check's claim, or (a person approved it, shadow mode) a claim whatever holds the
    /// digest; nothing if the check claimed it already.
    pub(super) fn intent_step(&self, action_id: &str) -> Option<CallStep> {
        let digest = self.digest.as_ref()?;
        if self.claimed {
            return None;
        }
        Some(match &self.with_intent {
            Some(claim) => CallStep::Claim {
                claim: claim.clone(),
                replacing: None,
            },
            None => CallStep::Take(CallClaim {
                digest: digest.clone(),
                action_id: action_id.to_owned(),
                owner: liveness::this_process().to_owned(),
                dedupe: None,
            }),
        })
    }

    /// Whether the check claimed the digest itself (in a transaction of its own).
    pub(super) fn claimed_apart(&self) -> bool {
        self.claimed
    }

    /// The step that rides with the outcome of the call `action_id`: a call that ran
    /// blocks its duplicates for its dedupe window; one that failed frees its digest.
    pub(super) fn outcome_step(&self, action_id: &str, ran: bool) -> Option<CallStep> {
        Some(CallStep::Finish {
            digest: self.digest.clone()?,
            action_id: action_id.to_owned(),
            keep: ran.then_some(self.keep),
        })
    }
}

/// What became of an earlier attempt left open.
enum Earlier {
    /// Nothing holds the digest any more: it did not run, or its outcome is recorded.
    Free,
    /// Read back now, it ran: its outcome is recorded at `seq`.
    Ran { intent: u64, seq: u64 },
    /// Its outcome row says it ran (at `seq`): its process died before the digest was
    /// finished. A duplicate, if the verdict has a window.
    Finished { seq: u64 },
    /// Nobody can tell: why, for the person asked.
    Unknown(String),
}

impl Attest {
    /// Checks `verdict` against the earlier calls of the same digest (see the module
    /// docs): the verdict that applies, without its dedupe window, and what to claim
    /// and finish. `claim`: a verdict of `act` claims the digest now, atomically (false
    /// in shadow mode). A digest that cannot be read refuses; one that cannot be
    /// claimed is [`AttestError::NotRecorded`]: the call did not run.
    ///
    /// A digest found free is claimed with the call's intent ([`Calling::intent_step`]),
    /// unless `apart`: then in a transaction of its own now (a call decided again after
    /// it lost that race).
    pub(super) async fn deduped(
        &self,
        action: &Action,
        verdict: Verdict,
        claim: bool,
        apart: bool,
    ) -> Result<(Verdict, Calling), AttestError> {
        Ok(
            match self.check_calls(action, &verdict, claim, apart).await {
                Ok((mut verdict, calling)) => {
                    verdict.dedupe = None;
                    (verdict, calling)
                }
                Err(err @ AttestError::NotRecorded(_)) => return Err(err),
                Err(err) => (
                    super::undecided(
                        action,
                        &format!(
                            "the call's earlier attempts could not be checked: {}",
                            crate::error_chain(&err)
                        ),
                    ),
                    Calling::none(),
                ),
            },
        )
    }

    async fn check_calls(
        &self,
        action: &Action,
        verdict: &Verdict,
        claim: bool,
        apart: bool,
    ) -> Result<(Verdict, Calling), AttestError> {
        if action.verb.is_read()
            || matches!(verdict.decision, Decision::Refuse | Decision::Recorded)
        {
            return Ok((verdict.clone(), Calling::none()));
        }
        let window = verdict.dedupe.as_ref().map(Dedupe::window);
        let request = CallClaim {
            digest: action_digest(action)?,
            action_id: action.id.clone(),
            owner: liveness::this_process().to_owned(),
            dedupe: window,
        };
        let mut calling = Calling {
            digest: Some(request.digest.clone()),
            claimed: false,
            with_intent: None,
            keep: window.unwrap_or_default(),
        };
        let claim = claim && verdict.decision == Decision::Act;
        if claim && !apart {
            // Claimed with the intent, on the same terms, without a look first: a digest
            // held by then is found there, and the call decided again, claiming apart.
            calling.with_intent = Some(request);
            return Ok((verdict.clone(), calling));
        }
        let mut replacing: Option<String> = None;
        // One takeover at most: an open call found after it is a live racer's.
        for _ in 0..2 {
            let held = if claim {
                let (asked, over) = (request.clone(), replacing.clone());
                let check = self
                    .on_ledger(move |ledger| ledger.claim_call(&asked, over.as_deref()))
                    .await
                    .map_err(|err| AttestError::NotRecorded(Box::new(err)))?;
                match check {
                    CallCheck::Claimed => {
                        calling.claimed = true;
                        return Ok((verdict.clone(), calling));
                    }
                    CallCheck::Held(held) => held,
                }
            } else {
                let digest = request.digest.clone();
                match self
                    .on_ledger(move |ledger| ledger.held_call(&digest, window))
                    .await?
                {
                    None => return Ok((verdict.clone(), calling)),
                    Some(held) => held,
                }
            };
            let (action_id, owner, since) = match held {
                HeldCall::Ran { seq, at, .. } => {
                    let ago = SystemTime::now().duration_since(at).unwrap_or_default();
                    let duplicate = match &verdict.dedupe {
                        Some(dedupe) => dedupe.duplicate(verdict, seq, ago),
                        None => return Err(AttestError::Internal("a duplicate without a window")),
                    };
                    return Ok((duplicate, calling));
                }
                HeldCall::Open {
                    action_id,
                    owner,
                    since,
                } => (action_id, owner, since),
            };
            if !claim || replacing.is_some() {
                return Ok((asked(verdict, in_flight(&action_id)), calling));
            }
            match self.earlier(action, &action_id, &owner).await? {
                Earlier::Free => replacing = Some(action_id),
                Earlier::Finished { seq } => match &verdict.dedupe {
                    Some(dedupe) => {
                        let ago = SystemTime::now().duration_since(since).unwrap_or_default();
                        return Ok((dedupe.duplicate(verdict, seq, ago), calling));
                    }
                    None => replacing = Some(action_id),
                },
                Earlier::Ran { intent, seq } => {
                    let why = format!(
                        "an earlier attempt of the same call (intent seq {intent}) had no recorded \
                         outcome; read back from the vendor, it ran (recorded at seq {seq}): a \
                         person decides whether it runs again"
                    );
                    return Ok((asked(verdict, why), calling));
                }
                Earlier::Unknown(why) => return Ok((asked(verdict, why), calling)),
            }
        }
        Ok((asked(verdict, in_flight("another retry")), calling))
    }

    /// What became of the earlier attempt `earlier_id`, left open by `owner`.
    async fn earlier(
        &self,
        action: &Action,
        earlier_id: &str,
        owner: &str,
    ) -> Result<Earlier, AttestError> {
        if !liveness::is_gone(owner) {
            return Ok(Earlier::Unknown(in_flight(earlier_id)));
        }
        let id = earlier_id.to_owned();
        let rows = self.on_ledger(move |ledger| rows_of(ledger, &id)).await?;
        let finished = rows
            .iter()
            .find(|(_, r)| r.execution.status != INTENT && r.execution.status != "pending");
        if let Some((seq, record)) = finished {
            // Its outcome is recorded after all.
            return Ok(match record.execution.status.as_str() {
                "ok" => Earlier::Finished { seq: *seq },
                _ => Earlier::Free,
            });
        }
        let intent = match rows.into_iter().find(|(_, r)| r.execution.status == INTENT) {
            // Its process died before its intent was recorded: a write never runs
            // without one, so it did not run.
            None => return Ok(Earlier::Free),
            Some((seq, record)) => IntentRow { seq, record },
        };
        let unknown = |why: &str| {
            Earlier::Unknown(format!(
                "an earlier attempt of the same call (intent seq {}) has no recorded outcome and \
                 its process is gone; {why}: whether it ran is unknown",
                intent.seq
            ))
        };
        let Some(readback) = self.readback.as_deref() else {
            return Ok(unknown("no read-back is configured to look the record up"));
        };
        let found = match read_outcome(action, readback).await {
            None => {
                return Ok(unknown(
                    "no read-back recipe can look the record up from the call",
                ))
            }
            Some(ReadOutcome::Unknown(why)) => {
                return Ok(unknown(&format!("the read-back could not tell ({why})")))
            }
            Some(ReadOutcome::Ran(verification)) => Found::Ran(verification),
            Some(ReadOutcome::NotRun) => Found::NotRun,
        };
        let ran = matches!(found, Found::Ran(_));
        let record = found_outcome(&intent, found, FoundBy::ReadBack);
        let (decision, reasons) = (decision_of(&record), record.reasons.clone());
        let row = self.append(record).await?;
        if !ran {
            self.key_follows(&intent.record, None).await;
            return Ok(Earlier::Free);
        }
        let seq = row.seq;
        let receipt = Receipt::new(&intent.record.action_id, row, decision, reasons);
        self.key_follows(&intent.record, Some(&receipt)).await;
        let id = earlier_id.to_owned();
        self.on_ledger(move |ledger| ledger.forget_call(&id))
            .await?;
        Ok(Earlier::Ran {
            intent: intent.seq,
            seq,
        })
    }

    /// A keyed retry found its key's first call (`first`, of the same `digest`: the key
    /// claim computed it) still open. If that call's
    /// process is gone, it is reconciled as an unkeyed retry of the same call would
    /// reconcile it ([`Attest::earlier`]: read back from the vendor), and the key follows
    /// what was found ([`Attest::key_follows`]). True: something was found, so the key
    /// is worth claiming again; false: the first call may still be running, or nobody can
    /// tell.
    pub(super) async fn reconcile_keyed(
        &self,
        action: &Action,
        digest: &str,
        first: &str,
    ) -> Result<bool, AttestError> {
        let digest = digest.to_owned();
        let held = self
            .on_ledger(move |ledger| ledger.held_call(&digest, None))
            .await?;
        let Some(HeldCall::Open {
            action_id, owner, ..
        }) = held
        else {
            return Ok(false);
        };
        if action_id != first || !liveness::is_gone(&owner) {
            return Ok(false);
        }
        Ok(match self.earlier(action, first, &owner).await? {
            Earlier::Ran { .. } | Earlier::Free => true,
            Earlier::Finished { .. } | Earlier::Unknown(_) => false,
        })
    }

    /// Takes back a claim made by the check, for a call that will not run now (a window
    /// crossed after it: the call claims its digest again if a person approves it).
    pub(super) async fn unclaim(&self, action_id: &str, calling: &mut Calling) {
        // A claim still to ride with the intent: a call that runs after a person
        // approved it claims whatever holds the digest.
        calling.with_intent = None;
        if calling.claimed {
            self.finish_calling(action_id, calling, None).await;
            calling.claimed = false;
        }
    }

    /// Records how the call holding the digest ended: it ran (its outcome at `ran`), or
    /// not. Its outcome row is written already: a table that cannot be written is
    /// logged, and a retry then finds the call open and reads its outcome row.
    pub(super) async fn finish_calling(
        &self,
        action_id: &str,
        calling: &Calling,
        ran: Option<u64>,
    ) {
        let Some(digest) = calling.digest.clone() else {
            return;
        };
        let (id, keep) = (action_id.to_owned(), calling.keep);
        if let Err(err) = self
            .on_ledger(move |ledger| ledger.finish_call(&digest, &id, ran.map(|seq| (seq, keep))))
            .await
        {
            tracing::warn!(error = %crate::error_chain(&err), "a call digest was not finished");
        }
    }

    /// Marks an action reported after it ran (a coding agent's hook, `record` in the
    /// bindings) as run at `seq`, for the dedupe window of the rule it matches: a repeat
    /// of it is then a duplicate. Its row is written already: a table that cannot be
    /// written is logged, and the record stands.
    pub(super) async fn dedupe_recorded(&self, action: &Action, seq: u64) {
        if action.verb.is_read() {
            return;
        }
        let Some(window) = self
            .policy
            .evaluate(action)
            .ok()
            .and_then(|verdict| verdict.dedupe)
            .map(|dedupe| dedupe.window())
        else {
            return;
        };
        let Ok(digest) = action_digest(action) else {
            return;
        };
        let claim = CallClaim {
            digest: digest.clone(),
            action_id: action.id.clone(),
            owner: liveness::this_process().to_owned(),
            dedupe: None,
        };
        let id = action.id.clone();
        let marked = self
            .on_ledger(move |ledger| {
                ledger.take_call(&claim)?;
                ledger.finish_call(&digest, &id, Some((seq, window)))
            })
            .await;
        if let Err(err) = marked {
            tracing::warn!(error = %crate::error_chain(&err), "a recorded action was not marked for dedupe");
        }
    }

    /// Records a person's answer about the open intent at `seq`: it ran, or it did not
    /// (`attest intents resolve`), as `approver` through `channel`. A retry of the same
    /// call is then decided afresh. `Err(why)` inside: `seq` is not an open intent.
    pub async fn resolve_intent(
        &self,
        seq: u64,
        ran: bool,
        approver: &str,
        channel: &str,
    ) -> Result<Result<Receipt, String>, AttestError> {
        let intent = match self
            .on_ledger(move |ledger| crate::intents::open_intent_at(ledger, seq))
            .await?
        {
            Ok(intent) => intent,
            Err(why) => return Ok(Err(why)),
        };
        let found = if ran {
            Found::Ran(attest_ledger::Verification {
                level: crate::verification::Level::AttestedOnly.as_str().to_owned(),
                method: "none".to_owned(),
                matched: None,
                evidence: Default::default(),
            })
        } else {
            Found::NotRun
        };
        let by = FoundBy::Person {
            approver: approver.to_owned(),
            channel: channel.to_owned(),
        };
        let record = found_outcome(&intent, found, by);
        let decision = decision_of(&record);
        let reasons = record.reasons.clone();
        let row = self.append(record).await?;
        let id = intent.record.action_id.clone();
        self.on_ledger(move |ledger| ledger.forget_call(&id))
            .await?;
        let mut receipt = Receipt::new(&intent.record.action_id, row, decision, reasons);
        receipt.approver = Some(approver.to_owned());
        self.key_follows(&intent.record, ran.then_some(&receipt))
            .await;
        Ok(Ok(receipt))
    }
}

/// The decision a found outcome's row records (an approved call's was asked about).
pub(super) fn decision_of(record: &Record) -> Decision {
    match record.decision.as_str() {
        "ask" => Decision::Ask,
        _ => Decision::Act,
    }
}

/// `verdict`, asked about (a refusal stays one), with `why`.
fn asked(verdict: &Verdict, why: String) -> Verdict {
    let mut asked = verdict.clone();
    if asked.decision == Decision::Act {
        asked.decision = Decision::Ask;
    }
    asked.rules_fired.push(RETRY_RULE.to_owned());
    asked.reasons.push(why);
    asked.windows.clear();
    asked
}

fn in_flight(earlier: &str) -> String {
    format!(
        "an earlier attempt of the same call ({earlier}) has no recorded outcome and may still \
         be running: whether it ran is unknown"
    )
}

/// Every row of the action `action_id`, with its seq, oldest first.
pub(super) fn rows_of(
    ledger: &attest_ledger::Ledger,
    action_id: &str,
) -> Result<Vec<(u64, Record)>, attest_ledger::LedgerError> {
    let filter = attest_ledger::Filter {
        action_id: Some(action_id.to_owned()),
        ..attest_ledger::Filter::default()
    };
    let mut seqs: Vec<u64> = ledger
        .list_filtered(&filter, 64)?
        .into_iter()
        .map(|row| row.seq)
        .collect();
    seqs.sort_unstable();
    let mut rows = Vec::with_capacity(seqs.len());
    ledger.for_each_row_at(&seqs, |row| {
        if let Ok(record) = serde_json::from_slice::<Record>(row.body) {
            rows.push((row.seq, record));
        }
        Ok(())
    })?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use attest_ledger::{Ledger, LedgerOptions};
    use attest_policy::{PolicyEngine, Verb};
    use serde_json::json;

    use crate::{AutoGate, Gate, Outcome};

    use super::*;

    const DEDUPE: &str = "dedupe: {window: 60s}
policies:
  - name: refunds
    match: {system: stripe, verb: pay}
    decision: act
    dedupe: {window: 10m, decision: refuse}
  - name: rest
    match: {}
    decision: act
";

    fn attest(dir: &tempfile::TempDir, policy: &str, gate: impl Gate + 'static) -> Attest {
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        Attest::builder()
            .ledger(ledger)
            .policy(PolicyEngine::from_yaml(policy, "p.yaml").unwrap())
            .gate(gate)
            .build()
            .unwrap()
    }

    fn send(to: &str) -> Action {
        Action::new("gmail", Verb::Send).with_params(json!({"to": to, "body": "hi"}))
    }

    /// Runs `action` through `attest`; the tool counts how often it ran.
    async fn run(attest: &Attest, action: Action, ran: &AtomicUsize) -> Outcome<serde_json::Value> {
        attest
            .call(action)
            .run(|_| async {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, crate::ToolError>(json!({"id": "m_1"}))
            })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_same_call_again_within_the_window_is_asked_about_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let attest = attest(&dir, DEDUPE, AutoGate::reject("ops"));
        let Outcome::Ran { receipt: first, .. } = run(&attest, send("a@x.io"), &ran).await else {
            panic!("the first call runs")
        };
        let Outcome::Rejected { receipt, .. } = run(&attest, send("a@x.io"), &ran).await else {
            panic!("the same call again is asked about, and this gate rejects")
        };
        assert_eq!(receipt.decision, Decision::Ask);
        let reason = receipt.reasons.last().unwrap();
        assert!(
            reason.starts_with(&format!("the same call ran at seq {}, ", first.seq))
                && reason.ends_with(" s ago (dedupe window 60s)"),
            "{reason}"
        );
        // Another call is not the same call.
        assert!(matches!(
            run(&attest, send("b@x.io"), &ran).await,
            Outcome::Ran { .. }
        ));
        // A rule's own window may refuse.
        let pay = || Action::new("stripe", Verb::Pay).with_params(json!({"amount": 5}));
        assert!(matches!(
            run(&attest, pay(), &ran).await,
            Outcome::Ran { .. }
        ));
        let Outcome::Refused { receipt } = run(&attest, pay(), &ran).await else {
            panic!("the refunds rule refuses a duplicate")
        };
        assert_eq!(receipt.decision, Decision::Refuse);
        assert!(receipt
            .reasons
            .last()
            .unwrap()
            .contains("dedupe window 10m"));
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        // A person's approval runs the duplicate.
        let approving = Attest::builder()
            .ledger(std::sync::Arc::clone(attest.ledger()))
            .policy(PolicyEngine::from_yaml(DEDUPE, "p.yaml").unwrap())
            .gate(AutoGate::approve("ann"))
            .build()
            .unwrap();
        assert!(matches!(
            run(&approving, send("a@x.io"), &ran).await,
            Outcome::Ran { .. }
        ));
        assert_eq!(ran.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_recorded_write_makes_its_repeat_a_duplicate_for_a_hook() {
        let dir = tempfile::tempdir().unwrap();
        let attest = attest(&dir, DEDUPE, AutoGate::reject("ops"));
        let receipt = attest
            .record(send("a@x.io"), Some(&json!({"id": "m_1"})))
            .await
            .unwrap();
        // A coding agent's hook asks before the tool runs: the repeat is a duplicate.
        let verdict = attest.verdict_now(&send("a@x.io")).await;
        assert_eq!(verdict.decision, Decision::Ask);
        assert!(
            verdict
                .reasons
                .last()
                .unwrap()
                .starts_with(&format!("the same call ran at seq {}", receipt.seq)),
            "{:?}",
            verdict.reasons
        );
        assert_eq!(
            attest.verdict_now(&send("b@x.io")).await.decision,
            Decision::Act
        );
    }

    #[tokio::test]
    async fn without_dedupe_the_same_call_runs_again() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let policy = "policies:\n  - name: all\n    match: {}\n    decision: act\n";
        let attest = attest(&dir, policy, AutoGate::reject("ops"));
        for _ in 0..3 {
            assert!(matches!(
                run(&attest, send("a@x.io"), &ran).await,
                Outcome::Ran { .. }
            ));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        // Nothing is kept for a call that ran without a window.
        let digest = action_digest(&send("a@x.io")).unwrap();
        assert_eq!(attest.ledger().held_call(&digest, None).unwrap(), None);
    }

    /// Leaves an intent open: the call is cleared and its tool never answers (the
    /// pipeline is dropped mid-call, as a killed process would leave it).
    async fn leave_open(attest: &Attest, action: Action) {
        let attest = attest.clone();
        let call = crate::handoff(move |tool| async move { attest.call(action).run(tool).await });
        let Ok(cleared) = call.cleared().await else {
            panic!("the call clears")
        };
        drop(cleared);
    }

    /// A process name that is gone: a child that ran and ended.
    fn gone() -> String {
        let me = liveness::this_process();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let boot = me.split(':').nth(1).unwrap_or("unknown");
        format!("linux:{boot}:{pid}:1")
    }

    #[tokio::test]
    async fn an_open_intent_blocks_a_retry_until_a_person_resolves_it() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let policy = "policies:\n  - name: all\n    match: {}\n    decision: act\n";
        let attest = attest(&dir, policy, AutoGate::reject("ops"));
        leave_open(&attest, send("a@x.io")).await;
        let open = crate::open_intents(attest.ledger(), 1).unwrap();
        let [intent] = open.as_slice() else {
            panic!("one open intent: {open:?}")
        };
        // Its process (this one) is alive: the retry asks, saying the outcome is unknown.
        let Outcome::Rejected { receipt, .. } = run(&attest, send("a@x.io"), &ran).await else {
            panic!("a retry of an open call is asked about")
        };
        assert!(
            receipt
                .reasons
                .last()
                .unwrap()
                .contains("may still be running: whether it ran is unknown"),
            "{:?}",
            receipt.reasons
        );
        // Its process gone, and no recipe: still unknown, still asked.
        let digest = action_digest(&send("a@x.io")).unwrap();
        let dead = CallClaim {
            digest: digest.clone(),
            action_id: intent.action_id.clone(),
            owner: gone(),
            dedupe: None,
        };
        attest.ledger().take_call(&dead).unwrap();
        if liveness::is_gone(&dead.owner) {
            let Outcome::Rejected { receipt, .. } = run(&attest, send("a@x.io"), &ran).await else {
                panic!("without a recipe the retry asks")
            };
            let reason = receipt.reasons.last().unwrap();
            assert!(
                reason.contains(&format!("intent seq {}", intent.seq))
                    && reason.contains("no read-back is configured"),
                "{reason}"
            );
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        // A person says it did not run: the intent is closed, and the retry runs.
        let Ok(receipt) = attest
            .resolve_intent(intent.seq, false, "ann", "cli")
            .await
            .unwrap()
        else {
            panic!("an open intent resolves")
        };
        assert_eq!(receipt.approver.as_deref(), Some("ann"));
        assert!(crate::open_intents(attest.ledger(), 1).unwrap().is_empty());
        let again = attest
            .resolve_intent(intent.seq, true, "ann", "cli")
            .await
            .unwrap();
        assert!(
            matches!(&again, Err(why) if why.contains("is not open")),
            "{again:?}"
        );
        assert!(matches!(
            run(&attest, send("a@x.io"), &ran).await,
            Outcome::Ran { .. }
        ));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_resolved_intent_settles_its_idempotency_key() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let policy = "policies:\n  - name: all\n    match: {}\n    decision: act\n";
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        let attest = Attest::builder()
            .ledger(ledger)
            .policy(PolicyEngine::from_yaml(policy, "p.yaml").unwrap())
            .gate(AutoGate::reject("ops"))
            .idempotency(crate::IdempotencyOptions::new(
                Duration::from_secs(3600),
                Duration::from_millis(50),
            ))
            .build()
            .unwrap();
        let keyed = |to: &str, key: &str| {
            let (attest, action, key) = (attest.clone(), send(to), key.to_owned());
            let ran = &ran;
            async move {
                attest
                    .call(action)
                    .idempotency_key(key)
                    .run(|_| async move {
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, crate::ToolError>(json!({"id": "m_2"}))
                    })
                    .await
            }
        };
        for (key, ran_before) in [("k-ran", true), ("k-not-run", false)] {
            let to = format!("{key}@x.io");
            let attest_c = attest.clone();
            let (action, key_c) = (send(&to), key.to_owned());
            let call = crate::handoff(move |tool| async move {
                attest_c.call(action).idempotency_key(key_c).run(tool).await
            });
            let Ok(cleared) = call.cleared().await else {
                panic!("the call clears")
            };
            drop(cleared);
            let open = crate::open_intents(attest.ledger(), 1).unwrap();
            let intent = open.last().unwrap().seq;
            // Its outcome unknown: a retry with the key is refused, never run.
            assert!(
                matches!(
                    keyed(&to, key).await,
                    Err(AttestError::Idempotency(
                        crate::IdempotencyError::InUse { .. }
                    ))
                ),
                "{key}"
            );
            let Ok(resolved) = attest
                .resolve_intent(intent, ran_before, "ann", "cli")
                .await
                .unwrap()
            else {
                panic!("an open intent resolves")
            };
            let before = ran.load(Ordering::SeqCst);
            match keyed(&to, key).await.unwrap() {
                // It ran: the key gives its outcome, the resolution's row.
                Outcome::Replayed { receipt, .. } if ran_before => {
                    assert_eq!(receipt.seq, resolved.seq);
                    assert_eq!(ran.load(Ordering::SeqCst), before);
                }
                // It did not: the key is free, and the retry runs once.
                Outcome::Ran { .. } if !ran_before => {
                    assert_eq!(ran.load(Ordering::SeqCst), before + 1);
                }
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_claim_whose_process_died_before_its_intent_frees_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let ran = AtomicUsize::new(0);
        let policy = "policies:\n  - name: all\n    match: {}\n    decision: act\n";
        let attest = attest(&dir, policy, AutoGate::reject("ops"));
        let dead = CallClaim {
            digest: action_digest(&send("a@x.io")).unwrap(),
            action_id: "never-recorded".to_owned(),
            owner: gone(),
            dedupe: None,
        };
        attest.ledger().claim_call(&dead, None).unwrap();
        let expect_run = liveness::is_gone(&dead.owner);
        let outcome = run(&attest, send("a@x.io"), &ran).await;
        assert_eq!(outcome.ran(), expect_run, "{outcome:?}");
    }

    #[tokio::test]
    async fn a_claim_that_rode_with_its_intent_and_lost_the_race_is_decided_again() {
        let dir = tempfile::tempdir().unwrap();
        let policy = "policies:\n  - name: all\n    match: {}\n    decision: act\n";
        let attest = attest(&dir, policy, AutoGate::reject("ops"));
        // B is decided first: its claim is to ride with its intent.
        let b = attest.prepare(send("a@x.io")).unwrap();
        let Ok(super::super::Gated::Run(cleared)) = attest.clear(b, false).await else {
            panic!("B clears")
        };
        let (b, cleared) = *cleared;
        // A, the same call, records its intent (and claims the digest) before B does.
        leave_open(&attest, send("a@x.io")).await;
        // B's intent finds the digest taken: nothing of B is written or claimed.
        let super::super::Opening::Raced(b) = attest.open(b, cleared, None).await else {
            panic!("B's claim with its intent finds A's")
        };
        let open = crate::open_intents(attest.ledger(), 1).unwrap();
        assert_eq!(open.len(), 1, "A's intent only: {open:?}");
        // Decided again, claiming apart: A is open (its process alive), so B is asked
        // about, and the gate rejects it; it never runs.
        match attest.clear(*b, true).await {
            Ok(super::super::Gated::Ended(ended)) => assert!(
                matches!(ended, super::super::Ended::Rejected { .. }),
                "B is asked about and rejected"
            ),
            _ => panic!("B is asked about"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_call_made_at_once_by_many_tasks_runs_once() {
        let dir = tempfile::tempdir().unwrap();
        let policy = "policies:\n  - name: all\n    match: {}\n    decision: act\n";
        let attest = attest(&dir, policy, AutoGate::reject("ops"));
        let ran = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (attest, ran, barrier) = (attest.clone(), ran.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    attest
                        .call(send("a@x.io"))
                        .run(|_| async move {
                            ran.fetch_add(1, Ordering::SeqCst);
                            // Still running while the others are decided.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            Ok::<_, crate::ToolError>(json!({"id": "m_1"}))
                        })
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap());
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{outcomes:?}");
        let rejected = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Rejected { .. }))
            .count();
        assert_eq!(rejected, 15, "{outcomes:?}");
        // One intent, one outcome: nothing of the calls that did not run but their asks.
        assert!(crate::open_intents(attest.ledger(), 1).unwrap().is_empty());
    }
}

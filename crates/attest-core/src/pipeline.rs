//! The pipeline every action goes through: policy, gate, act, verify, record.

use std::future::Future;
use std::sync::Arc;

use attest_ledger::{Appended, Confirm, Ledger, Record};
use attest_policy::{Action, Decision, Policy, PolicyError, RiskTierPolicy, Verdict};
use serde_json::Value;

use crate::gate::{Gate, GateDecision, RejectGate};
use crate::record::{to_record, Outcome};
use crate::verification::{acknowledges, verify, CustomCheck, Level};
use crate::{AttestError, Receipt, ToolError};

/// The governance layer: wraps tool calls so each one is decided, run, verified and
/// recorded.
///
/// Cheap to clone; clones share the ledger, policy and gate.
#[derive(Clone)]
pub struct Attest {
    ledger: Arc<Ledger>,
    policy: Arc<dyn Policy>,
    gate: Arc<dyn Gate>,
    agent: Option<String>,
    actor: Option<String>,
}

impl std::fmt::Debug for Attest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attest")
            .field("ledger", &self.ledger)
            .field("agent", &self.agent)
            .field("actor", &self.actor)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Attest`]. Only the ledger is required: the policy defaults to
/// [`RiskTierPolicy`] and the gate to [`RejectGate`] (nobody to ask, so `ask` rejects).
#[derive(Default)]
pub struct AttestBuilder {
    ledger: Option<Arc<Ledger>>,
    policy: Option<Arc<dyn Policy>>,
    gate: Option<Arc<dyn Gate>>,
    agent: Option<String>,
    actor: Option<String>,
}

impl AttestBuilder {
    /// The ledger every action is recorded in.
    pub fn ledger(mut self, ledger: impl Into<Arc<Ledger>>) -> Self {
        self.ledger = Some(ledger.into());
        self
    }

    /// The policy that decides.
    pub fn policy(mut self, policy: impl Policy + 'static) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// The policy that decides, shared.
    pub fn shared_policy(mut self, policy: Arc<dyn Policy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// The gate that answers `ask`.
    pub fn gate(mut self, gate: impl Gate + 'static) -> Self {
        self.gate = Some(Arc::new(gate));
        self
    }

    /// The agent recorded for actions that name none.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The actor recorded for actions that name none.
    pub fn actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Builds the pipeline; fails only when no ledger was given.
    pub fn build(self) -> Result<Attest, AttestError> {
        Ok(Attest {
            ledger: self
                .ledger
                .ok_or(AttestError::Internal("an Attest needs a ledger"))?,
            policy: self.policy.unwrap_or_else(|| Arc::new(RiskTierPolicy)),
            gate: self.gate.unwrap_or_else(|| Arc::new(RejectGate)),
            agent: self.agent,
            actor: self.actor,
        })
    }
}

/// Proof that policy (and, when asked, a gate) let this action through. Only
/// [`Attest::clear`] makes one, so no path can run a tool without deciding first.
struct Cleared {
    verdict: Verdict,
    confirm: Option<Confirm>,
    approver: Option<String>,
}

/// A prepared action: id and defaults filled in, params hashed.
struct Prepared {
    action: Action,
    params_hash: String,
}

impl Attest {
    /// Starts building an `Attest`.
    pub fn builder() -> AttestBuilder {
        AttestBuilder::default()
    }

    /// The ledger actions are recorded in.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// Decides `action`, runs `execute` with its params if allowed, verifies the result
    /// by its shape, and records the outcome.
    ///
    /// A refused or rejected action never runs; refusal, rejection and a failed tool
    /// are each recorded and returned as an [`AttestError`] carrying the receipt.
    pub async fn run<F, Fut>(&self, action: Action, execute: F) -> Result<Receipt, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>>,
    {
        self.run_inner(action, execute, None).await
    }

    /// Like [`Attest::run`], with the caller's own check of the result.
    pub async fn run_checked<F, Fut>(
        &self,
        action: Action,
        execute: F,
        check: &CustomCheck,
    ) -> Result<Receipt, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>>,
    {
        self.run_inner(action, execute, Some(check)).await
    }

    async fn run_inner<F, Fut>(
        &self,
        action: Action,
        execute: F,
        check: Option<&CustomCheck>,
    ) -> Result<Receipt, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>>,
    {
        let prepared = self.prepare(action)?;
        let cleared = self.clear(&prepared).await?;
        let Prepared {
            action,
            params_hash,
        } = prepared;
        let outcome = execute(action.params.clone()).await;
        let (record, level) = match &outcome {
            Ok(result) => {
                let (level, verification) = verify(&action, result, check).await;
                let ran = Outcome::Ran(result, verification);
                (
                    self.to_record(&action, params_hash, &cleared, ran)?,
                    Some(level),
                )
            }
            Err(source) => {
                let message = source.to_string();
                let failed = Outcome::Failed(&message);
                (
                    self.to_record(&action, params_hash, &cleared, failed)?,
                    None,
                )
            }
        };
        let appended = self.append(record).await?;
        let mut receipt = Receipt::new(
            &action.id,
            appended,
            cleared.verdict.decision,
            cleared.verdict.reasons,
        );
        receipt.approver = cleared.approver;
        receipt.level = level;
        match outcome {
            Ok(result) => {
                receipt.result = Some(result);
                Ok(receipt)
            }
            Err(source) => Err(AttestError::ToolFailed {
                receipt: Box::new(receipt),
                source,
            }),
        }
    }

    fn to_record(
        &self,
        action: &Action,
        params_hash: String,
        cleared: &Cleared,
        outcome: Outcome<'_>,
    ) -> Result<Record, AttestError> {
        to_record(
            action,
            params_hash,
            &cleared.verdict,
            cleared.verdict.decision,
            cleared.confirm.clone(),
            outcome,
        )
    }

    /// Records an action that already happened, outside Attest (decision `recorded`).
    ///
    /// `result`, when given, is hashed and checked for an acknowledgement; it is not stored.
    pub async fn record(
        &self,
        action: Action,
        result: Option<&Value>,
    ) -> Result<Receipt, AttestError> {
        let Prepared {
            action,
            params_hash,
        } = self.prepare(action)?;
        let tier = action.base_risk();
        let verdict = Verdict::new(
            Decision::Recorded,
            tier,
            "recorded",
            "reported after it happened; not decided by policy",
        );
        let level = match result {
            Some(result) if acknowledges(result) => Level::Acknowledged,
            _ => Level::AttestedOnly,
        };
        let verification = attest_ledger::Verification {
            level: level.as_str().to_owned(),
            method: if result.is_some() { "ack" } else { "none" }.to_owned(),
            matched: None,
            evidence: Default::default(),
        };
        let record = to_record(
            &action,
            params_hash,
            &verdict,
            Decision::Recorded,
            None,
            Outcome::Recorded(result, verification),
        )?;
        let appended = self.append(record).await?;
        let mut receipt = Receipt::new(&action.id, appended, Decision::Recorded, verdict.reasons);
        receipt.level = Some(level);
        Ok(receipt)
    }

    fn prepare(&self, mut action: Action) -> Result<Prepared, AttestError> {
        if action.id.is_empty() {
            action.id = uuid::Uuid::new_v4().to_string();
        }
        if action.agent.is_none() {
            action.agent.clone_from(&self.agent);
        }
        if action.actor.is_none() {
            action.actor.clone_from(&self.actor);
        }
        let params_hash = action.params_hash()?;
        Ok(Prepared {
            action,
            params_hash,
        })
    }

    /// Policy, then the gate when policy asks. Refusals and rejections are recorded here
    /// and end the call; anything else yields the proof that the action may run.
    async fn clear(&self, prepared: &Prepared) -> Result<Cleared, AttestError> {
        let action = &prepared.action;
        let verdict = match self.policy.evaluate(action) {
            Ok(verdict) if verdict.decision != Decision::Recorded => verdict,
            Ok(_) => undecided(
                action,
                "policy answered `recorded`, which is not a decision",
            ),
            Err(err) => undecided(action, &policy_failure(&err)),
        };
        match verdict.decision {
            Decision::Act => Ok(Cleared {
                verdict,
                confirm: None,
                approver: None,
            }),
            Decision::Ask => match self.gate.decide(action, &verdict).await {
                GateDecision::Approve { approver, channel } => Ok(Cleared {
                    verdict,
                    confirm: Some(Confirm {
                        outcome: "approved".to_owned(),
                        approver: Some(approver.clone()),
                        channel: Some(channel),
                        note: None,
                    }),
                    approver: Some(approver),
                }),
                GateDecision::Reject {
                    approver,
                    channel,
                    note,
                } => {
                    let confirm = Confirm {
                        outcome: "rejected".to_owned(),
                        approver: Some(approver.clone()),
                        channel: Some(channel),
                        note,
                    };
                    let receipt = self
                        .record_not_run(prepared, &verdict, Some(confirm))
                        .await?;
                    let mut receipt = Box::new(receipt);
                    receipt.approver = Some(approver.clone());
                    Err(AttestError::Rejected { approver, receipt })
                }
            },
            Decision::Refuse | Decision::Recorded => {
                let receipt = self.record_not_run(prepared, &verdict, None).await?;
                Err(AttestError::Refused {
                    receipt: Box::new(receipt),
                })
            }
        }
    }

    async fn record_not_run(
        &self,
        prepared: &Prepared,
        verdict: &Verdict,
        confirm: Option<Confirm>,
    ) -> Result<Receipt, AttestError> {
        let record = to_record(
            &prepared.action,
            prepared.params_hash.clone(),
            verdict,
            verdict.decision,
            confirm,
            Outcome::NotRun,
        )?;
        let appended = self.append(record).await?;
        Ok(Receipt::new(
            &prepared.action.id,
            appended,
            verdict.decision,
            verdict.reasons.clone(),
        ))
    }

    async fn append(&self, record: Record) -> Result<Appended, AttestError> {
        let ledger = Arc::clone(&self.ledger);
        // SQLite blocks (and at `full` durability, syncs): keep it off the async workers.
        tokio::task::spawn_blocking(move || ledger.append_owned(record))
            .await
            .map_err(AttestError::Writer)?
            .map_err(AttestError::Ledger)
    }
}

/// A refusal standing in for a policy that could not decide: fail closed.
fn undecided(action: &Action, why: &str) -> Verdict {
    Verdict::new(
        Decision::Refuse,
        action.base_risk(),
        "policy-error",
        format!("policy could not decide, so the action does not run: {why}"),
    )
}

fn policy_failure(err: &PolicyError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

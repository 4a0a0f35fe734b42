//! The pipeline every action goes through: policy, gate, act, verify, record.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use attest_ledger::{Appended, CallStep, Confirm, Ledger, LedgerError, Record, Shadow};
use attest_policy::{Action, Decision, Policy, RiskTierPolicy, Verdict};
use serde::Serialize;
use serde_json::Value;
use tracing::Instrument;

use crate::approvals::{apply_edits, may_decide, ApprovalStore};
use crate::detect::{OperationIds, Registry};
use crate::gate::{Gate, GateDecision, RejectGate};
use crate::personal::PersonalSettings;
use crate::protected::ProtectedSet;
use crate::record::{to_record, RowOutcome};
use crate::telemetry;
use crate::verification::{acknowledges, verify, CustomCheck, Level, ReadBack};
use crate::{error_chain, AttestError, Outcome, Receipt};

/// The governance layer: wraps tool calls so each one is decided, run, verified and
/// recorded.
///
/// Cheap to clone; clones share the ledger, policy and gate.
#[derive(Clone)]
pub struct Attest {
    ledger: Arc<Ledger>,
    /// The thread that appends to `ledger` for every clone of this `Attest`.
    writer: LedgerWriter,
    policy: Arc<dyn Policy>,
    gate: Arc<dyn Gate>,
    agent: Option<String>,
    actor: Option<String>,
    run_id: Option<String>,
    readback: Option<Arc<ReadBack>>,
    /// The approval store, opened on first use unless the builder was given one.
    approvals: Arc<OnceLock<Arc<ApprovalStore>>>,
    /// The detection registry the surfaces detect with (default: the shared built-in one).
    registry: Option<Arc<Registry>>,
    /// OpenAPI operation ids: what an HTTP call's operation is named.
    operations: Arc<OperationIds>,
    /// Shadow mode: policy's verdicts are recorded, not enforced.
    shadow: bool,
    /// How idempotency keys behave.
    idempotency: IdempotencyOptions,
    /// Personal fields sealed under their subject's key (`personal:`).
    personal: Option<Arc<PersonalSettings>>,
    /// The governor's own files, refused to every write.
    protected: Option<Arc<ProtectedSet>>,
    /// The approval inbox's base URL, for the link a held call hands out.
    pub(crate) inbox: Option<Arc<str>>,
}

pub(crate) mod call;
mod grants;
pub(crate) mod handoff;
mod history;
mod hooked;
mod import;
pub(crate) mod keys;
mod resume;
mod retries;
mod windows;
mod writer;
use call::Ended;
use grants::Granted;
pub use grants::GRANT_RULE;
pub use import::{ImportBatch, ImportItem};
use keys::{Called, Claimed, HeldKey, IdempotencyOptions, Keyed};
pub use resume::Decided;
use retries::Calling;
pub use retries::RETRY_RULE;
use windows::Counting;
use writer::LedgerWriter;

impl std::fmt::Debug for Attest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attest")
            .field("ledger", &self.ledger)
            .field("agent", &self.agent)
            .field("actor", &self.actor)
            .field("shadow", &self.shadow)
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
    run_id: Option<String>,
    readback: Option<Arc<ReadBack>>,
    approvals: Option<Arc<ApprovalStore>>,
    registry: Option<Arc<Registry>>,
    operations: Option<Arc<OperationIds>>,
    shadow: bool,
    idempotency: IdempotencyOptions,
    protected: Option<Arc<ProtectedSet>>,
    inbox: Option<Arc<str>>,
    personal: Option<Arc<PersonalSettings>>,
}

impl AttestBuilder {
    /// The approval inbox's base URL (`http://127.0.0.1:8321`): held calls hand out the
    /// link to their request's page under it ([`Attest::request_link`]).
    pub fn inbox(mut self, base: impl Into<String>) -> Self {
        self.inbox = Some(Arc::from(base.into()));
        self
    }

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

    /// The gate that answers `ask`, shared.
    pub fn shared_gate(mut self, gate: Arc<dyn Gate>) -> Self {
        self.gate = Some(gate);
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

    /// The run recorded for actions that name none (a session, a job): `--run`, or one
    /// generated per session by a server.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// Reads writes back from their systems of record (the first rung of the
    /// verification ladder). Without it, results are checked by their shape only.
    pub fn readback(mut self, readback: impl Into<Arc<ReadBack>>) -> Self {
        self.readback = Some(readback.into());
        self
    }

    /// The approval store that resumed calls and [`Attest::decide`] use (by
    /// default, one opened on the ledger's file when first needed).
    pub fn approvals(mut self, store: Arc<ApprovalStore>) -> Self {
        self.approvals = Some(store);
        self
    }

    /// The detection registry the surfaces detect calls with ([`Attest::registry`]): the
    /// built-in one plus the user's files and configured hosts. Default:
    /// [`Registry::shared`].
    pub fn registry(mut self, registry: impl Into<Arc<Registry>>) -> Self {
        self.registry = Some(registry.into());
        self
    }

    /// The OpenAPI operation ids HTTP calls are described with ([`Attest::action`]).
    pub fn operations(mut self, operations: impl Into<Arc<OperationIds>>) -> Self {
        self.operations = Some(operations.into());
        self
    }

    /// Shadow mode (`mode: shadow`, `--shadow`, `shadow=True`): every call is decided as
    /// usual and runs as if policy said `act`; what policy decided is recorded in the
    /// row's `shadow` field. A policy that cannot decide still refuses.
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// How idempotency keys behave ([`crate::Call::idempotency_key`]): their lifetime
    /// and how long a retry waits for a running first call.
    pub fn idempotency(mut self, options: IdempotencyOptions) -> Self {
        self.idempotency = options;
        self
    }

    /// Personal fields ([`PersonalSettings`]): each row's named fields are sealed under
    /// its subject's key before it is written; a row that cannot be sealed is not
    /// written, and its action does not run.
    pub fn personal(mut self, settings: Option<PersonalSettings>) -> Self {
        self.personal = settings.map(Arc::new);
        self
    }

    /// The governor's protected files ([`crate::protected`]): a call that writes one is
    /// refused whatever policy says, in shadow mode too.
    pub fn protected(mut self, set: ProtectedSet) -> Self {
        self.protected = Some(Arc::new(set));
        self
    }

    /// Builds the pipeline; fails only when no ledger was given.
    pub fn build(self) -> Result<Attest, AttestError> {
        let ledger = self
            .ledger
            .ok_or(AttestError::Internal("an Attest needs a ledger"))?;
        Ok(Attest {
            writer: LedgerWriter::start(Arc::clone(&ledger))?,
            ledger,
            policy: self.policy.unwrap_or_else(|| Arc::new(RiskTierPolicy)),
            gate: self.gate.unwrap_or_else(|| Arc::new(RejectGate)),
            agent: self.agent,
            actor: self.actor,
            run_id: self.run_id,
            readback: self.readback,
            approvals: Arc::new(self.approvals.map(OnceLock::from).unwrap_or_default()),
            registry: self.registry,
            operations: self.operations.unwrap_or_default(),
            shadow: self.shadow,
            idempotency: self.idempotency,
            protected: self.protected,
            inbox: self.inbox,
            personal: self.personal,
        })
    }
}

/// Proof that policy (and, when asked, a gate) let this action through. Only
/// [`Attest::clear`] makes one, so no path can run a tool without deciding first.
struct Cleared {
    verdict: Verdict,
    confirm: Option<Confirm>,
    approver: Option<String>,
    /// In shadow mode, the verdict policy gave and that was not enforced.
    shadow: Option<Shadow>,
    /// The budget and rate windows the call counts in when it runs.
    counting: Counting,
    /// The call's digest among recent calls, claimed when it runs.
    calling: Calling,
    /// The grant it runs under, as its rows name it.
    grant: Option<attest_ledger::Grant>,
}

/// What the gate step leaves: an action cleared to run (or opened: its intent
/// recorded), a stored request whose answer decides, or an end recorded without running.
enum Gated {
    Run(Box<(Prepared, Cleared)>),
    Open(Box<Opened>),
    Stored(String),
    Ended(Ended),
}

/// A cleared action about to run: counted, its intent (for a write) recorded.
struct Opened {
    prepared: Prepared,
    cleared: Cleared,
    intent: Option<Appended>,
}

/// How opening a cleared action ended.
enum Opening {
    Open(Box<Opened>),
    /// Its digest's claim, riding with the intent, found the digest taken since the
    /// check: nothing was written or counted.
    Raced(Box<Prepared>),
    Failed(AttestError),
}

/// What became of a tool's answer on its way to the ledger, when it was not a JSON value.
enum Unseen {
    /// The tool failed, with this message.
    Failed(String),
    /// The tool returned an output with no JSON form (a map with non-string keys, a
    /// `Serialize` that fails): recorded as a failed execution.
    NotJson(serde_json::Error),
}

impl std::fmt::Display for Unseen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unseen::Failed(message) => f.write_str(message),
            Unseen::NotJson(err) => write!(f, "the tool's output has no JSON form: {err}"),
        }
    }
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

    /// The detection registry calls are detected with (the one given to the builder,
    /// else [`Registry::shared`]).
    pub fn registry(&self) -> &Registry {
        self.registry
            .as_deref()
            .unwrap_or_else(|| Registry::shared())
    }

    /// The OpenAPI operation ids HTTP calls are described with.
    pub fn operations(&self) -> &OperationIds {
        &self.operations
    }

    /// The protected set, when one is configured.
    pub fn protected(&self) -> Option<&ProtectedSet> {
        self.protected.as_deref()
    }

    /// The read-back drivers, when any are configured.
    pub fn readback(&self) -> Option<&ReadBack> {
        self.readback.as_deref()
    }

    /// The ledger actions are recorded in.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// Decides a new action and takes it to its end: refused, rejected, held, or run,
    /// verified and recorded. What `attest.call(action).run(tool)` does.
    pub(crate) async fn run_action<F, Fut, T, E, K>(
        &self,
        action: Action,
        tool: F,
        check: Option<&CustomCheck>,
        key: Option<Keyed<'_>>,
        keep: K,
    ) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
        K: FnOnce(&Outcome<T, E>) -> Option<Vec<u8>>,
    {
        let prepared = self.prepare(action)?;
        let span = telemetry::action_span(&prepared.action);
        async move {
            // A retry of a call that ran under the same key ends here (see `keys`).
            let held = match self.claim_key(key, &prepared.action).await? {
                Claimed::Go(held) => held,
                Claimed::Replay(first) => return Ok(self.replay(&prepared, *first).await?.widen()),
            };
            let called = Called::default();
            let tool = |params| {
                called.mark();
                tool(params)
            };
            let mut gated = self.clear(prepared, false).await;
            // A claim that rode with the intent found the digest taken meanwhile (a racing
            // retry): nothing was written, and the call is decided again, claiming apart.
            if let Ok(Gated::Run(cleared)) = gated {
                let (prepared, cleared) = *cleared;
                gated = match self.open(prepared, cleared, held.as_ref()).await {
                    Opening::Open(opened) => Ok(Gated::Open(opened)),
                    Opening::Raced(prepared) => self.clear(*prepared, true).await,
                    Opening::Failed(err) => Err(err),
                };
            }
            let mut result = match gated {
                Ok(Gated::Open(opened)) => self.run_opened(*opened, tool, check).await,
                Ok(Gated::Run(cleared)) => {
                    let (prepared, cleared) = *cleared;
                    self.execute(prepared, cleared, tool, check, held.as_ref())
                        .await
                }
                Ok(Gated::Stored(id)) => {
                    match self.in_store(move |store| store.get_by_id(&id)).await {
                        Ok(request) => self.finish(request, None, None, tool, check).await,
                        Err(err) => Err(err),
                    }
                }
                Ok(Gated::Ended(ended)) => Ok(ended.widen()),
                Err(err) => Err(err),
            };
            self.settle_key(held, &called, &mut result, keep).await;
            result
        }
        .instrument(span)
        .await
    }

    /// Runs a cleared action, verifies the result and records the outcome.
    async fn execute<F, Fut, T, E>(
        &self,
        prepared: Prepared,
        cleared: Cleared,
        tool: F,
        check: Option<&CustomCheck>,
        held: Option<&HeldKey>,
    ) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
    {
        match self.open(prepared, cleared, held).await {
            Opening::Open(opened) => self.run_opened(*opened, tool, check).await,
            Opening::Failed(err) => Err(err),
            // Only a claim the check left to ride with the intent races, and only a call
            // cleared by policy alone has one.
            Opening::Raced(_) => Err(AttestError::Internal(
                "an approved call's claim of its digest was refused",
            )),
        }
    }

    /// Before a cleared action runs: counted in its windows, its intent recorded with the
    /// claim of its digest.
    async fn open(&self, prepared: Prepared, cleared: Cleared, held: Option<&HeldKey>) -> Opening {
        // Counted in its windows before it runs (a budget is spent by what ran, and a
        // window that cannot be written stops the call).
        if let Err(err) = self
            .count_before_run(&prepared.action.id, &cleared.counting)
            .await
        {
            return Opening::Failed(err);
        }
        let action = &prepared.action;
        // Commit point before the call: a write runs only once the ledger durably holds a
        // row naming it, and its digest claimed in the same commit (a retry of it then
        // finds it open). A crash or a full disk after this leaves an intent without an
        // outcome, which `attest verify` and `attest ledger` report.
        let intent = if action.verb.is_read() {
            None
        } else {
            let record = self.to_record(
                action,
                prepared.params_hash.clone(),
                &cleared,
                RowOutcome::Intent,
            );
            let mut record = match record {
                Ok(record) => record,
                Err(err) => {
                    self.release(&action.id, &cleared.counting).await;
                    return Opening::Failed(err);
                }
            };
            // Recorded as every free-text field is: a credential shape in a key is redacted.
            record.idempotency_key = held.map(|held| attest_policy::redact_text(&held.key));
            let step = cleared.calling.intent_step(&action.id);
            let row = match self.append_with(record, step).await {
                Ok(row) => row,
                Err(err) => {
                    // It does not run: what it counted and claimed is taken back (a claim
                    // that rode with the intent was not written either).
                    self.release(&action.id, &cleared.counting).await;
                    if let AttestError::Ledger(LedgerError::CallHeld(_)) = err {
                        return Opening::Raced(Box::new(prepared));
                    }
                    if cleared.calling.claimed_apart() {
                        self.finish_calling(&action.id, &cleared.calling, None)
                            .await;
                    }
                    return Opening::Failed(AttestError::NotRecorded(Box::new(err)));
                }
            };
            self.note_intent(held, row.seq).await;
            Some(row)
        };
        Opening::Open(Box::new(Opened {
            prepared,
            cleared,
            intent,
        }))
    }

    /// Runs an opened action, verifies the result and records the outcome.
    async fn run_opened<F, Fut, T, E>(
        &self,
        opened: Opened,
        tool: F,
        check: Option<&CustomCheck>,
    ) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
    {
        let Opened {
            prepared: Prepared {
                action,
                params_hash,
            },
            cleared,
            intent,
        } = opened;
        let run = telemetry::step("run");
        let answer = tool(action.params.clone()).instrument(run.clone()).await;
        run.record(
            "attest.status",
            if answer.is_ok() { "ok" } else { "failed" },
        );
        // The pipeline sees the output's JSON form only, to hash and check it.
        let seen = match &answer {
            Ok(output) => serde_json::to_value(output).map_err(Unseen::NotJson),
            Err(error) => Err(Unseen::Failed(error.to_string())),
        };
        let (record, level) = match &seen {
            Ok(result) => {
                // Before the append: no ledger lock is held while the vendor is read.
                let (level, verification) = self.verified(&action, result, check).await;
                let ran = RowOutcome::Ran(result, verification);
                (
                    self.to_record(&action, params_hash, &cleared, ran)?,
                    Some(level),
                )
            }
            Err(unseen) => {
                let message = unseen.to_string();
                let failed = RowOutcome::Failed(&message);
                (
                    self.to_record(&action, params_hash, &cleared, failed)?,
                    None,
                )
            }
        };
        // The tool has run: if its outcome cannot be recorded, the intent row stands for
        // it and the caller still gets the tool's answer, with a warning. With the
        // outcome, in its commit: a call that ran blocks its duplicates for its dedupe
        // window; a failed one frees its digest (an outcome not recorded leaves it open:
        // its intent stands for it, and a retry asks).
        let finish = cleared.calling.outcome_step(&action.id, seen.is_ok());
        let (appended, warning) = match (self.append_with(record, finish).await, intent) {
            (Ok(appended), _) => (appended, None),
            (Err(err), Some(intent)) => {
                let warning = format!(
                    "the action ran, but its outcome could not be recorded ({}); intent row seq {} \
                     stands for it. Do not retry: it already ran",
                    error_chain(&err),
                    intent.seq
                );
                (intent, Some(warning))
            }
            (Err(err), None) => return Err(err),
        };
        let mut receipt = Receipt::new(
            &action.id,
            appended,
            cleared.verdict.decision,
            cleared.verdict.reasons,
        );
        receipt.warning = warning;
        receipt.approver = cleared.approver;
        receipt.level = level;
        match (answer, seen) {
            (_, Err(Unseen::NotJson(source))) => Err(AttestError::OutputNotJson {
                receipt: Box::new(receipt),
                source,
            }),
            (Ok(output), _) => Ok(Outcome::Ran { output, receipt }),
            (Err(error), _) => Ok(Outcome::Failed { error, receipt }),
        }
    }

    /// `result` verified by the ladder (read-back, custom check, acknowledgement), in
    /// its own telemetry step.
    async fn verified(
        &self,
        action: &Action,
        result: &Value,
        check: Option<&CustomCheck>,
    ) -> (Level, attest_ledger::Verification) {
        let step = telemetry::step("verify");
        let (level, verification) = verify(action, result, check, self.readback.as_deref())
            .instrument(step.clone())
            .await;
        step.record("attest.level", level.as_str());
        (level, verification)
    }

    fn to_record(
        &self,
        action: &Action,
        params_hash: String,
        cleared: &Cleared,
        outcome: RowOutcome<'_>,
    ) -> Result<Record, AttestError> {
        let mut record = to_record(
            action,
            params_hash,
            &cleared.verdict,
            cleared.verdict.decision,
            cleared.confirm.clone(),
            outcome,
        )?;
        record.shadow.clone_from(&cleared.shadow);
        record.grant.clone_from(&cleared.grant);
        Ok(record)
    }

    /// Records an action that already happened, outside Attest (decision `recorded`).
    ///
    /// `result`, when given, is hashed, never stored, and verified as a governed call's
    /// result is: read back from the vendor where a driver knows the action, else checked
    /// for an acknowledgement. It ran, so it counts in the budget and rate windows of the
    /// `limit:` rules it matches (a batch of imported history does not: see
    /// [`Attest::record_batch`]).
    pub async fn record(
        &self,
        action: Action,
        result: Option<&Value>,
    ) -> Result<Receipt, AttestError> {
        let (record, receipt, action) = self.recorded(action, result).await?;
        let appended = self.append(record).await?;
        self.count_recorded(&action).await;
        self.dedupe_recorded(&action, appended.seq).await;
        Ok(receipt.with_row(appended))
    }

    /// Records many actions that already happened, in one transaction: all or none.
    ///
    /// Each item is an action and, optionally, the result it had (hashed, never stored,
    /// verified as in [`Attest::record`] before the transaction begins). History brought
    /// in this way is not counted in budget and rate windows.
    pub async fn record_batch(
        &self,
        items: Vec<(Action, Option<Value>)>,
    ) -> Result<Vec<Receipt>, AttestError> {
        let mut records = Vec::with_capacity(items.len());
        let mut receipts = Vec::with_capacity(items.len());
        for (action, result) in items {
            let (record, receipt, _) = self.recorded(action, result.as_ref()).await?;
            records.push(record);
            receipts.push(receipt);
        }
        self.append_recorded(records, receipts).await
    }

    /// Appends `records` in one transaction and names each receipt's row.
    async fn append_recorded(
        &self,
        records: Vec<Record>,
        receipts: Vec<Receipt>,
    ) -> Result<Vec<Receipt>, AttestError> {
        let ledger = Arc::clone(&self.ledger);
        let personal = self.personal.clone();
        let appended = tokio::task::spawn_blocking(move || {
            let mut records = records;
            if let Some(personal) = &personal {
                for record in &mut records {
                    personal.seal(&ledger, record)?;
                }
            }
            ledger.append_batch(&records)
        })
        .await
        .map_err(AttestError::Writer)??;
        Ok(receipts
            .into_iter()
            .zip(appended)
            .map(|(receipt, row)| receipt.with_row(row))
            .collect())
    }

    /// The record, the receipt (without its row) and the action with this pipeline's
    /// defaults filled in, of an action reported after the fact.
    async fn recorded(
        &self,
        action: Action,
        result: Option<&Value>,
    ) -> Result<(Record, Receipt, Action), AttestError> {
        let prepared = self.prepare(action)?;
        let judged = match result {
            // Before the append: no ledger lock is held while the vendor is read.
            Some(result) => self.verified(&prepared.action, result, None).await,
            None => acknowledgement(None),
        };
        self.recorded_as(prepared, result, judged)
    }

    /// The record and receipt of an imported action: its result, when the source had
    /// one, is checked for an acknowledgement only (an import reads no vendor).
    pub(crate) fn imported(
        &self,
        action: Action,
        result: Option<&Value>,
    ) -> Result<(Record, Receipt, Action), AttestError> {
        self.recorded_as(self.prepare(action)?, result, acknowledgement(result))
    }

    fn recorded_as(
        &self,
        prepared: Prepared,
        result: Option<&Value>,
        (level, verification): (Level, attest_ledger::Verification),
    ) -> Result<(Record, Receipt, Action), AttestError> {
        let Prepared {
            action,
            params_hash,
        } = prepared;
        let tier = action.base_risk();
        let verdict = Verdict::new(
            Decision::Recorded,
            tier,
            "recorded",
            "reported after it happened; not decided by policy",
        );
        let record = to_record(
            &action,
            params_hash,
            &verdict,
            Decision::Recorded,
            None,
            RowOutcome::Recorded(result, verification),
        )?;
        let mut receipt = Receipt::unwritten(&action.id, Decision::Recorded, verdict.reasons);
        receipt.level = Some(level);
        Ok((record, receipt, action))
    }

    fn prepare(&self, mut action: Action) -> Result<Prepared, AttestError> {
        if action.id.is_empty() {
            // Time-ordered (UUIDv7): the ledger's action id lookups grow at their end
            // instead of at a random place, one page per filing rather than one per id.
            action.id = uuid::Uuid::now_v7().to_string();
        }
        if action.agent.is_none() {
            action.agent.clone_from(&self.agent);
        }
        if action.actor.is_none() {
            action.actor.clone_from(&self.actor);
        }
        if action.run_id.is_none() {
            action.run_id.clone_from(&self.run_id);
        }
        if let Some(readback) = &self.readback {
            readback.fill_path_params(&mut action);
        }
        let params_hash = crate::record::hash_value(&action.params)?;
        Ok(Prepared {
            action,
            params_hash,
        })
    }

    /// Policy, then the gate when policy asks. Refusals and rejections are recorded here
    /// and end the call; anything else yields the proof that the action may run (or
    /// names the stored request whose answer decides).
    /// `apart`: a digest found free is claimed now, not with the intent.
    async fn clear(&self, prepared: Prepared, apart: bool) -> Result<Gated, AttestError> {
        let step = telemetry::step("policy");
        let verdict = self
            .evaluate_gathered(&prepared.action)
            .instrument(step.clone())
            .await;
        let asked_by = verdict.rules_fired.clone();
        // Retries and duplicates: checked against the earlier calls of the same digest,
        // which a call that would run now claims (in shadow mode: when it runs).
        let (verdict, mut calling) = self
            .deduped(&prepared.action, verdict, !self.shadow, apart)
            .await?;
        // Budgets and rates: checked against what ran, and counted when the call would
        // run now (in shadow mode nothing is enforced: it counts when it runs).
        let (verdict, counting) = self.windowed(&prepared.action, verdict, !self.shadow).await;
        if verdict.decision != Decision::Act {
            // A window crossed after the digest was claimed: it is claimed if it runs.
            self.unclaim(&prepared.action.id, &mut calling).await;
        }
        let (verdict, shadow) = self.shadowed(verdict);
        // Bounded grants: only for what the rules asked about (not a crossed window, a
        // duplicate or a hold), never for a refusal.
        let (verdict, granted) = if verdict.decision == Decision::Ask
            && !verdict.hold
            && verdict.rules_fired == asked_by
        {
            self.granted(&prepared.action, verdict, &asked_by).await
        } else {
            (verdict, None)
        };
        telemetry::decided(&step, verdict.decision.as_str());
        if let Some(Granted {
            approver,
            note,
            claim,
        }) = granted
        {
            let mut counting = counting;
            // Counted already; taken back with the rest if the call does not run.
            counting.also(claim);
            return Ok(Gated::Run(Box::new((
                prepared,
                Cleared {
                    verdict,
                    confirm: Some(confirm("approved", &approver, GRANT_RULE.to_owned(), None)),
                    approver: Some(approver),
                    shadow: None,
                    counting,
                    calling,
                    grant: Some(note),
                },
            ))));
        }
        match verdict.decision {
            Decision::Act => Ok(Gated::Run(Box::new((
                prepared,
                Cleared {
                    verdict,
                    confirm: None,
                    approver: None,
                    shadow,
                    counting,
                    calling,
                    grant: None,
                },
            )))),
            Decision::Ask => {
                let answer = self
                    .gate
                    .decide(&prepared.action, &verdict)
                    .instrument(telemetry::step("gate"))
                    .await;
                self.settle(prepared, verdict, (counting, calling), answer)
                    .await
            }
            Decision::Refuse | Decision::Recorded => {
                let receipt = self.record_not_run(&prepared, &verdict, None).await?;
                Ok(Gated::Ended(Ended::Refused { receipt }))
            }
        }
    }

    /// Policy's verdict on `action` as [`Attest::call`] would see it (this `Attest`'s
    /// agent, actor and run filled in), without asking, running or recording anything.
    /// A policy that fails refuses. A surface that lets some calls by unrecorded (the
    /// gateway's reads) asks this first, so that an organisation's `blocked` rule still
    /// refuses them.
    ///
    /// In shadow mode this is the verdict enforced: `act` (rule `shadow`) for what policy
    /// would ask about or refuse.
    ///
    /// Budget and rate windows (a rule's `limit:`) are not checked here: they need the
    /// ledger ([`Attest::verdict_now`] reads them), and a call is checked against them
    /// when it is made. A verdict that still carries windows (`verdict.windows`) is not
    /// a plain `act`: a surface must not let such a call by unrecorded.
    pub fn verdict(&self, action: &Action) -> Verdict {
        match self.prepare(action.clone()) {
            Ok(prepared) => self.enforced(&prepared.action).0,
            Err(err) => undecided(action, &error_chain(&err)),
        }
    }

    /// [`Attest::verdict`] with its budget and rate windows read from the ledger now: a
    /// crossed window's verdict applies (the call is not counted; it counts when it is
    /// made through [`Attest::call`]). For a door whose agent runs the call itself once
    /// Attest allows it (a coding agent's hook, before the tool runs). A window that
    /// cannot be read refuses.
    pub async fn verdict_now(&self, action: &Action) -> Verdict {
        match self.prepare(action.clone()) {
            Ok(prepared) => {
                let verdict = self.evaluate_gathered(&prepared.action).await;
                let verdict = match self.deduped(&prepared.action, verdict, false, false).await {
                    Ok((verdict, _)) => verdict,
                    Err(err) => undecided(&prepared.action, &error_chain(&err)),
                };
                let (verdict, _) = self.windowed(&prepared.action, verdict, false).await;
                self.shadowed(verdict).0
            }
            Err(err) => undecided(action, &error_chain(&err)),
        }
    }

    /// [`Attest::verdict_now`] for a door whose agent runs the call itself once Attest
    /// allows it and which records it afterwards through [`Attest::call`] under the same
    /// action id (a coding agent's hook): a verdict of `act` also counts the call in its
    /// budget and rate windows now, in the same atomic step as the check, so of two
    /// agents racing at a cap only one is allowed. `action.id` is given one when empty;
    /// the row made after the call must carry it, and then checks and counts nothing
    /// again. A call counted here that then does not run stays counted (the window errs
    /// strict). In shadow mode nothing is counted before the call.
    pub async fn verdict_counted(&self, action: &mut Action) -> CountedVerdict {
        if action.id.is_empty() {
            action.id = uuid::Uuid::now_v7().to_string();
        }
        match self.prepare(action.clone()) {
            Ok(prepared) => {
                let verdict = self.evaluate_gathered(&prepared.action).await;
                let (verdict, counting) =
                    self.windowed(&prepared.action, verdict, !self.shadow).await;
                CountedVerdict {
                    verdict: self.shadowed(verdict).0,
                    counted: counting.counted_now(),
                }
            }
            Err(err) => CountedVerdict {
                verdict: undecided(action, &error_chain(&err)),
                counted: false,
            },
        }
    }

    /// The verdict to enforce and, in shadow mode, the policy verdict it stands in for
    /// (windows not checked: see [`Attest::verdict`]).
    fn enforced(&self, action: &Action) -> (Verdict, Option<Shadow>) {
        self.shadowed(self.evaluate(action))
    }

    /// `verdict` to enforce and, in shadow mode, the verdict it stands in for.
    fn shadowed(&self, verdict: Verdict) -> (Verdict, Option<Shadow>) {
        if self.shadow {
            crate::shadow::unenforced(verdict)
        } else {
            (verdict, None)
        }
    }

    /// Policy's verdict; a policy that fails or answers `recorded` refuses (fail closed).
    /// A write to a protected path is refused before policy is asked.
    fn evaluate(&self, action: &Action) -> Verdict {
        if let Some(protected) = &action.extra.protected {
            return Verdict::new(
                Decision::Refuse,
                attest_policy::Risk::VeryHigh,
                crate::shadow::PROTECTED_RULE,
                format!(
                    "it writes {protected}: the governor's own files are never written by \
                     the agent it governs"
                ),
            );
        }
        self.judged(action, self.policy.evaluate(action))
    }

    /// What policy answered, as the verdict to enforce: an error or `recorded` refuses.
    fn judged(
        &self,
        action: &Action,
        answered: Result<Verdict, attest_policy::PolicyError>,
    ) -> Verdict {
        match answered {
            Ok(verdict) if verdict.decision != Decision::Recorded => verdict,
            Ok(_) => undecided(
                action,
                "policy answered `recorded`, which is not a decision",
            ),
            Err(err) => undecided(action, &error_chain(&err)),
        }
    }

    /// Acts on a gate's answer to an `ask`.
    async fn settle(
        &self,
        prepared: Prepared,
        verdict: Verdict,
        (counting, calling): (Counting, Calling),
        answer: GateDecision,
    ) -> Result<Gated, AttestError> {
        match answer {
            GateDecision::Approve { approver, channel } => {
                let refusal = if verdict.hold {
                    Some("held for unfilled placeholders: only an edited action may run")
                } else if !may_decide(&verdict, &approver) {
                    Some("not a listed approver for this action")
                } else if verdict.quorum.is_some() {
                    Some(ONE_IS_NOT_A_QUORUM)
                } else {
                    None
                };
                if let Some(note) = refusal {
                    let note = Some(note.to_owned());
                    return self
                        .reject(&prepared, &verdict, approver, channel, note)
                        .await;
                }
                let confirm = confirm("approved", &approver, channel, None);
                Ok(Gated::Run(Box::new((
                    prepared,
                    Cleared {
                        verdict,
                        confirm: Some(confirm),
                        approver: Some(approver),
                        shadow: None,
                        counting,
                        calling,
                        grant: None,
                    },
                ))))
            }
            GateDecision::Reject {
                approver,
                channel,
                note,
            } => {
                self.reject(&prepared, &verdict, approver, channel, note)
                    .await
            }
            GateDecision::Edit {
                approver,
                channel,
                edits,
                note,
            } => {
                let refusal = if verdict.quorum.is_some() {
                    Some(ONE_IS_NOT_A_QUORUM)
                } else if !may_decide(&verdict, &approver) {
                    Some("not a listed approver for this action")
                } else {
                    None
                };
                if let Some(note) = refusal {
                    let note = Some(note.to_owned());
                    return self
                        .reject(&prepared, &verdict, approver, channel, note)
                        .await;
                }
                let edited = match apply_edits(&prepared.action.id, &prepared.action, &edits) {
                    Ok(edited) => edited,
                    Err(err) => {
                        let note = Some(err.to_string());
                        return self
                            .reject(&prepared, &verdict, approver, channel, note)
                            .await;
                    }
                };
                let confirm = confirm("edited", &approver, channel, note);
                let prepared = self.prepare(edited)?;
                Ok(
                    match self.recheck(prepared, confirm, approver, &[]).await? {
                        Ok(cleared) => Gated::Run(Box::new(cleared)),
                        Err(ended) => Gated::Ended(ended),
                    },
                )
            }
            GateDecision::Pending { id, token } => {
                let receipt = self.record_ask(&prepared, &verdict, &id).await?;
                Ok(Gated::Ended(Ended::Held { id, token, receipt }))
            }
            GateDecision::Stored { id } => Ok(Gated::Stored(id)),
        }
    }

    /// Policy again, for an edited or approved action: a refusal stands, placeholders
    /// must be gone, and the approver must be listed for the edited action too. `Err`
    /// inside: refused, and recorded so.
    async fn recheck(
        &self,
        prepared: Prepared,
        confirm: Confirm,
        approver: String,
        escalated_to: &[String],
    ) -> Result<Result<(Prepared, Cleared), Ended>, AttestError> {
        // A window crossed is named in the row; the approved call counts when it runs,
        // over the cap if it must.
        let evaluated = self.evaluate_gathered(&prepared.action).await;
        // A duplicate is named in the row (a `refuse` window refuses); an earlier
        // attempt left open is named too, and the approved call claims the digest when
        // it runs.
        let (evaluated, calling) = self
            .deduped(&prepared.action, evaluated, false, false)
            .await?;
        let (mut verdict, counting) = self.windowed(&prepared.action, evaluated, false).await;
        let refusal = match verdict.decision {
            Decision::Refuse | Decision::Recorded => Some(None),
            _ if verdict.hold => Some(Some("the edited action still holds unfilled placeholders")),
            // Someone the request was escalated to decides as a listed approver.
            _ if !may_decide(&verdict, &approver)
                && !escalated_to
                    .iter()
                    .any(|person| person.eq_ignore_ascii_case(&approver)) =>
            {
                Some(Some("the approver is not listed for the edited action"))
            }
            _ => None,
        };
        if let Some(extra) = refusal {
            verdict.decision = Decision::Refuse;
            if let Some(reason) = extra {
                verdict.reasons.push(reason.to_owned());
            }
            let receipt = self
                .record_not_run(&prepared, &verdict, Some(confirm))
                .await?;
            let mut receipt = receipt;
            receipt.approver = Some(approver);
            return Ok(Err(Ended::Refused { receipt }));
        }
        // A person was asked: the row says `ask`, with the edited action's reasons.
        verdict.decision = Decision::Ask;
        Ok(Ok((
            prepared,
            Cleared {
                verdict,
                confirm: Some(confirm),
                approver: Some(approver),
                shadow: None,
                counting,
                calling,
                grant: None,
            },
        )))
    }

    /// Records a rejection and ends the call.
    async fn reject(
        &self,
        prepared: &Prepared,
        verdict: &Verdict,
        approver: String,
        channel: String,
        note: Option<String>,
    ) -> Result<Gated, AttestError> {
        let confirm = confirm("rejected", &approver, channel, note);
        let receipt = self
            .record_not_run(prepared, verdict, Some(confirm))
            .await?;
        let mut receipt = receipt;
        receipt.approver = Some(approver.clone());
        Ok(Gated::Ended(Ended::Rejected { approver, receipt }))
    }

    /// Records the ask of a request left pending (execution `pending`), and links the
    /// row to the request.
    async fn record_ask(
        &self,
        prepared: &Prepared,
        verdict: &Verdict,
        id: &str,
    ) -> Result<Receipt, AttestError> {
        let record = to_record(
            &prepared.action,
            prepared.params_hash.clone(),
            verdict,
            Decision::Ask,
            None,
            RowOutcome::Pending,
        )?;
        let appended = self.append(record).await?;
        let receipt = Receipt::new(
            &prepared.action.id,
            appended,
            Decision::Ask,
            verdict.reasons.clone(),
        );
        let id = id.to_owned();
        let row = (receipt.seq, receipt.entry_hash.clone(), receipt.ts.clone());
        self.in_store(move |store| store.set_ask_row(&id, (row.0, &row.1, &row.2)))
            .await?;
        Ok(receipt)
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
            RowOutcome::NotRun,
        )?;
        let appended = self.append(record).await?;
        Ok(Receipt::new(
            &prepared.action.id,
            appended,
            verdict.decision,
            verdict.reasons.clone(),
        ))
    }

    /// `record` with its personal fields sealed, when `personal:` is configured: the key
    /// is read (or made) off the async workers, as an append is.
    async fn sealed(&self, record: Record) -> Result<Record, AttestError> {
        let Some(personal) = self.personal.clone() else {
            return Ok(record);
        };
        let ledger = Arc::clone(&self.ledger);
        tokio::task::spawn_blocking(move || {
            let mut record = record;
            personal.seal(&ledger, &mut record).map(|()| record)
        })
        .await
        .map_err(AttestError::Writer)?
        .map_err(AttestError::Ledger)
    }

    async fn append(&self, record: Record) -> Result<Appended, AttestError> {
        self.append_with(record, None).await
    }

    /// Appends `record` with a call-digest step that commits in its transaction.
    async fn append_with(
        &self,
        record: Record,
        step: Option<CallStep>,
    ) -> Result<Appended, AttestError> {
        let record = self.sealed(record).await?;
        // SQLite blocks (and at `full` durability, syncs): the writer thread does it, off
        // the async workers, group-committing concurrent actions.
        let span = telemetry::append_span(&record);
        let appended = self
            .writer
            .append(record, step)
            .instrument(span.clone())
            .await;
        if let Ok(row) = &appended {
            telemetry::appended(&span, row);
        }
        appended
    }
}

fn confirm(outcome: &str, approver: &str, channel: String, note: Option<String>) -> Confirm {
    // A gate that answers with no approver's name stands in for someone Attest did not
    // authenticate (a coding agent's own permission prompt): the row names nobody and
    // says so, rather than recording a made-up name as if a person had been identified.
    if approver.is_empty() {
        return Confirm {
            outcome: outcome.to_owned(),
            approver: None,
            channel: Some(channel),
            note: note.or_else(|| Some(UNAUTHENTICATED.to_owned())),
            approvers: Vec::new(),
        };
    }
    Confirm {
        outcome: outcome.to_owned(),
        approver: Some(approver.to_owned()),
        channel: Some(channel),
        note,
        approvers: Vec::new(),
    }
}

/// Why a gate's one answer (a console prompt, a callback) cannot approve under a quorum:
/// only the approval store counts several distinct people.
const ONE_IS_NOT_A_QUORUM: &str =
    "the rule needs a quorum of approvers, which only the approval store (`attest serve`, `attest confirm`) counts; one answer at a prompt is not enough";

/// The note on a row whose `ask` was answered by a gate that names no approver.
pub const UNAUTHENTICATED: &str = "nobody was authenticated: the agent's own prompt decided";

/// A refusal standing in for a policy that could not decide: fail closed.
fn undecided(action: &Action, why: &str) -> Verdict {
    Verdict::new(
        Decision::Refuse,
        action.base_risk(),
        crate::shadow::POLICY_ERROR_RULE,
        format!("policy could not decide, so the action does not run: {why}"),
    )
}

/// What [`Attest::verdict_counted`] decided, and whether it counted the call in its
/// windows (only a verdict of `act` under a `limit:` rule is counted before the call).
#[derive(Debug, Clone)]
pub struct CountedVerdict {
    /// The verdict to enforce.
    pub verdict: Verdict,
    /// Whether the call is now counted in its budget and rate windows under its id.
    pub counted: bool,
}

/// How sure a result is without reading the vendor: acknowledged by its shape, or
/// attested only (no result at all: method `none`).
fn acknowledgement(result: Option<&Value>) -> (Level, attest_ledger::Verification) {
    let (level, method) = match result {
        Some(result) if acknowledges(result) => (Level::Acknowledged, "ack"),
        Some(_) => (Level::AttestedOnly, "ack"),
        None => (Level::AttestedOnly, "none"),
    };
    let verification = attest_ledger::Verification {
        level: level.as_str().to_owned(),
        method: method.to_owned(),
        matched: None,
        evidence: Default::default(),
    };
    (level, verification)
}

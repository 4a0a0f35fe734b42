//! The one call every surface makes: an action (or a held action's resume token) and the
//! tool, in; an [`Outcome`] carrying the receipt and, when the tool ran, its own output,
//! typed and unchanged, out. Normal outcomes are values; an [`AttestError`] means Attest
//! could not decide or record.

use std::convert::Infallible;
use std::future::Future;

use attest_policy::Action;
use serde::Serialize;
use serde_json::Value;

use super::keys::Keyed;
use super::Attest;
use crate::approvals::ResumeToken;
use crate::{AttestError, CustomCheck, Receipt, ToolError};

/// How a governed call ended. Each outcome carries its ledger receipt.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome<T, E = ToolError> {
    /// The tool ran and returned `output` (the tool's own value, unchanged); the receipt
    /// says how it was verified.
    Ran {
        /// What the tool returned.
        output: T,
        /// The outcome row.
        receipt: Receipt,
    },
    /// The tool ran and failed with `error` (recorded as a failed execution, the
    /// message as a hash only).
    Failed {
        /// The tool's own error.
        error: E,
        /// The outcome row.
        receipt: Receipt,
    },
    /// Policy refused; the tool did not run.
    Refused {
        /// The refusal's row.
        receipt: Receipt,
    },
    /// A person (or a gate standing in for one) rejected it; the tool did not run.
    Rejected {
        /// Who rejected it.
        approver: String,
        /// The rejection's row.
        receipt: Receipt,
    },
    /// Nobody answered before the request expired; the tool did not run.
    Expired {
        /// The approval request's id.
        id: String,
        /// The expiry's row.
        receipt: Receipt,
    },
    /// Held for a person: the same call, given `token`, runs it once they approve.
    Held {
        /// The approval request's id.
        id: String,
        /// The token that resumes the call.
        token: ResumeToken,
        /// The ask's row (execution `pending`).
        receipt: Receipt,
    },
    /// A call with the same idempotency key and the same call ran before, within the
    /// key's lifetime: this one did not run, and gets the first call's receipt (its
    /// outcome row) and, from a door that keeps one, the first response to replay
    /// (see [`Call::idempotency_key`]). An in-process caller gets no output: the tool's
    /// output is never kept.
    Replayed {
        /// The first call's receipt.
        receipt: Receipt,
        /// What the first call's door kept to replay (its response), when it kept one
        /// (within the size its door keeps).
        response: Option<Vec<u8>>,
    },
}

impl<T, E> Outcome<T, E> {
    /// The ledger receipt of this outcome.
    pub fn receipt(&self) -> &Receipt {
        match self {
            Outcome::Ran { receipt, .. }
            | Outcome::Failed { receipt, .. }
            | Outcome::Refused { receipt }
            | Outcome::Rejected { receipt, .. }
            | Outcome::Expired { receipt, .. }
            | Outcome::Held { receipt, .. }
            | Outcome::Replayed { receipt, .. } => receipt,
        }
    }

    pub(crate) fn receipt_mut(&mut self) -> Option<&mut Receipt> {
        match self {
            Outcome::Ran { receipt, .. } | Outcome::Failed { receipt, .. } => Some(receipt),
            _ => None,
        }
    }

    /// The ledger receipt, taken out of the outcome.
    pub fn into_receipt(self) -> Receipt {
        match self {
            Outcome::Ran { receipt, .. }
            | Outcome::Failed { receipt, .. }
            | Outcome::Refused { receipt }
            | Outcome::Rejected { receipt, .. }
            | Outcome::Expired { receipt, .. }
            | Outcome::Held { receipt, .. }
            | Outcome::Replayed { receipt, .. } => receipt,
        }
    }

    /// Whether the tool was called (it ran, and returned or failed).
    pub fn ran(&self) -> bool {
        matches!(self, Outcome::Ran { .. } | Outcome::Failed { .. })
    }

    /// Why the tool did not run, in a sentence, when it did not (refused, rejected,
    /// expired, held); `None` when it ran.
    pub fn why_not_run(&self) -> Option<String> {
        match self {
            Outcome::Ran { .. } | Outcome::Failed { .. } => None,
            Outcome::Refused { receipt } => {
                Some(format!("refused by policy: {}", receipt.reasons.join("; ")))
            }
            Outcome::Rejected { approver, .. } => Some(format!("rejected by {approver}")),
            Outcome::Expired { id, .. } => Some(format!(
                "approval request {id} expired before anyone decided"
            )),
            Outcome::Held { id, .. } => {
                Some(format!("waiting for a person to approve request {id}"))
            }
            Outcome::Replayed { receipt, .. } => Some(format!(
                "a call with the same idempotency key already ran (seq {}): not run again",
                receipt.seq
            )),
        }
    }

    /// The tool's output, when it ran and returned.
    pub fn output(self) -> Option<T> {
        match self {
            Outcome::Ran { output, .. } => Some(output),
            _ => None,
        }
    }
}

/// Where a call starts: a new action, or the resume token of one held for a person.
#[derive(Debug)]
pub enum Start {
    /// A new action: decided, maybe asked about, run, verified, recorded.
    Action(Box<Action>),
    /// An action held for a person: runs if they approved it (their edits applied,
    /// policy asked again), else says how it ended.
    Resume(ResumeToken),
    /// An agent retrying a held call with its token: as [`Start::Resume`], and the
    /// action presented must be the one asked about, else the call is refused with
    /// [`crate::ApprovalError::DigestMismatch`].
    Retry {
        /// The token the held call returned.
        token: ResumeToken,
        /// The action as the agent presents it again.
        action: Box<Action>,
    },
}

impl Start {
    /// An agent retrying a held call: `token`, and the action presented again.
    pub fn retry(token: &ResumeToken, action: Action) -> Start {
        Start::Retry {
            token: token.clone(),
            action: Box::new(action),
        }
    }
}

impl From<Action> for Start {
    fn from(action: Action) -> Self {
        Start::Action(Box::new(action))
    }
}

impl From<ResumeToken> for Start {
    fn from(token: ResumeToken) -> Self {
        Start::Resume(token)
    }
}

impl From<&ResumeToken> for Start {
    fn from(token: &ResumeToken) -> Self {
        Start::Resume(token.clone())
    }
}

/// One governed call being set up; [`Call::run`] makes it. Built by [`Attest::call`].
#[must_use = "a call does nothing until it is run"]
pub struct Call<'a> {
    attest: &'a Attest,
    start: Start,
    check: Option<&'a CustomCheck>,
    key: Option<String>,
    credential: Option<Vec<u8>>,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("start", &self.start)
            .field("check", &self.check)
            .field("key", &self.key)
            .field("credential", &self.credential.as_ref().map(|_| ".."))
            .finish_non_exhaustive()
    }
}

impl Attest {
    /// The one call: `attest.call(action).check(&check).run(tool).await`, or
    /// `attest.call(token)` to resume a held action with the same tool.
    ///
    /// ```
    /// use attest_core::{Attest, AutoGate, Outcome};
    /// use attest_ledger::{Ledger, LedgerOptions};
    /// use attest_policy::{Action, Verb};
    /// use serde_json::json;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default())?;
    /// let attest = Attest::builder().ledger(ledger).gate(AutoGate::approve("ops")).build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// let action = Action::new("crm", Verb::Update).with_params(json!({"id": "42"}));
    /// let outcome = runtime.block_on(
    ///     attest.call(action).run(|_params| async { Ok::<_, std::io::Error>(json!({"id": "42"})) }),
    /// )?;
    /// match outcome {
    ///     Outcome::Ran { output, receipt } => assert_eq!((output["id"].as_str(), receipt.seq), (Some("42"), 2)),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn call(&self, start: impl Into<Start>) -> Call<'_> {
        Call {
            attest: self,
            start: start.into(),
            check: None,
            key: None,
            credential: None,
        }
    }
}

impl<'a> Call<'a> {
    /// The caller's own check of the result ([`CustomCheck`]): a yes/no check, or a
    /// read-back through a connection only the caller holds.
    pub fn check(mut self, check: &'a CustomCheck) -> Self {
        self.check = Some(check);
        self
    }

    /// The caller's idempotency key (the `Idempotency-Key` header, SEP-3182's
    /// `idempotencyKey`, `idempotency_key=`): a write with a key that a call with the
    /// same action ran under, within the key's lifetime, does not run again; it ends
    /// [`Outcome::Replayed`] with the first call's receipt. The same key with another
    /// action is refused ([`crate::IdempotencyError::Mismatch`]); while the first call
    /// runs, this one waits, then replays it or is refused
    /// ([`crate::IdempotencyError::InUse`]). The key is recorded on the intent row; it
    /// is not part of what identifies the call. Reads and resumed calls ignore it.
    ///
    /// A key belongs to whoever sent it, on its method and route: the authenticated agent
    /// (`action.extra.agent_auth` other than `unauthenticated`), else the call's
    /// [`Call::credential`]. Another principal's call with the same key is its own call.
    /// A retry is decided again under today's policy: refused (and recorded so) when
    /// policy now refuses; else replayed, with a row that names the first call.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The credential the call carried (its `Authorization`, cookies, API-key headers),
    /// for a door that authenticates no agent: an idempotency key is bound to it, kept
    /// only as a fingerprint keyed with the ledger's secret. Never recorded or logged.
    pub fn credential(mut self, credential: impl Into<Vec<u8>>) -> Self {
        self.credential = Some(credential.into());
        self
    }

    /// Decides, runs `tool` with the (possibly edited) params if allowed, verifies and
    /// records. `output` is recorded as the SHA-256 of its JSON form (`T: Serialize`)
    /// and checked in that form; the caller gets it back unchanged. `Err` only when
    /// Attest could not decide or record (the ledger failed, the approval store refused
    /// a token, the output had no JSON form to record).
    pub async fn run<F, Fut, T, E>(self, tool: F) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
    {
        self.run_keeping(tool, |_| None).await
    }

    /// [`Call::run`], for a door that replays responses: when the call has an
    /// idempotency key and ran, `keep` gives the bytes to keep with the key and hand
    /// back, as [`Outcome::Replayed`]'s `response`, to a retry (`None`: keep nothing).
    pub async fn run_keeping<F, Fut, T, E, K>(
        self,
        tool: F,
        keep: K,
    ) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
        K: FnOnce(&Outcome<T, E>) -> Option<Vec<u8>>,
    {
        match self.start {
            Start::Action(action) => {
                self.attest
                    .run_action(
                        *action,
                        tool,
                        self.check,
                        self.key.as_deref().map(|key| Keyed {
                            key,
                            credential: self.credential.as_deref(),
                        }),
                        keep,
                    )
                    .await
            }
            Start::Resume(token) => {
                self.attest
                    .resume_call(&token, None, tool, self.check)
                    .await
            }
            Start::Retry { token, action } => {
                self.attest
                    .resume_call(&token, Some(*action), tool, self.check)
                    .await
            }
        }
    }
}

/// How a call ended without running its tool: an outcome that cannot be `Ran` or
/// `Failed`. The pipeline's steps before the tool return this, so they need not know the
/// tool's types; [`Outcome::widen`] gives it them.
pub(crate) type Ended = Outcome<Infallible, Infallible>;

impl Ended {
    /// The same outcome, typed for a tool with output `T` and error `E`.
    pub(crate) fn widen<T, E>(self) -> Outcome<T, E> {
        match self {
            Outcome::Ran { output, .. } => match output {},
            Outcome::Failed { error, .. } => match error {},
            Outcome::Refused { receipt } => Outcome::Refused { receipt },
            Outcome::Rejected { approver, receipt } => Outcome::Rejected { approver, receipt },
            Outcome::Expired { id, receipt } => Outcome::Expired { id, receipt },
            Outcome::Held { id, token, receipt } => Outcome::Held { id, token, receipt },
            Outcome::Replayed { receipt, response } => Outcome::Replayed { receipt, response },
        }
    }
}

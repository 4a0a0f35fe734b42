//! A governed call whose tool runs outside the pipeline's future: on another language's
//! thread (a Python function, a JavaScript callback), which cannot be called from inside
//! a Rust future. The pipeline runs until its `execute` step hands the (possibly edited)
//! params over, and waits there; the caller runs its tool and hands the answer back with
//! [`Cleared::finish`], which drives the pipeline to its end (verified and recorded).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use attest_core::{handoff, Attest, AutoGate, Cleared, Outcome};
//! use attest_ledger::{Ledger, LedgerOptions};
//! use attest_policy::{Action, Verb};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir()?;
//! let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default())?;
//! let attest = Attest::builder().ledger(ledger).gate(AutoGate::approve("ops")).build()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let action = Action::new("crm", Verb::Update).with_params(json!({"id": "42"}));
//! let call = handoff(move |tool| async move { attest.call(action).run(tool).await });
//! let cleared: Cleared = match runtime.block_on(call.cleared()) {
//!     Ok(cleared) => cleared,
//!     Err(ended) => panic!("the call did not clear: {ended:?}"),
//! };
//! // ... the caller runs its tool with `cleared.params` on its own thread ...
//! let outcome = runtime.block_on(cleared.finish(Ok(json!({"id": "42"}))))?;
//! assert!(matches!(outcome, Outcome::Ran { .. }));
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::{AttestError, Outcome, ToolError};

/// How a handed-off call ended, over the tool's answer as JSON.
pub type HandoffOutcome = Outcome<Value, ToolError>;

/// The `execute` step handed to the pipeline: it hands the params over and waits for the
/// answer.
pub type HandedTool =
    Box<dyn FnOnce(Value) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>> + Send>;

/// The pipeline of one call, suspended while its tool runs elsewhere.
type Pipeline = Pin<Box<dyn Future<Output = Result<HandoffOutcome, AttestError>> + Send>>;

/// What the `execute` step hands the caller: the params, and where to answer.
type Handover = (Value, oneshot::Sender<Result<Value, ToolError>>);

/// A governed call whose tool runs elsewhere; see [`handoff`].
pub struct Handoff {
    pipeline: Pipeline,
    handed: oneshot::Receiver<Handover>,
}

/// A call cleared to run: run the tool with [`Cleared::params`], then [`Cleared::finish`].
/// Dropped unfinished, it drops its pipeline: a write's intent row then stands without an
/// outcome, as after a crash, and `attest ledger` reports it.
pub struct Cleared {
    /// The params to run with: the call's own, or a person's edits on approval.
    pub params: Value,
    answer: oneshot::Sender<Result<Value, ToolError>>,
    pipeline: Pipeline,
}

/// Prepares the governed call `call` builds from the tool it is given (typically
/// `attest.call(start).run(tool)`), for a tool that runs outside the future.
pub fn handoff<C, Fut>(call: C) -> Handoff
where
    C: FnOnce(HandedTool) -> Fut,
    Fut: Future<Output = Result<HandoffOutcome, AttestError>> + Send + 'static,
{
    let (handover, handed) = oneshot::channel::<Handover>();
    let tool: HandedTool = Box::new(move |params| {
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            if handover.send((params, answer)).is_err() {
                return Err("the caller stopped waiting before the tool ran".into());
            }
            answered
                .await
                .unwrap_or_else(|_| Err("the tool did not answer".into()))
        })
    });
    Handoff {
        pipeline: Box::pin(call(tool)),
        handed,
    }
}

impl Handoff {
    /// Runs the pipeline until it clears the call to run, or ends without running the
    /// tool (refused, held, …; `Err(Ok(outcome))`) or could not decide (`Err(Err(..))`).
    pub async fn cleared(self) -> Result<Cleared, Result<HandoffOutcome, AttestError>> {
        let Handoff {
            mut pipeline,
            mut handed,
        } = self;
        let first = tokio::select! {
            biased;
            outcome = &mut pipeline => Err(outcome),
            handed = &mut handed => match handed {
                Ok(handover) => Ok(handover),
                // The pipeline dropped its `execute` step without calling it (a refusal):
                // it finishes without the tool.
                Err(_) => Err((&mut pipeline).await),
            },
        };
        first.map(|(params, answer)| Cleared {
            params,
            answer,
            pipeline,
        })
    }
}

impl Cleared {
    /// Hands the tool's answer (its result as JSON, or its failure) to the pipeline and
    /// runs it to its end: once the tool has run, the call ends `Ran` or `Failed`, either
    /// way with its row.
    pub async fn finish(
        self,
        answer: Result<Value, ToolError>,
    ) -> Result<HandoffOutcome, AttestError> {
        let _ = self.answer.send(answer);
        self.pipeline.await
    }
}

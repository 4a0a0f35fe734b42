//! An adapter for [rig](https://docs.rs/rig-core) agents (cargo feature `rig`).
//!
//! [`Attest::wrap_rig`] turns any rig [`Tool`](RigTool) into an [`Attested`] tool that is
//! itself a rig tool (same name, description and parameters), so it goes into an agent's
//! tool list in place of the original. Each call is described by the tool's name, as
//! [`Attest::action`] describes a framework's function call (with the pipeline's
//! configured registry), then decided, run, verified and recorded; a refusal or
//! rejection reaches the model as a refused tool result that says why, and the tool
//! never runs.
//!
//! `cargo run -p attest-core --features rig --example rig_tools` shows it offline.

use rig_core::tool::{Tool as RigTool, ToolContext, ToolExecutionError};
use serde::Serialize;
use serde_json::Value;

use crate::{Attest, AttestError, FunctionCall, Outcome, ProtocolCall, ToolError};

/// A rig tool whose calls go through an [`Attest`] pipeline.
#[derive(Debug, Clone)]
pub struct Attested<T> {
    attest: Attest,
    tool: T,
}

impl<T> Attested<T> {
    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }
}

/// Why a governed rig call did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RigToolError {
    /// The model's arguments do not fit the tool; nothing was decided or run.
    #[error("the arguments do not fit the tool: {0}")]
    Args(#[source] serde_json::Error),
    /// Refused, rejected, expired or held: the tool did not run.
    #[error("{why}; the tool did not run")]
    NotRun {
        /// Why ([`crate::Outcome::why_not_run`]).
        why: String,
    },
    /// The tool ran and failed (recorded as a failed execution).
    #[error("the tool failed")]
    Failed(#[source] ToolError),
    /// Attest could not decide or record the call (see [`AttestError`]).
    #[error(transparent)]
    Attest(#[from] AttestError),
}

impl Attest {
    /// Governs a rig tool; the result is a rig tool too.
    pub fn wrap_rig<T: RigTool>(&self, tool: T) -> Attested<T> {
        Attested {
            attest: self.clone(),
            tool,
        }
    }
}

impl<T> RigTool for Attested<T>
where
    T: RigTool,
    T::Output: Serialize + Send,
{
    const NAME: &'static str = T::NAME;
    type Args = Value;
    type Output = T::Output;
    type Error = RigToolError;

    fn description(&self) -> String {
        self.tool.description()
    }

    fn parameters(&self) -> Value {
        self.tool.parameters()
    }

    fn map_error(&self, error: Self::Error) -> ToolExecutionError {
        match &error {
            RigToolError::NotRun { .. } => ToolExecutionError::refused(error.to_string()),
            _ => ToolExecutionError::from_error(error),
        }
    }

    async fn call(
        &self,
        context: &mut ToolContext,
        args: Value,
    ) -> Result<T::Output, RigToolError> {
        let typed: T::Args = serde_json::from_value(args.clone()).map_err(RigToolError::Args)?;
        let action = self.attest.action(ProtocolCall::Function(FunctionCall {
            framework: Some("rig"),
            name: T::NAME,
            arguments: args,
            ..FunctionCall::default()
        }));
        let tool = &self.tool;
        let outcome = self
            .attest
            .call(action)
            .run(move |_params| tool.call(context, typed))
            .await?;
        if let Some(why) = outcome.why_not_run() {
            return Err(RigToolError::NotRun { why });
        }
        match outcome {
            Outcome::Ran { output, .. } => Ok(output),
            Outcome::Failed { error, .. } => Err(RigToolError::Failed(Box::new(error))),
            _ => Err(RigToolError::Attest(AttestError::Internal(
                "a rig call ended in an outcome the adapter does not know",
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use attest_ledger::{Ledger, LedgerOptions, RowSummary};
    use rig_core::tool::{ErasedTool, ToolResult};
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::AutoGate;

    #[derive(Debug, thiserror::Error)]
    #[error("the vendor is down")]
    struct VendorDown;

    #[derive(Deserialize)]
    struct RefundArgs {
        amount: u64,
    }

    /// A rig tool that counts its runs; `NAME` decides what Attest detects.
    struct Refund(Arc<AtomicUsize>);

    impl RigTool for Refund {
        const NAME: &'static str = "stripe_create_refund";
        type Args = RefundArgs;
        type Output = Value;
        type Error = VendorDown;

        fn description(&self) -> String {
            "Refund a payment.".into()
        }

        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {"amount": {"type": "integer"}}})
        }

        async fn call(
            &self,
            _context: &mut ToolContext,
            args: RefundArgs,
        ) -> Result<Value, VendorDown> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"id": "re_1", "amount": args.amount}))
        }
    }

    /// Calls the wrapped refund tool once with `args` under `gate`: what the model got,
    /// how often the tool really ran, and the ledger's rows.
    async fn call_refund(gate: AutoGate, args: &str) -> (ToolResult, usize, Vec<RowSummary>) {
        call_refund_with(gate, args, None).await
    }

    /// [`call_refund`] in a pipeline detecting with `registry` (else the compiled-in one).
    async fn call_refund_with(
        gate: AutoGate,
        args: &str,
        registry: Option<crate::Registry>,
    ) -> (ToolResult, usize, Vec<RowSummary>) {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        let mut builder = Attest::builder().ledger(ledger).gate(gate);
        if let Some(registry) = registry {
            builder = builder.registry(registry);
        }
        let attest = builder.build().unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let tool = attest.wrap_rig(Refund(Arc::clone(&runs)));
        assert_eq!(ErasedTool::name(&tool), "stripe_create_refund");
        let mut context = ToolContext::default();
        let result = tool.execute(args.to_owned(), &mut context).await;
        let rows = attest.ledger().list(10).unwrap();
        (result, runs.load(Ordering::SeqCst), rows)
    }

    #[tokio::test]
    async fn a_rig_call_is_described_with_the_configured_registry() {
        // The configured registry's entry for the tool's name beats the compiled-in
        // reading (`stripe.pay`, which asks): a refused delete of widgets.
        let mut registry = crate::Registry::builtin().unwrap();
        registry.register(
            "stripe_create_refund",
            "widgets",
            attest_policy::Verb::Delete,
        );
        let (result, runs, rows) = call_refund_with(
            AutoGate::reject("ops"),
            r#"{"amount": 4200}"#,
            Some(registry),
        )
        .await;
        result.refusal().expect("a refused result");
        assert_eq!(runs, 0);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(
            (rows[0].system.as_str(), rows[0].verb.as_str()),
            ("widgets", "delete")
        );
    }

    #[tokio::test]
    async fn a_rejected_rig_call_never_runs_and_the_model_is_told_why() {
        let (result, runs, rows) =
            call_refund(AutoGate::reject("finance-lead"), r#"{"amount": 4200}"#).await;
        let refusal = result.refusal().expect("a refused result");
        assert!(
            refusal.message().contains("finance-lead"),
            "{}",
            refusal.message()
        );
        assert_eq!(runs, 0);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].system.as_str(), rows[0].level.as_deref()),
            ("stripe", None)
        );
    }

    #[tokio::test]
    async fn an_approved_rig_call_runs_once_and_is_recorded() {
        let (result, runs, rows) =
            call_refund(AutoGate::approve("finance-lead"), r#"{"amount": 4200}"#).await;
        assert_eq!(
            result.output().as_json(),
            Some(&json!({"id": "re_1", "amount": 4200}))
        );
        assert_eq!(runs, 1);
        // Newest first: the outcome, then the intent written before the refund ran.
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].level.as_deref(), Some("acknowledged"));
        assert_eq!(rows[1].level.as_deref(), None);
    }

    #[tokio::test]
    async fn arguments_that_do_not_fit_are_an_error_with_nothing_recorded() {
        let (result, runs, rows) =
            call_refund(AutoGate::approve("finance-lead"), r#"{"amount": "lots"}"#).await;
        assert!(result.error().is_some());
        assert_eq!(runs, 0);
        assert!(rows.is_empty());
    }
}

//! Wrapping an agent framework's tools: plain async functions and tool lists.
//!
//! A framework keeps its tools in a list; [`Attest::wrap_all`] governs the whole list
//! in one call, and [`Attest::wrap_fn`] turns an `async fn(Value) -> Result<Value, _>`
//! into a governed tool named the way the agent calls it. A tool describes its call
//! (its name and arguments, [`FnTool`]); the pipeline's configured registry names the
//! system and verb from that name ([`Attest::action`]).

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use attest_policy::Verb;
use serde_json::Value;

use crate::{Attest, CustomCheck, FunctionCall, Governed, ProtocolCall, Tool, ToolError};

/// A tool made of a name and an async function.
///
/// Its calls are described by detection from the name (and the server, when given),
/// unless the system and verb are set with [`FnTool::manual`].
pub struct FnTool<F> {
    name: String,
    server: Option<String>,
    manual: Option<(String, Verb)>,
    check: Option<CustomCheck>,
    call: F,
}

impl<F> std::fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("manual", &self.manual)
            .finish_non_exhaustive()
    }
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, ToolError>> + Send,
{
    /// A tool called `name` that runs `call`.
    pub fn new(name: impl Into<String>, call: F) -> Self {
        FnTool {
            name: name.into(),
            server: None,
            manual: None,
            check: None,
            call,
        }
    }

    /// The MCP server or toolkit the tool belongs to: a hint for the system.
    pub fn on_server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Fixes the system and verb instead of detecting them from the name.
    pub fn manual(mut self, system: impl Into<String>, verb: Verb) -> Self {
        self.manual = Some((system.into(), verb));
        self
    }

    /// The tool's own check that a call landed.
    pub fn with_check(mut self, check: CustomCheck) -> Self {
        self.check = Some(check);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Value, ToolError>> + Send,
{
    fn describe(&self, params: Value) -> ProtocolCall<'_> {
        let (system, verb) = match &self.manual {
            Some((system, verb)) => (Some(system.as_str()), Some(*verb)),
            None => (None, None),
        };
        ProtocolCall::Function(FunctionCall {
            name: &self.name,
            server: self.server.as_deref(),
            arguments: params,
            system,
            verb,
            ..FunctionCall::default()
        })
    }

    async fn call(&self, params: Value) -> Result<Value, ToolError> {
        (self.call)(params).await
    }

    fn check(&self) -> Option<&CustomCheck> {
        self.check.as_ref()
    }
}

/// A boxed or shared tool is a tool, so a framework's `Vec<Box<dyn Tool>>` wraps as is.
macro_rules! forward_tool {
    ($($pointer:ident),+) => {$(
        #[async_trait]
        impl Tool for $pointer<dyn Tool> {
            fn describe(&self, params: Value) -> ProtocolCall<'_> {
                (**self).describe(params)
            }

            async fn call(&self, params: Value) -> Result<Value, ToolError> {
                (**self).call(params).await
            }

            fn check(&self) -> Option<&CustomCheck> {
                (**self).check()
            }
        }
    )+};
}

forward_tool!(Box, Arc);

impl Attest {
    /// Governs an async function as a tool named `name` (detection reads the name).
    ///
    /// ```
    /// use attest_core::{Attest, AutoGate};
    /// use attest_ledger::{Ledger, LedgerOptions};
    /// use serde_json::json;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default())?;
    /// let attest = Attest::builder().ledger(ledger).gate(AutoGate::approve("ops")).build()?;
    /// let send = attest.wrap_fn("gmail_send_email", |params| async move {
    ///     Ok(json!({"id": "msg_1", "to": params["to"]}))
    /// });
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// let receipt = runtime.block_on(send.call(json!({"to": "bob@example.com"})))?.into_receipt();
    /// assert_eq!(receipt.seq, 2); // seq 1 is its intent, written before the tool ran
    /// # Ok(())
    /// # }
    /// ```
    pub fn wrap_fn<F, Fut>(&self, name: impl Into<String>, call: F) -> Governed<FnTool<F>>
    where
        F: Fn(Value) -> Fut + Send + Sync,
        Fut: Future<Output = Result<Value, ToolError>> + Send,
    {
        self.wrap(FnTool::new(name, call))
    }

    /// Governs every tool of a framework's list in one call, keeping their order.
    ///
    /// Mixed tool types go in as `Box<dyn Tool>` or `Arc<dyn Tool>`.
    pub fn wrap_all<T: Tool, I: IntoIterator<Item = T>>(&self, tools: I) -> Vec<Governed<T>> {
        tools.into_iter().map(|tool| self.wrap(tool)).collect()
    }
}

#[cfg(test)]
mod tests {
    use attest_ledger::{Ledger, LedgerOptions};
    use attest_policy::Decision;
    use serde_json::json;

    use super::*;
    use crate::{AutoGate, Outcome};

    fn attest(dir: &tempfile::TempDir) -> Attest {
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        Attest::builder()
            .ledger(ledger)
            .gate(AutoGate::reject("ops"))
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn functions_are_detected_by_name_and_governed() {
        let dir = tempfile::tempdir().unwrap();
        let attest = attest(&dir);
        let list = attest.wrap_fn("list_issues", |_| async { Ok(json!({"issues": []})) });
        assert_eq!(list.action(json!({})).verb, Verb::List);
        let outcome = list.call(json!({})).await.unwrap();
        assert_eq!(outcome.receipt().decision, Decision::Act);

        // A high-risk write asks; this gate rejects, so the function never runs.
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let send = attest.wrap_fn("send_email", move |_| {
            let flag = Arc::clone(&flag);
            async move {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(json!({"id": "m"}))
            }
        });
        let outcome = send.call(json!({"to": "x@example.com"})).await.unwrap();
        assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_mixed_tool_list_is_wrapped_in_one_call() {
        let dir = tempfile::tempdir().unwrap();
        let attest = attest(&dir);
        let tools: Vec<Box<dyn Tool>> = vec![
            Box::new(FnTool::new("get_weather", |_| async {
                Ok(json!({"t": 21}))
            })),
            Box::new(
                FnTool::new("frobnicate", |_| async { Ok(json!({"ok": true})) })
                    .manual("crm", Verb::Update),
            ),
        ];
        let governed = attest.wrap_all(tools);
        assert_eq!(governed.len(), 2);
        for tool in &governed {
            let outcome = tool.call(json!({})).await.unwrap();
            assert_eq!(outcome.receipt().decision, Decision::Act);
        }
        let action = governed[1].action(json!({}));
        assert_eq!((action.system.as_str(), action.verb), ("crm", Verb::Update));
        assert_eq!(action.extra.tool_name.as_deref(), Some("frobnicate"));
        // The read: one row; the update: its intent, then its outcome.
        assert_eq!(attest.ledger().list(10).unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_governed_tool_is_described_with_the_configured_registry() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        // The compiled-in registry knows neither name: `unknown.write`, which asks.
        let mut registry = crate::Registry::builtin().unwrap();
        registry.register("frobnicate_widget", "acmecrm", Verb::List);
        registry.register("scrap_gadget", "widgets", Verb::Delete);
        let attest = Attest::builder()
            .ledger(ledger)
            .registry(registry)
            .gate(AutoGate::reject("ops"))
            .build()
            .unwrap();
        let list = attest.wrap_fn("frobnicate_widget", |_| async { Ok(json!([])) });
        let outcome = list.call(json!({})).await.unwrap();
        assert_eq!(outcome.receipt().decision, Decision::Act, "{outcome:?}");
        let tools: Vec<Box<dyn Tool>> = vec![Box::new(
            FnTool::new("scrap_gadget", |_| async { Ok(json!({})) }).on_server("acme"),
        )];
        let scrap = attest.wrap_all(tools);
        let outcome = scrap[0].call(json!({"id": "g1"})).await.unwrap();
        assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
        let rows = attest.ledger().list(10).unwrap();
        let described: Vec<(&str, &str)> = rows
            .iter()
            .map(|row| (row.system.as_str(), row.verb.as_str()))
            .collect();
        // Newest first: the rejected delete, then the list.
        assert_eq!(
            described,
            [("widgets", "delete"), ("acmecrm", "list")],
            "{rows:?}"
        );
    }

    #[tokio::test]
    async fn a_tool_check_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let attest = attest(&dir);
        let tool = FnTool::new("update_deal", |_| async { Ok(json!({"id": "1"})) })
            .on_server("hubspot")
            .with_check(CustomCheck::sync(|_, _| Ok(true)));
        let outcome = attest.wrap(tool).call(json!({"id": "1"})).await.unwrap();
        assert_eq!(outcome.receipt().level, Some(crate::Level::VerifiedCustom));
    }
}

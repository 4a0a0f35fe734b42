//! `attest-core` is the pipeline between an agent and its tools: every call is decided
//! by policy, put to a person when policy asks, run, verified, and recorded in the
//! hash-chained ledger.
//!
//! It does not parse command lines or serve HTTP (that is `attest-cli`), and it does
//! not define the ledger format (`attest-ledger`) or the rules (`attest-policy`).
//!
//! The principal types:
//! - [`Attest`]: the pipeline, built with [`Attest::builder`]; [`Attest::call`] is the one
//!   call every surface makes, returning an [`Outcome`].
//! - [`Receipt`]: what a call returns: seq, entry hash, decision, verification level.
//! - [`Gate`]: who answers `ask` ([`AutoGate`], [`RejectGate`], [`ConsoleGate`],
//!   [`StoreGate`]).
//! - [`ApprovalStore`]: durable approval requests, resumed with `attest.call(token)`
//!   ([`approvals`] module).
//! - [`Tool`]: a tool object to wrap once and call many times; [`Attest::wrap_fn`] and
//!   [`Attest::wrap_all`] govern a framework's async functions and tool lists.
//! - [`ReadBack`]: how writes are read back from their systems of record (the
//!   [`verification`] ladder and its drivers).
//! - [`detect()`]: names the system, verb and target of a tool call ([`mod@detect`] module);
//!   [`Attest::action`] turns a [`ProtocolCall`] (MCP, HTTP, shell, coding agent,
//!   framework function) into the action, with the configured registry.
//! - [`config::ConfigFile`]: the configuration file every surface reads, and the registry,
//!   read-back drivers and notifiers it describes; [`setup::attest`] turns it (with a
//!   door's [`setup::Overrides`] and the environment) into a fully built `Attest`.
//!
//! ```
//! use attest_core::{Attest, AutoGate, Level};
//! use attest_ledger::{Ledger, LedgerOptions};
//! use attest_policy::{Action, Verb};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default())?;
//! let attest = Attest::builder().ledger(ledger).gate(AutoGate::approve("ops")).build()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let action = Action::new("crm", Verb::Update).with_params(json!({"id": "42", "stage": "won"}));
//! let tool = |_params| async { Ok::<_, std::io::Error>(json!({"id": "42"})) };
//! let outcome = runtime.block_on(attest.call(action).run(tool))?;
//! let receipt = outcome.receipt();
//! assert_eq!(receipt.seq, 2); // seq 1 is its intent, written before the tool ran
//! assert_eq!(receipt.level, Some(Level::Acknowledged));
//! assert_eq!(outcome.output(), Some(json!({"id": "42"})));
//! # Ok(())
//! # }
//! ```

pub mod agents;
pub mod approvals;
pub mod config;
mod console_gate;
pub mod detect;
pub mod door;
mod error;
mod gate;
pub mod http_body;
mod intents;
mod liveness;
pub mod personal;
mod pipeline;
pub mod protected;
mod protocol_call;
mod receipt;
mod record;
pub mod replay;
#[cfg(feature = "rig")]
pub mod rig;
pub mod sandbox;
pub mod setup;
mod shadow;
pub mod state;
pub mod telemetry;
mod tool;
pub mod touched;
pub mod verification;
mod wrap;

pub use approvals::{
    Answer, ApprovalError, ApprovalRequest, ApprovalStore, ResumeToken, StoreGate,
};
pub use console_gate::ConsoleGate;
pub use detect::{detect, DetectError, DetectInput, Detection, Registry};
pub use error::{error_chain, AttestError, ToolError};
pub use gate::{AutoGate, Gate, GateDecision, RejectGate};
pub use intents::{open_intent_at, open_intents, Found, FoundBy, IntentRow, OpenIntent, RESOLVED};
pub use pipeline::call::{Call, Outcome, Start};
pub use pipeline::handoff::{handoff, Cleared, HandedTool, Handoff, HandoffOutcome};
pub use pipeline::keys::{check_key, IdempotencyError, IdempotencyOptions, MAX_KEY_BYTES};
pub use pipeline::{
    Attest, AttestBuilder, CountedVerdict, Decided, ImportBatch, ImportItem, GRANT_RULE,
    RETRY_RULE, UNAUTHENTICATED,
};
pub use protocol_call::{
    CallContext, CodingAgentCall, Describer, FunctionCall, HttpCall, McpCall, ProtocolCall,
    SdkCall, ShellCall, ACTOR_HEADER, AGENT_HEADER, RUN_HEADER,
};
pub use receipt::Receipt;
pub use record::INTENT;
pub use shadow::{is_unenforced, PROTECTED_RULE, SHADOW_RULE};
pub use tool::{Governed, Tool, ToolOutcome};
pub use verification::{
    acknowledges, CustomCheck, Evidence, Finding, HttpOptions, HttpReader, Level, ReadBack,
    ReadBackDriver, ReadMethod, ReadRequest, RecipeDriver,
};
pub use wrap::FnTool;

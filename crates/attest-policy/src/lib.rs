//! `attest-policy` decides what an agent's action may do: act, ask a human, or refuse.
//!
//! It owns the action descriptor ([`Action`]), the vocabulary of verbs and risk tiers
//! ([`Verb`], [`Risk`]), and the decision every action gets ([`Verdict`]) from a
//! [`Policy`]. It does no I/O and knows nothing of the ledger: policies are parsed
//! from text the caller read (naming its origin for errors), and `attest-core` turns
//! an `Action` plus a `Verdict` into a ledger entry.
//!
//! The principal types:
//! - [`Action`]: what an agent wants to do (system, verb, target, params, who).
//! - [`Policy`]: the trait that turns an `Action` into a [`Verdict`].
//! - [`PolicyEngine`]: the built-in rules R0–R4 with a YAML policy's rules
//!   ([`PolicyEngine::from_yaml`], [`PolicyEngine::default_policy`]).
//! - [`RiskTierPolicy`]: the fallback rule R4 alone (low/medium act, high/very_high ask).
//! - [`Window`]: a budget or rate a rule's `limit:` puts on calls; a verdict names the
//!   windows to check against what ran ([`Verdict::windows`]), and the caller, who can
//!   read the ledger, checks them.
//! - [`Dedupe`]: a duplicate window (`dedupe:`) a verdict names, for the caller to look
//!   the call's digest up in ([`Verdict::dedupe`]).
//!
//! Around them: [`lint`] lists every problem of a policy file with its line, and
//! [`run_cases`] runs a policy's expected-decision cases.
//!
//! ```
//! use attest_policy::{Action, Decision, Policy, PolicyEngine, Verb};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), attest_policy::PolicyError> {
//! let policy = PolicyEngine::from_yaml(
//!     r#"
//! policies:
//!   - name: refund-limit
//!     match: {system: stripe, params: {/amount: {gt: 50000}}}
//!     decision: ask
//!     reason: refunds over 500 dollars need finance
//! "#,
//!     "attest.yaml",
//! )?;
//! let refund = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 60000}));
//! let verdict = policy.evaluate(&refund)?;
//! assert_eq!(verdict.decision, Decision::Ask);
//! assert_eq!(verdict.rules_fired, ["refund-limit"]);
//! # Ok(())
//! # }
//! ```

mod action;
mod action_pattern;
mod approval;
mod bound;
mod calendar;
mod cases;
mod de;
mod dedupe;
mod engine;
mod error;
mod file;
mod glob;
mod history;
mod labels;
mod limit;
mod lint;
mod params;
mod placeholder;
mod policy;
mod preview;
mod recipients;
mod redact;
mod replay;
mod rule;
mod sets;
mod verdict;
mod vocabulary;
mod when;
mod when_native;

pub use action::{Action, Extra, Source};
pub use approval::{Escalation, Quorum, QuorumGroup};
pub use bound::{Bound, MAX_BOUND_CHARS};
pub use cases::{run_cases, run_cases_with, CallResolver, CaseCall, CaseReport, CaseResult};
pub use de::checked_map;
pub use dedupe::{Dedupe, DEDUPE_RULE};
pub use engine::{PolicyEngine, DEFAULT_POLICY_YAML};
pub use error::PolicyError;
pub use file::{check_slot, Leaf};
pub use history::{History, HistoryRead, Mark, RUN_PERIOD_SECS};
pub use limit::{Measure, Window};
pub use lint::{lint, lint_slots, Problem, MAX_POLICY_BYTES};
pub use policy::{Policy, RiskTierPolicy};
pub use preview::{params_preview, preview_allows, PREVIEW_MAX_CHARS};
pub use redact::{
    is_credential_name, redact_text, redact_url, redact_url_credentials, redact_urls_in, REDACTED,
    TOKEN_SHAPES,
};
pub use replay::{Recorded, Replayed};
pub use verdict::{Decision, TargetClass, Verdict};
pub use vocabulary::{Risk, Verb};

//! `attest-policy` decides what an agent's action may do: act, ask a human, or refuse.
//!
//! It owns the action descriptor ([`Action`]), the vocabulary of verbs and risk tiers
//! ([`Verb`], [`Risk`]), and the decision every action gets ([`Verdict`]) from a
//! [`Policy`]. It does no I/O and knows nothing of the ledger: `attest-core` turns an
//! `Action` plus a `Verdict` into a ledger entry.
//!
//! The principal types:
//! - [`Action`]: what an agent wants to do (system, verb, target, params, who).
//! - [`Policy`]: the trait that turns an `Action` into a [`Verdict`].
//! - [`RiskTierPolicy`]: the fallback rule R4 (low/medium act, high/very_high ask).
//!
//! ```
//! use attest_policy::{Action, Decision, Policy, RiskTierPolicy, Verb};
//!
//! # fn main() -> Result<(), attest_policy::PolicyError> {
//! let action = Action::new("gmail", Verb::Send).with_target("bob@example.com");
//! let verdict = RiskTierPolicy.evaluate(&action)?;
//! assert_eq!(verdict.decision, Decision::Ask);
//! # Ok(())
//! # }
//! ```

mod action;
mod error;
mod policy;
mod preview;
mod verdict;
mod vocabulary;

pub use action::{Action, Extra, Source};
pub use error::PolicyError;
pub use policy::{Policy, RiskTierPolicy};
pub use preview::{params_preview, PREVIEW_MAX_CHARS};
pub use verdict::{Decision, TargetClass, Verdict};
pub use vocabulary::{Risk, Verb};

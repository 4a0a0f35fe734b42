//! The fields of a stored body that review reads, borrowed from the body's bytes.
//!
//! Listings and counters read the indexed columns where they can; what the columns do
//! not carry (target class, execution status, confirm outcome, run, source time) comes
//! from this view. A body that does not parse is verify's to report: review skips it.

use std::borrow::Cow;
use std::time::SystemTime;

use serde::Deserialize;

/// One row's body, as far as review needs it.
#[derive(Debug, Deserialize)]
pub struct RowView<'a> {
    #[serde(borrow, default)]
    pub action_id: Cow<'a, str>,
    #[serde(borrow, default)]
    pub run_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) ts: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) agent: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub actor: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) system: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) verb: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) target: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) target_class: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) decision: Cow<'a, str>,
    #[serde(borrow, default)]
    pub tier: Cow<'a, str>,
    #[serde(borrow, default)]
    pub rules_fired: Vec<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reasons: Vec<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub confirm: Option<ConfirmView<'a>>,
    #[serde(borrow, default)]
    pub(crate) execution: Option<ExecutionView<'a>>,
    #[serde(borrow, default)]
    pub(crate) verification: Option<VerificationView<'a>>,
    #[serde(borrow, default)]
    pub(crate) imported: Option<ImportedView<'a>>,
    #[serde(borrow, default)]
    pub(crate) shadow: Option<ShadowView<'a>>,
}

/// `shadow`: the verdict a call that ran in shadow mode was given and not held to.
#[derive(Debug, Deserialize)]
pub(crate) struct ShadowView<'a> {
    #[serde(borrow, default)]
    pub(crate) decision: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) rules_fired: Vec<Cow<'a, str>>,
}

/// `confirm`.
#[derive(Debug, Deserialize)]
pub struct ConfirmView<'a> {
    #[serde(borrow, default)]
    pub outcome: Cow<'a, str>,
    #[serde(borrow, default)]
    pub approver: Option<Cow<'a, str>>,
}

/// `execution`.
#[derive(Debug, Deserialize)]
pub(crate) struct ExecutionView<'a> {
    #[serde(borrow, default)]
    pub(crate) status: Cow<'a, str>,
}

/// `verification`.
#[derive(Debug, Deserialize)]
pub(crate) struct VerificationView<'a> {
    #[serde(borrow, default)]
    pub(crate) level: Cow<'a, str>,
}

/// `imported`.
#[derive(Debug, Deserialize)]
pub(crate) struct ImportedView<'a> {
    #[serde(borrow, default)]
    pub(crate) ts: Option<Cow<'a, str>>,
}

impl<'a> RowView<'a> {
    /// Parses a stored body; `None` when it is not an entry.
    pub(crate) fn parse(body: &'a [u8]) -> Option<RowView<'a>> {
        serde_json::from_slice(body).ok()
    }

    /// The execution status (`ok`, `failed`, `intent`, `pending`, …), or "".
    pub(crate) fn status(&self) -> &str {
        self.execution.as_ref().map_or("", |e| e.status.as_ref())
    }

    /// The verification level, or "".
    pub(crate) fn level(&self) -> &str {
        self.verification.as_ref().map_or("", |v| v.level.as_ref())
    }

    /// The confirm outcome (`approved`, `rejected`, `edited`, `expired`), or "".
    pub fn confirm_outcome(&self) -> &str {
        self.confirm.as_ref().map_or("", |c| c.outcome.as_ref())
    }

    /// A stage row (an intent, or an ask still pending) that a later row of the same
    /// action completes: not an action of its own when counting.
    pub(crate) fn is_stage(&self) -> bool {
        matches!(self.status(), attest_core::INTENT | "pending")
    }

    /// When the action happened: the source's time for an imported row (when it gives
    /// one), else the row's own `ts`.
    pub(crate) fn happened(&self) -> Option<SystemTime> {
        let source = self
            .imported
            .as_ref()
            .and_then(|i| i.ts.as_deref())
            .and_then(|ts| humantime::parse_rfc3339_weak(ts).ok());
        source.or_else(|| parse_ts(&self.ts))
    }

    /// True for a row `attest import` wrote: its decision, approval and level are what the
    /// source claims, not what Attest saw.
    pub(crate) fn is_imported(&self) -> bool {
        self.imported.is_some()
    }

    /// The confirm outcome as a view shows it: an imported row's is the source's claim.
    pub fn shown_confirm(&self) -> String {
        claimed(self.is_imported(), self.confirm_outcome())
    }

    /// The verification level as a view shows it: an imported row's is the source's claim.
    pub fn shown_level(&self) -> String {
        claimed(self.is_imported(), self.level())
    }

    /// The decision policy gave and shadow mode did not enforce (`refuse`, `ask`), or "".
    pub fn shadow_decision(&self) -> &str {
        self.shadow.as_ref().map_or("", |s| s.decision.as_ref())
    }

    /// The agent, or `(none)`.
    pub(crate) fn agent_name(&self) -> &str {
        self.agent.as_deref().unwrap_or(NO_AGENT)
    }
}

/// `value`, or `value (claimed)` for an imported row's field (nothing stays nothing).
pub fn claimed(imported: bool, value: &str) -> String {
    if imported && !value.is_empty() {
        format!("{value} (claimed)")
    } else {
        value.to_owned()
    }
}

/// The name rows without an agent are grouped under.
pub(crate) const NO_AGENT: &str = "(none)";

/// Parses an RFC 3339 time as rows and imports write it.
pub(crate) fn parse_ts(ts: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(ts).ok()
}

/// Seconds since the Unix epoch (0 before it).
pub(crate) fn unix_secs(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

//! Duplicate suppression (`dedupe:`): a write whose whole call repeats one that ran
//! within a window is asked about, or refused, whatever the rule that matched decides.
//!
//! ```yaml
//! dedupe: {window: 60s}                       # every write (off when absent)
//! policies:
//!   - name: refunds
//!     match: {system: stripe, verb: pay}
//!     decision: act
//!     dedupe: {window: 10m, decision: refuse}  # this rule's calls; beats the top level
//! ```
//!
//! "The same call" is the digest of the whole call (system, verb, target, params, and
//! the call as the surface saw it): the one an approval binds to. The first matching
//! rule that has a `dedupe:` sets the window (a `limit:` rule met on the way counts);
//! else the top-level one applies, to writes only. `decision` is `ask` (the default) or
//! `refuse`; the stricter of it and the verdict's own decision applies.
//!
//! Policy stays pure: it cannot know what ran. A verdict names its window
//! ([`Verdict::dedupe`]); the pipeline looks the digest up in the ledger before the call
//! runs and, when the same call ran within the window, applies [`Dedupe::duplicate`].

use std::time::Duration;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};

use crate::de::{checked_map, Word, W};
use crate::file::Leaf;
use crate::limit::Per;
use crate::{Decision, Verdict};

/// The rule name a top-level `dedupe:` fires as.
pub const DEDUPE_RULE: &str = "dedupe";

/// A compiled `dedupe:`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DedupeRule {
    window: Per,
    decision: Decision,
}

impl DedupeRule {
    /// The verdict's window, fired as `rule`.
    pub(crate) fn window(&self, rule: &str) -> Dedupe {
        Dedupe {
            rule: rule.to_owned(),
            window_secs: self.window.0.as_secs(),
            window: self.window.1.clone(),
            decision: self.decision,
        }
    }
}

/// The duplicate window a verdict holds under: what to look up before the call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dedupe {
    /// The rule that set it (`dedupe` for the top level).
    pub rule: String,
    /// How far back a call that ran counts as the same call, in seconds.
    pub window_secs: u64,
    /// The window as written (`60s`).
    pub window: String,
    /// `ask` or `refuse`: what a duplicate gets.
    pub decision: Decision,
}

impl Dedupe {
    /// The window's length.
    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs)
    }

    /// `verdict` for a call whose same call ran at `seq`, `ago` before: the stricter of
    /// its decision and this window's, with the reason "the same call ran at seq N, 12 s
    /// ago" and this rule fired.
    pub fn duplicate(&self, verdict: &Verdict, seq: u64, ago: Duration) -> Verdict {
        let mut duplicate = verdict.clone();
        if strict(self.decision) > strict(duplicate.decision) {
            duplicate.decision = self.decision;
        }
        duplicate.rules_fired.push(self.rule.clone());
        duplicate.reasons.push(format!(
            "the same call ran at seq {seq}, {} ago (dedupe window {})",
            ago_text(ago),
            self.window
        ));
        duplicate.dedupe = None;
        duplicate.windows.clear();
        duplicate
    }
}

fn strict(decision: Decision) -> u8 {
    match decision {
        Decision::Act | Decision::Recorded => 0,
        Decision::Ask => 1,
        Decision::Refuse => 2,
    }
}

/// `12 s`, `3 min`, `2 h`: whole units, rounded down.
fn ago_text(ago: Duration) -> String {
    let secs = ago.as_secs();
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ => format!("{} h", secs / 3600),
    }
}

/// What a duplicate gets: `ask` or `refuse`.
struct DedupeDecision(Decision);

impl Word for DedupeDecision {
    const EXPECTING: &'static str = "ask or refuse";

    fn from_word(word: &str) -> Result<Self, String> {
        match word.trim().to_ascii_lowercase().as_str() {
            "ask" => Ok(DedupeDecision(Decision::Ask)),
            "refuse" => Ok(DedupeDecision(Decision::Refuse)),
            _ => Err(format!(
                "dedupe decision {:?}: a duplicate is asked about or refused (expected ask or refuse)",
                word.trim()
            )),
        }
    }
}

/// `dedupe:` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDedupe {
    #[serde(default)]
    window: Leaf<W<Per>>,
    #[serde(default)]
    decision: Leaf<W<DedupeDecision>>,
}

impl DedupeRule {
    fn check(raw: RawDedupe) -> Result<DedupeRule, String> {
        let window = match raw.window {
            Leaf::Value(W(per)) => per,
            // Reported already; nothing to build.
            Leaf::Skipped => Per(Duration::from_secs(1), "1s".to_owned()),
            Leaf::Absent => {
                return Err(
                    "dedupe needs `window`, how long a call that ran blocks its duplicate (window: 60s)"
                        .to_owned(),
                )
            }
        };
        let decision = match raw.decision {
            Leaf::Value(W(DedupeDecision(decision))) => decision,
            Leaf::Absent | Leaf::Skipped => Decision::Ask,
        };
        Ok(DedupeRule { window, decision })
    }
}

impl<'de> Deserialize<'de> for DedupeRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a duplicate window such as {window: 60s} or {window: 10m, decision: refuse}",
            DedupeRule::check,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Risk;

    fn dedupe(yaml: &str) -> Result<DedupeRule, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn a_window_asks_by_default_and_may_refuse() {
        let ask = dedupe("{window: 60s}").unwrap();
        assert_eq!(ask.window("dedupe").decision, Decision::Ask);
        assert_eq!(ask.window("dedupe").window_secs, 60);
        let refuse = dedupe("{window: 10m, decision: refuse}").unwrap();
        assert_eq!(refuse.window("r").decision, Decision::Refuse);
        assert_eq!(refuse.window("r").window_secs, 600);
    }

    #[test]
    fn a_bad_dedupe_names_what_is_wrong() {
        let missing = dedupe("{decision: ask}").unwrap_err();
        assert!(missing.contains("dedupe needs `window`"), "{missing}");
        let act = dedupe("{window: 60s, decision: act}").unwrap_err();
        assert!(act.contains("expected ask or refuse"), "{act}");
        let zero = dedupe("{window: 0s}").unwrap_err();
        assert!(zero.contains("shorter than a second"), "{zero}");
        let unknown = dedupe("{window: 60s, per: 1h}").unwrap_err();
        assert!(unknown.contains("per"), "{unknown}");
    }

    #[test]
    fn a_duplicate_is_the_stricter_decision_with_the_reason() {
        let window = dedupe("{window: 60s}").unwrap().window("dedupe");
        let act = Verdict::new(Decision::Act, Risk::High, "ok", "rule ok: act");
        let dup = window.duplicate(&act, 7, Duration::from_secs(12));
        assert_eq!(dup.decision, Decision::Ask);
        assert_eq!(dup.rules_fired, ["ok", "dedupe"]);
        assert_eq!(
            dup.reasons[1],
            "the same call ran at seq 7, 12 s ago (dedupe window 60s)"
        );
        let refuse = Verdict::new(Decision::Refuse, Risk::High, "no", "rule no: refuse");
        assert_eq!(
            window
                .duplicate(&refuse, 7, Duration::from_secs(600))
                .decision,
            Decision::Refuse
        );
        assert_eq!(ago_text(Duration::from_secs(600)), "10 min");
    }
}

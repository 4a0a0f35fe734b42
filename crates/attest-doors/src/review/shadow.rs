//! Shadow verdicts: in rows that ran in shadow mode, what policy would have refused or
//! asked about, by rule, agent and system, with the seqs behind each count.
//!
//! A shadow row's own `decision` is `act` (it ran); the verdict that was not enforced is
//! in its `shadow` field. Each action counts once, at the row that ends it (an intent
//! row carries the same verdict and is not counted). A verdict counts under every rule
//! in its `rules_fired` (an annotating rule and the deciding one alike), so `by_rule`
//! totals may exceed the action count.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::rows::RowView;

/// Seqs kept per group: the newest.
pub(crate) const EXAMPLES_KEPT: usize = 5;

/// Would-refuse and would-ask counts, overall and per rule, agent and system.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShadowTally {
    would_refuse: u64,
    would_ask: u64,
    by_rule: BTreeMap<String, Group>,
    by_agent: BTreeMap<String, Group>,
    by_system: BTreeMap<String, Group>,
}

/// One rule's, agent's or system's counts.
#[derive(Debug, Clone, Default)]
struct Group {
    would_refuse: u64,
    would_ask: u64,
    seqs: Vec<u64>,
}

impl Group {
    fn add(&mut self, refuse: bool, seq: u64) {
        if refuse {
            self.would_refuse += 1;
        } else {
            self.would_ask += 1;
        }
        self.seqs.push(seq);
        if self.seqs.len() > EXAMPLES_KEPT {
            self.seqs.remove(0);
        }
    }
}

impl ShadowTally {
    /// Counts `row` (at `seq`) if it ran with a shadow verdict; stage rows are skipped.
    pub(crate) fn add(&mut self, seq: u64, row: &RowView<'_>) {
        let Some(shadow) = &row.shadow else {
            return;
        };
        if row.is_stage() {
            return;
        }
        let refuse = match shadow.decision.as_ref() {
            "refuse" => true,
            "ask" => false,
            // Not a verdict shadow mode records: nothing to count.
            _ => return,
        };
        if refuse {
            self.would_refuse += 1;
        } else {
            self.would_ask += 1;
        }
        for rule in &shadow.rules_fired {
            self.by_rule
                .entry(rule.to_string())
                .or_default()
                .add(refuse, seq);
        }
        self.by_agent
            .entry(row.agent_name().to_owned())
            .or_default()
            .add(refuse, seq);
        self.by_system
            .entry(row.system.to_string())
            .or_default()
            .add(refuse, seq);
    }

    /// Whether no shadow verdict was counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.would_refuse + self.would_ask == 0
    }

    /// `{would_refuse, would_ask, by_rule: [{rule, would_refuse, would_ask, seqs}], by_agent,
    /// by_system}`, each list busiest first.
    pub(crate) fn to_json(&self) -> Value {
        let groups = |name: &str, map: &BTreeMap<String, Group>| {
            let mut list: Vec<(&String, &Group)> = map.iter().collect();
            list.sort_by(|a, b| {
                let total = |g: &Group| g.would_refuse + g.would_ask;
                total(b.1).cmp(&total(a.1)).then_with(|| a.0.cmp(b.0))
            });
            Value::Array(
                list.into_iter()
                    .map(|(key, g)| {
                        json!({
                            name: key,
                            "would_refuse": g.would_refuse,
                            "would_ask": g.would_ask,
                            "seqs": g.seqs,
                        })
                    })
                    .collect(),
            )
        };
        json!({
            "would_refuse": self.would_refuse,
            "would_ask": self.would_ask,
            "by_rule": groups("rule", &self.by_rule),
            "by_agent": groups("agent", &self.by_agent),
            "by_system": groups("system", &self.by_system),
        })
    }

    /// Lines for a terminal: totals, then each rule.
    pub(crate) fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "shadow mode: {} calls policy would have refused, {} it would have asked about (they ran)\n",
            self.would_refuse, self.would_ask
        );
        for (kind, map) in [
            ("rule", &self.by_rule),
            ("agent", &self.by_agent),
            ("system", &self.by_system),
        ] {
            for (key, g) in map {
                let seqs: Vec<String> = g.seqs.iter().map(u64::to_string).collect();
                let _ = writeln!(
                    out,
                    "  {kind} {key}: would refuse {}, would ask {} (seqs {})",
                    g.would_refuse,
                    g.would_ask,
                    seqs.join(", ")
                );
            }
        }
        out
    }
}

impl Serialize for ShadowTally {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(body: &str) -> RowView<'_> {
        RowView::parse(body.as_bytes()).unwrap()
    }

    #[test]
    fn counts_each_action_once_by_rule_agent_and_system() {
        let mut tally = ShadowTally::default();
        let refused = r#"{"agent":"bot","system":"crm","decision":"act","execution":{"status":"ok"},"shadow":{"decision":"refuse","reasons":["no"],"rules_fired":["R2","no-deletes"]}}"#;
        let intent = r#"{"agent":"bot","system":"crm","decision":"act","execution":{"status":"intent"},"shadow":{"decision":"refuse","reasons":["no"],"rules_fired":["no-deletes"]}}"#;
        let asked = r#"{"system":"gmail","decision":"act","execution":{"status":"ok"},"shadow":{"decision":"ask","reasons":["R4"],"rules_fired":["R4"]}}"#;
        let plain = r#"{"system":"gmail","decision":"refuse","execution":{"status":"not_run"}}"#;
        tally.add(1, &row(intent));
        tally.add(2, &row(refused));
        tally.add(3, &row(asked));
        tally.add(4, &row(plain));
        let json = tally.to_json();
        assert_eq!(json["would_refuse"], 1);
        assert_eq!(json["would_ask"], 1);
        assert_eq!(
            json["by_rule"],
            json!([
                {"rule": "R2", "would_refuse": 1, "would_ask": 0, "seqs": [2]},
                {"rule": "R4", "would_refuse": 0, "would_ask": 1, "seqs": [3]},
                {"rule": "no-deletes", "would_refuse": 1, "would_ask": 0, "seqs": [2]},
            ])
        );
        assert_eq!(json["by_agent"][0]["agent"], "(none)");
        assert_eq!(json["by_system"][1]["system"], "gmail");
    }
}

//! Metrics in Prometheus (OpenMetrics) text format, one renderer for every process
//! that runs actions (`serve` at `/metrics`, `mcp-proxy --listen` at `/metrics`,
//! `gateway` at `/_attest/metrics`):
//!
//! - `attest_entries_total{decision}`, `attest_entries_by_level_total{level}` and
//!   `attest_entries_by_system_total{system}`: the ledger's entries (stage rows such as
//!   a write's intent included: the counters count entries), read from its counters at
//!   scrape time ([`attest_ledger::Ledger::counts`], the dashboard's read
//!   model), so every process that shares a ledger reports the same counts;
//! - `attest_pipeline_seconds` and `attest_append_seconds`: histograms of one action's
//!   whole pipeline and of one ledger append, in this process, from the pipeline's
//!   tracing spans (see [`super::telemetry`]);
//! - on `serve` only, from its dashboard: `attest_actions_total{decision}` (actions as
//!   the dashboard counts them: a write's intent and its outcome are one action, counted
//!   by its latest row; only `serve` folds the rows that tell them apart),
//!   `attest_pending_approvals`,
//!   `attest_last_verify_timestamp_seconds`, `attest_last_full_verify_timestamp_seconds`,
//!   `attest_chain_broken`, `attest_chain_first_broken_seq`, `attest_ledger_seq`.
//!
//! Systems come from tool calls, so the `system` label is capped at
//! [`MAX_SYSTEMS`] distinct values; the rest are summed as `other`.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

use attest_ledger::Counts;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Distinct `system` label values kept.
pub(crate) const MAX_SYSTEMS: usize = 200;

/// The content type of a scrape's answer.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A one-label set (`decision`, `level` or `system`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Decision {
    decision: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Level {
    level: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct System {
    system: String,
}

/// The latency histograms of this process (the only state kept between scrapes).
pub(crate) struct Metrics {
    /// One action through the pipeline, seconds.
    pub(crate) pipeline: Histogram,
    /// One ledger append, seconds.
    pub(crate) append: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The dashboard's figures `serve` adds when it is scraped.
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    pub(crate) actions: BTreeMap<String, u64>,
    pub(crate) pending: Option<u64>,
    pub(crate) seq: u64,
    pub(crate) last_verify: Option<f64>,
    pub(crate) last_full_verify: Option<f64>,
    pub(crate) broken_seq: Option<u64>,
}

/// The metrics of this process (shared by the tracing layer and every scrape).
pub(crate) fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| Metrics {
        // 0.25 ms .. ~8 s.
        pipeline: Histogram::new(exponential_buckets(0.000_25, 2.0, 16)),
        append: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
    })
}

/// A counter family with one sample per `(label, n)`.
fn counted<L>(values: impl IntoIterator<Item = (L, u64)>) -> Family<L, Counter>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let family = Family::<L, Counter>::default();
    for (labels, n) in values {
        family.get_or_create(&labels).inc_by(n);
    }
    family
}

/// `by_system` with at most [`MAX_SYSTEMS`] names, the rest summed as `other`.
fn capped(by_system: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut kept = BTreeMap::new();
    for (system, n) in by_system {
        let name = if kept.len() < MAX_SYSTEMS || kept.contains_key(system) {
            system.clone()
        } else {
            "other".to_owned()
        };
        *kept.entry(name).or_insert(0) += n;
    }
    kept
}

fn gauge(n: u64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(i64::try_from(n).unwrap_or(i64::MAX));
    gauge
}

fn seconds(at: Option<f64>) -> Gauge<f64, AtomicU64> {
    let gauge = Gauge::<f64, AtomicU64>::default();
    if let Some(at) = at {
        gauge.set(at);
    }
    gauge
}

impl Metrics {
    /// The text a scrape answers: `counts` (the ledger's, read now), this process's
    /// histograms, and `serve`'s dashboard figures when given.
    pub(crate) fn render(
        &self,
        counts: &Counts,
        serve: Option<&Scrape>,
    ) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register(
            "attest_entries",
            "Entries in the ledger by decision, from its counters (a write's intent and outcome are two)",
            counted(counts.by_decision.iter().map(|(decision, n)| {
                (
                    Decision {
                        decision: decision.clone(),
                    },
                    *n,
                )
            })),
        );
        registry.register(
            "attest_entries_by_level",
            "Entries in the ledger by verification level, from its counters",
            counted(counts.by_level.iter().map(|(level, n)| {
                (
                    Level {
                        level: level.clone(),
                    },
                    *n,
                )
            })),
        );
        registry.register(
            "attest_entries_by_system",
            "Entries in the ledger by system, from its counters",
            counted(
                capped(&counts.by_system)
                    .into_iter()
                    .map(|(system, n)| (System { system }, n)),
            ),
        );
        registry.register(
            "attest_pipeline_seconds",
            "Time one action spent in the pipeline (policy, gate, run, verify, append), in this process",
            self.pipeline.clone(),
        );
        registry.register(
            "attest_append_seconds",
            "Time one ledger append took, until durable, in this process",
            self.append.clone(),
        );
        if let Some(scrape) = serve {
            registry.register(
                "attest_actions",
                "Actions by decision, as the dashboard counts them (a write's intent and outcome are one)",
                counted(scrape.actions.iter().map(|(decision, n)| {
                    (
                        Decision {
                            decision: decision.clone(),
                        },
                        *n,
                    )
                })),
            );
            if let Some(pending) = scrape.pending {
                registry.register(
                    "attest_pending_approvals",
                    "Approval requests nobody has decided yet",
                    gauge(pending),
                );
            }
            registry.register(
                "attest_ledger_seq",
                "The newest seq in the ledger",
                gauge(scrape.seq),
            );
            registry.register(
                "attest_last_verify_timestamp_seconds",
                "When the background verifier last checked new entries (Unix time)",
                seconds(scrape.last_verify),
            );
            registry.register(
                "attest_last_full_verify_timestamp_seconds",
                "When the background verifier last checked the whole chain (Unix time)",
                seconds(scrape.last_full_verify),
            );
            registry.register(
                "attest_chain_broken",
                "1 when the background verifier found the chain broken",
                gauge(u64::from(scrape.broken_seq.is_some())),
            );
            registry.register(
                "attest_chain_first_broken_seq",
                "The first broken seq (0 when intact)",
                gauge(scrape.broken_seq.unwrap_or(0)),
            );
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systems_beyond_the_cap_are_summed_as_other() {
        let many: BTreeMap<String, u64> = (0..MAX_SYSTEMS + 5)
            .map(|i| (format!("s{i:04}"), 1))
            .collect();
        let kept = capped(&many);
        assert_eq!(kept.len(), MAX_SYSTEMS + 1);
        assert_eq!(kept["other"], 5);
        assert_eq!(kept.values().sum::<u64>(), many.len() as u64);
    }
}

//! `/metrics`: the figures in Prometheus (OpenMetrics) text format.
//!
//! - `attest_actions_total{decision,level,system}`: actions in the ledger (stage rows
//!   not counted), from the dashboard's read model;
//! - `attest_pipeline_seconds` and `attest_append_seconds`: histograms of one action's
//!   whole pipeline and of one ledger append, in this process, from the pipeline's
//!   tracing spans (see [`super::telemetry`]);
//! - `attest_pending_approvals`: approval requests nobody has decided;
//! - `attest_last_verify_timestamp_seconds`, `attest_last_full_verify_timestamp_seconds`,
//!   `attest_chain_broken`, `attest_chain_first_broken_seq`: the background verifier;
//! - `attest_ledger_seq`: the newest seq.
//!
//! Systems come from tool calls, so the `system` label is capped at
//! [`MAX_SYSTEMS`] distinct values; later ones are counted as `other`.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Distinct `system` label values kept.
pub(crate) const MAX_SYSTEMS: usize = 200;

/// The label set of `attest_actions_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ActionLabels {
    decision: String,
    level: String,
    system: String,
}

/// The process's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    actions: Family<ActionLabels, Counter>,
    systems: Mutex<HashSet<String>>,
    /// One action through the pipeline, seconds.
    pub(crate) pipeline: Histogram,
    /// One ledger append, seconds.
    pub(crate) append: Histogram,
    pending: Gauge,
    seq: Gauge,
    last_verify: Gauge<f64, AtomicU64>,
    last_full_verify: Gauge<f64, AtomicU64>,
    broken: Gauge,
    broken_seq: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The figures `/metrics` sets when it is scraped.
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    pub(crate) pending: Option<u64>,
    pub(crate) seq: u64,
    pub(crate) last_verify: Option<f64>,
    pub(crate) last_full_verify: Option<f64>,
    pub(crate) broken_seq: Option<u64>,
}

/// The metrics of this process (one registry, shared by the tracing layer and `/metrics`).
pub(crate) fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let actions = Family::<ActionLabels, Counter>::default();
        registry.register(
            "attest_actions",
            "Actions recorded in the ledger, by decision, verification level and system",
            actions.clone(),
        );
        // 0.25 ms .. ~8 s.
        let pipeline = Histogram::new(exponential_buckets(0.000_25, 2.0, 16));
        registry.register(
            "attest_pipeline_seconds",
            "Time one action spent in the pipeline (policy, gate, run, verify, append)",
            pipeline.clone(),
        );
        let append = Histogram::new(exponential_buckets(0.000_05, 2.0, 16));
        registry.register(
            "attest_append_seconds",
            "Time one ledger append took, until durable",
            append.clone(),
        );
        let pending = Gauge::default();
        registry.register(
            "attest_pending_approvals",
            "Approval requests nobody has decided yet",
            pending.clone(),
        );
        let seq = Gauge::default();
        registry.register(
            "attest_ledger_seq",
            "The newest seq in the ledger",
            seq.clone(),
        );
        let last_verify = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "attest_last_verify_timestamp_seconds",
            "When the background verifier last checked new entries (Unix time)",
            last_verify.clone(),
        );
        let last_full_verify = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "attest_last_full_verify_timestamp_seconds",
            "When the background verifier last checked the whole chain (Unix time)",
            last_full_verify.clone(),
        );
        let broken = Gauge::default();
        registry.register(
            "attest_chain_broken",
            "1 when the background verifier found the chain broken",
            broken.clone(),
        );
        let broken_seq = Gauge::default();
        registry.register(
            "attest_chain_first_broken_seq",
            "The first broken seq (0 when intact)",
            broken_seq.clone(),
        );
        Metrics {
            registry,
            actions,
            systems: Mutex::new(HashSet::new()),
            pipeline,
            append,
            pending,
            seq,
            last_verify,
            last_full_verify,
            broken,
            broken_seq,
        }
    }

    /// Counts one action.
    pub(crate) fn action(&self, decision: &str, level: &str, system: &str) {
        let system = {
            let mut systems = self.systems.lock().unwrap_or_else(PoisonError::into_inner);
            if systems.contains(system) {
                system
            } else if systems.len() < MAX_SYSTEMS {
                systems.insert(system.to_owned());
                system
            } else {
                "other"
            }
        };
        self.actions
            .get_or_create(&ActionLabels {
                decision: decision.to_owned(),
                level: level.to_owned(),
                system: system.to_owned(),
            })
            .inc();
    }

    /// The text a scrape answers, after setting the scrape-time figures.
    pub(crate) fn render(&self, scrape: &Scrape) -> Result<String, std::fmt::Error> {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        if let Some(pending) = scrape.pending {
            self.pending.set(gauge(pending));
        }
        self.seq.set(gauge(scrape.seq));
        if let Some(at) = scrape.last_verify {
            self.last_verify.set(at);
        }
        if let Some(at) = scrape.last_full_verify {
            self.last_full_verify.set(at);
        }
        self.broken.set(i64::from(scrape.broken_seq.is_some()));
        self.broken_seq.set(gauge(scrape.broken_seq.unwrap_or(0)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

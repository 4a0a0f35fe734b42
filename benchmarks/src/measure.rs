//! Timing and summary statistics.

use std::time::Instant;

use serde::Serialize;

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) samples: usize,
    pub(crate) mean_ns: f64,
    pub(crate) p50_ns: f64,
    pub(crate) p95_ns: f64,
    pub(crate) ops_per_sec: f64,
}

/// Times `op` `samples` times, one sample per call.
pub(crate) fn per_call(
    name: &str,
    samples: usize,
    mut op: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Row> {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        op()?;
        times.push(start.elapsed().as_nanos() as f64);
    }
    Ok(summarize(name, times, 1))
}

/// Times one run of `op` that performs `ops` operations; the row is per operation.
pub(crate) fn bulk(
    name: &str,
    ops: usize,
    op: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Row> {
    let start = Instant::now();
    op()?;
    let total = start.elapsed().as_nanos() as f64;
    Ok(summarize(name, vec![total], ops))
}

/// Times one run of `op` as a whole; the row is the whole run.
pub(crate) fn once(name: &str, op: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Row> {
    bulk(name, 1, op)
}

fn summarize(name: &str, mut times: Vec<f64>, ops_per_sample: usize) -> Row {
    times.sort_by(f64::total_cmp);
    let n = times.len().max(1);
    let per_op = ops_per_sample.max(1) as f64;
    let mean = times.iter().sum::<f64>() / n as f64 / per_op;
    let pick = |q: f64| {
        times
            .get(((n as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
            / per_op
    };
    Row {
        name: name.to_owned(),
        samples: times.len() * ops_per_sample.max(1),
        mean_ns: mean,
        p50_ns: pick(0.5),
        p95_ns: pick(0.95),
        ops_per_sec: if mean > 0.0 { 1e9 / mean } else { 0.0 },
    }
}

/// Nanoseconds as a short human figure.
pub(crate) fn human(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

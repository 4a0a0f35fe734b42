//! Timing, summary statistics, and the table.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) samples: usize,
    pub(crate) mean_ns: f64,
    pub(crate) p50_ns: f64,
    pub(crate) p95_ns: f64,
    pub(crate) p99_ns: f64,
    pub(crate) ops_per_sec: f64,
    /// For limit comparisons: the row this one is measured against, and the ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) versus: Option<(String, f64)>,
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

/// One sample of an operation, in nanoseconds: what [`paired`] takes turns with.
pub(crate) type Sampler<'a> = &'a mut dyn FnMut() -> anyhow::Result<f64>;

/// `op` as a [`Sampler`]: each call times one call of `op`.
pub(crate) fn timing(
    mut op: impl FnMut() -> anyhow::Result<()>,
) -> impl FnMut() -> anyhow::Result<f64> {
    move || {
        let start = Instant::now();
        op()?;
        Ok(start.elapsed().as_nanos() as f64)
    }
}

/// Samples of a row, then of its limit, by turns, where the two are measured in pairs
/// with [`paired`].
pub(crate) const PAIR_CHUNK: usize = 50;

/// Samples `a` and `b` by turns, `chunk` samples of one and then of the other, until
/// each has `samples`: a row and its limit row see the same minutes of a machine whose
/// speed drifts (on the 2-core virtual machine, a row read 2× apart in runs minutes
/// apart), so their ratio reads the code rather than the drift. A chunk rather than
/// single samples keeps each one's caches warm for most of its samples.
pub(crate) fn paired<'s>(
    samples: usize,
    chunk: usize,
    a: (&str, Sampler<'s>),
    b: (&str, Sampler<'s>),
) -> anyhow::Result<[Row; 2]> {
    <[Row; 2]>::try_from(by_turns(samples, chunk, vec![a, b])?)
        .map_err(|rows| anyhow::anyhow!("{} rows for two samplers", rows.len()))
}

/// [`paired`] for any number of samplers: a row, its limit and its floor, by turns.
pub(crate) fn by_turns(
    samples: usize,
    chunk: usize,
    mut samplers: Vec<(&str, Sampler<'_>)>,
) -> anyhow::Result<Vec<Row>> {
    let chunk = chunk.max(1);
    let mut times = vec![Vec::with_capacity(samples); samplers.len()];
    let mut taken = 0;
    while taken < samples {
        let take = chunk.min(samples - taken);
        for ((_, sample), times) in samplers.iter_mut().zip(&mut times) {
            for _ in 0..take {
                times.push(sample()?);
            }
        }
        taken += take;
    }
    Ok(samplers
        .iter()
        .zip(times)
        .map(|((name, _), times)| summarize(name, times, 1))
        .collect())
}

/// Two long runs by turns: `rounds` rounds, each a run of `a` then one of `b` (given the
/// round's number), each row its runs' total time per operation (`ops` per run): what
/// [`paired`] is for rows too long to sample one by one.
pub(crate) fn bulk_paired(
    rounds: usize,
    (name_a, ops_a, a): (&str, usize, &mut dyn FnMut(usize) -> anyhow::Result<()>),
    (name_b, ops_b, b): (&str, usize, &mut dyn FnMut(usize) -> anyhow::Result<()>),
) -> anyhow::Result<[Row; 2]> {
    let (mut total_a, mut total_b) = (0.0, 0.0);
    for round in 0..rounds {
        let start = Instant::now();
        a(round)?;
        total_a += start.elapsed().as_nanos() as f64;
        let start = Instant::now();
        b(round)?;
        total_b += start.elapsed().as_nanos() as f64;
    }
    Ok([
        summarize(name_a, vec![total_a], ops_a * rounds),
        summarize(name_b, vec![total_b], ops_b * rounds),
    ])
}

/// Times `op` in batches of `batch` calls, for operations too quick to time one by
/// one; each sample is a batch's mean.
pub(crate) fn per_call_batched(
    name: &str,
    samples: usize,
    batch: usize,
    mut op: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Row> {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        for _ in 0..batch {
            op()?;
        }
        times.push(start.elapsed().as_nanos() as f64 / batch as f64);
    }
    let mut row = summarize(name, times, 1);
    row.samples *= batch;
    Ok(row)
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

/// A row from per-call times measured elsewhere (in nanoseconds).
pub(crate) fn from_times(name: &str, times: Vec<f64>) -> Row {
    summarize(name, times, 1)
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
        p99_ns: pick(0.99),
        ops_per_sec: if mean > 0.0 { 1e9 / mean } else { 0.0 },
        versus: None,
    }
}

/// A row for a figure computed elsewhere: one operation of `ns`, `samples` times.
pub(crate) fn flat(name: &str, samples: usize, ns: f64) -> Row {
    Row {
        name: name.to_owned(),
        samples,
        mean_ns: ns,
        p50_ns: ns,
        p95_ns: ns,
        p99_ns: ns,
        ops_per_sec: 1e9 / ns.max(1.0),
        versus: None,
    }
}

/// Marks `row` as measured against the limit row named `limit`: ratio of p50s.
pub(crate) fn against(rows: &mut [Row], row: &str, limit: &str) {
    let limit_p50 = rows.iter().find(|r| r.name == limit).map(|r| r.p50_ns);
    if let (Some(limit_p50), Some(row)) = (limit_p50, rows.iter_mut().find(|r| r.name == row)) {
        if limit_p50 > 0.0 {
            row.versus = Some((limit.to_owned(), row.p50_ns / limit_p50));
        }
    }
}

/// The source system's rows, by name.
pub(crate) struct Peer {
    name: String,
    rows: HashMap<String, f64>,
    raw: serde_json::Value,
}

impl Peer {
    pub(crate) fn load(path: &Path) -> anyhow::Result<Peer> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let raw: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let rows = raw["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| Some((r["name"].as_str()?.to_owned(), r["p50_ns"].as_f64()?)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Peer {
            name: raw["peer"].as_str().unwrap_or("peer").to_owned(),
            rows,
            raw,
        })
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        self.raw.clone()
    }
}

/// Prints the table; with a peer, its p50 and how many times faster Attest is.
pub(crate) fn print_table(rows: &[Row], peer: Option<&Peer>) {
    let peer_head = peer
        .map(|p| {
            format!(
                " {:>12} | {:>8} |",
                format!("{} p50", short(&p.name)),
                "×faster"
            )
        })
        .unwrap_or_default();
    println!(
        "| {:<62} | {:>10} | {:>10} | {:>10} | {:>10} | {:>11} |{peer_head} {:<28}",
        "what", "mean", "p50", "p95", "p99", "ops/s", "vs limit (p50 ratio)"
    );
    let peer_rule = if peer.is_some() {
        "--------------|----------|"
    } else {
        ""
    };
    println!(
        "|{:-<64}|{:->12}|{:->12}|{:->12}|{:->12}|{:->13}|{peer_rule}{:-<29}",
        "", "", "", "", "", "", ""
    );
    for row in rows {
        let peer_cells = peer
            .map(|p| match p.rows.get(&row.name) {
                Some(&theirs) if row.p50_ns > 0.0 => {
                    format!(
                        " {:>12} | {:>8} |",
                        human(theirs),
                        format!("{:.0}×", theirs / row.p50_ns)
                    )
                }
                _ => format!(" {:>12} | {:>8} |", "-", "-"),
            })
            .unwrap_or_default();
        let versus = row
            .versus
            .as_ref()
            .map(|(limit, ratio)| format!("{ratio:.2}× {limit}"))
            .unwrap_or_default();
        println!(
            "| {:<62} | {:>10} | {:>10} | {:>10} | {:>10} | {:>11} |{peer_cells} {versus}",
            row.name,
            human(row.mean_ns),
            human(row.p50_ns),
            human(row.p95_ns),
            human(row.p99_ns),
            format!("{:.0}", row.ops_per_sec),
        );
    }
}

fn short(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::{bulk_paired, by_turns, paired};

    #[test]
    fn pairs_take_turns_a_chunk_at_a_time_until_each_has_its_samples() {
        let order = RefCell::new(String::new());
        let mut a = || {
            order.borrow_mut().push('a');
            Ok(10.0)
        };
        let mut b = || {
            order.borrow_mut().push('b');
            Ok(30.0)
        };
        let [row, limit] = paired(5, 2, ("row", &mut a), ("limit", &mut b)).unwrap();
        assert_eq!(order.into_inner(), "aabbaabbab");
        assert_eq!(
            (row.name.as_str(), row.samples, row.p50_ns),
            ("row", 5, 10.0)
        );
        assert_eq!(
            (limit.name.as_str(), limit.samples, limit.p50_ns),
            ("limit", 5, 30.0)
        );
    }

    #[test]
    fn a_row_its_limit_and_its_floor_take_turns_in_the_order_given() {
        let order = RefCell::new(String::new());
        let sampler = |letter: char, ns: f64| {
            let order = &order;
            move || {
                order.borrow_mut().push(letter);
                Ok(ns)
            }
        };
        let (mut a, mut b, mut c) = (sampler('a', 10.0), sampler('b', 20.0), sampler('c', 15.0));
        let rows = by_turns(
            3,
            2,
            vec![("row", &mut a), ("limit", &mut b), ("floor", &mut c)],
        )
        .unwrap();
        assert_eq!(order.into_inner(), "aabbccabc");
        let named: Vec<(&str, usize, f64)> = rows
            .iter()
            .map(|row| (row.name.as_str(), row.samples, row.p50_ns))
            .collect();
        assert_eq!(
            named,
            [("row", 3, 10.0), ("limit", 3, 20.0), ("floor", 3, 15.0)]
        );
    }

    #[test]
    fn long_runs_take_turns_a_round_at_a_time_and_count_every_operation() {
        let order = RefCell::new(Vec::new());
        let mut a = |round: usize| {
            order.borrow_mut().push(('a', round));
            Ok(())
        };
        let mut b = |round: usize| {
            order.borrow_mut().push(('b', round));
            Ok(())
        };
        let [row, limit] = bulk_paired(3, ("row", 10, &mut a), ("limit", 4, &mut b)).unwrap();
        assert_eq!(
            order.into_inner(),
            [('a', 0), ('b', 0), ('a', 1), ('b', 1), ('a', 2), ('b', 2)]
        );
        assert_eq!((row.name.as_str(), row.samples), ("row", 30));
        assert_eq!((limit.name.as_str(), limit.samples), ("limit", 12));
    }

    #[test]
    fn a_failing_sample_stops_the_pair() {
        let mut calls = 0;
        let mut a = || Ok(1.0);
        let mut b = || {
            calls += 1;
            anyhow::ensure!(calls < 2, "the limit failed");
            Ok(1.0)
        };
        let err = paired(10, 1, ("row", &mut a), ("limit", &mut b)).unwrap_err();
        assert_eq!(err.to_string(), "the limit failed");
    }
}

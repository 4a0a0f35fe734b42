//! Issue 27's targets, scored from one run: each target names a row, the limit row it
//! is read against (measured in the same process, in the same minutes) and a bound on
//! their ratio (or difference); the verdict is met, not met, or not measured when the
//! run left either row out.

use serde::Serialize;

use crate::measure::{human, Row};
use crate::scenarios::{Report, Scale};

/// What a target asks of its row beside its limit row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Bound {
    /// The row's p50 is at most this many times the limit's (a cost).
    AtMostTimes(f64),
    /// The row's rate (operations per second at p50) is at least this many times the
    /// limit's (a throughput).
    RateAtLeastTimes(f64),
    /// The row's p50 is at most this many nanoseconds above the limit's (what a process
    /// adds beyond starting).
    AtMostAbove(f64),
}

/// What a target's two figures are.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Unit {
    /// A row's p50, in nanoseconds.
    Time,
    /// A measure in bytes (peak resident memory).
    Bytes,
}

/// One target: `row` against `limit`, within `bound`.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) row: String,
    pub(crate) limit: String,
    pub(crate) bound: Bound,
    pub(crate) unit: Unit,
    /// A row measuring only what the ledger's format and design require beyond the
    /// limit (no code of Attest's): read against the same limit, it says whether any
    /// implementation could meet the bound on this machine.
    pub(crate) floor: Option<String>,
}

impl Target {
    fn new(name: &str, row: String, limit: String, bound: Bound) -> Target {
        Target {
            name: name.to_owned(),
            row,
            limit,
            bound,
            unit: Unit::Time,
            floor: None,
        }
    }

    fn bytes(mut self) -> Target {
        self.unit = Unit::Bytes;
        self
    }

    fn floor(mut self, floor: String) -> Target {
        self.floor = Some(floor);
        self
    }
}

/// Whether the run met a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Met,
    NotMet,
    /// The run did not measure the row or its limit row (or the limit was zero).
    NotMeasured,
}

impl Verdict {
    fn text(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// A target with what the run measured for it: as printed and as written to the JSON.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Scored {
    pub(crate) target: String,
    pub(crate) row: String,
    pub(crate) limit: String,
    pub(crate) unit: Unit,
    /// `at_most_times`, `rate_at_least_times` or `at_most_above_ns`.
    pub(crate) direction: &'static str,
    pub(crate) bound: f64,
    pub(crate) row_value: Option<f64>,
    pub(crate) limit_value: Option<f64>,
    /// The ratio (row / limit for a cost, limit / row for a rate) or, for
    /// [`Bound::AtMostAbove`], the difference row − limit in nanoseconds.
    pub(crate) measured: Option<f64>,
    pub(crate) verdict: Verdict,
    /// The floor row (see [`Target::floor`]), its figure, and its ratio to the limit
    /// measured as `measured` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) floor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) floor_value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) floor_measured: Option<f64>,
    /// The floor alone misses the bound: no implementation meets it on this machine.
    pub(crate) out_of_reach: bool,
}

/// Scores each target against figures looked up by row (or measure) name.
pub(crate) fn score(targets: &[Target], value: impl Fn(&str) -> Option<f64>) -> Vec<Scored> {
    targets
        .iter()
        .map(|target| {
            let row_value = value(&target.row);
            let limit_value = value(&target.limit);
            let (direction, bound) = match target.bound {
                Bound::AtMostTimes(x) => ("at_most_times", x),
                Bound::RateAtLeastTimes(x) => ("rate_at_least_times", x),
                Bound::AtMostAbove(ns) => ("at_most_above_ns", ns),
            };
            let measured = against(target.bound, row_value, limit_value);
            let verdict = match measured {
                None => Verdict::NotMeasured,
                Some(m) if within(target.bound, m) => Verdict::Met,
                Some(_) => Verdict::NotMet,
            };
            let floor_value = target.floor.as_deref().and_then(&value);
            let floor_measured = against(target.bound, floor_value, limit_value);
            Scored {
                target: target.name.clone(),
                row: target.row.clone(),
                limit: target.limit.clone(),
                unit: target.unit,
                direction,
                bound,
                row_value,
                limit_value,
                measured,
                verdict,
                floor: target.floor.clone(),
                floor_value,
                floor_measured,
                out_of_reach: floor_measured.is_some_and(|m| !within(target.bound, m)),
            }
        })
        .collect()
}

/// A row's figure beside its limit's, as `bound` reads them: row / limit for a cost,
/// limit / row for a rate (rates are the inverse of per-operation times), row − limit
/// for a difference; `None` without both, or with a figure of zero.
fn against(bound: Bound, row: Option<f64>, limit: Option<f64>) -> Option<f64> {
    match (row, limit) {
        (Some(row), Some(limit)) if row > 0.0 && limit > 0.0 => Some(match bound {
            Bound::AtMostTimes(_) => row / limit,
            Bound::RateAtLeastTimes(_) => limit / row,
            Bound::AtMostAbove(_) => row - limit,
        }),
        _ => None,
    }
}

/// Whether `measured` (as [`against`] gives it) is within `bound`.
fn within(bound: Bound, measured: f64) -> bool {
    match bound {
        Bound::AtMostTimes(x) | Bound::AtMostAbove(x) => measured <= x,
        Bound::RateAtLeastTimes(x) => measured >= x,
    }
}

/// Scores issue 27's targets against a run's rows (p50s) and measures.
pub(crate) fn score_report(scale: &Scale, report: &Report) -> Vec<Scored> {
    score(&issue_27(scale), |name| {
        lookup(&report.rows, &report.measures, name)
    })
}

fn lookup(rows: &[Row], measures: &[(String, f64)], name: &str) -> Option<f64> {
    rows.iter()
        .find(|row| row.name == name)
        .map(|row| row.p50_ns)
        .or_else(|| {
            measures
                .iter()
                .find(|(what, _)| what == name)
                .map(|(_, v)| *v)
        })
}

/// Row names the targets share with the code that measures them.
pub(crate) mod names {
    pub(crate) const POLICY_200_PARAMS: &str =
        "policy evaluate: 200 rules with params: conditions, a payment none matches";
    pub(crate) const POLICY_200_WHEN: &str =
        "policy evaluate: the same 200 rules with when: (CEL) conditions";
    pub(crate) const ACTION_NORMAL: &str = "whole action: act + ack, file-backed (normal)";
    pub(crate) const TWO_COMMITS: &str =
        "limit: two bare INSERTs of the same row + tree rows, two commits, prepared (normal)";
    pub(crate) const APPEND_NORMAL: &str = "ledger append, one row (normal)";
    pub(crate) const FILED_LIMIT: &str =
        "limit: bare INSERT + tree rows + counters and run/action_id lookups every 64 rows, prepared (normal)";
    pub(crate) const TASKS_64: &str = "throughput: 64 concurrent tasks (full), per action";
    pub(crate) const GROUP_COMMIT: &str =
        "limit: group commit, 64 writers of bare prepared INSERTs, up to 64 rows per synced commit, two rows per action (full), per action";
    pub(crate) const PG_TASKS_64: &str =
        "postgres: 64 concurrent tasks, whole actions (full), per action";
    pub(crate) const PG_GROUP_COMMIT: &str =
        "limit: postgres group commit, 64 writers of bare prepared INSERTs, up to 64 rows per synced commit, two rows per action, per action";
    pub(crate) const PG_APPEND: &str = "postgres: ledger append, one row (full)";
    pub(crate) const PG_BARE_INSERT: &str =
        "limit: postgres bare INSERT of the same row, one round trip + commit (autocommit)";
    pub(crate) const CLI_VERSION: &str = "cli: attest --version (a process)";
    pub(crate) const APPEND_FLOOR: &str =
        "floor: the filed limit, and the record's JSON (serde_json), its SHA-256, leaf hash and one tree node hash (normal)";
    pub(crate) const ACTION_FLOOR: &str =
        "floor: the whole action's two commits, with run + action_id columns, counters and lookups every 64 rows, and the call-digest row read and written in each, prepared (normal)";

    pub(crate) fn full_verify(rows: usize) -> String {
        format!("full verify of {rows} rows (signatures checked)")
    }
    pub(crate) fn one_core_sha(rows: usize) -> String {
        format!("limit: raw SHA-256 of {rows} bodies on one core, whole run")
    }
    pub(crate) fn verify_peak_rss(rows: usize) -> String {
        format!("peak RSS of a process verifying {rows} rows")
    }
    pub(crate) fn since_checkpoint(size: usize) -> String {
        format!("growth: verify --since-checkpoint, 100 rows after {size}")
    }
    pub(crate) fn since_checkpoint_limit(size: usize) -> String {
        format!(
            "limit: since-checkpoint after {size}: read 100 bodies + SHA-256, one signed-note open, tree root from stored hashes"
        )
    }
    pub(crate) fn since_checkpoint_floor(size: usize) -> String {
        format!(
            "floor: since-checkpoint after {size}: the limit, reading the eleven checked columns and the 100 leaves' stored tree hashes"
        )
    }
    pub(crate) fn full_verify_reads(rows: usize) -> String {
        format!("one connection reading the eleven checked columns of {rows} rows and every stored tree hash, whole run")
    }
    pub(crate) fn full_verify_floor(rows: usize) -> String {
        format!("floor: full verify of {rows} rows: (those reads + one-core SHA-256) shared by all cores, whole run")
    }
    pub(crate) fn pg_batched(rows: usize) -> String {
        format!("postgres: {rows} appends in batches of 10000 (full), per append")
    }
    pub(crate) fn pg_bare_batched(rows: usize) -> String {
        format!("limit: postgres bare multi-row INSERT (unnest) of {rows} rows in batches of 10000, per row")
    }
    pub(crate) fn pg_batched_floor(rows: usize) -> String {
        format!("floor: postgres multi-row INSERT of {rows} rows in batches of 10000 with their stored tree hashes and action-id lookups in the same statement, per row")
    }
    pub(crate) fn cli_import(rows: usize) -> String {
        format!("cli: attest import of {rows} exported rows (a process)")
    }
    pub(crate) fn cli_executemany(rows: usize) -> String {
        format!("limit: python sqlite3 executemany of the same {rows} rows, one transaction (a process)")
    }
    pub(crate) fn cli_verify(rows: usize) -> String {
        format!("cli: attest verify of {rows} rows (a process)")
    }
    pub(crate) fn cli_openssl(rows: usize) -> String {
        format!("limit: openssl dgst -sha256 of the export of {rows} rows (a process)")
    }
    pub(crate) fn cli_since_checkpoint(rows: usize) -> String {
        format!("cli: attest verify --since-checkpoint, 100 rows after {rows} (a process)")
    }
}

/// The ledger sizes the growth rows measure since-checkpoint verify at (the largest is
/// the batched ledger).
pub(crate) fn growth_sizes(scale: &Scale) -> [usize; 3] {
    [scale.big_rows / 100, scale.big_rows / 10, scale.big_rows]
}

/// How much bigger "flat" lets the largest ledger's figure be than the smallest's:
/// issue 27 says flat without a number; this is our reading of it.
pub(crate) const FLAT: f64 = 1.25;

/// Issue 27's targets at this scale.
pub(crate) fn issue_27(scale: &Scale) -> Vec<Target> {
    use names::*;
    let big = scale.big_rows;
    let [small, _, _] = growth_sizes(scale);
    let cli = scale.bulk_rows;
    let mut targets = vec![
        Target::new(
            "whole action act + ack, normal: ≤ 1.2× two bare commits",
            ACTION_NORMAL.to_owned(),
            TWO_COMMITS.to_owned(),
            Bound::AtMostTimes(1.2),
        )
        .floor(ACTION_FLOOR.to_owned()),
        Target::new(
            "append, normal: ≤ 1.1× its filed limit",
            APPEND_NORMAL.to_owned(),
            FILED_LIMIT.to_owned(),
            Bound::AtMostTimes(1.1),
        )
        .floor(APPEND_FLOOR.to_owned()),
        Target::new(
            "64 concurrent tasks, full, SQLite: ≥ 0.6× the group-commit limit's actions/s",
            TASKS_64.to_owned(),
            GROUP_COMMIT.to_owned(),
            Bound::RateAtLeastTimes(0.6),
        ),
        Target::new(
            "64 concurrent tasks, full, PostgreSQL: ≥ 0.6× the group-commit limit's actions/s",
            PG_TASKS_64.to_owned(),
            PG_GROUP_COMMIT.to_owned(),
            Bound::RateAtLeastTimes(0.6),
        ),
        Target::new(
            "full verify: ≤ 1.5× raw one-core SHA-256 of the bodies",
            full_verify(big),
            one_core_sha(big),
            Bound::AtMostTimes(1.5),
        )
        .floor(full_verify_floor(big)),
        Target::new(
            "full verify: memory flat",
            verify_peak_rss(big),
            verify_peak_rss(small),
            Bound::AtMostTimes(FLAT),
        )
        .bytes(),
    ];
    for size in growth_sizes(scale) {
        targets.push(
            Target::new(
                &format!("since-checkpoint after {size} rows: ≤ 1.5× its limit"),
                since_checkpoint(size),
                since_checkpoint_limit(size),
                Bound::AtMostTimes(1.5),
            )
            .floor(since_checkpoint_floor(size)),
        );
    }
    targets.extend([
        Target::new(
            "since-checkpoint: flat from the smallest ledger to the largest",
            since_checkpoint(big),
            since_checkpoint(small),
            Bound::AtMostTimes(FLAT),
        ),
        Target::new(
            "PostgreSQL one row, full: ≤ 1.2× one bare INSERT round trip + commit",
            PG_APPEND.to_owned(),
            PG_BARE_INSERT.to_owned(),
            Bound::AtMostTimes(1.2),
        ),
        Target::new(
            "PostgreSQL batched: ≤ 2× a bare multi-row INSERT",
            pg_batched(big),
            pg_bare_batched(big),
            Bound::AtMostTimes(2.0),
        )
        .floor(pg_batched_floor(big)),
        Target::new(
            "CLI import: ≤ 3× a bare executemany in one transaction",
            cli_import(cli),
            cli_executemany(cli),
            Bound::AtMostTimes(3.0),
        ),
        Target::new(
            "CLI verify: ≤ 2× openssl dgst -sha256 of the export",
            cli_verify(cli),
            cli_openssl(cli),
            Bound::AtMostTimes(2.0),
        ),
        Target::new(
            "issue 51: 200 rules with when: decide in ≤ 2× the same rules without",
            POLICY_200_WHEN.to_owned(),
            POLICY_200_PARAMS.to_owned(),
            Bound::AtMostTimes(2.0),
        ),
        Target::new(
            "CLI verify --since-checkpoint: ≤ 0.6 ms above attest --version",
            cli_since_checkpoint(cli),
            CLI_VERSION.to_owned(),
            Bound::AtMostAbove(0.6e6),
        ),
    ]);
    targets
}

fn figure(unit: Unit, value: Option<f64>) -> String {
    match (unit, value) {
        (_, None) => "-".to_owned(),
        (Unit::Time, Some(ns)) => human(ns),
        (Unit::Bytes, Some(bytes)) => format!("{:.1} MiB", bytes / (1024.0 * 1024.0)),
    }
}

/// The measured ratio or difference, and the bound, as the table shows them.
fn measured_and_bound(scored: &Scored) -> (String, String) {
    let bound = match scored.direction {
        "at_most_above_ns" => format!("≤ +{}", human(scored.bound)),
        "rate_at_least_times" => format!("rate ≥ {}×", scored.bound),
        _ => format!("≤ {}×", scored.bound),
    };
    (measured_text(scored.direction, scored.measured), bound)
}

/// A figure as [`against`] gives it (a difference or a ratio), written for `direction`.
fn measured_text(direction: &str, measured: Option<f64>) -> String {
    match (direction, measured) {
        (_, None) => "-".to_owned(),
        ("at_most_above_ns", Some(ns)) => {
            format!("{}{}", if ns < 0.0 { "−" } else { "+" }, human(ns.abs()))
        }
        (_, Some(m)) => format!("{m:.2}×"),
    }
}

/// The targets as a Markdown table (what benchmarks/README.md quotes).
pub(crate) fn table(scored: &[Scored]) -> String {
    let mut out = String::from(
        "| target | row | p50 | limit row | p50 | measured | bound | verdict | floor |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in scored {
        let (measured, bound) = measured_and_bound(s);
        let mut floor = measured_text(s.direction, s.floor_measured);
        if s.out_of_reach {
            floor.push_str(": out of reach");
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.target,
            s.row,
            figure(s.unit, s.row_value),
            s.limit,
            figure(s.unit, s.limit_value),
            measured,
            bound,
            s.verdict.text(),
            floor
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(bound: Bound) -> Target {
        Target::new("t", "row".to_owned(), "limit".to_owned(), bound)
    }

    fn figures(row: f64, limit: f64) -> impl Fn(&str) -> Option<f64> {
        move |name| match name {
            "row" => Some(row),
            "limit" => Some(limit),
            _ => None,
        }
    }

    fn verdict(bound: Bound, row: f64, limit: f64) -> Verdict {
        score(&[target(bound)], figures(row, limit))[0].verdict
    }

    #[test]
    fn a_cost_is_met_at_or_under_its_bound() {
        assert_eq!(verdict(Bound::AtMostTimes(1.2), 110.0, 100.0), Verdict::Met);
        assert_eq!(verdict(Bound::AtMostTimes(1.5), 150.0, 100.0), Verdict::Met);
        assert_eq!(
            verdict(Bound::AtMostTimes(1.2), 130.0, 100.0),
            Verdict::NotMet
        );
    }

    #[test]
    fn a_rate_is_met_at_or_over_its_bound() {
        // Times per action: the row takes 150 where the limit takes 100, so its rate is
        // 0.67× the limit's.
        let scored = &score(
            &[target(Bound::RateAtLeastTimes(0.6))],
            figures(150.0, 100.0),
        )[0];
        assert_eq!(scored.verdict, Verdict::Met);
        assert!((scored.measured.unwrap() - 100.0 / 150.0).abs() < 1e-9);
        assert_eq!(
            verdict(Bound::RateAtLeastTimes(0.6), 200.0, 100.0),
            Verdict::NotMet
        );
        // Faster than the limit is met too: the direction is "at least".
        assert_eq!(
            verdict(Bound::RateAtLeastTimes(0.6), 50.0, 100.0),
            Verdict::Met
        );
    }

    #[test]
    fn a_difference_is_met_at_or_under_its_bound() {
        let scored = &score(&[target(Bound::AtMostAbove(0.6e6))], figures(3.5e6, 3.0e6))[0];
        assert_eq!(scored.verdict, Verdict::Met);
        assert_eq!(scored.measured, Some(0.5e6));
        assert_eq!(
            verdict(Bound::AtMostAbove(0.6e6), 3.7e6, 3.0e6),
            Verdict::NotMet
        );
    }

    #[test]
    fn a_missing_row_or_limit_is_not_measured() {
        let only_row = |name: &str| (name == "row").then_some(100.0);
        let only_limit = |name: &str| (name == "limit").then_some(100.0);
        for lookup in [&only_row as &dyn Fn(&str) -> Option<f64>, &only_limit] {
            let scored = &score(&[target(Bound::AtMostTimes(2.0))], lookup)[0];
            assert_eq!(scored.verdict, Verdict::NotMeasured);
            assert_eq!(scored.measured, None);
        }
        // A zero limit gives no ratio rather than an infinite one.
        assert_eq!(
            verdict(Bound::AtMostTimes(2.0), 100.0, 0.0),
            Verdict::NotMeasured
        );
    }

    #[test]
    fn the_table_says_each_verdict() {
        let scored = score(
            &[
                target(Bound::AtMostTimes(1.2)),
                target(Bound::AtMostAbove(0.6e6)),
                Target::new(
                    "gone",
                    "nowhere".into(),
                    "limit".into(),
                    Bound::AtMostTimes(1.0),
                ),
            ],
            figures(130.0, 100.0),
        );
        let table = table(&scored);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(
            lines[2].ends_with("| 1.30× | ≤ 1.2× | not met | - |"),
            "{}",
            lines[2]
        );
        assert!(lines[3].ends_with("| met | - |"), "{}", lines[3]);
        assert!(
            lines[4].ends_with("| - | ≤ 1× | not measured | - |"),
            "{}",
            lines[4]
        );
    }

    #[test]
    fn a_floor_beyond_the_bound_is_out_of_reach_and_the_table_says_so() {
        let with_floor = |floor: f64| {
            let target = target(Bound::AtMostTimes(1.2)).floor("floor".to_owned());
            score(&[target], move |name| match name {
                "row" => Some(250.0),
                "limit" => Some(100.0),
                "floor" => Some(floor),
                _ => None,
            })
        };
        let beyond = with_floor(140.0);
        assert!(beyond[0].out_of_reach);
        assert_eq!(beyond[0].floor_measured, Some(1.4));
        assert!(table(&beyond).contains("| not met | 1.40×: out of reach |"));
        let within = with_floor(110.0);
        assert!(!within[0].out_of_reach);
        assert!(table(&within).contains("| not met | 1.10× |"));
        // No floor row measured: nothing is claimed either way.
        let unmeasured = score(
            &[target(Bound::AtMostTimes(1.2)).floor("gone".to_owned())],
            figures(250.0, 100.0),
        );
        assert!(!unmeasured[0].out_of_reach);
        assert!(table(&unmeasured).ends_with("| not met | - |\n"));
        // A floor beside a difference bound is a difference too, written as its row's is.
        let above = score(
            &[target(Bound::AtMostAbove(2e6)).floor("floor".to_owned())],
            |name| match name {
                "row" => Some(5e6),
                "limit" => Some(1e6),
                "floor" => Some(4e6),
                _ => None,
            },
        );
        assert!(above[0].out_of_reach);
        assert!(
            table(&above)
                .ends_with("| +4.00 ms | ≤ +2.00 ms | not met | +3.00 ms: out of reach |\n"),
            "{}",
            table(&above)
        );
    }

    #[test]
    fn every_target_of_a_scale_names_two_different_rows() {
        for target in issue_27(&Scale::quick()) {
            assert_ne!(target.row, target.limit, "{}", target.name);
        }
    }
}

//! `attest digest`: what agents did in a window, per agent and system, with anomaly
//! flags measured against each agent's own history.
//!
//! The window is `[until - since, until)`; the baseline is the `--baseline` span before
//! it, cut into windows of the same length so "a normal window" has a mean and a spread.
//! Rows are read from the first one appended at or after the baseline's start (found
//! by bisecting on seq, not by scanning), and each action is placed by when it happened
//! (an imported row's source time). Stage rows (intents, pending asks) are not actions
//! of their own: the row that completes them is counted.
//!
//! Flags, each with the numbers that raised it:
//! - `new_system` / `new_verb`: a system, or a system's verb, the agent never used in
//!   the baseline;
//! - `volume_spike`: more actions than the baseline's mean plus three standard
//!   deviations (and at least twice the mean, and at least [`MIN_SPIKE`]);
//! - `failure_spike`: `unverified` or failed actions at three times the baseline's rate
//!   per window (and at least [`MIN_BAD`]);
//! - `off_hours`: actions at hours of the day (UTC) that held under 1% of the agent's
//!   baseline actions (needs [`MIN_HOURS_BASELINE`] baseline actions);
//! - `external_burst`: actions on external recipients at three times the baseline's
//!   mean per window (and at least [`MIN_EXTERNAL`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use attest_ledger::{format_ts, Ledger, LedgerError};
use serde::Serialize;

use super::rows::{unix_secs, RowView};
use super::shadow::ShadowTally;
use crate::count::{counted, n_actions};

/// The fewest actions in a window that can be a volume spike.
pub(crate) const MIN_SPIKE: u64 = 10;
/// The fewest `unverified`/failed actions that can be a failure spike.
pub(crate) const MIN_BAD: u64 = 3;
/// The fewest external actions that can be a burst.
pub(crate) const MIN_EXTERNAL: u64 = 5;
/// The fewest baseline actions that say which hours are usual.
pub(crate) const MIN_HOURS_BASELINE: u64 = 20;

/// What to digest.
#[derive(Debug, Clone, Copy)]
pub struct DigestOptions {
    /// The window's end (exclusive).
    pub until: SystemTime,
    /// The window's length.
    pub window: Duration,
    /// How far back before the window the baseline reaches.
    pub baseline: Duration,
}

/// The digest: totals per agent and system, and the flags.
#[derive(Debug, Serialize)]
pub struct Digest {
    /// The window, `[from, until)`.
    pub(crate) window: Span,
    /// The baseline, `[from, until)`, and how many windows it holds.
    pub(crate) baseline: Baseline,
    /// Actions in the window.
    pub(crate) actions: u64,
    /// Flags raised, over all agents.
    pub(crate) flag_count: usize,
    /// One entry per agent that acted in the window or raised a flag.
    pub(crate) agents: Vec<AgentDigest>,
    /// Calls in the window that ran in shadow mode and policy would have refused or
    /// asked about (they count as `act` in `decisions`: they ran).
    pub(crate) shadow: ShadowTally,
}

/// A time span.
#[derive(Debug, Serialize)]
pub(crate) struct Span {
    pub(crate) from: String,
    pub(crate) until: String,
}

/// The baseline span.
#[derive(Debug, Serialize)]
pub(crate) struct Baseline {
    pub(crate) from: String,
    pub(crate) until: String,
    /// Window-length slices in it.
    pub(crate) windows: u64,
    /// Actions in it, over all agents. With none there is nothing to compare with: the
    /// ledger is younger than the window, and no flag is raised.
    pub(crate) actions: u64,
}

/// One agent's window.
#[derive(Debug, Serialize)]
pub(crate) struct AgentDigest {
    pub(crate) agent: String,
    pub(crate) actions: u64,
    pub(crate) baseline_actions: u64,
    pub(crate) systems: Vec<SystemDigest>,
    pub(crate) flags: Vec<Flag>,
}

/// One system of one agent, in the window.
#[derive(Debug, Default, Serialize)]
pub(crate) struct SystemDigest {
    pub(crate) system: String,
    pub(crate) actions: u64,
    pub(crate) decisions: BTreeMap<String, u64>,
    pub(crate) levels: BTreeMap<String, u64>,
    pub(crate) verbs: BTreeMap<String, u64>,
}

/// An anomaly, with the numbers that raised it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Flag {
    /// `new_system`, `new_verb`, `volume_spike`, `failure_spike`, `off_hours`, `external_burst`.
    pub(crate) kind: &'static str,
    pub(crate) agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) verb: Option<String>,
    /// The window's figure.
    pub(crate) value: f64,
    /// The baseline figure it was compared with (a mean per window, a count, a share).
    pub(crate) baseline: f64,
    /// Why, in words and numbers.
    pub(crate) why: String,
}

/// What one agent did in the baseline.
#[derive(Debug, Default)]
struct History {
    actions: u64,
    per_window: BTreeMap<u64, u64>,
    bad: u64,
    external_per_window: BTreeMap<u64, u64>,
    external: u64,
    systems: BTreeSet<String>,
    verbs: BTreeSet<(String, String)>,
    hours: [u64; 24],
}

/// What one agent did in the window.
#[derive(Debug, Default)]
struct Current {
    actions: u64,
    unverified: u64,
    failed: u64,
    external: u64,
    external_targets: BTreeSet<String>,
    systems: BTreeMap<String, SystemDigest>,
    hours: [u64; 24],
}

/// Reads the ledger and computes the digest.
pub fn digest(ledger: &Ledger, options: DigestOptions) -> Result<Digest, LedgerError> {
    let window_secs = options.window.as_secs().max(1);
    // Whole seconds, rounded up: a row appended earlier in the current second (the call
    // that just ran) is inside a window that ends now.
    let until = unix_secs(options.until + Duration::from_nanos(999_999_999));
    let from = until.saturating_sub(window_secs);
    let windows = (options.baseline.as_secs() / window_secs).max(1);
    let baseline_from = from.saturating_sub(windows * window_secs);
    let mut history: BTreeMap<String, History> = BTreeMap::new();
    let mut current: BTreeMap<String, Current> = BTreeMap::new();
    let mut shadow = ShadowTally::default();
    let start = attest_core::replay::first_seq_at_or_after(
        ledger,
        SystemTime::UNIX_EPOCH + Duration::from_secs(baseline_from),
    )?;
    ledger.for_each_row(start, |row| {
        let Some(view) = RowView::parse(row.body) else {
            return Ok(true);
        };
        if view.is_stage() {
            return Ok(true);
        }
        let Some(at) = view.happened().map(unix_secs) else {
            return Ok(true);
        };
        if at < baseline_from || at >= until {
            return Ok(true);
        }
        let agent = view.agent_name().to_owned();
        let hour = usize::try_from(at % 86_400 / 3_600).unwrap_or(0);
        let external = view.target_class == "external";
        let level = view.level();
        let bad = level == "unverified" || view.status() == "failed";
        if at < from {
            let h = history.entry(agent).or_default();
            let slot = (at - baseline_from) / window_secs;
            h.actions += 1;
            *h.per_window.entry(slot).or_default() += 1;
            h.bad += u64::from(bad);
            if external {
                h.external += 1;
                *h.external_per_window.entry(slot).or_default() += 1;
            }
            h.systems.insert(view.system.to_string());
            h.verbs
                .insert((view.system.to_string(), view.verb.to_string()));
            h.hours[hour.min(23)] += 1;
        } else {
            shadow.add(row.seq, &view);
            let c = current.entry(agent).or_default();
            c.actions += 1;
            c.unverified += u64::from(level == "unverified");
            c.failed += u64::from(view.status() == "failed");
            if external {
                c.external += 1;
                if let Some(target) = &view.target {
                    c.external_targets.insert(target.to_string());
                }
            }
            c.hours[hour.min(23)] += 1;
            let system = c
                .systems
                .entry(view.system.to_string())
                .or_insert_with(|| SystemDigest {
                    system: view.system.to_string(),
                    ..SystemDigest::default()
                });
            system.actions += 1;
            // An imported row's decision and level are its source's claim, counted apart.
            let imported = view.is_imported();
            let decision = if imported {
                format!("{} (imported)", view.decision)
            } else {
                view.decision.to_string()
            };
            *system.decisions.entry(decision).or_default() += 1;
            let level = if level.is_empty() { "none" } else { level };
            *system
                .levels
                .entry(super::rows::claimed(imported, level))
                .or_default() += 1;
            *system.verbs.entry(view.verb.to_string()).or_default() += 1;
        }
        Ok(true)
    })?;
    let empty = History::default();
    // No action before the window at all: every system would be "new" and every count a
    // spike against nothing.
    let baseline_actions: u64 = history.values().map(|h| h.actions).sum();
    let mut agents = Vec::new();
    let mut flag_count = 0;
    let mut actions = 0;
    for (agent, now) in current {
        let past = history.get(&agent).unwrap_or(&empty);
        let flags = if baseline_actions == 0 {
            Vec::new()
        } else {
            flags_for(&agent, &now, past, windows, options.window)
        };
        flag_count += flags.len();
        actions += now.actions;
        agents.push(AgentDigest {
            agent,
            actions: now.actions,
            baseline_actions: past.actions,
            systems: now.systems.into_values().collect(),
            flags,
        });
    }
    let ts = |secs: u64| format_ts(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
    Ok(Digest {
        window: Span {
            from: ts(from),
            until: ts(until),
        },
        baseline: Baseline {
            from: ts(baseline_from),
            until: ts(from),
            windows,
            actions: baseline_actions,
        },
        actions,
        flag_count,
        agents,
        shadow,
    })
}

/// The flags one agent's window raises against its history.
fn flags_for(
    agent: &str,
    now: &Current,
    past: &History,
    windows: u64,
    window: Duration,
) -> Vec<Flag> {
    let mut flags = Vec::new();
    let span = span_words(window);
    let previous = span_words(window.saturating_mul(u32::try_from(windows).unwrap_or(u32::MAX)));
    let flag = |kind, system: Option<&str>, verb: Option<&str>, value, baseline, why| Flag {
        kind,
        agent: agent.to_owned(),
        system: system.map(str::to_owned),
        verb: verb.map(str::to_owned),
        value,
        baseline,
        why,
    };
    let used = if past.systems.is_empty() {
        "no earlier actions".to_owned()
    } else {
        format!(
            "{} on {}",
            counted(past.actions, "earlier action"),
            past.systems.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    for (name, system) in &now.systems {
        if !past.systems.contains(name) {
            flags.push(flag(
                "new_system",
                Some(name),
                None,
                count(system.actions),
                0.0,
                format!(
                    "first use of {name}: {} in the window; the baseline holds {used}",
                    n_actions(system.actions)
                ),
            ));
            continue;
        }
        for (verb, n) in &system.verbs {
            if !past.verbs.contains(&(name.clone(), verb.clone())) {
                let known: Vec<&str> = past
                    .verbs
                    .iter()
                    .filter(|(s, _)| s == name)
                    .map(|(_, v)| v.as_str())
                    .collect();
                flags.push(flag(
                    "new_verb",
                    Some(name),
                    Some(verb),
                    count(*n),
                    0.0,
                    format!(
                        "first {name} {verb}: {} in the window; earlier {name} verbs: {}",
                        n_actions(*n),
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    let (mean, sd) = mean_sd(&past.per_window, windows);
    let value = count(now.actions);
    if now.actions >= MIN_SPIKE && value > mean + 3.0 * sd.max(1.0) && value >= 2.0 * mean {
        flags.push(flag(
            "volume_spike",
            None,
            None,
            value,
            mean,
            format!(
                "{} actions in the last {span}, against a mean of {mean:.1} (sd {sd:.1}) per {span} over the previous {previous}",
                now.actions
            ),
        ));
    }
    let bad = now.unverified + now.failed;
    let bad_mean = count(past.bad) / count(windows);
    if bad >= MIN_BAD && count(bad) >= 3.0 * bad_mean {
        flags.push(flag(
            "failure_spike",
            None,
            None,
            count(bad),
            bad_mean,
            format!(
                "{bad} of {} actions unverified or failed ({} unverified, {} failed), against a mean of {bad_mean:.1} per {span} ({} in the previous {previous})",
                now.actions, now.unverified, now.failed, past.bad
            ),
        ));
    }
    if past.actions >= MIN_HOURS_BASELINE {
        let unusual: Vec<usize> = (0..24)
            .filter(|&h| now.hours[h] > 0 && past.hours[h] * 100 < past.actions)
            .collect();
        let outside: u64 = unusual.iter().map(|&h| now.hours[h]).sum();
        if outside > 0 {
            let share: u64 = unusual.iter().map(|&h| past.hours[h]).sum();
            let usual: Vec<String> = (0..24)
                .filter(|&h| past.hours[h] * 100 >= past.actions)
                .map(|h| format!("{h:02}"))
                .collect();
            flags.push(flag(
                "off_hours",
                None,
                None,
                count(outside),
                count(share),
                format!(
                    "{} at {} UTC, hours that held {share} of the agent's {} baseline actions (usual hours, UTC: {})",
                    n_actions(outside),
                    unusual.iter().map(|h| format!("{h:02}:00")).collect::<Vec<_>>().join(", "),
                    past.actions,
                    usual.join(" ")
                ),
            ));
        }
    }
    let (ext_mean, _) = mean_sd(&past.external_per_window, windows);
    if now.external >= MIN_EXTERNAL && count(now.external) >= 3.0 * ext_mean.max(1.0) {
        flags.push(flag(
            "external_burst",
            None,
            None,
            count(now.external),
            ext_mean,
            format!(
                "{} actions on external recipients ({} distinct targets) in the last {span}, against a mean of {ext_mean:.1} per {span} ({} in the previous {previous})",
                now.external,
                now.external_targets.len(),
                past.external
            ),
        ));
    }
    flags
}

/// A window's length in words: `day`, `6 hours`, `90 minutes` (humantime's `1day` reads
/// badly in a sentence).
fn span_words(window: Duration) -> String {
    let secs = window.as_secs().max(1);
    let (n, unit) = [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ]
    .into_iter()
    .find(|&(size, _)| secs.is_multiple_of(size))
    .map_or((secs, "second"), |(size, unit)| (secs / size, unit));
    match n {
        1 => unit.to_owned(),
        n => format!("{n} {unit}s"),
    }
}

/// A count as a float, for rates and means.
fn count(n: u64) -> f64 {
    // Counts stay far below 2^53.
    #[allow(clippy::cast_precision_loss)]
    let n = n as f64;
    n
}

/// Mean and population standard deviation per window, empty windows included.
fn mean_sd(per_window: &BTreeMap<u64, u64>, windows: u64) -> (f64, f64) {
    let n = count(windows.max(1));
    // Summed as integers: a float sum of nothing is -0.0, printed "-0.0".
    let mean = count(per_window.values().sum::<u64>()) / n;
    let filled = per_window.len() as u64;
    let empty = count(windows.saturating_sub(filled));
    let var = (per_window
        .values()
        .map(|&c| (count(c) - mean).powi(2))
        .sum::<f64>()
        + empty * mean * mean)
        / n;
    (mean, var.sqrt())
}

/// The digest as text for a terminal.
pub fn render_text(digest: &Digest) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "digest {} .. {} (baseline from {}, {} windows): {}, {}",
        digest.window.from,
        digest.window.until,
        digest.baseline.from,
        digest.baseline.windows,
        n_actions(digest.actions),
        counted(digest.flag_count as u64, "flag")
    );
    if digest.baseline.actions == 0 {
        let _ = writeln!(
            out,
            "no baseline: the ledger holds no action between {} and {}, so nothing is \
             compared and no flag is raised (flags need history before the window)",
            digest.baseline.from, digest.baseline.until
        );
    }
    for agent in &digest.agents {
        let _ = writeln!(
            out,
            "\nagent {}: {} (baseline {})",
            agent.agent,
            n_actions(agent.actions),
            agent.baseline_actions
        );
        for system in &agent.systems {
            let join = |map: &BTreeMap<String, u64>| {
                map.iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "  {:<16} {:>6}  {} | {}",
                system.system,
                system.actions,
                join(&system.decisions),
                join(&system.levels)
            );
        }
        for flag in &agent.flags {
            let _ = writeln!(out, "  ! {}: {}", flag.kind, flag.why);
        }
    }
    if !digest.shadow.is_empty() {
        out.push('\n');
        out.push_str(&digest.shadow.render_text());
    }
    out
}

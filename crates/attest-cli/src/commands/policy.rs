use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_core::{CallContext, Describer, DetectInput};
use attest_ledger::{LedgerError, WindowClaim};
use attest_policy::{
    lint, run_cases_with, Action, CaseCall, Policy, Verdict, Window, MAX_POLICY_BYTES,
};
use serde_json::json;

use crate::cli::{
    PolicyCheckArgs, PolicyCommand, PolicyExplainArgs, PolicyReplayArgs, PolicyTestArgs,
};
use crate::commands::detect::{annotations, describe, input, print};
use crate::config::{load_policy, read_text, Config};

pub(crate) fn run(config: &Config, command: &PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Explain(args) => explain(config, args),
        PolicyCommand::Check(args) => check(args),
        PolicyCommand::Test(args) => test(config, args),
        PolicyCommand::Replay(args) => replay(config, args),
    }
}

fn explain(config: &Config, args: &PolicyExplainArgs) -> anyhow::Result<ExitCode> {
    let policy = config.policy()?;
    let params = match &args.params {
        Some(text) => Some(serde_json::from_str(text).context("--params is not JSON")?),
        None => None,
    };
    // Described as the doors describe it: with the configured registry files and hosts.
    let context = CallContext {
        agent: args.agent.as_deref(),
        actor: args.actor.as_deref(),
        target: args.target.as_deref(),
        run: None,
    };
    let hints = annotations(&args.call)?;
    let action = describe(
        &config.describer()?,
        &input(&args.call)?,
        params,
        hints,
        context,
    )
    .map_err(anyhow::Error::msg)?;
    let mut verdict = policy.evaluate(&action)?;
    let windows = window_figures(config, &verdict);
    // As a call made now would be decided: the first window this call would cross.
    let crossed = windows.iter().find_map(|(window, figure)| match figure {
        Ok(figure) if window.crosses(*figure) => Some(window.crossed(*figure)),
        _ => None,
    });
    if let Some(crossed) = crossed {
        verdict = crossed;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut report = verdict.report(&action);
        report["windows"] = windows
            .iter()
            .map(|(window, figure)| {
                json!({
                    "rule": window.rule,
                    "scope": window.scope,
                    "measure": window.measure,
                    "per": window.per,
                    "max": window.max,
                    "figure": figure.as_ref().ok(),
                    "adds": window.adds,
                    "crosses": figure.as_ref().ok().map(|f| window.crosses(*f)),
                    "error": figure.as_ref().err(),
                })
            })
            .collect();
        if let Some(dedupe) = &verdict.dedupe {
            report["dedupe"] = json!({
                "rule": dedupe.rule,
                "window": dedupe.window,
                "decision": dedupe.decision,
            });
        }
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    print(&mut out, &action)?;
    writeln!(
        out,
        "tier {}  target class {}  decision {}{}",
        verdict.tier,
        verdict.target_class.as_str(),
        verdict.decision,
        if verdict.hold {
            " (held until edited)"
        } else {
            ""
        }
    )?;
    for (rule, reason) in verdict.rules_fired.iter().zip(&verdict.reasons) {
        writeln!(out, "  {rule}: {reason}")?;
    }
    for reason in verdict.reasons.iter().skip(verdict.rules_fired.len()) {
        writeln!(out, "  {reason}")?;
    }
    if !verdict.approver_members.is_empty() {
        writeln!(out, "approvers: {}", verdict.approver_members.join(", "))?;
    }
    for (window, figure) in &windows {
        let line = match figure {
            Ok(figure) => format!(
                "{}; this call {}",
                window.standing(*figure),
                if window.crosses(*figure) {
                    "would cross it"
                } else {
                    "fits"
                }
            ),
            Err(err) => format!("{} (the figure could not be read: {err})", window.scope),
        };
        let line = crate::terminal::escape(&line);
        writeln!(out, "window {}: {line}", window.rule)?;
    }
    if let Some(dedupe) = &verdict.dedupe {
        writeln!(
            out,
            "dedupe {}: the same call again within {} is {} (if it ran within it)",
            crate::terminal::escape(&dedupe.rule),
            crate::terminal::escape(&dedupe.window),
            match dedupe.decision {
                attest_policy::Decision::Refuse => "refused",
                _ => "asked about",
            }
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The verdict's windows with their current figures in the configured ledger (0 when
/// there is no ledger yet); a figure that cannot be read is said so, per window.
fn window_figures(config: &Config, verdict: &Verdict) -> Vec<(Window, Result<f64, String>)> {
    if verdict.windows.is_empty() {
        return Vec::new();
    }
    let claims: Vec<WindowClaim> = verdict
        .windows
        .iter()
        .map(|w| WindowClaim {
            key: w.key.clone(),
            per: std::time::Duration::from_secs(w.per_secs),
            max: w.max,
            adds: w.adds,
        })
        .collect();
    let figures: Result<Vec<f64>, String> = match config.open_ledger_read_only() {
        Ok(ledger) => ledger
            .window_figures(&claims)
            .map_err(|err| attest_core::error_chain(&err)),
        // No ledger yet: nothing ran.
        Err(err)
            if err
                .chain()
                .any(|c| matches!(c.downcast_ref(), Some(LedgerError::NotFound { .. }))) =>
        {
            Ok(vec![0.0; claims.len()])
        }
        Err(err) => Err(format!("{err:#}")),
    };
    verdict
        .windows
        .iter()
        .enumerate()
        .map(|(i, window)| {
            let figure = match &figures {
                Ok(figures) => figures
                    .get(i)
                    .copied()
                    .ok_or_else(|| "no figure".to_owned()),
                Err(err) => Err(err.clone()),
            };
            (window.clone(), figure)
        })
        .collect()
}

/// `attest policy replay`: the candidate is the policy this invocation names
/// (`--policy`, else the configured one).
fn replay(config: &Config, args: &PolicyReplayArgs) -> anyhow::Result<ExitCode> {
    use attest_core::replay::{replay, ReplayScope};
    let candidate = config.policy()?;
    let ledger = config.open_ledger_read_only()?;
    let scope = ReplayScope {
        since: args.since.map(|span| std::time::SystemTime::now() - span),
        run: args.run.clone(),
        agent: args.agent.clone(),
    };
    let bar = crate::commands::tiles::progress_bar("replaying", args.json);
    if let Some(bar) = &bar {
        bar.set_length(ledger.tip()?.map_or(0, |(seq, _)| seq));
    }
    let report = replay(&ledger, &candidate, &scope, &mut |seq| {
        if let Some(bar) = &bar {
            bar.set_position(seq);
        }
    })
    .context("reading the ledger to replay")?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{} replayed: {} unchanged, {} change, {} undecidable",
        crate::count::n_actions(report.actions),
        report.unchanged,
        report.transitions.iter().map(|t| t.count).sum::<u64>(),
        report.undecidable.iter().map(|u| u.count).sum::<u64>(),
    )?;
    if !report.transitions.is_empty() {
        writeln!(
            out,
            "\n{:<8} {:<8} {:>9}  candidate rules / examples",
            "from", "to", "actions"
        )?;
        for t in &report.transitions {
            writeln!(
                out,
                "{:<8} {:<8} {:>9}  {}",
                t.from,
                t.to,
                t.count,
                t.rules.join(", ")
            )?;
            for (seq, label) in t.examples.iter().zip(&t.example_labels) {
                let label = crate::terminal::escape(label);
                writeln!(out, "{:28}seq {seq}: {label}", "")?;
            }
        }
    }
    for u in &report.undecidable {
        writeln!(
            out,
            "undecidable: rule {} needs params the ledger does not keep ({})",
            u.rule,
            crate::count::n_actions(u.count)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn check(args: &PolicyCheckArgs) -> anyhow::Result<ExitCode> {
    let text = read_text(&args.file, MAX_POLICY_BYTES as u64)?;
    let problems = lint(&text, &args.file.display().to_string());
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &problems)?;
        writeln!(out)?;
    } else if problems.is_empty() {
        writeln!(out, "{}: ok", args.file.display())?;
    } else {
        for problem in &problems {
            writeln!(out, "{problem}")?;
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn test(config: &Config, args: &PolicyTestArgs) -> anyhow::Result<ExitCode> {
    let policy = load_policy(&args.file)?;
    let cases = read_text(&args.cases, MAX_POLICY_BYTES as u64)?;
    // The cases' calls are described as production describes them: with the configured
    // registry, so a CI test of the policy and the doors agree.
    let describer = config.describer()?;
    let report = run_cases_with(
        &policy,
        &cases,
        &args.cases.display().to_string(),
        &|call| resolve_call(&describer, call),
    )?;
    writeln!(std::io::stdout().lock(), "{report}")?;
    Ok(if report.all_passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A policy case's `call:` as the doors would see it: a tool on the server it names
/// (that server is the system), or an HTTP request whose body gives the params.
fn resolve_call(describer: &Describer, call: &CaseCall) -> Result<Action, String> {
    let body = call.body_bytes();
    let input = match (&call.tool, &call.method, &call.url) {
        (Some(name), _, _) => match &call.server {
            Some(server) => DetectInput::NamedServerTool { name, server },
            None => DetectInput::Tool { name, server: None },
        },
        (None, Some(method), Some(url)) => DetectInput::Http {
            method,
            url,
            body: body.as_deref(),
        },
        _ => return Err("a call needs a tool, or a method and a url".to_owned()),
    };
    let mut action = describe(
        describer,
        &input,
        call.params.clone(),
        Default::default(),
        CallContext::default(),
    )?;
    call.fill_people(&mut action);
    Ok(action)
}

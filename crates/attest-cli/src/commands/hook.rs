//! `attest hook claude-code`: Claude Code's hook events in, its JSON contract out.
//!
//! Claude Code runs one process per event, so a call is two visits:
//! - `PreToolUse`: policy decides. `act` answers `allow`; `ask` answers `ask` (Claude Code
//!   puts the call to its user, who stands in for the approver); `refuse` answers `deny`
//!   with the reasons, which Claude reads, and the refusal is recorded at once.
//! - `PostToolUse` / `PostToolUseFailure`: the call ran (or failed); the pipeline records
//!   it with the same decision, the output checked by its shape (hashed, never stored).
//!   A call policy asks about is recorded as approved by `claude-code-prompt`: the person
//!   at Claude Code's permission prompt, whom Attest does not authenticate.
//!
//! Anything that cannot be decided (bad JSON, a policy that does not load, a ledger that
//! cannot record) is answered `deny`: a hook that fails open is no hook. A call that ran
//! but cannot be recorded is answered `"decision": "block"` with the reason.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use attest_core::detect::{detect_action, DetectInput};
use attest_core::{Attest, AutoGate, Gate, RejectGate};
use attest_policy::{Action, Decision};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli::{HookArgs, HookCommand};
use crate::config::Config;

/// The largest event read from stdin (a `PostToolUse` carries the tool's whole output).
const MAX_EVENT_BYTES: u64 = 32 * 1024 * 1024;

/// Who approved a call policy asked about: the person at Claude Code's permission prompt.
pub(crate) const PROMPT_APPROVER: &str = "claude-code-prompt";

/// The framework recorded for hook calls.
const FRAMEWORK: &str = "claude-code";

/// The fields of a hook event Attest reads; others are ignored.
#[derive(Debug, Deserialize)]
struct Event {
    hook_event_name: String,
    #[serde(default)]
    tool_name: String,
    #[serde(default)]
    tool_input: Value,
    #[serde(default)]
    tool_response: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
}

pub(crate) fn run(config: &Config, command: &HookCommand) -> anyhow::Result<ExitCode> {
    let HookCommand::ClaudeCode(args) = command;
    let mut input = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_EVENT_BYTES + 1)
        .read_to_end(&mut input)
        .context("cannot read the hook event from stdin")?;
    let answer = match answer(config, args, &input) {
        Ok(answer) => answer,
        Err(err) if is_post(&input) => {
            // The call already ran: tell Claude its record is missing (`attest ledger`
            // shows the intent row of a write that has no outcome).
            eprintln!("attest: hook: {err:#}");
            json!({
                "decision": "block",
                "reason": format!("The call ran, but Attest could not record it: {err:#}"),
            })
        }
        Err(err) => {
            eprintln!("attest: hook: {err:#}");
            pre_answer(
                "deny",
                &format!("Attest could not decide this call, so it did not run: {err:#}"),
            )
        }
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answer)?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}

/// True when `input` is a `PostToolUse` or `PostToolUseFailure` event (read again only
/// when answering it failed).
fn is_post(input: &[u8]) -> bool {
    serde_json::from_slice::<Value>(input)
        .ok()
        .and_then(|event| {
            let name = event.get("hook_event_name")?.as_str()?.to_owned();
            Some(name.starts_with("PostToolUse"))
        })
        .unwrap_or(false)
}

/// The answer to one event.
fn answer(config: &Config, args: &HookArgs, input: &[u8]) -> anyhow::Result<Value> {
    if input.len() as u64 > MAX_EVENT_BYTES {
        anyhow::bail!("the hook event is larger than {MAX_EVENT_BYTES} bytes");
    }
    let event: Event = serde_json::from_slice(input)
        .context("the hook event is not the JSON Claude Code sends")?;
    match event.hook_event_name.as_str() {
        "PreToolUse" => pre_tool_use(config, args, &event),
        "PostToolUse" => {
            let response = event.tool_response.clone().unwrap_or(Value::Null);
            post_tool_use(config, args, &event, Ok(response))
        }
        "PostToolUseFailure" => {
            let error = event
                .error
                .clone()
                .unwrap_or_else(|| "the tool failed".to_owned());
            post_tool_use(config, args, &event, Err(error))
        }
        // Events Attest has nothing to say about.
        _ => Ok(json!({})),
    }
}

/// The action a hook event describes.
fn action(args: &HookArgs, event: &Event) -> Action {
    let input = DetectInput::CodingTool {
        name: &event.tool_name,
        input: &event.tool_input,
    };
    let mut action = detect_action(&input, event.tool_input.clone());
    action.extra.framework = Some(FRAMEWORK.to_owned());
    action.agent = Some(args.agent.clone());
    action.actor.clone_from(&args.actor);
    action.run_id.clone_from(&event.session_id);
    action
}

fn pre_tool_use(config: &Config, args: &HookArgs, event: &Event) -> anyhow::Result<Value> {
    let action = action(args, event);
    // Core decides, as for a governed call (a policy that fails refuses).
    let attest = pipeline(config, args, config.policy()?, RejectGate)?;
    let verdict = attest.verdict(&action);
    let reasons = verdict.reasons.join("; ");
    let label = format!("{}.{}", action.system, action.verb.as_str());
    Ok(match verdict.decision {
        Decision::Act => pre_answer("allow", &format!("Attest: {label} acts ({reasons})")),
        Decision::Ask => pre_answer(
            "ask",
            &format!("Attest: {label} needs a person's approval ({reasons})"),
        ),
        Decision::Refuse | Decision::Recorded => {
            // Record the refusal: the pipeline decides again and never calls the tool.
            let outcome = runtime()?.block_on(
                attest
                    .call(action)
                    .run(|_| async { Err::<Value, _>("not run: refused before it ran") }),
            );
            let seq = outcome
                .map(|outcome| format!(", ledger seq {}", outcome.receipt().seq))
                .unwrap_or_default();
            pre_answer(
                "deny",
                &format!(
                    "Attest refused {label}: {reasons}{seq}. It did not run; do not retry it."
                ),
            )
        }
    })
}

fn post_tool_use(
    config: &Config,
    args: &HookArgs,
    event: &Event,
    outcome: Result<Value, String>,
) -> anyhow::Result<Value> {
    let action = action(args, event);
    let policy = config.policy()?;
    // The call ran: a person at Claude Code's prompt let through what policy asked about.
    let attest = pipeline(config, args, policy, AutoGate::approve(PROMPT_APPROVER))?;
    let recorded = runtime()?.block_on(attest.call(action).run(|_| async move { outcome }));
    let recorded = recorded.context("the call ran but could not be recorded")?;
    if let Some(why) = recorded.why_not_run() {
        // Policy refuses now what ran anyway (the policy changed in between, or no
        // PreToolUse hook is installed): the refusal row says so.
        anyhow::bail!("the call ran, but policy refuses it: {why}")
    }
    let receipt = recorded.into_receipt();
    if let Some(warning) = &receipt.warning {
        eprintln!("attest: hook: {warning}");
    }
    // Nothing for Claude to read: the row is the answer (`attest ledger` shows it).
    Ok(json!({}))
}

/// The pipeline for one event: the configured ledger and policy, and `gate` for asks.
fn pipeline(
    config: &Config,
    args: &HookArgs,
    policy: attest_policy::PolicyEngine,
    gate: impl Gate + 'static,
) -> anyhow::Result<Attest> {
    let ledger = config.open_ledger(true)?;
    Ok(Attest::builder()
        .ledger(ledger)
        .policy(policy)
        .gate(gate)
        .shadow(config.file.shadow(args.shadow))
        .build()?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// A `PreToolUse` answer.
fn pre_answer(decision: &str, reason: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    })
}

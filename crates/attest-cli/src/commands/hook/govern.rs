//! What every agent's hook does between its contract's parse and its answer: the same
//! detection, policy, approvals and record for Claude Code, Codex, Gemini, Cursor and
//! Copilot.

use std::time::Duration;

use async_trait::async_trait;
use attest_core::config::HookApprovals;
use attest_core::handoff;
use attest_core::{
    Attest, CallContext, CodingAgentCall, CountedVerdict, Gate, GateDecision, Level, ProtocolCall,
    RejectGate,
};
use attest_policy::{Action, Decision, Verdict};
use serde_json::Value;

use super::counted::CountedCalls;
use super::event::{self, AfterNote, Contract, Ruling, ToolCall};
use super::sandboxed::Sandboxing;
use super::{holds, pipeline, runtime};
use crate::cli::{HookApprovalsArg, HookArgs};
use crate::config::Config;

/// How long before the agent's own timeout a waiting hook answers.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// One event's settings: the configuration, and the hook's own flags over it.
pub(crate) struct Settings {
    pub(crate) config: Config,
    /// The agent recorded.
    pub(crate) agent: String,
    /// The actor recorded.
    pub(crate) actor: Option<String>,
    /// Who answers an ask.
    pub(crate) approvals: HookApprovals,
    /// How long a held call waits for an approver before the hook answers.
    pub(crate) wait: Duration,
    /// The agent's contract.
    pub(crate) contract: &'static dyn Contract,
    /// Whether shell commands run inside `attest sandbox` where the agent can be told to
    /// (`hook.sandbox`).
    pub(crate) sandbox: bool,
    /// How this event's shell command runs (`None`: not a shell command), recorded in its
    /// rows; set once the call is read ([`super::sandboxed::prepare`]).
    pub(crate) shell: Option<Sandboxing>,
}

impl Settings {
    /// The flags, else the configuration file's `hook` settings, else the defaults.
    pub(crate) fn new(
        config: Config,
        args: &HookArgs,
        contract: &'static dyn Contract,
    ) -> anyhow::Result<Settings> {
        let approvals = match args.approvals {
            Some(HookApprovalsArg::Prompt) => HookApprovals::Prompt,
            Some(HookApprovalsArg::Attest) => HookApprovals::Attest,
            None => config.file.hook.approvals.unwrap_or(HookApprovals::Prompt),
        };
        let wait = args
            .wait
            .map(Duration::from_secs)
            .or(config.file.hook.wait)
            .unwrap_or_else(|| contract.timeout().saturating_sub(TIMEOUT_MARGIN));
        Ok(Settings {
            agent: config
                .agent
                .as_ref()
                .map_or_else(|| contract.name().to_owned(), |agent| agent.value.clone()),
            actor: config.actor.as_ref().map(|actor| actor.value.clone()),
            approvals,
            wait,
            contract,
            sandbox: config.file.hook.sandbox.unwrap_or(false),
            shell: None,
            config,
        })
    }
}

/// The action a call describes: the agent's tool call as core's coding-agent call,
/// detected with the configured registry, with the agent, actor and session recorded.
pub(crate) fn action(attest: &Attest, settings: &Settings, call: &ToolCall) -> Action {
    let mut action = attest.action(ProtocolCall::CodingAgent(CodingAgentCall {
        agent: settings.contract.name(),
        tool: &call.tool,
        input: call.input.clone(),
        params: Some(call.params.clone()),
        session: call.session.as_deref(),
        readings: call.readings.clone(),
        // Relative paths the call writes are resolved where the agent runs it: the event's
        // folder, or the hook's own (filled in by `hook::answer` before it enters the project).
        cwd: call.cwd.as_deref(),
        context: CallContext {
            agent: Some(&settings.agent),
            actor: settings.actor.as_deref(),
            ..CallContext::default()
        },
    }));
    // A shell command's row says whether it runs below its text or only judged by it.
    action.extra.sandboxed = settings.shell.map(|shell| shell.sandboxed);
    action
}

/// `github.create`.
pub(crate) fn label(action: &Action) -> String {
    format!("{}.{}", action.system, action.verb.as_str())
}

/// Before the call: policy decides; a refusal is recorded at once.
pub(crate) fn before(settings: &Settings, call: &ToolCall) -> anyhow::Result<Ruling> {
    // Core decides, as for a governed call (a policy that fails refuses).
    let attest = pipeline(&settings.config, RejectGate)?;
    let mut action = action(&attest, settings, call);
    // Budgets and rates checked now: a call past one is asked about before it runs, and
    // a call allowed under one is counted now, so two sessions racing at a cap are not
    // both allowed (see `counted`).
    let CountedVerdict { verdict, counted } =
        runtime()?.block_on(attest.verdict_counted(&mut action));
    // The id the after-event records the call under: one counted in its windows, or
    // whose intent is recorded now.
    let kept = CountedCalls::new(settings, call)?;
    if counted {
        kept.keep(&action.id)?;
    }
    let reasons = verdict.reasons.join("; ");
    let label = label(&action);
    Ok(match verdict.decision {
        Decision::Act if action.verb.is_read() => {
            Ruling::Allow(format!("Attest: {label} acts ({reasons})"))
        }
        Decision::Act => {
            let id = action.id.clone();
            let ruling = intend(&attest, action, &label, &reasons)?;
            if !counted && matches!(ruling, Ruling::Allow(_)) {
                kept.keep(&id)?;
            }
            ruling
        }
        Decision::Ask => match settings.approvals {
            HookApprovals::Prompt if call.unprompted.is_some() => {
                let gate = ModeGate::new(settings, call);
                denied(settings, gate, action, &label, &reasons)?
            }
            HookApprovals::Prompt if settings.contract.enforces_ask(call) => {
                // The prompt decides: the attempt is recorded now as an intent put to it,
                // closed by the after-event if the prompt lets it run.
                let channel = prompt_channel(settings);
                let receipt = runtime()?.block_on(attest.intend_asked(action, &channel))?;
                if !counted {
                    kept.keep(&receipt.action_id)?;
                }
                Ruling::Ask(format!(
                    "Attest: {label} needs a person's approval ({reasons}); ledger seq {}",
                    receipt.seq
                ))
            }
            HookApprovals::Prompt => {
                let gate = ModeGate::with_note(format!(
                    "Attest would have asked a person, and {} cannot ask for one, so \
                     Attest's policy denied it.",
                    settings.contract.title()
                ));
                denied(settings, gate, action, &label, &reasons)?
            }
            HookApprovals::Attest => holds::before(settings, call, action, &label)?,
        },
        Decision::Refuse | Decision::Recorded => {
            // Record the refusal: the pipeline decides again and never calls the tool.
            let outcome = runtime()?.block_on(attest.call(action).run(never_run));
            let seq = outcome
                .map(|outcome| format!(", ledger seq {}", outcome.receipt().seq))
                .unwrap_or_default();
            Ruling::Deny(format!(
                "Attest refused {label}: {reasons}{seq}. It did not run; do not retry it."
            ))
        }
    })
}

/// A write that acts: its intent recorded through the pipeline (counted, its digest
/// claimed) before the hook allows it; the after-event closes it. What the pipeline does
/// not clear (an earlier attempt of the same call still open) is denied, recorded.
fn intend(attest: &Attest, action: Action, label: &str, reasons: &str) -> anyhow::Result<Ruling> {
    let attest = attest.clone();
    let call = handoff(move |tool| async move { attest.call(action).run(tool).await });
    Ok(match runtime()?.block_on(call.cleared()) {
        // Dropped here: the intent row stands until the after-event closes it.
        Ok(_cleared) => Ruling::Allow(format!("Attest: {label} acts ({reasons})")),
        Err(Ok(outcome)) => {
            let seq = outcome.receipt().seq;
            let why = outcome
                .why_not_run()
                .unwrap_or_else(|| "it was not cleared to run".to_owned());
            Ruling::Deny(format!(
                "Attest did not let {label} run: {why} (ledger seq {seq}). Tell the user."
            ))
        }
        Err(Err(err)) => return Err(err.into()),
    })
}

/// An ask nobody can answer here (the agent's mode prompts nobody, or the agent cannot
/// ask): recorded as Attest's policy deciding, with `gate`'s note, and denied.
fn denied(
    settings: &Settings,
    gate: ModeGate,
    action: Action,
    label: &str,
    reasons: &str,
) -> anyhow::Result<Ruling> {
    let note = gate.note.clone();
    let attest = pipeline(&settings.config, gate)?;
    let seq = runtime()?
        .block_on(attest.call(action).run(never_run))?
        .receipt()
        .seq;
    Ok(Ruling::Deny(format!(
        "Attest: {label} needs a person's approval ({reasons}). {} It did not run (ledger \
         seq {seq}). Tell the user; with Attest approvals (`--approvals attest`) an approver \
         can allow it.",
        note
    )))
}

/// The channel of the agent's own permission prompt (`claude-code-prompt`).
fn prompt_channel(settings: &Settings) -> String {
    format!("{}-prompt", settings.contract.name())
}

/// At the agent's own permission prompt: deny what policy refuses, leave the rest to the
/// person there (the call was already decided before it).
pub(crate) fn permission(settings: &Settings, call: &ToolCall) -> Ruling {
    let verdict = pipeline(&settings.config, RejectGate)
        .map(|attest| attest.verdict(&action(&attest, settings, call)));
    match verdict {
        Ok(Verdict {
            decision: Decision::Refuse,
            reasons,
            ..
        }) => Ruling::Deny(format!("Attest refused it: {}", reasons.join("; "))),
        Ok(_) => Ruling::Abstain,
        Err(err) => Ruling::Deny(format!("Attest could not decide this call: {err:#}")),
    }
}

/// After the call: the outcome recorded (ran or failed), read back where it can be.
pub(crate) fn after(
    settings: &Settings,
    call: &ToolCall,
    outcome: Result<Value, String>,
) -> anyhow::Result<AfterNote> {
    let outcome = outcome.map(event::tool_result);
    let reported = outcome.clone();
    let tool = |_: Value| async move { outcome };
    // A call counted in its windows, or whose intent was recorded, when it was allowed
    // is recorded under that id.
    let counted_as = CountedCalls::new(settings, call)?.take()?;
    if let Some(id) = &counted_as {
        // Its intent closed: the outcome row follows it (an ask put to the agent's prompt
        // closes as that prompt's approval, naming nobody).
        let attest = pipeline(&settings.config, RejectGate)?;
        let mut action = action(&attest, settings, call);
        action.id.clone_from(id);
        let channel = prompt_channel(settings);
        let closed = runtime()?.block_on(attest.close_intent(action, reported.clone(), &channel));
        if let Some(receipt) = closed? {
            return Ok(note_for(receipt));
        }
    }
    let recorded_action = |attest: &Attest| {
        let mut action = action(attest, settings, call);
        if let Some(id) = &counted_as {
            action.id.clone_from(id);
        }
        action
    };
    let recorded = match settings.approvals {
        HookApprovals::Attest => match holds::take_claimed(settings, call)? {
            // The call an approver allowed, retried: the approval is used, and the row
            // names who approved it.
            Some(token) => {
                let attest = pipeline(&settings.config, RejectGate)?;
                let action = recorded_action(&attest);
                runtime()?.block_on(
                    attest
                        .call(attest_core::Start::retry(&token, action))
                        .run(tool),
                )
            }
            None => {
                let attest = pipeline(&settings.config, RejectGate)?;
                let action = recorded_action(&attest);
                runtime()?.block_on(attest.call(action).run(tool))
            }
        },
        HookApprovals::Prompt
            if call.unprompted.is_some() || !settings.contract.enforces_ask(call) =>
        {
            // No prompt was shown, so an ask was denied before the call and nobody
            // approved it: what the agent reports is recorded as reported, never as
            // approved.
            let attest = pipeline(&settings.config, RejectGate)?;
            let action = recorded_action(&attest);
            if runtime()?.block_on(attest.verdict_now(&action)).decision == Decision::Ask {
                return ran_though_denied(settings, &attest, action, reported);
            }
            runtime()?.block_on(attest.call(action).run(tool))
        }
        HookApprovals::Prompt => {
            // The call ran: whoever sat at the agent's prompt let through what policy
            // asked about. Nobody was authenticated, and the row says so.
            let gate = PromptGate {
                channel: prompt_channel(settings),
            };
            let attest = pipeline(&settings.config, gate)?;
            let action = recorded_action(&attest);
            runtime()?.block_on(attest.call(action).run(tool))
        }
    };
    let recorded = recorded.map_err(anyhow::Error::from)?;
    if let Some(why) = recorded.why_not_run() {
        // Policy refuses now what ran anyway (the policy changed in between, no hook ran
        // before the call, or an ask ran without an approval): the row says so.
        anyhow::bail!("the call ran, but Attest did not allow it: {why}")
    }
    Ok(note_for(recorded.into_receipt()))
}

/// An after-event for a call the hook denied because policy asks and nobody could be
/// asked: the agent says it ran, so it is recorded as reported (decision `recorded`, no
/// approval, its result hashed), and the model is told Attest had denied it.
fn ran_though_denied(
    settings: &Settings,
    attest: &Attest,
    action: Action,
    result: Result<Value, String>,
) -> anyhow::Result<AfterNote> {
    let label = label(&action);
    let result = result.unwrap_or_else(|error| serde_json::json!({ "error": error }));
    let receipt = runtime()?.block_on(attest.record(action, Some(&result)))?;
    let seq = receipt.seq;
    let mut note = note_for(receipt);
    let denied = format!(
        "Attest denied {label} before it ran (it needs a person's approval and {} asked \
         nobody), yet the call was reported as run: recorded as reported, not approved \
         (ledger seq {seq}). Tell the user.",
        settings.contract.title()
    );
    note.context = Some(match note.context {
        Some(context) => format!("{denied}\n{context}"),
        None => denied,
    });
    Ok(note)
}

/// A call the agent reports after the fact (no hook could stop it first): recorded as
/// it happened.
pub(crate) fn reported(
    settings: &Settings,
    call: &ToolCall,
    result: &Value,
) -> anyhow::Result<AfterNote> {
    let attest = pipeline(&settings.config, RejectGate)?;
    let action = action(&attest, settings, call);
    let receipt = runtime()?.block_on(attest.record(action, Some(result)))?;
    Ok(note_for(receipt))
}

/// What the model must hear about a recorded call: a read-back that contradicted it.
fn note_for(receipt: attest_core::Receipt) -> AfterNote {
    if let Some(warning) = &receipt.warning {
        eprintln!("attest: hook: {warning}");
    }
    let context = (receipt.level == Some(Level::Unverified)).then(|| {
        format!(
            "Attest read the result back from its system and it did not match (unverified, \
             ledger seq {}): do not report this call as done; check it first.",
            receipt.seq
        )
    });
    AfterNote {
        context,
        unrecorded: None,
    }
}

/// The tool of a call a hook decides before it runs: the hook never runs it.
pub(crate) async fn never_run(_params: Value) -> Result<Value, &'static str> {
    Err("not run: a hook decides before the agent runs its tool")
}

/// Stands in for the person at the agent's own permission prompt: it names no approver,
/// so the row says nobody was authenticated.
struct PromptGate {
    channel: String,
}

#[async_trait]
impl Gate for PromptGate {
    async fn decide(&self, _action: &Action, _verdict: &Verdict) -> GateDecision {
        GateDecision::Approve {
            approver: String::new(),
            channel: self.channel.clone(),
        }
    }
}

/// Answers an ask where the agent's mode prompts nobody (or whose hold was forged):
/// rejected by Attest's policy, naming no approver, the why in the note.
pub(super) struct ModeGate {
    note: String,
}

impl ModeGate {
    /// Rejects with `note`.
    pub(super) fn with_note(note: String) -> ModeGate {
        ModeGate { note }
    }

    fn new(settings: &Settings, call: &ToolCall) -> ModeGate {
        ModeGate {
            note: format!(
                "Attest would have asked a person, and {}'s permission mode `{}` prompts \
                 nobody, so Attest's policy denied it.",
                settings.contract.title(),
                call.unprompted.as_deref().unwrap_or("unknown")
            ),
        }
    }
}

#[async_trait]
impl Gate for ModeGate {
    async fn decide(&self, _action: &Action, _verdict: &Verdict) -> GateDecision {
        GateDecision::Reject {
            approver: String::new(),
            channel: "attest-policy".to_owned(),
            note: Some(self.note.clone()),
        }
    }
}

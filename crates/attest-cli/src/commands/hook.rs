//! `attest hook <agent>`: a coding agent's hook event in, its JSON contract out.
//!
//! Each agent's contract (the JSON it sends on stdin, the JSON it reads back, and what
//! it does with an `ask`) lives in a module of its own ([`claude_code`], [`codex`],
//! [`gemini`], [`cursor`], [`copilot`]); they turn the agent's event into one
//! agent-neutral [`event::ToolCall`] in the tool vocabulary `detect` knows, and a
//! [`event::Ruling`] back into the agent's answer. What happens between is the same for
//! every agent ([`govern`]):
//!
//! - Before the call: policy decides, and every attempt leaves its row before anything
//!   runs. `act` allows (a write's intent recorded first, through the pipeline; a read
//!   is recorded after it ran, as reads have no intent); `refuse` denies with the
//!   reasons (recorded at once); `ask` goes to the agent's own prompt where the agent
//!   enforces one (recorded at once as an intent put to that prompt), is a deny,
//!   recorded at once as Attest's policy deciding, where the agent cannot ask or its
//!   mode prompts nobody, or, with `--approvals attest`, becomes a durable approval
//!   request that outlives the hook ([`holds`]).
//! - After the call: the intent is closed by its outcome row (ran or failed, the output
//!   hashed, never stored; an ask closes as the agent's prompt's approval, naming
//!   nobody), read back where the system has a recipe (a call the hook denied because
//!   nobody could be asked is recorded as the agent reported it, never as approved); an `unverified` result is told
//!   to the model in the agent's additional-context field.
//!
//! Anything that cannot be decided (input that is not the agent's JSON, too large, a
//! policy or configuration that does not load, a ledger that cannot record) is that
//! agent's deny: several agents treat a crashing hook as "allow", so the hook never
//! crashes and always answers.
//!
//! Where the ledger lives: the hook runs in the project directory the agent names
//! (`$CLAUDE_PROJECT_DIR`, `$GEMINI_PROJECT_DIR`, `$CURSOR_PROJECT_DIR` or Cursor's first
//! workspace root, else the event's `cwd`) — or in the nearest folder above it (or above
//! the hook's own, for Codex and Copilot, which name none) that holds `.attest/` — so a
//! session started in a subfolder extends the project's ledger and obeys its configuration
//! instead of starting a second one under the defaults. A ledger inside the project is one the agent can
//! write to: point `ATTEST_LEDGER` (or `ledger:` in the configuration) at a place the
//! agent's user cannot write, or a PostgreSQL database it has no credentials for, and
//! keep a verifier key and checkpoints elsewhere so an edit is caught.

mod claude_code;
mod codex;
mod copilot;
mod counted;
mod cursor;
mod doctor;
mod event;
mod gemini;
mod govern;
mod holds;
mod install;
mod json;
mod sandboxed;

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use attest_core::setup::{DoorParts, Overrides};
use attest_core::{Attest, Gate};
use serde_json::Value;

use crate::cli::{AgentKind, Global, HookCommand};
use crate::config::Config;

use event::{Contract, Event, Moment, Ruling};

/// The largest event read from stdin (a `PostToolUse` carries the tool's whole output,
/// which the agents cut to far less); at most one byte more is read, and an event over
/// it is a deny.
const MAX_EVENT_BYTES: u64 = 16 * 1024 * 1024;

pub(crate) fn run(global: &Global, command: &HookCommand) -> anyhow::Result<ExitCode> {
    let (kind, args) = match command {
        HookCommand::Install(args) => return install::run(global, args),
        HookCommand::Doctor(args) => return doctor::run(global, args),
        HookCommand::ClaudeCode(args) => (AgentKind::ClaudeCode, args),
        HookCommand::Codex(args) => (AgentKind::Codex, args),
        HookCommand::Gemini(args) => (AgentKind::Gemini, args),
        HookCommand::Cursor(args) => (AgentKind::Cursor, args),
        HookCommand::Copilot(args) => (AgentKind::Copilot, args),
    };
    let contract = contract(kind);
    let mut input = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_EVENT_BYTES + 1)
        .read_to_end(&mut input);
    let answer = match read {
        Ok(_) => answer(global, args, contract, &input),
        Err(err) => deny(contract, &format!("cannot read the hook event: {err}")),
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &answer)?;
    writeln!(out)?;
    // Every agent reads the JSON only when the hook exits 0.
    Ok(ExitCode::SUCCESS)
}

/// The agent contract for `kind`.
pub(crate) fn contract(kind: AgentKind) -> &'static dyn Contract {
    match kind {
        AgentKind::ClaudeCode => &claude_code::ClaudeCode,
        AgentKind::Codex => &codex::Codex,
        AgentKind::Gemini => &gemini::Gemini,
        AgentKind::Cursor => &cursor::Cursor,
        AgentKind::Copilot => &copilot::Copilot,
    }
}

/// The answer to one event, in the agent's shape; never an error.
fn answer(
    global: &Global,
    args: &crate::cli::HookArgs,
    contract: &'static dyn Contract,
    input: &[u8],
) -> Value {
    if input.len() as u64 > MAX_EVENT_BYTES {
        return deny(
            contract,
            &format!("the hook event is larger than {MAX_EVENT_BYTES} bytes"),
        );
    }
    let parsed = json::parse(input)
        .map_err(|err| format!("the hook event is not JSON that reads one way: {err}"))
        .and_then(|value| contract.parse(&value).map(|event| (value, event)));
    let (value, event) = match parsed {
        Ok(parsed) => parsed,
        Err(why) => {
            return deny(
                contract,
                &format!(
                    "the hook event is not what {} sends: {why}",
                    contract.title()
                ),
            )
        }
    };
    let Event { moment, call } = event;
    let Some(mut call) = call else {
        // An event Attest has nothing to say about.
        return contract.nothing(&value);
    };
    if call.cwd.is_none() {
        // An event that names no folder runs its call where the agent runs the hook:
        // relative paths resolve there (taken before the hook enters the project).
        call.cwd = std::env::current_dir()
            .ok()
            .and_then(|dir| dir.to_str().map(str::to_owned));
    }
    let named = call.project_dir.as_deref().filter(|dir| dir.is_dir());
    let start = named
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok());
    // Settings, policy and ledger are the project's, wherever in it the agent is: the
    // nearest folder at or above the named one (or the hook's own, for agents that name
    // none) that holds `.attest/`, which the agent cannot write; else the named folder.
    let project = start
        .as_deref()
        .and_then(|start| start.ancestors().find(|dir| dir.join(".attest").is_dir()))
        .or(named);
    if let Some(dir) = project {
        if let Err(err) = std::env::set_current_dir(dir) {
            return undecided(
                contract,
                &moment,
                &format!("cannot enter {}: {err}", dir.display()),
            );
        }
    }
    let settings = Config::resolve(&overrides(global, args, contract))
        .and_then(|config| govern::Settings::new(config, args, contract));
    let mut settings = match settings {
        Ok(settings) => settings,
        Err(err) => return undecided(contract, &moment, &format!("{err:#}")),
    };
    // The program and project a sandboxed command runs under: this hook's own, in the
    // project it entered.
    let place = std::env::current_exe().and_then(|exe| Ok((exe, std::env::current_dir()?)));
    let place = match place {
        Ok(place) => Some(place),
        Err(err) if settings.sandbox && call.tool == "Bash" => {
            return undecided(
                contract,
                &moment,
                &format!("cannot find this program and the project for the sandbox: {err}"),
            )
        }
        Err(_) => None,
    };
    settings.shell = match &place {
        Some((exe, project)) => {
            sandboxed::prepare(&mut call, contract, settings.sandbox, exe, project)
        }
        None => (call.tool == "Bash").then_some(sandboxed::Sandboxing { sandboxed: false }),
    };
    match &moment {
        Moment::Before => match govern::before(&settings, &call) {
            Ok(ruling @ (Ruling::Allow(_) | Ruling::Ask(_)))
                if settings.shell.is_some_and(|shell| shell.sandboxed)
                    && contract.rewrites_input(&call) =>
            {
                // Promised to the row: the command runs inside the sandbox, or not at all.
                let input = place
                    .as_ref()
                    .and_then(|(exe, project)| sandboxed::rewritten_input(&call, exe, project));
                match input {
                    Some(input) => contract.with_input(contract.before(&moment, &ruling), input),
                    None => undecided(
                        contract,
                        &moment,
                        "the command cannot be written to run inside the sandbox (a path is \
                         not UTF-8)",
                    ),
                }
            }
            Ok(ruling) => contract.before(&moment, &ruling),
            Err(err) => undecided(contract, &moment, &format!("{err:#}")),
        },
        Moment::Permission => contract.before(&moment, &govern::permission(&settings, &call)),
        Moment::After(outcome) => match govern::after(&settings, &call, outcome.clone()) {
            Ok(note) => contract.after(&note),
            Err(err) => undecided(contract, &moment, &format!("{err:#}")),
        },
        Moment::Reported(result) => match govern::reported(&settings, &call, result) {
            Ok(note) => contract.after(&note),
            Err(err) => undecided(contract, &moment, &format!("{err:#}")),
        },
    }
}

/// What cannot be decided: before a call, the agent's deny; after it, the agent is told
/// the record is missing (`attest ledger` shows the intent row of a write with no outcome).
fn undecided(contract: &dyn Contract, moment: &Moment, why: &str) -> Value {
    eprintln!("attest: hook: {why}");
    match moment {
        Moment::After(_) | Moment::Reported(_) => contract.after(&event::AfterNote {
            context: None,
            unrecorded: Some(format!(
                "The call ran, but Attest could not record it: {why}"
            )),
        }),
        _ => contract.before(
            moment,
            &Ruling::Deny(format!(
                "Attest could not decide this call, so it did not run: {why}"
            )),
        ),
    }
}

/// The agent's deny for input that is not one of its events.
fn deny(contract: &dyn Contract, why: &str) -> Value {
    undecided(contract, &Moment::Before, why)
}

/// The hook's flags as core's overrides, over the global ones: the agent recorded is the
/// flag's, else the environment's or the file's, else the agent's own name.
fn overrides(global: &Global, args: &crate::cli::HookArgs, contract: &dyn Contract) -> Overrides {
    Overrides {
        agent: args.agent.clone(),
        actor: args.actor.clone(),
        default_agent: Some(contract.name().to_owned()),
        shadow: args.shadow,
        ..global.overrides()
    }
}

/// The pipeline for one event: everything the configuration builds (core's
/// [`attest_core::setup::Settings::build`]), with `gate` answering asks.
fn pipeline(config: &Config, gate: impl Gate + 'static) -> anyhow::Result<Attest> {
    Ok(config.build(DoorParts::gate(gate))?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The directory an agent's settings name as its project: the variable when it is set.
fn project_from_env(var: Option<&str>) -> Option<std::path::PathBuf> {
    let value = crate::config::env_var(var?)?;
    Some(Path::new(&value).to_path_buf())
}

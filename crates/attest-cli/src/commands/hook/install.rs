//! `attest hook install <agent>`: one entry per hook event in the agent's settings file.
//!
//! The file is read as an ordered list of keys whose values are kept as their original
//! text (serde_json's `RawValue`): every setting and hook Attest does not own is written
//! back byte for byte, in its place; only the hook arrays Attest adds to are laid out
//! again (two-space indentation, as the agents write them). Attest's own entry is found
//! by its command (`attest hook <agent>`), so installing twice updates it in place and
//! `--remove` takes out exactly it. A file that is not a JSON object, or whose `hooks`
//! is not an object of arrays, is refused untouched with the reason. The new text is
//! written to a temporary file beside it and renamed over it; the old one is kept as
//! `<file>.attest-backup`.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::cli::{AgentKind, Global, InstallArgs};

/// The largest settings file read.
const MAX_SETTINGS_BYTES: u64 = 1 << 20;

/// Lines of context around a change in `--dry-run`'s diff.
const CONTEXT_LINES: usize = 3;

pub(crate) fn run(global: &Global, args: &InstallArgs) -> anyhow::Result<ExitCode> {
    refuse_ledger_settings(global)?;
    let layout = Layout::of(args.agent);
    let path = settings_path(args, &layout)?;
    let before = read_settings(&path)?;
    let (program, why) = program(args)?;
    let command = format!("{program} hook {}", layout.cli_name);
    let after = edit(&layout, before.as_deref(), &command, args.remove)
        .with_context(|| format!("{} was left untouched", path.display()))?;
    let old = before.clone().unwrap_or_default();
    let new = after.clone().unwrap_or_default();
    if old == new {
        println!(
            "{}: {}",
            path.display(),
            if args.remove {
                "no Attest hook to remove"
            } else {
                "the Attest hook is already installed"
            }
        );
        print_trust(args, &layout);
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        print!("{}", diff(&path, &old, &new));
        return Ok(ExitCode::SUCCESS);
    }
    let backup = write_settings(&path, before.is_some(), after.as_deref())?;
    let done = if args.remove { "removed" } else { "installed" };
    let events = layout.events.join(", ");
    match backup {
        Some(backup) => println!(
            "{done} `{command}` in {} ({events}); the previous file is {}",
            path.display(),
            backup.display()
        ),
        None => println!("{done} `{command}` in {} ({events})", path.display()),
    }
    if !args.remove {
        println!("{why}; --program names another");
        if !args.user || args.project {
            let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
            if let Some(ignore) = keep_state_out_of_git(&dir)? {
                println!(
                    "wrote {}: the ledger, keys and the hook's state stay out of `git status`; \
                     .attest/config.yaml is yours to commit",
                    ignore.display()
                );
            }
        }
    }
    print_trust(args, &layout);
    Ok(ExitCode::SUCCESS)
}

/// The ledger settings a hook uses are read where the agent runs it, never from this
/// command line: one given here would be dropped, so it is refused with where it goes.
fn refuse_ledger_settings(global: &Global) -> anyhow::Result<()> {
    let given = [
        ("--config", global.config.is_some()),
        ("--ledger", global.ledger.is_some()),
        ("--tenant", global.tenant.is_some()),
        ("--durability", global.durability.is_some()),
        ("--policy", global.policy.is_some()),
    ];
    let given: Vec<&str> = given
        .iter()
        .filter(|(_, set)| *set)
        .map(|(flag, _)| *flag)
        .collect();
    if given.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "hook install writes only the agent's hook settings, so it would drop {}: each hook \
         run reads its ledger, tenant, durability and policy from the project's \
         .attest/config.yaml (`ledger: …`, `tenant: …`, `policy: …`) or from ATTEST_LEDGER, \
         ATTEST_TENANT, ATTEST_DURABILITY and ATTEST_POLICY where the agent runs it; set them \
         there (docs/coding-agents.md)",
        given.join(", ")
    )
}

/// The program the hook entry runs, and a sentence saying why: `--program`; else `attest`
/// when an `attest` is on PATH; else this binary's absolute path.
fn program(args: &InstallArgs) -> anyhow::Result<(String, String)> {
    if let Some(program) = &args.program {
        return Ok((
            program.clone(),
            format!("the hook runs {program} (--program)"),
        ));
    }
    let on_path = crate::config::env_var("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            let candidate = dir.join("attest");
            candidate.is_file()
                && std::fs::metadata(&candidate).is_ok_and(|meta| {
                    use std::os::unix::fs::PermissionsExt;
                    meta.permissions().mode() & 0o111 != 0
                })
        })
    });
    if on_path {
        return Ok((
            "attest".to_owned(),
            "the hook runs `attest` from PATH where the agent runs it".to_owned(),
        ));
    }
    let exe = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .context(
            "no `attest` on PATH, and this binary's own path cannot be read: pass --program",
        )?;
    let exe = exe
        .to_str()
        .context("this binary's path is not UTF-8: pass --program")?
        .to_owned();
    if exe.contains(char::is_whitespace) {
        anyhow::bail!(
            "no `attest` on PATH, and this binary's path {exe:?} has a space the agent would \
             split the command at: pass --program"
        );
    }
    let why = format!(
        "no `attest` is on PATH here, so the hook runs this binary by its path ({exe}), \
         which a desktop agent finds without a PATH"
    );
    Ok((exe, why))
}

/// What `.attest/.gitignore` says: everything in `.attest/` but the configuration (and
/// itself) stays out of git.
const GITIGNORE: &str =
    "# Written by `attest hook install`: the ledger, keys and the hook's state stay out of\n\
# git; the configuration is yours to commit.\n\
*\n\
!.gitignore\n\
!config.yaml\n";

/// Writes `DIR/.attest/.gitignore` when there is none (an existing one is the user's, and
/// kept); returns its path when it wrote one.
fn keep_state_out_of_git(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let folder = dir.join(".attest");
    let path = folder.join(".gitignore");
    if path.exists() {
        return Ok(None);
    }
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    std::fs::write(&path, GITIGNORE).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Some(path))
}

/// Where the agent will not load the hook until it is trusted, says so and how to trust
/// it: an untrusted hook is skipped silently, and its calls are neither governed nor
/// recorded.
fn print_trust(args: &InstallArgs, layout: &Layout) {
    if args.remove {
        return;
    }
    let user = args.user && !args.project;
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let dir = dir.display();
    let note = match layout.trust {
        Trust::None => return,
        Trust::Project if user => return,
        Trust::Project | Trust::Always => layout.trust_note,
    };
    let project = if user { "" } else { layout.project_note };
    println!(
        "not loaded until trusted: {}{}",
        project.replace("{dir}", &dir.to_string()),
        note.replace("{dir}", &dir.to_string())
    );
}

/// When an agent skips a hook it has not been told to trust.
#[derive(Clone, Copy)]
enum Trust {
    /// It loads the hook as installed.
    None,
    /// Only in a trusted project folder (a user-level install needs nothing).
    Project,
    /// Every new or changed hook, wherever installed.
    Always,
}

/// Where and how an agent keeps its hooks.
pub(super) struct Layout {
    /// `attest hook <cli_name>`.
    cli_name: &'static str,
    /// The project's settings file, relative to the project directory.
    pub(super) project: &'static str,
    /// The user's settings file, relative to the home directory (`None`: the agent has
    /// no user-level hooks file).
    pub(super) user: Option<&'static str>,
    /// The events Attest's entry is added to.
    pub(super) events: &'static [&'static str],
    /// Events an earlier version of Attest installed into and no longer does: its entry
    /// there is taken out (another event now records those calls, and a call must not be
    /// recorded twice).
    retired: &'static [&'static str],
    /// How one entry looks.
    shape: Shape,
    /// When the agent skips the hook until trusted.
    trust: Trust,
    /// How to trust it (`{dir}`: the project folder).
    trust_note: &'static str,
    /// Said before `trust_note` for a project install: how to trust the project, where
    /// the agent needs that too.
    project_note: &'static str,
}

#[derive(Clone, Copy)]
enum Shape {
    /// `{"matcher": …, "hooks": [{"type": "command", "command": …}]}` (Claude Code, Codex,
    /// Gemini CLI).
    Grouped { matcher: Option<&'static str> },
    /// `{"command": …}` under a `"version": 1` file (Cursor).
    Flat,
    /// `{"type": "command", "bash": …, "timeoutSec": …}` under `"version": 1` (Copilot CLI).
    Bash,
}

impl Layout {
    pub(super) fn of(agent: AgentKind) -> Layout {
        match agent {
            // https://code.claude.com/docs/en/hooks: settings.json `hooks`, matcher `*`.
            AgentKind::ClaudeCode => Layout {
                cli_name: "claude-code",
                project: ".claude/settings.json",
                user: Some(".claude/settings.json"),
                events: &[
                    "PreToolUse",
                    "PermissionRequest",
                    "PostToolUse",
                    "PostToolUseFailure",
                ],
                retired: &[],
                shape: Shape::Grouped { matcher: Some("*") },
                trust: Trust::None,
                trust_note: "",
                project_note: "",
            },
            // https://developers.openai.com/codex/hooks: hooks.json beside config.toml.
            AgentKind::Codex => Layout {
                cli_name: "codex",
                project: ".codex/hooks.json",
                user: Some(".codex/hooks.json"),
                events: &["PreToolUse", "PostToolUse"],
                retired: &[],
                shape: Shape::Grouped { matcher: None },
                // Seen on Codex 0.171: a project's `.codex/` layer (its hooks.json with it) is
                // loaded only in a trusted project (`codex exec` warns "Untrusted
                // project-local configuration is disabled"), and each hook only once trusted
                // by its hash (`/hooks`); `codex exec` never asks, and skips an untrusted hook
                // without a word unless `--dangerously-bypass-hook-trust` is given.
                trust: Trust::Always,
                project_note: "Codex loads a project's hooks only in a trusted project: run \
                    `codex exec --trust` once in {dir} (or trust the folder when `codex` asks; \
                    either writes [projects.\"{dir}\"] trust_level = \"trusted\" to \
                    ~/.codex/config.toml). ",
                trust_note: "Codex runs a new or changed hook only once you trust it: start \
                    `codex` in {dir} and trust it in `/hooks` (Codex says at start when a hook \
                    needs review). `codex exec` never asks and skips an untrusted hook without \
                    a word: its calls are then neither governed nor recorded. For unattended \
                    `codex exec` runs, `--dangerously-bypass-hook-trust` runs the enabled \
                    hooks without review for that run.",
            },
            // https://geminicli.com/docs/hooks/reference: settings.json `hooks`.
            AgentKind::Gemini => Layout {
                cli_name: "gemini",
                project: ".gemini/settings.json",
                user: Some(".gemini/settings.json"),
                events: &["BeforeTool", "AfterTool"],
                retired: &[],
                shape: Shape::Grouped {
                    matcher: Some(".*"),
                },
                // Seen on Gemini CLI 0.61: project settings (their hooks with them) load only
                // in a trusted folder; headless `gemini -p` refuses an untrusted one (exit 55),
                // and `--skip-trust` runs there without the project's settings, so without
                // its hooks. `GEMINI_CLI_TRUST_WORKSPACE=true` trusts before they load.
                trust: Trust::Project,
                project_note: "",
                trust_note: "Gemini CLI reads a project's settings, and so these hooks, only \
                    in a trusted folder: add \"{dir}\": \"TRUST_FOLDER\" to \
                    ~/.gemini/trustedFolders.json, or start `gemini` in {dir} and trust the \
                    folder when it asks (`/permissions` changes it later), or set \
                    GEMINI_CLI_TRUST_WORKSPACE=true for a run. `gemini --skip-trust` runs in an \
                    untrusted folder without the project's hooks: its calls are then neither \
                    governed nor recorded.",
            },
            // https://cursor.com/docs/hooks: .cursor/hooks.json, version 1. The generic
            // events govern every tool the specific ones do not (`hook::cursor`);
            // `postToolUse` records file edits, so `afterFileEdit` is no longer needed.
            AgentKind::Cursor => Layout {
                cli_name: "cursor",
                project: ".cursor/hooks.json",
                user: Some(".cursor/hooks.json"),
                events: &[
                    "beforeShellExecution",
                    "afterShellExecution",
                    "beforeMCPExecution",
                    "afterMCPExecution",
                    "beforeReadFile",
                    "preToolUse",
                    "postToolUse",
                    "postToolUseFailure",
                ],
                retired: &["afterFileEdit"],
                shape: Shape::Flat,
                trust: Trust::None,
                trust_note: "",
                project_note: "",
            },
            // https://docs.github.com/en/copilot/reference/copilot-cli-reference/cli-hooks-reference:
            // .github/hooks/*.json in the repository.
            AgentKind::Copilot => Layout {
                cli_name: "copilot",
                project: ".github/hooks/attest.json",
                user: None,
                events: &["preToolUse", "postToolUse"],
                retired: &[],
                shape: Shape::Bash,
                // Copilot CLI 1.0.102 loads a repository's hooks only in a folder listed (or
                // below one listed) in `trustedFolders` of $COPILOT_HOME/config.json, or for
                // one run with `--trust-folder` or COPILOT_ALLOW_ALL=true exactly; seen on the
                // real program (real_copilot.rs). `trustedFolders` in settings.json is ignored.
                trust: Trust::Project,
                project_note: "",
                trust_note: "GitHub Copilot CLI loads a repository's hooks only in a folder \
                    you trust: start `copilot` in {dir} and trust the folder when it asks, or \
                    add {dir} to `trustedFolders` in ~/.copilot/config.json ($COPILOT_HOME/\
                    config.json). `--trust-folder` or COPILOT_ALLOW_ALL=true (exactly \"true\") \
                    trust it for one run; with tools allowed otherwise (`--allow-all-tools`, \
                    COPILOT_ALLOW_ALL=1) in an untrusted folder, no hook runs and nothing is \
                    recorded. `attest hook doctor copilot` checks it.",
            },
        }
    }

    /// Attest's entry for one event, pretty-printed with its keys in the order the
    /// agents' own documentation shows them.
    fn entry(&self, command: &str) -> anyhow::Result<String> {
        let command_hook = CommandHook {
            kind: "command",
            command,
        };
        Ok(match self.shape {
            Shape::Grouped { matcher } => serde_json::to_string_pretty(&Group {
                matcher,
                hooks: [command_hook],
            })?,
            Shape::Flat => serde_json::to_string_pretty(&FlatHook { command })?,
            Shape::Bash => serde_json::to_string_pretty(&BashHook {
                kind: "command",
                bash: command,
                timeout_sec: 30,
            })?,
        })
    }

    /// Whether the file carries `"version": 1`.
    fn versioned(&self) -> bool {
        matches!(self.shape, Shape::Flat | Shape::Bash)
    }

    /// Whether `entry` is Attest's own: one of its commands runs `attest hook <agent>`.
    pub(super) fn is_ours(&self, entry: &Value) -> bool {
        let mut commands = Vec::new();
        for key in ["command", "bash"] {
            commands.extend(entry.get(key).and_then(Value::as_str));
        }
        if let Some(hooks) = entry.get("hooks").and_then(Value::as_array) {
            for hook in hooks {
                commands.extend(hook.get("command").and_then(Value::as_str));
            }
        }
        commands.iter().any(|command| {
            let mut words = command.split_whitespace();
            let program = words.next().unwrap_or_default();
            let base = program.rsplit(['/', '\\']).next().unwrap_or(program);
            matches!(base, "attest" | "attest.exe")
                && words.next() == Some("hook")
                && words.next() == Some(self.cli_name)
        })
    }
}

/// `{"type": "command", "command": …}`.
#[derive(Serialize)]
struct CommandHook<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    command: &'a str,
}

/// `{"matcher": …, "hooks": [{…}]}`.
#[derive(Serialize)]
struct Group<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    matcher: Option<&'static str>,
    hooks: [CommandHook<'a>; 1],
}

/// Cursor's `{"command": …}`.
#[derive(Serialize)]
struct FlatHook<'a> {
    command: &'a str,
}

/// Copilot CLI's `{"type": "command", "bash": …, "timeoutSec": …}`.
#[derive(Serialize)]
struct BashHook<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    bash: &'a str,
    #[serde(rename = "timeoutSec")]
    timeout_sec: u32,
}

/// The settings file `args` name.
fn settings_path(args: &InstallArgs, layout: &Layout) -> anyhow::Result<PathBuf> {
    // `--project` is the default; clap refuses it together with `--user`.
    if args.user && !args.project {
        let Some(relative) = layout.user else {
            anyhow::bail!(
                "{} reads hooks from the repository only ({}); install with --project",
                layout.cli_name,
                layout.project
            );
        };
        let home = crate::config::env_var("HOME")
            .context("--user needs $HOME to find the user's settings")?;
        return Ok(Path::new(&home).join(relative));
    }
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    Ok(dir.join(layout.project))
}

fn read_settings(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
        Ok(_) => Ok(Some(crate::config::read_text(path, MAX_SETTINGS_BYTES)?)),
    }
}

/// The settings text with Attest's entries added (or removed); `None`: the file goes.
fn edit(
    layout: &Layout,
    text: Option<&str>,
    command: &str,
    remove: bool,
) -> anyhow::Result<Option<String>> {
    let mut top = match text {
        Some(text) => Ordered::parse(text, "the file")?,
        None => Ordered::default(),
    };
    let mut hooks = match top.get("hooks") {
        Some(raw) => Ordered::parse(raw, "`hooks`")?,
        None => Ordered::default(),
    };
    let entry = layout.entry(command)?;
    let events = layout.events.iter().map(|event| (event, remove));
    let retired = layout.retired.iter().map(|event| (event, true));
    for (event, remove) in events.chain(retired) {
        let mut items: Vec<String> = match hooks.get(event) {
            Some(raw) => serde_json::from_str::<Vec<Box<RawValue>>>(raw)
                .map_err(|err| anyhow::anyhow!("`hooks.{event}` is not an array: {err}"))?
                .into_iter()
                .map(|item| item.get().to_owned())
                .collect(),
            None => Vec::new(),
        };
        let ours = indent(&entry, 6);
        let is_ours = |item: &String| {
            serde_json::from_str::<Value>(item).is_ok_and(|value| layout.is_ours(&value))
        };
        if remove && !items.iter().any(is_ours) {
            // Nothing of Attest's to take out: the event stays as it is, byte for byte.
            continue;
        }
        let mut placed = remove;
        items = items
            .into_iter()
            .filter_map(|item| {
                if !is_ours(&item) {
                    return Some(item);
                }
                // The first of Attest's entries is updated in place; any others go.
                (!std::mem::replace(&mut placed, true)).then(|| ours.clone())
            })
            .collect();
        if !placed {
            items.push(ours);
        }
        if items.is_empty() {
            hooks.remove(event);
        } else {
            hooks.set(event, render_array(&items, 4));
        }
    }
    if hooks.is_empty() {
        top.remove("hooks");
    } else {
        top.set("hooks", hooks.render(2));
    }
    if layout.versioned() && !remove && top.get("version").is_none() {
        top.entries
            .insert(0, ("version".to_owned(), "1".to_owned()));
    }
    if remove && top.entries.iter().all(|(key, _)| key == "version") && text.is_some() {
        // Only what Attest wrote is left (Copilot's own hooks file).
        if matches!(layout.shape, Shape::Bash) {
            return Ok(None);
        }
    }
    let newline = text.is_none_or(|text| text.ends_with('\n'));
    let mut rendered = top.render(0);
    if newline {
        rendered.push('\n');
    }
    Ok(Some(rendered))
}

/// A JSON object's keys in their order, each value as its original text.
#[derive(Default)]
struct Ordered {
    entries: Vec<(String, String)>,
}

impl Ordered {
    /// Parses an object, naming `what` in the error.
    fn parse(text: &str, what: &str) -> anyhow::Result<Ordered> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let ordered = (&mut deserializer)
            .deserialize_map(OrderedVisitor)
            .and_then(|ordered| deserializer.end().map(|()| ordered))
            .map_err(|err| anyhow::anyhow!("{what} is not a JSON object: {err}"))?;
        Ok(ordered)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn set(&mut self, key: &str, value: String) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key.to_owned(), value)),
        }
    }

    fn remove(&mut self, key: &str) {
        self.entries.retain(|(k, _)| k != key);
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The object laid out at `indent` spaces, its values as kept.
    fn render(&self, indent: usize) -> String {
        if self.entries.is_empty() {
            return "{}".to_owned();
        }
        let pad = " ".repeat(indent + 2);
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|(key, value)| format!("{pad}{}: {value}", Value::String(key.clone())))
            .collect();
        format!("{{\n{}\n{}}}", lines.join(",\n"), " ".repeat(indent))
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = Ordered;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
        let mut entries = Vec::new();
        let mut seen = BTreeSet::new();
        while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
            }
            entries.push((key, value.get().to_owned()));
        }
        Ok(Ordered { entries })
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        deserializer.deserialize_map(OrderedVisitor)
    }
}

/// An array of item texts laid out at `indent` spaces.
fn render_array(items: &[String], indent: usize) -> String {
    let pad = " ".repeat(indent + 2);
    let lines: Vec<String> = items.iter().map(|item| format!("{pad}{item}")).collect();
    format!("[\n{}\n{}]", lines.join(",\n"), " ".repeat(indent))
}

/// `text` (a pretty-printed value) with every line after the first indented by `by`.
fn indent(text: &str, by: usize) -> String {
    text.replace('\n', &format!("\n{}", " ".repeat(by)))
}

/// Writes `text` over `path` atomically (or removes the file when `None`), keeping the
/// old file as `<path>.attest-backup`; returns the backup's path.
fn write_settings(
    path: &Path,
    existed: bool,
    text: Option<&str>,
) -> anyhow::Result<Option<PathBuf>> {
    let backup = existed.then(|| {
        let mut name = path.as_os_str().to_owned();
        name.push(".attest-backup");
        PathBuf::from(name)
    });
    if let Some(backup) = &backup {
        std::fs::copy(path, backup).with_context(|| {
            format!("cannot back up {} to {}", path.display(), backup.display())
        })?;
    }
    let Some(text) = text else {
        std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
        return Ok(backup);
    };
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    file.write_all(text.as_bytes())?;
    if existed {
        // The settings keep the mode they had.
        let permissions = std::fs::metadata(path)?.permissions();
        file.as_file().set_permissions(permissions)?;
    }
    file.as_file().sync_all()?;
    file.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(backup)
}

/// A unified diff of one changed region: the common first and last lines are context.
fn diff(path: &Path, old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let head = old_lines
        .iter()
        .zip(&new_lines)
        .take_while(|(a, b)| a == b)
        .count();
    let tail = old_lines[head..]
        .iter()
        .rev()
        .zip(new_lines[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let start = head.saturating_sub(CONTEXT_LINES);
    let old_end = (old_lines.len() - tail + CONTEXT_LINES).min(old_lines.len());
    let new_end = (new_lines.len() - tail + CONTEXT_LINES).min(new_lines.len());
    let mut out = format!(
        "--- {path}\n+++ {path}\n@@ -{},{} +{},{} @@\n",
        start + 1,
        old_end - start,
        start + 1,
        new_end - start,
        path = path.display()
    );
    for line in &old_lines[start..head] {
        out.push_str(&format!(" {line}\n"));
    }
    for line in &old_lines[head..old_lines.len() - tail] {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &new_lines[head..new_lines.len() - tail] {
        out.push_str(&format!("+{line}\n"));
    }
    for line in &old_lines[old_lines.len() - tail..old_end] {
        out.push_str(&format!(" {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_shows_the_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\n";
        let new = "a\nb\nc\nd\nX\ne\nf\ng\n";
        let shown = diff(Path::new("s.json"), old, new);
        assert!(shown.contains("@@ -2,6 +2,7 @@"), "{shown}");
        assert!(shown.contains("\n+X\n") && !shown.contains("-e"), "{shown}");
    }
}

//! `attest hook doctor <agent>`: will the agent run Attest's hook? Three questions, each
//! answered from the agent's own files, naming every file read:
//!
//! - **installed**: the agent's hook settings hold Attest's entry for every event
//!   `hook install` writes (the same files and the same test for "ours" as the install).
//! - **trusted**: the agent's trust store lets it load the hook. An agent skips an
//!   untrusted hook silently, so its calls are neither governed nor recorded. Where each
//!   program keeps its trust was read from the installed packages and checked on the
//!   real programs where possible:
//!   - Copilot CLI 1.0.102: `trustedFolders` in `$COPILOT_HOME/config.json` (default
//!     `~/.copilot/config.json`, JSON with `//` comment lines; the older `trusted_folders`
//!     is migrated to it); a listed folder trusts the folders below it. The key in
//!     `settings.json` is ignored (the program logs "not recognized user settings").
//!   - Gemini CLI 0.61: `~/.gemini/trustedFolders.json` (or
//!     `$GEMINI_CLI_TRUSTED_FOLDERS_PATH`), the longest matching rule deciding
//!     (`TRUST_FOLDER`, `TRUST_PARENT` for the rule's parent, `DO_NOT_TRUST`); no trust is
//!     needed when `security.folderTrust.enabled` is `false` in `~/.gemini/settings.json`.
//!   - Codex CLI 0.171: the project's `[projects."DIR"] trust_level = "trusted"` and, for
//!     each of Attest's handlers, `[hooks.state."FILE:EVENT:GROUP:HANDLER"]` with a
//!     `trusted_hash` in `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`).
//!     Codex compares that hash with the hook as it is now and asks again when it
//!     changed; the hash is Codex's own and is not recomputed here.
//!   - Claude Code and Cursor load hooks without a trust step.
//! - **loaded**: nothing makes the agent skip or break the hook it would run: hooks not
//!   switched off in its settings (`disableAllHooks` for Claude Code and Copilot CLI,
//!   `hooksConfig.enabled: false` for Gemini CLI), the hook's program found (an absolute
//!   path that is executable, else on this PATH), and the project's Attest configuration
//!   and policy loading (an error there makes every hook answer deny; it is shown with
//!   its file, line and key).
//!
//! An unreadable or malformed file answers "no" with the reason: a doctor that cannot
//! read the trust store does not say the hook is trusted.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

use super::install::Layout;
use crate::cli::{AgentKind, DoctorArgs, Global};
use crate::config::Config;

/// The largest agent file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

pub(crate) fn run(global: &Global, args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let dir = std::fs::canonicalize(&dir)
        .map_err(|err| anyhow::anyhow!("cannot open the project {}: {err}", dir.display()))?;
    let home = crate::config::env_var("HOME").map(PathBuf::from);
    let report = examine(global, args.agent, &dir, home.as_deref());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.healthy() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The doctor's findings for one agent and one project.
#[derive(Debug, Serialize)]
struct Report {
    agent: &'static str,
    project: PathBuf,
    installed: Check,
    trusted: Check,
    loaded: Check,
}

/// One answer: whether it holds, why, and the files it was read from.
#[derive(Debug, Serialize)]
struct Check {
    ok: bool,
    says: String,
    read: Vec<PathBuf>,
}

impl Check {
    fn new(ok: bool, says: impl Into<String>, read: Vec<PathBuf>) -> Check {
        Check {
            ok,
            says: says.into(),
            read,
        }
    }
}

impl Report {
    fn healthy(&self) -> bool {
        self.installed.ok && self.trusted.ok && self.loaded.ok
    }

    fn render(&self) -> String {
        let mut out = format!(
            "attest hook doctor {} in {}\n",
            self.agent,
            self.project.display()
        );
        for (name, check) in [
            ("installed", &self.installed),
            ("trusted", &self.trusted),
            ("loaded", &self.loaded),
        ] {
            let verdict = if check.ok { "yes" } else { "NO" };
            out.push_str(&format!("{name}: {verdict}: {}\n", check.says));
            for file in &check.read {
                out.push_str(&format!("  read {}\n", file.display()));
            }
        }
        if !self.healthy() {
            out.push_str(
                "the agent will not run Attest's hook for every call: its calls are then \
                 neither governed nor recorded\n",
            );
        }
        out
    }
}

/// Where Attest's entry was found: the file, the command it runs, and (Codex) its place
/// in each event's array.
struct Found {
    file: PathBuf,
    command: String,
    /// For each event, the index of the group that holds Attest's entry.
    groups: Vec<(&'static str, usize)>,
    /// Whether the file is the user's (home directory) rather than the project's.
    user: bool,
}

fn examine(global: &Global, agent: AgentKind, dir: &Path, home: Option<&Path>) -> Report {
    let layout = Layout::of(agent);
    let (installed, found) = installed(agent, &layout, dir, home);
    let trusted = match &found {
        None => Check::new(
            false,
            "nothing to trust: Attest's hook is not installed",
            Vec::new(),
        ),
        Some(found) => trusted(agent, found, dir, home),
    };
    let loaded = loaded(global, agent, found.as_ref(), dir, home);
    Report {
        agent: name(agent),
        project: dir.to_path_buf(),
        installed,
        trusted,
        loaded,
    }
}

fn name(agent: AgentKind) -> &'static str {
    match agent {
        AgentKind::ClaudeCode => "claude-code",
        AgentKind::Codex => "codex",
        AgentKind::Gemini => "gemini",
        AgentKind::Cursor => "cursor",
        AgentKind::Copilot => "copilot",
    }
}

/// The files the agent reads hooks from, the project's first.
fn hook_files(
    agent: AgentKind,
    layout: &Layout,
    dir: &Path,
    home: Option<&Path>,
) -> Vec<(PathBuf, bool)> {
    let mut files = vec![(dir.join(layout.project), false)];
    if agent == AgentKind::Copilot {
        // Copilot CLI reads every `.github/hooks/*.json`; Attest's entry may have been
        // moved to another of them.
        if let Ok(entries) = std::fs::read_dir(dir.join(".github/hooks")) {
            let mut others: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    path.extension().is_some_and(|ext| ext == "json")
                        && *path != dir.join(layout.project)
                })
                .collect();
            others.sort();
            files.extend(others.into_iter().map(|path| (path, false)));
        }
    }
    if let (Some(home), Some(user)) = (home, layout.user) {
        files.push((home.join(user), true));
    }
    files
}

fn installed(
    agent: AgentKind,
    layout: &Layout,
    dir: &Path,
    home: Option<&Path>,
) -> (Check, Option<Found>) {
    let mut read = Vec::new();
    let mut notes = Vec::new();
    for (file, user) in hook_files(agent, layout, dir, home) {
        if !file.exists() {
            notes.push(format!("{} does not exist", file.display()));
            continue;
        }
        read.push(file.clone());
        let value = match read_json(&file) {
            Ok(value) => value,
            Err(why) => {
                notes.push(why);
                continue;
            }
        };
        let mut groups = Vec::new();
        let mut command = None;
        let mut missing = Vec::new();
        for event in layout.events {
            let entries = value
                .get("hooks")
                .and_then(|hooks| hooks.get(*event))
                .and_then(Value::as_array);
            let ours = entries.and_then(|entries| {
                entries
                    .iter()
                    .position(|entry| layout.is_ours(entry))
                    .map(|at| (at, &entries[at]))
            });
            match ours {
                Some((at, entry)) => {
                    groups.push((*event, at));
                    command = command.or_else(|| entry_command(entry));
                }
                None => missing.push(*event),
            }
        }
        match command {
            Some(command) if missing.is_empty() => {
                let says = format!(
                    "{} has Attest's entry `{command}` for {}",
                    file.display(),
                    layout.events.join(", ")
                );
                let found = Found {
                    file,
                    command,
                    groups,
                    user,
                };
                return (Check::new(true, says, read), Some(found));
            }
            _ if groups.is_empty() => {
                notes.push(format!("{} has no Attest entry", file.display()));
            }
            _ => notes.push(format!(
                "{} lacks Attest's entry for {} (run `attest hook install` again)",
                file.display(),
                missing.join(", ")
            )),
        }
    }
    let says = format!(
        "{}; `attest hook install {}` writes it",
        notes.join("; "),
        name(agent)
    );
    (Check::new(false, says, read), None)
}

/// The command an entry runs (`command`, `bash`, or the first of its `hooks`).
fn entry_command(entry: &Value) -> Option<String> {
    for key in ["command", "bash"] {
        if let Some(command) = entry.get(key).and_then(Value::as_str) {
            return Some(command.to_owned());
        }
    }
    entry
        .get("hooks")
        .and_then(Value::as_array)
        .and_then(|hooks| hooks.iter().find_map(|hook| hook.get("command")))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn trusted(agent: AgentKind, found: &Found, dir: &Path, home: Option<&Path>) -> Check {
    match agent {
        AgentKind::ClaudeCode | AgentKind::Cursor => Check::new(
            true,
            "this agent loads hooks from its settings without a trust step",
            Vec::new(),
        ),
        AgentKind::Copilot => copilot_trust(dir, home),
        AgentKind::Gemini if found.user => Check::new(
            true,
            "Gemini CLI loads the user's settings in any folder",
            Vec::new(),
        ),
        AgentKind::Gemini => gemini_trust(dir, home),
        AgentKind::Codex => codex_trust(found, dir, home),
    }
}

/// `$COPILOT_HOME`, else `~/.copilot`.
fn copilot_home(home: Option<&Path>) -> Option<PathBuf> {
    crate::config::env_var("COPILOT_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".copilot")))
}

fn copilot_trust(dir: &Path, home: Option<&Path>) -> Check {
    let how = format!(
        "start `copilot` in {dir} and trust the folder when it asks, or add {dir} to \
         `trustedFolders` in ~/.copilot/config.json ($COPILOT_HOME/config.json); \
         `--trust-folder` or COPILOT_ALLOW_ALL=true (exactly \"true\") trust it for one run \
         only, and `--allow-all-tools` or COPILOT_ALLOW_ALL=1 in an untrusted folder run \
         every tool with no hook",
        dir = dir.display()
    );
    let Some(config_dir) = copilot_home(home) else {
        return Check::new(
            false,
            format!("no $HOME or $COPILOT_HOME to read the trust store from; {how}"),
            Vec::new(),
        );
    };
    let file = config_dir.join("config.json");
    if !file.exists() {
        return Check::new(
            false,
            format!(
                "{} does not exist, so no folder is trusted; {how}",
                file.display()
            ),
            Vec::new(),
        );
    }
    let read = vec![file.clone()];
    let value = match read_json(&file) {
        Ok(value) => value,
        Err(why) => return Check::new(false, format!("{why}; {how}"), read),
    };
    let listed: Vec<&str> = ["trustedFolders", "trusted_folders"]
        .iter()
        .filter_map(|key| value.get(*key).and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    match listed
        .iter()
        .find(|folder| dir.starts_with(real(Path::new(folder))))
    {
        Some(folder) => Check::new(true, format!("{} trusts {folder}", file.display()), read),
        None => Check::new(
            false,
            format!(
                "{} lists no folder at or above {} in `trustedFolders`; {how}",
                file.display(),
                dir.display()
            ),
            read,
        ),
    }
}

fn gemini_trust(dir: &Path, home: Option<&Path>) -> Check {
    let how = format!(
        "start `gemini` in {dir} and trust the folder (`/permissions`), or add \"{dir}\": \
         \"TRUST_FOLDER\" to ~/.gemini/trustedFolders.json",
        dir = dir.display()
    );
    let mut read = Vec::new();
    if let Some(home) = home {
        let settings = home.join(".gemini/settings.json");
        if settings.exists() {
            read.push(settings.clone());
            match read_json(&settings) {
                Ok(value) => {
                    let enabled = value
                        .pointer("/security/folderTrust/enabled")
                        .and_then(Value::as_bool);
                    if enabled == Some(false) {
                        return Check::new(
                            true,
                            format!(
                                "{} turns folder trust off (security.folderTrust.enabled: false), so every folder's settings load",
                                settings.display()
                            ),
                            read,
                        );
                    }
                }
                Err(why) => return Check::new(false, format!("{why}; {how}"), read),
            }
        }
    }
    let file = crate::config::env_var("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".gemini/trustedFolders.json")));
    let Some(file) = file else {
        return Check::new(
            false,
            format!("no $HOME to read the trust store from; {how}"),
            read,
        );
    };
    if !file.exists() {
        return Check::new(
            false,
            format!(
                "{} does not exist, so no folder is trusted; {how}",
                file.display()
            ),
            read,
        );
    }
    read.push(file.clone());
    let rules = match read_json(&file) {
        Ok(Value::Object(rules)) => rules,
        Ok(_) => {
            return Check::new(
                false,
                format!("{} is not a JSON object; {how}", file.display()),
                read,
            )
        }
        Err(why) => return Check::new(false, format!("{why}; {how}"), read),
    };
    // Gemini CLI's rule: the longest rule path whose folder holds the project decides.
    let mut best: Option<(&str, &str)> = None;
    for (rule, level) in &rules {
        let Some(level) = level.as_str() else {
            continue;
        };
        let folder = if level == "TRUST_PARENT" {
            Path::new(rule).parent().unwrap_or(Path::new(rule))
        } else {
            Path::new(rule)
        };
        if dir.starts_with(real(folder)) && best.is_none_or(|(path, _)| rule.len() > path.len()) {
            best = Some((rule, level));
        }
    }
    match best {
        Some((rule, level @ ("TRUST_FOLDER" | "TRUST_PARENT"))) => Check::new(
            true,
            format!("{} trusts it: \"{rule}\": \"{level}\"", file.display()),
            read,
        ),
        Some((rule, level)) => Check::new(
            false,
            format!("{} says \"{rule}\": \"{level}\"; {how}", file.display()),
            read,
        ),
        None => Check::new(
            false,
            format!(
                "{} has no rule for {}; {how}",
                file.display(),
                dir.display()
            ),
            read,
        ),
    }
}

/// Codex's event names in its trust keys.
fn codex_event(event: &str) -> &str {
    match event {
        "PreToolUse" => "pre_tool_use",
        "PostToolUse" => "post_tool_use",
        other => other,
    }
}

fn codex_trust(found: &Found, dir: &Path, home: Option<&Path>) -> Check {
    let how = format!(
        "start `codex` (interactive) in {} and trust the project and the hook when it asks \
         (`codex exec` never asks, and skips a hook not yet trusted)",
        dir.display()
    );
    let codex_home = crate::config::env_var("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".codex")));
    let Some(file) = codex_home.map(|home| home.join("config.toml")) else {
        return Check::new(
            false,
            format!("no $HOME or $CODEX_HOME to read the trust store from; {how}"),
            Vec::new(),
        );
    };
    if !file.exists() {
        return Check::new(
            false,
            format!(
                "{} does not exist, so nothing is trusted; {how}",
                file.display()
            ),
            Vec::new(),
        );
    }
    let read = vec![file.clone()];
    let config: toml::Table = match crate::config::read_text(&file, MAX_FILE_BYTES)
        .and_then(|text| Ok(text.parse::<toml::Table>()?))
    {
        Ok(config) => config,
        Err(err) => {
            return Check::new(
                false,
                format!("cannot read {}: {err:#}; {how}", file.display()),
                read,
            )
        }
    };
    let mut missing = Vec::new();
    if !found.user {
        let projects = config.get("projects").and_then(toml::Value::as_table);
        let trusted = projects.is_some_and(|projects| {
            projects.iter().any(|(path, project)| {
                dir.starts_with(real(Path::new(path)))
                    && project.get("trust_level").and_then(toml::Value::as_str) == Some("trusted")
            })
        });
        if !trusted {
            missing.push(format!(
                "the project (no [projects.\"{}\"] trust_level = \"trusted\")",
                dir.display()
            ));
        }
    }
    let states = config
        .get("hooks")
        .and_then(|hooks| hooks.get("state"))
        .and_then(toml::Value::as_table);
    let hooks_file = real(&found.file);
    for (event, group) in &found.groups {
        let key = format!("{}:{}:{group}:0", hooks_file.display(), codex_event(event));
        let state = states.and_then(|states| states.get(&key));
        let hashed = state
            .and_then(|state| state.get("trusted_hash"))
            .and_then(toml::Value::as_str)
            .is_some();
        let enabled = state
            .and_then(|state| state.get("enabled"))
            .and_then(toml::Value::as_bool)
            != Some(false);
        if !hashed || !enabled {
            missing.push(format!("the hook [hooks.state.\"{key}\"]"));
        }
    }
    if missing.is_empty() {
        Check::new(
            true,
            format!(
                "{} trusts the project and Attest's handlers (Codex asks again if the hook \
                 changed since)",
                file.display()
            ),
            read,
        )
    } else {
        Check::new(
            false,
            format!(
                "{} does not trust {}; {how}",
                file.display(),
                missing.join(", ")
            ),
            read,
        )
    }
}

fn loaded(
    global: &Global,
    agent: AgentKind,
    found: Option<&Found>,
    dir: &Path,
    home: Option<&Path>,
) -> Check {
    let mut read = Vec::new();
    let mut problems = Vec::new();
    let mut fine = Vec::new();
    // Settings that switch every hook off.
    let switches: Vec<(PathBuf, &str)> = match agent {
        AgentKind::ClaudeCode => {
            let mut files = vec![
                dir.join(".claude/settings.json"),
                dir.join(".claude/settings.local.json"),
            ];
            files.extend(home.map(|home| home.join(".claude/settings.json")));
            files
                .into_iter()
                .map(|file| (file, "/disableAllHooks"))
                .collect()
        }
        AgentKind::Copilot => {
            let mut files = vec![
                dir.join(".github/copilot/settings.json"),
                dir.join(".github/copilot/settings.local.json"),
            ];
            files.extend(copilot_home(home).map(|home| home.join("settings.json")));
            files
                .into_iter()
                .map(|file| (file, "/disableAllHooks"))
                .collect()
        }
        AgentKind::Gemini => {
            let mut files = vec![dir.join(".gemini/settings.json")];
            files.extend(home.map(|home| home.join(".gemini/settings.json")));
            files
                .into_iter()
                .map(|file| (file, "/hooksConfig/enabled"))
                .collect()
        }
        AgentKind::Codex | AgentKind::Cursor => Vec::new(),
    };
    for (file, pointer) in switches {
        if !file.exists() {
            continue;
        }
        read.push(file.clone());
        match read_json(&file) {
            Ok(value) => {
                let off = match value.pointer(pointer).and_then(Value::as_bool) {
                    Some(flag) if pointer == "/hooksConfig/enabled" => !flag,
                    Some(flag) => flag,
                    None => false,
                };
                if off {
                    problems.push(format!(
                        "{} switches every hook off ({})",
                        file.display(),
                        pointer.trim_start_matches('/').replace('/', ".")
                    ));
                }
            }
            Err(why) => problems.push(why),
        }
    }
    if problems.is_empty() {
        fine.push("no setting switches hooks off".to_owned());
    }
    if let Some(found) = found {
        match program(&found.command) {
            Ok(path) => fine.push(format!("the hook runs {}", path.display())),
            Err(why) => problems.push(why),
        }
    }
    match configuration(global, dir) {
        Ok(files) => {
            fine.push("Attest's configuration and policy load".to_owned());
            read.extend(files);
        }
        Err(why) => problems.push(format!(
            "Attest's configuration does not load, so the hook denies every call: {why}"
        )),
    }
    if problems.is_empty() {
        Check::new(true, fine.join("; "), read)
    } else {
        Check::new(false, problems.join("; "), read)
    }
}

/// The program a hook command runs: an absolute path that is an executable file, else
/// the first executable of that name on PATH.
fn program(command: &str) -> Result<PathBuf, String> {
    let word = command.split_whitespace().next().unwrap_or_default();
    let executable = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        path.is_file()
            && std::fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o111 != 0)
    };
    if word.contains('/') {
        let path = PathBuf::from(word);
        return if executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "the hook runs {word}, which is not an executable file: the agent's hook \
                 fails"
            ))
        };
    }
    let path = crate::config::env_var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(word))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| {
            format!(
                "the hook runs `{word}`, which is not on PATH here: the agent finds it only \
                 if its PATH has it (`attest hook install --program /path/to/attest` names \
                 it)"
            )
        })
}

/// Loads the project's Attest configuration and policy as a hook run there would, and
/// returns the files they came from; the error names the file, line and key.
fn configuration(global: &Global, dir: &Path) -> Result<Vec<PathBuf>, String> {
    // The hook enters the project to read its settings; so does the doctor (a one-shot
    // process).
    std::env::set_current_dir(dir)
        .map_err(|err| format!("cannot enter {}: {err}", dir.display()))?;
    let config = Config::resolve(&global.overrides()).map_err(|err| format!("{err:#}"))?;
    config.policy().map_err(|err| format!("{err:#}"))?;
    let file = dir.join(".attest/config.yaml");
    Ok(if file.exists() {
        vec![file]
    } else {
        Vec::new()
    })
}

/// A path with its symbolic links resolved where it exists (the agents compare real
/// paths), else as given.
fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// An agent's JSON file, read with its size bounded; lines that are `//` comments (as
/// Copilot CLI writes its config.json, and Gemini CLI allows) are dropped first.
fn read_json(path: &Path) -> Result<Value, String> {
    let text = crate::config::read_text(path, MAX_FILE_BYTES)
        .map_err(|err| format!("cannot read {}: {err:#}", path.display()))?;
    let text: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str(&text).map_err(|err| format!("{} is not JSON: {err}", path.display()))
}

//! `git`, read by its subcommand, with what makes it run another command (`-c
//! core.fsmonitor=…`, `--upload-pack`, `ext::` URLs, `submodule foreach`, `bisect run`,
//! `rebase --exec`, `filter-branch --tree-filter`) and the files it writes (`git config`,
//! `--output`).

use attest_policy::{Risk, Verb};

use super::runners::{judge, Runs};
use super::settings::git_key_runs_commands;
use super::{known, subcommand, unknown, Detection, Registry};
use crate::detect::protected_path::file_write;

/// Options before the subcommand that take the next word as their value.
const VALUE_OPTIONS: [&str; 5] = ["-C", "--git-dir", "--work-tree", "--namespace", "-c"];

/// Options of any subcommand that name a program git runs (`fetch --upload-pack`, `push
/// --receive-pack`, `archive --exec`).
const PROGRAM_OPTIONS: [&str; 3] = ["--upload-pack", "--receive-pack", "--exec"];

/// Options whose value is a command line a shell runs, by subcommand.
const COMMAND_OPTIONS: [(&str, &[&str]); 3] = [
    ("rebase", &["-x", "--exec"]),
    ("difftool", &["-x", "--extcmd"]),
    (
        "filter-branch",
        &[
            "--env-filter",
            "--tree-filter",
            "--index-filter",
            "--parent-filter",
            "--msg-filter",
            "--commit-filter",
            "--tag-name-filter",
        ],
    ),
];

/// A git command line: `args` are the words after `git`.
pub(super) fn git(registry: &Registry, args: &[String], depth: usize) -> Detection {
    let mut runs_commands = false;
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        let option = first.as_str();
        if option == "-c" || option == "--config-env" {
            // `-c key=value`, `--config-env key=VAR`; a key alone is `true`.
            let key = tail
                .first()
                .map_or("", |kv| kv.split('=').next().unwrap_or(kv));
            runs_commands |= git_key_runs_commands(key);
        } else if let Some(kv) = option.strip_prefix("--config-env=") {
            runs_commands |= git_key_runs_commands(kv.split('=').next().unwrap_or(kv));
        } else if option.starts_with("--exec-path=") {
            // git's helpers and subcommands found in a directory the caller names.
            runs_commands = true;
        } else if !option.starts_with('-') {
            break;
        }
        rest = if VALUE_OPTIONS.contains(&option) {
            tail.get(1..).unwrap_or(&[])
        } else {
            tail
        };
    }
    let runs_program = rest.iter().any(|arg| {
        arg.starts_with("ext::")
            || PROGRAM_OPTIONS
                .iter()
                .any(|flag| arg == flag || arg.starts_with(&format!("{flag}=")))
    });
    let reading = match rest.split_first() {
        Some((sub, sub_args)) => subcommand_reading(registry, sub, sub_args, depth),
        None => known("git", Verb::Read, None, None),
    };
    if runs_commands || runs_program {
        reading.riskier(unknown())
    } else {
        reading
    }
}

fn subcommand_reading(
    registry: &Registry,
    sub: &str,
    sub_args: &[String],
    depth: usize,
) -> Detection {
    let has = |flags: &[&str]| sub_args.iter().any(|arg| flags.contains(&arg.as_str()));
    let changes = || known("git", Verb::Update, Some("repository"), Some(Risk::Medium));
    let mut reading = match sub {
        "push" => {
            let destructive = has(&[
                "-f",
                "--force",
                "--force-with-lease",
                "--delete",
                "-d",
                "--mirror",
                "--prune",
            ]) || sub_args.iter().any(|arg| {
                arg.starts_with("--force") || arg.starts_with(':') || arg.starts_with('+')
            });
            if destructive {
                known("git", Verb::Delete, Some("branch"), None)
            } else {
                known("git", Verb::Share, Some("branch"), None)
            }
        }
        "reset" if has(&["--hard"]) => known("git", Verb::Delete, Some("changes"), None),
        "clean"
            if sub_args
                .iter()
                .any(|arg| arg.starts_with('-') && arg.contains('f')) =>
        {
            known("git", Verb::Delete, Some("file"), None)
        }
        "branch" if has(&["-D", "-d", "--delete"]) => {
            known("git", Verb::Delete, Some("branch"), Some(Risk::High))
        }
        "stash" if matches!(subcommand(sub_args), Some("drop" | "clear")) => {
            known("git", Verb::Delete, Some("stash"), Some(Risk::High))
        }
        "config" => config(sub_args),
        "submodule" if subcommand(sub_args) == Some("foreach") => {
            // The command is run by a shell in each submodule.
            let at = sub_args
                .iter()
                .position(|arg| arg == "foreach")
                .unwrap_or(0);
            let command: Vec<&str> = sub_args[at + 1..]
                .iter()
                .map(String::as_str)
                .skip_while(|arg| matches!(*arg, "--recursive" | "--quiet" | "-q"))
                .collect();
            if command.is_empty() {
                unknown()
            } else {
                judge(registry, &Runs::Line(command.join(" ")), depth)
            }
        }
        "bisect" if subcommand(sub_args) == Some("run") => {
            let at = sub_args.iter().position(|arg| arg == "run").unwrap_or(0);
            let command = sub_args.get(at + 1..).unwrap_or(&[]);
            let runs = if command.is_empty() {
                Runs::Unknown
            } else {
                Runs::Words(command.to_vec())
            };
            changes().riskier(judge(registry, &runs, depth))
        }
        "status" | "log" | "diff" | "show" | "blame" | "grep" | "ls-files" | "ls-tree"
        | "rev-parse" | "describe" | "shortlog" | "reflog" | "cat-file" | "fetch" | "remote"
        | "help" | "version" => known("git", Verb::Read, None, None),
        "branch" | "tag"
            if sub_args.is_empty() || has(&["-l", "--list", "-a", "-r", "-v", "-vv"]) =>
        {
            known("git", Verb::Read, None, None)
        }
        _ => changes(),
    };
    // Command lines given as option values (`rebase --exec 'make test'`).
    if let Some((_, flags)) = COMMAND_OPTIONS.iter().find(|(name, _)| *name == sub) {
        for (at, arg) in sub_args.iter().enumerate() {
            let value = flags.iter().find_map(|flag| {
                if arg == flag {
                    Some(sub_args.get(at + 1).cloned().unwrap_or_default())
                } else {
                    arg.strip_prefix(&format!("{flag}=")).map(str::to_owned)
                }
            });
            if let Some(line) = value {
                reading = reading.riskier(judge(registry, &Runs::Line(line), depth));
            }
        }
    }
    // Files the output goes to (`diff --output=F`, `format-patch -o DIR`, `archive -o F`).
    for (at, arg) in sub_args.iter().enumerate() {
        let next = || sub_args.get(at + 1).cloned().unwrap_or_default();
        let path = match arg.as_str() {
            "--output" | "--output-directory" => Some(next()),
            "-o" if matches!(sub, "format-patch" | "archive") => Some(next()),
            other => other
                .strip_prefix("--output=")
                .or_else(|| other.strip_prefix("--output-directory="))
                .map(str::to_owned),
        };
        if let Some(path) = path {
            reading = reading.riskier(file_write(&path));
        }
    }
    reading
}

/// `git config`: a read, or a write of the configuration file it names (`.git/config`
/// unless `--global`, `--system`, `--worktree` or `--file`). Setting or removing a key
/// that can make git run a command asks, whatever the file.
fn config(args: &[String]) -> Detection {
    let mut file = ".git/config".to_owned();
    let mut writes = false;
    let mut reads = false;
    let mut positional: Vec<&str> = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--global" => file = "~/.gitconfig".to_owned(),
            "--system" => file = "/etc/gitconfig".to_owned(),
            "--worktree" => file = ".git/config.worktree".to_owned(),
            "--local" => file = ".git/config".to_owned(),
            "-f" | "--file" => file = rest.next().cloned().unwrap_or_default(),
            "--blob" | "--type" | "--default" | "--comment" | "--value" => {
                rest.next();
            }
            "--add" | "--unset" | "--unset-all" | "--replace-all" | "--rename-section"
            | "--remove-section" | "-e" | "--edit" => writes = true,
            "--get" | "--get-all" | "--get-regexp" | "--get-urlmatch" | "--get-color"
            | "--get-colorbool" | "-l" | "--list" => reads = true,
            other => {
                if let Some(path) = other.strip_prefix("--file=") {
                    file = path.to_owned();
                } else if !other.starts_with('-') {
                    positional.push(other);
                }
            }
        }
    }
    // git 2.46's subcommands (`git config set core.editor vim`).
    match positional.first().copied() {
        Some("set" | "unset" | "rename-section" | "remove-section" | "edit") => {
            writes = true;
            positional.remove(0);
        }
        Some("get" | "list") => {
            reads = true;
            positional.remove(0);
        }
        _ => {}
    }
    let writes = writes || (!reads && positional.len() >= 2);
    if !writes {
        return known("git", Verb::Read, None, None);
    }
    let written = file_write(&file);
    match positional.first() {
        Some(key) if !git_key_runs_commands(key) => written,
        // A key that runs commands, or no key a write can be judged by (`--edit` runs an
        // editor on the whole file).
        _ => written.riskier(unknown()),
    }
}

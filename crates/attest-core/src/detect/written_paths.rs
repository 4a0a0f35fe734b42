//! The paths a shell command line writes, resolved against the directory each part runs
//! in: a `cd` (or `pushd`) moves the parts after it, `git -C` and `--git-dir` move git,
//! `sh -c` is read as a line of its own. Every directory the line could be in is kept
//! (a `cd` in a subshell or behind `||` may or may not have happened), and each write is
//! resolved against all of them: the riskiest reading.

use std::path::{Path, PathBuf};

use super::shell::{option_writes, program, simple_commands};
use crate::protected::resolve;

/// How many directories one line is followed into; past that, writes are unresolved.
const MAX_DIRS: usize = 16;

/// How deep `sh -c` lines are read.
const MAX_DEPTH: usize = 4;

/// Each path `command` writes: `Ok` resolved, `Err` the text the static reading could not
/// resolve (a `$VAR`, a glob, a `cd` to somewhere unknown).
pub(crate) fn written_paths(
    command: &str,
    cwd: Option<&Path>,
    home: Option<&Path>,
) -> Vec<Result<PathBuf, String>> {
    let mut out = Vec::new();
    let dirs = vec![cwd
        .map(Path::to_path_buf)
        .ok_or_else(|| "the agent's directory".to_owned())];
    line(command, dirs, home, 0, &mut out);
    out
}

/// The directories a line may be in: `Err` is one the reading cannot know, as written.
type Dirs = Vec<Result<PathBuf, String>>;

fn line(
    command: &str,
    mut dirs: Dirs,
    home: Option<&Path>,
    depth: usize,
    out: &mut Vec<Result<PathBuf, String>>,
) {
    for simple in simple_commands(command) {
        for path in &simple.writes {
            judge_all(path, &dirs, home, out);
        }
        let found = program(&simple.words);
        for path in &found.writes {
            judge_all(path, &dirs, home, out);
        }
        if let Some(inner) = found.line.as_deref().filter(|_| depth < MAX_DEPTH) {
            line(inner, dirs.clone(), home, depth + 1, out);
        }
        let Some((program, args)) = found.words.split_first() else {
            continue;
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        let operands: Vec<&String> = args.iter().filter(|arg| !arg.starts_with('-')).collect();
        match name {
            "cd" | "pushd" | "chdir" => {
                let moved: Dirs = match operands.first() {
                    None => vec![home.map(Path::to_path_buf).ok_or_else(|| "~".to_owned())],
                    Some(to) => dirs.iter().map(|dir| moved_to(to, dir, home)).collect(),
                };
                dirs.extend(moved);
                // `cd -` goes where the reading cannot follow.
                if args.iter().any(|arg| arg == "-") {
                    dirs.push(Err("-".to_owned()));
                }
            }
            "popd" => dirs.push(Err("popd".to_owned())),
            "sh" | "bash" | "zsh" | "dash" | "ksh" if depth < MAX_DEPTH => {
                if let Some(inner) = args
                    .iter()
                    .position(|arg| arg.starts_with('-') && arg.contains('c'))
                    .and_then(|i| args.get(i + 1))
                {
                    line(inner, dirs.clone(), home, depth + 1, out);
                }
            }
            "git" => git(args, &dirs, home, out),
            "cp" | "ln" | "install" => {
                let target = target_directory(args).or_else(|| operands.last().copied());
                if let Some(target) = target {
                    judge_all(target, &dirs, home, out);
                }
            }
            "mv" | "tee" | "touch" | "mkdir" | "truncate" | "chmod" | "chown" | "chgrp" | "rm"
            | "rmdir" | "shred" | "unlink" | "patch" => {
                for path in operands {
                    judge_all(path, &dirs, home, out);
                }
            }
            // sed's in-place files are the shell reading's (`option_writes` below).
            "perl" | "ruby" if args.iter().any(|arg| arg.starts_with("-i")) => {
                // The script is the first operand unless `-e` gave it.
                let scripted = args.iter().any(|arg| arg == "-e" || arg == "--expression");
                let skip = usize::from(!scripted);
                for path in operands.into_iter().skip(skip) {
                    judge_all(path, &dirs, home, out);
                }
            }
            "dd" => {
                for path in args.iter().filter_map(|arg| arg.strip_prefix("of=")) {
                    judge_all(path, &dirs, home, out);
                }
            }
            _ => {}
        }
        for path in option_writes(name, args) {
            judge_all(&path, &dirs, home, out);
        }
        if dirs.len() > MAX_DIRS {
            dirs = vec![Err("a directory among many".to_owned())];
        }
    }
}

/// `cp -t DIR`, `--target-directory=DIR`.
fn target_directory(args: &[String]) -> Option<&String> {
    args.iter().enumerate().find_map(|(i, arg)| {
        if arg == "-t" || arg == "--target-directory" {
            args.get(i + 1)
        } else {
            None
        }
    })
}

/// git's own directory options, and the configuration file `git config` writes.
fn git(args: &[String], dirs: &Dirs, home: Option<&Path>, out: &mut Vec<Result<PathBuf, String>>) {
    let mut dirs = dirs.clone();
    let mut git_dir: Option<&str> = None;
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "-C" => {
                let Some((to, more)) = tail.split_first() else {
                    break;
                };
                dirs = dirs.iter().map(|dir| moved_to(to, dir, home)).collect();
                rest = more;
            }
            "--git-dir" | "-c" | "--work-tree" | "--namespace" => {
                if first == "--git-dir" {
                    git_dir = tail.first().map(String::as_str);
                }
                rest = tail.get(1..).unwrap_or(&[]);
            }
            flag if flag.starts_with("--git-dir=") => {
                git_dir = flag.strip_prefix("--git-dir=");
                rest = tail;
            }
            flag if flag.starts_with('-') => rest = tail,
            _ => break,
        }
    }
    let Some((subcommand, args)) = rest.split_first() else {
        return;
    };
    if subcommand != "config" || !config_writes(args) {
        return;
    }
    if args
        .iter()
        .any(|arg| arg == "--global" || arg == "--system")
    {
        return;
    }
    let file = args
        .iter()
        .position(|arg| arg == "-f" || arg == "--file")
        .and_then(|i| args.get(i + 1));
    match (file, git_dir) {
        (Some(file), _) => judge_all(file, &dirs, home, out),
        (None, Some(git_dir)) => judge_all(&format!("{git_dir}/config"), &dirs, home, out),
        (None, None) => judge_all(".git/config", &dirs, home, out),
    }
}

/// Whether `git config ARGS` writes: a write option, a `set`/`unset` subcommand, or a
/// key with a value.
fn config_writes(args: &[String]) -> bool {
    const WRITES: [&str; 9] = [
        "--unset",
        "--unset-all",
        "--add",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "--edit",
        "-e",
        "--append",
    ];
    if args.iter().any(|arg| WRITES.contains(&arg.as_str())) {
        return true;
    }
    let operands: Vec<&String> = args.iter().filter(|arg| !arg.starts_with('-')).collect();
    matches!(
        operands.first().map(|s| s.as_str()),
        Some("set" | "unset" | "rename-section" | "remove-section" | "edit")
    ) || operands.len() >= 2
}

/// The directory `cd to` moves to from `dir`.
fn moved_to(
    to: &str,
    dir: &Result<PathBuf, String>,
    home: Option<&Path>,
) -> Result<PathBuf, String> {
    match dir {
        Ok(dir) => resolve(to, Some(dir), home).ok_or_else(|| to.to_owned()),
        Err(_) if to.starts_with('/') || to.starts_with('~') => {
            resolve(to, None, home).ok_or_else(|| to.to_owned())
        }
        Err(unknown) => Err(format!("{unknown}/{to}")),
    }
}

/// `path` resolved in every directory the line may be in.
fn judge_all(path: &str, dirs: &Dirs, home: Option<&Path>, out: &mut Vec<Result<PathBuf, String>>) {
    let absolute = path.starts_with('/') || path.starts_with('~');
    for dir in dirs {
        out.push(match dir {
            Ok(dir) => resolve(path, Some(dir), home).ok_or_else(|| path.to_owned()),
            Err(_) if absolute => resolve(path, None, home).ok_or_else(|| path.to_owned()),
            Err(unknown) => Err(format!("{path} in the directory {unknown}")),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(command: &str) -> Vec<Result<PathBuf, String>> {
        written_paths(command, Some(Path::new("/w")), Some(Path::new("/home/me")))
    }

    #[test]
    fn cd_chains_git_directories_and_nested_shells_are_followed() {
        let ok = |p: &str| Ok(PathBuf::from(p));
        assert!(
            written("cd .cursor && cp payload hooks.json").contains(&ok("/w/.cursor/hooks.json"))
        );
        assert!(written("cd a; cd ../b && echo x > f").contains(&ok("/w/b/f")));
        assert!(written("git -C sub config core.hooksPath h").contains(&ok("/w/sub/.git/config")));
        assert!(written("git --git-dir=/r/.git config alias.x y").contains(&ok("/r/.git/config")));
        assert!(written("bash -c 'cd .husky && touch pre-commit'")
            .contains(&ok("/w/.husky/pre-commit")));
        assert!(written("echo {} > ~/.claude.json").contains(&ok("/home/me/.claude.json")));
        assert!(written("cd \"$X\" && touch f").contains(&Err("f in the directory $X".to_owned())));
        assert!(written("cd - && touch f").contains(&Err("f in the directory -".to_owned())));
        assert!(written("git config user.name").is_empty());
        let sed = written("sed -i 's/a$/b/' notes.txt");
        assert!(!sed.is_empty() && sed.iter().all(|path| path == &ok("/w/notes.txt")));
        assert!(written("cat .claude/settings.json").is_empty());
        // A read program's writing option writes its file, as `> F` does.
        assert!(written("sort -o .claude/settings.json in.txt")
            .contains(&ok("/w/.claude/settings.json")));
        assert!(written("cd .git && find . -fprint hooks/pre-commit")
            .contains(&ok("/w/.git/hooks/pre-commit")));
        // What a wrapper runs or writes itself.
        assert!(written("env -S 'touch .husky/pre-commit'").contains(&ok("/w/.husky/pre-commit")));
        assert!(written("time -o .mcp.json ls").contains(&ok("/w/.mcp.json")));
    }
}

//! Shell commands, as coding agents run them (`git push`, `rm -rf build`, `gh pr merge 7`,
//! `curl -X POST https://api.stripe.com/v1/refunds`).
//!
//! A command line is split into simple commands at `;`, `&`, `&&`, `||`, `|`, newlines
//! and command substitutions, each is read as words (quotes and backslashes honoured),
//! and the riskiest reading of the whole line wins. A program run by another is judged
//! by the program it runs ([`runners`]: `sudo`, `env`, `xargs`, `npx`, `find -exec`,
//! `git submodule foreach`, …); a setting that makes a program run a command asks
//! ([`settings`]: `PAGER=…`, `git -c core.fsmonitor=…`); a file a program writes through
//! an option is judged as a redirection to it (`> F`) is ([`writing_options`]: `sort -o`,
//! `sed w`, `awk '> "F"'`, `find -fprint`, `git config`). A program this module does not
//! know is an unrecognised `shell`/`execute`, which policy asks about.

mod git;
mod runners;
mod settings;
mod writing_options;
mod written_code;

use attest_policy::{Risk, Source, Verb};

use super::protected_path::file_write;
use super::{Detection, Registry};
use runners::{judge, Runs};
use writing_options::Effect;

/// The system of commands that run on the agent's own machine.
pub const SHELL_SYSTEM: &str = "shell";

/// The longest command line read; longer ones are judged unrecognised (they ask).
const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Detects a shell command line: the riskiest of its simple commands.
pub(super) fn detect_command(registry: &Registry, command: &str) -> Detection {
    detect_line(registry, command, 0)
}

/// A command line read `depth` runners or substitutions deep.
fn detect_line(registry: &Registry, command: &str, depth: usize) -> Detection {
    if command.len() > MAX_COMMAND_BYTES || depth > MAX_NESTING {
        return unknown();
    }
    let mut found: Option<Detection> = None;
    // Files written so far in this line: code among them that runs later asks.
    let mut written: Vec<String> = Vec::new();
    for simple in nested_commands(command, depth) {
        let mut one = detect_words(registry, &simple.words, depth);
        let runs_written = written_code::files_run(&simple.words).iter().any(|run| {
            written
                .iter()
                .any(|file| written_code::same_file(run, file))
        });
        if runs_written {
            one = Some(worst(one, unknown()));
        }
        written.extend(written_code::files_written(&simple.words));
        written.extend(simple.writes.iter().cloned());
        // A redirection writes its file whatever the program is (`echo {} > .mcp.json`).
        for path in &simple.writes {
            one = Some(worst(one, file_write(path)));
        }
        if let Some(one) = one {
            found = Some(worst(found, one));
        }
    }
    found.unwrap_or_else(|| shell(Verb::Read, None, None))
}

/// One simple command's words (`None` when it has none): its program, after the
/// assignments and wrappers before it, judged with what those set.
fn detect_words(registry: &Registry, words: &[String], depth: usize) -> Option<Detection> {
    if depth > MAX_NESTING {
        return Some(unknown());
    }
    let prefixed = runners::prefixed(words);
    let mut found = prefixed
        .words
        .split_first()
        .map(|(program, args)| detect_simple(registry, program, args, depth));
    match prefixed.bare_wrapper.as_deref() {
        // `env` alone prints the environment.
        Some("env") => found = Some(worst(found, shell(Verb::Read, None, None))),
        // A runner with nothing to run (`sudo -i`): nobody knows what it runs.
        Some(_) => found = Some(worst(found, unknown())),
        None => {}
    }
    if prefixed
        .assigned
        .iter()
        .any(|name| settings::variable_runs_commands(name))
    {
        found = Some(worst(found, unknown()));
    }
    for path in &prefixed.writes {
        found = Some(worst(found, file_write(path)));
    }
    if let Some(line) = &prefixed.line {
        found = Some(worst(
            found,
            judge(registry, &Runs::Line(line.clone()), depth),
        ));
    }
    found
}

/// The riskier of a reading so far (if any) and another.
fn worst(before: Option<Detection>, other: Detection) -> Detection {
    match before {
        Some(before) => before.riskier(other),
        None => other,
    }
}

fn shell(verb: Verb, target: Option<&str>, risk: Option<Risk>) -> Detection {
    known(SHELL_SYSTEM, verb, target, risk)
}

fn known(system: &str, verb: Verb, target: Option<&str>, risk: Option<Risk>) -> Detection {
    Detection {
        face_verb: None,
        system: system.to_owned(),
        verb,
        target: target.map(str::to_owned),
        source: Source::Heuristic,
        recognised: true,
        risk,
    }
}

fn unknown() -> Detection {
    Detection {
        face_verb: None,
        system: SHELL_SYSTEM.to_owned(),
        verb: Verb::Execute,
        target: None,
        source: Source::Heuristic,
        recognised: false,
        risk: None,
    }
}

/// One simple command: its program (a path's last part) and arguments.
fn detect_simple(registry: &Registry, program: &str, args: &[String], depth: usize) -> Detection {
    let name = program.rsplit('/').next().unwrap_or(program);
    let has = |flags: &[&str]| args.iter().any(|arg| flags.contains(&arg.as_str()));
    let sub = subcommand(args).unwrap_or("");
    let runs = |runs: Runs| judge(registry, &runs, depth);
    match name {
        "git" => git::git(registry, args, depth),
        "gh" => gh(registry, args),
        "curl" | "wget" | "http" | "https" | "xh" => http_client(registry, name, args),
        "rm" | "rmdir" | "shred" | "unlink" | "rimraf" => {
            let recursive = name == "rimraf"
                || args.iter().any(|arg| {
                    arg == "--recursive"
                        || (arg.starts_with('-')
                            && !arg.starts_with("--")
                            && arg.contains(['r', 'R']))
                });
            known(
                "files",
                Verb::Delete,
                Some(if recursive { "directory" } else { "file" }),
                None,
            )
        }
        "mv" | "cp" | "mkdir" | "touch" | "ln" | "chmod" | "chown" | "tee" | "truncate"
        | "patch" | "install" => writes_files(args),
        "perl" | "ruby" if inline_code(name, args) => unknown(),
        "perl" | "ruby" if has(&["-i"]) || args.iter().any(|a| a.starts_with("-i")) => {
            writes_files(args)
        }
        // Package runners: judged by the package they run.
        "npx" | "bunx" => runs(runners::package_runner(args)),
        "npm" | "bun" if matches!(sub, "exec" | "x") => {
            runs(runners::package_runner(after(args, sub)))
        }
        "pnpm" | "yarn" if matches!(sub, "dlx" | "exec") => {
            runs(runners::package_runner(after(args, sub)))
        }
        // `yarn rimraf .git` runs the package's program when no script has the name: the
        // program counts where Attest knows it (a script's name alone says nothing).
        "yarn" | "pnpm" if !sub.is_empty() => {
            let at = args.iter().position(|arg| arg == sub).unwrap_or(0);
            let program = runs(Runs::Words(args.get(at..).unwrap_or(&[]).to_vec()));
            let tool = package_tool(name, args);
            if program.recognised {
                tool.riskier(program)
            } else {
                tool
            }
        }
        "watch" => runs(runners::watch(args)),
        "find" => {
            let mut found = if has(&["-delete"]) {
                known("files", Verb::Delete, Some("file"), None)
            } else {
                shell(Verb::Read, None, None)
            };
            for command in runners::find_exec(args) {
                found = found.riskier(runs(command));
            }
            with_effects(found, writing_options::effects(name, args))
        }
        "fd" if runners::fd_exec(args).is_some() => {
            runners::fd_exec(args).map_or_else(unknown, runs)
        }
        "dd" => {
            // `dd of=/dev/sda` (or no `of=`) is the disk; `of=FILE` is a file written.
            let files: Vec<&str> = args
                .iter()
                .filter_map(|arg| arg.strip_prefix("of="))
                .collect();
            if files.is_empty() || files.iter().any(|path| path.starts_with("/dev/")) {
                known("disk", Verb::Delete, None, Some(Risk::VeryHigh))
            } else {
                files
                    .into_iter()
                    .map(file_write)
                    .reduce(Detection::riskier)
                    .unwrap_or_else(unknown)
            }
        }
        "mkfs" | "fdisk" | "parted" | "wipefs" => {
            known("disk", Verb::Delete, None, Some(Risk::VeryHigh))
        }
        // Shell builtins that only set variables: judged by the names they export.
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            let sets_command = args.iter().any(|arg| {
                runners::assignment_name(arg).is_some_and(settings::variable_runs_commands)
            });
            if sets_command {
                unknown()
            } else {
                shell(Verb::Read, None, None)
            }
        }
        "ls" | "cat" | "head" | "tail" | "less" | "more" | "grep" | "rg" | "ag" | "fd" | "wc"
        | "echo" | "printf" | "pwd" | "which" | "whoami" | "date" | "env" | "printenv" | "file"
        | "stat" | "du" | "df" | "tree" | "diff" | "sort" | "uniq" | "cut" | "awk" | "gawk"
        | "mawk" | "nawk" | "sed" | "jq" | "true" | "false" | "test" | "[" | "cd" | "basename"
        | "dirname" | "realpath" | "uname" | "ps" | "id" | "hostname" | "sha256sum" | "md5sum"
        | "type" => with_effects(
            shell(Verb::Read, None, None),
            writing_options::effects(name, args),
        ),
        "cargo" | "npm" | "pnpm" | "yarn" | "pip" | "pip3" | "uv" | "poetry" | "twine" | "go"
        | "gem" | "bundle" | "mvn" | "gradle" | "dotnet" => package_tool(name, args),
        "python" | "python3" | "node" | "deno" | "bun" | "php" | "lua" | "Rscript" | "pwsh"
            if inline_code(name, args) =>
        {
            unknown()
        }
        "make" | "cmake" | "ninja" | "python" | "python3" | "node" | "deno" | "bun" | "pytest"
        | "rustc" | "rustfmt" | "tsc" | "jest" | "vitest" | "ruff" | "black" | "mypy"
        | "eslint" | "prettier" | "gcc" | "cc" | "clang" | "javac" | "java" => {
            shell(Verb::Execute, None, Some(Risk::Medium))
        }
        "docker" | "podman" => container(args),
        "kubectl" | "helm" => kube(args),
        "terraform" | "tofu" | "pulumi" => infra(args),
        "ssh" | "scp" | "rsync" | "sftp" => known("remote", Verb::Execute, None, Some(Risk::High)),
        "sh" | "bash" | "zsh" | "dash" | "eval" | "source" | "." | "xargs" => unknown(),
        "kill" | "pkill" | "killall" | "shutdown" | "reboot" | "systemctl" | "service" => {
            known("processes", Verb::Delete, None, Some(Risk::High))
        }
        _ => unknown(),
    }
}

/// A reading made riskier by what its options do: each file written read as a
/// redirection to it, code run as a command nobody knows.
fn with_effects(reading: Detection, effects: Vec<Effect>) -> Detection {
    effects
        .into_iter()
        .map(|effect| match effect {
            Effect::Writes(path) => file_write(&path),
            Effect::RunsCode => unknown(),
        })
        .fold(reading, Detection::riskier)
}

/// The first argument that is not an option.
fn subcommand(args: &[String]) -> Option<&str> {
    args.iter()
        .map(String::as_str)
        .find(|arg| !arg.starts_with('-'))
}

/// The arguments after the subcommand `word`.
fn after<'a>(args: &'a [String], word: &str) -> &'a [String] {
    match args.iter().position(|arg| arg == word) {
        Some(at) => &args[at + 1..],
        None => &[],
    }
}

fn gh(registry: &Registry, args: &[String]) -> Detection {
    let Some(group) = subcommand(args) else {
        return known("github", Verb::Read, None, None);
    };
    let rest = after(args, group);
    let action = subcommand(rest).unwrap_or("");
    let target = match group {
        "pr" => "pull_request",
        "issue" => "issue",
        "repo" => "repository",
        "release" => "release",
        "workflow" | "run" => "workflow",
        "gist" => "gist",
        other => other,
    };
    let found = |verb, risk| known("github", verb, Some(target), risk);
    match (group, action) {
        ("api", _) => {
            let method = option_value(rest, &["-X", "--method"]);
            let writes = rest.iter().any(|arg| {
                matches!(
                    arg.as_str(),
                    "-f" | "-F" | "--field" | "--raw-field" | "--input"
                )
            });
            let method = method.unwrap_or(if writes { "POST" } else { "GET" });
            let path = subcommand(rest).unwrap_or("/");
            let url = format!("https://api.github.com/{}", path.trim_start_matches('/'));
            super::url::detect_http(registry, method, &url, None)
        }
        (_, "view" | "list" | "status" | "diff" | "checks" | "search" | "watch" | "download") => {
            found(Verb::Read, None)
        }
        ("pr", "merge") => found(Verb::Update, Some(Risk::High)),
        ("pr" | "issue", "comment") => found(Verb::Reply, None),
        ("pr", "review") => found(Verb::Approve, None),
        (_, "create" | "fork") => found(Verb::Create, None),
        (_, "delete" | "archive") => found(Verb::Delete, None),
        ("workflow" | "run", "run" | "rerun") => found(Verb::Execute, None),
        (
            _,
            "edit" | "close" | "reopen" | "ready" | "lock" | "unlock" | "transfer" | "pin"
            | "enable" | "disable",
        ) => found(Verb::Update, Some(Risk::High)),
        ("auth" | "config" | "help" | "version" | "browse" | "search", _) => {
            found(Verb::Read, None)
        }
        _ => Detection {
            face_verb: None,
            recognised: false,
            ..found(Verb::Write, None)
        },
    }
}

/// The value of the first of `flags` (`-X POST`, `-XPOST`, `--request=POST`).
fn option_value<'a>(args: &'a [String], flags: &[&str]) -> Option<&'a str> {
    for (at, arg) in args.iter().enumerate() {
        for flag in flags {
            if arg == flag {
                return args.get(at + 1).map(String::as_str);
            }
            if let Some(value) = arg.strip_prefix(flag) {
                let value = value.strip_prefix('=').unwrap_or(value);
                if !value.is_empty()
                    && (flag.len() == 2 || arg.as_bytes().get(flag.len()) == Some(&b'='))
                {
                    return Some(value);
                }
            }
        }
    }
    None
}

fn http_client(registry: &Registry, program: &str, args: &[String]) -> Detection {
    let url = args
        .iter()
        .map(String::as_str)
        .find(|arg| arg.starts_with("http://") || arg.starts_with("https://"));
    let Some(url) = url else {
        // A URL without a scheme, or one built at run time: nothing to judge it by.
        return unknown();
    };
    let method = match program {
        "http" | "https" | "xh" => args
            .iter()
            .map(String::as_str)
            .find(|arg| {
                matches!(
                    arg.to_ascii_uppercase().as_str(),
                    "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD"
                )
            })
            .map(str::to_owned)
            .unwrap_or_else(|| {
                let body = args
                    .iter()
                    .any(|arg| arg.contains('=') && !arg.starts_with('-'));
                (if body { "POST" } else { "GET" }).to_owned()
            }),
        _ => match option_value(args, &["-X", "--request", "--method"]) {
            Some(method) => method.to_owned(),
            None => {
                let body = args.iter().any(|arg| {
                    let flag = arg.split('=').next().unwrap_or(arg);
                    matches!(
                        flag,
                        "-d" | "--data"
                            | "--data-raw"
                            | "--data-binary"
                            | "--data-urlencode"
                            | "--json"
                            | "-F"
                            | "--form"
                            | "--post-data"
                            | "--post-file"
                            | "-T"
                            | "--upload-file"
                    ) || (arg.starts_with("-d") && arg.len() > 2)
                });
                (if body { "POST" } else { "GET" }).to_owned()
            }
        },
    };
    super::url::detect_http(registry, &method, url, None)
}

fn package_tool(program: &str, args: &[String]) -> Detection {
    let sub = subcommand(args).unwrap_or("");
    match (program, sub) {
        ("cargo", "publish" | "yank" | "owner")
        | ("npm" | "pnpm" | "yarn", "publish" | "unpublish" | "deprecate" | "dist-tag")
        | ("twine", "upload")
        | ("poetry" | "uv", "publish")
        | ("gem", "push" | "yank")
        | ("dotnet", "nuget")
        | ("mvn", "deploy") => known("packages", Verb::Share, Some("package"), None),
        _ => shell(Verb::Execute, None, Some(Risk::Medium)),
    }
}

/// A program that writes the files it is given (`cp`, `mv`, `tee`, `sed -i` …): a
/// medium-risk write, high when any argument is a protected path.
fn writes_files(args: &[String]) -> Detection {
    args.iter()
        .filter(|arg| !arg.starts_with('-'))
        .map(|arg| file_write(arg))
        .fold(
            known("files", Verb::Write, Some("file"), Some(Risk::Medium)),
            Detection::riskier,
        )
}

/// True when an interpreter is given its program inline (`python3 -c`, `node -e`,
/// `node --eval`, `perl -e`, `ruby -e`, `php -r`, `deno eval`) or on standard input (a
/// here-string, a heredoc, a pipe: no script named): code nobody has read.
fn inline_code(program: &str, args: &[String]) -> bool {
    let inline_flag = |arg: &str| {
        let short = arg.strip_prefix('-').filter(|a| !a.starts_with('-'));
        match program {
            "python" | "python3" => short.is_some_and(|a| a.contains('c')),
            "node" | "bun" => {
                matches!(arg, "--eval" | "--print") || short.is_some_and(|a| a.contains(['e', 'p']))
            }
            "perl" | "ruby" => short.is_some_and(|a| a.contains(['e', 'E'])),
            "php" => short.is_some_and(|a| a.contains('r')),
            _ => false,
        }
    };
    if args.iter().any(|arg| inline_flag(arg)) {
        return true;
    }
    let asks_about_itself =
        |arg: &String| matches!(arg.as_str(), "--version" | "-V" | "--help" | "-h");
    if !args.is_empty() && args.iter().all(asks_about_itself) {
        return false;
    }
    match args
        .iter()
        .find(|arg| !arg.starts_with('-') || arg.as_str() == "-")
    {
        None => true,
        Some(first) => first == "-" || (program == "deno" && first == "eval"),
    }
}

fn container(args: &[String]) -> Detection {
    match subcommand(args) {
        Some("push") => known("containers", Verb::Share, Some("image"), None),
        Some("rm" | "rmi" | "prune" | "kill") => {
            known("containers", Verb::Delete, None, Some(Risk::High))
        }
        Some("ps" | "images" | "logs" | "inspect" | "version" | "info") => {
            known("containers", Verb::Read, None, None)
        }
        _ => known("containers", Verb::Execute, None, Some(Risk::Medium)),
    }
}

fn kube(args: &[String]) -> Detection {
    match subcommand(args) {
        Some(
            "get" | "describe" | "logs" | "top" | "version" | "explain" | "diff" | "status"
            | "list" | "template",
        ) => known("kubernetes", Verb::Read, None, None),
        Some("delete" | "uninstall" | "drain") => known("kubernetes", Verb::Delete, None, None),
        _ => known("kubernetes", Verb::Update, None, Some(Risk::High)),
    }
}

fn infra(args: &[String]) -> Detection {
    match subcommand(args) {
        Some(
            "plan" | "show" | "output" | "validate" | "fmt" | "init" | "version" | "preview"
            | "stack",
        ) => known("infrastructure", Verb::Read, None, None),
        Some("destroy") => known("infrastructure", Verb::Delete, None, None),
        _ => known("infrastructure", Verb::Update, None, Some(Risk::High)),
    }
}

/// The files a program's writing options name (`sort -o F`, `uniq IN OUT`, sed's `w F`,
/// awk's `> "F"`, `find -fprint F`), as the shell reading reads them, so the protected-path
/// predicate judges them as it judges `> F`. A name computed at run time is left out here:
/// the shell reading already asks for it.
pub(super) fn option_writes(program: &str, args: &[String]) -> Vec<String> {
    writing_options::effects(program, args)
        .into_iter()
        .filter_map(|effect| match effect {
            Effect::Writes(path) if !path.is_empty() => Some(path),
            _ => None,
        })
        .collect()
}

/// A simple command's program as the runners' reading finds it, for the protected-path
/// predicate: its words from the program on (assignments and wrappers such as `sudo`,
/// `env`, `xargs` skipped: `… | xargs rm` is the `rm` it runs), a command line a wrapper
/// runs (`env -S '…'`), and the files a wrapper itself writes (`time -o F`).
pub(super) struct Program {
    pub(super) words: Vec<String>,
    pub(super) line: Option<String>,
    pub(super) writes: Vec<String>,
}

pub(super) fn program(words: &[String]) -> Program {
    let prefixed = runners::prefixed(words);
    Program {
        words: prefixed.words,
        line: prefixed.line,
        writes: prefixed.writes,
    }
}

/// One simple command: its words, and the files its output redirections write.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Simple {
    pub(super) words: Vec<String>,
    pub(super) writes: Vec<String>,
}

/// Splits a command line into simple commands of words. Quotes and backslashes are
/// honoured; `$(…)` and backticks start a command of their own (their text is read
/// as commands too); an output redirection's target is a file the command writes.
pub(super) fn simple_commands(line: &str) -> Vec<Simple> {
    nested_commands(line, 0)
}

/// How deep command substitutions are read; deeper ones are a command nobody knows (so
/// the line asks), and no input can exhaust the stack.
const MAX_NESTING: usize = 8;

/// Splits a command line into simple commands of words. Quotes and backslashes are
/// honoured; `$(…)` and backticks start a command of their own (their text is read
/// as commands too); an output redirection's target is a file the command writes.
fn nested_commands(line: &str, depth: usize) -> Vec<Simple> {
    if depth > MAX_NESTING {
        return vec![Simple {
            words: vec!["$(".to_owned()],
            writes: Vec::new(),
        }];
    }
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut writes: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        '$' if chars.peek() == Some(&'(') => {
                            // A substitution inside quotes still runs.
                            word.push_str("$(");
                            chars.next();
                            let inner: String = chars.by_ref().take_while(|&c| c != ')').collect();
                            commands.extend(nested_commands(&inner, depth + 1));
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    if next != '\n' {
                        word.push(next);
                    }
                }
            }
            '`' => {
                let inner: String = chars.by_ref().take_while(|&c| c != '`').collect();
                commands.extend(nested_commands(&inner, depth + 1));
            }
            '$' if chars.peek() == Some(&'(') => {
                chars.next();
                let inner: String = chars.by_ref().take_while(|&c| c != ')').collect();
                commands.extend(nested_commands(&inner, depth + 1));
                in_word = true;
            }
            // A brace is a group only as a word of its own (`{ a; }`); `{}` is a word.
            '{' | '}'
                if in_word
                    || !chars
                        .peek()
                        .is_none_or(|&next| next.is_whitespace() || ";&|)".contains(next)) =>
            {
                in_word = true;
                word.push(c);
            }
            ';' | '&' | '|' | '\n' | '(' | ')' | '{' | '}' => {
                end_word(&mut words, &mut word, &mut in_word);
                push_simple(&mut commands, &mut words, &mut writes);
            }
            '>' | '<' => {
                // A redirection: its target is not a word of the command. An output
                // redirection's target is a file written (`> .mcp.json`), unless it names a
                // descriptor (`2>&1`, `>&-`) or a device (`/dev/null`).
                end_word(&mut words, &mut word, &mut in_word);
                if words
                    .last()
                    .is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()))
                {
                    words.pop();
                }
                let mut operator = String::from(c);
                while let Some(&next @ ('>' | '&' | '<' | '|')) = chars.peek() {
                    operator.push(next);
                    chars.next();
                }
                while matches!(chars.peek(), Some(' ' | '\t')) {
                    chars.next();
                }
                let mut target = String::new();
                let mut quote = None;
                while let Some(&next) = chars.peek() {
                    match quote {
                        Some(open) if next == open => quote = None,
                        Some(_) => {}
                        None if next == '\'' || next == '"' => quote = Some(next),
                        None if next.is_whitespace() || matches!(next, ';' | '&' | '|' | ')') => {
                            break
                        }
                        None => {}
                    }
                    target.push(next);
                    chars.next();
                }
                // A here-document or here-string is the command's standard input: `-`, as
                // an interpreter reads its program from it (`python3 <<< 'code'`).
                if operator.starts_with("<<") {
                    words.push("-".to_owned());
                }
                let target: String = target.chars().filter(|&c| c != '"' && c != '\'').collect();
                let descriptor = operator.ends_with('&')
                    && target.chars().all(|c| c.is_ascii_digit() || c == '-');
                if operator.contains('>')
                    && !descriptor
                    && !target.is_empty()
                    && !target.starts_with("/dev/")
                {
                    writes.push(target);
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            '#' if !in_word => {
                // A comment to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                push_simple(&mut commands, &mut words, &mut writes);
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    push_simple(&mut commands, &mut words, &mut writes);
    commands
}

/// Ends the simple command being read, when it has words or writes.
fn push_simple(commands: &mut Vec<Simple>, words: &mut Vec<String>, writes: &mut Vec<String>) {
    if !words.is_empty() || !writes.is_empty() {
        commands.push(Simple {
            words: std::mem::take(words),
            writes: std::mem::take(writes),
        });
    }
}

/// A line's words split at whitespace, for tests of the parts below the tokenizer.
#[cfg(test)]
fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(command: &str) -> (String, Verb, bool) {
        let found = detect_command(Registry::shared(), command);
        (found.system, found.verb, found.recognised)
    }

    #[test]
    fn commands_coding_agents_run() {
        let cases: &[(&str, &str, Verb)] = &[
            ("git status", "git", Verb::Read),
            ("git -C repo log --oneline", "git", Verb::Read),
            ("git push origin main", "git", Verb::Share),
            ("git push --force origin main", "git", Verb::Delete),
            ("git commit -m 'x; rm -rf /'", "git", Verb::Update),
            ("rm -rf build", "files", Verb::Delete),
            ("cd /tmp && rm -r x", "files", Verb::Delete),
            ("gh pr merge 7 --squash", "github", Verb::Update),
            ("gh pr view 7", "github", Verb::Read),
            ("gh issue create --title t", "github", Verb::Create),
            (
                "curl -X POST https://api.stripe.com/v1/refunds -d amount=5",
                "stripe",
                Verb::Pay,
            ),
            ("curl https://api.github.com/repos/a/b", "github", Verb::Get),
            ("cargo test -p attest-core", "shell", Verb::Execute),
            ("cargo publish", "packages", Verb::Share),
            ("ls -la | grep foo > out.txt", "files", Verb::Write),
            ("ls -la 2>&1 >/dev/null", "shell", Verb::Read),
            ("FOO=1 sudo -u root rm x", "files", Verb::Delete),
            ("find . -name '*.tmp' | xargs rm", "files", Verb::Delete),
            ("xargs -0 -I {} rm -rf {} < list", "files", Verb::Delete),
            ("echo $(rm -rf /)", "files", Verb::Delete),
            ("echo `git push`", "git", Verb::Share),
        ];
        for (command, system, verb) in cases {
            let (s, v, _) = found(command);
            assert_eq!((s.as_str(), v), (*system, *verb), "{command}");
        }
    }

    #[test]
    fn the_riskiest_part_of_a_line_wins() {
        let (system, verb, _) = found("git status && git push -f && ls");
        assert_eq!((system.as_str(), verb), ("git", Verb::Delete));
    }

    #[test]
    fn unknown_programs_are_unrecognised_and_ask() {
        let (system, verb, recognised) = found("./deploy.sh prod");
        assert_eq!(
            (system.as_str(), verb, recognised),
            ("shell", Verb::Execute, false)
        );
        let (_, _, recognised) = found("curl -X POST \"$URL\"");
        assert!(!recognised);
        let (_, _, recognised) = found("bash -c 'anything'");
        assert!(!recognised);
    }

    /// True when the default policy asks about (or refuses) the reading: high risk or
    /// more, or an unrecognised write.
    fn asks(command: &str) -> bool {
        let found = detect_command(Registry::shared(), command);
        found.danger().0 >= Risk::High
    }

    #[test]
    fn runners_are_judged_by_the_program_they_run() {
        let deletes = [
            "npx rimraf .git",
            "npx --yes rimraf .git",
            "npx -p rimraf rimraf .git",
            "npm exec rimraf .git",
            "npm exec -- rimraf .git",
            "npm x rimraf .git",
            "pnpm dlx rimraf .git",
            "pnpm exec rimraf .git",
            "yarn dlx rimraf .git",
            "yarn exec rimraf .git",
            "yarn rimraf .git",
            "pnpm rimraf .git",
            "bunx rimraf .git",
            "bun x rimraf .git",
            "git submodule foreach 'rm -rf .'",
            "git submodule foreach --recursive 'rm -rf .'",
            "git bisect run rm -rf .",
            "git rebase --exec 'rm -rf .' main",
            "find . -exec rm {} ;",
            "find . -name '*.o' -execdir rm -rf {} +",
            "find . -ok rm {} ;",
            "fd -e o -x rm",
            "ls | xargs rm",
            "env rm -rf x",
            "env -i PATH=/bin rm -rf x",
            "env -S 'rm -rf x'",
            "nice -n 5 rm -rf x",
            "timeout 10 rm -rf x",
            "timeout -s KILL 10s rm -rf x",
            "nohup rm -rf x",
            "sudo rm -rf x",
            "sudo -u root rm -rf x",
            "watch rm -rf x",
            "watch -n 1 'rm -rf x'",
            "stdbuf -oL rm -rf x",
            "time rm -rf x",
            "command rm -rf x",
            "exec rm -rf x",
            "setsid rm -rf x",
            "ionice -c 3 rm -rf x",
        ];
        for command in deletes {
            let (system, verb, _) = found(command);
            assert_eq!(
                (system.as_str(), verb),
                ("files", Verb::Delete),
                "{command}"
            );
        }
        // A program nobody knows, run by a runner, is an unknown command: it asks.
        for command in [
            "npx some-unknown-tool",
            "npx -c 'some-unknown-tool'",
            "npm exec evil",
            "pnpm dlx evil",
            "pnpm exec evil",
            "yarn dlx evil",
            "bunx evil",
            "git submodule foreach ./evil.sh",
            "git bisect run ./evil.sh",
            "find . -exec ./evil {} ;",
            "watch ./evil",
            "sudo -i",
            "sudo -s",
            "timeout 10",
        ] {
            let (_, _, recognised) = found(command);
            assert!(!recognised, "{command}");
            assert!(asks(command), "{command}");
        }
        // What a runner runs is read as itself: a read stays a read.
        for (command, system, verb) in [
            ("find . -name x -exec cat {} ;", "shell", Verb::Read),
            (
                "find . -name '*.rs' -exec grep -n foo {} +",
                "shell",
                Verb::Read,
            ),
            ("timeout 5 git status", "git", Verb::Read),
            ("npx tsc --noEmit", "shell", Verb::Execute),
            ("git submodule foreach git status", "git", Verb::Read),
            ("env", "shell", Verb::Read),
        ] {
            let (s, v, _) = found(command);
            assert_eq!((s.as_str(), v), (system, verb), "{command}");
        }
        assert!(!asks("npx tsc --noEmit"));
    }

    #[test]
    fn configuration_that_makes_a_program_run_a_command_asks() {
        for command in [
            "git -c core.fsmonitor='rm -f x' status",
            "git -c core.sshCommand='rm -f x' fetch",
            "git -c core.pager='rm -f x' log",
            "git -c core.editor='rm -f x' commit",
            "git -c core.hooksPath=hooks commit -m x",
            "git -c alias.st='!rm -rf .' st",
            "git -c credential.helper='!evil' fetch",
            "git -c diff.x.textconv=evil diff",
            "git -c Core.FSMonitor=evil status",
            "git --config-env=core.pager=EVIL log",
            "git --exec-path=. status",
            "git fetch --upload-pack='rm -rf x' origin",
            "git clone 'ext::sh -c evil' x",
            "GIT_SSH_COMMAND='rm -rf x' git fetch",
            "GIT_PROXY_COMMAND=evil git fetch",
            "GIT_EXTERNAL_DIFF=evil git diff",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=evil git log",
            "GIT_CONFIG_PARAMETERS=\"'core.pager'='evil'\" git log",
            "GIT_CONFIG_GLOBAL=evil.cfg git status",
            "GIT_EXEC_PATH=. git status",
            "LD_PRELOAD=./x.so ls",
            "LD_LIBRARY_PATH=. ls",
            "PAGER='rm -rf x' git log",
            "GIT_PAGER=evil git log",
            "EDITOR=evil git commit",
            "VISUAL=evil git commit",
            "BASH_ENV=./evil.sh ls",
            "ENV=./evil.sh ls",
            "PROMPT_COMMAND=evil ls",
            "NODE_OPTIONS='--require ./evil.js' npm test",
            "PYTHONSTARTUP=evil.py ls",
            "PATH=.:$PATH ls",
            "env GIT_SSH_COMMAND=evil git fetch",
            "env LD_PRELOAD=./x.so ls",
            "sudo LD_PRELOAD=./x.so ls",
            "export PAGER=evil; git log",
            "export GIT_SSH_COMMAND=evil && git fetch",
            "export -n X; export LD_PRELOAD=./x.so",
            "PAGER=evil",
        ] {
            assert!(asks(command), "{command}");
            let (_, _, recognised) = found(command);
            assert!(!recognised, "{command}");
        }
        // Settings that run nothing change nothing.
        for (command, system) in [
            ("git -c color.ui=always status", "git"),
            ("git -c user.name=x -c user.email=y log", "git"),
            ("FOO=1 LANG=C git status", "git"),
            ("export FOO=1; ls", "shell"),
        ] {
            let (s, v, _) = found(command);
            assert_eq!((s.as_str(), v), (system, Verb::Read), "{command}");
        }
    }

    #[test]
    fn read_programs_that_write_are_judged_by_the_path_they_write() {
        for path in ["out.txt", ".claude/settings.json", ".git/hooks/pre-commit"] {
            let redirected = detect_command(Registry::shared(), &format!("true > {path}"));
            for spelling in [
                "sort -o {} in.txt",
                "sort --output={} in.txt",
                "sort -o{} in.txt",
                "uniq in.txt {}",
                "uniq -c in.txt {}",
                "sed -i s/a/b/ {}",
                "sed 's/x/y/w {}' in.txt",
                "sed -n '/x/w {}' in.txt",
                "sed -e 'W {}' in.txt",
                "awk '{{ print > \"{}\" }}' in.txt",
                "awk '{{ print $1 >> \"{}\" }}' in.txt",
                "gawk -i inplace '{{ print }}' {}",
                "find . -fprint {}",
                "find . -fprint0 {}",
                "find . -fprintf {} '%p'",
                "find . -fls {}",
                "tee {}",
                "tee -a {}",
                "cp in.txt {}",
                "mv in.txt {}",
                "install -m 644 in.txt {}",
                "dd if=in.txt of={}",
                "tree -o {}",
                "git diff --output={}",
                "git log -p --output {}",
                "git config --file {} user.name x",
                "less -o {} in.txt",
                "time -o {} ls",
            ] {
                let command = spelling
                    .replace("{}", path)
                    .replace("{{", "{")
                    .replace("}}", "}");
                let found = detect_command(Registry::shared(), &command);
                assert_eq!(found, redirected, "{command}");
            }
        }
        // A write to git's own configuration is a write to `.git/config`.
        let config = detect_command(Registry::shared(), "true > .git/config");
        for command in ["git config user.name x", "git config --add user.name x"] {
            assert_eq!(
                detect_command(Registry::shared(), command),
                config,
                "{command}"
            );
        }
        // Settings that make git run a command ask whatever file they go to.
        for command in [
            "git config core.hooksPath .hooks",
            "git config --global core.hooksPath /tmp/h",
            "git config --global alias.st '!rm -rf .'",
            "git config set core.fsmonitor evil",
            "git config --file x.cfg core.pager evil",
            "awk 'BEGIN{system(\"rm -rf x\")}'",
            "awk '{ print | \"sh\" }' in.txt",
            "awk 'BEGIN { \"date\" | getline d }'",
            "awk -f prog.awk in.txt",
            "awk '{ print > $2 }' in.txt",
            "sed 's/x/rm -rf y/e' in.txt",
            "sed '1e rm -rf y' in.txt",
            "sed -f prog.sed in.txt",
            "sort --compress-program=evil in.txt",
            "rg --pre evil foo",
        ] {
            assert!(asks(command), "{command}");
        }
        // Reading stays reading.
        for command in [
            "git config --get user.name",
            "git config user.name",
            "git config -l",
            "git config --list --show-origin",
            "sort in.txt",
            "uniq in.txt",
            "sed -n 's/a/b/p' in.txt",
            "awk '$1 > 5 { print $2 }' in.txt",
            "awk -F: '{ print $1 }' /etc/passwd",
            "find . -name '*.rs'",
            "tree src",
        ] {
            let (_, verb, _) = found(command);
            assert!(verb.is_read(), "{command}");
            assert!(!asks(command), "{command}");
        }
    }

    #[test]
    fn code_written_and_run_in_one_line_asks() {
        for command in [
            "printf 'import shutil' > t.py; python3 t.py",
            "cat > run.js <<'EOF'\nrequire('fs').rmSync('.git')\nEOF\nnode ./run.js",
            "echo 'x' | tee tool.rb && ruby tool.rb --go",
            "cp /tmp/x ./deploy && ./deploy",
            "printf 'all:\\n\\trm -rf .git\\n' > Makefile && make",
            "printf '{}' > package.json; npm test",
            "printf '{}' > package.json; yarn build",
            "printf 'x' > s.pl && perl s.pl",
        ] {
            assert!(asks(command), "{command}");
        }
        // A program run with no knowledge of who wrote it stays as it was.
        for command in [
            "python3 t.py",
            "make",
            "npm test",
            "printf x > out.txt; python3 t.py",
        ] {
            assert!(!asks(command), "{command}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_command_line_is_judged(command in "\\PC{0,300}") {
            let _ = detect_command(Registry::shared(), &command);
        }
    }

    #[test]
    fn deep_substitutions_ask_instead_of_overflowing() {
        let command = "$(".repeat(30_000);
        let found = detect_command(Registry::shared(), &command);
        assert!(!found.recognised);
    }

    #[test]
    fn odd_input_never_panics() {
        for command in [
            "", "'", "\"", "\\", "$(", "`", ">", "a >", "-X", "curl -X", "git -C", "((((", "#",
        ] {
            let _ = detect_command(Registry::shared(), command);
        }
    }
}

//! Shell commands, as coding agents run them (`git push`, `rm -rf build`, `gh pr merge 7`,
//! `curl -X POST https://api.stripe.com/v1/refunds`).
//!
//! A command line is split into simple commands at `;`, `&`, `&&`, `||`, `|`, newlines
//! and command substitutions, each is read as words (quotes and backslashes honoured,
//! leading `VAR=value`, `sudo`, `env`, `nohup`, `time`, `command`, `exec`, `xargs` skipped), and
//! the riskiest reading of the whole line wins. A program this module does not know is
//! an unrecognised `shell`/`execute`, which policy asks about.

use attest_policy::{Risk, Source, Verb};

use super::protected_path::file_write;
use super::{Detection, Registry};

/// The system of commands that run on the agent's own machine.
pub const SHELL_SYSTEM: &str = "shell";

/// The longest command line read; longer ones are judged unrecognised (they ask).
const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Detects a shell command line: the riskiest of its simple commands.
pub(super) fn detect_command(registry: &Registry, command: &str) -> Detection {
    if command.len() > MAX_COMMAND_BYTES {
        return unknown();
    }
    let mut found: Option<Detection> = None;
    for simple in simple_commands(command) {
        let words = program_words(&simple.words);
        let mut one = words
            .split_first()
            .map(|(program, args)| detect_simple(registry, program, args));
        // A redirection writes its file whatever the program is (`echo {} > .mcp.json`).
        for path in &simple.writes {
            let write = file_write(path);
            one = Some(match one {
                Some(before) => before.riskier(write),
                None => write,
            });
        }
        let Some(one) = one else {
            continue;
        };
        found = Some(match found {
            Some(before) => before.riskier(one),
            None => one,
        });
    }
    found.unwrap_or_else(|| shell(Verb::Read, None, None))
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
fn detect_simple(registry: &Registry, program: &str, args: &[String]) -> Detection {
    let name = program.rsplit('/').next().unwrap_or(program);
    let has = |flags: &[&str]| args.iter().any(|arg| flags.contains(&arg.as_str()));
    match name {
        "git" => git(args),
        "gh" => gh(registry, args),
        "curl" | "wget" | "http" | "https" | "xh" => http_client(registry, name, args),
        "rm" | "rmdir" | "shred" | "unlink" => {
            let recursive = args.iter().any(|arg| {
                arg == "--recursive"
                    || (arg.starts_with('-') && !arg.starts_with("--") && arg.contains(['r', 'R']))
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
        "sed" | "perl" | "ruby" if has(&["-i"]) || args.iter().any(|a| a.starts_with("-i")) => {
            writes_files(args)
        }
        "find" if has(&["-delete", "-exec", "-execdir", "-ok"]) => {
            known("files", Verb::Delete, Some("file"), None)
        }
        "dd" => args
            .iter()
            .filter_map(|arg| arg.strip_prefix("of="))
            .map(file_write)
            .fold(
                known("disk", Verb::Delete, None, Some(Risk::VeryHigh)),
                Detection::riskier,
            ),
        "mkfs" | "fdisk" | "parted" | "wipefs" => {
            known("disk", Verb::Delete, None, Some(Risk::VeryHigh))
        }
        "ls" | "cat" | "head" | "tail" | "less" | "more" | "grep" | "rg" | "ag" | "find" | "fd"
        | "wc" | "echo" | "printf" | "pwd" | "which" | "whoami" | "date" | "env" | "printenv"
        | "file" | "stat" | "du" | "df" | "tree" | "diff" | "sort" | "uniq" | "cut" | "awk"
        | "sed" | "jq" | "true" | "false" | "test" | "[" | "cd" | "basename" | "dirname"
        | "realpath" | "uname" | "ps" | "id" | "hostname" | "sha256sum" | "md5sum" | "type" => {
            shell(Verb::Read, None, None)
        }
        "cargo" | "npm" | "pnpm" | "yarn" | "npx" | "pip" | "pip3" | "uv" | "poetry" | "twine"
        | "go" | "gem" | "bundle" | "mvn" | "gradle" | "dotnet" => package_tool(name, args),
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

fn git(args: &[String]) -> Detection {
    // Options before the subcommand that take a value (`git -C dir push`).
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        if matches!(first.as_str(), "-C" | "-c" | "--git-dir" | "--work-tree") {
            rest = tail.get(1..).unwrap_or(&[]);
        } else if first.starts_with('-') {
            rest = tail;
        } else {
            break;
        }
    }
    let Some((sub, sub_args)) = rest.split_first() else {
        return known("git", Verb::Read, None, None);
    };
    let has = |flags: &[&str]| sub_args.iter().any(|arg| flags.contains(&arg.as_str()));
    match sub.as_str() {
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
                arg.starts_with("--force") || arg.starts_with(':') || arg.starts_with("+")
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
        "status" | "log" | "diff" | "show" | "blame" | "grep" | "ls-files" | "ls-tree"
        | "rev-parse" | "describe" | "shortlog" | "reflog" | "cat-file" | "fetch" | "remote"
        | "config" | "help" | "version" => known("git", Verb::Read, None, None),
        "branch" | "tag"
            if sub_args.is_empty() || has(&["-l", "--list", "-a", "-r", "-v", "-vv"]) =>
        {
            known("git", Verb::Read, None, None)
        }
        _ => known("git", Verb::Update, Some("repository"), Some(Risk::Medium)),
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

/// The words from the program on: leading assignments and wrappers that run the rest of
/// the line as a command (`sudo`, `env`, `nohup`, `xargs`, …) skipped: `… | xargs rm` is
/// the `rm` it runs.
pub(super) fn program_words(words: &[String]) -> Vec<String> {
    let mut rest = words;
    loop {
        let Some((first, tail)) = rest.split_first() else {
            return Vec::new();
        };
        let assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        let wrapper = matches!(
            first.as_str(),
            "sudo"
                | "doas"
                | "env"
                | "nohup"
                | "time"
                | "command"
                | "exec"
                | "nice"
                | "timeout"
                | "stdbuf"
                | "xargs"
        );
        if assignment || (wrapper && !tail.is_empty()) {
            rest = tail;
            // A wrapper's own options (`sudo -u root`, `nice -n 5`, `timeout 10`): skip
            // flags, the value of those that take one, and `timeout`'s duration.
            while let Some((next, more)) = rest.split_first() {
                if !wrapper {
                    break;
                }
                if takes_value(first, next) {
                    rest = more.get(1..).unwrap_or(&[]);
                } else if next.starts_with('-')
                    || (first == "timeout"
                        && next.chars().next().is_some_and(|c| c.is_ascii_digit()))
                {
                    rest = more;
                } else {
                    break;
                }
            }
        } else {
            return rest.to_vec();
        }
    }
}

/// True when `flag` of the wrapper `program` takes the next word as its value.
fn takes_value(program: &str, flag: &str) -> bool {
    match program {
        "sudo" | "doas" => matches!(
            flag,
            "-u" | "-g" | "-U" | "-C" | "-D" | "-h" | "-p" | "-r" | "-t"
        ),
        "env" => matches!(flag, "-u" | "-C" | "-S"),
        "nice" => flag == "-n",
        "timeout" => matches!(flag, "-s" | "-k"),
        "stdbuf" => matches!(flag, "-i" | "-o" | "-e"),
        "xargs" => matches!(
            flag,
            "-I" | "-n" | "-P" | "-L" | "-d" | "-E" | "-s" | "-a" | "--delimiter" | "--max-args"
        ),
        _ => false,
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

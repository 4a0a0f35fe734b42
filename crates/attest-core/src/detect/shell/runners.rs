//! Programs that run another program, judged by the program they run: wrappers before
//! a program (`sudo`, `env`, `nice`, `timeout`, `nohup`, `time`, `xargs`, …), package
//! runners (`npx`, `npm exec`, `pnpm dlx`, `yarn dlx`, `bunx`), `watch`, `find -exec`,
//! `fd -x`. A runner whose program cannot be told is a command nobody knows (it asks).

use super::{detect_line, detect_words, unknown, Detection, Registry};

/// What a runner runs.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Runs {
    /// A program and its arguments.
    Words(Vec<String>),
    /// A command line a shell reads (`watch 'rm -rf x'`, `npx -c '…'`).
    Line(String),
    /// A program nobody can tell (a runner given none): the riskiest reading.
    Unknown,
}

/// The reading of what a runner runs, one level deeper than the runner.
pub(super) fn judge(registry: &Registry, runs: &Runs, depth: usize) -> Detection {
    match runs {
        Runs::Words(words) => detect_words(registry, words, depth + 1).unwrap_or_else(unknown),
        Runs::Line(line) => detect_line(registry, line, depth + 1),
        Runs::Unknown => unknown(),
    }
}

/// Programs that run the rest of their words as a command, after their own options.
const PREFIX_WRAPPERS: [&str; 16] = [
    "sudo", "doas", "env", "nohup", "time", "command", "exec", "builtin", "nice", "timeout",
    "stdbuf", "xargs", "setsid", "ionice", "chrt", "taskset",
];

/// A simple command's words once the assignments and wrappers before its program are
/// read: `FOO=1 sudo -u root env PAGER=x git log` is `git log`, with `FOO` and `PAGER`
/// assigned.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Prefixed {
    /// The program and its arguments (empty when there is none).
    pub(super) words: Vec<String>,
    /// The names assigned before the program, by the shell or by `env`.
    pub(super) assigned: Vec<String>,
    /// Files a wrapper itself writes (`time -o FILE`).
    pub(super) writes: Vec<String>,
    /// A command line a wrapper splits and runs (`env -S 'rm -rf x'`).
    pub(super) line: Option<String>,
    /// A wrapper left with no program to run (`sudo -i`, `env`).
    pub(super) bare_wrapper: Option<String>,
}

/// Reads the assignments and wrappers before a simple command's program.
pub(super) fn prefixed(words: &[String]) -> Prefixed {
    let mut out = Prefixed::default();
    let mut rest = words;
    while let Some((first, tail)) = rest.split_first() {
        if let Some(name) = assignment_name(first) {
            out.assigned.push(name.to_owned());
            rest = tail;
            continue;
        }
        let wrapper = first.as_str();
        if !PREFIX_WRAPPERS.contains(&wrapper) {
            break;
        }
        rest = tail;
        // The wrapper's own options (`sudo -u root`, `nice -n 5`, `timeout -s KILL 10`).
        while let Some((next, more)) = rest.split_first() {
            let value = more.first();
            if wrapper == "env" && (next == "-S" || next == "--split-string") {
                // `env -S` splits its value into words: a command line of its own.
                let mut line = value.cloned().unwrap_or_default();
                for word in more.iter().skip(1) {
                    line.push(' ');
                    line.push_str(word);
                }
                out.line = Some(line);
                return out;
            }
            if takes_value(wrapper, next) {
                if wrapper == "time" && (next == "-o" || next == "--output") {
                    out.writes.extend(value.cloned());
                }
                rest = more.get(1..).unwrap_or(&[]);
            } else if let Some(path) = next.strip_prefix("--output=").filter(|_| wrapper == "time")
            {
                out.writes.push(path.to_owned());
                rest = more;
            } else if next.starts_with('-')
                || (matches!(wrapper, "timeout" | "chrt" | "taskset")
                    && next.chars().next().is_some_and(|c| c.is_ascii_digit()))
            {
                rest = more;
            } else {
                break;
            }
        }
        if rest.is_empty() {
            out.bare_wrapper = Some(wrapper.to_owned());
        }
    }
    out.words = rest.to_vec();
    out
}

/// The name a word assigns (`PAGER` of `PAGER=less`), when it is an assignment.
pub(super) fn assignment_name(word: &str) -> Option<&str> {
    let (name, _) = word.split_once('=')?;
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some(name)
}

/// True when `flag` of the wrapper `program` takes the next word as its value.
fn takes_value(program: &str, flag: &str) -> bool {
    match program {
        "sudo" | "doas" => matches!(
            flag,
            "-u" | "-g" | "-U" | "-C" | "-D" | "-h" | "-p" | "-r" | "-t"
        ),
        "env" => matches!(flag, "-u" | "-C" | "--unset" | "--chdir"),
        "nice" => flag == "-n",
        "timeout" => matches!(flag, "-s" | "-k" | "--signal" | "--kill-after"),
        "stdbuf" => matches!(flag, "-i" | "-o" | "-e"),
        "time" => matches!(flag, "-o" | "--output" | "-f" | "--format"),
        "ionice" => matches!(flag, "-c" | "-n" | "-p" | "-P" | "-u"),
        "taskset" => matches!(flag, "-c" | "--cpu-list"),
        "xargs" => matches!(
            flag,
            "-I" | "-n" | "-P" | "-L" | "-d" | "-E" | "-s" | "-a" | "--delimiter" | "--max-args"
        ),
        _ => false,
    }
}

/// What a package runner runs (`npx`, `npm exec`, `pnpm dlx`/`exec`, `yarn dlx`/`exec`,
/// `bunx`): `args` are the words after the runner. `-c`/`--call` (`npx -c '…'`, pnpm's
/// shell mode) makes the rest a command line.
pub(super) fn package_runner(args: &[String]) -> Runs {
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "-c" | "--call" | "--shell-mode" => return Runs::Line(tail.join(" ")),
            "-p" | "--package" | "--filter" | "-F" | "-C" | "--dir" | "--workspace-concurrency" => {
                rest = tail.get(1..).unwrap_or(&[]);
            }
            flag if flag.starts_with('-') => rest = tail,
            _ => return Runs::Words(rest.to_vec()),
        }
    }
    Runs::Unknown
}

/// What `watch` runs: its words after its options, given to `sh -c`.
pub(super) fn watch(args: &[String]) -> Runs {
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "-n" | "--interval" | "-q" | "--equexit" => rest = tail.get(1..).unwrap_or(&[]),
            flag if flag.starts_with('-') => rest = tail,
            _ => return Runs::Line(rest.join(" ")),
        }
    }
    Runs::Unknown
}

/// The commands `find -exec`, `-execdir`, `-ok` and `-okdir` run, each up to its `;` or
/// `+` (a `;` the shell splits off ends the words, too).
pub(super) fn find_exec(args: &[String]) -> Vec<Runs> {
    let mut runs = Vec::new();
    let mut rest = args;
    while let Some(at) = rest
        .iter()
        .position(|arg| matches!(arg.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
    {
        let command = &rest[at + 1..];
        let end = command
            .iter()
            .position(|arg| arg == ";" || arg == "+")
            .unwrap_or(command.len());
        runs.push(match command.get(..end) {
            Some(words) if !words.is_empty() => Runs::Words(words.to_vec()),
            _ => Runs::Unknown,
        });
        rest = command.get(end..).unwrap_or(&[]);
    }
    runs
}

/// What `fd -x`/`--exec` or `-X`/`--exec-batch` runs: every word after the flag.
pub(super) fn fd_exec(args: &[String]) -> Option<Runs> {
    let at = args
        .iter()
        .position(|arg| matches!(arg.as_str(), "-x" | "--exec" | "-X" | "--exec-batch"))?;
    Some(match args.get(at + 1..) {
        Some(words) if !words.is_empty() => Runs::Words(words.to_vec()),
        _ => Runs::Unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::super::words;
    use super::*;

    #[test]
    fn wrappers_and_assignments_before_a_program() {
        let read = prefixed(&words(
            "FOO=1 sudo -u root env -i PAGER=x nice -n 5 git log",
        ));
        assert_eq!(read.words, words("git log"));
        assert_eq!(read.assigned, ["FOO", "PAGER"]);
        assert_eq!(
            prefixed(&words("sudo -i")).bare_wrapper.as_deref(),
            Some("sudo")
        );
        assert_eq!(prefixed(&words("time -o t.txt ls")).writes, ["t.txt"]);
        assert_eq!(
            prefixed(&words("env -S rm -rf x")).line.as_deref(),
            Some("rm -rf x")
        );
        assert!(assignment_name("1X=2").is_none());
        assert!(assignment_name("a-b=2").is_none());
    }

    #[test]
    fn runners_name_what_they_run() {
        assert_eq!(
            package_runner(&words("--yes -p x rimraf .git")),
            Runs::Words(words("rimraf .git"))
        );
        assert_eq!(package_runner(&words("--yes")), Runs::Unknown);
        assert_eq!(
            find_exec(&words(". -exec rm {} ; -execdir cat {} +")),
            [Runs::Words(words("rm {}")), Runs::Words(words("cat {}"))]
        );
        assert_eq!(find_exec(&words(". -exec")), [Runs::Unknown]);
        assert_eq!(watch(&words("-n 1 rm x")), Runs::Line("rm x".to_owned()));
    }
}

//! Code a command line writes and then runs (`printf … > t.py; python3 t.py`, a Makefile
//! written then `make`, a `package.json` written then `npm test`): code nobody has read,
//! so it asks, as inline code (`python3 -c`) does. A file run with no sign in the line of
//! who wrote it is judged as the program that runs it.

use super::runners::prefixed;
use super::writing_options::{effects, Effect};

/// Interpreters whose first operand is a script they run.
const INTERPRETERS: [&str; 17] = [
    "python", "python3", "node", "deno", "bun", "ruby", "perl", "php", "lua", "Rscript", "pwsh",
    "sh", "bash", "zsh", "dash", "source", ".",
];

/// Package tools that run scripts from `package.json`.
const PACKAGE_SCRIPT_TOOLS: [&str; 4] = ["npm", "yarn", "pnpm", "bun"];

/// The files a simple command runs as code: an interpreter's script, a program named by
/// its path (`./deploy`), the makefile `make` reads, the `package.json` whose scripts a
/// package tool runs.
pub(super) fn files_run(words: &[String]) -> Vec<String> {
    let words = prefixed(words).words;
    let Some((program, args)) = words.split_first() else {
        return Vec::new();
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let mut run = Vec::new();
    if program.contains('/') {
        run.push(program.clone());
    }
    if INTERPRETERS.contains(&name) {
        run.extend(args.iter().find(|arg| !arg.starts_with('-')).cloned());
    } else if name == "make" || name == "gmake" {
        let named = args
            .iter()
            .position(|arg| arg == "-f" || arg == "--file" || arg == "--makefile")
            .and_then(|at| args.get(at + 1));
        match named {
            Some(file) => run.push(file.clone()),
            None => run.extend(
                ["GNUmakefile", "makefile", "Makefile"]
                    .iter()
                    .map(|file| (*file).to_owned()),
            ),
        }
    } else if PACKAGE_SCRIPT_TOOLS.contains(&name) {
        run.push("package.json".to_owned());
    }
    run
}

/// The files a simple command writes through its arguments (`tee F`, `cp A F`, `sort -o
/// F`); its redirections are read by the tokenizer.
pub(super) fn files_written(words: &[String]) -> Vec<String> {
    let words = prefixed(words).words;
    let Some((program, args)) = words.split_first() else {
        return Vec::new();
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let mut operands = args.iter().filter(|arg| !arg.starts_with('-')).cloned();
    match name {
        "tee" | "touch" | "truncate" => operands.collect(),
        "cp" | "mv" | "install" | "ln" | "curl" | "wget" => {
            let mut written: Vec<String> = operands.next_back().into_iter().collect();
            // `curl -o F`, `wget -O F`.
            for (at, arg) in args.iter().enumerate() {
                if matches!(arg.as_str(), "-o" | "-O" | "--output" | "--output-document") {
                    written.extend(args.get(at + 1).cloned());
                }
            }
            written
        }
        _ => effects(name, args)
            .into_iter()
            .filter_map(|effect| match effect {
                Effect::Writes(path) => Some(path),
                Effect::RunsCode => None,
            })
            .collect(),
    }
}

/// Whether two spellings name one file as far as the text tells (`./t.py` and `t.py`).
pub(super) fn same_file(a: &str, b: &str) -> bool {
    fn plain(path: &str) -> &str {
        let mut path = path.trim_matches(|c| c == '"' || c == '\'');
        while let Some(rest) = path.strip_prefix("./") {
            path = rest;
        }
        path
    }
    let (a, b) = (plain(a), plain(b));
    // A directory written (`cp x bin/`) holds the file run (`bin/x`).
    a == b || (b.ends_with('/') && a.starts_with(b)) || (a.ends_with('/') && b.starts_with(a))
}

#[cfg(test)]
mod tests {
    use super::super::words;
    use super::*;

    #[test]
    fn files_run_and_written() {
        assert_eq!(files_run(&words("sudo python3 -u t.py")), ["t.py"]);
        assert_eq!(files_run(&words("./deploy prod")), ["./deploy"]);
        assert_eq!(files_run(&words("make -f build.mk all")), ["build.mk"]);
        assert_eq!(files_run(&words("npm test")), ["package.json"]);
        assert!(files_run(&words("ls -la")).is_empty());
        assert_eq!(files_written(&words("cp a b c/")), ["c/"]);
        assert_eq!(files_written(&words("sort -o s.txt in")), ["s.txt"]);
        assert!(same_file("./t.py", "t.py"));
        assert!(same_file("bin/x", "bin/"));
        assert!(!same_file("t.py", "u.py"));
    }
}

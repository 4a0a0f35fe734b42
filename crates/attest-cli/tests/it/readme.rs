//! Every code block of README.md, docs/*.md, benchmarks/README.md, examples/README.md,
//! policies/README.md and policies/recipes/README.md, run or checked as written, so the
//! documentation cannot drift from the tool; and every relative link among them leads to a file
//! and heading that exist. How blocks are marked is described in docs/contributing.md:
//!
//! - a ```` ```sh ```` block runs; a ```` ```json ```` or ```` ```yaml ```` block must parse
//!   (or pass its `check`, below); a
//!   ```` ```text ```` block or one with no language is output or usage, shown and not run;
//!   a block in any other language (`rust`, `python`, …) must say why it is not run;
//! - no block is skipped. `<!-- readme-test: ran-by FILE -->` before a block that cannot run
//!   here (a published package, a release build, a remote server) names the test or script
//!   that runs it, and the test checks the claim: FILE reads the block from this document,
//!   or holds every option (`--flag`), `attest` subcommand and repository path the block
//!   uses;
//! - `<!-- readme-test: from-clone -->`: the block runs where a clone's `examples/`,
//!   `policies/` and `docs/` are (it says so in its prose); every other block runs from an
//!   empty directory of its own, as a reader's would be;
//! - `<!-- readme-test: postgres -->`: `ATTEST_LEDGER` is a PostgreSQL database of the
//!   block's own on the test server (as the reader's would be set);
//! - `<!-- readme-test: setup COMMANDS -->`: run first, in the same directory (for example
//!   to put rows in the ledger a block reads);
//! - `<!-- readme-test: expect TEXT -->`: the block's standard output must contain TEXT;
//! - `<!-- readme-test: compiled FILE -->`: the block is FILE's code, which cargo builds (an
//!   example): each of its lines, without indentation, must be a line of FILE, in order;
//! - `<!-- readme-test: check COMMAND -->`: the block (a configuration, a policy) is saved as
//!   `block.LANG` in the directory, and COMMAND runs there as a ```` ```sh ```` block would.
//!
//! Each block runs with `bash -e -o pipefail` in a fresh temporary directory outside the
//! clone, with the built `attest` first on `PATH` (instead of `cargo run`), `.ci/venv`'s
//! Python next (its `requests` and `mcp`), `HOME` inside the directory and nothing else from
//! the environment. A block must exit 0, and must stop what it starts: a process of its own
//! still running when it ends fails it (a second paste would find its port taken). Every
//! block runs twice, each time in a new directory, so two pastes of it never collide.
//!
//! One line is checked rather than run: `cargo install --path DIR --locked`, the install
//! step (a release build inside the test suite would take minutes, and the running cargo
//! holds the target directory). DIR must be the package that builds the `attest` binary
//! the test put on `PATH`, so the commands after it run against exactly what it installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{peer_missing_because, python};

/// The documents whose blocks run, relative to the repository's root, besides every
/// `docs/*.md` (found by [`docs`]).
const DOCS: &[&str] = &[
    "README.md",
    "benchmarks/README.md",
    "examples/README.md",
    "policies/README.md",
    "policies/recipes/README.md",
];

/// The documents whose blocks run and whose links are checked: [`DOCS`] and `docs/*.md`.
fn docs() -> Vec<String> {
    let mut found: Vec<String> = DOCS.iter().map(|doc| doc.to_string()).collect();
    let mut guides: Vec<String> = std::fs::read_dir(repo_root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    guides.sort();
    found.extend(guides);
    found
}

/// How long one block may take.
const BLOCK_TIMEOUT_SECS: &str = "180";

/// One fenced block, its language (`sh`, `json`, …; empty for none) and the directives before
/// it.
#[derive(Debug, Default)]
struct Block {
    doc: String,
    line: usize,
    lang: String,
    code: String,
    ran_by: Option<String>,
    from_clone: bool,
    postgres: bool,
    setup: Vec<String>,
    expect: Vec<String>,
    compiled: Option<String>,
    check: Option<String>,
}

/// The fenced blocks of `text`, each with the `readme-test` comments just before it (blank
/// lines between them are fine; any other line in between drops them).
fn blocks(doc: &str, text: &str) -> Vec<Block> {
    let fresh = || Block {
        doc: doc.to_owned(),
        ..Block::default()
    };
    let mut found = Vec::new();
    let mut next = fresh();
    let mut lines = text.lines().enumerate();
    while let Some((at, line)) = lines.next() {
        let trimmed = line.trim();
        if let Some(directive) = trimmed
            .strip_prefix("<!-- readme-test:")
            .and_then(|rest| rest.strip_suffix("-->"))
        {
            let directive = directive.trim();
            if let Some(file) = directive.strip_prefix("ran-by") {
                next.ran_by = Some(file.trim().to_owned());
            } else if directive == "from-clone" {
                next.from_clone = true;
            } else if directive == "postgres" {
                next.postgres = true;
            } else if let Some(commands) = directive.strip_prefix("setup") {
                next.setup.push(commands.trim().to_owned());
            } else if let Some(text) = directive.strip_prefix("expect") {
                next.expect.push(text.trim().to_owned());
            } else if let Some(file) = directive.strip_prefix("compiled") {
                next.compiled = Some(file.trim().to_owned());
            } else if let Some(command) = directive.strip_prefix("check") {
                next.check = Some(command.trim().to_owned());
            } else {
                panic!(
                    "{doc}:{}: unknown readme-test directive {directive:?} (no block is \
                     skipped: run it, or name what runs it with `ran-by FILE`)",
                    at + 1
                );
            }
        } else if let Some(lang) = fence(trimmed) {
            next.line = at + 1;
            next.lang = lang.trim().to_owned();
            for (_, line) in lines.by_ref() {
                if line.trim() == "```" {
                    break;
                }
                next.code.push_str(line);
                next.code.push('\n');
            }
            found.push(std::mem::replace(&mut next, fresh()));
        } else if !trimmed.is_empty() {
            next = fresh();
        }
    }
    found
}

/// The language of a line that opens or closes a fenced block (`` when it names none); a
/// line that only starts with a code span (```` ```sh ````) is not one.
fn fence(line: &str) -> Option<&str> {
    let lang = line.strip_prefix("```")?.trim();
    (!lang.contains('`')).then_some(lang)
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `code` with each `cargo install --path DIR --locked` line checked (DIR must be the
/// package whose binary is `attest`, and the lock file must be used) and made a no-op:
/// the `attest` it would install is already first on `PATH`.
fn installed(place: &str, code: &str) -> Result<String, String> {
    let mut out = String::new();
    for line in code.lines() {
        let command = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = command.strip_prefix("cargo install ") else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let dir = match words.as_slice() {
            ["--path", dir, "--locked"] | ["--locked", "--path", dir] => *dir,
            _ => {
                return Err(format!(
                    "{place}: `{command}` is not `cargo install --path DIR --locked`"
                ))
            }
        };
        let manifest = repo_root().join(dir).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)
            .map_err(|err| format!("{place}: `{command}`: no {}: {err}", manifest.display()))?;
        if !text.contains("[[bin]]\nname = \"attest\"") {
            return Err(format!(
                "{place}: `{command}`: {dir} does not build the `attest` binary"
            ));
        }
        out.push_str(": installed\n");
    }
    Ok(out)
}

/// What a block's run left: its output, and whether a process it started was still running
/// when it ended (stopped then, by the test).
struct Ran {
    output: std::process::Output,
    left_running: bool,
}

/// Runs `script` with bash in `dir`, with only `path`, `home` and `env` from the
/// environment; standard output and error go to files, so a process the script leaves
/// running cannot hold the test up.
fn bash(dir: &Path, path: &str, env: &[(&str, &str)], script: &str) -> Ran {
    let out = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (out.path().join("stdout"), out.path().join("stderr"));
    // `timeout` (without --foreground) leads a process group of its own: the block's bash and
    // every process it starts, unless one leaves the group on purpose.
    let mut child = Command::new("timeout")
        .args([
            BLOCK_TIMEOUT_SECS,
            "bash",
            "-e",
            "-o",
            "pipefail",
            "-c",
            script,
        ])
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir.join("home"))
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let group = format!("-{}", child.id());
    let status = child.wait().unwrap();
    let alive = |signal: &str| {
        Command::new("kill")
            .args([signal, "--", &group])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // A server the block stopped with `kill` may take a moment to exit: up to 5 s.
    let mut left_running = alive("-0");
    for _ in 0..100 {
        if !left_running {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        left_running = alive("-0");
    }
    if left_running {
        alive("-KILL");
    }
    Ran {
        output: std::process::Output {
            status,
            stdout: std::fs::read(&stdout).unwrap(),
            stderr: std::fs::read(&stderr).unwrap(),
        },
        left_running,
    }
}

/// The blocks' shared settings: where `attest` and Python are, and whether Python has the
/// modules the examples import.
struct Runner {
    path: String,
    has_peers: bool,
    _bin: tempfile::TempDir,
}

impl Runner {
    fn new() -> Runner {
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_attest"), bin.path().join("attest"))
            .unwrap();
        let python = python();
        let venv_bin = python.parent().filter(|p| !p.as_os_str().is_empty());
        let path = match venv_bin {
            Some(venv) => format!(
                "{}:{}:/usr/local/bin:/usr/bin:/bin",
                bin.path().display(),
                venv.display()
            ),
            None => format!("{}:/usr/local/bin:/usr/bin:/bin", bin.path().display()),
        };
        let has_peers = Command::new(&python)
            .args(["-c", "import requests, mcp, cryptography"])
            .output()
            .is_ok_and(|o| o.status.success());
        Runner {
            path,
            has_peers,
            _bin: bin,
        }
    }
}

/// What one pass over the documents found.
#[derive(Default)]
struct Pass {
    ran: usize,
    checked: usize,
    missing_peer: Vec<String>,
    failures: Vec<String>,
}

/// Runs or checks every block of every document once, each in a new directory.
fn pass(runner: &Runner, round: usize) -> Pass {
    let root = repo_root();
    let mut found = Pass::default();
    for doc in docs() {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        for block in blocks(&doc, &text) {
            let place = format!("{}:{} (run {round})", block.doc, block.line);
            if let Some(file) = &block.ran_by {
                found.checked += 1;
                if let Err(failure) = ran_by(&block, file) {
                    found.failures.push(format!("{place}: {failure}"));
                }
                continue;
            }
            if let Some(file) = &block.compiled {
                found.checked += 1;
                if let Err(failure) = compiled_in(&block.code, file) {
                    found.failures.push(format!("{place}: {failure}"));
                }
                continue;
            }
            // What runs: the block itself, or the command that checks a block saved as a file.
            let script = match (&block.check, block.lang.as_str()) {
                (Some(command), _) => command.clone(),
                (None, "sh") => block.code.clone(),
                (None, "" | "text") => continue,
                (None, "json" | "yaml") => {
                    found.checked += 1;
                    if let Err(failure) = parses(&block) {
                        found.failures.push(format!("{place}: {failure}"));
                    }
                    continue;
                }
                (None, other) => {
                    found.failures.push(format!(
                        "{place}: a ```{other} block is not run: run it with \
                         <!-- readme-test: check COMMAND -->, or name what runs it with \
                         <!-- readme-test: ran-by FILE -->"
                    ));
                    continue;
                }
            };
            if needs_python_peers(&script) && !runner.has_peers {
                peer_missing_because("Python's requests, mcp and cryptography (.ci/venv)", &place);
                found.missing_peer.push(place);
                continue;
            }
            let database = match block.postgres {
                true => match crate::pg_db_named(&place, "attest_docs") {
                    Some(db) => Some(db),
                    None => {
                        found.missing_peer.push(place);
                        continue;
                    }
                },
                false => None,
            };
            let env: Vec<(&str, &str)> = database
                .iter()
                .map(|db| ("ATTEST_LEDGER", db.url.as_str()))
                .collect();
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("home")).unwrap();
            if block.from_clone {
                for linked in ["examples", "policies", "docs"] {
                    std::os::unix::fs::symlink(root.join(linked), dir.path().join(linked)).unwrap();
                }
            }
            if block.check.is_some() {
                std::fs::write(
                    dir.path().join(format!("block.{}", block.lang)),
                    &block.code,
                )
                .unwrap();
            }
            for setup in &block.setup {
                let ran = bash(dir.path(), &runner.path, &env, setup);
                assert!(
                    ran.output.status.success() && !ran.left_running,
                    "{place}: setup `{setup}` failed or left a process running:\n{}",
                    String::from_utf8_lossy(&ran.output.stderr)
                );
            }
            let code = match installed(&place, &script) {
                Ok(code) => code,
                Err(failure) => {
                    found.failures.push(failure);
                    continue;
                }
            };
            let ran = bash(dir.path(), &runner.path, &env, &code);
            found.ran += 1;
            let stdout = String::from_utf8_lossy(&ran.output.stdout);
            let stderr = String::from_utf8_lossy(&ran.output.stderr);
            if !ran.output.status.success() {
                found.failures.push(format!(
                    "{place}: exit {:?}\n--- block\n{}--- ran\n{script}\n--- stdout\n{stdout}--- stderr\n{stderr}",
                    ran.output.status.code(),
                    block.code
                ));
                continue;
            }
            if ran.left_running {
                found.failures.push(format!(
                    "{place}: a process it started was still running when it ended (a second \
                     paste would collide with it): stop what the block starts\n--- block\n{}",
                    block.code
                ));
            }
            for want in &block.expect {
                if !stdout.contains(want.as_str()) {
                    found.failures.push(format!(
                        "{place}: output lacks {want:?}\n--- stdout\n{stdout}--- stderr\n{stderr}"
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn every_command_block_in_the_docs_runs_as_written() {
    let runner = Runner::new();
    let mut failures = Vec::new();
    for round in 1..=2 {
        let found = pass(&runner, round);
        eprintln!(
            "readme: run {round}: {} blocks ran, {} checked, {} not run for a missing peer",
            found.ran,
            found.checked,
            found.missing_peer.len()
        );
        assert!(
            found.ran >= 5,
            "only {} blocks ran: the extraction finds nothing",
            found.ran
        );
        failures.extend(found.failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The folders of the repository's own files (not what a build or `.ci/run` adds).
const TRACKED: &[&str] = &[
    "benchmarks/",
    "crates/",
    "docs/",
    "examples/",
    "js/",
    "policies/",
    "python/",
    "./python",
];

/// Whether `file` (relative to the repository) runs `block`, as its `ran-by` directive
/// says: it reads the block from a document that holds it verbatim (it names the document
/// and the heading the block is under), or it holds every option (`--flag`), `attest`
/// subcommand and repository path the block uses (a shell block only).
fn ran_by(block: &Block, file: &str) -> Result<(), String> {
    let root = repo_root();
    let text =
        std::fs::read_to_string(root.join(file)).map_err(|err| format!("ran-by {file}: {err}"))?;
    let reads_it = docs().iter().any(|doc| {
        let Ok(holder) = std::fs::read_to_string(root.join(doc)) else {
            return false;
        };
        let heading = holder.find(&block.code).and_then(|at| {
            holder[..at]
                .lines()
                .rev()
                .find_map(|line| line.strip_prefix('#').map(|h| h.trim_start_matches('#')))
        });
        text.contains(doc.as_str()) && heading.is_some_and(|h| text.contains(h.trim()))
    });
    if reads_it {
        return Ok(());
    }
    if block.lang != "sh" {
        return Err(format!(
            "ran-by {file}: it does not read this ```{} block from its document (name the \
             document and the heading the block is under)",
            block.lang
        ));
    }
    let mut missing = Vec::new();
    for line in block.code.lines() {
        let command = line.split(" #").next().unwrap_or("");
        let words: Vec<&str> = command
            .split_whitespace()
            .map(|w| w.trim_matches(|c| matches!(c, '"' | '\'' | '(' | ')' | ';')))
            .collect();
        for (at, word) in words.iter().enumerate() {
            let wanted = if word.starts_with("--") {
                word.split('=').next().unwrap_or(word)
            } else if (at > 0 && words[at - 1] == "attest" && !word.starts_with('-'))
                || (TRACKED.iter().any(|top| word.starts_with(top)) && root.join(word).exists())
            {
                word
            } else {
                continue;
            };
            if !text.contains(wanted) && !missing.contains(&wanted) {
                missing.push(wanted);
            }
        }
    }
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "ran-by {file}: it neither reads this block from its document nor uses {}",
            missing.join(", ")
        )),
    }
}

/// Whether every line of `code`, without its indentation, is a line of `file` (relative to
/// the repository), in the same order: the block is code cargo compiles.
fn compiled_in(code: &str, file: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(repo_root().join(file))
        .map_err(|err| format!("no {file}: {err}"))?;
    let mut lines = text.lines().map(str::trim);
    for want in code.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if !lines.any(|line| line == want) {
            return Err(format!("`{want}` is not in {file} (in this order)"));
        }
    }
    Ok(())
}

/// The examples that need nothing but Python's standard library.
const STDLIB_EXAMPLES: &[&str] = &["notes_api.py"];

/// Whether `code` runs an example of `examples/python/`, or `docs/verify_bundle.py`, that
/// needs `.ci/venv`'s modules.
fn needs_python_peers(code: &str) -> bool {
    code.contains("docs/verify_bundle.py")
        || code.split("examples/python/").skip(1).any(|rest| {
            let script = rest.split(|c: char| c.is_whitespace()).next().unwrap_or("");
            !STDLIB_EXAMPLES.contains(&script)
        })
}

/// A ```json or ```yaml block's text, parsed as its language says.
fn parses(block: &Block) -> Result<(), String> {
    match block.lang.as_str() {
        "json" => serde_json::from_str::<serde_json::Value>(&block.code)
            .map(drop)
            .map_err(|err| format!("not JSON: {err}")),
        _ => serde_yaml::from_str::<serde_yaml::Value>(&block.code)
            .map(drop)
            .map_err(|err| format!("not YAML: {err}")),
    }
}

#[test]
fn directives_attach_to_the_next_block_only() {
    let text = "<!-- readme-test: ran-by .ci/run -->\n<!-- readme-test: postgres -->\n\n```sh\na\n```\n\
                <!-- readme-test: expect ok -->\nsome prose\n```sh\nb\n```\n\
                <!-- readme-test: setup attest demo -->\n<!-- readme-test: expect x y -->\n```sh\nc\nd\n```\n\
                ```rust\nnot shell\n```\n";
    let found = blocks("t.md", text);
    assert_eq!(found.len(), 4);
    assert_eq!(found[3].lang, "rust");
    let compiled = blocks(
        "t.md",
        "<!-- readme-test: compiled examples/q.rs -->\n```rust\nfn main() {}\n```\n\
         Every ```` ```sh ```` block\n```sh\nx\n```\n",
    );
    assert_eq!(compiled[0].compiled.as_deref(), Some("examples/q.rs"));
    let check = blocks(
        "t.md",
        "<!-- readme-test: check attest policy check block.yaml -->\n```yaml\nrules: []\n```\n",
    );
    assert_eq!(
        check[0].check.as_deref(),
        Some("attest policy check block.yaml")
    );
    assert_eq!((compiled.len(), compiled[1].code.as_str()), (2, "x\n"));
    assert_eq!(found[2].lang, "sh");
    assert_eq!(found[0].ran_by.as_deref(), Some(".ci/run"));
    assert!(found[0].postgres && !found[0].from_clone);
    assert_eq!((found[0].line, found[0].code.as_str()), (4, "a\n"));
    assert!(found[1].ran_by.is_none() && !found[1].postgres && found[1].expect.is_empty());
    assert_eq!(found[2].setup, ["attest demo"]);
    assert_eq!(found[2].expect, ["x y"]);
    assert_eq!(found[2].code, "c\nd\n");
}

#[test]
fn only_examples_beyond_the_standard_library_need_the_python_peers() {
    assert!(!needs_python_peers(
        "python3 examples/python/notes_api.py --port 1 &\nattest gateway\n"
    ));
    assert!(needs_python_peers(
        "python3 examples/python/notes_api.py &\npython3 examples/python/gateway_requests.py\n"
    ));
    assert!(!needs_python_peers("attest demo\n"));
}

#[test]
fn a_ran_by_claim_is_checked_against_the_file_it_names() {
    let block = |code: &str| Block {
        doc: "README.md".to_owned(),
        lang: "sh".to_owned(),
        code: code.to_owned(),
        ..Block::default()
    };
    // .ci/run runs README's `cargo test` line: every option of it is there.
    assert!(ran_by(&block("cargo test --workspace   # the tests\n"), ".ci/run").is_ok());
    // An option, a subcommand or a repository file the named file never uses fails.
    for (code, missing) in [
        ("cargo test --no-such-option\n", "--no-such-option"),
        ("attest no-such-command\n", "no-such-command"),
        (
            "python3 examples/python/mcp_latency.py\n",
            "examples/python/mcp_latency.py",
        ),
    ] {
        let failure = ran_by(&block(code), ".ci/run").unwrap_err();
        assert!(failure.contains(missing), "{failure}");
    }
    assert!(ran_by(&block("x\n"), "no/such/file").is_err());
    // js/test/readme.test.mjs reads README's TypeScript block from README itself.
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let js = blocks("README.md", &text)
        .into_iter()
        .find(|b| b.lang == "js")
        .unwrap();
    assert!(ran_by(&js, "js/test/readme.test.mjs").is_ok());
    assert!(ran_by(&js, "crates/attest-cli/tests/it/mcp.rs").is_err());
}

#[test]
fn a_compiled_block_must_be_its_files_code_in_order() {
    let file = "crates/attest-core/examples/quickstart.rs";
    assert!(compiled_in(
        "use attest_core::{Attest, AutoGate, Outcome};\n  Ok(())\n",
        file
    )
    .is_ok());
    assert!(compiled_in(
        "Ok(())\nuse attest_core::{Attest, AutoGate, Outcome};\n",
        file
    )
    .is_err());
    assert!(compiled_in("let drifted = 1;\n", file).is_err());
    assert!(compiled_in("x\n", "no/such/file.rs").is_err());
}

#[test]
fn the_install_line_names_the_package_of_the_attest_binary() {
    let ok = installed(
        "t",
        "cargo install --path crates/attest-cli --locked   # note\nattest demo\n",
    );
    assert_eq!(ok.unwrap(), ": installed\nattest demo\n");
    for wrong in [
        "cargo install --path crates/attest-core --locked",
        "cargo install --path crates/attest-cli",
        "cargo install attest",
    ] {
        assert!(installed("t", wrong).is_err(), "{wrong}");
    }
}

/// GitHub's anchor for a heading: lower case, spaces as hyphens, punctuation and code marks
/// gone.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of `text` outside fenced blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut found = Vec::new();
    for (at, line) in text.lines().enumerate() {
        if fence(line.trim()).is_some() {
            fenced = !fenced;
        } else if !fenced {
            found.push((at + 1, line));
        }
    }
    found
}

/// The anchors of `text`'s headings; a repeated heading's get GitHub's `-1`, `-2`, ….
fn anchors(text: &str) -> std::collections::HashSet<String> {
    let mut times = std::collections::HashMap::new();
    let mut found = std::collections::HashSet::new();
    for (_, line) in prose(text) {
        let heading = line.trim_start_matches('#');
        if heading.len() == line.len() || !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading);
        let seen: &mut usize = times.entry(base.clone()).or_default();
        found.insert(match *seen {
            0 => base,
            n => format!("{base}-{n}"),
        });
        *seen += 1;
    }
    found
}

/// The targets of `text`'s Markdown links (`[text](target)`, images too) outside fenced
/// blocks and code spans, each with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line_no, line) in prose(text) {
        // Outside code spans: every other piece between backticks.
        for piece in line.split('`').step_by(2) {
            for (at, _) in piece.match_indices("](") {
                let rest = &piece[at + 2..];
                if let Some(end) = rest.find(')') {
                    found.push((line_no, rest[..end].to_owned()));
                }
            }
        }
    }
    found
}

/// What is wrong with a relative link from `doc` to `target`: a file that does not exist, or
/// an anchor that no heading of its Markdown file has.
fn broken(doc: &str, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let root = repo_root();
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        root.join(doc)
    } else {
        root.join(doc).parent().unwrap().join(path)
    };
    if !file.exists() {
        return Some(format!("no file {path}"));
    }
    let fragment = fragment?;
    if file.extension().is_some_and(|ext| ext == "md") {
        let text = std::fs::read_to_string(&file).unwrap();
        if !anchors(&text).contains(fragment) {
            return Some(format!("no heading #{fragment} in {}", file.display()));
        }
    }
    None
}

#[test]
fn every_link_in_the_docs_leads_to_a_file_and_heading_that_exist() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for doc in docs() {
        let text = std::fs::read_to_string(repo_root().join(&doc)).unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(problem) = broken(&doc, &target) {
                failures.push(format!("{doc}:{line}: ({target}): {problem}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 20,
        "only {checked} links found: the extraction finds nothing"
    );
}

#[test]
fn anchors_and_links_are_read_as_github_reads_them() {
    assert_eq!(
        anchor(" Coding agents: `attest hook <agent>`"),
        "coding-agents-attest-hook-agent"
    );
    assert_eq!(
        anchor(" MCP proxy (Claude Desktop, Cursor, VS Code)"),
        "mcp-proxy-claude-desktop-cursor-vs-code"
    );
    let text = "# A\n## A\n```sh\n# not a heading\n[x](in-code.md)\n```\nsee [b](b.md#a-1) \
                and `[c](code-span.md)` ![d](d.png)\n";
    let found = anchors(text);
    assert!(found.contains("a") && found.contains("a-1") && !found.contains("not-a-heading"));
    assert_eq!(
        links(text),
        [(7, "b.md#a-1".to_owned()), (7, "d.png".to_owned())]
    );
    assert!(broken("README.md", "docs/no-such-guide.md").is_some());
    assert!(broken("README.md", "#no-such-heading").is_some());
    assert!(broken("README.md", "https://example.com/#anything").is_none());
}

/// Where docs/cli.md's generated reference begins and ends.
const CLI_BEGIN: &str = "<!-- cli-reference: generated from `attest … --help` by \
    readme::the_cli_reference_is_what_attest_help_prints; ATTEST_UPDATE_DOCS=1 rewrites it -->";
const CLI_END: &str = "<!-- cli-reference: end -->";

/// `attest ARGS… --help`, run in an empty directory with nothing from the environment (a
/// variable that is set shows in the help's `[env: …]`).
fn help(args: &[String]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(args)
        .arg("--help")
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(output.status.success(), "attest {args:?} --help failed");
    String::from_utf8(output.stdout).unwrap()
}

/// The subcommands a help text lists: under `Commands:`, or under the groups `attest --help`
/// sorts them into (any heading but usage, arguments and options), `help` aside.
fn subcommands(help: &str) -> Vec<String> {
    let mut found = Vec::new();
    for paragraph in help.split("\n\n") {
        let mut lines = paragraph.lines();
        let heading = lines.next().unwrap_or("");
        let listed = heading.ends_with(':')
            && !heading.starts_with(' ')
            && !["Options:", "Arguments:", "Global options:"].contains(&heading);
        if !listed {
            continue;
        }
        found.extend(
            lines
                .filter(|line| {
                    line.starts_with("  ") && !line[2..].starts_with([' ', '-', '<', '['])
                })
                .filter_map(|line| line.split_whitespace().next())
                .filter(|name| *name != "help")
                .map(str::to_owned),
        );
    }
    found
}

/// The reference: an index, then a heading and the `--help` of `attest` and of every
/// subcommand, depth first in the order the help lists them; the global options shown once,
/// under `attest`.
fn cli_reference() -> String {
    fn walk(path: &mut Vec<String>, index: &mut Vec<String>, out: &mut String) {
        let text = help(path);
        let own = match path.is_empty() {
            true => text.as_str(),
            false => text.split("\nGlobal options:\n").next().unwrap(),
        };
        let name = std::iter::once("attest")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let heading = format!("`{name}`");
        index.push(format!("[{heading}](#{})", anchor(&heading)));
        out.push_str(&format!(
            "### {heading}\n\n```text\n{}\n```\n\n",
            own.trim_end()
        ));
        for sub in subcommands(&text) {
            path.push(sub);
            walk(path, index, out);
            path.pop();
        }
    }
    let (mut index, mut out) = (Vec::new(), String::new());
    walk(&mut Vec::new(), &mut index, &mut out);
    format!("{}\n\n{out}", index.join(" ·\n"))
}

#[test]
fn the_cli_reference_is_what_attest_help_prints() {
    let file = repo_root().join("docs/cli.md");
    let text = std::fs::read_to_string(&file).unwrap();
    let (before, rest) = text
        .split_once(CLI_BEGIN)
        .expect("docs/cli.md lacks the cli-reference begin marker");
    let (_, after) = rest
        .split_once(CLI_END)
        .expect("docs/cli.md lacks the cli-reference end marker");
    let want = format!("{before}{CLI_BEGIN}\n\n{}{CLI_END}{after}", cli_reference());
    if want == text {
        return;
    }
    if std::env::var_os("ATTEST_UPDATE_DOCS").is_some() {
        std::fs::write(&file, want).unwrap();
        return;
    }
    let (line, (have, wanted)) = text
        .lines()
        .zip(want.lines())
        .enumerate()
        .find(|(_, (have, wanted))| have != wanted)
        .unwrap_or((
            text.lines().count().min(want.lines().count()),
            ("(end)", "(end)"),
        ));
    panic!(
        "docs/cli.md:{}: the reference differs from `attest … --help`:\n  file: {have}\n  help: {wanted}\n\
         regenerate it: ATTEST_UPDATE_DOCS=1 cargo test -p attest-cli --test it readme::the_cli_reference",
        line + 1
    );
}

#[test]
fn subcommands_are_read_from_the_commands_list() {
    let text = "Usage: attest policy <COMMAND>\n\nCommands:\n  check    Lint a policy\n  \
                explain  Show one call\n  help     Print this message\n\nOptions:\n  -h, --help\n";
    assert_eq!(subcommands(text), ["check", "explain"]);
    let grouped = "Usage: attest [OPTIONS] <COMMAND>\n\nStart:\n  demo    Run a demo\n\n\
                   Doors (between an agent and its tools):\n  gateway  An HTTP gateway\n  \
                   hook     Coding agents\n\nOptions:\n  -h, --help\n      --ledger <PATH|URL>\n";
    assert_eq!(subcommands(grouped), ["demo", "gateway", "hook"]);
    assert!(subcommands("Usage: attest demo\n\nOptions:\n  -h\n").is_empty());
}

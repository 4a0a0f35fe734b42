//! Every code block of README.md, docs/*.md, benchmarks/README.md, examples/README.md,
//! policies/README.md and policies/recipes/README.md, run or checked as written, so the
//! documentation cannot drift from the tool; and every relative link among them leads to a file
//! and heading that exist. How blocks are marked is described in docs/contributing.md:
//!
//! - a ```` ```sh ```` block runs; a ```` ```json ```` or ```` ```yaml ```` block must parse
//!   (or pass its `check`, below); a
//!   ```` ```text ```` block or one with no language is output or usage, shown and not run;
//!   a block in any other language (`rust`, `python`, …) must say why it is not run;
//! - `<!-- readme-test: skip (reason) -->` before a block: not run; the test prints how many
//!   it skipped and why;
//! - `<!-- readme-test: setup COMMANDS -->`: run first, in the same directory (for example
//!   to put rows in the ledger a block reads);
//! - `<!-- readme-test: expect TEXT -->`: the block's standard output must contain TEXT;
//! - `<!-- readme-test: compiled FILE -->`: the block is FILE's code, which cargo builds (an
//!   example): each of its lines, without indentation, must be a line of FILE, in order;
//! - `<!-- readme-test: check COMMAND -->`: the block (a configuration, a policy) is saved as
//!   `block.LANG` in the directory, and COMMAND runs there as a ```` ```sh ```` block would.
//!
//! Each block runs with `bash -e -o pipefail` in a fresh temporary directory that links
//! `examples/` and `policies/` from the repository, with the built `attest` first on
//! `PATH` (instead of `cargo run`), `.ci/venv`'s Python next (its `requests` and `mcp`),
//! `HOME` inside the directory and nothing else from the environment. A block must exit 0.
//! Background jobs a block starts are stopped when it ends.
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
    skip: Option<String>,
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
            if let Some(reason) = directive.strip_prefix("skip") {
                let reason = reason.trim();
                let reason = reason
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .unwrap_or(reason);
                next.skip = Some(reason.to_owned());
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
                    "{doc}:{}: unknown readme-test directive {directive:?}",
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

/// Runs `script` with bash in `dir`, with only `path` and `home` from the environment.
fn bash(dir: &Path, path: &str, script: &str) -> std::process::Output {
    // Background jobs the block starts end with it.
    let script = format!("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}");
    Command::new("timeout")
        .args([
            BLOCK_TIMEOUT_SECS,
            "bash",
            "-e",
            "-o",
            "pipefail",
            "-c",
            &script,
        ])
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir.join("home"))
        .output()
        .unwrap()
}

#[test]
fn every_command_block_in_the_docs_runs_as_written() {
    let root = repo_root();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_attest"), bin.path().join("attest")).unwrap();
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
        .args(["-c", "import requests, mcp"])
        .output()
        .is_ok_and(|o| o.status.success());

    let (mut ran, mut checked, mut skipped) = (0, 0, Vec::new());
    let mut failures = Vec::new();
    for doc in docs() {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        for block in blocks(&doc, &text) {
            let place = format!("{}:{}", block.doc, block.line);
            if let Some(reason) = &block.skip {
                skipped.push(format!("{place}: {reason}"));
                continue;
            }
            if let Some(file) = &block.compiled {
                checked += 1;
                if let Err(failure) = compiled_in(&block.code, file) {
                    failures.push(format!("{place}: {failure}"));
                }
                continue;
            }
            // What runs: the block itself, or the command that checks a block saved as a file.
            let script = match (&block.check, block.lang.as_str()) {
                (Some(command), _) => command.clone(),
                (None, "sh") => block.code.clone(),
                (None, "" | "text") => continue,
                (None, "json" | "yaml") => {
                    checked += 1;
                    if let Err(failure) = parses(&block) {
                        failures.push(format!("{place}: {failure}"));
                    }
                    continue;
                }
                (None, other) => {
                    failures.push(format!(
                        "{place}: a ```{other} block is not run: say why with \
                         <!-- readme-test: skip (reason) -->, or check it with \
                         <!-- readme-test: check COMMAND -->"
                    ));
                    continue;
                }
            };
            if needs_python_peers(&script) && !has_peers {
                peer_missing_because("Python's requests and mcp (.ci/venv)", &place);
                skipped.push(format!("{place}: no .ci/venv with requests and mcp"));
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("home")).unwrap();
            for linked in ["examples", "policies"] {
                std::os::unix::fs::symlink(root.join(linked), dir.path().join(linked)).unwrap();
            }
            if block.check.is_some() {
                std::fs::write(
                    dir.path().join(format!("block.{}", block.lang)),
                    &block.code,
                )
                .unwrap();
            }
            for setup in &block.setup {
                let output = bash(dir.path(), &path, setup);
                assert!(
                    output.status.success(),
                    "{place}: setup `{setup}` failed:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            let code = match installed(&place, &script) {
                Ok(code) => code,
                Err(failure) => {
                    failures.push(failure);
                    continue;
                }
            };
            let output = bash(dir.path(), &path, &code);
            ran += 1;
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            if !output.status.success() {
                failures.push(format!(
                    "{place}: exit {:?}\n--- block\n{}--- ran\n{script}\n--- stdout\n{stdout}--- stderr\n{stderr}",
                    output.status.code(),
                    block.code
                ));
                continue;
            }
            for want in &block.expect {
                if !stdout.contains(want.as_str()) {
                    failures.push(format!(
                        "{place}: output lacks {want:?}\n--- stdout\n{stdout}--- stderr\n{stderr}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "readme: {ran} blocks ran, {checked} parsed, {} skipped{}",
        skipped.len(),
        skipped
            .iter()
            .map(|s| format!("\n  skipped {s}"))
            .collect::<String>()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        ran >= 5,
        "only {ran} blocks ran: the extraction finds nothing"
    );
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

/// Whether `code` runs an example of `examples/python/` that needs `.ci/venv`'s modules.
fn needs_python_peers(code: &str) -> bool {
    code.split("examples/python/").skip(1).any(|rest| {
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
    let text = "<!-- readme-test: skip (needs a vendor) -->\n\n```sh\na\n```\n\
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
    assert_eq!(found[0].skip.as_deref(), Some("needs a vendor"));
    assert_eq!((found[0].line, found[0].code.as_str()), (3, "a\n"));
    assert!(found[1].skip.is_none() && found[1].expect.is_empty());
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

/// The subcommands a help text lists under `Commands:`, `help` aside.
fn subcommands(help: &str) -> Vec<String> {
    let Some((_, listed)) = help.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    listed
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line[2..].starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
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
    assert!(subcommands("Usage: attest demo\n\nOptions:\n  -h\n").is_empty());
}

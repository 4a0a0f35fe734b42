//! Every ```sh block of README.md, examples/README.md, policies/README.md,
//! policies/recipes/README.md and docs/rolling-out.md, run as written, so the documentation cannot drift from the
//! tool. How blocks are marked is described in README's "Contributing" section:
//!
//! - `<!-- readme-test: skip (reason) -->` before a block: not run; the test prints how many
//!   it skipped and why;
//! - `<!-- readme-test: setup COMMANDS -->`: run first, in the same directory (for example
//!   to put rows in the ledger a block reads);
//! - `<!-- readme-test: expect TEXT -->`: the block's standard output must contain TEXT.
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

/// The documents whose blocks run, relative to the repository's root.
const DOCS: &[&str] = &[
    "README.md",
    "examples/README.md",
    "policies/README.md",
    "policies/recipes/README.md",
    "docs/rolling-out.md",
];

/// How long one block may take.
const BLOCK_TIMEOUT_SECS: &str = "180";

/// One ```sh block and the directives before it.
#[derive(Debug, Default)]
struct Block {
    doc: &'static str,
    line: usize,
    code: String,
    skip: Option<String>,
    setup: Vec<String>,
    expect: Vec<String>,
}

/// The ```sh blocks of `text`, each with the `readme-test` comments just before it (blank
/// lines between them are fine; any other line in between drops them).
fn blocks(doc: &'static str, text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut next = Block {
        doc,
        ..Block::default()
    };
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
            } else {
                panic!(
                    "{doc}:{}: unknown readme-test directive {directive:?}",
                    at + 1
                );
            }
        } else if trimmed == "```sh" {
            next.line = at + 1;
            for (_, line) in lines.by_ref() {
                if line.trim() == "```" {
                    break;
                }
                next.code.push_str(line);
                next.code.push('\n');
            }
            found.push(std::mem::replace(
                &mut next,
                Block {
                    doc,
                    ..Block::default()
                },
            ));
        } else if !trimmed.is_empty() {
            next = Block {
                doc,
                ..Block::default()
            };
        }
    }
    found
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

    let (mut ran, mut skipped) = (0, Vec::new());
    let mut failures = Vec::new();
    for doc in DOCS {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for block in blocks(doc, &text) {
            let place = format!("{}:{}", block.doc, block.line);
            if let Some(reason) = &block.skip {
                skipped.push(format!("{place}: {reason}"));
                continue;
            }
            if block.code.contains("examples/python/") && !has_peers {
                peer_missing_because("Python's requests and mcp (.ci/venv)", &place);
                skipped.push(format!("{place}: no .ci/venv with requests and mcp"));
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("home")).unwrap();
            for linked in ["examples", "policies"] {
                std::os::unix::fs::symlink(root.join(linked), dir.path().join(linked)).unwrap();
            }
            for setup in &block.setup {
                let output = bash(dir.path(), &path, setup);
                assert!(
                    output.status.success(),
                    "{place}: setup `{setup}` failed:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            let code = match installed(&place, &block.code) {
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
                    "{place}: exit {:?}\n--- block\n{}--- stdout\n{stdout}--- stderr\n{stderr}",
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
        "readme: {ran} blocks ran, {} skipped{}",
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

#[test]
fn directives_attach_to_the_next_block_only() {
    let text = "<!-- readme-test: skip (needs a vendor) -->\n\n```sh\na\n```\n\
                <!-- readme-test: expect ok -->\nsome prose\n```sh\nb\n```\n\
                <!-- readme-test: setup attest demo -->\n<!-- readme-test: expect x y -->\n```sh\nc\nd\n```\n\
                ```rust\nnot shell\n```\n";
    let found = blocks("t.md", text);
    assert_eq!(found.len(), 3);
    assert_eq!(found[0].skip.as_deref(), Some("needs a vendor"));
    assert_eq!((found[0].line, found[0].code.as_str()), (3, "a\n"));
    assert!(found[1].skip.is_none() && found[1].expect.is_empty());
    assert_eq!(found[2].setup, ["attest demo"]);
    assert_eq!(found[2].expect, ["x y"]);
    assert_eq!(found[2].code, "c\nd\n");
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

//! Names the commit `attest --version` reports, as ATTEST_COMMIT for main.rs.
//!
//! From the ATTEST_COMMIT environment variable when set (a build from a source archive
//! with no .git, or a packager who pins it), else `git rev-parse` when this is a Git
//! checkout, else "unknown". Never a time or a path: the same commit builds the same bytes.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=ATTEST_COMMIT");
    let commit = std::env::var("ATTEST_COMMIT")
        .ok()
        .filter(|c| is_commit_name(c))
        .or_else(git_head)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=ATTEST_COMMIT={commit}");
}

/// A short hexadecimal commit name: nothing else may reach the version string.
fn is_commit_name(text: &str) -> bool {
    (7..=40).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

fn git_head() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| is_commit_name(c))?;
    // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch's ref (a commit).
    for path in ["HEAD", "packed-refs"] {
        if let Some(file) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(file) = git(&["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    Some(commit)
}

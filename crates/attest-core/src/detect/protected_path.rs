//! The paths whose writes ask, whatever writes them.
//!
//! A write to the agent's own settings and hooks (`.claude/`, `.cursor/`, `.codex/`,
//! `.gemini/`, `.mcp.json`, whose commands the agent will start), Attest's policy, its
//! `.attest/` directory and ledger, CI workflows, `.git/`, keys, credentials, `.env` files
//! and system files is riskier than one to source code. The judgement belongs to the path:
//! the Write and Edit tools, a shell redirection (`>`, `>>`), `sed -i`, `cp`, `mv`, `tee`,
//! `truncate`, `ln`, `install` and `dd of=` all reach [`file_write`].

use attest_policy::{Risk, Source, Verb};

use super::coding_tool::FILES_SYSTEM;
use super::Detection;

/// Directories anywhere in a path (`/home/me/.claude/settings.json`, `.claude/x`).
const PROTECTED_DIRS: [&str; 20] = [
    ".claude/",
    ".cursor/",
    ".codex/",
    ".gemini/",
    ".vscode/",
    ".git/",
    ".github/workflows/",
    ".github/actions/",
    ".circleci/",
    ".buildkite/",
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".kube/",
    ".docker/",
    ".attest/",
    "/etc/",
    "/usr/",
    "/bin/",
    "/boot/",
];

/// File names, wherever they are.
const PROTECTED_NAMES: [&str; 28] = [
    ".mcp.json",
    "mcp.json",
    "attest.yaml",
    "attest.yml",
    "policy.yaml",
    "policy.yml",
    ".gitlab-ci.yml",
    "jenkinsfile",
    "azure-pipelines.yml",
    ".gitattributes",
    ".gitmodules",
    ".bashrc",
    ".zshrc",
    ".profile",
    ".bash_profile",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    "id_rsa",
    "id_ed25519",
    "authorized_keys",
    "signing.key",
    "settings.json",
    "settings.local.json",
    "claude.md",
    "agents.md",
    "gemini.md",
];

/// Endings of protected names: keys, and ledgers with their write-ahead logs.
const PROTECTED_ENDINGS: [&str; 6] = [
    ".pem",
    ".key",
    ".sqlite",
    ".sqlite-wal",
    ".sqlite-shm",
    ".db",
];

/// True when a write to `path` must be asked about: a protected directory or name, a path
/// that climbs out (`..`), or no path at all.
pub(crate) fn is_protected(path: &str) -> bool {
    let lower = path
        .trim_matches(|c| c == '"' || c == '\'')
        .replace('\\', "/")
        .to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    lower.is_empty()
        || lower.split('/').any(|part| part == "..")
        || PROTECTED_DIRS.iter().any(|dir| lower.contains(dir))
        || PROTECTED_DIRS
            .iter()
            .any(|dir| dir.starts_with('.') && lower == dir.trim_end_matches('/'))
        || lower.starts_with("/var/")
        || PROTECTED_NAMES.contains(&name)
        || name.starts_with(".env")
        || PROTECTED_ENDINGS.iter().any(|end| name.ends_with(end))
}

/// A file write, judged by its path: source code is a medium-risk write (acts under the
/// default policy); a protected path is high (asks).
pub(crate) fn file_write(path: &str) -> Detection {
    Detection {
        face_verb: None,
        system: FILES_SYSTEM.to_owned(),
        verb: Verb::Write,
        target: Some("file".to_owned()),
        source: Source::Heuristic,
        recognised: true,
        risk: Some(if is_protected(path) {
            Risk::High
        } else {
            Risk::Medium
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_are_told_from_source() {
        for path in [
            ".claude/settings.json",
            "\".claude/settings.json\"",
            "/w/.cursor/rules",
            ".mcp.json",
            ".env",
            ".env.production",
            ".git/hooks/pre-commit",
            ".git",
            ".github/workflows/ci.yml",
            "attest.yaml",
            ".attest/signing.key",
            "ledger.sqlite",
            "../x",
            "",
        ] {
            assert!(is_protected(path), "{path}");
        }
        for path in ["src/main.rs", "README.md", "out.txt", "/tmp/build.log"] {
            assert!(!is_protected(path), "{path}");
        }
    }
}

//! The governor's own files: one predicate over resolved paths, the same for every door.
//!
//! An agent governed by Attest shares the user, the files and the shell with it. A write
//! to the files that decide what governs the agent (each coding agent's hooks and
//! settings, the repository's hooks and CI, MCP server lists) or to the files the running
//! configuration uses (its configuration and policy files, whatever their names, the
//! ledger, the signing key, the hold state) would switch the governor off, so it is
//! refused whatever the policy says, in shadow mode too. A path is judged as the kernel
//! will open it ([`resolve`]); one the static reading cannot resolve is judged protected.
//!
//! The hook judges every tool call's written paths ([`ProtectedSet::coding_agent_writes`]),
//! the MCP proxy every path argument of a filesystem-style tool
//! ([`ProtectedSet::tool_writes`]). Below the command text, [`crate::sandbox`] makes the
//! same set read-only for a command and everything it starts, so code the reading cannot
//! follow (`python3 -c`, a script) cannot write it either.

mod resolve;
mod written;

use std::path::{Path, PathBuf};

pub use resolve::resolve;

/// Directories whose whole content is an agent's or Attest's own configuration, wherever
/// they are (`~/.claude/`, `app/.claude/`).
pub(crate) const PROTECTED_DIRS: [&str; 6] = [
    ".claude", ".codex", ".gemini", ".cursor", ".husky", ".attest",
];

/// A directory and the entries beneath it that are protected (`.github/hooks`).
pub(crate) const PROTECTED_CHILDREN: [(&str, &[&str]); 3] = [
    (".github", &["hooks", "workflows", "actions"]),
    (".git", &["hooks", "config"]),
    (".vscode", &["settings.json"]),
];

/// File names that are protected wherever they are.
pub(crate) const PROTECTED_NAMES: [&str; 2] = [".mcp.json", ".claude.json"];

/// What a write would reach that it must not: the path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    /// The path as resolved (or as written, when it could not be).
    pub path: String,
    /// Why it is protected.
    pub why: &'static str,
}

impl std::fmt::Display for Protected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is protected ({})", self.path, self.why)
    }
}

/// The protected set: the fixed names above, and the files the running configuration
/// uses, resolved once.
#[derive(Debug, Clone, Default)]
pub struct ProtectedSet {
    home: Option<PathBuf>,
    /// Files protected by their resolved path (the configuration, policy, ledger, key).
    files: Vec<PathBuf>,
    /// Directories protected with everything beneath them (the hold state).
    dirs: Vec<PathBuf>,
}

impl ProtectedSet {
    /// The fixed set, `~` read as `home`.
    pub fn new(home: Option<PathBuf>) -> ProtectedSet {
        ProtectedSet {
            home,
            ..ProtectedSet::default()
        }
    }

    /// Adds a file the running configuration uses (relative to the process's directory).
    #[must_use]
    pub fn file(mut self, path: &Path) -> ProtectedSet {
        if let Some(resolved) = self.resolve_here(path) {
            self.files.push(resolved);
        }
        self
    }

    /// Adds a directory whose whole content is Attest's state.
    #[must_use]
    pub fn dir(mut self, path: &Path) -> ProtectedSet {
        if let Some(resolved) = self.resolve_here(path) {
            self.dirs.push(resolved);
        }
        self
    }

    fn resolve_here(&self, path: &Path) -> Option<PathBuf> {
        let cwd = std::env::current_dir().ok();
        resolve(
            &path.to_string_lossy(),
            cwd.as_deref(),
            self.home.as_deref(),
        )
    }

    /// The home directory `~` stands for.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The configured files and state directories (for the sandbox to make read-only or
    /// hide).
    pub fn configured(&self) -> (&[PathBuf], &[PathBuf]) {
        (&self.files, &self.dirs)
    }

    /// Judges `path` as written in `cwd`: `Some` when a write there is refused.
    pub fn judge(&self, path: &str, cwd: Option<&Path>) -> Option<Protected> {
        match resolve(path, cwd, self.home.as_deref()) {
            Some(resolved) => self.judge_resolved(&resolved).map(|why| Protected {
                path: resolved.display().to_string(),
                why,
            }),
            None => Some(Protected {
                path: path.to_owned(),
                why: "the path cannot be resolved before it runs, so it is read as the \
                      riskiest path there is",
            }),
        }
    }

    /// Why a write to `path` (absolute, resolved) is refused, if it is.
    pub fn judge_resolved(&self, path: &Path) -> Option<&'static str> {
        if self.files.iter().any(|file| ledger_family(file, path)) {
            return Some("a file Attest's running configuration uses");
        }
        if self.dirs.iter().any(|dir| path.starts_with(dir)) {
            return Some("Attest's own state");
        }
        fixed(path)
    }
}

/// `path` is `file`, or its SQLite companion (`-wal`, `-shm`, `-journal`).
fn ledger_family(file: &Path, path: &Path) -> bool {
    if path == file {
        return true;
    }
    let (Some(file), Some(path)) = (file.to_str(), path.to_str()) else {
        return false;
    };
    path.strip_prefix(file)
        .is_some_and(|rest| matches!(rest, "-wal" | "-shm" | "-journal"))
}

/// The fixed names: an agent's hooks and settings, the repository's hooks, CI and MCP
/// lists. Compared without case (a case-insensitive file system opens `.Claude` as
/// `.claude`).
fn fixed(path: &Path) -> Option<&'static str> {
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(part) => Some(part.to_string_lossy().to_lowercase()),
            _ => None,
        })
        .collect();
    let last = parts.last().map(String::as_str);
    for (i, part) in parts.iter().enumerate() {
        if PROTECTED_DIRS.contains(&part.as_str()) {
            return Some(if part == ".attest" {
                "Attest's own configuration and state"
            } else {
                "a coding agent's hooks and settings"
            });
        }
        for (dir, children) in PROTECTED_CHILDREN {
            if part == dir {
                match parts.get(i + 1) {
                    Some(child) if children.contains(&child.as_str()) => {
                        return Some("hooks, settings or CI that run commands");
                    }
                    // The directory itself: replaced or removed whole, it takes the
                    // protected files with it.
                    None => return Some("a directory holding hooks or settings"),
                    Some(_) => {}
                }
            }
        }
    }
    last.filter(|name| PROTECTED_NAMES.contains(name))
        .map(|_| "an agent's MCP servers or settings")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_set_and_the_configured_files_are_protected() {
        let set = ProtectedSet::new(Some(PathBuf::from("/home/me")))
            .file(Path::new("/w/rules/agents.yaml"))
            .file(Path::new("/w/ledger.sqlite"))
            .dir(Path::new("/state/attest"));
        let cwd = Some(Path::new("/w"));
        for path in [
            ".claude/settings.json",
            ".CLAUDE/settings.json",
            "~/.claude.json",
            ".codex/config.toml",
            ".gemini/settings.json",
            ".cursor/hooks.json",
            ".github/hooks/attest.json",
            ".github/workflows/ci.yml",
            ".github/actions/x/action.yml",
            ".github",
            ".husky/pre-commit",
            ".git/hooks/pre-commit",
            ".git/config",
            ".git",
            ".mcp.json",
            ".vscode/settings.json",
            ".attest/config.yaml",
            "rules/agents.yaml",
            "ledger.sqlite-wal",
            "/state/attest/holds/x.json",
            "$X/y",
        ] {
            assert!(set.judge(path, cwd).is_some(), "{path}");
        }
        for path in [
            "src/main.rs",
            ".github/CODEOWNERS",
            ".git/objects/ab/cd",
            ".vscode/launch.json",
            "rules/other.yaml",
            "ledger.sqlite.bak",
            "/tmp/out.txt",
        ] {
            assert_eq!(set.judge(path, cwd), None, "{path}");
        }
    }
}

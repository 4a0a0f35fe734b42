//! What the tests with the real coding-agent programs share (issue 48): the agent's CLI
//! as `.ci/run` installs it, a run inside a network namespace with only loopback (so
//! nothing leaves the machine), a temporary project with git and a local bare remote,
//! and the project's ledger read back.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::{peer_missing, peer_missing_because, stderr, stdout};

/// The agent CLI `bin` from `.ci/agents` (`npm install --prefix .ci/agents …` in
/// `.ci/run`), or `None` after reporting it missing; `None` too when this machine cannot
/// make a network namespace (the agent would reach the internet, so it is not run).
pub(crate) fn agent_program(bin: &str, package: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/agents/node_modules/.bin")
        .join(bin);
    if !path.exists() {
        peer_missing(&format!("{package} in .ci/agents (see .ci/run)"));
        return None;
    }
    let probe = Command::new("unshare")
        .args(["--net", "sh", "-c", "ip link set lo up"])
        .output();
    match probe {
        Ok(out) if out.status.success() => Some(path),
        Ok(out) => {
            peer_missing_because(
                "a network namespace (unshare --net, as root)",
                &stderr(&out),
            );
            None
        }
        Err(err) => {
            peer_missing_because("unshare (util-linux)", &err.to_string());
            None
        }
    }
}

/// `argv` run in `dir` inside a new network namespace with only loopback up, with no
/// inherited environment but `PATH` and `env`.
pub(crate) fn offline(dir: &Path, argv: &[&OsStr], env: &[(&str, &OsStr)]) -> Output {
    Command::new("unshare")
        .args([
            "--net",
            "sh",
            "-c",
            "ip link set lo up && exec \"$@\"",
            "sh",
        ])
        .args(argv)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A project under git with one commit on `main`, pushed to a bare repository beside it
/// (`origin`), and a home directory of its own for the agent.
pub(crate) struct GitProject {
    _dir: tempfile::TempDir,
    /// The temporary directory holding everything below.
    pub(crate) base: PathBuf,
    /// The working tree.
    pub(crate) root: PathBuf,
    /// The agent's `HOME`.
    pub(crate) home: PathBuf,
    /// The bare remote.
    pub(crate) remote: PathBuf,
}

impl GitProject {
    pub(crate) fn new() -> GitProject {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("work");
        let home = base.join("home");
        let remote = base.join("remote.git");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        git(&base, &["init", "-q", "--bare", "-b", "main", "remote.git"]);
        git(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("README.md"), "first\n").unwrap();
        git(&root, &["add", "README.md"]);
        git(&root, &["commit", "-q", "-m", "first"]);
        git(
            &root,
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        git(&root, &["push", "-q", "origin", "main"]);
        GitProject {
            _dir: dir,
            base,
            root,
            home,
            remote,
        }
    }

    /// A second history on a local branch `rewrite` that a force push of it to `main`
    /// would put in place of the remote's (the commit is not a descendant of `main`).
    pub(crate) fn diverge(&self) {
        git(&self.root, &["checkout", "-q", "--orphan", "rewrite"]);
        std::fs::write(self.root.join("README.md"), "rewritten\n").unwrap();
        git(&self.root, &["add", "README.md"]);
        git(&self.root, &["commit", "-q", "-m", "rewritten"]);
    }

    /// The commit the remote's `main` points at.
    pub(crate) fn remote_main(&self) -> String {
        git(&self.remote, &["rev-parse", "main"]).trim().to_owned()
    }

    /// The commit `rev` names in the working tree.
    pub(crate) fn local(&self, rev: &str) -> String {
        git(&self.root, &["rev-parse", rev]).trim().to_owned()
    }

    /// Every entry of the project's ledger (`.attest/ledger.sqlite`, where the hook
    /// writes), from `attest export`.
    pub(crate) fn rows(&self) -> Vec<Value> {
        let output = Command::new(env!("CARGO_BIN_EXE_attest"))
            .arg("export")
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .output()
            .unwrap();
        if !self.root.join(".attest/ledger.sqlite").exists() {
            return Vec::new();
        }
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        stdout(&output)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// `attest ARGS` in the project, as its user (the project's configuration and ledger).
    pub(crate) fn attest(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
}

/// `git ARGS` in `dir` with a fixed identity; its standard output, after checking it
/// succeeded.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "dev")
        .env("GIT_AUTHOR_EMAIL", "dev@example.com")
        .env("GIT_COMMITTER_NAME", "dev")
        .env("GIT_COMMITTER_EMAIL", "dev@example.com")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    stdout(&output)
}

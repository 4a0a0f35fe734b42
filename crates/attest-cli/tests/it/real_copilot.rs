//! The real GitHub Copilot CLI (`@github/copilot` 1.0.102, `.ci/agents`) governed by
//! `attest hook copilot`, offline: Copilot's own BYOK mode (`COPILOT_OFFLINE=true`,
//! `COPILOT_PROVIDER_BASE_URL`, an API key it sends to that URL only) talks to a scripted
//! Chat Completions model (`fake_chat_model.py`) on 127.0.0.1 inside `unshare --net`, so
//! nothing leaves the machine. Each test plays tool calls through the real program in a
//! git project with a local bare remote, and reads what happened in the remote, the files
//! and the ledger.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use serde_json::{json, Value};

/// The real Copilot CLI's native program, as `.ci/run` installs it.
fn copilot() -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/agents/node_modules/@github/copilot-linux-x64/copilot");
    bin.is_file().then_some(bin)
}

/// One real-agent run at a time: each unpacks or reads a 235 MB package and starts a
/// model session, and they share the package cache.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A project wired for one test: `project/` (a git repository whose `main` was pushed to
/// `remote.git` and then rewritten, so only a force push moves the remote), `home/` (the
/// agent's HOME) and the model's script and log.
struct Rig {
    root: tempfile::TempDir,
    copilot: PathBuf,
}

impl Rig {
    /// The rig, or `None` (the test skips) when Copilot CLI or a network namespace is
    /// missing.
    fn new() -> Option<Rig> {
        let Some(copilot) = copilot() else {
            crate::peer_missing(
                "GitHub Copilot CLI 1.0.102 (npm install --prefix .ci/agents @github/copilot@1.0.102)",
            );
            return None;
        };
        let probe = Command::new("unshare").args(["--net", "true"]).output();
        if !probe.as_ref().is_ok_and(|out| out.status.success()) {
            let why = probe.map_or_else(|err| err.to_string(), |out| crate::stderr(&out));
            crate::peer_missing_because("a network namespace (unshare --net, as root)", &why);
            return None;
        }
        let root = tempfile::tempdir().unwrap();
        let rig = Rig { root, copilot };
        std::fs::create_dir_all(rig.home()).unwrap();
        let project = rig.project();
        std::fs::create_dir_all(&project).unwrap();
        rig.git(
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                rig.remote().to_str().unwrap(),
            ],
            rig.root.path(),
        );
        rig.git(&["init", "-q", "-b", "main"], &project);
        std::fs::write(project.join("README.md"), "the project readme\n").unwrap();
        rig.git(&["add", "README.md"], &project);
        rig.git(&["commit", "-q", "-m", "first"], &project);
        rig.git(
            &["remote", "add", "origin", rig.remote().to_str().unwrap()],
            &project,
        );
        rig.git(&["push", "-q", "origin", "main"], &project);
        // Rewritten history: a plain push is refused, a force push replaces the remote's.
        rig.git(&["commit", "-q", "--amend", "-m", "rewritten"], &project);
        Some(rig)
    }

    fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn remote(&self) -> PathBuf {
        self.root.path().join("remote.git")
    }

    fn git(&self, args: &[&str], dir: &Path) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.home())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            crate::stderr(&out)
        );
        crate::stdout(&out).trim().to_owned()
    }

    /// The commit the remote's `main` names.
    fn remote_main(&self) -> String {
        self.git(&["rev-parse", "main"], &self.remote())
    }

    fn local_main(&self) -> String {
        self.git(&["rev-parse", "main"], &self.project())
    }

    /// `attest ARGS` in the project, with the agent's HOME.
    fn attest(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(args)
            .current_dir(self.project())
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    }

    /// `attest hook install copilot --project`, the hook naming this build's binary.
    fn install(&self) -> String {
        let out = self.attest(&[
            "hook",
            "install",
            "copilot",
            "--project",
            "--program",
            env!("CARGO_BIN_EXE_attest"),
        ]);
        crate::expect_ok(&out)
    }

    /// Trusts the project the way Copilot CLI records it: `trustedFolders` in
    /// `~/.copilot/config.json`.
    fn trust(&self) {
        let dir = self.home().join(".copilot");
        std::fs::create_dir_all(&dir).unwrap();
        let project = std::fs::canonicalize(self.project()).unwrap();
        let config = json!({"trustedFolders": [project]});
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    }

    /// Runs the real Copilot CLI once in the project (`-p`, tools auto-approved, the
    /// session id given), the model playing `script`; returns its output and the requests
    /// the model saw. `env` adds variables (`COPILOT_ALLOW_ALL`).
    fn run(&self, session: &str, script: &Value, env: &[(&str, &str)]) -> (Output, Vec<Value>) {
        let _one = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let script_file = self.root.path().join(format!("script-{session}.json"));
        let log = self.root.path().join(format!("model-{session}.jsonl"));
        std::fs::write(&script_file, script.to_string()).unwrap();
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fake_chat_model.py");
        // Copilot unpacks its package under the cache directory on the first run; one
        // cache for every test keeps that to once.
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("copilot-cache");
        let mut command = Command::new("timeout");
        command
            .arg("300")
            .args(["unshare", "--net", "python3"])
            .arg(&fake)
            .arg(&script_file)
            .arg(&log)
            .arg("--")
            .arg(&self.copilot)
            .args([
                "-p",
                "do the task",
                "--no-auto-update",
                "--disable-client-telemetry",
                "--no-ask-user",
                "--session-id",
                session,
            ])
            .current_dir(self.project())
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("XDG_CACHE_HOME", &cache)
            // Copilot's own offline mode: no GitHub sign-in, telemetry, web tools or
            // update check; the model is the provider at COPILOT_PROVIDER_BASE_URL
            // (set by the fake to its own address).
            .env("COPILOT_OFFLINE", "true")
            .env("COPILOT_AUTO_UPDATE", "false")
            .env("COPILOT_PROVIDER_TYPE", "openai")
            .env("COPILOT_PROVIDER_API_KEY", "fake-key-for-the-local-model")
            .env("COPILOT_MODEL", "gpt-4.1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com");
        if !env.iter().any(|(key, _)| *key == "COPILOT_ALLOW_ALL") {
            command.arg("--allow-all-tools");
        }
        for (key, value) in env {
            command.env(key, value);
        }
        let out = command.output().unwrap();
        let requests = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        (out, requests)
    }

    /// Every ledger entry in the project's default ledger.
    fn ledger(&self) -> Vec<Value> {
        let ledger = self.project().join(".attest/ledger.sqlite");
        if !ledger.exists() {
            return Vec::new();
        }
        let out = self.attest(&["--ledger", ledger.to_str().unwrap(), "export"]);
        crate::expect_ok(&out)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// The tool results the model was given in its last request.
fn tool_results(requests: &[Value]) -> Vec<String> {
    requests
        .last()
        .and_then(|request| request["messages"].as_array())
        .map(|messages| {
            messages
                .iter()
                .filter(|message| message["role"] == "tool")
                .map(|message| message["content"].to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn force_push() -> Value {
    json!({"tool": "bash", "args": {
        "command": "git push --force origin main",
        "description": "publish",
        "mode": "sync",
    }})
}

fn show(out: &Output, requests: &[Value]) -> String {
    format!(
        "stdout: {}\nstderr: {}\ntool results: {:?}",
        crate::stdout(out),
        crate::stderr(out),
        tool_results(requests)
    )
}

/// Issue 48, the control: without Attest's hook, the real Copilot CLI force-pushes when
/// the model asks (so the governed runs below show the hook, not the set-up, stopping it).
#[test]
fn copilot_without_the_hook_really_force_pushes() {
    let Some(rig) = Rig::new() else { return };
    rig.trust();
    let before = rig.remote_main();
    let (out, requests) = rig.run(
        "0a1b2c3d-0000-4000-8000-000000000001",
        &json!([force_push()]),
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out, &requests));
    assert_ne!(rig.remote_main(), before, "{}", show(&out, &requests));
    assert_eq!(rig.remote_main(), rig.local_main());
    assert!(rig.ledger().is_empty());
}

/// Issue 48: with the hook installed and the folder trusted, the force push is blocked,
/// its attempt is in the ledger, and the row's run is Copilot's `sessionId`.
#[test]
fn copilot_force_push_is_blocked_and_its_attempt_recorded_under_the_session() {
    let Some(rig) = Rig::new() else { return };
    rig.install();
    rig.trust();
    let before = rig.remote_main();
    let session = "0a1b2c3d-0000-4000-8000-000000000002";
    let (out, requests) = rig.run(session, &json!([force_push()]), &[]);
    let shown = show(&out, &requests);
    assert_eq!(rig.remote_main(), before, "the remote moved: {shown}");
    let results = tool_results(&requests);
    assert!(
        results.iter().any(|result| result.contains("Attest")),
        "the model is told Attest's reason: {shown}"
    );
    let rows = rig.ledger();
    let push = rows
        .iter()
        .find(|row| row["system"] == "git" && row["decision"] != "act")
        .unwrap_or_else(|| panic!("no row for the force push: {rows:#?}\n{shown}"));
    assert_eq!(push["run_id"], session, "{push:#}");
    assert_ne!(push["execution"]["status"], "ok", "{push:#}");
}

/// Issue 48: a read through Copilot's `view` tool runs (the model gets the file) and is
/// recorded, under the session.
#[test]
fn copilot_read_is_allowed_and_recorded() {
    let Some(rig) = Rig::new() else { return };
    rig.install();
    rig.trust();
    let readme = rig.project().join("README.md");
    let session = "0a1b2c3d-0000-4000-8000-000000000003";
    let (out, requests) = rig.run(
        session,
        &json!([{"tool": "view", "args": {"path": readme}}]),
        &[],
    );
    let shown = show(&out, &requests);
    assert!(
        tool_results(&requests)
            .iter()
            .any(|result| result.contains("the project readme")),
        "{shown}"
    );
    let rows = rig.ledger();
    assert!(
        rows.iter().any(|row| row["run_id"] == session
            && row["verb"] == "read"
            && row["decision"] == "act"
            && row["execution"]["status"] == "ok"),
        "no row for the read: {rows:#?}\n{shown}"
    );
}

/// Issue 49: Copilot's edit of its own hook file (`.github/hooks/attest.json`, where
/// `hook install` writes) is refused and recorded, the file stays as installed, and the
/// next session is still governed: its force push is blocked.
#[test]
fn copilot_cannot_edit_its_hook_file_and_its_next_session_is_still_governed() {
    let Some(rig) = Rig::new() else { return };
    rig.install();
    rig.trust();
    let hook_file = rig.project().join(".github/hooks/attest.json");
    let installed = std::fs::read_to_string(&hook_file).unwrap();
    let edit = json!({"tool": "edit", "args": {
        "path": hook_file,
        "old_str": "\"preToolUse\"",
        "new_str": "\"disabledPreToolUse\"",
    }});
    let first = "0a1b2c3d-0000-4000-8000-000000000004";
    let (out, requests) = rig.run(first, &json!([edit]), &[]);
    let shown = show(&out, &requests);
    assert_eq!(
        std::fs::read_to_string(&hook_file).unwrap(),
        installed,
        "the hook file was edited: {shown}"
    );
    let rows = rig.ledger();
    assert!(
        rows.iter().any(|row| row["run_id"] == first
            && row["decision"] == "refuse"
            && row.to_string().contains("protected")),
        "no refused row for the edit: {rows:#?}\n{shown}"
    );
    let before = rig.remote_main();
    let second = "0a1b2c3d-0000-4000-8000-000000000005";
    let (out, requests) = rig.run(second, &json!([force_push()]), &[]);
    assert_eq!(rig.remote_main(), before, "{}", show(&out, &requests));
    assert!(
        rig.ledger()
            .iter()
            .any(|row| row["run_id"] == second && row["system"] == "git"),
        "the next session's push is not recorded"
    );
}

/// Issue 48: in a folder Copilot does not trust, with tools auto-approved
/// (COPILOT_ALLOW_ALL=1), the real Copilot runs no repository hook — the force push runs
/// and nothing is recorded — and `hook install` and `hook doctor` say so beforehand and
/// how to trust it; once trusted as they say, the doctor agrees and the push is blocked.
#[test]
fn copilot_in_an_untrusted_folder_runs_no_hook_and_install_and_doctor_say_so() {
    let Some(rig) = Rig::new() else { return };
    let said = rig.install();
    let note = said
        .lines()
        .find(|line| line.starts_with("not loaded until trusted"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        note.contains("trustedFolders") && note.contains("config.json"),
        "{note}"
    );
    let doctor = rig.attest(&["hook", "doctor", "copilot"]);
    let report = crate::stdout(&doctor);
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    assert!(report.contains("trusted: NO"), "{report}");
    assert!(report.contains("trustedFolders"), "{report}");

    let before = rig.remote_main();
    let (out, requests) = rig.run(
        "0a1b2c3d-0000-4000-8000-000000000006",
        &json!([force_push()]),
        &[("COPILOT_ALLOW_ALL", "1")],
    );
    assert_ne!(
        rig.remote_main(),
        before,
        "the untrusted hook ran after all: {}",
        show(&out, &requests)
    );
    assert!(rig.ledger().is_empty(), "{:#?}", rig.ledger());

    // Trusted as the doctor says: it agrees, and the real program now runs the hook.
    rig.git(
        &["commit", "-q", "--amend", "-m", "rewritten again"],
        &rig.project(),
    );
    rig.trust();
    let doctor = rig.attest(&["hook", "doctor", "copilot"]);
    assert_eq!(doctor.status.code(), Some(0), "{}", crate::stdout(&doctor));
    let before = rig.remote_main();
    let (out, requests) = rig.run(
        "0a1b2c3d-0000-4000-8000-000000000007",
        &json!([force_push()]),
        &[],
    );
    assert_eq!(rig.remote_main(), before, "{}", show(&out, &requests));
}

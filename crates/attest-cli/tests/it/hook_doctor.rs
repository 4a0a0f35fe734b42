//! `attest hook doctor <agent>`: installed / trusted / loaded, read from the agent's own
//! files (hook settings, trust store, switches), each file named, exit 1 when any is
//! missing. The trust stores are written here in the shapes the real programs write
//! them (Copilot CLI 1.0.102's `config.json` with its comment lines, Gemini CLI 0.61's
//! `trustedFolders.json`, Codex 0.171's `config.toml`); `real_copilot` checks the
//! Copilot verdict against the real program.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

const AGENTS: [&str; 5] = ["claude-code", "codex", "gemini", "cursor", "copilot"];

/// A project and a home directory of its own.
struct Setup {
    project: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            project: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn dir(&self) -> PathBuf {
        std::fs::canonicalize(self.project.path()).unwrap()
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn attest(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(args)
            .current_dir(self.project.path())
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap()
    }

    fn install(&self, agent: &str) {
        crate::expect_ok(&self.attest(&[
            "hook",
            "install",
            agent,
            "--project",
            "--program",
            env!("CARGO_BIN_EXE_attest"),
        ]));
    }

    /// The doctor's JSON report and exit code.
    fn doctor(&self, agent: &str) -> (Value, Option<i32>) {
        let out = self.attest(&["hook", "doctor", agent, "--json"]);
        let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
            panic!(
                "{agent}: {err}: {}{}",
                crate::stdout(&out),
                crate::stderr(&out)
            )
        });
        (report, out.status.code())
    }

    fn write(&self, path: PathBuf, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Trusts the project in `agent`'s own trust store, as the real program records it.
    fn trust(&self, agent: &str) {
        let dir = self.dir();
        match agent {
            "copilot" => self.write(
                self.home().join(".copilot/config.json"),
                &format!(
                    "// User settings belong in settings.json.\n// This file is managed \
                     automatically.\n{}\n",
                    json!({"trustedFolders": [dir], "firstLaunchAt": "2026-12-07T15:56:35.390Z"})
                ),
            ),
            "gemini" => self.write(
                self.home().join(".gemini/trustedFolders.json"),
                &json!({ dir.to_str().unwrap(): "TRUST_FOLDER" }).to_string(),
            ),
            "codex" => {
                let hooks = dir.join(".codex/hooks.json");
                let hooks = hooks.display();
                self.write(
                    self.home().join(".codex/config.toml"),
                    &format!(
                        "[projects.\"{}\"]\ntrust_level = \"trusted\"\n\n\
                         [hooks.state.\"{hooks}:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:00\"\n\n\
                         [hooks.state.\"{hooks}:post_tool_use:0:0\"]\ntrusted_hash = \"sha256:11\"\n",
                        dir.display()
                    ),
                )
            }
            _ => {}
        }
    }
}

fn says(report: &Value, check: &str) -> String {
    report[check]["says"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn read(report: &Value, check: &str) -> Vec<String> {
    report[check]["read"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn nothing_installed_is_a_no_naming_the_file_looked_at_for_every_agent() {
    for agent in AGENTS {
        let setup = Setup::new();
        let (report, code) = setup.doctor(agent);
        assert_eq!(code, Some(1), "{agent}: {report:#}");
        assert_eq!(report["installed"]["ok"], false, "{agent}: {report:#}");
        let file = match agent {
            "claude-code" => ".claude/settings.json",
            "codex" => ".codex/hooks.json",
            "gemini" => ".gemini/settings.json",
            "cursor" => ".cursor/hooks.json",
            _ => ".github/hooks/attest.json",
        };
        assert!(
            says(&report, "installed").contains(file),
            "{agent}: {report:#}"
        );
        assert!(
            says(&report, "installed").contains(&format!("attest hook install {agent}")),
            "{agent}: {report:#}"
        );
    }
}

#[test]
fn an_installed_and_trusted_hook_is_healthy_for_every_agent() {
    for agent in AGENTS {
        let setup = Setup::new();
        setup.install(agent);
        setup.trust(agent);
        let (report, code) = setup.doctor(agent);
        assert_eq!(code, Some(0), "{agent}: {report:#}");
        for check in ["installed", "trusted", "loaded"] {
            assert_eq!(report[check]["ok"], true, "{agent} {check}: {report:#}");
        }
        assert!(
            says(&report, "loaded").contains(env!("CARGO_BIN_EXE_attest")),
            "{agent}: names the program the hook runs: {report:#}"
        );
        let trust_file = match agent {
            "copilot" => Some(".copilot/config.json"),
            "gemini" => Some(".gemini/trustedFolders.json"),
            "codex" => Some(".codex/config.toml"),
            _ => None,
        };
        if let Some(file) = trust_file {
            let expected = setup.home().join(file).display().to_string();
            assert!(
                read(&report, "trusted").contains(&expected),
                "{agent}: names {expected}: {report:#}"
            );
        }
        // The text report says the same, a line per question.
        let text = crate::stdout(&setup.attest(&["hook", "doctor", agent]));
        for line in ["installed: yes", "trusted: yes", "loaded: yes"] {
            assert!(text.contains(line), "{agent}: {text}");
        }
    }
}

#[test]
fn an_untrusted_install_is_a_no_saying_how_to_trust_it() {
    for (agent, how) in [
        ("copilot", "trustedFolders"),
        ("gemini", "TRUST_FOLDER"),
        ("codex", "trust the project and the hook"),
    ] {
        let setup = Setup::new();
        setup.install(agent);
        let (report, code) = setup.doctor(agent);
        assert_eq!(code, Some(1), "{agent}: {report:#}");
        assert_eq!(report["installed"]["ok"], true, "{agent}: {report:#}");
        assert_eq!(report["trusted"]["ok"], false, "{agent}: {report:#}");
        let said = says(&report, "trusted");
        assert!(said.contains(how), "{agent}: {said}");
        assert!(
            said.contains(&setup.dir().display().to_string()),
            "{agent}: {said}"
        );
    }
}

/// Copilot CLI's rules, as the real 1.0.102 applies them: a trusted folder trusts the
/// folders below it; `trustedFolders` in settings.json is ignored (the program logs it
/// as an unknown key); a file it cannot read trusts nothing.
#[test]
fn copilot_trust_follows_the_real_programs_rules() {
    let setup = Setup::new();
    setup.install("copilot");
    let parent = setup.dir().parent().unwrap().to_path_buf();
    setup.write(
        setup.home().join(".copilot/config.json"),
        &json!({"trustedFolders": [parent]}).to_string(),
    );
    assert_eq!(setup.doctor("copilot").1, Some(0));

    let other = Setup::new();
    other.install("copilot");
    other.write(
        other.home().join(".copilot/settings.json"),
        &json!({"trustedFolders": [other.dir()]}).to_string(),
    );
    let (report, code) = other.doctor("copilot");
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["trusted"]["ok"], false, "{report:#}");

    other.write(
        other.home().join(".copilot/config.json"),
        "{\"trustedFolders\": [",
    );
    let (report, _) = other.doctor("copilot");
    assert_eq!(report["trusted"]["ok"], false, "{report:#}");
    assert!(says(&report, "trusted").contains("not JSON"), "{report:#}");
}

/// Gemini CLI's longest rule decides: a `DO_NOT_TRUST` on the project beats a trusted
/// parent; `TRUST_PARENT` on a sibling trusts the parent's tree.
#[test]
fn gemini_trust_takes_the_longest_rule() {
    let setup = Setup::new();
    setup.install("gemini");
    let dir = setup.dir();
    let parent = dir.parent().unwrap();
    let file = setup.home().join(".gemini/trustedFolders.json");
    setup.write(
        file.clone(),
        &json!({ parent.to_str().unwrap(): "TRUST_FOLDER", dir.to_str().unwrap(): "DO_NOT_TRUST" })
            .to_string(),
    );
    let (report, code) = setup.doctor("gemini");
    assert_eq!(code, Some(1), "{report:#}");
    assert!(
        says(&report, "trusted").contains("DO_NOT_TRUST"),
        "{report:#}"
    );
    let sibling = parent.join("sibling-folder");
    setup.write(
        file,
        &json!({ sibling.to_str().unwrap(): "TRUST_PARENT" }).to_string(),
    );
    assert_eq!(setup.doctor("gemini").1, Some(0));
}

/// A Codex hook trust recorded for another file, or switched off, is not trust.
#[test]
fn codex_trust_needs_the_project_and_each_of_attests_handlers() {
    let setup = Setup::new();
    setup.install("codex");
    let dir = setup.dir();
    setup.write(
        setup.home().join(".codex/config.toml"),
        &format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n\n\
             [hooks.state.\"{}:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:00\"\n\
             enabled = false\n",
            dir.display(),
            dir.join(".codex/hooks.json").display()
        ),
    );
    let (report, code) = setup.doctor("codex");
    assert_eq!(code, Some(1), "{report:#}");
    let said = says(&report, "trusted");
    assert!(
        said.contains("pre_tool_use") && said.contains("post_tool_use"),
        "{said}"
    );
    assert!(
        !said.contains("the project (no"),
        "the project is trusted: {said}"
    );
}

/// A configuration the hook cannot load makes every hook answer deny: the doctor says
/// so with the file, line and key.
#[test]
fn a_configuration_error_is_reported_with_file_line_and_key() {
    for agent in AGENTS {
        let setup = Setup::new();
        setup.install(agent);
        setup.trust(agent);
        setup.write(
            setup.dir().join(".attest/config.yaml"),
            "agent: builder\nmdoe: shadow\n",
        );
        let (report, code) = setup.doctor(agent);
        assert_eq!(code, Some(1), "{agent}: {report:#}");
        assert_eq!(report["loaded"]["ok"], false, "{agent}: {report:#}");
        let said = says(&report, "loaded");
        assert!(
            said.contains("config.yaml") && said.contains(":2") && said.contains("mdoe"),
            "{agent}: {said}"
        );
    }
}

/// Settings that switch hooks off, and a hook program that is not there, are a "not
/// loaded", naming the file.
#[test]
fn hooks_switched_off_or_a_missing_program_are_not_loaded() {
    for (agent, file, text) in [
        (
            "claude-code",
            ".claude/settings.local.json",
            r#"{"disableAllHooks": true}"#,
        ),
        (
            "copilot",
            ".github/copilot/settings.json",
            r#"{"disableAllHooks": true}"#,
        ),
        (
            "gemini",
            "HOME/.gemini/settings.json",
            r#"{"hooksConfig": {"enabled": false}}"#,
        ),
    ] {
        let setup = Setup::new();
        setup.install(agent);
        setup.trust(agent);
        let path = match file.strip_prefix("HOME/") {
            Some(file) => setup.home().join(file),
            None => setup.dir().join(file),
        };
        setup.write(path.clone(), text);
        let (report, code) = setup.doctor(agent);
        assert_eq!(code, Some(1), "{agent}: {report:#}");
        let said = says(&report, "loaded");
        assert!(
            said.contains(&path.display().to_string()),
            "{agent}: {said}"
        );
    }
    let setup = Setup::new();
    crate::expect_ok(&setup.attest(&[
        "hook",
        "install",
        "cursor",
        "--program",
        "/nonexistent/attest",
    ]));
    let (report, code) = setup.doctor("cursor");
    assert_eq!(code, Some(1), "{report:#}");
    assert!(
        says(&report, "loaded").contains("/nonexistent/attest"),
        "{report:#}"
    );
}

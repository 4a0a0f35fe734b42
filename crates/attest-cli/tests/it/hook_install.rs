//! `attest hook install <agent>`: one entry per event in the agent's settings, every
//! other setting and hook kept as it was, installing twice updates it, `--remove`
//! restores the file, `--dry-run` shows the diff, a broken file is refused untouched.

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::{attest, expect_ok as ok, stderr, stdout};

/// `attest hook install ARGS --dir DIR`, naming the program (`--program attest`) unless
/// ARGS do: the tests below that are about the program run it themselves.
fn install(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["hook", "install"];
    all.extend_from_slice(args);
    if !args.contains(&"--program") {
        all.extend_from_slice(&["--program", "attest"]);
    }
    let dir_text = dir.display().to_string();
    all.extend_from_slice(&["--dir", dir_text.as_str()]);
    attest(dir, &all)
}

/// A Claude Code project settings file with settings and a hook of the user's own, laid
/// out as Claude Code writes it (two-space JSON).
const CLAUDE_SETTINGS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(npm run lint)"
    ],
    "deny": []
  },
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Edit|Write",
        "hooks": [
          {
            "type": "command",
            "command": "npx prettier --write \"$CLAUDE_FILE_PATHS\""
          }
        ]
      }
    ]
  },
  "model": "claude-sonnet-4-5"
}
"#;

#[test]
fn installing_twice_adds_one_entry_and_remove_restores_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, CLAUDE_SETTINGS).unwrap();

    let said = ok(&install(dir.path(), &["claude-code", "--project"]));
    assert!(
        said.contains("installed `attest hook claude-code`"),
        "{said}"
    );
    let once = std::fs::read_to_string(&path).unwrap();
    ok(&install(dir.path(), &["claude-code"]));
    let twice = std::fs::read_to_string(&path).unwrap();
    assert_eq!(once, twice, "a second install changes nothing");

    let settings: Value = serde_json::from_str(&twice).unwrap();
    // The user's own settings and hook are untouched, in place.
    assert_eq!(settings["permissions"]["allow"][0], "Bash(npm run lint)");
    assert_eq!(settings["model"], "claude-sonnet-4-5");
    let post = settings["hooks"]["PostToolUse"].as_array().unwrap();
    assert_eq!(post.len(), 2, "{twice}");
    assert_eq!(post[0]["matcher"], "Edit|Write");
    assert_eq!(post[1]["hooks"][0]["command"], "attest hook claude-code");
    for event in [
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PostToolUseFailure",
    ] {
        let ours: Vec<&Value> = settings["hooks"][event]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["hooks"][0]["command"] == "attest hook claude-code")
            .collect();
        assert_eq!(ours.len(), 1, "{event}: {twice}");
        assert_eq!(ours[0]["matcher"], "*");
    }
    // Every line of the user's file is still there, byte for byte.
    assert!(
        twice.starts_with("{\n  \"permissions\": {\n    \"allow\": [\n"),
        "{twice}"
    );
    assert!(
        twice.contains(
            "            \"command\": \"npx prettier --write \\\"$CLAUDE_FILE_PATHS\\\"\"\n"
        ),
        "{twice}"
    );
    // The file before it is kept beside it.
    let backup =
        std::fs::read_to_string(dir.path().join(".claude/settings.json.attest-backup")).unwrap();
    assert_eq!(backup, CLAUDE_SETTINGS);

    let said = ok(&install(dir.path(), &["claude-code", "--remove"]));
    assert!(said.contains("removed"), "{said}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), CLAUDE_SETTINGS);
}

#[test]
fn a_dry_run_shows_the_diff_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, CLAUDE_SETTINGS).unwrap();
    let diff = ok(&install(dir.path(), &["claude-code", "--dry-run"]));
    assert!(diff.starts_with("--- "), "{diff}");
    assert!(
        diff.contains("\n+            \"command\": \"attest hook claude-code\"\n"),
        "{diff}"
    );
    assert!(!diff.contains("\n-  \"model\""), "{diff}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), CLAUDE_SETTINGS);
}

#[test]
fn a_broken_settings_file_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for (agent, file, text) in [
        ("claude-code", ".claude/settings.json", "{\"hooks\": {,}}\n"),
        ("codex", ".codex/hooks.json", "[1, 2]\n"),
        ("gemini", ".gemini/settings.json", "{\"hooks\": []}\n"),
        (
            "cursor",
            ".cursor/hooks.json",
            "{\"version\": 1, \"hooks\": {\"afterFileEdit\": {}}}\n",
        ),
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let output = install(dir.path(), &[agent]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{agent}: {}",
            stdout(&output)
        );
        let said = stderr(&output);
        assert!(
            said.contains("left untouched") && said.contains(file),
            "{agent}: {said}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{agent}");
        assert!(!dir.path().join(format!("{file}.attest-backup")).exists());
    }
}

#[test]
fn every_agent_gets_its_own_file_shape() {
    let dir = tempfile::tempdir().unwrap();
    for agent in ["codex", "gemini", "cursor", "copilot"] {
        ok(&install(dir.path(), &[agent]));
        ok(&install(dir.path(), &[agent]));
    }
    let read = |file: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(file)).unwrap()).unwrap()
    };
    let codex = read(".codex/hooks.json");
    assert_eq!(
        codex["hooks"]["PreToolUse"],
        json!([{"hooks": [{"type": "command", "command": "attest hook codex"}]}])
    );
    let gemini = read(".gemini/settings.json");
    assert_eq!(
        gemini["hooks"]["BeforeTool"],
        json!([{"matcher": ".*", "hooks": [{"type": "command", "command": "attest hook gemini"}]}])
    );
    let cursor = read(".cursor/hooks.json");
    assert_eq!(cursor["version"], 1);
    assert_eq!(
        cursor["hooks"]["beforeShellExecution"],
        json!([{"command": "attest hook cursor"}])
    );
    assert_eq!(
        cursor["hooks"]["beforeReadFile"],
        json!([{"command": "attest hook cursor"}])
    );
    assert_eq!(
        cursor["hooks"]["preToolUse"],
        json!([{"command": "attest hook cursor"}])
    );
    let mut events: Vec<&str> = cursor["hooks"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    events.sort_unstable();
    assert_eq!(
        events,
        [
            "afterMCPExecution",
            "afterShellExecution",
            "beforeMCPExecution",
            "beforeReadFile",
            "beforeShellExecution",
            "postToolUse",
            "postToolUseFailure",
            "preToolUse"
        ]
    );
    let copilot = read(".github/hooks/attest.json");
    assert_eq!(copilot["version"], 1);
    assert_eq!(
        copilot["hooks"]["preToolUse"],
        json!([{"type": "command", "bash": "attest hook copilot", "timeoutSec": 30}])
    );
    // Copilot's file is Attest's own: removing the hook removes it.
    ok(&install(dir.path(), &["copilot", "--remove"]));
    assert!(!dir.path().join(".github/hooks/attest.json").exists());
    // Copilot has no user-level hooks file to install into.
    let output = attest(dir.path(), &["hook", "install", "copilot", "--user"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--project"), "{}", stderr(&output));
}

/// `postToolUse` records Cursor's file edits now: installing again takes Attest's own
/// `afterFileEdit` entry out (an edit is recorded once) and leaves another tool's there,
/// byte for byte.
#[test]
fn a_cursor_install_takes_out_the_retired_file_edit_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".cursor/hooks.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let theirs = "{ \"command\": \"./hooks/format.sh\" }";
    std::fs::write(
        &path,
        format!(
            "{{\n  \"version\": 1,\n  \"hooks\": {{\n    \"afterFileEdit\": [{theirs}, {{\"command\": \"attest hook cursor\"}}],\n    \"stop\": [{theirs}]\n  }}\n}}\n"
        ),
    )
    .unwrap();
    ok(&install(dir.path(), &["cursor"]));
    let text = std::fs::read_to_string(&path).unwrap();
    let settings: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        settings["hooks"]["afterFileEdit"],
        json!([{"command": "./hooks/format.sh"}])
    );
    assert!(text.contains(&format!("\"stop\": [{theirs}]")), "{text}");
    assert_eq!(
        settings["hooks"]["postToolUse"],
        json!([{"command": "attest hook cursor"}])
    );
    // Removing leaves the other tool's entries.
    ok(&install(dir.path(), &["cursor", "--remove"]));
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        settings["hooks"],
        json!({"afterFileEdit": [{"command": "./hooks/format.sh"}], "stop": [{"command": "./hooks/format.sh"}]})
    );
}

/// `attest hook install claude-code` in `dir` with `path` as PATH (none: unset), as a
/// person runs it.
fn install_with_path(dir: &Path, path: Option<&Path>, extra: &[&str]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_attest"));
    command
        .args(extra)
        .args(["hook", "install", "claude-code"])
        .current_dir(dir)
        .env_clear();
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().unwrap()
}

fn hook_command(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(".claude/settings.json")).unwrap();
    let settings: Value = serde_json::from_str(&text).unwrap();
    settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn without_attest_on_path_the_hook_runs_this_binary_by_its_absolute_path_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let said = ok(&install_with_path(dir.path(), None, &[]));
    let exe = Path::new(env!("CARGO_BIN_EXE_attest"))
        .canonicalize()
        .unwrap();
    assert_eq!(
        hook_command(dir.path()),
        format!("{} hook claude-code", exe.display())
    );
    assert!(said.contains("no `attest` is on PATH"), "{said}");
    assert!(said.contains("--program"), "{said}");
}

#[test]
fn with_attest_on_path_the_hook_runs_a_bare_attest_and_program_overrides_both() {
    let dir = tempfile::tempdir().unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_attest"), bin.path().join("attest")).unwrap();
    let said = ok(&install_with_path(dir.path(), Some(bin.path()), &[]));
    assert_eq!(hook_command(dir.path()), "attest hook claude-code");
    assert!(said.contains("--program names another"), "{said}");
    let other = tempfile::tempdir().unwrap();
    ok(&install(
        other.path(),
        &["claude-code", "--program", "/opt/attest/bin/attest"],
    ));
    assert_eq!(
        hook_command(other.path()),
        "/opt/attest/bin/attest hook claude-code"
    );
}

#[test]
fn a_ledger_flag_is_refused_with_where_the_hook_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = install_with_path(dir.path(), None, &["--ledger", "books.sqlite"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let said = stderr(&output);
    assert!(said.contains("would drop --ledger"), "{said}");
    assert!(
        said.contains(".attest/config.yaml") && said.contains("ATTEST_LEDGER"),
        "{said}"
    );
    assert!(!dir.path().join(".claude").exists(), "nothing is written");
}

#[test]
fn the_attest_folder_stays_out_of_git_status_but_the_configuration_does_not() {
    let git = |dir: &Path, args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
    };
    let dir = tempfile::tempdir().unwrap();
    if !git(dir.path(), &["init", "-q"]).is_ok_and(|o| o.status.success()) {
        crate::peer_missing("git");
        return;
    }
    let said = ok(&install(dir.path(), &["claude-code"]));
    assert!(said.contains(".attest/.gitignore"), "{said}");
    // The hook's first event writes the ledger into .attest/.
    let event = r#"{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Bash","tool_input":{"command":"ls"}}"#;
    let mut hook = std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["hook", "claude-code"])
        .current_dir(dir.path())
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut hook.stdin.take().unwrap(), event.as_bytes()).unwrap();
    assert!(hook.wait_with_output().unwrap().status.success());
    assert!(dir.path().join(".attest/ledger.sqlite").exists());
    std::fs::write(dir.path().join(".attest/config.yaml"), "mode: shadow\n").unwrap();
    let status = git(
        dir.path(),
        &["status", "--porcelain", "--untracked-files=all"],
    )
    .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(!status.contains("ledger.sqlite"), "{status}");
    assert!(status.contains(".attest/config.yaml"), "{status}");
    assert!(status.contains(".claude/settings.json"), "{status}");
    // An existing .gitignore is the user's: a second install keeps it.
    std::fs::write(dir.path().join(".attest/.gitignore"), "mine\n").unwrap();
    ok(&install(dir.path(), &["claude-code", "--program", "other"]));
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".attest/.gitignore")).unwrap(),
        "mine\n"
    );
}

/// Issue 48: an agent that skips a hook until it is trusted (Codex hook trust, Copilot
/// CLI and Gemini CLI folder trust) skips it silently, so the install says so and how to
/// trust it; Claude Code and Cursor load the hook as installed, and nothing is said.
#[test]
fn an_install_says_when_the_agent_will_not_load_the_hook_until_trusted() {
    for (agent, says) in [
        ("codex", Some("codex exec")),
        ("copilot", Some("trustedFolders")),
        ("gemini", Some("trustedFolders.json")),
        ("claude-code", None),
        ("cursor", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = ok(&install(dir.path(), &[agent]));
        let note = out
            .lines()
            .find(|line| line.starts_with("not loaded until trusted"));
        match says {
            Some(says) => {
                let note = note.unwrap_or_else(|| panic!("{agent}: {out}"));
                assert!(note.contains(says), "{agent}: {note}");
                let folder = std::fs::canonicalize(dir.path()).unwrap();
                assert!(
                    note.contains(&folder.display().to_string()),
                    "{agent}: names the folder to trust: {note}"
                );
            }
            None => assert!(note.is_none(), "{agent}: {out}"),
        }
        // Run again (already installed), it still says so: the hook may still be untrusted.
        let again = ok(&install(dir.path(), &[agent]));
        assert_eq!(
            again.contains("not loaded until trusted"),
            says.is_some(),
            "{agent}: {again}"
        );
    }
}

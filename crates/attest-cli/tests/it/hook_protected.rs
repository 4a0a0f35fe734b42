//! The governor's own files (issue 49): a write to an agent's hooks or settings, or to a
//! file the running configuration uses (policy, configuration, ledger, hold state),
//! is refused whatever spells it, with the resolved path named, and recorded. Paths are
//! resolved against the command's directory (`cd` chains, `git -C`, `--git-dir`,
//! Gemini's `dir_path`, the event's `cwd`), `~`, `..` and symlinks first.

use std::path::Path;

use serde_json::{json, Value};

use crate::exported_entries;
use crate::hook::hook_answer;
use crate::hook_agents::{claude, copilot, gemini, verdict};

/// The answer of `attest hook AGENT` (with `extra` global flags first) in `dir`, the
/// project `dir` and HOME `home`.
fn answer_in(dir: &Path, home: &Path, extra: &[&str], agent: &str, event: &Value) -> Value {
    let mut args: Vec<&str> = extra.to_vec();
    args.push(agent);
    let home = home.to_str().unwrap();
    let project = dir.to_str().unwrap();
    let env = [
        ("HOME", home),
        ("CLAUDE_PROJECT_DIR", project),
        ("GEMINI_PROJECT_DIR", project),
    ];
    hook_answer(dir, &args, event, &env)
}

/// `event` with its `cwd` set to `cwd`.
fn at(mut event: Value, cwd: &Path) -> Value {
    event["cwd"] = json!(cwd.to_str().unwrap());
    event
}

/// The reason in any agent's answer.
fn reason(answer: &Value) -> String {
    [
        &answer["hookSpecificOutput"]["permissionDecisionReason"],
        &answer["permissionDecisionReason"],
        &answer["reason"],
    ]
    .iter()
    .find_map(|value| value.as_str())
    .unwrap_or_default()
    .to_owned()
}

/// A project with the directories the attacks write into.
fn project() -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for sub in [
        ".claude",
        ".cursor",
        ".attest",
        ".git/hooks",
        "src",
        "rules",
    ] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    std::fs::write(dir.path().join("payload"), "{}").unwrap();
    let home = tempfile::tempdir().unwrap();
    (dir, home)
}

/// Asserts `answer` is a deny naming `named`, and that the last row is a refusal.
fn refused(dir: &Path, answer: &Value, agent: &str, named: &str, case: &str) {
    assert_eq!(verdict(agent, answer), "deny", "{case}: {answer}");
    let reason = reason(answer);
    assert!(
        reason.contains(named) && reason.contains("protected"),
        "{case}: the reason names {named}: {reason}"
    );
    let entries = exported_entries(dir);
    let last = entries.last().unwrap_or_else(|| panic!("{case}: no row"));
    assert_eq!(last["decision"], "refuse", "{case}: {last}");
}

#[test]
fn protected_writes_are_refused_through_every_shell_spelling() {
    let (dir, home) = project();
    let root = dir.path().canonicalize().unwrap();
    std::os::unix::fs::symlink(root.join(".claude"), root.join("notes")).unwrap();
    let cases: [(&str, &str); 10] = [
        ("echo x > .claude/settings.json", ".claude/settings.json"),
        (
            "cd .cursor && cp ../payload hooks.json",
            ".cursor/hooks.json",
        ),
        (
            "cd .attest && printf 'mode: shadow' > config.yaml",
            ".attest/config.yaml",
        ),
        ("echo x > notes/settings.json", ".claude/settings.json"),
        ("cd src/../.claude; tee settings.local.json", ".claude"),
        (
            "cp payload .github/hooks/attest.json",
            ".github/hooks/attest.json",
        ),
        ("mkdir -p .github/hooks", ".github/hooks"),
        (
            "git --git-dir=.git config alias.st '!rm -rf .'",
            ".git/config",
        ),
        ("echo '{}' > ~/.claude.json", ".claude.json"),
        (
            "sh -c 'cd .husky && cp ../payload pre-commit'",
            ".husky/pre-commit",
        ),
    ];
    for (command, named) in cases {
        let event = at(claude("Bash", json!({"command": command})), &root);
        let answer = answer_in(&root, home.path(), &[], "claude-code", &event);
        refused(&root, &answer, "claude-code", named, command);
    }
    // The attacks did not happen: the hook refused before anything ran (the hook only
    // answers, and nothing was written by it).
    assert!(!root.join(".claude/settings.json").exists());
}

#[test]
fn a_directory_the_static_reading_cannot_resolve_is_protected() {
    let (dir, home) = project();
    let root = dir.path().canonicalize().unwrap();
    let event = at(
        claude(
            "Bash",
            json!({"command": "cd \"$TARGET\" && cp payload settings.json"}),
        ),
        &root,
    );
    let answer = answer_in(&root, home.path(), &[], "claude-code", &event);
    refused(&root, &answer, "claude-code", "$TARGET", "cd $TARGET");
}

#[test]
fn relative_paths_are_resolved_through_each_agents_cwd_and_dir_path() {
    let (dir, home) = project();
    let root = dir.path().canonicalize().unwrap();
    // The event's `cwd` inside `.git/hooks`.
    let inside = at(
        claude("Bash", json!({"command": "cp ../../payload pre-commit"})),
        &root.join(".git/hooks"),
    );
    let answer = answer_in(&root, home.path(), &[], "claude-code", &inside);
    refused(
        &root,
        &answer,
        "claude-code",
        ".git/hooks/pre-commit",
        "cwd .git/hooks",
    );
    // Gemini's `dir_path`.
    let shell = at(
        gemini(
            "run_shell_command",
            json!({"command": "cp ../payload hooks.json", "dir_path": ".cursor"}),
        ),
        &root,
    );
    let answer = answer_in(&root, home.path(), &[], "gemini", &shell);
    refused(
        &root,
        &answer,
        "gemini",
        ".cursor/hooks.json",
        "gemini dir_path",
    );
    // Copilot's own edit of the hook file `attest hook install copilot` writes.
    let edit = at(
        copilot("edit", json!({"path": ".github/hooks/attest.json"})),
        &root,
    );
    let answer = answer_in(&root, home.path(), &[], "copilot", &edit);
    refused(
        &root,
        &answer,
        "copilot",
        ".github/hooks/attest.json",
        "copilot edit",
    );
    // Claude Code's Write tool with a relative path and `..`.
    let write = at(
        claude(
            "Write",
            json!({"file_path": "src/../.vscode/settings.json", "content": "{}"}),
        ),
        &root,
    );
    let answer = answer_in(&root, home.path(), &[], "claude-code", &write);
    refused(
        &root,
        &answer,
        "claude-code",
        ".vscode/settings.json",
        "Write ..",
    );
}

#[test]
fn the_configured_policy_and_ledger_under_other_names_are_protected() {
    let (dir, home) = project();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(
        root.join("rules/agents.yaml"),
        "version: 1\npolicies:\n  - name: no-force-push\n    match:\n      action: git.delete\n    decision: refuse\n    reason: no\n",
    )
    .unwrap();
    let flags = ["--policy", "rules/agents.yaml"];
    let event = at(
        claude(
            "Bash",
            json!({"command": "echo 'version: 1' > rules/agents.yaml"}),
        ),
        &root,
    );
    let answer = answer_in(&root, home.path(), &flags, "claude-code", &event);
    refused(
        &root,
        &answer,
        "claude-code",
        "rules/agents.yaml",
        "policy by name",
    );
    let write = at(
        claude(
            "Write",
            json!({"file_path": "ledger.sqlite", "content": ""}),
        ),
        &root,
    );
    let answer = answer_in(&root, home.path(), &flags, "claude-code", &write);
    if !crate::on_postgres() {
        refused(&root, &answer, "claude-code", "ledger.sqlite", "the ledger");
    }
}

#[test]
fn writes_outside_the_protected_set_still_act() {
    let (dir, home) = project();
    let root = dir.path().canonicalize().unwrap();
    for command in [
        "echo x > src/out.txt",
        "cd src && touch copy.json",
        "git -C src status",
        "git config user.name",
    ] {
        let event = at(claude("Bash", json!({"command": command})), &root);
        let answer = answer_in(&root, home.path(), &[], "claude-code", &event);
        assert_eq!(
            verdict("claude-code", &answer),
            "allow",
            "{command}: {answer}"
        );
    }
}

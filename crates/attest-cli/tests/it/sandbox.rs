//! `attest sandbox` (issue 49): below the command text, the protected set is read-only
//! and Attest's state out of sight, however a command spells its write; the rest of the
//! project stays writable, and normal work (git, npm) runs.

use std::process::{Command, Output};

use crate::peer_missing;

/// A project with an installed agent's settings, git hooks, a configured policy under
/// its own name, and a hold-state directory, plus a home with `~/.claude.json`.
struct Project {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
    state: std::path::PathBuf,
}

fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("work");
    let home = dir.path().join("home");
    let state = dir.path().join("state");
    for sub in [".claude", ".attest", "rules", "src"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(state.join("hook-holds")).unwrap();
    std::fs::write(state.join("hook-holds/secret.json"), "{}").unwrap();
    std::fs::write(root.join(".claude/settings.json"), "{\"hooks\":{}}").unwrap();
    std::fs::write(home.join(".claude.json"), "{}").unwrap();
    std::fs::write(root.join("rules/agents.yaml"), "rules: []\n").unwrap();
    std::fs::write(
        root.join(".attest/config.yaml"),
        "policy: ../rules/agents.yaml\n",
    )
    .unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(git.status.success());
    Project {
        _dir: dir,
        root,
        home,
        state,
    }
}

/// `attest sandbox -- sh -c SCRIPT` in the project.
fn sandboxed(p: &Project, script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["sandbox", "--", "sh", "-c", script])
        .current_dir(&p.root)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &p.home)
        .env("ATTEST_STATE_DIR", &p.state)
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_write_to_a_protected_file_fails_however_it_is_spelled() {
    let p = project();
    let settings = p.root.join(".claude/settings.json");
    let spellings = [
        "echo x > .claude/settings.json",
        "cd .claude && echo x > settings.json",
        "ln -s .claude/settings.json link && echo x > link",
        "python3 -c \"open('.claude/settings.json', 'w').write('x')\"",
        "rm .claude/settings.json",
        "echo '#!/bin/sh' > .git/hooks/pre-commit",
        "echo '[core]' >> .git/config",
        "echo x > \"$HOME/.claude.json\"",
        "echo 'rules: []' > rules/agents.yaml",
        "mkdir -p .attest/x",
        // Undoing the mounts, from inside.
        "umount .claude; echo x > .claude/settings.json",
        "mount -o remount,rw,bind .claude; echo x > .claude/settings.json",
        // Another process's root, reached through /proc.
        "for root in /proc/[0-9]*/root; do echo x > \"$root$PWD/.claude/settings.json\" && exit 0; done; exit 1",
    ];
    for script in spellings {
        let output = sandboxed(&p, script);
        assert!(!output.status.success(), "{script} ran: {}", text(&output));
        assert_eq!(
            std::fs::read_to_string(&settings).unwrap(),
            "{\"hooks\":{}}",
            "{script}"
        );
    }
    let output = sandboxed(&p, "echo x > .claude/settings.json");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("Read-only file system"),
        "{}",
        text(&output)
    );
    assert!(!p.root.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(p.root.join("rules/agents.yaml")).unwrap(),
        "rules: []\n"
    );
    assert!(!p.root.join(".attest/x").exists());
}

#[test]
fn attests_hold_state_is_out_of_sight() {
    let p = project();
    let output = sandboxed(&p, "ls -A \"$ATTEST_STATE_DIR\"");
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(!listed.contains("hook-holds"), "{}", text(&output));
    let output = sandboxed(&p, "cat \"$ATTEST_STATE_DIR/hook-holds/secret.json\"");
    assert!(!output.status.success(), "{}", text(&output));
    assert!(p.state.join("hook-holds/secret.json").exists());
}

#[test]
fn the_rest_of_the_project_stays_writable_and_the_exit_code_is_the_commands() {
    let p = project();
    let output = sandboxed(
        &p,
        "echo a > notes.txt && mkdir -p src/deep && echo b > src/deep/b.txt && \
         python3 -c \"open('src/c.txt', 'w').write('c')\" && exit 7",
    );
    assert_eq!(output.status.code(), Some(7), "{}", text(&output));
    assert_eq!(
        std::fs::read_to_string(p.root.join("notes.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/deep/b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/c.txt")).unwrap(),
        "c"
    );
    // Files the command makes are the caller's, not a namespace's root's.
    use std::os::unix::fs::MetadataExt;
    let made = std::fs::metadata(p.root.join("notes.txt")).unwrap();
    assert_eq!(made.uid(), own_uid());
}

/// The uid this test runs as.
fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid()
}

#[test]
fn git_commit_and_npm_test_work_inside_the_sandbox() {
    let p = project();
    std::fs::write(p.root.join("src/main.txt"), "hello\n").unwrap();
    let output = sandboxed(
        &p,
        "git add src && git -c user.email=dev@example.com -c user.name=dev commit -q -m first \
         && git log --oneline",
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("first"));

    let has_npm = Command::new("npm")
        .arg("--version")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_npm {
        peer_missing("npm (Node.js)");
        return;
    }
    std::fs::write(
        p.root.join("package.json"),
        r#"{"name":"demo","version":"1.0.0","scripts":{"test":"node -e \"require('fs').writeFileSync('tested.txt','ok')\""}}"#,
    )
    .unwrap();
    let output = sandboxed(&p, "npm test --silent --offline");
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        std::fs::read_to_string(p.root.join("tested.txt")).unwrap(),
        "ok"
    );
}

#[test]
fn the_plan_names_what_is_read_only_hidden_and_not_covered() {
    let p = project();
    let output = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["sandbox", "--plan", "--json"])
        .current_dir(p.root.join("src"))
        .env_clear()
        .env("HOME", &p.home)
        .env("ATTEST_STATE_DIR", &p.state)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = std::fs::canonicalize(&p.root).unwrap();
    assert_eq!(
        plan["project"],
        root.to_str().unwrap(),
        "found from a subfolder"
    );
    let listed = |key: &str| -> Vec<String> {
        plan["plan"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let read_only = listed("read_only");
    for want in [".claude", ".attest", ".git/hooks", ".git/config"] {
        let path = root.join(want);
        assert!(
            read_only.contains(&path.to_str().unwrap().to_owned()),
            "{want} in {read_only:?}"
        );
    }
    assert!(listed("hidden").contains(
        &std::fs::canonicalize(&p.state)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    ));
    assert!(listed("absent").contains(&root.join(".mcp.json").to_str().unwrap().to_owned()));
}

#[test]
fn the_second_stage_refuses_to_run_outside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["sandbox", "--stage-two", "0:0", "--", "true"])
        .current_dir(dir.path())
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("the sandbox's own step"));
}

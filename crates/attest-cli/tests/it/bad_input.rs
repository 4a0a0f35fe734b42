use crate::{attest, stderr};

#[test]
fn a_directory_as_ledger_is_exit_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["--ledger", ".", "verify"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is a directory"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_corrupt_sqlite_file_is_not_a_ledger_and_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.sqlite"), vec![0x42u8; 4096]).unwrap();
    // verify: not intact (exit 1), never "intact".
    let output = attest(dir.path(), &["--ledger", "bad.sqlite", "verify"]);
    assert_eq!(output.status.code(), Some(1));
    let out = crate::stdout(&output);
    assert!(
        out.contains("NOT A LEDGER")
            && out.contains("bad.sqlite")
            && out.contains("not a SQLite database"),
        "{out}"
    );
    // Other commands: cannot open it (exit 2), naming the file.
    let output = attest(dir.path(), &["--ledger", "bad.sqlite", "ledger"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("bad.sqlite") && err.contains("not a SQLite database"),
        "{err}"
    );
}

#[test]
fn a_missing_ledger_is_exit_2_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["--ledger", "none.sqlite", "ledger"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no ledger at none.sqlite"),
        "{}",
        stderr(&output)
    );
    assert!(!dir.path().join("none.sqlite").exists());
}

#[test]
fn an_unknown_command_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("frobnicate"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_bad_durability_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["--durability", "sometimes", "demo"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("sometimes"), "{}", stderr(&output));
}

#[test]
fn the_ledger_path_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
        .arg("demo")
        .current_dir(dir.path())
        .env_clear()
        .env("ATTEST_LEDGER", "elsewhere/l.sqlite")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(dir.path().join("elsewhere/l.sqlite").exists());
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    let dir = crate::demo_ledger();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["export"])
        .current_dir(dir.path())
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_commands_help_shows_its_own_options_before_the_global_ones() {
    let dir = tempfile::tempdir().unwrap();
    for (command, own) in [("verify", "--since-checkpoint"), ("gateway", "--upstream")] {
        let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_attest"));
        let out = run
            .args([command, "--help"])
            .current_dir(dir.path())
            .env_clear()
            // Set, so clap would show its value if it showed values.
            .env("ATTEST_TENANT", "zqtenantx")
            .output()
            .unwrap();
        let help = crate::stdout(&out);
        let at = |text: &str| {
            help.find(text)
                .unwrap_or_else(|| panic!("{command}: no {text:?} in\n{help}"))
        };
        assert!(at(own) < at("Global options:"), "{command}:\n{help}");
        assert!(at("Global options:") < at("--ledger"), "{command}:\n{help}");
        assert!(help.contains("[env: ATTEST_TENANT]"), "{command}:\n{help}");
        assert!(
            !help.contains("=]") && !help.contains("zqtenantx"),
            "{command}:\n{help}"
        );
    }
}

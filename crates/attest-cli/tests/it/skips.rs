//! A test whose peer is missing says so without `--nocapture`: its own line as it skips,
//! and one summary after the test binary's result line. This binary runs itself on one
//! test that skips when told to, as `cargo test` would run it.

use std::process::Command;

/// Skips, as a test with a missing peer does, when `ATTEST_TEST_SKIP_DEMO` is set;
/// otherwise passes having checked nothing else.
#[test]
fn skips_when_told() {
    if std::env::var_os("ATTEST_TEST_SKIP_DEMO").is_some() {
        crate::peer_missing("a stand-in peer (ATTEST_TEST_SKIP_DEMO)");
    }
}

fn run_skipping(require: bool) -> std::process::Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "skips::skips_when_told", "--test-threads", "1"])
        .env("ATTEST_TEST_SKIP_DEMO", "1")
        .env_remove("ATTEST_REQUIRE_PEERS")
        .env_remove("RUST_TEST_NOCAPTURE");
    if require {
        command.env("ATTEST_REQUIRE_PEERS", "1");
    }
    command.output().unwrap()
}

#[test]
fn a_skip_shows_without_nocapture_and_is_summed_up_at_the_end() {
    let out = run_skipping(false);
    let (stdout, stderr) = (crate::stdout(&out), crate::stderr(&out));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("test result: ok. 1 passed"), "{stdout}");
    assert!(
        stderr.contains("SKIPPED: skips::skips_when_told: a stand-in peer (ATTEST_TEST_SKIP_DEMO)"),
        "{stderr}"
    );
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("SKIPPED 1 test in attest-cli's ")
            && last.contains("a peer is missing: a stand-in peer (ATTEST_TEST_SKIP_DEMO) (1)")
            && last.contains("ATTEST_REQUIRE_PEERS=1"),
        "{stderr}"
    );
    // In CI every peer is installed and a missing one fails.
    let out = run_skipping(true);
    assert_eq!(out.status.code(), Some(101), "{}", crate::stdout(&out));
    assert!(
        crate::stdout(&out).contains("ATTEST_REQUIRE_PEERS is set"),
        "{}",
        crate::stdout(&out)
    );
}

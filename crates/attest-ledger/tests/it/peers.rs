//! Tests that need a peer (a PostgreSQL server, Chromium, an npm MCP server, a Python
//! module, a system program) and do not find it. One file for the three crates'
//! integration tests (attest-core's and attest-cli's include it with `#[path]`).
//!
//! On a developer's machine such a test says so and passes; `.ci/run` installs every peer
//! and sets `ATTEST_REQUIRE_PEERS`, so there a missing one fails the test. Saying so has
//! to be seen without `--nocapture`: libtest captures `eprintln!` per test and shows it
//! only for a failure. So the line goes straight to the process's standard error (a
//! write to `std::io::stderr()` is not captured), and each skip is also handed to a
//! small `awk` process started at the first one, which prints one summary line (how
//! many tests skipped, for which peers) when this test binary has ended and closed
//! its end of the pipe: after libtest's own `test result:` line.

// Not every crate's tests use every helper.
#![allow(dead_code)]

use std::io::Write;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// Reports that `peer` is missing, so the calling test skips (returns early): fails
/// under `ATTEST_REQUIRE_PEERS`.
pub(crate) fn peer_missing(peer: &str) {
    peer_missing_because(peer, "");
}

/// [`peer_missing`], with what the attempt to reach it said (shown, not summed up).
pub(crate) fn peer_missing_because(peer: &str, why: &str) {
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    };
    assert!(
        std::env::var_os("ATTEST_REQUIRE_PEERS").is_none(),
        "{peer}{why} (ATTEST_REQUIRE_PEERS is set, and .ci/run installs every peer)"
    );
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line =
        format!("SKIPPED: {test}: {peer}{why}; set ATTEST_REQUIRE_PEERS=1 to fail instead\n");
    // Not `eprintln!`: libtest would capture it.
    let _ = std::io::stderr().write_all(line.as_bytes());
    tally(&test, peer);
}

/// Hands one skip to the summary process, starting it at the first.
fn tally(test: &str, peer: &str) {
    static SUMMARY: Mutex<Option<ChildStdin>> = Mutex::new(None);
    let mut summary = SUMMARY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if summary.is_none() {
        *summary = start_summary();
    }
    if let Some(pipe) = summary.as_mut() {
        // One line per skip, `TEST<tab>PEER`; a tab or newline inside would split it.
        let clean = |text: &str| text.replace(['\t', '\n'], " ");
        let _ = writeln!(pipe, "{}\t{}", clean(test), clean(peer));
    }
    // The pipe stays open (a static is never dropped) until this process exits.
}

/// `awk`, reading one peer per skipped test until this process ends, then printing the
/// summary on the same standard error. `None` (the per-test lines still show) when
/// it cannot start.
fn start_summary() -> Option<ChildStdin> {
    let binary = format!(
        "{}'s {}",
        env!("CARGO_PKG_NAME"),
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "tests".to_owned())
    );
    // A test counts once (a test may skip several parts for one peer), under each peer.
    let program = r#"
        BEGIN { FS = "\t" }
        !(($1, $2) in seen) {
            seen[$1, $2] = 1
            if (!($1 in tests)) { tests[$1] = 1; n++ }
            if (!($2 in count)) order[++peers] = $2
            count[$2]++
        }
        END {
            if (n == 0) exit
            line = sprintf("SKIPPED %d test%s in %s: a peer is missing:", n, n == 1 ? "" : "s", binary)
            for (i = 1; i <= peers; i++)
                line = line sprintf("%s %s (%d)", i == 1 ? "" : ";", order[i], count[order[i]])
            print line "; ATTEST_REQUIRE_PEERS=1 makes these fail"
        }"#;
    let child = Command::new("awk")
        .args(["-v", &format!("binary={binary}"), program])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(std::io::stderr()))
        .spawn()
        .ok()?;
    child.stdin
}

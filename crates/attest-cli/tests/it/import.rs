//! `attest import`: JSON lines of past actions, one transaction, all or nothing.

use serde_json::Value;

use crate::{attest, ledger_file, stderr, stdout};

#[test]
fn import_records_every_line_in_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..250)
        .map(|i| {
            format!(
                "{{\"system\":\"slack\",\"verb\":\"send\",\"target\":\"#ops\",\"agent\":\"bot\",\"params\":{{\"channel\":\"#ops\",\"text\":\"secret {i}\"}},\"result\":{{\"ok\":true,\"ts\":\"{i}.1\"}}}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("past.jsonl"), lines).unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("imported 250 actions as seq 1 to 250"),
        "{}",
        stdout(&output)
    );
    let verify = attest(dir.path(), &["verify", "--json"]);
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(
        (report["ok"].clone(), report["checked"].clone()),
        (Value::Bool(true), Value::from(250))
    );
    let export = stdout(&attest(dir.path(), &["export"]));
    let first: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(first["decision"], "recorded");
    assert_eq!(first["verification"]["level"], "acknowledged");
    assert!(
        !export.contains("secret 1"),
        "params text reached the ledger"
    );
}

#[test]
fn a_bad_line_imports_nothing_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("past.jsonl"),
        "{\"system\":\"gmail\",\"verb\":\"send\"}\n{\"system\":\"gmail\",\"verb\":\"sned\"}\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("past.jsonl:2"),
        "{}",
        stderr(&output)
    );
    assert!(!ledger_file(dir.path()).exists());
}

/// Issue 53: one run names every bad line (the first 20, then how many more), not only the
/// first, and imports nothing.
#[test]
fn every_bad_line_is_named_in_one_run_up_to_twenty_then_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("{\"system\":\"gmail\",\"verb\":\"send\"}\n");
    text.push_str("{\"system\":\"gmail\",\"verb\":\"sned\"}\n");
    text.push_str("not json\n");
    for _ in 0..23 {
        text.push_str("{\"system\":\"gmail\",\"verb\":\"sned\"}\n");
    }
    std::fs::write(dir.path().join("past.jsonl"), text).unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    let said = stderr(&output);
    assert!(said.contains("25 bad line(s), nothing imported"), "{said}");
    for named in ["past.jsonl:2", "past.jsonl:3", "past.jsonl:21"] {
        assert!(said.contains(&format!("{named}:")), "{named}: {said}");
    }
    assert!(!said.contains("past.jsonl:22:"), "{said}");
    assert!(said.contains("… and 5 more"), "{said}");
    assert!(!ledger_file(dir.path()).exists());
}

/// Past 16 MiB of input an import reads the file a second time instead of holding
/// what its check parsed: all of it is still imported, and a bad line still
/// imports nothing.
#[test]
fn an_import_past_the_parse_once_bound_reads_the_file_again() {
    let dir = tempfile::tempdir().unwrap();
    // 20 lines of 900 KB (an unknown key, ignored): 18 MB in all.
    let pad = "x".repeat(900_000);
    let mut lines: String = (0..20)
        .map(|i| {
            format!(
                "{{\"system\":\"slack\",\"verb\":\"send\",\"target\":\"#ops\",\"note\":\"{pad}\",\"result\":{{\"ok\":true,\"ts\":\"{i}.1\"}}}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("big.jsonl"), &lines).unwrap();
    let output = attest(dir.path(), &["import", "big.jsonl", "--progress"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("imported 20 actions as seq 1 to 20"),
        "{}",
        stdout(&output)
    );
    // The second reading counts bytes; importing what the check kept counts actions.
    let bytes = lines.len();
    assert!(
        stderr(&output).contains(&format!("importing: {bytes}/{bytes} bytes")),
        "{}",
        stderr(&output)
    );

    let other = tempfile::tempdir().unwrap();
    lines.push_str("{\"system\":\"gmail\",\"verb\":\"sned\"}\n");
    std::fs::write(other.path().join("big.jsonl"), &lines).unwrap();
    let output = attest(other.path(), &["import", "big.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("big.jsonl:21"),
        "{}",
        stderr(&output)
    );
    assert!(!ledger_file(other.path()).exists());
}

#[test]
fn an_export_imported_elsewhere_keeps_each_actions_time_and_outcome() {
    let source = crate::demo_ledger();
    let export = stdout(&attest(source.path(), &["export"]));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("past.jsonl"), &export).unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let imported = stdout(&attest(dir.path(), &["export"]));
    let (before, after): (Vec<Value>, Vec<Value>) = (
        export
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        imported
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    );
    assert_eq!(before.len(), after.len());
    for (was, now) in before.iter().zip(&after) {
        for field in [
            "action_id",
            "decision",
            "confirm",
            "execution",
            "verification",
            "reasons",
            "params_hash",
            "params_preview",
            "system",
            "verb",
            "agent",
        ] {
            assert_eq!(was[field], now[field], "{field} of seq {}", was["seq"]);
        }
        assert_eq!(now["imported"]["ts"], was["ts"], "seq {}", was["seq"]);
    }
    // The rejected, never-run payment stays rejected and never run.
    let pay = after.iter().find(|e| e["verb"] == "pay").unwrap();
    assert_eq!(
        (
            &pay["decision"],
            &pay["execution"]["status"],
            &pay["confirm"]["outcome"]
        ),
        (
            &Value::from("ask"),
            &Value::from("not_run"),
            &Value::from("rejected")
        )
    );
    // Each intent came with its outcome: nothing is reported open.
    let ledger = stdout(&attest(dir.path(), &["ledger"]));
    assert!(!ledger.contains("warning"), "{ledger}");
}

#[test]
fn a_duplicate_action_id_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let line = |id: &str| format!("{{\"id\":\"{id}\",\"system\":\"gmail\",\"verb\":\"send\"}}\n");
    std::fs::write(
        dir.path().join("twice.jsonl"),
        line("a1") + &line("a2") + &line("a1"),
    )
    .unwrap();
    let output = attest(dir.path(), &["import", "twice.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("twice.jsonl:3: action id \"a1\" is also on line 1"),
        "{}",
        stderr(&output)
    );
    assert!(!ledger_file(dir.path()).exists());

    std::fs::write(dir.path().join("one.jsonl"), line("a1")).unwrap();
    assert_eq!(
        attest(dir.path(), &["import", "one.jsonl"]).status.code(),
        Some(0)
    );
    std::fs::write(dir.path().join("again.jsonl"), line("b1") + &line("a1")).unwrap();
    let output = attest(dir.path(), &["import", "again.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("again.jsonl:2: action id \"a1\" is already in the ledger (seq 1)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_endless_line_is_refused_without_reading_it_whole() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["import", "-"])
        .current_dir(dir.path())
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A line with no end: import must stop at its limit, not read until memory runs out.
    let writer = std::thread::spawn(move || {
        let chunk = [b'x'; 65536];
        let mut written = 0usize;
        while written < (1 << 30) && stdin.write_all(&chunk).is_ok() {
            written += chunk.len();
        }
        written
    });
    let output = child.wait_with_output().unwrap();
    let written = writer.join().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("-:1: line is longer than the limit"),
        "{}",
        stderr(&output)
    );
    assert!(
        written < 64 << 20,
        "import read {written} bytes of one line"
    );
}

#[test]
fn terminal_output_escapes_control_characters_from_ledger_fields() {
    let dir = tempfile::tempdir().unwrap();
    // An agent name that would retitle the terminal and clear it, a system with a
    // right-to-left override.
    std::fs::write(
        dir.path().join("past.jsonl"),
        "{\"system\":\"x\u{202e}yap\",\"verb\":\"send\",\"agent\":\"bot\\u001b]0;owned\\u0007\\u001b[2J\\r\"}\n",
    )
    .unwrap();
    assert_eq!(
        attest(dir.path(), &["import", "past.jsonl"]).status.code(),
        Some(0)
    );
    let text = stdout(&attest(dir.path(), &["ledger"]));
    for bad in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
        assert!(
            !text.contains(bad),
            "{bad:?} reached the terminal: {text:?}"
        );
    }
    assert!(text.contains("bot\\u{1b}]0;owned\\u{7}"), "{text}");
    assert!(text.contains("x\\u{202e}yap.send"), "{text}");
}

#[test]
fn a_misspelt_field_is_named_with_the_line_it_is_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("past.jsonl"),
        "{\"system\":\"gmail\",\"verb\":\"send\"}\n{\"sytem\":\"gmail\",\"verb\":\"send\"}\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("past.jsonl:2:"), "{err}");
    assert!(err.contains("missing field `system`"), "{err}");
    assert!(err.contains("unknown field `sytem`"), "{err}");
    // serde's own place is inside the one line it read: never "line 1" of the file.
    assert!(!err.contains("line 1"), "{err}");
    assert!(!ledger_file(dir.path()).exists());
}

#[test]
fn long_work_shows_progress_on_stderr_when_asked() {
    let dir = crate::demo_ledger();
    let d = dir.path();
    let copy = attest(
        d,
        &[
            "copy",
            "--from",
            ".attest/ledger.sqlite",
            "--to",
            "copy.sqlite",
            "--progress",
        ],
    );
    assert_eq!(copy.status.code(), Some(0), "{}", stderr(&copy));
    let err = stderr(&copy);
    for line in [
        "verifying the source: 6/6 rows",
        "copying: 6/6 rows",
        "verifying the copy: 6/6 rows",
    ] {
        assert!(err.contains(line), "{line:?} in {err}");
    }
    // Standard output stays the answer alone.
    assert!(
        stdout(&copy).starts_with("copied 6 entries"),
        "{}",
        stdout(&copy)
    );
    let verify = attest(d, &["verify", "--progress"]);
    assert!(
        stderr(&verify).contains("verifying: 6/6 rows"),
        "{}",
        stderr(&verify)
    );
    let export = stdout(&attest(d, &["export"]));
    std::fs::write(d.join("past.jsonl"), &export).unwrap();
    let import = attest(
        d,
        &[
            "--ledger",
            "other.sqlite",
            "import",
            "past.jsonl",
            "--progress",
        ],
    );
    assert_eq!(import.status.code(), Some(0), "{}", stderr(&import));
    // Checked by bytes read; an input this small is imported from what the check
    // parsed, counted in actions.
    let bytes = export.len();
    for line in [
        format!("checking: {bytes}/{bytes} bytes"),
        "importing: 6/6 actions".to_owned(),
    ] {
        assert!(
            stderr(&import).contains(&line),
            "{line:?} in {}",
            stderr(&import)
        );
    }
    // Without --progress and without a terminal: nothing but errors on stderr.
    let quiet = attest(d, &["verify"]);
    assert_eq!(stderr(&quiet), "");
}

#[test]
fn an_import_cannot_claim_how_its_agent_was_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let line = r#"{"system":"slack","verb":"send","agent":"billing-bot","agent_auth":"token","extra":{"agent_auth":"token"},"params":{}}"#;
    std::fs::write(dir.path().join("past.jsonl"), format!("{line}\n")).unwrap();
    let output = attest(dir.path(), &["import", "past.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let export = stdout(&attest(dir.path(), &["export"]));
    let row: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(row["agent"], "billing-bot");
    assert_eq!(row["agent_auth"], Value::Null, "{row}");
}

#[test]
fn one_imported_action_is_counted_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.jsonl"),
        "{\"id\":\"a1\",\"system\":\"gmail\",\"verb\":\"send\"}\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["import", "one.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(
        said.starts_with("imported 1 action as seq 1 to 1"),
        "{said}"
    );
    let output = attest(dir.path(), &["policy", "replay"]);
    let said = stdout(&output);
    assert!(
        said.starts_with("1 action replayed:"),
        "{}{said}",
        stderr(&output)
    );
}

//! Issue 52: erasure by crypto-shredding. Personal fields sealed under their subject's
//! key; `attest erase` destroys the key and records the erasure in one transaction; the
//! chain still verifies and every view reads the fields as `erased`. Each test runs on
//! SQLite, and on PostgreSQL under `ATTEST_TEST_STORE=postgres`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::{expect_ok, stderr, stdout};

/// Three subjects, two rows each; the subject is the `to` param.
const SUBJECTS: [(&str, &str); 3] = [
    ("ada@example.com", "Ada Lovelace"),
    ("bob@example.com", "Bob Marley"),
    ("cy@example.com", "Cy Twombly"),
];

fn attest(dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--ledger", "ledger.sqlite"];
    all.extend_from_slice(args);
    crate::attest(dir, &all)
}

/// A ledger with `personal:` configured and rows for the three subjects, written by
/// `attest import` (the core pipeline's recorded-action path), and a signed checkpoint.
fn three_subjects() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        "personal:\n  subject: [param:to]\n",
    )
    .unwrap();
    let mut lines = String::new();
    for round in 0..2 {
        for (address, name) in SUBJECTS {
            lines.push_str(&format!(
                "{{\"system\":\"gmail\",\"verb\":\"send\",\"target\":\"{address}\",\"agent\":\"bot\",\"run_id\":\"run-{round}\",\"params\":{{\"to\":\"{address}\",\"name\":\"{name}\",\"title\":\"invoice {round}\"}},\"result\":{{\"id\":\"m{round}\"}}}}\n"
            ));
        }
    }
    std::fs::write(dir.path().join("past.jsonl"), lines).unwrap();
    expect_ok(&attest(dir.path(), &["import", "past.jsonl"]));
    let vkey = expect_ok(&attest(
        dir.path(),
        &["keygen", "--name", "attest.test/erase"],
    ))
    .trim()
    .to_owned();
    expect_ok(&attest(dir.path(), &["checkpoint"]));
    (dir, vkey)
}

fn jsonl(dir: &Path) -> Vec<String> {
    let out = expect_ok(&attest(dir, &["export", "--format", "jsonl"]));
    out.lines().map(str::to_owned).collect()
}

fn export(dir: &Path, format: &str) -> String {
    expect_ok(&attest(dir, &["export", "--format", format]))
}

fn verifies(dir: &Path, vkey: &str) {
    let out = attest(dir, &["verify", "--json", "--vkey", vkey]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(out.status.code(), Some(0), "{report}");
}

/// The chain recomputed from the export by Python's standard library alone: each line's
/// SHA-256 is the next line's `prev`, seq counts from 1.
fn python_recomputes_the_chain(dir: &Path, export: &str) {
    std::fs::write(dir.join("export.jsonl"), export).unwrap();
    let script = r#"
import hashlib, json, sys
prev = "0" * 64
n = 0
for n, line in enumerate(open(sys.argv[1], "rb").read().split(b"\n")[:-1], 1):
    entry = json.loads(line)
    assert entry["seq"] == n, (n, entry["seq"])
    assert entry["prev"] == prev, ("seq", n)
    prev = hashlib.sha256(line).hexdigest()
print(n, prev)
"#;
    let out = Command::new(crate::python())
        .args(["-c", script, "export.jsonl"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = export.lines().count();
    assert!(
        stdout(&out).starts_with(&format!("{lines} ")),
        "{}",
        stdout(&out)
    );
}

/// Every derived format shows the others' fields and `erased` for Ada's, and nowhere
/// her address or name.
fn views_hide(dir: &Path, erased: bool) {
    for format in ["json", "csv", "ietf", "ocsf", "eu-ai-act"] {
        let text = export(dir, format);
        for (address, name) in SUBJECTS {
            // The hashed-bytes formats show sealed fields as ciphertext only.
            let hashed = format == "json";
            let gone = erased && address.starts_with("ada");
            let shown = !(hashed || gone);
            assert_eq!(text.contains(address), shown, "{format}: {address}");
            // Not every format shows the preview; none shows a sealed name.
            if !shown {
                assert!(!text.contains(name), "{format}: {name}");
            }
        }
        if format != "json" {
            assert_eq!(text.contains("erased"), erased, "{format}");
        }
    }
}

#[test]
fn erasing_one_subject_keeps_the_chain_and_hides_only_that_subject() {
    let (dir, vkey) = three_subjects();
    let dir = dir.path();
    let before = jsonl(dir);
    assert_eq!(before.len(), 6);
    // Sealed in the chain: no address or name in any hashed body, before any erasure.
    for line in &before {
        for (address, name) in SUBJECTS {
            assert!(!line.contains(address) && !line.contains(name), "{line}");
        }
        let entry: Value = serde_json::from_str(line).unwrap();
        assert_eq!(entry["target"], "sealed");
        assert_eq!(entry["params_preview"]["to"], "sealed");
        assert_eq!(
            entry["params_preview"]["title"]
                .as_str()
                .map(|t| t.starts_with("invoice")),
            Some(true)
        );
    }
    views_hide(dir, false);
    verifies(dir, &vkey);

    let out = attest(
        dir,
        &[
            "erase",
            "--subject",
            " ADA@example.com ",
            "--requested-by",
            "dpo ticket 7",
            "--json",
        ],
    );
    let erased: Value = serde_json::from_str(&expect_ok(&out)).unwrap();
    assert_eq!(
        (
            erased["erased"].clone(),
            erased["rows"].clone(),
            erased["seq"].clone()
        ),
        (Value::Bool(true), Value::from(2), Value::from(7))
    );
    assert!(!stdout(&out).contains("ada@") && !stderr(&out).contains("ada@"));

    // Nothing stored changed: the six rows are byte for byte what they were, and the
    // erasure row follows them.
    let after = jsonl(dir);
    assert_eq!(after.len(), 7);
    assert_eq!(after[..6], before[..]);
    let row: Value = serde_json::from_str(&after[6]).unwrap();
    assert_eq!(row["erasure"]["rows"], 2);
    assert_eq!(row["erasure"]["requested_by"], "dpo ticket 7");
    let ada: Value = serde_json::from_str(&before[0]).unwrap();
    assert_eq!(row["erasure"]["subject"], ada["sealed"]["subject"]);
    assert!(!after[6].contains("ada@"));
    verifies(dir, &vkey);
    python_recomputes_the_chain(dir, &(after.join("\n") + "\n"));
    views_hide(dir, true);

    // The bundle: the rows as hashed (ciphertext), checked offline, and no address.
    expect_ok(&attest(dir, &["checkpoint"]));
    expect_ok(&attest(
        dir,
        &["export", "--bundle", "b.tar", "--run", "run-0"],
    ));
    let bundle = std::fs::read(dir.join("b.tar")).unwrap();
    let text = String::from_utf8_lossy(&bundle);
    assert!(!text.contains("ada@example.com") && !text.contains("Ada Lovelace"));
    expect_ok(&attest(dir, &["verify-bundle", "b.tar", "--vkey", &vkey]));

    // Twice: nothing to erase, its own exit code, nothing written.
    let again = attest(
        dir,
        &[
            "erase",
            "--subject",
            "ada@example.com",
            "--requested-by",
            "dpo ticket 7",
        ],
    );
    assert_eq!(
        again.status.code(),
        Some(3),
        "{}{}",
        stdout(&again),
        stderr(&again)
    );
    assert!(
        stdout(&again).contains("nothing to erase"),
        "{}",
        stdout(&again)
    );
    assert_eq!(jsonl(dir), after);
}

#[tokio::test]
async fn the_dashboard_api_reads_erased_for_an_erased_subject() {
    let (dir, _vkey) = three_subjects();
    let dir = dir.path();
    expect_ok(&attest(
        dir,
        &[
            "erase",
            "--subject",
            "ada@example.com",
            "--requested-by",
            "dpo",
        ],
    ));
    let token = crate::approvals::add_approver(dir, "raj@acme.com", &["--ledger", "ledger.sqlite"]);
    let server = crate::approvals::serve(dir, &["--ledger", "ledger.sqlite"]);
    let get = |path: String| {
        let url = format!("{}{path}", server.url);
        let token = token.clone();
        async move {
            let origin = reqwest::Url::parse(&url)
                .unwrap()
                .origin()
                .ascii_serialization();
            let response = reqwest::Client::new()
                .get(url)
                .header("origin", origin)
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    for (seq, address) in [
        (1, None),
        (2, Some("bob@example.com")),
        (3, Some("cy@example.com")),
    ] {
        let (status, body) = get(format!("/api/review/rows/{seq}")).await;
        assert_eq!(status, 200, "{body}");
        let row: Value = serde_json::from_str(&body).unwrap();
        let entry = &row["entry"];
        match address {
            None => {
                assert_eq!(entry["target"], "erased", "{body}");
                assert_eq!(entry["params_preview"]["to"], "erased", "{body}");
                assert_eq!(entry["params_preview"]["name"], "erased", "{body}");
                assert!(
                    !body.contains("ada@") && !body.contains("Ada Lovelace"),
                    "{body}"
                );
            }
            Some(address) => {
                assert_eq!(entry["target"], address, "{body}");
                assert_eq!(entry["params_preview"]["to"], address, "{body}");
            }
        }
    }
    let (status, body) = get("/api/review/runs/run-0".to_owned()).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("ada@"), "{body}");
    assert!(body.contains("bob@example.com"), "{body}");
}

/// SIGKILL inside `erase`'s transaction (held open after the key's delete and the row's
/// insert): afterwards the key is still there and no erasure row was written; a full
/// `erase` then does both.
#[test]
fn a_sigkill_in_the_middle_of_erase_leaves_the_key_and_no_row() {
    let (dir, vkey) = three_subjects();
    let dir = dir.path();
    let before = jsonl(dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir,
            &[
                "--ledger",
                "ledger.sqlite",
                "erase",
                "--subject",
                "ada@example.com",
                "--requested-by",
                "dpo",
            ],
        ))
        .current_dir(dir)
        .env_clear()
        .env("ATTEST_ERASE_HOLD_MS", "60000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("holding the transaction open"), "{line:?}");
    // std's kill is SIGKILL on Unix: no handler, no rollback by the process itself.
    child.kill().unwrap();
    child.wait().unwrap();

    // Neither happened: the key opens Ada's fields, and the rows are as they were.
    assert_eq!(jsonl(dir), before);
    assert!(export(dir, "csv").contains("ada@example.com"));
    verifies(dir, &vkey);

    // Then an erase that finishes does both.
    let done = attest(
        dir,
        &[
            "erase",
            "--subject",
            "ada@example.com",
            "--requested-by",
            "dpo",
            "--json",
        ],
    );
    let done: Value = serde_json::from_str(&expect_ok(&done)).unwrap();
    assert_eq!(done["rows"], 2);
    let after = jsonl(dir);
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[..before.len()], before[..]);
    assert!(!export(dir, "csv").contains("ada@example.com"));
    verifies(dir, &vkey);
}

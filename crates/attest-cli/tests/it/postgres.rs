//! The CLI on a PostgreSQL ledger: the same commands, the same rows and proofs, tenants,
//! copies between stores, archives, and writers in several processes on two
//! connection strings.

use std::path::Path;
use std::process::Command;

use crate::{attest, expect_ok, pg_db, stderr, stdout};

fn at(dir: &Path, url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--ledger", url];
    all.extend_from_slice(args);
    attest(dir, &all)
}

#[test]
fn the_cli_runs_on_a_postgres_ledger_filters_counts_checkpoints_and_proves() {
    let Some(db) = pg_db("the_cli_runs_on_a_postgres_ledger") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A password in the URL never reaches the output.
    let url = db.url.replacen("postgres@", "postgres:hunter2@", 1);
    let demo = at(d, &url, &["demo"]);
    assert_eq!(demo.status.code(), Some(0), "{}", stderr(&demo));
    assert!(!stdout(&demo).contains("hunter2") && !stderr(&demo).contains("hunter2"));
    let listing = expect_ok(&at(d, &url, &["ledger"]));
    assert!(listing.contains("stripe.pay"), "{listing}");
    let asks: serde_json::Value = serde_json::from_str(&expect_ok(&at(
        d,
        &url,
        &["ledger", "--decision", "ask", "--json"],
    )))
    .unwrap();
    let asks = asks.as_array().unwrap();
    assert!(!asks.is_empty());
    assert!(asks.iter().all(|row| row["decision"] == "ask"));
    let counts: serde_json::Value =
        serde_json::from_str(&expect_ok(&at(d, &url, &["ledger", "--counts", "--json"]))).unwrap();
    assert_eq!(counts["total"], 6);
    assert_eq!(counts["by_decision"]["ask"], asks.len());
    // One action's rows by its id.
    let first = &asks[0];
    let export = expect_ok(&at(d, &url, &["export"]));
    let action = export
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["seq"] == first["seq"])
        .unwrap()["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let rows: serde_json::Value = serde_json::from_str(&expect_ok(&at(
        d,
        &url,
        &["ledger", "--action", &action, "--json"],
    )))
    .unwrap();
    assert!(rows
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["seq"] == first["seq"]));
    assert!(expect_ok(&at(d, &url, &["ledger", "--agent", "nobody"])).contains("no row matches"));

    expect_ok(&at(d, &url, &["keygen"]));
    let vkey = std::fs::read_to_string(d.join(".attest/signing.pub")).unwrap();
    let vkey = vkey.trim();
    expect_ok(&at(d, &url, &["checkpoint"]));
    let verified = expect_ok(&at(d, &url, &["verify", "--vkey", vkey]));
    assert!(verified.contains("intact: 6 entries"), "{verified}");
    let proof = expect_ok(&at(d, &url, &["prove", "3", "--json"]));
    std::fs::write(d.join("proof.json"), proof).unwrap();
    expect_ok(&attest(d, &["verify-proof", "proof.json", "--vkey", vkey]));

    // Copy to SQLite and back into another tenant: same bytes, same signed roots.
    let copied = expect_ok(&attest(
        d,
        &[
            "copy",
            "--from",
            &url,
            "--to",
            "copy.sqlite",
            "--vkey",
            vkey,
        ],
    ));
    assert!(copied.contains("copied 6 entries"), "{copied}");
    assert!(!copied.contains("hunter2"));
    expect_ok(&attest(
        d,
        &[
            "copy",
            "--from",
            "copy.sqlite",
            "--to",
            &url,
            "--to-tenant",
            "back",
            "--vkey",
            vkey,
        ],
    ));
    let a = expect_ok(&at(d, &url, &["export"]));
    let b = expect_ok(&attest(d, &["--ledger", "copy.sqlite", "export"]));
    let c = expect_ok(&at(d, &url, &["--tenant", "back", "export"]));
    assert_eq!(a, b);
    assert_eq!(a, c);
    // A copy never lands on rows.
    let again = attest(d, &["copy", "--from", "copy.sqlite", "--to", &url]);
    assert_ne!(again.status.code(), Some(0));
}

#[test]
fn tenants_are_separate_chains_with_their_own_keys_on_both_stores() {
    let db = pg_db("tenants_are_separate_chains_with_their_own_keys_on_both_stores");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut ledgers = vec!["ledger.sqlite".to_owned()];
    if let Some(db) = &db {
        ledgers.push(db.url.clone());
    }
    for ledger in &ledgers {
        for tenant in ["acme", "globex"] {
            expect_ok(&attest(
                d,
                &["--ledger", ledger, "--tenant", tenant, "demo"],
            ));
        }
        expect_ok(&attest(
            d,
            &["--ledger", ledger, "--tenant", "acme", "demo"],
        ));
        let acme: serde_json::Value = serde_json::from_str(&expect_ok(&attest(
            d,
            &[
                "--ledger", ledger, "--tenant", "acme", "ledger", "--counts", "--json",
            ],
        )))
        .unwrap();
        let globex: serde_json::Value = serde_json::from_str(&expect_ok(&attest(
            d,
            &[
                "--ledger", ledger, "--tenant", "globex", "ledger", "--counts", "--json",
            ],
        )))
        .unwrap();
        assert_eq!(acme["total"], 12);
        assert_eq!(globex["total"], 6);
        let key_dir = if ledger.ends_with(".sqlite") {
            d.to_path_buf()
        } else {
            d.join(".attest")
        };
        if !key_dir.join("signing.acme.key").exists() {
            std::fs::create_dir_all(&key_dir).unwrap();
            let out = expect_ok(&attest(
                d,
                &["--ledger", ledger, "--tenant", "acme", "keygen"],
            ));
            assert!(out.starts_with("attest-ledger/acme+"), "{out}");
        }
        expect_ok(&attest(
            d,
            &["--ledger", ledger, "--tenant", "acme", "checkpoint"],
        ));
        let vkey = std::fs::read_to_string(key_dir.join("signing.acme.pub")).unwrap();
        let out = expect_ok(&attest(
            d,
            &[
                "--ledger",
                ledger,
                "--tenant",
                "acme",
                "verify",
                "--vkey",
                vkey.trim(),
            ],
        ));
        assert!(out.contains("intact: 12 entries"), "{out}");
        // The other tenant has no checkpoint of that key.
        let other = attest(
            d,
            &[
                "--ledger",
                ledger,
                "--tenant",
                "globex",
                "verify",
                "--vkey",
                vkey.trim(),
            ],
        );
        assert_eq!(other.status.code(), Some(1), "{}", stdout(&other));
    }
    assert!(d.join("ledger.tenant-acme.sqlite").exists());
}

#[test]
fn prune_archive_is_verified_and_proved_from() {
    let db = pg_db("prune_archive_is_verified_and_proved_from");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut ledgers = vec!["ledger.sqlite".to_owned()];
    if let Some(db) = &db {
        ledgers.push(db.url.clone());
    }
    for (i, ledger) in ledgers.iter().enumerate() {
        expect_ok(&attest(d, &["--ledger", ledger, "demo"]));
        if i == 0 {
            expect_ok(&attest(
                d,
                &["--ledger", ledger, "keygen", "--out", "signing.key"],
            ));
        }
        let key = ["--key", "signing.key"];
        let vkey = std::fs::read_to_string(d.join("signing.pub")).unwrap();
        let archive = format!("archive-{i}.jsonl");
        // Everything older than "-1 days" (i.e. now) that a checkpoint covers.
        let mut args = vec![
            "--ledger",
            ledger,
            "prune",
            "--older-than-days",
            "0",
            "--yes",
            "--archive",
            &archive,
        ];
        args.extend_from_slice(&key);
        let out = expect_ok(&attest(d, &args));
        assert!(out.contains("removed 5 entries"), "{out}");
        let mode = std::fs::metadata(d.join(&archive)).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o077,
            0
        );
        let out = expect_ok(&attest(
            d,
            &[
                "--ledger",
                ledger,
                "verify",
                "--vkey",
                vkey.trim(),
                "--archive",
                &archive,
            ],
        ));
        assert!(out.contains("intact"), "{out}");
        let pruned = attest(d, &["--ledger", ledger, "prove", "2"]);
        assert_ne!(pruned.status.code(), Some(0));
        let proof = expect_ok(&attest(
            d,
            &[
                "--ledger",
                ledger,
                "prove",
                "2",
                "--archive",
                &archive,
                "--json",
            ],
        ));
        std::fs::write(d.join("p.json"), proof).unwrap();
        expect_ok(&attest(
            d,
            &["verify-proof", "p.json", "--vkey", vkey.trim()],
        ));
        // An edited archive fails verification.
        let text = std::fs::read_to_string(d.join(&archive)).unwrap();
        let edited = text.replacen("demo-agent", "demo-agenX", 1);
        std::fs::write(d.join("edited.jsonl"), edited).unwrap();
        let bad = attest(
            d,
            &[
                "--ledger",
                ledger,
                "verify",
                "--vkey",
                vkey.trim(),
                "--archive",
                "edited.jsonl",
            ],
        );
        assert_eq!(bad.status.code(), Some(1), "{}", stdout(&bad));
    }
}

/// Four `attest demo` processes on two connection strings, three runs each, at once:
/// one chain of 72 rows, verified.
#[test]
fn four_processes_on_two_connection_strings_write_one_chain() {
    let Some(db) = pg_db("four_processes_on_two_connection_strings_write_one_chain") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let urls = [db.url.clone(), db.other_url()];
    let children: Vec<_> = (0..4)
        .map(|p| {
            let url = urls[p % 2].clone();
            let d = dir.path().to_path_buf();
            std::thread::spawn(move || {
                for _ in 0..3 {
                    let out = Command::new(env!("CARGO_BIN_EXE_attest"))
                        .args(["--ledger", &url, "demo"])
                        .current_dir(&d)
                        .env_clear()
                        .output()
                        .unwrap();
                    assert_eq!(
                        out.status.code(),
                        Some(0),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for child in children {
        child.join().unwrap();
    }
    let out = expect_ok(&attest(dir.path(), &["--ledger", &db.url, "verify"]));
    assert!(out.contains("intact: 72 entries"), "{out}");
}

/// A URL that cannot connect fails at once with the cause, in the server's or the
/// system's words: not the pool's 30 s wait ending in "timed out … db error".
#[test]
fn a_postgres_url_that_cannot_connect_names_the_cause() {
    let Some(db) = pg_db("a_postgres_url_that_cannot_connect") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let closed = format!("postgres://postgres@127.0.0.1:{}/test", crate::free_port());
    let missing = format!("{}_missing", db.url);
    let stranger = db.url.replacen("postgres@", "no_such_role@", 1);
    for (url, cause) in [
        (closed.as_str(), "Connection refused"),
        (missing.as_str(), "does not exist (3D000)"),
        (
            stranger.as_str(),
            "role \"no_such_role\" does not exist (28000)",
        ),
    ] {
        for command in [&["ledger"][..], &["demo"][..]] {
            let out = at(dir.path(), url, command);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{url} {command:?}: {err}");
            assert!(err.contains(cause), "{url} {command:?}: {err}");
            assert!(!err.contains("timed out"), "{url} {command:?}: {err}");
        }
    }
}

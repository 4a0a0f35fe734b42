//! Nothing runs unrecorded: the gateway in front of a vendor on 127.0.0.1, with the
//! ledger on a small tmpfs that fills up, then on a read-only mount.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, serve_app, start_gateway};
use crate::{expect_ok, stderr};

/// A tmpfs mounted for one test, unmounted when it ends.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `300k`) at `dir/mnt`; `None` (and a skip notice,
    /// or a failure under `ATTEST_REQUIRE_PEERS`) when this machine does not allow it.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let point = dir.join("mnt");
        std::fs::create_dir(&point).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&point)
            .output();
        match status {
            Ok(output) if output.status.success() => Some(Tmpfs(point)),
            _ => {
                crate::peer_missing("cannot mount a tmpfs here (needs root; .ci/run runs as root)");
                None
            }
        }
    }

    fn remount(&self, mode: &str) {
        let output = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// Writes into `dir` until the file system is full.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(dir.join("filler")).unwrap();
    let block = [0u8; 4096];
    while file
        .write_all(&block)
        .and_then(|()| file.sync_all())
        .is_ok()
    {}
}

/// `attest` on the ledger in `dir` (a read-only or full mount), scrubbed environment.
fn attest_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["--ledger", "ledger.sqlite"])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .output()
        .unwrap()
}

const POLICY: &str = "version: 1\npolicies:\n  - name: sandbox\n    match: {verb: create}\n    decision: act\n    reason: the test vendor is a sandbox\n";

#[test]
fn a_full_disk_runs_nothing_unrecorded_and_a_read_only_ledger_still_verifies() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Room for the tables beside the chain (the grants table made it 300k too tight for
    // the WAL's checkpoint at the end, once the filler is gone).
    let Some(tmpfs) = Tmpfs::mount(dir.path(), "400k") else {
        return;
    };
    let mnt = tmpfs.0.clone();
    std::fs::write(mnt.join("policy.yaml"), POLICY).unwrap();
    // The vendor counts the writes that reach it; the first one fills the ledger's disk
    // while it runs, so its outcome row cannot be written.
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = {
        let (calls, mnt) = (Arc::clone(&calls), mnt.clone());
        serve_app(move || {
            Router::new().route(
                "/v1/notes",
                post(move || {
                    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                    if n == 1 {
                        fill(&mnt);
                    }
                    async move { (StatusCode::CREATED, Json(json!({"id": format!("n{n}")}))) }
                }),
            )
        })
    };
    let (gateway, address) = start_gateway(&mnt, &upstream, &[]);
    let url = format!("{address}/v1/notes");

    // It ran: the caller gets the vendor's answer, with a warning, not an error to retry.
    let (status, headers, body) = curl("POST", &url, Some(&json!({"title": "one"})), &[]);
    assert_eq!(status, 201, "{body}");
    assert!(
        headers
            .get("x-attest-warning")
            .is_some_and(|w| w.contains("do not retry")),
        "{headers:?}"
    );
    assert_eq!(headers["x-attest-seq"], "1", "the intent row stands for it");

    // The disk is full: no intent row can be written, so nothing reaches the vendor.
    for i in 0..20 {
        let (status, _, body) = curl("POST", &url, Some(&json!({"title": i})), &[]);
        assert_eq!(status, 507, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["upstream_called"], false);
        assert!(
            body["error"].as_str().unwrap().contains("was not run"),
            "{body}"
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "a write reached the vendor unrecorded"
    );

    // The ledger says what it knows: one intent, no outcome. Read on the full disk,
    // while the gateway still holds it open.
    let ledger = expect_ok(&attest_in(&mnt, &["ledger"]));
    assert!(
        ledger.contains("1 action(s) were recorded as about to run"),
        "{ledger}"
    );
    let verify = expect_ok(&attest_in(&mnt, &["verify", "--json"]));
    let report: Value = serde_json::from_str(&verify).unwrap();
    assert_eq!(report["open_intents"][0]["seq"], 1, "{report}");
    assert_eq!(
        report["open_intents"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    let intents_recorded = report["open_intents"].as_array().unwrap().len();
    assert!(calls.load(Ordering::SeqCst) <= intents_recorded);
    drop(gateway);

    // Read-only mount, WAL files left by a killed writer: verify and read still work.
    tmpfs.remount("ro");
    for args in [&["verify"][..], &["ledger"], &["export"]] {
        expect_ok(&attest_in(&mnt, args));
    }
    // Read-only mount after a clean close (no -wal, no -shm to open).
    tmpfs.remount("rw");
    std::fs::remove_file(mnt.join("filler")).unwrap();
    let conn = rusqlite::Connection::open(mnt.join("ledger.sqlite")).unwrap();
    // The last connection to close merges the WAL into the file and removes it.
    conn.query_row("SELECT COUNT(*) FROM entries", [], |row| {
        row.get::<_, i64>(0)
    })
    .unwrap();
    drop(conn);
    assert!(!mnt.join("ledger.sqlite-wal").exists());
    tmpfs.remount("ro");
    let verify = expect_ok(&attest_in(&mnt, &["verify"]));
    assert!(verify.contains("intact"), "{verify}");
    assert!(!mnt.join("ledger.sqlite-shm").exists());
}

#[test]
fn the_mcp_proxy_passes_on_a_ran_tools_answer_and_runs_nothing_it_cannot_record() {
    if !crate::mcp::python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(tmpfs) = Tmpfs::mount(dir.path(), "400k") else {
        return;
    };
    // The driver keeps its ledger at dir/ledger.sqlite: there, a link into the tmpfs.
    let ledger = tmpfs.0.join("ledger.sqlite");
    std::os::unix::fs::symlink(&ledger, dir.path().join("ledger.sqlite")).unwrap();
    let filler = tmpfs.0.join("filler");
    let plan = json!({"calls": [
        {"tool": "fill_disk", "args": {"path": filler}},
        {"tool": "create_note", "args": {"title": "plan", "body": "ship it"}},
    ]});
    let server = crate::mcp::py("notes_server.py");
    let python = crate::python();
    let report = crate::mcp::drive(
        dir.path(),
        &plan,
        &["--mode", "auto", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
    );
    let calls = report["calls"].as_array().unwrap();
    // It ran: its own answer, with the warning in _meta, not an error that invites a retry.
    assert_eq!(calls[0]["is_error"], false, "{}", calls[0]);
    let warning = calls[0]["meta"]["_attest"]["warning"]
        .as_str()
        .unwrap_or_default();
    assert!(warning.contains("Do not retry"), "{}", calls[0]);
    // The next write cannot be recorded first, so it never reaches the server.
    assert_eq!(calls[1]["is_error"], true, "{}", calls[1]);
    assert!(
        calls[1]["text"].as_str().unwrap().contains("was not run"),
        "{}",
        calls[1]
    );
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(!log.contains("create_note"), "{log}");
    std::fs::remove_file(&filler).unwrap();
    let verify = expect_ok(&attest_in(dir.path(), &["verify", "--json"]));
    let report: Value = serde_json::from_str(&verify).unwrap();
    assert_eq!(
        report["open_intents"].as_array().unwrap().len(),
        1,
        "{report}"
    );
}

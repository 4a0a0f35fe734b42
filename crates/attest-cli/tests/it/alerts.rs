//! Alerts and digests through the configured notifiers: a broken chain found by the
//! background verifier under `attest serve`, `attest digest --post`, and `attest serve
//! --digest-every`, each received as a signed webhook on 127.0.0.1.

use std::path::Path;
use std::time::{Duration, SystemTime};

use attest_core::approvals::{verify_webhook, Secret, WEBHOOK_TOLERANCE};
use axum::body::Bytes;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::approvals::{attest_env, serve_env};
use crate::digest::{history, office_day, write_ledger, UNTIL};
use crate::notify::receiver;
use crate::{expect_ok, ledger_file};

const SECRET: &str = "whsec-alerts-1";

/// A configuration that posts notices to `hook` (secret in `HOOK_SECRET`).
fn configure_webhook(dir: &Path, hook: &str) {
    std::fs::create_dir_all(dir.join(".attest")).unwrap();
    std::fs::write(
        dir.join(".attest/config.yaml"),
        format!("notify:\n  webhook: {{url: '{hook}', secret_env: HOOK_SECRET}}\n"),
    )
    .unwrap();
}

/// The next notice, its signature checked; `None` when nothing comes within `wait`.
async fn next_notice(
    hooks: &mut UnboundedReceiver<(String, String, Bytes)>,
    wait: Duration,
) -> Option<Value> {
    let (ts, signature, body) = tokio::time::timeout(wait, hooks.recv()).await.ok()??;
    verify_webhook(
        &Secret::new(SECRET),
        Some(&ts),
        Some(&signature),
        &body,
        SystemTime::now(),
        WEBHOOK_TOLERANCE,
    )
    .unwrap();
    Some(serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn a_broken_chain_under_serve_is_sent_once_as_a_signed_alert_and_healthz_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, mut hooks) = receiver().await;
    crate::review::known_ledger(dir.path());
    configure_webhook(dir.path(), &hook);
    let conn = rusqlite::Connection::open(ledger_file(dir.path())).unwrap();
    conn.execute(
        "UPDATE entries SET body = replace(body, 'hubspot', 'hubspoT') WHERE seq = 2",
        [],
    )
    .unwrap();
    drop(conn);
    let server = serve_env(
        dir.path(),
        &["--verify-interval", "200ms", "--full-verify-interval", "5s"],
        &[("HOOK_SECRET", SECRET)],
    );
    let alert = next_notice(&mut hooks, Duration::from_secs(20))
        .await
        .expect("no alert");
    assert_eq!(alert["type"], "alert.chain_broken", "{alert:#}");
    assert_eq!(alert["data"]["seq"], 2, "{alert:#}");
    assert!(
        alert["title"].as_str().unwrap().contains("seq 2"),
        "{alert:#}"
    );
    let health = reqwest::get(format!("{}/healthz", server.url))
        .await
        .unwrap();
    assert_eq!(health.status(), 503);
    let health: Value = health.json().await.unwrap();
    assert_eq!(health["chain"]["first_broken_seq"], 2, "{health}");
    // The next whole pass (5 s on) finds the same break and sends nothing new.
    assert_eq!(
        next_notice(&mut hooks, Duration::from_secs(6)).await,
        None,
        "a second alert for the same break"
    );
}

/// A ledger whose last day (before [`UNTIL`]) holds a volume spike.
fn spiky_ledger(dir: &Path) {
    let mut rows = history("spiky");
    rows.extend(office_day("spiky", 60));
    write_ledger(&ledger_file(dir), rows);
}

// Multi-threaded: the receiver answers while this thread waits for the binary.
#[tokio::test(flavor = "multi_thread")]
async fn digest_post_sends_the_digest_with_its_flags_through_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, mut hooks) = receiver().await;
    configure_webhook(dir.path(), &hook);
    spiky_ledger(dir.path());
    let printed = expect_ok(&attest_env(
        dir.path(),
        &["digest", "--post", "--json", "--until", UNTIL],
        &[("HOOK_SECRET", SECRET)],
    ));
    let printed: Value = serde_json::from_str(&printed).unwrap();
    let notice = next_notice(&mut hooks, Duration::from_secs(10))
        .await
        .expect("no digest");
    assert_eq!(notice["type"], "digest.ready", "{notice:#}");
    assert_eq!(notice["data"], printed);
    assert_eq!(notice["data"]["flag_count"], 1);
    assert_eq!(
        notice["data"]["agents"][0]["flags"][0]["kind"],
        "volume_spike"
    );
    assert!(
        notice["text"].as_str().unwrap().contains("volume_spike"),
        "{notice:#}"
    );
    // Without a notifier, --post is a usage error.
    std::fs::remove_file(dir.path().join(".attest/config.yaml")).unwrap();
    let out = attest_env(dir.path(), &["digest", "--post", "--until", UNTIL], &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn serve_sends_a_digest_on_its_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, mut hooks) = receiver().await;
    configure_webhook(dir.path(), &hook);
    spiky_ledger(dir.path());
    let _server = serve_env(
        dir.path(),
        &["--digest-every", "1s"],
        &[("HOOK_SECRET", SECRET)],
    );
    for _ in 0..2 {
        let notice = next_notice(&mut hooks, Duration::from_secs(10))
            .await
            .expect("no scheduled digest");
        assert_eq!(notice["type"], "digest.ready", "{notice:#}");
        // The last second, ending now: the ledger's rows are all older.
        assert_eq!(notice["data"]["actions"], 0, "{notice:#}");
        assert!(notice["data"]["window"]["until"].is_string());
    }
}

// Multi-threaded: the receiver answers while this thread waits for the binary.
#[tokio::test(flavor = "multi_thread")]
async fn monitor_sends_its_alert_through_the_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, mut hooks) = receiver().await;
    configure_webhook(dir.path(), &hook);
    let vkey = expect_ok(&attest_env(
        dir.path(),
        &["keygen", "--name", "attest.test/monitor"],
        &[],
    ));
    // A log directory that holds no checkpoint: the monitor cannot vouch for it.
    std::fs::create_dir(dir.path().join("log")).unwrap();
    let out = attest_env(
        dir.path(),
        &[
            "monitor",
            "--tiles",
            "log",
            "--state",
            "monitor.json",
            "--once",
            "--vkey",
            vkey.trim(),
        ],
        &[("HOOK_SECRET", SECRET)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", crate::stderr(&out));
    assert!(crate::stdout(&out).starts_with("ALERT: "));
    let alert = next_notice(&mut hooks, Duration::from_secs(10))
        .await
        .expect("no alert");
    assert_eq!(alert["type"], "alert.log_misbehaved", "{alert:#}");
    assert_eq!(alert["data"]["detail"], "the log has no checkpoint");
}

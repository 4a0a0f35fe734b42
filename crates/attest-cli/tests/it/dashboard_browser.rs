//! The dashboard in a real browser: headless Chromium signs in with an approver token
//! on a ledger of known content, and the page shows its counts, its lists and a run.
//! The screenshot is the one README shows (`docs/dashboard.png`); a copy also goes to
//! `target/test-artifacts/`.

use std::path::Path;

use serde_json::json;

use crate::approvals::{add_approver, serve};
use crate::inbox_browser::{artifacts, find_chromium, launch, Cdp};
use crate::review::known_ledger;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_counts_lists_and_a_run() {
    let Some(chromium) = find_chromium() else {
        crate::peer_missing("no Chromium (install Debian's `chromium`, or set ATTEST_CHROMIUM)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let known = known_ledger(dir.path());
    let token = add_approver(dir.path(), "ann@acme.com", &[]);
    let server = serve(dir.path(), &[]);

    let browser = launch(&chromium);
    let mut cdp = Cdp::connect(&browser.ws_url).await;
    let session = cdp.open_page(&format!("{}/dashboard", server.url)).await;
    cdp.call(
        Some(&session),
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": 1500, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    cdp.wait_for(
        &session,
        "(document.getElementById('login') || {hidden: true}).hidden === false",
        "the login form",
    )
    .await;
    cdp.eval(&session, "document.getElementById('token').focus()")
        .await;
    cdp.call(Some(&session), "Input.insertText", json!({"text": token}))
        .await;
    cdp.click(&session, "#login button").await;
    cdp.wait_for(
        &session,
        "document.body.dataset.generation === '11'",
        "the dashboard's first poll",
    )
    .await;

    // Counts, from the ledger's counters.
    let total =
        |key: &str| format!("document.querySelector('[data-total=\"{key}\"] b').textContent");
    assert_eq!(
        cdp.eval(&session, &total("entries")).await,
        json!(known.entries.to_string())
    );
    assert_eq!(
        cdp.eval(&session, &total("decision.refuse")).await,
        json!("1")
    );
    assert_eq!(cdp.eval(&session, &total("decision.act")).await, json!("8"));
    // The hourly chart's bars add up to the entries.
    let charted = cdp
        .eval(&session, "[...document.querySelectorAll('#chart-decision rect')].reduce((n, r) => n + Number(r.dataset.count), 0)")
        .await;
    assert_eq!(charted, json!(known.entries));
    let stripe = cdp
        .eval(
            &session,
            "document.querySelector('#chart-system rect[data-key=\"stripe\"]').dataset.count",
        )
        .await;
    assert_eq!(stripe, json!("2"));
    // Each list's tab shows its size; the intents list names the open delete.
    let tab = |list: &str| {
        format!("document.querySelector('#tabs button[data-list=\"{list}\"] b').textContent")
    };
    for (list, n) in [
        ("refused", known.refused),
        ("rejected", known.rejected),
        ("unverified", known.unverified),
        ("failed", known.failed),
        ("held", known.held),
        ("intents", known.intents),
    ] {
        assert_eq!(
            cdp.eval(&session, &tab(list)).await,
            json!(n.to_string()),
            "{list}"
        );
    }
    cdp.click(&session, "#tabs button[data-list=\"intents\"]")
        .await;
    cdp.wait_for(
        &session,
        "document.getElementById('list').dataset.list === 'intents'",
        "the intents list",
    )
    .await;
    let shown = cdp
        .eval(&session, "document.getElementById('list').innerText")
        .await;
    assert!(shown.as_str().unwrap().contains("github.delete"), "{shown}");
    // The run view: the run's three actions in order.
    cdp.click(&session, "#runs tr[data-run=\"run-7\"]").await;
    cdp.wait_for(
        &session,
        "document.getElementById('run').dataset.run === 'run-7'",
        "the run view",
    )
    .await;
    let seqs = cdp
        .eval(
            &session,
            "[...document.querySelectorAll('#run tr[data-seq]')].map(r => r.dataset.seq).join(',')",
        )
        .await;
    assert_eq!(seqs, json!("1,2,3"));
    let run = cdp
        .eval(&session, "document.getElementById('run').innerText")
        .await;
    let run = run.as_str().unwrap();
    assert!(
        run.contains("gmail.list") && run.contains("hubspot.update") && run.contains("gmail.send"),
        "{run}"
    );
    // A row's detail, with its inclusion proof.
    cdp.click(&session, "#run tr[data-seq=\"2\"]").await;
    cdp.wait_for(
        &session,
        "document.getElementById('detail').dataset.seq === '2'",
        "the row's detail",
    )
    .await;
    let proof = cdp
        .eval(&session, "document.getElementById('proof').textContent")
        .await;
    assert!(proof.as_str().unwrap().contains("tree of 11"), "{proof}");
    // The chain's status from the background verifier.
    cdp.wait_for(
        &session,
        "(document.getElementById('chain-state') || {}).textContent === 'intact'",
        "the chain status",
    )
    .await;

    cdp.call(
        Some(&session),
        "Runtime.evaluate",
        json!({"expression": "window.scrollTo(0, 0)"}),
    )
    .await;
    let shot = artifacts().join("dashboard.png");
    cdp.screenshot(&session, &shot).await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/dashboard.png");
    if std::env::var_os("ATTEST_UPDATE_SCREENSHOTS").is_some() {
        std::fs::create_dir_all(docs.parent().unwrap()).unwrap();
        std::fs::copy(&shot, &docs).unwrap();
    }
    let _ = cdp.call(None, "Browser.close", json!({})).await;
}

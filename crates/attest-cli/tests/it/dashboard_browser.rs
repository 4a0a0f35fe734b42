//! The dashboard in a real browser: headless Chromium signs in with an approver token
//! on a ledger of known content, and the page shows its counts of actions, the view by
//! agent, its lists with their reasons, a run on a timeline and an entry as a card, at
//! 1280 px without overflow. The screenshots are the ones README and docs show
//! (`docs/dashboard.png`, `docs/dashboard-runs.png`, written with
//! `ATTEST_UPDATE_SCREENSHOTS=1`); copies also go to `target/test-artifacts/`.

use std::path::Path;

use serde_json::json;

use crate::approvals::{add_approver, serve};
use crate::inbox_browser::{artifacts, find_chromium, launch, Cdp};
use crate::review::known_ledger;

/// The action ids the timeline marks, in order.
const TIMELINE: &str =
    "[...document.querySelectorAll('#run-timeline svg circle[data-action]')].map(c => c.dataset.action).join(',')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_actions_agents_reasons_a_run_timeline_and_an_entry_card() {
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
        json!({"width": 1280, "height": 1100, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    cdp.wait_for(
        &session,
        "(document.getElementById('login') || {hidden: true}).hidden === false",
        "the login form",
    )
    .await;
    let help = cdp
        .eval(&session, "document.getElementById('signin-help').checkVisibility() && document.getElementById('signin-help').textContent")
        .await;
    assert!(
        help.as_str().unwrap().contains("attest approvers add"),
        "{help}"
    );
    cdp.sign_in(&session, &token).await;
    cdp.wait_for(
        &session,
        "document.body.dataset.generation === '11'",
        "the dashboard's first poll",
    )
    .await;

    // Counts of actions (an intent and its outcome are one), not of ledger rows.
    let total =
        |key: &str| format!("document.querySelector('[data-total=\"{key}\"] b').textContent");
    let totals = [
        ("actions", known.actions),
        ("decision.act", 7),
        ("decision.ask", 2),
        ("decision.refuse", 1),
        ("in_progress", 2),
    ];
    assert_numbers(&mut cdp, &session, totals.map(|(key, n)| (total(key), n))).await;
    // The hourly chart's bars add up to the actions.
    let charted = cdp
        .eval(&session, "[...document.querySelectorAll('#chart-decision rect')].reduce((n, r) => n + Number(r.dataset.count), 0)")
        .await;
    assert_eq!(charted, json!(known.actions));
    let bar = |chart: &str, key: &str| {
        format!("(document.querySelector('#chart-{chart} rect[data-key=\"{key}\"]') || {{dataset: {{}}}}).dataset.count")
    };
    assert_eq!(
        cdp.eval(&session, &bar("system", "stripe")).await,
        json!("2")
    );
    // The open intent and the held ask are in progress, never a level of `none`.
    assert_eq!(
        cdp.eval(&session, &bar("level", "running")).await,
        json!("1")
    );
    assert_eq!(
        cdp.eval(&session, &bar("level", "awaiting decision")).await,
        json!("1")
    );
    assert_eq!(cdp.eval(&session, &bar("level", "none")).await, json!(null));
    assert_eq!(
        cdp.eval(&session, &bar("level", "not checked")).await,
        json!("3")
    );

    // By agent: each agent with its actions, refusals and asks.
    let agent = |name: &str| {
        format!(
            "[...document.querySelectorAll('#agents tr[data-agent=\"{name}\"] td')].slice(0, 5).map(td => td.textContent).join(',')"
        )
    };
    // agent, actions, allowed, asked, refused
    assert_eq!(
        cdp.eval(&session, &agent("sales-bot")).await,
        json!("sales-bot,6,5,1,0")
    );
    assert_eq!(
        cdp.eval(&session, &agent("billing-bot")).await,
        json!("billing-bot,2,0,1,1")
    );
    assert_eq!(
        cdp.eval(&session, &agent("ops-bot")).await,
        json!("ops-bot,2,2,0,0")
    );

    // An agent's actions on the timeline: the open intent and the one its outcome closed.
    cdp.click(&session, "#agents tr[data-agent=\"ops-bot\"]")
        .await;
    cdp.wait_for(
        &session,
        "document.getElementById('run').dataset.agent === 'ops-bot'",
        "the agent's timeline",
    )
    .await;
    assert_eq!(cdp.eval(&session, TIMELINE).await, json!("a9,a10"));
    let title = cdp
        .eval(&session, "document.getElementById('run-title').textContent")
        .await;
    assert_eq!(title, json!("Agent ops-bot, newest: 2 actions"));

    // Each list's tab shows its size.
    let tab = |list: &str| {
        format!("document.querySelector('#tabs button[data-list=\"{list}\"] b').textContent")
    };
    let lists = [
        ("refused", known.refused),
        ("asked", 1),
        ("rejected", known.rejected),
        ("unverified", known.unverified),
        ("failed", known.failed),
        ("held", known.held),
        ("intents", known.intents),
    ];
    assert_numbers(&mut cdp, &session, lists.map(|(list, n)| (tab(list), n))).await;
    // The refusal is listed with its reason, at a relative time with the local time on hover.
    let refused = cdp
        .eval(&session, "document.getElementById('list').innerText")
        .await;
    assert!(
        refused
            .as_str()
            .unwrap()
            .contains("payments need a person's approval over $500"),
        "{refused}"
    );
    let time = cdp
        .eval(
            &session,
            "(() => { const t = document.querySelector('#list time'); \
             return [t.textContent, t.title === new Date(t.getAttribute('datetime')).toLocaleString(), /\\.\\d{6}/.test(t.textContent + t.title)]; })()",
        )
        .await;
    assert_eq!(time, json!(["just now", true, false]));
    assert_eq!(
        cdp.eval(
            &session,
            "ago(new Date(Date.now() - 180000).toISOString()) + '|' + ago(new Date(Date.now() - 3 * 3600000).toISOString())"
        )
        .await,
        json!("3 min ago|3 h ago")
    );
    // The asks list names why a person was asked, and who answered.
    show_list(&mut cdp, &session, "asked").await;
    let asked = cdp
        .eval(&session, "document.getElementById('list').innerText")
        .await;
    let asked = asked.as_str().unwrap();
    assert!(
        asked.contains("refunds need finance") && asked.contains("rejected by ann@acme.com"),
        "{asked}"
    );
    show_list(&mut cdp, &session, "intents").await;
    let shown = cdp
        .eval(&session, "document.getElementById('list').innerText")
        .await;
    assert!(shown.as_str().unwrap().contains("github.delete"), "{shown}");

    // The run view: the run's three actions in order, one timeline mark each.
    cdp.click(&session, "#runs tr[data-run=\"run-7\"]").await;
    cdp.wait_for(
        &session,
        "document.getElementById('run').dataset.run === 'run-7'",
        "the run view",
    )
    .await;
    let runs_row = cdp
        .eval(
            &session,
            "[...document.querySelectorAll('#runs tr[data-run=\"run-7\"] td')].slice(0, 3).map(td => td.textContent).join(',')",
        )
        .await;
    assert_eq!(runs_row, json!("run-7,sales-bot,3"));
    let seqs = cdp
        .eval(
            &session,
            "[...document.querySelectorAll('#run tr[data-seq]')].map(r => r.dataset.seq).join(',')",
        )
        .await;
    assert_eq!(seqs, json!("1,2,3"));
    assert_eq!(cdp.eval(&session, TIMELINE).await, json!("a1,a2,a3"));
    let run = cdp
        .eval(&session, "document.getElementById('run').innerText")
        .await;
    let run = run.as_str().unwrap();
    assert!(
        run.contains("gmail.list") && run.contains("hubspot.update") && run.contains("gmail.send"),
        "{run}"
    );
    // A row's entry: a card in words, the raw body and the proof one click away.
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
    let field = |name: &str| {
        format!("document.querySelector('#entry-fields dd[data-field=\"{name}\"]').textContent")
    };
    assert_eq!(
        cdp.eval(&session, &field("what")).await,
        json!("sales-bot update on hubspot → internal-target")
    );
    assert_eq!(
        cdp.eval(&session, &field("outcome")).await,
        json!("ran and succeeded")
    );
    let raw_shown = "document.getElementById('raw-entry').checkVisibility()";
    assert_eq!(cdp.eval(&session, raw_shown).await, json!(false));
    cdp.click(&session, "#raw summary").await;
    cdp.wait_for(&session, raw_shown, "the raw entry").await;
    let raw = cdp
        .eval(&session, "document.getElementById('raw-entry').textContent + document.getElementById('raw-proof').textContent")
        .await;
    let raw = raw.as_str().unwrap();
    assert!(
        raw.contains("\"action_id\": \"a2\"") && raw.contains("\"tree_size\": 11"),
        "{raw}"
    );
    // A refusal's card says why, in words.
    show_list(&mut cdp, &session, "refused").await;
    cdp.click(&session, "#list tr[data-seq=\"4\"]").await;
    cdp.wait_for(
        &session,
        "document.getElementById('detail').dataset.seq === '4'",
        "the refusal's card",
    )
    .await;
    let why = cdp.eval(&session, &field("why")).await;
    assert_eq!(why, json!("payments need a person's approval over $500"));
    assert!(cdp
        .eval(&session, &field("decision"))
        .await
        .as_str()
        .unwrap()
        .starts_with("refused by policy"));

    // At 1280 px nothing overflows its card.
    let overflowing = cdp
        .eval(
            &session,
            "[...document.querySelectorAll('.card')].filter(c => c.scrollWidth > c.clientWidth).map(c => c.id || c.querySelector('h2').textContent)",
        )
        .await;
    assert_eq!(overflowing, json!([]));
    assert_eq!(
        cdp.eval(
            &session,
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        .await,
        json!(true)
    );

    // The chain's status from the background verifier.
    cdp.wait_for(
        &session,
        "(document.getElementById('chain-state') || {}).textContent === 'intact'",
        "the chain status",
    )
    .await;

    // The screenshots README and docs show: the top of the page, and runs with an entry.
    cdp.eval(&session, "window.scrollTo(0, 0)").await;
    shoot(&mut cdp, &session, "dashboard.png").await;
    cdp.eval(
        &session,
        "document.getElementById('raw').open = false; document.getElementById('runs-card').scrollIntoView()",
    )
    .await;
    shoot(&mut cdp, &session, "dashboard-runs.png").await;
    let _ = cdp.call(None, "Browser.close", json!({})).await;
}

/// Asserts that each expression shows its number.
async fn assert_numbers<const N: usize>(cdp: &mut Cdp, session: &str, shown: [(String, u64); N]) {
    for (expression, n) in shown {
        assert_eq!(
            cdp.eval(session, &expression).await,
            json!(n.to_string()),
            "{expression}"
        );
    }
}

/// Clicks list `name`'s tab and waits for the list to show.
async fn show_list(cdp: &mut Cdp, session: &str, name: &str) {
    cdp.click(session, &format!("#tabs button[data-list=\"{name}\"]"))
        .await;
    let shown = format!("document.getElementById('list').dataset.list === '{name}'");
    cdp.wait_for(session, &shown, &format!("the {name} list"))
        .await;
}

/// Saves a screenshot of the page as it shows to `target/test-artifacts/NAME`, and with
/// `ATTEST_UPDATE_SCREENSHOTS` set, to `docs/NAME` too.
pub(crate) async fn shoot(cdp: &mut Cdp, session: &str, name: &str) {
    let shot = artifacts().join(name);
    cdp.screenshot(session, &shot).await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "{name}");
    if std::env::var_os("ATTEST_UPDATE_SCREENSHOTS").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs")
            .join(name);
        std::fs::copy(&shot, &docs).unwrap();
    }
}

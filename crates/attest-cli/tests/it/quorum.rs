//! Quorums, reminders, escalation and expiry through the binary: a payment under a
//! 2-of-finance rule decided in `attest serve`'s inbox with a Teams channel told (a local
//! receiver checks the card's documented shape), and a request that nobody answers
//! reminded, escalated and expired once each on a controlled clock with two servers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use attest_core::approvals::TEST_CLOCK_VAR;
use attest_core::{ApprovalStore, Attest, Outcome, ResumeToken, StoreGate, ToolError};
use attest_ledger::{Clock, Ledger, LedgerOptions};
use attest_policy::{Action, PolicyEngine, Verb};
use axum::body::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::approvals::{add_approver, serve_env};
use crate::{attest, ledger_file, stderr, stdout};

const LINK_KEY: &str = "link-key-for-quorum-tests";

/// Payments need two of finance; unanswered ones remind after an hour, escalate to the
/// CFO after two and expire after three.
const POLICY: &str = "version: 1
groups:
  finance: [ann@acme.com, raj@acme.com, bob@acme.com]
policies:
  - name: payments
    match: {verb: pay}
    decision: ask
    approvers: {from: [finance], count: 2}
    remind_after: 1h
    escalate_after: 2h
    escalate_to: [cfo@acme.com]
    expire_after: 3h
    reason: payments need two of finance
";

/// The time in the clock file (Unix milliseconds), as the servers read it.
struct FileClock(PathBuf);

impl Clock for FileClock {
    fn now(&self) -> SystemTime {
        let ms: u64 = std::fs::read_to_string(&self.0)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        UNIX_EPOCH + Duration::from_millis(ms)
    }
}

fn set_clock(path: &Path, at: SystemTime) {
    let ms = at.duration_since(UNIX_EPOCH).unwrap().as_millis();
    std::fs::write(path, ms.to_string()).unwrap();
}

/// The agent's pipeline in this process, on `dir`'s ledger, its store on `clock`.
fn agent(dir: &Path, clock: Arc<dyn Clock>) -> Attest {
    std::fs::write(dir.join("attest.yaml"), POLICY).unwrap();
    let ledger = Arc::new(Ledger::open(ledger_file(dir), LedgerOptions::default()).unwrap());
    let store = Arc::new(ApprovalStore::open_with_clock(&ledger, clock).unwrap());
    Attest::builder()
        .ledger(ledger)
        .policy(PolicyEngine::from_yaml(POLICY, "attest.yaml").unwrap())
        .gate(StoreGate::new(Arc::clone(&store)))
        .approvals(store)
        .agent("billing-bot")
        .build()
        .unwrap()
}

/// A payment Ann asks for (she is in finance herself).
fn payment() -> Action {
    Action::new("stripe", Verb::Pay)
        .with_target("acct_42")
        .with_actor("ann@acme.com")
        .with_params(json!({"amount": 25000, "currency": "usd"}))
}

async fn pend(attest: &Attest) -> (String, ResumeToken) {
    match attest
        .call(payment())
        .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) })
        .await
    {
        Ok(Outcome::Held { id, token, .. }) => (id, token),
        other => panic!("expected pending, got {other:?}"),
    }
}

/// A Teams incoming-webhook stand-in on 127.0.0.1: each POST's JSON body is checked
/// against the message shape Teams documents and sent down the channel. It answers as
/// an incoming webhook does (200, `1`).
async fn teams_receiver() -> (String, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/webhookb2/hook",
        axum::routing::post(move |body: Bytes| {
            let tx = tx.clone();
            async move {
                let Ok(card) = serde_json::from_slice::<Value>(&body) else {
                    return (axum::http::StatusCode::BAD_REQUEST, "not JSON");
                };
                if let Err(why) = teams_shape(&card) {
                    let _ = tx.send(json!({"bad_shape": why, "card": card}));
                    return (axum::http::StatusCode::BAD_REQUEST, "bad card");
                }
                let _ = tx.send(card);
                (axum::http::StatusCode::OK, "1")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/webhookb2/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

/// The webhook message Teams documents: `type: message` with one Adaptive Card
/// attachment, whose body elements and actions have types (webhook cards may only open
/// URLs).
fn teams_shape(card: &Value) -> Result<(), String> {
    if card["type"] != "message" {
        return Err("type is not message".into());
    }
    let attachments = card["attachments"].as_array().ok_or("no attachments")?;
    let [attachment] = attachments.as_slice() else {
        return Err("not exactly one attachment".into());
    };
    if attachment["contentType"] != "application/vnd.microsoft.card.adaptive" {
        return Err("contentType is not an Adaptive Card".into());
    }
    let content = &attachment["content"];
    if content["type"] != "AdaptiveCard" || !content["version"].is_string() {
        return Err("content is not an AdaptiveCard with a version".into());
    }
    let body = content["body"].as_array().ok_or("no body")?;
    if body.is_empty() || body.iter().any(|e| !e["type"].is_string()) {
        return Err("an empty body or an element without a type".into());
    }
    for action in content["actions"].as_array().ok_or("no actions")? {
        let url = action["url"].as_str().unwrap_or_default();
        if action["type"] != "Action.OpenUrl"
            || !url.starts_with("http")
            || !action["title"].is_string()
        {
            return Err(format!(
                "an action that is not Action.OpenUrl with a title and URL: {action}"
            ));
        }
    }
    Ok(())
}

/// Everything the card says, as one string.
fn card_text(card: &Value) -> String {
    card["attachments"][0]["content"].to_string()
}

/// The next card, waiting up to 30 s.
async fn next_card(rx: &mut mpsc::UnboundedReceiver<Value>) -> Value {
    let card = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("a Teams card within 30 s")
        .unwrap();
    assert!(card.get("bad_shape").is_none(), "{card}");
    card
}

/// An inbox API call as its own page makes it.
async fn api(
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let parsed = reqwest::Url::parse(&url).unwrap();
    let origin = parsed.origin().ascii_serialization();
    let mut request = reqwest::Client::new()
        .request(method, parsed)
        .header("origin", origin)
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The rows of `dir`'s ledger that record how an action ended (all but intents), from
/// `attest export`.
fn outcomes(dir: &Path) -> Vec<Value> {
    let output = attest(dir, &["export"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|row| row["execution"]["status"] != "intent")
        .collect()
}

fn write_config(dir: &Path, teams_url: &str, by: &str) {
    std::fs::create_dir_all(dir.join(".attest")).unwrap();
    std::fs::write(dir.join("teams.url"), teams_url).unwrap();
    std::fs::write(
        dir.join(".attest/config.yaml"),
        format!("notify:\n  by: {by}\n  teams: {{url_file: teams.url}}\n"),
    )
    .unwrap();
}

/// A payment waiting for two of finance, with `attest serve` telling a Teams channel:
/// the agent's pipeline, the channel's cards, the approvers' tokens, the request.
struct Waiting {
    pipeline: Attest,
    cards: mpsc::UnboundedReceiver<Value>,
    ann: String,
    raj: String,
    bob: String,
    id: String,
    token: ResumeToken,
    server: crate::approvals::Server,
}

async fn waiting_payment(dir: &Path) -> Waiting {
    let pipeline = agent(dir, Arc::new(attest_ledger::SystemClock));
    let (teams_url, cards) = teams_receiver().await;
    write_config(dir, &teams_url, "inbox");
    let ann = add_approver(dir, "ann@acme.com", &[]);
    let raj = add_approver(dir, "raj@acme.com", &[]);
    let bob = add_approver(dir, "bob@acme.com", &[]);
    let (id, token) = pend(&pipeline).await;
    let server = serve_env(dir, &[], &[("ATTEST_LINK_KEY", LINK_KEY)]);
    Waiting {
        pipeline,
        cards,
        ann,
        raj,
        bob,
        id,
        token,
        server,
    }
}

/// Makes the held payment's call (resuming `token`), counting in `ran` each time its tool
/// really runs.
async fn pay(
    attest: &Attest,
    token: &ResumeToken,
    ran: &Arc<std::sync::atomic::AtomicUsize>,
) -> Result<Outcome<Value, ToolError>, attest_core::AttestError> {
    let ran = Arc::clone(ran);
    attest
        .call(token)
        .run(move |_| async move {
            ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ToolError>(json!({"id": "py_1"}))
        })
        .await
}

#[tokio::test]
async fn a_two_of_finance_payment_needs_two_others_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let Waiting {
        pipeline,
        mut cards,
        ann,
        raj,
        bob,
        id,
        token,
        server,
    } = waiting_payment(dir.path()).await;
    // The inbox posts the waiting request: its progress, and (a quorum) the request's page
    // where each approver signs in, never the approvers' decision links.
    let first = card_text(&next_card(&mut cards).await);
    assert!(
        first.contains("0 of 2 approvals, waiting for finance"),
        "{first}"
    );
    assert!(
        first.contains("Sign in to decide") && first.contains(&format!("?request={id}")),
        "{first}"
    );
    assert!(
        !first.contains("/links/"),
        "a decision link in a channel: {first}"
    );
    let decision = |who: &str, choice: &str| {
        let (url, who) = (
            format!("{}/api/requests/{id}/decision", server.url),
            who.to_owned(),
        );
        let body = json!({"decision": choice, "note": "checked"});
        async move { api(reqwest::Method::POST, url, &who, Some(body)).await }
    };
    // The actor's own approval does not count.
    let (status, body) = decision(&ann, "approve").await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("asked for it"),
        "{body}"
    );
    // One finance approval: still held, and the API, the card and `pending` say so.
    let (status, body) = decision(&raj, "approve").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["request"]["status"], "pending");
    assert_eq!(body["request"]["approvals"]["have"], 1);
    let (status, shown) = api(
        reqwest::Method::GET,
        format!("{}/api/requests/{id}", server.url),
        &bob,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(shown["approvals"]["have"], 1);
    assert_eq!(shown["approvals"]["need"], 2);
    assert_eq!(
        shown["approvals"]["text"],
        "1 of 2 approvals, waiting for finance"
    );
    let progress = card_text(&next_card(&mut cards).await);
    assert!(
        progress.contains("1 of 2 approvals, waiting for finance"),
        "{progress}"
    );
    let out = attest(dir.path(), &["pending", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["approvals"]["have"], 1);
    assert_eq!(list[0]["approvals"]["need"], 2);
    assert!(stdout(&attest(dir.path(), &["pending"])).contains("1 of 2 approvals"));
    match pipeline
        .call(&token)
        .run(|_| async { Ok::<_, ToolError>(json!({})) })
        .await
    {
        Ok(Outcome::Held { .. }) => {}
        other => panic!("one approval leaves it held, got {other:?}"),
    }
    // Raj again counts once.
    assert_eq!(decision(&raj, "approve").await.0, 409);
    // A second member of finance: approved; the decided card names both.
    let (status, body) = decision(&bob, "approve").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["request"]["status"], "approved");
    let decided = card_text(&next_card(&mut cards).await);
    assert!(
        decided.contains("approved") && decided.contains("raj@acme.com, bob@acme.com"),
        "{decided}"
    );
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..2 {
        let _ = pay(&pipeline, &token, &ran).await;
    }
    assert_eq!(
        ran.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "runs once"
    );
    let rows = outcomes(dir.path());
    let outcome = rows.last().unwrap();
    assert_eq!(
        outcome["confirm"]["approvers"],
        json!(["raj@acme.com", "bob@acme.com"])
    );
    assert_eq!(outcome["execution"]["status"], "ok");

    // A rejection ends the next one at once.
    let (second, token) = pend(&pipeline).await;
    let out = crate::approvals::attest_env(
        dir.path(),
        &["confirm", &second, "reject", "--note", "wrong account"],
        &[("ATTEST_APPROVER_TOKEN", &bob)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("rejected"), "{}", stdout(&out));
    // `attest confirm` tells the Teams channel as the inbox does: the decided card (the
    // waiting one may come first, posted by the server).
    let rejected = loop {
        let text = card_text(&next_card(&mut cards).await);
        if text.contains(&second) && text.contains("rejected") {
            break text;
        }
    };
    assert!(rejected.contains("bob@acme.com"), "{rejected}");
    assert!(matches!(
        pipeline
            .call(&token)
            .run(|_| async { Ok::<_, ToolError>(json!({})) })
            .await,
        Ok(Outcome::Rejected { .. })
    ));
    assert!(!stdout(&attest(dir.path(), &["pending"])).contains(&second));
}

#[tokio::test]
async fn reminder_escalation_and_expiry_fire_once_each_with_two_servers() {
    let dir = tempfile::tempdir().unwrap();
    let clock_file = dir.path().join("clock");
    let start = SystemTime::now();
    set_clock(&clock_file, start);
    let pipeline = agent(dir.path(), Arc::new(FileClock(clock_file.clone())));
    let (teams_url, mut cards) = teams_receiver().await;
    write_config(dir.path(), &teams_url, "surfaces");
    for who in ["raj@acme.com", "bob@acme.com", "cfo@acme.com"] {
        add_approver(dir.path(), who, &[]);
    }
    let (id, token) = pend(&pipeline).await;
    let clock_path = clock_file.display().to_string();
    let env = [
        (TEST_CLOCK_VAR, clock_path.as_str()),
        ("ATTEST_LINK_KEY", LINK_KEY),
    ];
    let _one = serve_env(dir.path(), &[], &env);
    let _two = serve_env(dir.path(), &[], &env);
    let hour = Duration::from_secs(3600);
    // An hour on: a reminder.
    set_clock(&clock_file, start + hour + Duration::from_secs(1));
    let reminder = card_text(&next_card(&mut cards).await);
    assert!(
        reminder.contains("Reminder: approval still needed"),
        "{reminder}"
    );
    assert!(reminder.contains(&id), "{reminder}");
    assert!(!reminder.contains("cfo@acme.com"), "{reminder}");
    // Two hours on: the escalation, with the request's page (a quorum: no decision links).
    set_clock(&clock_file, start + 2 * hour + Duration::from_secs(1));
    let escalation = card_text(&next_card(&mut cards).await);
    assert!(
        escalation.contains("Escalated: approval needed"),
        "{escalation}"
    );
    assert!(
        escalation.contains("Sign in to decide") && !escalation.contains("/links/"),
        "{escalation}"
    );
    // Three hours on: expired, and recorded once.
    set_clock(&clock_file, start + 3 * hour + Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(30);
    let expired = |dir: &Path| {
        outcomes(dir)
            .iter()
            .filter(|row| row["confirm"]["outcome"] == "expired")
            .count()
    };
    while expired(dir.path()) == 0 {
        assert!(Instant::now() < deadline, "the servers never expired {id}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Both servers look again several times: nothing fires twice.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(expired(dir.path()), 1);
    assert!(cards.try_recv().is_err(), "a step fired twice");
    // The agent is told.
    assert!(matches!(
        pipeline
            .call(&token)
            .run(|_| async { Ok::<_, ToolError>(json!({})) })
            .await,
        Ok(Outcome::Expired { .. })
    ));
}

/// A POST to a one-click link, as its page's button sends it, with `bearer` when given.
async fn open_link(link: &str, bearer: Option<&str>) -> (u16, String) {
    let parsed = reqwest::Url::parse(link).unwrap();
    let mut request = reqwest::Client::new()
        .post(parsed.clone())
        .header("origin", parsed.origin().ascii_serialization());
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Issue 50: one reader of a notice that held every approver's signed link (as webhook
/// bodies and cards did) met a 2-of-finance quorum alone. Under a quorum a link counts
/// only with its own approver signed in: opened alone, or by another approver, it
/// decides nothing, and the payment stays held.
#[tokio::test]
async fn a_quorum_met_by_one_reader_of_the_notice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Waiting {
        pipeline,
        mut cards,
        raj,
        bob,
        id,
        token,
        server,
        ..
    } = waiting_payment(dir.path()).await;
    let card = card_text(&next_card(&mut cards).await);
    assert!(
        !card.contains("/links/"),
        "a decision link in a channel: {card}"
    );
    // The reader holds both approvers' links, signed with the inbox's own key.
    let signer = attest_core::approvals::LinkSigner::new(
        attest_core::approvals::Secret::new(LINK_KEY),
        server.url.clone(),
        Duration::from_secs(600),
    );
    let link = |who: &str| {
        signer
            .link(
                &id,
                attest_core::approvals::Choice::Approve,
                who,
                SystemTime::now(),
            )
            .unwrap()
    };
    let (raj_link, bob_link) = (link("raj@acme.com"), link("bob@acme.com"));
    for link in [&raj_link, &bob_link] {
        let (status, page) = open_link(link, None).await;
        assert_eq!(status, 401, "a link alone counted: {page}");
        assert!(page.contains("signed in"), "{page}");
    }
    // Signed in as Bob, Raj's link is still not Bob's to use.
    let (status, page) = open_link(&raj_link, Some(&bob)).await;
    assert_eq!(status, 403, "{page}");
    let (status, shown) = api(
        reqwest::Method::GET,
        format!("{}/api/requests/{id}", server.url),
        &bob,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(shown["approvals"]["have"], 0, "{shown}");
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let run = || pay(&pipeline, &token, &ran);
    assert!(
        matches!(run().await, Ok(Outcome::Held { .. })),
        "the payment must stay held"
    );
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Each approver, signed in, with their own link: two of finance, and it runs once.
    assert_eq!(open_link(&raj_link, Some(&raj)).await.0, 200);
    let (status, page) = open_link(&bob_link, Some(&bob)).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("approved"), "{page}");
    assert!(matches!(run().await, Ok(Outcome::Ran { .. })));
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    let rows = outcomes(dir.path());
    assert_eq!(
        rows.last().unwrap()["confirm"]["approvers"],
        json!(["raj@acme.com", "bob@acme.com"])
    );
}

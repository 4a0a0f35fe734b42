//! Budgets and rates (a rule's `limit:`), through real processes: several `attest
//! gateway` processes on one ledger (8 on a SQLite file; 2 "hosts" on one PostgreSQL
//! database) push payments at a fake vendor, all at once. What ran never passes the
//! cap, the first call that would cross it is held with the figures in its reason, a
//! person's approval runs it once (over the cap), and `attest policy explain` shows
//! the figure. A count limit behaves the same; in shadow mode a crossing call runs and
//! says it would have asked. Bad limits are named by `attest policy check`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::gateway::{
    add_ann_on, confirm_as_ann_on, curl, curl_missing, serve_app, start_gateway_on,
};
use crate::hook::{hook_answer, run_hook};
use crate::{attest, expect_ok, exported_entries, stderr, stdout};

/// What reached the fake payment vendor: each charge's amount.
type Charges = Arc<Mutex<Vec<f64>>>;

async fn charge(
    State(charges): State<Charges>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut charges = charges.lock().unwrap();
    charges.push(body["amount"].as_f64().unwrap_or(f64::NAN));
    let id = format!("ch_{}", charges.len());
    (StatusCode::CREATED, Json(json!({"id": id, "ok": true})))
}

/// A payment vendor on 127.0.0.1: `POST /v1/charges` (detected as `unknown.pay`).
fn start_charges(charges: Charges) -> String {
    serve_app(move || {
        Router::new()
            .route("/v1/charges", post(charge))
            .with_state(charges)
    })
}

const BUDGET: &str = "version: 1
policies:
  - name: payment-budget
    match: {verb: pay}
    limit: {sum: /amount, max: 500, per: 24h, by: [system]}
  - name: payments
    match: {verb: pay}
    decision: act
    reason: payments under the budget run
";

const RATE: &str = "version: 1
policies:
  - name: payment-rate
    match: {verb: pay}
    limit: {count: 5, per: 1h, by: [system]}
    reason: five payments an hour
  - name: payments
    match: {verb: pay}
    decision: act
";

/// What a run of payments left: each answer (status, body), and the vendor's charges.
struct Pushed {
    answers: Vec<(u16, Value)>,
    charges: Charges,
    addresses: Vec<String>,
    _gateways: Vec<crate::gateway::Gateway>,
}

/// Starts `gateways` gateways on `ledger` under `policy` (in `dir`), then pushes `calls`
/// payments of `amount` through them from 8 threads at once.
fn push(
    dir: &Path,
    ledger: &str,
    policy: &str,
    gateways: usize,
    calls: usize,
    amount: f64,
    extra: &[&str],
) -> Pushed {
    std::fs::write(dir.join("policy.yaml"), policy).unwrap();
    let charges = Charges::default();
    let upstream = start_charges(Arc::clone(&charges));
    let mut args = vec!["--mode", "pending"];
    args.extend_from_slice(extra);
    let (running, addresses): (Vec<_>, Vec<_>) = (0..gateways)
        .map(|_| start_gateway_on(dir, ledger, &upstream, &args, &[]))
        .unzip();
    let threads = 8;
    let answers = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let addresses = &addresses;
                scope.spawn(move || {
                    (0..calls)
                        .filter(|n| n % threads == t)
                        .map(|n| {
                            let address = &addresses[n % addresses.len()];
                            let (status, _, body) = curl(
                                "POST",
                                &format!("{address}/v1/charges"),
                                // Each payment its own call: identical calls in
                                // flight at once would be held as retries.
                                Some(&json!({
                                    "amount": amount,
                                    "currency": "usd",
                                    "description": format!("payment {n}"),
                                })),
                                &[],
                            );
                            let body = serde_json::from_str(&body).unwrap_or(Value::Null);
                            (status, body)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    Pushed {
        answers,
        charges,
        addresses,
        _gateways: running,
    }
}

impl Pushed {
    fn ran(&self) -> usize {
        self.answers.iter().filter(|(s, _)| *s == 201).count()
    }

    /// The held answers, first held (lowest ask row) first.
    fn held(&self) -> Vec<&Value> {
        let mut held: Vec<&Value> = self
            .answers
            .iter()
            .filter(|(s, _)| *s == 202)
            .map(|(_, body)| body)
            .collect();
        held.sort_by_key(|body| body["receipt"]["seq"].as_u64());
        held
    }

    fn spent(&self) -> f64 {
        self.charges.lock().unwrap().iter().sum()
    }
}

/// The figure `attest policy explain` shows for the payment window.
fn explained_figure(dir: &Path, ledger: &str) -> f64 {
    let out = expect_ok(&attest(
        dir,
        &[
            "--ledger",
            ledger,
            "--policy",
            "policy.yaml",
            "policy",
            "explain",
            "--method",
            "POST",
            "--url",
            "http://127.0.0.1:9/v1/charges",
            "--params",
            r#"{"amount": 1}"#,
            "--json",
        ],
    ));
    let report: Value = serde_json::from_str(&out).unwrap();
    report["windows"][0]["figure"].as_f64().unwrap()
}

/// The held call is approved by a person and resumed: it runs once.
fn approve_and_resume(dir: &Path, ledger: &str, pushed: &Pushed, held: &Value) {
    add_ann_on(dir, ledger);
    confirm_as_ann_on(dir, ledger, held["id"].as_str().unwrap());
    let resume = format!(
        "{}/_attest/resume/{}",
        pushed.addresses[0],
        held["token"].as_str().unwrap()
    );
    let (status, _, body) = curl("POST", &resume, None, &[]);
    assert_eq!(status, 201, "{body}");
    let (status, _, body) = curl("POST", &resume, None, &[]);
    assert_eq!(status, 409, "the approval is used once: {body}");
}

fn verify(dir: &Path, ledger: &str) {
    let out = attest(dir, &["--ledger", ledger, "verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// 24 payments of 45 at a 500 cap through `gateways` processes on `ledger`.
fn budget_holds_at_the_cap(dir: &Path, ledger: &str, gateways: usize) {
    let pushed = push(dir, ledger, BUDGET, gateways, 24, 45.0, &[]);
    let statuses: Vec<u16> = pushed.answers.iter().map(|(s, _)| *s).collect();
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 202),
        "{statuses:?}"
    );
    // 11 × 45 = 495 fits; a 12th would make 540.
    assert_eq!(pushed.ran(), 11, "{statuses:?}");
    assert_eq!(pushed.spent(), 495.0);
    let held = pushed.held();
    assert_eq!(held.len(), 13);
    let first = held[0];
    let reasons = first["receipt"]["reasons"].to_string();
    assert!(
        reasons.contains("system unknown spent 495 of 500 in 24h; this call adds 45 (/amount)"),
        "{first:#}"
    );
    assert_eq!(explained_figure(dir, ledger), 495.0);

    approve_and_resume(dir, ledger, &pushed, first);
    // A person's approval lets the call run over the cap, once.
    assert_eq!(pushed.spent(), 540.0);
    assert_eq!(pushed.charges.lock().unwrap().len(), 12);
    assert_eq!(explained_figure(dir, ledger), 540.0);
    verify(dir, ledger);
}

/// A scenario run on `gateways` gateway processes sharing the ledger at `ledger`.
type Scenario = fn(&Path, &str, usize);

/// `scenario` on 8 processes sharing one SQLite file.
fn on_sqlite(scenario: Scenario) {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path(), "ledger.sqlite", 8);
}

/// `scenario` on two "hosts" (processes with their own connection pools) sharing one
/// PostgreSQL database.
fn on_postgres(test: &str, scenario: Scenario) {
    if curl_missing() {
        return;
    }
    let Some(db) = crate::pg_db(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path(), &db.url, 2);
}

#[test]
fn eight_processes_on_one_sqlite_ledger_never_spend_past_the_cap() {
    on_sqlite(budget_holds_at_the_cap);
}

#[test]
fn two_hosts_on_postgres_never_spend_past_the_cap() {
    on_postgres("two_hosts_on_postgres_never_spend", budget_holds_at_the_cap);
}

/// 12 payments at a rate of 5 an hour through `gateways` processes on `ledger`.
fn rate_holds_at_the_count(dir: &Path, ledger: &str, gateways: usize) {
    let pushed = push(dir, ledger, RATE, gateways, 12, 10.0, &[]);
    assert_eq!(pushed.ran(), 5, "{:?}", pushed.answers);
    assert_eq!(pushed.charges.lock().unwrap().len(), 5);
    let held = pushed.held();
    assert_eq!(held.len(), 7);
    let reasons = held[0]["receipt"]["reasons"].to_string();
    assert!(
        reasons.contains(
            "five payments an hour: system unknown made 5 of 5 calls allowed in 1h; this call would be call 6"
        ),
        "{reasons}"
    );
    approve_and_resume(dir, ledger, &pushed, held[0]);
    assert_eq!(pushed.charges.lock().unwrap().len(), 6);
    assert_eq!(explained_figure(dir, ledger), 6.0);
    verify(dir, ledger);
}

#[test]
fn a_count_limit_on_eight_sqlite_processes_holds_the_sixth_call() {
    on_sqlite(rate_holds_at_the_count);
}

#[test]
fn a_count_limit_on_two_postgres_hosts_holds_the_sixth_call() {
    on_postgres(
        "a_count_limit_on_two_postgres_hosts",
        rate_holds_at_the_count,
    );
}

#[test]
fn a_rejected_call_counts_nothing_and_an_amount_that_is_not_a_number_is_held() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (dir, ledger) = (dir.path(), "ledger.sqlite");
    let pushed = push(dir, ledger, BUDGET, 1, 12, 45.0, &[]);
    assert_eq!(pushed.ran(), 11);
    let held = pushed.held();
    add_ann_on(dir, ledger);
    let reject = attest(
        dir,
        &[
            "--ledger",
            ledger,
            "confirm",
            held[0]["id"].as_str().unwrap(),
            "reject",
            "--token-file",
            "ann.token",
        ],
    );
    expect_ok(&reject);
    assert_eq!(
        explained_figure(dir, ledger),
        495.0,
        "a rejected call counts nothing"
    );
    // An amount the limit cannot read is the riskiest reading: the rule applies.
    let (status, _, body) = curl(
        "POST",
        &format!("{}/v1/charges", pushed.addresses[0]),
        Some(&json!({"amount": "a lot"})),
        &[],
    );
    assert_eq!(status, 202, "{body}");
    assert!(
        body.contains(
            "the amount at /amount is not a number, so the limit cannot count it and applies"
        ),
        "{body}"
    );
    assert_eq!(pushed.charges.lock().unwrap().len(), 11);
}

#[test]
fn in_shadow_mode_a_crossing_call_runs_and_says_it_would_have_asked() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (dir, ledger) = (dir.path(), "ledger.sqlite");
    // Eleven at once fit under the cap; two more, one after the other, cross it. (In shadow
    // mode the figure is read, not reserved: nothing is enforced, so nothing races.)
    let pushed = push(dir, ledger, BUDGET, 2, 11, 45.0, &["--shadow"]);
    assert_eq!(pushed.ran(), 11, "{:?}", pushed.answers);
    for _ in 0..2 {
        let (status, _, body) = curl(
            "POST",
            &format!("{}/v1/charges", pushed.addresses[1]),
            Some(&json!({"amount": 45})),
            &[],
        );
        assert_eq!(status, 201, "shadow mode enforces nothing: {body}");
    }
    assert_eq!(pushed.spent(), 585.0);
    let rows: Vec<Value> = stdout(&attest(dir, &["--ledger", ledger, "export"]))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|row: &Value| row.get("shadow").is_some() && row["execution"]["status"] != "intent")
        .collect();
    // The 12th and 13th payments crossed the cap: each ran, and says it would have asked.
    assert_eq!(rows.len(), 2, "{rows:#?}");
    for row in &rows {
        assert_eq!(row["decision"], "act");
        assert_eq!(row["shadow"]["decision"], "ask");
        assert_eq!(row["shadow"]["rules_fired"], json!(["payment-budget"]));
        assert!(
            row["shadow"]["reasons"][0]
                .as_str()
                .unwrap()
                .contains("of 500 in 24h; this call adds 45"),
            "{row}"
        );
    }
    verify(dir, ledger);
}

#[test]
fn policy_check_names_the_file_line_and_field_of_a_bad_limit() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "version: 1
policies:
  - name: a
    match: {verb: pay}
    limit: {count: 5, per: 1h, every: day}
  - name: b
    match: {verb: pay}
    limit: {sum: amount, max: 500, per: 24h}
  - name: c
    match: {verb: pay}
    limit: {sum: /amount, max: 500, per: 0s}
  - name: d
    match: {verb: pay}
    limit: {count: 5, per: -1h}
  - name: e
    match: {verb: pay}
    limit: {per: 1h}
";
    std::fs::write(dir.path().join("bad.yaml"), policy).unwrap();
    let out = attest(dir.path(), &["policy", "check", "bad.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    for want in [
        "bad.yaml:5:",
        "policies[0].limit: unknown field `every`",
        "bad.yaml:8:",
        "policies[1].limit.sum: sum \"amount\" is not a JSON pointer",
        "bad.yaml:11:",
        "policies[2].limit.per: window \"0s\" is shorter than a second",
        "bad.yaml:14:",
        "policies[3].limit.per: window \"-1h\" is negative",
        "bad.yaml:17:",
        "policies[4].limit: a limit needs `count`",
    ] {
        assert!(text.contains(want), "{want:?} in:\n{text}");
    }
}

const ISSUE_RATE: &str = "version: 1
policies:
  - name: issue-rate
    match: {system: github, verb: create}
    limit: {count: 3, per: 1h, by: [system]}
    reason: three new issues an hour
  - name: issues
    match: {system: github, verb: create}
    decision: act
";

/// Claude Code's `PreToolUse` for a new GitHub issue titled `title`, in `session`.
fn create_issue(session: &str, title: &str) -> Value {
    json!({
        "session_id": session,
        "transcript_path": "/home/dev/.claude/projects/app/s.jsonl",
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "mcp__github__create_issue",
        "tool_input": {"owner": "acme", "repo": "app", "title": title},
        "tool_use_id": format!("toolu_{title}"),
    })
}

/// A coding agent's hook allows a call before the agent runs it and records it after, in
/// another process: the call is counted when it is allowed, so of 8 sessions racing at a
/// rate of 3, three are allowed and the others asked; each allowed call's after-event is
/// recorded as allowed (nothing counted twice), and the window holds 3.
#[test]
fn hook_sessions_racing_at_a_cap_are_allowed_only_up_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("policy.yaml"), ISSUE_RATE).unwrap();
    let env = [("ATTEST_POLICY", "policy.yaml")];
    let events: Vec<Value> = (0..8)
        .map(|n| create_issue(&format!("session-{}", n % 2), &format!("bug-{n}")))
        .collect();
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = events
            .iter()
            .map(|event| scope.spawn(move || hook_answer(dir, &["claude-code"], event, &env)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let decisions: Vec<&str> = answers
        .iter()
        .map(|a| {
            a["hookSpecificOutput"]["permissionDecision"]
                .as_str()
                .unwrap()
        })
        .collect();
    let allowed: Vec<usize> = (0..8).filter(|&n| decisions[n] == "allow").collect();
    assert_eq!(allowed.len(), 3, "{decisions:?} {answers:#?}");
    assert_eq!(
        decisions.iter().filter(|d| **d == "ask").count(),
        5,
        "{decisions:?} {answers:#?}"
    );
    let asked = answers
        .iter()
        .find(|a| a["hookSpecificOutput"]["permissionDecision"] == "ask");
    assert!(
        asked.unwrap()["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("made 3 of 3 calls allowed in 1h"),
        "{asked:?}"
    );
    // The allowed calls ran; each after-event is recorded as the call Attest allowed.
    for &n in &allowed {
        let mut post = events[n].clone();
        post["hook_event_name"] = json!("PostToolUse");
        post["tool_response"] =
            json!({"number": n, "html_url": "https://github.com/acme/app/issues/1"});
        let output = run_hook(dir, &["claude-code"], &post.to_string(), &env);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(
            !stdout(&output).contains("did not allow"),
            "{}",
            stdout(&output)
        );
    }
    let ran: Vec<Value> = exported_entries(dir)
        .into_iter()
        .filter(|e| e["execution"]["status"] == "ok")
        .collect();
    assert_eq!(ran.len(), 3, "{ran:#?}");
    assert!(ran.iter().all(|e| e["decision"] == "act"), "{ran:#?}");
    // Nothing was counted twice: the window holds the three, so a fourth is asked about,
    // and nothing is left for another after-event to take.
    let fourth = hook_answer(
        dir,
        &["claude-code"],
        &create_issue("session-9", "late"),
        &env,
    );
    assert_eq!(fourth["hookSpecificOutput"]["permissionDecision"], "ask");
    assert!(
        fourth["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("made 3 of 3 calls allowed in 1h"),
        "{fourth}"
    );
    // What the allowed calls kept is taken; each of the 6 asked calls keeps the id of its
    // intent, put to the agent's prompt, for the after-event that closes it if it runs.
    let left: usize = ["hook-counted", ".attest/hook-counted"]
        .iter()
        .map(|kept| std::fs::read_dir(dir.join(kept)).map_or(0, Iterator::count))
        .sum();
    assert_eq!(
        left, 6,
        "the asked calls' ids, and nothing of the allowed ones"
    );
    verify(dir, "ledger.sqlite");
}

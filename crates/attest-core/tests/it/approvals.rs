//! Approvals on a real SQLite file: pending and resume, first decision wins (threads and
//! two processes), expiry, restart in the middle, approvers, edits checked by policy
//! again, tampering, and notifiers against local HTTP servers. The key cases run again
//! on a real PostgreSQL ledger (`*_on_postgres`), where tenants keep their own requests.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use attest_core::approvals::{
    verify_webhook, ApprovalError, FollowUp, Notifier, NotifyError, Secret, SlackNotifier, Status,
    WebhookNotifier, AGENT_TOKEN_PREFIX, WEBHOOK_TOLERANCE,
};
use attest_core::{
    Answer, ApprovalStore, Attest, AttestError, ConsoleGate, Outcome, ResumeToken, Start,
    StoreGate, ToolError,
};
use attest_ledger::{Clock, Ledger, LedgerOptions};
use attest_policy::{Action, Decision, Policy, PolicyError, Risk, Verb, Verdict};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::pg_db::{pg_db, PgDb};
use crate::support::{blocking, row, Ran};

/// A clock the test moves by hand.
#[derive(Debug)]
struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    fn new() -> Arc<ManualClock> {
        Arc::new(ManualClock(Mutex::new(SystemTime::now())))
    }
    fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap();
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

/// Asks for every write; names approvers; refuses payments over `limit`; holds when
/// the params still say `[NAME]`.
#[derive(Clone)]
struct AskPolicy {
    approvers: Vec<String>,
    members: Vec<String>,
}

impl Policy for AskPolicy {
    fn evaluate(&self, action: &Action) -> Result<Verdict, PolicyError> {
        if action.params["amount"].as_u64().is_some_and(|a| a > 1000) {
            return Ok(Verdict::new(
                Decision::Refuse,
                Risk::VeryHigh,
                "limit",
                "over 1000",
            ));
        }
        let mut verdict = Verdict::new(Decision::Ask, action.base_risk(), "test", "writes ask");
        verdict.approvers.clone_from(&self.approvers);
        verdict.approver_members.clone_from(&self.members);
        verdict.hold = action.params.to_string().contains("[NAME]");
        Ok(verdict)
    }
}

fn anyone() -> AskPolicy {
    AskPolicy {
        approvers: vec![],
        members: vec![],
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    postgres: Option<PgDb>,
    tenant: Option<String>,
    /// Every pipeline opened on PostgreSQL, so the last handle on its connections is
    /// dropped with the fixture, off the test's runtime (the synchronous client may not
    /// close a connection on a runtime's thread).
    opened: Mutex<Vec<(Attest, Arc<Ledger>)>>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            clock: ManualClock::new(),
            postgres: None,
            tenant: None,
            opened: Mutex::new(Vec::new()),
        }
    }

    /// Drops the fixture off the runtime's thread (see `opened`).
    fn close(self) {
        blocking(move || drop(self));
    }

    /// The same on a database of its own on the PostgreSQL server (`None`: no server).
    fn postgres(test: &str) -> Option<Fixture> {
        Some(Fixture {
            postgres: Some(pg_db(test)?),
            ..Fixture::new()
        })
    }

    /// The ledger's location: the SQLite file, or the PostgreSQL database's URL.
    fn path(&self) -> std::path::PathBuf {
        match &self.postgres {
            Some(db) => db.url.clone().into(),
            None => self.dir.path().join("l.sqlite"),
        }
    }

    fn options(&self) -> LedgerOptions {
        LedgerOptions {
            tenant: self.tenant.clone(),
            ..LedgerOptions::default()
        }
    }

    /// A fresh pipeline on the same ledger: a new `Ledger`, store and `Attest`, as a new
    /// process would open them.
    fn attest(&self, policy: impl Policy + 'static, wait: Duration) -> (Attest, Arc<Ledger>) {
        let ledger = Arc::new(blocking(|| Ledger::open(self.path(), self.options())).unwrap());
        let clock: Arc<dyn Clock> = self.clock.clone();
        let store = Arc::new(ApprovalStore::open_with_clock(&ledger, clock).unwrap());
        register(&store);
        let gate = StoreGate::new(Arc::clone(&store))
            .ttl(Duration::from_secs(600))
            .wait(wait)
            .poll_interval(Duration::from_millis(20));
        let attest = Attest::builder()
            .ledger(Arc::clone(&ledger))
            .policy(policy)
            .gate(gate)
            .approvals(store)
            .agent("bot")
            .build()
            .unwrap();
        if self.postgres.is_some() {
            self.opened
                .lock()
                .unwrap()
                .push((attest.clone(), Arc::clone(&ledger)));
        }
        (attest, ledger)
    }
}

/// The people the tests decide as: only registered approvers decide.
const PEOPLE: [&str; 16] = [
    "maria",
    "cfo@acme.com",
    "cat@acme.com",
    "ann",
    "ann@acme.com",
    "raj@acme.com",
    "bob@acme.com",
    "finance",
    "approver-a",
    "approver-b",
    "p0",
    "p1",
    "p2",
    "p3",
    "p4",
    "p5",
];

/// Registers [`PEOPLE`] (and `p6`, `p7`) in `store`, once per file.
fn register(store: &ApprovalStore) {
    for name in PEOPLE.iter().copied().chain(["p6", "p7"]) {
        if store.approver(name).is_err() {
            store.add_approver(name, None).unwrap();
        }
    }
}

fn rows(ledger: &Ledger) -> u64 {
    blocking(|| ledger.tip()).unwrap().map_or(0, |(seq, _)| seq)
}

/// A tool that counts calls and remembers the params it ran with.
#[derive(Clone, Default)]
struct Tool {
    calls: Arc<AtomicUsize>,
    params: Arc<Mutex<Option<Value>>>,
}

impl Tool {
    fn run(&self) -> impl FnOnce(Value) -> std::future::Ready<Result<Value, ToolError>> {
        let me = self.clone();
        move |params| {
            me.calls.fetch_add(1, Ordering::SeqCst);
            *me.params.lock().unwrap() = Some(params);
            std::future::ready(Ok(json!({"id": "m1"})))
        }
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn send() -> Action {
    Action::new("gmail", Verb::Send)
        .with_target("bob@other.io")
        .with_params(json!({"to": "bob@other.io", "body": "hi"}))
}

/// Resumes `token` with `tool`, expecting the tool to run; the outcome's receipt.
async fn resume_ran(attest: &Attest, token: &ResumeToken, tool: &Tool) -> attest_core::Receipt {
    attest
        .call(token)
        .run(tool.run())
        .await
        .unwrap()
        .expect_ran()
}

/// Runs `action`, expecting it to go pending; returns the request id and token.
async fn pend(attest: &Attest, action: Action, tool: &Tool) -> (String, ResumeToken) {
    match attest.call(action).run(tool.run()).await {
        Ok(Outcome::Held { id, token, receipt }) => {
            assert_eq!(receipt.decision, Decision::Ask);
            (id, token)
        }
        other => panic!("expected pending, got {other:?}"),
    }
}

#[tokio::test]
async fn a_pending_action_leaves_the_ask_then_the_outcome_and_runs_once() {
    ask_then_outcome_runs_once(&Fixture::new()).await;
}

#[tokio::test]
async fn a_pending_action_leaves_the_ask_then_the_outcome_and_runs_once_on_postgres() {
    if let Some(f) =
        Fixture::postgres("a_pending_action_leaves_the_ask_then_the_outcome_and_runs_once")
    {
        ask_then_outcome_runs_once(&f).await;
        f.close();
    }
}

async fn ask_then_outcome_runs_once(f: &Fixture) {
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    assert_eq!(tool.calls(), 0);
    let ask = row(&ledger, 1);
    assert_eq!(ask["decision"], "ask");
    assert_eq!(ask["execution"]["status"], "pending");
    assert!(ask.get("confirm").is_none());

    // Still pending: pending again, nothing runs, nothing recorded.
    let outcome = attest.call(&token).run(tool.run()).await.unwrap();
    assert!(
        matches!(outcome, Outcome::Held { ref receipt, .. } if receipt.seq == 1),
        "{outcome:?}"
    );
    assert_eq!(rows(&ledger), 1);

    let decided = attest
        .decide(&id, Answer::approve("maria", "cli").with_note("ok"))
        .await
        .unwrap();
    assert_eq!(decided.request.status, Status::Approved);
    assert!(decided.receipt.is_none());
    let receipt = resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    assert_eq!(receipt.seq, 3);
    assert_eq!(receipt.approver.as_deref(), Some("maria"));
    let intent = row(&ledger, 2);
    assert_eq!(intent["execution"]["status"], "intent");
    assert_eq!(intent["action_id"], ask["action_id"]);
    let outcome = row(&ledger, 3);
    assert_eq!(
        outcome["confirm"],
        json!({"outcome": "approved", "approver": "maria", "channel": "cli", "note": "ok"})
    );
    assert_eq!(outcome["execution"]["status"], "ok");
    assert_eq!(outcome["action_id"], ask["action_id"]);

    // Used once: a second resume is refused and runs nothing.
    let err = attest.call(&token).run(tool.run()).await.unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::AlreadyUsed { .. })
        ),
        "{err:?}"
    );
    assert_eq!(tool.calls(), 1);
    assert_eq!(rows(&ledger), 3);
    assert!(blocking(|| ledger.verify()).unwrap().is_intact());
}

#[tokio::test]
async fn an_unknown_token_is_a_clear_error() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let err = attest
        .call(ResumeToken::new("atr_0000"))
        .run(tool.run())
        .await
        .unwrap_err();
    assert!(
        matches!(err, AttestError::Approval(ApprovalError::NotFound)),
        "{err:?}"
    );
    assert!(err.to_string().contains("no approval request"), "{err}");
}

#[tokio::test]
async fn a_request_survives_a_restart_and_resumes_from_a_new_attest() {
    survives_a_restart(&Fixture::new()).await;
}

#[tokio::test]
async fn a_request_survives_a_restart_and_resumes_from_a_new_attest_on_postgres() {
    if let Some(f) = Fixture::postgres("a_request_survives_a_restart_and_resumes_from_a_new_attest")
    {
        survives_a_restart(&f).await;
        f.close();
    }
}

async fn survives_a_restart(f: &Fixture) {
    let tool = Tool::default();
    let (id, token) = {
        let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
        pend(&attest, send(), &tool).await
    };
    // Everything from the first "process" is dropped; a new one opens the file.
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let pending = attest.approvals().unwrap().pending().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, id);
    attest
        .decide(token.expose(), Answer::approve("maria", "cli"))
        .await
        .unwrap();
    drop(attest);
    let (attest, _) = f.attest(anyone(), Duration::ZERO);
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    // The ask, the intent before the run, the outcome.
    assert_eq!(rows(&ledger), 3);
    assert_eq!(*tool.params.lock().unwrap(), Some(send().params));
}

#[tokio::test]
async fn a_rejection_is_recorded_at_once_and_resume_reports_it() {
    let f = Fixture::new();
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    let decided = attest
        .decide(&id, Answer::reject("maria", "cli").with_note("no"))
        .await
        .unwrap();
    assert_eq!(decided.receipt.as_ref().map(|r| r.seq), Some(2));
    let outcome = row(&ledger, 2);
    assert_eq!(outcome["confirm"]["outcome"], "rejected");
    assert_eq!(outcome["execution"]["status"], "not_run");
    let outcome = attest.call(&token).run(tool.run()).await.unwrap();
    assert!(
        matches!(outcome, Outcome::Rejected { ref approver, ref receipt } if approver == "maria" && receipt.seq == 2),
        "{outcome:?}"
    );
    assert_eq!(tool.calls(), 0);
    // The first decision wins.
    let err = attest
        .decide(&id, Answer::approve("ann", "cli"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::AlreadyDecided {
                status: Status::Rejected,
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(rows(&ledger), 2);
}

#[tokio::test]
async fn expiry_counts_as_rejection_and_is_recorded_as_expired() {
    expiry_counts_as_rejection(&Fixture::new()).await;
}

#[tokio::test]
async fn expiry_counts_as_rejection_and_is_recorded_as_expired_on_postgres() {
    if let Some(f) = Fixture::postgres("expiry_counts_as_rejection_and_is_recorded_as_expired") {
        expiry_counts_as_rejection(&f).await;
        f.close();
    }
}

async fn expiry_counts_as_rejection(f: &Fixture) {
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    f.clock.advance(Duration::from_secs(601));
    assert!(attest.approvals().unwrap().pending().unwrap().is_empty());
    let outcome = attest.call(&token).run(tool.run()).await.unwrap();
    let Outcome::Expired { receipt, .. } = outcome else {
        panic!("expected expiry, got {outcome:?}")
    };
    assert_eq!(receipt.seq, 2);
    let outcome = row(&ledger, 2);
    assert_eq!(outcome["confirm"]["outcome"], "expired");
    assert!(outcome["confirm"].get("approver").is_none());
    assert_eq!(outcome["execution"]["status"], "not_run");
    // Too late to decide; resume again reports the same recorded expiry.
    let err = attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::AlreadyDecided {
                status: Status::Expired,
                ..
            })
        ),
        "{err:?}"
    );
    let outcome = attest.call(&token).run(tool.run()).await.unwrap();
    assert!(
        matches!(outcome, Outcome::Expired { ref receipt, .. } if receipt.seq == 2),
        "{outcome:?}"
    );
    assert_eq!(rows(&ledger), 2);
    assert_eq!(tool.calls(), 0);
}

#[tokio::test]
async fn expire_due_records_each_expired_request_once() {
    expire_due_once(&Fixture::new()).await;
}

#[tokio::test]
async fn expire_due_records_each_expired_request_once_on_postgres() {
    if let Some(f) = Fixture::postgres("expire_due_records_each_expired_request_once") {
        expire_due_once(&f).await;
        f.close();
    }
}

async fn expire_due_once(f: &Fixture) {
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    pend(&attest, send(), &tool).await;
    pend(&attest, send(), &tool).await;
    f.clock.advance(Duration::from_secs(601));
    assert_eq!(attest.expire_due().await.unwrap().len(), 2);
    assert!(attest.expire_due().await.unwrap().is_empty());
    assert_eq!(rows(&ledger), 4);
}

#[tokio::test]
async fn only_a_listed_approver_or_group_member_may_decide() {
    let f = Fixture::new();
    let policy = AskPolicy {
        approvers: vec!["finance".into()],
        members: vec!["ann@acme.com".into(), "raj@acme.com".into()],
    };
    let (attest, _ledger) = f.attest(policy, Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    for who in ["bob@acme.com", "finance"] {
        let err = attest
            .decide(&id, Answer::approve(who, "cli"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                AttestError::Approval(ApprovalError::NotAnApprover { .. })
            ),
            "{err:?}"
        );
    }
    let err = attest
        .decide(&id, Answer::approve("", "cli"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AttestError::Approval(ApprovalError::NoApprover { .. })),
        "{err:?}"
    );
    attest
        .decide(&id, Answer::approve("RAJ@acme.com", "cli"))
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    // The name recorded is the registered one, not as typed.
    let request = attest.approvals().unwrap().get(&id).unwrap();
    assert_eq!(request.approver.as_deref(), Some("raj@acme.com"));
}

/// Why `who`'s approval of request `id` was refused.
async fn refusal(attest: &Attest, id: &str, who: &str) -> ApprovalError {
    match attest.decide(id, Answer::approve(who, "cli")).await {
        Err(AttestError::Approval(err)) => err,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn only_a_registered_active_approver_decides_and_tokens_name_them() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let store = attest.approvals().unwrap();
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    // A name nobody registered is not an approver, even when the rule names nobody.
    let err = refusal(&attest, &id, "mallory").await;
    assert!(
        matches!(err, ApprovalError::UnknownApprover { .. }),
        "{err:?}"
    );
    let (added, secret) = store.add_approver("Zoe", Some("U0ZOE")).unwrap();
    assert_eq!(added.slack_user.as_deref(), Some("U0ZOE"));
    assert!(secret.expose().starts_with("ata_"));
    assert!(!format!("{secret:?}").contains(&secret.expose()[4..]));
    assert_eq!(store.authenticate(secret.expose()).unwrap().name, "Zoe");
    assert_eq!(store.approver_for_slack_user("U0ZOE").unwrap().name, "Zoe");
    for bad in ["", "ata_0", &secret.expose()[..20]] {
        assert!(matches!(
            store.authenticate(bad),
            Err(ApprovalError::BadCredential)
        ));
    }
    // The store keeps only the token's hash.
    let mut raw = std::fs::read(f.path()).unwrap();
    raw.extend(std::fs::read(f.path().with_extension("sqlite-wal")).unwrap_or_default());
    assert!(!raw
        .windows(secret.expose().len())
        .any(|w| w == secret.expose().as_bytes()));
    // A second add of an active name, or a Slack id already taken, is refused.
    assert!(matches!(
        store.add_approver("zoe", None),
        Err(ApprovalError::BadApprover { .. })
    ));
    assert!(matches!(
        store.add_approver("yann", Some("U0ZOE")),
        Err(ApprovalError::BadApprover { .. })
    ));
    // Revoked: the token, the Slack id and the name decide nothing.
    store.revoke_approver("zoe").unwrap();
    assert!(matches!(
        store.authenticate(secret.expose()),
        Err(ApprovalError::BadCredential)
    ));
    assert!(store.approver_for_slack_user("U0ZOE").is_err());
    let err = refusal(&attest, &id, "Zoe").await;
    assert!(
        matches!(err, ApprovalError::UnknownApprover { .. }),
        "{err:?}"
    );
    // Added again: a new token; the old one stays dead.
    let (_, renewed) = store.add_approver("zoe", None).unwrap();
    assert!(store.authenticate(secret.expose()).is_err());
    assert_eq!(store.authenticate(renewed.expose()).unwrap().name, "zoe");
    attest
        .decide(&id, Answer::approve("ZOE", "cli"))
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
}

#[tokio::test]
async fn edits_change_what_runs_and_policy_checks_the_edited_action() {
    let f = Fixture::new();
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let pay =
        || Action::new("stripe", Verb::Pay).with_params(json!({"amount": 500, "to": "acct_1"}));

    // An edit policy accepts runs, with the edited params.
    let (id, token) = pend(&attest, pay(), &tool).await;
    let decided = attest
        .decide(
            &id,
            Answer::approve("maria", "inbox").with_edits(json!({"amount": 400})),
        )
        .await
        .unwrap();
    assert_eq!(decided.request.status, Status::Edited);
    let receipt = resume_ran(&attest, &token, &tool).await;
    assert_eq!(
        *tool.params.lock().unwrap(),
        Some(json!({"amount": 400, "to": "acct_1"}))
    );
    let outcome = row(&ledger, receipt.seq);
    assert_eq!(outcome["confirm"]["outcome"], "edited");
    assert_ne!(outcome["params_hash"], row(&ledger, 1)["params_hash"]);

    // An edit policy refuses does not run: the refusal stands and is recorded.
    let (id, token) = pend(&attest, pay(), &tool).await;
    attest
        .decide(
            &id,
            Answer::approve("maria", "inbox").with_edits(json!({"amount": 5000})),
        )
        .await
        .unwrap();
    let outcome = attest.call(&token).run(tool.run()).await.unwrap();
    let Outcome::Refused { receipt } = outcome else {
        panic!("expected a refusal, got {outcome:?}")
    };
    assert_eq!(tool.calls(), 1);
    let refused = row(&ledger, receipt.seq);
    assert_eq!(refused["decision"], "refuse");
    assert_eq!(refused["confirm"]["outcome"], "edited");
    assert_eq!(refused["execution"]["status"], "not_run");
    // And it cannot be retried.
    let err = attest.call(&token).run(tool.run()).await.unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::AlreadyUsed { .. })
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_held_action_runs_only_after_an_edit_fills_it() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let held = send().with_params(json!({"to": "bob@other.io", "body": "Dear [NAME],"}));
    let (id, token) = pend(&attest, held, &tool).await;
    let err = attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::HoldNeedsEdits { .. })
        ),
        "{err:?}"
    );
    attest
        .decide(
            &id,
            Answer::approve("maria", "cli").with_edits(json!({"body": "Dear Bob,"})),
        )
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
}

#[tokio::test]
async fn a_different_action_presenting_the_token_is_refused() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    let other = send().with_params(json!({"to": "eve@evil.io", "body": "hi"}));
    let err = attest
        .call(Start::retry(&token, other))
        .run(tool.run())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::DigestMismatch { .. })
        ),
        "{err:?}"
    );
    let other = send().with_agent("another-bot");
    let err = attest
        .call(Start::retry(&token, other))
        .run(tool.run())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::DigestMismatch { .. })
        ),
        "{err:?}"
    );
    assert_eq!(tool.calls(), 0);
    // The same action (key order aside) is accepted.
    let same = send().with_params(json!({"body": "hi", "to": "bob@other.io"}));
    attest
        .call(Start::retry(&token, same))
        .run(tool.run())
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(tool.calls(), 1);
}

/// Changes one column of the stored request behind the store's back.
fn tamper(path: &std::path::Path, id: &str, set: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let changed = conn
        .execute(&format!("UPDATE approvals SET {set} WHERE id = ?1"), [id])
        .unwrap();
    assert_eq!(changed, 1);
}

#[tokio::test]
async fn a_tampered_edit_or_action_in_the_store_is_refused() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();

    let (id, token) = pend(&attest, send(), &tool).await;
    attest
        .decide(
            &id,
            Answer::approve("maria", "cli").with_edits(json!({"body": "hello"})),
        )
        .await
        .unwrap();
    tamper(&f.path(), &id, r#"edits = '{"to":"eve@evil.io"}'"#);
    let err = attest.call(&token).run(tool.run()).await.unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::Tampered { field: "edits", .. })
        ),
        "{err:?}"
    );

    let (id, token) = pend(&attest, send(), &tool).await;
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    tamper(
        &f.path(),
        &id,
        "action = replace(action, 'bob@other.io', 'eve@evil.io')",
    );
    let err = attest.call(&token).run(tool.run()).await.unwrap_err();
    assert!(
        matches!(
            err,
            AttestError::Approval(ApprovalError::Tampered {
                field: "action",
                ..
            })
        ),
        "{err:?}"
    );

    let (id, token) = pend(&attest, send(), &tool).await;
    tamper(&f.path(), &id, "status = 'approved'");
    let err = attest.call(&token).run(tool.run()).await.unwrap_err();
    assert!(
        matches!(err, AttestError::Approval(ApprovalError::Tampered { .. })),
        "{err:?}"
    );
    assert_eq!(tool.calls(), 0);
}

#[tokio::test]
async fn threads_deciding_at_once_have_exactly_one_winner() {
    threads_race_to_decide(&Fixture::new()).await;
}

#[tokio::test]
async fn threads_deciding_at_once_have_exactly_one_winner_on_postgres() {
    if let Some(f) = Fixture::postgres("threads_deciding_at_once_have_exactly_one_winner") {
        threads_race_to_decide(&f).await;
        f.close();
    }
}

async fn threads_race_to_decide(f: &Fixture) {
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let attest = attest.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let answer = if i % 2 == 0 {
                    Answer::approve(format!("p{i}"), "cli")
                } else {
                    Answer::reject(format!("p{i}"), "cli")
                };
                attest.decide(&id, answer).await
            })
        })
        .collect();
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => wins += 1,
            Err(AttestError::Approval(ApprovalError::AlreadyDecided { .. })) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(wins, 1);
}

#[tokio::test]
async fn tenants_keep_their_own_requests_and_approvers_on_postgres() {
    let Some(mut f) = Fixture::postgres("tenants_keep_their_own_requests") else {
        return;
    };
    f.tenant = Some("acme".to_owned());
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;

    // Another tenant in the same database sees none of it, and cannot decide it.
    let other = blocking(|| {
        Ledger::open(
            f.path(),
            LedgerOptions {
                tenant: Some("globex".to_owned()),
                ..LedgerOptions::default()
            },
        )
    })
    .unwrap();
    let store = ApprovalStore::open(&other).unwrap();
    assert!(store.pending().unwrap().is_empty());
    assert!(matches!(store.get(&id), Err(ApprovalError::NotFound)));
    assert!(matches!(
        store.get(token.expose()),
        Err(ApprovalError::NotFound)
    ));
    assert!(store.approvers().unwrap().is_empty());
    assert!(matches!(
        store.decide(&id, &Answer::approve("maria", "cli")),
        Err(ApprovalError::NotFound)
    ));
    store.add_approver("maria", None).unwrap();
    assert!(matches!(
        store.decide(&id, &Answer::approve("maria", "cli")),
        Err(ApprovalError::NotFound)
    ));

    // Names match without regard to case, as in SQLite; a second "Maria" is refused.
    let own = attest.approvals().unwrap();
    assert_eq!(own.approver("MARIA").unwrap().name, "maria");
    assert!(matches!(
        own.add_approver("Maria", None),
        Err(ApprovalError::BadApprover { .. })
    ));

    attest
        .decide(&id, Answer::approve("Maria", "cli"))
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    assert_eq!(rows(&ledger), 3);
    assert_eq!(blocking(|| other.tip()).unwrap(), None);
    // Used: its params are purged from the store.
    let used = own.get(&id).unwrap();
    assert!(used.purged);
    assert_eq!(used.action.params, json!({}));
    drop((attest, ledger, own));
    blocking(move || drop((other, store)));
    f.close();
}

/// Set in a child process: the ledger path, the request id, and who decides.
const WORKER_LEDGER: &str = "ATTEST_TEST_DECIDE_LEDGER";
const WORKER_ID: &str = "ATTEST_TEST_DECIDE_ID";
const WORKER_WHO: &str = "ATTEST_TEST_DECIDE_WHO";
const WORKER_GO: &str = "ATTEST_TEST_DECIDE_GO";

#[tokio::test]
async fn two_processes_racing_to_decide_have_exactly_one_winner() {
    processes_race_to_decide(|| Some(Fixture::new())).await;
}

#[tokio::test]
async fn two_processes_racing_to_decide_have_exactly_one_winner_on_postgres() {
    processes_race_to_decide(|| Fixture::postgres("two_processes_racing_to_decide")).await;
}

async fn processes_race_to_decide(fixture: impl Fn() -> Option<Fixture>) {
    let exe = std::env::current_exe().unwrap();
    for round in 0..3 {
        let Some(f) = fixture() else { return };
        let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
        let (id, token) = pend(&attest, send(), &Tool::default()).await;
        // Both children wait for the same instant, then decide.
        let go = SystemTime::now() + Duration::from_millis(700);
        let go_ms = go
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let children: Vec<_> = ["approver-a", "approver-b"]
            .iter()
            .map(|who| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "approvals::decide_worker",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env(WORKER_LEDGER, f.path())
                    .env(WORKER_ID, &id)
                    .env(WORKER_WHO, who)
                    .env(WORKER_GO, go_ms.to_string())
                    .output()
            })
            .collect();
        let mut winners = Vec::new();
        for (child, who) in children.into_iter().zip(["approver-a", "approver-b"]) {
            let out = child.unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            if text.contains("DECIDE-WON") {
                winners.push(who);
            } else {
                assert!(text.contains("DECIDE-LOST"), "round {round}: {text}");
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let request = attest.approvals().unwrap().get(&id).unwrap();
        assert_eq!(request.approver.as_deref(), Some(winners[0]));
        // The winner's decision is what resume sees.
        let tool = Tool::default();
        match request.status {
            Status::Approved => {
                attest.call(&token).run(tool.run()).await.unwrap();
                assert_eq!(tool.calls(), 1);
                // The ask, the intent, the outcome.
                assert_eq!(rows(&ledger), 3);
            }
            Status::Rejected => {
                let outcome = attest.call(&token).run(tool.run()).await;
                assert!(
                    matches!(outcome, Ok(Outcome::Rejected { .. })),
                    "{outcome:?}"
                );
                assert_eq!(tool.calls(), 0);
                assert_eq!(rows(&ledger), 2);
            }
            other => panic!("unexpected {other}"),
        }
        assert!(blocking(|| ledger.verify()).unwrap().is_intact());
        drop((attest, ledger));
        f.close();
    }
}

/// A worker's setup from its environment: a runtime, a pipeline on the parent's ledger
/// with `policy`, the request id and who decides; returns at the agreed instant.
fn worker(policy: impl Policy + 'static) -> (tokio::runtime::Runtime, Attest, String, String) {
    let path = std::env::var(WORKER_LEDGER).expect("run by the parent test");
    let id = std::env::var(WORKER_ID).unwrap();
    let who = std::env::var(WORKER_WHO).unwrap();
    let go: u128 = std::env::var(WORKER_GO).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ledger = Arc::new(Ledger::open(path, LedgerOptions::default()).unwrap());
    let attest = Attest::builder()
        .ledger(ledger)
        .policy(policy)
        .agent("bot")
        .build()
        .unwrap();
    attest.approvals().unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::thread::sleep(Duration::from_millis(
        u64::try_from(go.saturating_sub(now)).unwrap(),
    ));
    (runtime, attest, id, who)
}

/// The child half of the race: decides once, prints whether it won.
#[test]
#[ignore = "a child process of two_processes_racing_to_decide_have_exactly_one_winner"]
fn decide_worker() {
    let (runtime, attest, id, who) = worker(anyone());
    // One approves, the other rejects: the loser must not overwrite the winner.
    let answer = if who.ends_with('a') {
        Answer::approve(&who, "cli")
    } else {
        Answer::reject(&who, "cli")
    };
    match runtime.block_on(attest.decide(&id, answer)) {
        Ok(_) => println!("DECIDE-WON"),
        Err(AttestError::Approval(ApprovalError::AlreadyDecided { .. })) => println!("DECIDE-LOST"),
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_waiting_gate_runs_the_action_when_someone_decides_in_time() {
    let f = Fixture::new();
    let (attest, ledger) = f.attest(anyone(), Duration::from_secs(20));
    let decider = attest.clone();
    let approve = tokio::spawn(async move {
        loop {
            let pending = decider.approvals().unwrap().pending().unwrap();
            if let Some(request) = pending.first() {
                decider
                    .decide(&request.id, Answer::approve("maria", "inbox"))
                    .await
                    .unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let tool = Tool::default();
    let receipt = attest
        .call(send())
        .run(tool.run())
        .await
        .unwrap()
        .expect_ran();
    approve.await.unwrap();
    assert_eq!(tool.calls(), 1);
    // The intent (approved, about to run), then the outcome.
    assert_eq!(receipt.seq, 2);
    assert_eq!(row(&ledger, 1)["execution"]["status"], "intent");
    assert_eq!(row(&ledger, 2)["confirm"]["channel"], "inbox");
    assert_eq!(rows(&ledger), 2);
}

#[tokio::test]
async fn a_waiting_gate_that_times_out_returns_pending() {
    let f = Fixture::new();
    let (attest, ledger) = f.attest(anyone(), Duration::from_millis(100));
    let tool = Tool::default();
    let (_id, token) = pend(&attest, send(), &tool).await;
    assert_eq!(rows(&ledger), 1);
    assert!(token.expose().starts_with("atr_"));
}

#[tokio::test]
async fn a_caller_that_goes_away_cancels_its_waiting_request() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::from_secs(30));
    let tool = Tool::default();
    // The caller gives up while the call waits for a person: its future is dropped.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        attest.call(send()).run(tool.run()),
    );
    assert!(gave_up.await.is_err(), "the call should still be waiting");
    let conn = rusqlite::Connection::open(f.path()).unwrap();
    let (id, status): (String, String) = conn
        .query_row("SELECT id, status FROM approvals", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .unwrap();
    assert_eq!(status, "cancelled");
    let store = attest.approvals().unwrap();
    assert!(store.pending().unwrap().is_empty());
    assert_eq!(store.get_by_id(&id).unwrap().status, Status::Cancelled);
    // Nobody can approve it any more, and cancelling twice changes nothing.
    let late = store.decide(&id, &Answer::approve("ann@acme.com", "inbox"));
    assert!(
        matches!(
            late,
            Err(ApprovalError::AlreadyDecided {
                status: Status::Cancelled,
                ..
            })
        ),
        "{late:?}"
    );
    assert!(!store.cancel(&id).unwrap());
    assert_eq!(tool.calls(), 0);
}

#[tokio::test]
async fn the_console_gate_edits_and_policy_checks_the_edit() {
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    let tool = Tool::default();
    for (input, runs) in [
        ("e\n{\"amount\": 10}\n", true),
        ("e\n{\"amount\": 5000}\n", false),
        ("n\n", false),
    ] {
        let gate = ConsoleGate::with_io(
            "ann",
            std::io::Cursor::new(input.as_bytes().to_vec()),
            std::io::sink(),
        );
        let attest = Attest::builder()
            .ledger(Arc::clone(&ledger))
            .policy(anyone())
            .gate(gate)
            .build()
            .unwrap();
        let action = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 100}));
        let outcome = attest.call(action).run(tool.run()).await.unwrap();
        assert_eq!(outcome.ran(), runs, "{input:?}: {outcome:?}");
    }
    assert_eq!(tool.calls(), 1);
    assert_eq!(*tool.params.lock().unwrap(), Some(json!({"amount": 10})));
}

#[tokio::test]
async fn an_approver_not_listed_cannot_approve_through_any_gate() {
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    let policy = AskPolicy {
        approvers: vec!["finance".into()],
        members: vec!["ann@acme.com".into()],
    };
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .policy(policy)
        .gate(attest_core::AutoGate::approve("mallory"))
        .build()
        .unwrap();
    let tool = Tool::default();
    let outcome = attest.call(send()).run(tool.run()).await.unwrap();
    assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
    assert_eq!(tool.calls(), 0);
    assert_eq!(
        row(&ledger, 1)["confirm"]["note"],
        "not a listed approver for this action"
    );
}

/// One HTTP request as a tiny local server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves HTTP/1.1 on 127.0.0.1, answering every request with `status` and `body`, and
/// keeps what it saw.
async fn local_server(status: u16, body: &'static str) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head_end, length) = loop {
                let n = socket.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break (0, 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    break (end + 4, length);
                }
            };
            while buf.len() < head_end + length {
                let n = socket.read(&mut chunk).await.unwrap();
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.lines();
            let path = lines
                .next()
                .unwrap_or_default()
                .split(' ')
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let headers = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect();
            log.lock().unwrap().push(Seen {
                path,
                headers,
                body: buf[head_end..].to_vec(),
            });
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    });
    (url, seen)
}

fn gate_with(f: &Fixture, notifier: impl Notifier + 'static) -> (Attest, Arc<Ledger>) {
    let ledger = Arc::new(Ledger::open(f.path(), LedgerOptions::default()).unwrap());
    let store = Arc::new(ApprovalStore::open(&ledger).unwrap());
    let gate = StoreGate::new(Arc::clone(&store)).notifier(notifier);
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .policy(anyone())
        .gate(gate)
        .approvals(store)
        .build()
        .unwrap();
    (attest, ledger)
}

#[tokio::test]
async fn the_webhook_is_signed_and_its_verifier_refuses_forgeries() {
    let f = Fixture::new();
    let (url, seen) = local_server(200, "{}").await;
    let secret = Secret::new("whsec_test");
    let (attest, _ledger) = gate_with(
        &f,
        WebhookNotifier::new(format!("{url}/hook"), secret.clone()),
    );
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    let hit = seen.lock().unwrap()[0].clone();
    assert_eq!(hit.path, "/hook");
    let ts = hit.header("x-attest-timestamp");
    let sig = hit.header("x-attest-signature");
    let now = SystemTime::now();
    verify_webhook(&secret, ts, sig, &hit.body, now, WEBHOOK_TOLERANCE).unwrap();
    let body: Value = serde_json::from_slice(&hit.body).unwrap();
    assert_eq!(body["type"], "approval.requested");
    assert_eq!(body["request"]["id"], id.as_str());
    // Raw params stay out of the notice: only the preview travels.
    assert!(body["request"].get("params").is_none());
    assert!(verify_webhook(
        &Secret::new("wrong"),
        ts,
        sig,
        &hit.body,
        now,
        WEBHOOK_TOLERANCE
    )
    .is_err());
    let mut forged = hit.body.clone();
    forged.push(b' ');
    assert!(verify_webhook(&secret, ts, sig, &forged, now, WEBHOOK_TOLERANCE).is_err());
    let later = now + Duration::from_secs(3600);
    assert!(verify_webhook(&secret, ts, sig, &hit.body, later, WEBHOOK_TOLERANCE).is_err());
}

#[tokio::test]
async fn a_failing_notifier_never_loses_the_request() {
    let f = Fixture::new();
    let (url, _seen) = local_server(500, "{}").await;
    let (attest, _ledger) = gate_with(&f, WebhookNotifier::new(url, Secret::new("s")));
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    let request = attest.approvals().unwrap().get(&id).unwrap();
    assert_eq!(request.status, Status::Pending);
    assert!(
        request.notify_error.as_deref().unwrap().contains("500"),
        "{:?}",
        request.notify_error
    );

    // Nobody listening at all: still stored.
    let g = Fixture::new();
    let (attest, _ledger) = gate_with(
        &g,
        WebhookNotifier::new("http://127.0.0.1:9/", Secret::new("s")),
    );
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    assert_eq!(attest.approvals().unwrap().pending().unwrap()[0].id, id);
}

#[tokio::test]
async fn slack_gets_a_message_with_approve_and_reject_buttons() {
    let f = Fixture::new();
    let (url, seen) = local_server(200, r#"{"ok":true,"ts":"1.2"}"#).await;
    let slack = SlackNotifier::new(Secret::new("xoxb-test"), "#approvals").with_base_url(&url);
    let (attest, _ledger) = gate_with(&f, slack);
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    let hit = seen.lock().unwrap()[0].clone();
    assert_eq!(hit.path, "/chat.postMessage");
    assert_eq!(hit.header("authorization"), Some("Bearer xoxb-test"));
    let body: Value = serde_json::from_slice(&hit.body).unwrap();
    assert_eq!(body["channel"], "#approvals");
    let buttons = &body["blocks"][2]["elements"];
    assert_eq!(buttons[0]["action_id"], "attest_approve");
    assert_eq!(buttons[1]["action_id"], "attest_reject");
    assert_eq!(buttons[0]["value"], id.as_str());

    let g = Fixture::new();
    let (url, _seen) = local_server(200, r#"{"ok":false,"error":"invalid_auth"}"#).await;
    let slack = SlackNotifier::new(Secret::new("xoxb-bad"), "#approvals").with_base_url(&url);
    let (attest, _ledger) = gate_with(&g, slack);
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    let request = attest.approvals().unwrap().get(&id).unwrap();
    assert!(request.notify_error.unwrap().contains("invalid_auth"));
}

/// A notifier that always fails, to show the error type is usable from outside.
struct Broken;

#[async_trait::async_trait]
impl Notifier for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    async fn notify(&self, _request: &attest_core::ApprovalRequest) -> Result<(), NotifyError> {
        Err(NotifyError::Status {
            notifier: "broken",
            status: 503,
        })
    }
    async fn announce(&self, _notice: &attest_core::approvals::Notice) -> Result<(), NotifyError> {
        Err(NotifyError::Status {
            notifier: "broken",
            status: 503,
        })
    }
}

#[tokio::test]
async fn a_custom_notifier_failure_is_noted_on_the_request() {
    let f = Fixture::new();
    let (attest, _ledger) = gate_with(&f, Broken);
    let (id, _token) = pend(&attest, send(), &Tool::default()).await;
    let request = attest.approvals().unwrap().get(&id).unwrap();
    assert_eq!(
        request.notify_error.as_deref(),
        Some("broken: broken: the receiver answered HTTP 503")
    );
}

/// Refuses everything: a policy changed to `refuse` after an approval was given.
struct RefuseAll;

impl Policy for RefuseAll {
    fn evaluate(&self, _action: &Action) -> Result<Verdict, PolicyError> {
        Ok(Verdict::new(
            Decision::Refuse,
            Risk::VeryHigh,
            "frozen",
            "all sends are frozen",
        ))
    }
}

/// The params of request `id` as the store holds them now.
fn stored_params(f: &Fixture, id: &str) -> Value {
    let conn = rusqlite::Connection::open(f.path()).unwrap();
    let action: String = conn
        .query_row("SELECT action FROM approvals WHERE id = ?1", [id], |row| {
            row.get(0)
        })
        .unwrap();
    serde_json::from_str::<Value>(&action).unwrap()["params"].clone()
}

#[tokio::test]
async fn an_approval_is_bound_to_the_server_tool_method_and_url_of_the_call() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let mut delete = Action::new("github", Verb::Delete).with_target("acme/site");
    delete.extra.server = Some("github".into());
    delete.extra.tool_name = Some("delete_repository".into());
    delete.extra.method = Some("DELETE".into());
    delete.extra.url = Some("https://api.github.com/repos/acme/site".into());
    let (id, token) = pend(&attest, delete.clone(), &tool).await;
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    let moved: [fn(&mut Action); 4] = [
        |a| a.extra.server = Some("github-other-account".into()),
        |a| a.extra.tool_name = Some("delete_repository_v2".into()),
        |a| a.extra.method = Some("POST".into()),
        |a| a.extra.url = Some("https://api.github.com/repos/acme/prod".into()),
    ];
    for change in moved {
        let mut elsewhere = delete.clone();
        elsewhere.id.clone_from(&id);
        change(&mut elsewhere);
        let err = attest
            .call(Start::retry(&token, elsewhere))
            .run(tool.run())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                AttestError::Approval(ApprovalError::DigestMismatch { .. })
            ),
            "{err:?}"
        );
    }
    assert_eq!(tool.calls(), 0);
    let mut same = delete;
    same.id = id;
    attest
        .call(Start::retry(&token, same))
        .run(tool.run())
        .await
        .unwrap()
        .expect_ran();
    assert_eq!(tool.calls(), 1);
}

#[tokio::test]
async fn an_approval_unused_by_its_use_by_time_is_refused_recorded_and_purged() {
    let f = Fixture::new();
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    let decided = attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    let use_by = decided.request.use_by.unwrap();
    assert_eq!(
        use_by
            .duration_since(decided.request.decided_at.unwrap())
            .unwrap(),
        attest_core::approvals::DEFAULT_USE_BY
    );
    f.clock.advance(attest_core::approvals::DEFAULT_USE_BY);
    let outcome = attest.call(&token).run(tool.run()).await.unwrap();
    let Outcome::Expired { receipt, .. } = outcome else {
        panic!("expected expired, got {outcome:?}")
    };
    assert_eq!(tool.calls(), 0);
    let outcome = row(&ledger, receipt.seq);
    assert_eq!(outcome["confirm"]["outcome"], "expired");
    assert_eq!(outcome["confirm"]["approver"], "maria");
    assert_eq!(rows(&ledger), 2);
    // Ended, so its params are gone from the store; a second resume says so.
    assert_eq!(stored_params(&f, &id), json!({}));
    let outcome = attest.call(&token).run(tool.run()).await;
    assert!(
        matches!(outcome, Ok(Outcome::Expired { .. })),
        "{outcome:?}"
    );
    assert_eq!(rows(&ledger), 2);
}

#[tokio::test]
async fn policy_is_asked_again_at_resume_and_a_refusal_wins() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    // The rule changed to refuse after the approval; the agent resumes under it.
    let ledger = Arc::new(Ledger::open(f.path(), LedgerOptions::default()).unwrap());
    let clock: Arc<dyn Clock> = f.clock.clone();
    let store = Arc::new(ApprovalStore::open_with_clock(&ledger, clock).unwrap());
    let frozen = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .policy(RefuseAll)
        .approvals(store)
        .agent("bot")
        .build()
        .unwrap();
    let outcome = frozen.call(&token).run(tool.run()).await.unwrap();
    let Outcome::Refused { receipt } = outcome else {
        panic!("expected refused, got {outcome:?}")
    };
    assert_eq!(tool.calls(), 0);
    let outcome = row(&ledger, receipt.seq);
    assert_eq!(outcome["decision"], "refuse");
    assert!(
        outcome["reasons"].to_string().contains("frozen"),
        "{outcome}"
    );
    // The approval was used up by that attempt: it cannot run later either.
    assert!(attest.call(&token).run(tool.run()).await.is_err());
    assert_eq!(tool.calls(), 0);
}

#[tokio::test]
async fn held_params_are_purged_once_used_rejected_or_expired() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (used, token) = pend(&attest, send(), &tool).await;
    let (rejected, _) = pend(&attest, send(), &tool).await;
    let (waiting, _) = pend(&attest, send(), &tool).await;
    assert_eq!(stored_params(&f, &used)["body"], "hi");
    attest
        .decide(&used, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    attest
        .decide(&rejected, Answer::reject("maria", "cli"))
        .await
        .unwrap();
    assert_eq!(stored_params(&f, &used), json!({}));
    assert_eq!(stored_params(&f, &rejected), json!({}));
    // A request still waiting keeps what it needs to run.
    assert_eq!(stored_params(&f, &waiting)["body"], "hi");
    // The store still answers for the used one, without its params.
    let request = attest.approvals().unwrap().get(&used).unwrap();
    assert!(request.purged && request.consumed);
    assert!(attest.call(&token).run(tool.run()).await.is_err());
    assert_eq!(tool.calls(), 1);
    // Nobody decided in time: expired, recorded, and purged too.
    f.clock.advance(Duration::from_secs(601));
    assert_eq!(attest.expire_due().await.unwrap().len(), 1);
    assert_eq!(stored_params(&f, &waiting), json!({}));
}

#[tokio::test]
async fn a_version_1_store_is_upgraded_and_its_requests_still_resume() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    drop(attest);
    // What an older release left: no use-by, purge or tenant columns, the old digest.
    let conn = rusqlite::Connection::open(f.path()).unwrap();
    conn.execute_batch(
        "ALTER TABLE approvals DROP COLUMN remind_at;
         ALTER TABLE approvals DROP COLUMN escalate_at;
         ALTER TABLE approvals DROP COLUMN reminded_at;
         ALTER TABLE approvals DROP COLUMN escalated_at;
         ALTER TABLE approvals DROP COLUMN approved_by;
         DROP TABLE approval_decisions;
         ALTER TABLE approvals DROP COLUMN use_by_ms;
         ALTER TABLE approvals DROP COLUMN purged_at;
         ALTER TABLE approvals DROP COLUMN tenant;
         ALTER TABLE approvers DROP COLUMN tenant;
         UPDATE approvals SET digest = 'v1-digest', approved_digest = 'v1-digest';
         UPDATE attest_meta SET value = '1' WHERE key = 'approvals_schema_version';",
    )
    .unwrap();
    drop(conn);
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    assert!(blocking(|| ledger.verify()).unwrap().is_intact());
}

#[tokio::test]
async fn a_version_2_store_gets_its_tenant_column_and_keeps_its_approvers() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    drop(attest);
    // What the release before tenants left: the same tables without the tenant column.
    let conn = rusqlite::Connection::open(f.path()).unwrap();
    conn.execute_batch(
        "ALTER TABLE approvals DROP COLUMN remind_at;
         ALTER TABLE approvals DROP COLUMN escalate_at;
         ALTER TABLE approvals DROP COLUMN reminded_at;
         ALTER TABLE approvals DROP COLUMN escalated_at;
         ALTER TABLE approvals DROP COLUMN approved_by;
         DROP TABLE approval_decisions;
         ALTER TABLE approvals DROP COLUMN tenant;
         ALTER TABLE approvers DROP COLUMN tenant;
         UPDATE attest_meta SET value = '2' WHERE key = 'approvals_schema_version';",
    )
    .unwrap();
    drop(conn);
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    // The approvers registered before the upgrade still decide.
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    assert!(ledger.verify().unwrap().is_intact());
}

#[tokio::test]
async fn decided_lists_the_newest_decisions_first() {
    newest_decisions_first(&Fixture::new()).await;
}

#[tokio::test]
async fn decided_lists_the_newest_decisions_first_on_postgres() {
    if let Some(f) = Fixture::postgres("decided_lists_the_newest_decisions_first") {
        newest_decisions_first(&f).await;
        f.close();
    }
}

async fn newest_decisions_first(f: &Fixture) {
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (first, _) = pend(&attest, send(), &tool).await;
    let (second, _) = pend(&attest, send(), &tool).await;
    let store = attest.approvals().unwrap();
    assert!(store.decided(10).unwrap().is_empty());
    attest
        .decide(&first, Answer::reject("maria", "cli").with_note("no"))
        .await
        .unwrap();
    f.clock.advance(Duration::from_secs(1));
    attest
        .decide(&second, Answer::approve("ann", "cli"))
        .await
        .unwrap();
    let decided = store.decided(10).unwrap();
    let seen: Vec<(&str, Status, Option<&str>)> = decided
        .iter()
        .map(|r| (r.id.as_str(), r.status, r.approver.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (second.as_str(), Status::Approved, Some("ann")),
            (first.as_str(), Status::Rejected, Some("maria")),
        ]
    );
    assert_eq!(store.decided(1).unwrap().len(), 1);
    assert!(store.pending().unwrap().is_empty());
}

/// Payments need two of finance; unanswered, they remind after 1 h, escalate to the CFO
/// after 2 h and expire after 3 h.
const QUORUM_POLICY: &str = "version: 1
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

fn quorum_policy() -> attest_policy::PolicyEngine {
    attest_policy::PolicyEngine::from_yaml(QUORUM_POLICY, "attest.yaml").unwrap()
}

/// A payment asked for by Ann, who is in finance herself.
fn payment_by_ann() -> Action {
    Action::new("stripe", Verb::Pay)
        .with_target("acct_42")
        .with_actor("ann@acme.com")
        .with_params(json!({"amount": 900, "currency": "usd"}))
}

/// Ann, who asked for the payment, approves it herself: refused as her own request.
async fn own_approval_is_refused(attest: &Attest, id: &str) {
    let own = attest
        .decide(id, Answer::approve("ann@acme.com", "cli"))
        .await;
    assert!(matches!(
        approval_error(own),
        ApprovalError::OwnRequest { .. }
    ));
}

fn approval_error(result: Result<attest_core::Decided, AttestError>) -> ApprovalError {
    match result {
        Err(AttestError::Approval(err)) => err,
        other => panic!("expected an approval error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_quorum_needs_two_other_members_and_names_them_in_the_row() {
    quorum_of_two(&Fixture::new()).await;
}

#[tokio::test]
async fn a_quorum_needs_two_other_members_and_names_them_in_the_row_on_postgres() {
    if let Some(f) = Fixture::postgres("a_quorum_needs_two_other_members") {
        quorum_of_two(&f).await;
        f.close();
    }
}

async fn quorum_of_two(f: &Fixture) {
    let (attest, ledger) = f.attest(quorum_policy(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, payment_by_ann(), &tool).await;
    // The actor's own approval never counts, though she is in finance.
    own_approval_is_refused(&attest, &id).await;
    // Nor does anyone outside finance.
    let outsider = attest.decide(&id, Answer::approve("maria", "cli")).await;
    assert!(matches!(
        approval_error(outsider),
        ApprovalError::NotAnApprover { .. }
    ));
    // One approval: still pending, and it says so.
    let one = attest
        .decide(
            &id,
            Answer::approve("raj@acme.com", "inbox").with_note("ok by me"),
        )
        .await
        .unwrap();
    assert_eq!(one.request.status, Status::Pending);
    assert!(one.receipt.is_none());
    let progress = one.request.progress();
    assert_eq!((progress.have, progress.need), (1, 2));
    assert_eq!(progress.text(), "1 of 2 approvals, waiting for finance");
    assert_eq!(one.request.summary()["approvals"]["have"], 1);
    assert_eq!(one.request.summary()["approvals"]["need"], 2);
    // Held, not run, while waiting.
    match attest.call(&token).run(tool.run()).await.unwrap() {
        Outcome::Held { .. } => {}
        other => panic!("expected held, got {other:?}"),
    }
    // The same person twice counts once.
    let again = attest
        .decide(&id, Answer::approve("raj@acme.com", "cli"))
        .await;
    assert!(matches!(
        approval_error(again),
        ApprovalError::AlreadyVoted { .. }
    ));
    // A second member meets it, a minute later.
    f.clock.advance(Duration::from_secs(60));
    let two = attest
        .decide(&id, Answer::approve("bob@acme.com", "slack"))
        .await
        .unwrap();
    assert_eq!(two.request.status, Status::Approved);
    assert_eq!(two.request.approved_by, ["raj@acme.com", "bob@acme.com"]);
    let votes: Vec<(&str, bool, &str, Option<&str>)> = two
        .request
        .votes
        .iter()
        .map(|v| {
            (
                v.approver.as_str(),
                v.approve,
                v.channel.as_str(),
                v.note.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        votes,
        [
            ("raj@acme.com", true, "inbox", Some("ok by me")),
            ("bob@acme.com", true, "slack", None),
        ]
    );
    let late = attest
        .decide(&id, Answer::reject("cfo@acme.com", "cli"))
        .await;
    assert!(matches!(
        approval_error(late),
        ApprovalError::NotAnApprover { .. } | ApprovalError::AlreadyDecided { .. }
    ));
    let receipt = resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    let outcome = row(&ledger, receipt.seq);
    assert_eq!(outcome["confirm"]["approver"], "bob@acme.com");
    assert_eq!(
        outcome["confirm"]["approvers"],
        json!(["raj@acme.com", "bob@acme.com"])
    );
    // Used once.
    assert!(attest.call(&token).run(tool.run()).await.is_err());
    assert_eq!(tool.calls(), 1);
    assert!(blocking(|| ledger.verify()).unwrap().is_intact());
}

#[tokio::test]
async fn a_rejection_ends_a_quorum() {
    quorum_rejected(&Fixture::new()).await;
}

#[tokio::test]
async fn a_rejection_ends_a_quorum_on_postgres() {
    if let Some(f) = Fixture::postgres("a_rejection_ends_a_quorum") {
        quorum_rejected(&f).await;
        f.close();
    }
}

async fn quorum_rejected(f: &Fixture) {
    let (attest, ledger) = f.attest(quorum_policy(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, payment_by_ann(), &tool).await;
    attest
        .decide(&id, Answer::approve("raj@acme.com", "cli"))
        .await
        .unwrap();
    let rejected = attest
        .decide(
            &id,
            Answer::reject("bob@acme.com", "cli").with_note("wrong account"),
        )
        .await
        .unwrap();
    assert_eq!(rejected.request.status, Status::Rejected);
    let receipt = rejected.receipt.expect("a rejection is recorded at once");
    assert_eq!(row(&ledger, receipt.seq)["confirm"]["outcome"], "rejected");
    assert!(matches!(
        attest.call(&token).run(tool.run()).await,
        Ok(Outcome::Rejected { .. })
    ));
    assert_eq!(tool.calls(), 0);
    let after = attest
        .decide(&id, Answer::approve("cat@acme.com", "cli"))
        .await;
    assert!(matches!(
        approval_error(after),
        ApprovalError::AlreadyDecided { .. } | ApprovalError::NotAnApprover { .. }
    ));
}

#[tokio::test]
async fn reminders_and_escalations_fire_once_and_expiry_follows_the_rule() {
    follow_ups_once(&Fixture::new()).await;
}

#[tokio::test]
async fn reminders_and_escalations_fire_once_and_expiry_follows_the_rule_on_postgres() {
    if let Some(f) = Fixture::postgres("reminders_and_escalations_fire_once") {
        follow_ups_once(&f).await;
        f.close();
    }
}

async fn follow_ups_once(f: &Fixture) {
    let (attest, ledger) = f.attest(quorum_policy(), Duration::ZERO);
    // A second pipeline on the same store, as a second server would open it.
    let (other, _other_ledger) = f.attest(quorum_policy(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, payment_by_ann(), &tool).await;
    let request = attest.approvals().unwrap().get(&id).unwrap();
    // The rule's expire_after (3 h) replaces the gate's wait (10 minutes here).
    let ttl = request
        .expires_at
        .duration_since(request.requested_at)
        .unwrap();
    assert_eq!(ttl, Duration::from_secs(3 * 3600));
    let steps = |attest: &Attest| {
        let attest = attest.clone();
        async move {
            attest
                .follow_ups_due()
                .await
                .unwrap()
                .into_iter()
                .map(|(r, step)| (r.id, step))
                .collect::<Vec<_>>()
        }
    };
    assert!(steps(&attest).await.is_empty());
    // The CFO may not decide before the escalation.
    let early = attest
        .decide(&id, Answer::approve("cfo@acme.com", "cli"))
        .await;
    assert!(matches!(
        approval_error(early),
        ApprovalError::NotAnApprover { .. }
    ));
    // An hour on: one reminder, to whichever asks first, never twice.
    f.clock.advance(Duration::from_secs(3600));
    assert_eq!(steps(&attest).await, [(id.clone(), FollowUp::Reminder)]);
    assert!(steps(&other).await.is_empty());
    assert!(steps(&attest).await.is_empty());
    // Two hours on: one escalation, this time to the other server.
    f.clock.advance(Duration::from_secs(3600));
    assert_eq!(steps(&other).await, [(id.clone(), FollowUp::Escalation)]);
    assert!(steps(&attest).await.is_empty());
    assert!(steps(&other).await.is_empty());
    // Escalated: the CFO may decide now, and counts towards the two.
    let cfo = attest
        .decide(&id, Answer::approve("cfo@acme.com", "cli"))
        .await
        .unwrap();
    assert_eq!(cfo.request.status, Status::Pending);
    assert!(cfo.request.escalated_at.is_some() && cfo.request.reminded_at.is_some());
    assert_eq!(
        cfo.request.progress().text(),
        "1 of 2 approvals, waiting for finance, cfo@acme.com"
    );
    // Three hours on: expired, recorded once, and the agent is told.
    f.clock.advance(Duration::from_secs(3600));
    let expired = other.expire_due().await.unwrap();
    assert_eq!(expired.len(), 1);
    assert!(attest.expire_due().await.unwrap().is_empty());
    assert_eq!(
        row(&ledger, expired[0].seq)["confirm"]["outcome"],
        "expired"
    );
    assert!(matches!(
        attest.call(&token).run(tool.run()).await,
        Ok(Outcome::Expired { .. })
    ));
    assert_eq!(tool.calls(), 0);
    assert!(steps(&attest).await.is_empty());
    assert!(blocking(|| ledger.verify()).unwrap().is_intact());
    drop((attest, other));
}

/// Set in a quorum worker: the resume token it tries after deciding.
const WORKER_TOKEN: &str = "ATTEST_TEST_DECIDE_TOKEN";

#[tokio::test]
async fn two_processes_approving_a_quorum_at_once_run_it_once() {
    processes_meet_a_quorum(|| Some(Fixture::new())).await;
}

#[tokio::test]
async fn two_processes_approving_a_quorum_at_once_run_it_once_on_postgres() {
    processes_meet_a_quorum(|| Fixture::postgres("two_processes_approving_a_quorum")).await;
}

async fn processes_meet_a_quorum(fixture: impl Fn() -> Option<Fixture>) {
    let exe = std::env::current_exe().unwrap();
    let people = ["raj@acme.com", "bob@acme.com"];
    for round in 0..3 {
        let Some(f) = fixture() else { return };
        let (attest, ledger) = f.attest(quorum_policy(), Duration::ZERO);
        let (id, token) = pend(&attest, payment_by_ann(), &Tool::default()).await;
        let go = SystemTime::now() + Duration::from_millis(700);
        let go_ms = go
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        // Both approve at the same instant, then each tries to run the payment.
        let children: Vec<_> = people
            .iter()
            .map(|who| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "approvals::quorum_worker",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env(WORKER_LEDGER, f.path())
                    .env(WORKER_ID, &id)
                    .env(WORKER_WHO, who)
                    .env(WORKER_GO, go_ms.to_string())
                    .env(WORKER_TOKEN, token.expose())
                    .output()
            })
            .collect();
        let mut ran = 0;
        for child in children {
            let out = child.unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains("QUORUM-VOTED"), "round {round}: {text}");
            ran += text.matches("QUORUM-RAN").count();
        }
        assert_eq!(ran, 1, "round {round}: the payment runs exactly once");
        let request = attest.approvals().unwrap().get(&id).unwrap();
        assert_eq!(request.status, Status::Approved);
        assert!(request.consumed);
        let mut by = request.approved_by.clone();
        by.sort();
        assert_eq!(by, ["bob@acme.com", "raj@acme.com"]);
        // The ask, the intent, the outcome: one run.
        assert_eq!(rows(&ledger), 3);
        assert!(blocking(|| ledger.verify()).unwrap().is_intact());
        drop((attest, ledger));
        f.close();
    }
}

/// The child half of the quorum race: approves, then resumes with the token once.
#[test]
#[ignore = "a child process of two_processes_approving_a_quorum_at_once_run_it_once"]
fn quorum_worker() {
    let token = ResumeToken::new(std::env::var(WORKER_TOKEN).expect("run by the parent test"));
    let (runtime, attest, id, who) = worker(quorum_policy());
    match runtime.block_on(attest.decide(&id, Answer::approve(&who, "cli"))) {
        Ok(decided) => println!("QUORUM-VOTED {}", decided.request.status),
        Err(other) => panic!("{other:?}"),
    }
    let outcome = runtime.block_on(
        attest
            .call(&token)
            .run(|_| async { Ok::<_, ToolError>(json!({"id": "py_1"})) }),
    );
    match outcome {
        Ok(Outcome::Ran { .. }) => println!("QUORUM-RAN"),
        Ok(Outcome::Held { .. }) => println!("QUORUM-HELD"),
        Err(AttestError::Approval(ApprovalError::AlreadyUsed { .. })) => println!("QUORUM-USED"),
        other => panic!("{other:?}"),
    }
}

/// What the release before quorums left (approvals schema 3): no decisions table, no
/// reminder, escalation or approved-by columns.
const BACK_TO_VERSION_3: &str = "
ALTER TABLE approvals DROP COLUMN remind_at;
ALTER TABLE approvals DROP COLUMN escalate_at;
ALTER TABLE approvals DROP COLUMN reminded_at;
ALTER TABLE approvals DROP COLUMN escalated_at;
ALTER TABLE approvals DROP COLUMN approved_by;
DROP TABLE approval_decisions;
UPDATE attest_meta SET value = '3' WHERE key = 'approvals_schema_version';";

#[tokio::test]
async fn a_version_3_store_gets_decisions_and_its_requests_still_resume() {
    let f = Fixture::new();
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    drop(attest);
    let conn = rusqlite::Connection::open(f.path()).unwrap();
    conn.execute_batch(BACK_TO_VERSION_3).unwrap();
    drop(conn);
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    let decided = attest
        .decide(&id, Answer::approve("maria", "cli").with_note("fine"))
        .await
        .unwrap();
    assert_eq!(decided.request.votes.len(), 1);
    assert_eq!(decided.request.votes[0].note.as_deref(), Some("fine"));
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    assert!(blocking(|| ledger.verify()).unwrap().is_intact());
}

#[tokio::test]
async fn a_version_3_store_on_postgres_gets_decisions_and_its_requests_still_resume() {
    let Some(f) = Fixture::postgres("a_version_3_store_gets_decisions") else {
        return;
    };
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, send(), &tool).await;
    let url = f.path().display().to_string();
    blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(
                "ALTER TABLE approvals DROP COLUMN remind_at, DROP COLUMN escalate_at,
                     DROP COLUMN reminded_at, DROP COLUMN escalated_at, DROP COLUMN approved_by;
                 DROP TABLE approval_decisions;
                 UPDATE attest_meta SET value = '3'
                 WHERE tenant = '' AND key = 'approvals_schema_version';",
            )
            .unwrap();
    });
    let (attest, ledger) = f.attest(anyone(), Duration::ZERO);
    attest
        .decide(&id, Answer::approve("maria", "cli"))
        .await
        .unwrap();
    resume_ran(&attest, &token, &tool).await;
    assert_eq!(tool.calls(), 1);
    assert!(blocking(|| ledger.verify()).unwrap().is_intact());
    drop((attest, ledger));
    f.close();
}

#[tokio::test]
async fn one_answer_at_a_gate_never_meets_a_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let ledger =
        Arc::new(Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap());
    let attest = Attest::builder()
        .ledger(Arc::clone(&ledger))
        .policy(quorum_policy())
        .gate(attest_core::AutoGate::approve("raj@acme.com"))
        .agent("bot")
        .build()
        .unwrap();
    let tool = Tool::default();
    let outcome = attest.call(payment_by_ann()).run(tool.run()).await.unwrap();
    assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
    assert_eq!(tool.calls(), 0);
    let last = row(&ledger, rows(&ledger));
    assert_eq!(last["confirm"]["outcome"], "rejected");
    assert!(
        last["confirm"]["note"].as_str().unwrap().contains("quorum"),
        "{last}"
    );
}

/// Agents (`ApprovalStore::add_agent` …): a token names its agent until revoked, only its
/// hash is kept, names match without regard to case, and a tenant's agents are its own.
fn agents_are_named_by_their_token_until_revoked(f: &Fixture) {
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let store = attest.approvals().unwrap();
    let (agent, token) = store.add_agent("billing-bot").unwrap();
    assert_eq!(agent.name, "billing-bot");
    assert!(token.expose().starts_with(AGENT_TOKEN_PREFIX));
    assert!(!format!("{token:?}").contains(&token.expose()[4..]));
    assert_eq!(
        store.authenticate_agent(token.expose()).unwrap().name,
        "billing-bot"
    );
    // Another process on the same ledger knows it too.
    let (again, _ledger) = f.attest(anyone(), Duration::ZERO);
    let other = again.approvals().unwrap();
    assert_eq!(
        other.authenticate_agent(token.expose()).unwrap().name,
        "billing-bot"
    );
    for forged in ["atg_0000", "", &token.expose()[..20]] {
        assert!(matches!(
            store.authenticate_agent(forged),
            Err(ApprovalError::BadCredential)
        ));
    }
    assert!(matches!(
        store.add_agent("Billing-Bot"),
        Err(ApprovalError::BadAgent { .. })
    ));
    assert!(matches!(
        store.add_agent(" "),
        Err(ApprovalError::BadAgent { .. })
    ));
    let revoked = store.revoke_agent("BILLING-BOT").unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(matches!(
        store.authenticate_agent(token.expose()),
        Err(ApprovalError::BadCredential)
    ));
    assert!(matches!(
        store.revoke_agent("billing-bot"),
        Err(ApprovalError::UnknownAgent { .. })
    ));
    // Added again: a new token, and the old one still names nobody.
    let (_, renewed) = store.add_agent("billing-bot").unwrap();
    assert_ne!(renewed.expose(), token.expose());
    assert!(store.authenticate_agent(token.expose()).is_err());
    assert_eq!(
        store.authenticate_agent(renewed.expose()).unwrap().name,
        "billing-bot"
    );
    let list = store.agents().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].revoked_at, None);
}

#[test]
fn agents_are_named_by_their_token_until_revoked_on_sqlite() {
    agents_are_named_by_their_token_until_revoked(&Fixture::new());
}

#[test]
fn agents_are_named_by_their_token_until_revoked_on_postgres() {
    let Some(mut f) = Fixture::postgres("agents_named_by_token") else {
        return;
    };
    f.tenant = Some("acme".to_owned());
    agents_are_named_by_their_token_until_revoked(&f);
    // Another tenant in the same database has none of acme's agents.
    let other = Ledger::open(
        f.path(),
        LedgerOptions {
            tenant: Some("globex".to_owned()),
            ..LedgerOptions::default()
        },
    )
    .unwrap();
    let store = ApprovalStore::open(&other).unwrap();
    assert!(store.agents().unwrap().is_empty());
    f.close();
}

/// A PostgreSQL database made before agents were kept (its approval tables at this
/// version, no `agents` table) gets the table when a store opens, and keeps its approvers.
#[test]
fn a_postgres_store_made_before_agents_gets_their_table() {
    let Some(f) = Fixture::postgres("store_before_agents") else {
        return;
    };
    let (attest, _ledger) = f.attest(anyone(), Duration::ZERO);
    let before = attest.approvals().unwrap().approvers().unwrap().len();
    let mut client =
        postgres::Client::connect(&f.path().display().to_string(), postgres::NoTls).unwrap();
    client.batch_execute("DROP TABLE agents").unwrap();
    drop(client);
    let (again, _ledger) = f.attest(anyone(), Duration::ZERO);
    let store = again.approvals().unwrap();
    let (_, token) = store.add_agent("late-bot").unwrap();
    assert_eq!(
        store.authenticate_agent(token.expose()).unwrap().name,
        "late-bot"
    );
    assert_eq!(store.approvers().unwrap().len(), before);
    f.close();
}

/// Payments are asked about, anyone registered may decide: no quorum.
const ONE_APPROVER_POLICY: &str = "version: 1
policies:
  - name: payments
    match: {verb: pay}
    decision: ask
    reason: payments need a person
";

#[tokio::test]
async fn without_a_quorum_the_actor_may_withdraw_her_request_but_never_approve_it() {
    let f = Fixture::new();
    let policy =
        attest_policy::PolicyEngine::from_yaml(ONE_APPROVER_POLICY, "attest.yaml").unwrap();
    let (attest, _ledger) = f.attest(policy, Duration::ZERO);
    let tool = Tool::default();
    let (id, token) = pend(&attest, payment_by_ann(), &tool).await;
    // Ann asked for it: her approval is refused, and the request still waits.
    own_approval_is_refused(&attest, &id).await;
    match attest.call(&token).run(tool.run()).await {
        Ok(Outcome::Held { .. }) => {}
        other => panic!("her own approval leaves it held, got {other:?}"),
    }
    // Someone else approves it: it runs once.
    let decided = attest
        .decide(&id, Answer::approve("raj@acme.com", "cli"))
        .await
        .unwrap();
    assert_eq!(decided.request.approver.as_deref(), Some("raj@acme.com"));
    assert!(matches!(
        attest.call(&token).run(tool.run()).await,
        Ok(Outcome::Ran { .. })
    ));
    assert_eq!(tool.calls(), 1);
    // Her next request she may withdraw herself.
    let (second, token) = pend(&attest, payment_by_ann(), &tool).await;
    let withdrawn = attest
        .decide(&second, Answer::reject("ann@acme.com", "cli"))
        .await
        .unwrap();
    assert_eq!(withdrawn.request.status, Status::Rejected);
    assert!(matches!(
        attest.call(&token).run(tool.run()).await,
        Ok(Outcome::Rejected { .. })
    ));
    assert_eq!(tool.calls(), 1);
}

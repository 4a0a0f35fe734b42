//! Bounded grants (issue 51, item 4), through real processes: `attest gateway`
//! processes on one ledger (a SQLite file, or a PostgreSQL database) with agents named by
//! their tokens, a fake refund vendor on 127.0.0.1, and `attest confirm --grant`,
//! `attest grants list|revoke`, `attest export` and `attest verify` as their own
//! processes. A grant for N calls covers N calls and then the next one asks; a call whose
//! params are outside its condition asks; a revocation from another process makes the
//! next call ask; another agent is never covered; and callers racing through eight
//! gateway processes never use more than N.

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, serve_app, start_gateway_on, Gateway};
use crate::identity::write_config;
use crate::{attest, expect_ok, stderr};

/// What reached the fake refund vendor: each refund's amount.
type Refunds = Arc<Mutex<Vec<f64>>>;

async fn refund(
    State(refunds): State<Refunds>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut refunds = refunds.lock().unwrap();
    refunds.push(body["amount"].as_f64().unwrap_or(f64::NAN));
    let id = format!("re_{}", refunds.len());
    (StatusCode::CREATED, Json(json!({"id": id, "ok": true})))
}

/// Refunds ask a person (`POST /v1/refunds` is detected as `unknown.pay`).
const POLICY: &str = "version: 1
policies:
  - name: refunds
    match: {verb: pay}
    decision: ask
    reason: refunds ask a person
";

/// The grant of the issue's example: up to 50 EUR each.
const EUR_50: &str = r#"when=params.amount <= 50 && params.currency == "EUR""#;

/// A ledger with two agents and the approver ann, `gateways` gateways on it in front of
/// the refund vendor.
struct Desk {
    dir: tempfile::TempDir,
    ledger: String,
    bot: String,
    other: String,
    addresses: Vec<String>,
    refunds: Refunds,
    _gateways: Vec<Gateway>,
}

impl Desk {
    fn open(ledger: Option<String>, gateways: usize) -> Desk {
        let dir = tempfile::tempdir().unwrap();
        let ledger = ledger.unwrap_or_else(|| "ledger.sqlite".to_owned());
        std::fs::write(dir.path().join("policy.yaml"), POLICY).unwrap();
        write_config(dir.path(), "agents: {unauthenticated: refuse}\n");
        let add = |name: &str| -> String {
            let out = expect_ok(&attest(
                dir.path(),
                &["--ledger", &ledger, "agents", "add", name, "--json"],
            ));
            let added: Value = serde_json::from_str(&out).unwrap();
            added["token"].as_str().unwrap().to_owned()
        };
        let bot = add("refund-bot");
        let other = add("other-bot");
        expect_ok(&attest(
            dir.path(),
            &[
                "--ledger",
                &ledger,
                "approvers",
                "add",
                "ann",
                "--token-file",
                "ann.token",
            ],
        ));
        let refunds = Refunds::default();
        let vendor = Arc::clone(&refunds);
        let upstream = serve_app(move || {
            Router::new()
                .route("/v1/refunds", post(refund))
                .with_state(vendor)
        });
        let (running, addresses) = (0..gateways)
            .map(|_| start_gateway_on(dir.path(), &ledger, &upstream, &["--mode", "pending"], &[]))
            .unzip();
        Desk {
            dir,
            ledger,
            bot,
            other,
            addresses,
            refunds,
            _gateways: running,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A refund of `amount` in `currency` through gateway `gw` with the agent `token`:
    /// (status, body).
    fn refund(
        &self,
        gw: usize,
        token: &str,
        amount: f64,
        currency: &str,
        n: usize,
    ) -> (u16, Value) {
        let (status, _, body) = curl(
            "POST",
            &format!("{}/v1/refunds", self.addresses[gw % self.addresses.len()]),
            // Each refund its own call: identical calls in flight would be held as retries.
            Some(
                &json!({"amount": amount, "currency": currency, "description": format!("refund {n}")}),
            ),
            &["-H", &format!("X-Attest-Token: {token}")],
        );
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// `attest ARGS` on this desk's ledger.
    fn attest(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["--ledger", self.ledger.as_str()];
        all.extend_from_slice(args);
        attest(self.path(), &all)
    }

    /// A refund held for a person, approved by ann with `--grant spec`: the grant's id.
    fn grant(&self, n: usize, spec: &str) -> String {
        let (status, held) = self.refund(0, &self.bot, 40.0, "EUR", n);
        assert_eq!(status, 202, "{held}");
        let id = held["id"].as_str().unwrap();
        let out = self.attest(&[
            "confirm",
            id,
            "approve",
            "--token-file",
            "ann.token",
            "--grant",
            spec,
        ]);
        let said = expect_ok(&out);
        assert!(said.contains(" granted: "), "{said}");
        let grant = said
            .lines()
            .find_map(|line| {
                line.split(" granted: ")
                    .next()
                    .filter(|g| g.starts_with("grant-"))
            })
            .unwrap()
            .to_owned();
        grant
    }

    /// The grants as `attest grants list --json` lists them.
    fn grants(&self) -> Vec<Value> {
        serde_json::from_str(&expect_ok(&self.attest(&["grants", "list", "--json"]))).unwrap()
    }

    /// Every row, from `attest export`.
    fn rows(&self) -> Vec<Value> {
        expect_ok(&self.attest(&["export"]))
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn verify(&self) {
        let out = self.attest(&["verify"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }

    fn refunded(&self) -> usize {
        self.refunds.lock().unwrap().len()
    }
}

/// The reasons of a held call's receipt, as one text.
fn reasons(held: &Value) -> String {
    held["receipt"]["reasons"].to_string()
}

#[test]
fn a_grant_covers_its_calls_within_its_condition_then_asks_and_a_revocation_from_another_process_ends_it(
) {
    if curl_missing() {
        return;
    }
    let desk = Desk::open(None, 1);
    let grant = desk.grant(0, &format!("calls=3,for=1h,{EUR_50}"));
    let listed = desk.grants();
    assert_eq!(listed[0]["id"], grant.as_str(), "{listed:?}");
    assert_eq!(listed[0]["agent"], "refund-bot");
    assert_eq!(listed[0]["agent_auth"], "token");
    assert_eq!(
        (listed[0]["calls"].as_u64(), listed[0]["used"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(listed[0]["state"], "active");

    // Outside the condition: more than 50, or not EUR. Asked about, and the reason says why.
    let (status, held) = desk.refund(0, &desk.bot, 80.0, "EUR", 1);
    assert_eq!(status, 202, "{held}");
    assert!(
        reasons(&held).contains(&format!(
            "grant {grant} not used: the params are outside its condition"
        )),
        "{held}"
    );
    let (status, held) = desk.refund(0, &desk.bot, 10.0, "USD", 2);
    assert_eq!(status, 202, "{held}");
    // Another agent is never covered by refund-bot's grant.
    let (status, held) = desk.refund(0, &desk.other, 10.0, "EUR", 3);
    assert_eq!(status, 202, "{held}");
    assert!(!reasons(&held).contains(&grant), "{held}");
    assert_eq!(desk.refunded(), 0);

    // Three calls inside it run; the fourth asks, the grant used up.
    for n in 0..3 {
        let (status, ran) = desk.refund(0, &desk.bot, 50.0, "EUR", 10 + n);
        assert_eq!(status, 201, "call {n}: {ran}");
    }
    assert_eq!(desk.refunded(), 3);
    let (status, held) = desk.refund(0, &desk.bot, 5.0, "EUR", 20);
    assert_eq!(status, 202, "{held}");
    assert!(
        reasons(&held).contains(&format!("grant {grant} not used: used up (3 of 3 calls)")),
        "{held}"
    );
    assert_eq!(desk.grants()[0]["used"], 3);

    // A second grant; revoked by another process, the next call asks.
    let second = desk.grant(30, "calls=5,for=1h");
    let (status, ran) = desk.refund(0, &desk.bot, 20.0, "EUR", 31);
    assert_eq!(status, 201, "{ran}");
    let revoked = expect_ok(&desk.attest(&["grants", "revoke", &second]));
    assert!(revoked.contains(&format!("{second} revoked")), "{revoked}");
    let (status, held) = desk.refund(0, &desk.bot, 20.0, "EUR", 32);
    assert_eq!(status, 202, "{held}");
    assert!(
        reasons(&held).contains(&format!("grant {second} not used: revoked at")),
        "{held}"
    );
    let again = desk.attest(&["grants", "revoke", &second]);
    assert_eq!(again.status.code(), Some(1), "a grant is revoked once");
    assert_eq!(desk.refunded(), 4);

    // The ledger holds each grant's row, each use, and the revocation; it verifies.
    let rows = desk.rows();
    let of = |id: &str, event: &str| -> Vec<&Value> {
        rows.iter()
            .filter(|row| row["grant"]["id"] == id && row["grant"]["event"] == event)
            .collect()
    };
    let issued = of(&grant, "issued");
    assert_eq!(issued.len(), 1, "{rows:#?}");
    assert_eq!(issued[0]["action_id"], grant.as_str());
    assert_eq!(issued[0]["agent"], "refund-bot");
    assert_eq!(issued[0]["grant"]["calls"], 3);
    assert_eq!(
        issued[0]["grant"]["when"],
        r#"params.amount <= 50 && params.currency == "EUR""#
    );
    assert_eq!(issued[0]["confirm"]["approver"], "ann");
    let uses: Vec<u64> = of(&grant, "used")
        .iter()
        .filter(|row| row["execution"]["status"] == "ok")
        .map(|row| {
            assert_eq!(row["confirm"]["approver"], "ann", "{row}");
            assert_eq!(row["confirm"]["channel"], "grant", "{row}");
            row["grant"]["use"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(uses, [1, 2, 3]);
    assert_eq!(of(&second, "revoked").len(), 1);
    // `attest ledger` names the grant's rows and each use.
    let listed = expect_ok(&desk.attest(&["ledger", "--limit", "100"]));
    assert!(
        listed.contains(&format!("grant {grant} issued")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("approved by ann, ran, grant {grant} use 3")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("grant {second} revoked")),
        "{listed}"
    );
    desk.verify();
}

/// 16 refunds from 8 threads at once through `gateways` gateway processes on `ledger`,
/// under a grant for 5 calls: exactly 5 run.
fn racing_callers_never_use_more_than_the_grants_calls(ledger: Option<String>) {
    let desk = Desk::open(ledger, 8);
    let grant = desk.grant(0, &format!("calls=5,for=1h,{EUR_50}"));
    let desk = &desk;
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                scope.spawn(move || {
                    (0..2)
                        .map(|i| desk.refund(t, &desk.bot, 10.0, "EUR", 100 + t * 2 + i))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let ran = answers.iter().filter(|(status, _)| *status == 201).count();
    let held: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 202)
        .map(|(_, body)| body)
        .collect();
    assert_eq!((ran, held.len()), (5, 11), "{answers:?}");
    assert_eq!(desk.refunded(), 5);
    assert!(
        held.iter()
            .all(|body| reasons(body).contains("used up (5 of 5 calls)")),
        "{held:?}"
    );
    assert_eq!(desk.grants()[0]["used"], 5);
    let mut uses: Vec<u64> = desk
        .rows()
        .iter()
        .filter(|row| row["grant"]["id"] == grant.as_str() && row["execution"]["status"] == "ok")
        .map(|row| row["grant"]["use"].as_u64().unwrap())
        .collect();
    uses.sort_unstable();
    assert_eq!(uses, [1, 2, 3, 4, 5]);
    desk.verify();
}

#[test]
fn eight_racing_gateways_on_sqlite_never_use_more_than_a_grants_calls() {
    if curl_missing() {
        return;
    }
    racing_callers_never_use_more_than_the_grants_calls(None);
}

#[test]
fn eight_racing_gateways_on_postgres_never_use_more_than_a_grants_calls() {
    if curl_missing() {
        return;
    }
    let Some(db) = crate::pg_db("eight_racing_gateways_on_postgres_grants") else {
        return;
    };
    racing_callers_never_use_more_than_the_grants_calls(Some(db.url.clone()));
}

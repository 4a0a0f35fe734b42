//! A scripted agent session: four simulated tool calls through the real pipeline.
//!
//! The CRM update is read back, as it would be from HubSpot, from a fake of HubSpot's
//! API that the demo serves on 127.0.0.1 for its own length: the built-in
//! `hubspot.update` recipe reads the deal and compares, so the row says `verified`.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use attest_core::setup::{DoorParts, Source, Sourced};
use attest_core::verification::{base_url_var, Env, ProcessEnv};
use attest_core::{AttestError, Gate, GateDecision, Outcome};
use attest_policy::{Action, Verb, Verdict};
use serde_json::{json, Value};

use crate::commands::ledger::{print_listed, with_outcomes};
use crate::commands::short;
use crate::commands::verify::print_report;
use crate::config::Config;

/// Stands in for the person who answers `ask` in the demo: approves the email,
/// rejects the payment, as a reviewer might.
struct DemoApprover;

#[async_trait]
impl Gate for DemoApprover {
    async fn decide(&self, action: &Action, _verdict: &Verdict) -> GateDecision {
        if action.verb == Verb::Pay {
            GateDecision::Reject {
                approver: "demo-approver".to_owned(),
                channel: "demo".to_owned(),
                note: Some("payments need a purchase order".to_owned()),
            }
        } else {
            GateDecision::Approve {
                approver: "demo-approver".to_owned(),
                channel: "demo".to_owned(),
            }
        }
    }
}

struct Step {
    title: &'static str,
    action: Action,
    result: Value,
}

fn script(run_id: &str) -> Vec<Step> {
    let with_run = |action: Action| Action {
        run_id: Some(run_id.to_owned()),
        ..action
    };
    vec![
        Step {
            title: "read the inbox",
            action: with_run(
                Action::new("gmail", Verb::List).with_params(json!({"q": "is:unread", "max": 5})),
            ),
            result: json!({"messages": [{"id": "18c2f"}, {"id": "18c30"}], "resultSizeEstimate": 2}),
        },
        Step {
            title: "move a deal to closed-won",
            action: with_run(
                Action::new("hubspot", Verb::Update)
                    .with_target("deals/8812")
                    .with_params(json!({
                        "object_type": "deals",
                        "id": "8812",
                        "properties": {"dealstage": "closedwon"}
                    })),
            ),
            result: json!({"id": "8812", "properties": {"dealstage": "closedwon"}}),
        },
        Step {
            title: "email a customer",
            action: with_run(
                Action::new("gmail", Verb::Send)
                    .with_target("buyer@customer.example")
                    .with_params(json!({
                        "to": "buyer@customer.example",
                        "subject": "Your order",
                        "body": "Hello, your order has shipped."
                    })),
            ),
            result: json!({"id": "18c31", "threadId": "18c31", "labelIds": ["SENT"]}),
        },
        Step {
            title: "refund a charge",
            action: with_run(
                Action::new("stripe", Verb::Pay)
                    .with_target("ch_3Nx")
                    .with_params(json!({"charge": "ch_3Nx", "amount": 12500, "currency": "usd"})),
            ),
            result: json!({"id": "re_1", "status": "succeeded"}),
        },
    ]
}

pub(crate) fn run(config: &Config) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let hubspot = runtime.block_on(fake_hubspot())?;
    // The configuration's pipeline, reading HubSpot at the fake (its token the fake's),
    // the demo's stand-in approver answering, and the demo's own agent and person.
    let demo_env: HashMap<String, String> = [
        ("HUBSPOT_TOKEN".to_owned(), "demo-token".to_owned()),
        (base_url_var("hubspot"), hubspot),
    ]
    .into();
    let process = ProcessEnv;
    let env = move |name: &str| demo_env.get(name).cloned().or_else(|| process.var(name));
    let mut settings = config.settings.clone().with_env(Arc::new(env));
    settings.agent = Some(Sourced {
        value: "demo-agent".to_owned(),
        source: Source::Flag,
    });
    settings.actor = Some(Sourced {
        value: "alice@acme.example".to_owned(),
        source: Source::Flag,
    });
    let attest = settings.build(DoorParts::gate(DemoApprover))?;
    let ledger = Arc::clone(attest.ledger());
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Attest demo: a scripted agent session (simulated tools, real ledger at {})\n",
        ledger.path().display()
    )?;
    let run_id = format!("demo-{}", std::process::id());
    let steps = script(&run_id);
    let count = steps.len();
    for (n, step) in steps.into_iter().enumerate() {
        let label = format!("{}.{}", step.action.system, step.action.verb);
        let result = step.result;
        let tool = |_params| async move { Ok::<_, AttestError>(result) };
        // An error means the ledger failed: stop rather than pretend.
        let outcome = runtime
            .block_on(attest.call(step.action).run(tool))
            .context("demo stopped")?;
        writeln!(out, "[{}/{count}] {} ({label})", n + 1, step.title)?;
        print_outcome(&mut out, &outcome)?;
    }
    writeln!(out, "\nThe ledger (newest first):")?;
    let rows = ledger.list(count)?;
    print_listed(&mut out, &with_outcomes(&ledger, &rows)?)?;
    writeln!(out, "\nVerify:")?;
    let report = ledger.verify()?;
    print_report(&mut out, &report)?;
    writeln!(
        out,
        "\nNext: `attest ledger`, `attest verify`, `attest export --format jsonl`."
    )?;
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A fake of HubSpot's CRM API on 127.0.0.1 (a free port), serving the one deal the
/// script moves, as HubSpot would after the update; returns its base URL. It runs on
/// the demo's runtime and stops with it.
async fn fake_hubspot() -> anyhow::Result<String> {
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;

    async fn deal(
        axum::extract::Path((kind, id)): axum::extract::Path<(String, String)>,
        headers: HeaderMap,
    ) -> Result<axum::Json<Value>, StatusCode> {
        let authorised =
            headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer demo-token");
        if !authorised {
            return Err(StatusCode::UNAUTHORIZED);
        }
        if kind != "deals" || id != "8812" {
            return Err(StatusCode::NOT_FOUND);
        }
        Ok(axum::Json(json!({
            "id": "8812",
            "properties": {"dealstage": "closedwon", "hs_object_id": "8812"},
            "archived": false
        })))
    }

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("the demo's fake HubSpot cannot listen on 127.0.0.1")?;
    let address = listener.local_addr()?;
    let app = axum::Router::new().route("/crm/v3/objects/{kind}/{id}", get(deal));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{address}"))
}

fn print_outcome(
    out: &mut impl Write,
    outcome: &Outcome<Value, AttestError>,
) -> std::io::Result<()> {
    let what = match outcome {
        Outcome::Ran { .. } => "ran",
        Outcome::Refused { .. } => "refused, not run",
        Outcome::Rejected { .. } => "rejected, not run",
        Outcome::Failed { .. } => "tool failed",
        Outcome::Held { .. } => "held for a person, not run",
        _ => "not run",
    };
    let receipt = outcome.receipt();
    writeln!(
        out,
        "      decision {} -> {what}{}; level {}; seq {} hash {}",
        receipt.decision,
        receipt
            .approver
            .as_deref()
            .map(|a| format!(" (by {a})"))
            .unwrap_or_default(),
        receipt.level.map(|l| l.as_str()).unwrap_or("-"),
        receipt.seq,
        short(&receipt.entry_hash),
    )?;
    writeln!(out, "      why: {}", receipt.reasons.join("; "))
}

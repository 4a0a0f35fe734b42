//! The README's Rust quick start, whole: one governed call, from the builder to its outcome.
//!
//! `cargo run -p attest-core --example quickstart`, offline, in a directory of your own (the
//! ledger is `.attest/ledger.sqlite` there). The docs test (`readme::`) checks that README's
//! block is this file's code, line for line; `cargo test` and clippy build it, `.ci/run` runs
//! it.

use attest_core::{Attest, AutoGate, Outcome};
use attest_ledger::{Ledger, LedgerOptions};
use attest_policy::{Action, Verb};
use serde_json::json;

/// A stand-in for the tool: it sends nothing and answers as a mail API would.
async fn send_email(params: serde_json::Value) -> Result<serde_json::Value, std::io::Error> {
    Ok(json!({"id": "m1", "to": params["to"]}))
}

// Lines as long as README shows them; the held arm names the token README's text explains.
#[rustfmt::skip]
#[allow(unused_variables)]
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
let ledger = Ledger::open(".attest/ledger.sqlite", LedgerOptions::default())?;
let attest = Attest::builder().ledger(ledger).gate(AutoGate::approve("ops")).agent("sales-bot").build()?;
let action = Action::new("gmail", Verb::Send).with_params(json!({"to": "bob@example.com", "subject": "Hi"}));
match attest.call(action).run(|params| async move { send_email(params).await }).await? {
    Outcome::Ran { output, receipt } => println!("sent {output}: seq {} level {}", receipt.seq, receipt.level.map_or("none", |l| l.as_str())),
    Outcome::Held { token, .. } => println!("waiting for a person; resume with attest.call(token)"),
    other => println!("not run: {}", other.receipt().reasons.join("; ")),
}
    Ok(())
}

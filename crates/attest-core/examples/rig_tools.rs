//! A rig agent's tools, governed by Attest, offline: no model and no network.
//!
//! `cargo run -p attest-core --features rig --example rig_tools`
//!
//! Two rig tools (list invoices, refund a payment) are wrapped with `Attest::wrap_rig`
//! and called the way rig's agent loop calls them (`ErasedTool::execute` with the
//! model's JSON arguments). The read acts; the refund is a payment, so policy asks, and
//! the stand-in approver here rejects it: the model gets a refused result and the refund
//! never runs. Both calls are in the ledger, which then verifies.

use attest_core::{Attest, AutoGate};
use attest_ledger::{Ledger, LedgerOptions};
use rig_core::tool::{ErasedTool, Tool, ToolContext};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, thiserror::Error)]
#[error("billing is down")]
struct BillingError;

struct ListInvoices;

#[derive(Deserialize)]
struct ListArgs {
    customer: String,
}

impl Tool for ListInvoices {
    const NAME: &'static str = "list_invoices";
    type Args = ListArgs;
    type Output = Value;
    type Error = BillingError;

    fn description(&self) -> String {
        "List a customer's invoices.".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]})
    }

    async fn call(
        &self,
        _context: &mut ToolContext,
        args: ListArgs,
    ) -> Result<Value, BillingError> {
        Ok(json!({"customer": args.customer, "invoices": [{"id": "in_1", "amount": 4200}]}))
    }
}

struct RefundPayment;

#[derive(Deserialize)]
struct RefundArgs {
    invoice: String,
    amount: u64,
}

impl Tool for RefundPayment {
    const NAME: &'static str = "refund_payment";
    type Args = RefundArgs;
    type Output = Value;
    type Error = BillingError;

    fn description(&self) -> String {
        "Refund an invoice.".into()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"invoice": {"type": "string"}, "amount": {"type": "integer"}}})
    }

    async fn call(
        &self,
        _context: &mut ToolContext,
        args: RefundArgs,
    ) -> Result<Value, BillingError> {
        // Never reached here: policy asks about payments and the approver rejects.
        Ok(json!({"id": "re_1", "invoice": args.invoice, "amount": args.amount}))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default())?;
    let attest = Attest::builder()
        .ledger(ledger)
        .gate(AutoGate::reject("finance-lead"))
        .agent("billing-agent")
        .build()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    let list = attest.wrap_rig(ListInvoices);
    let refund = attest.wrap_rig(RefundPayment);
    let calls: [(&dyn ErasedTool, &str); 2] = [
        (&list, r#"{"customer": "cus_42"}"#),
        (&refund, r#"{"invoice": "in_1", "amount": 4200}"#),
    ];
    for (tool, args) in calls {
        let mut context = ToolContext::default();
        let result = runtime.block_on(tool.execute(args.to_owned(), &mut context));
        if let Some(refusal) = result.refusal() {
            println!("{}: refused -> {}", tool.name(), refusal.message());
        } else if let Some(err) = result.error() {
            println!("{}: failed -> {}", tool.name(), err.message());
        } else {
            println!(
                "{}: ok -> {}",
                tool.name(),
                result.output().as_json().unwrap_or(&Value::Null)
            );
        }
    }
    for row in attest.ledger().list(10)?.iter().rev() {
        println!(
            "ledger seq {}: {}.{} {} {:?}",
            row.seq, row.system, row.verb, row.decision, row.level
        );
    }
    let report = attest.ledger().verify()?;
    println!(
        "verify: {}",
        if report.is_intact() {
            "intact"
        } else {
            "BROKEN"
        }
    );
    Ok(())
}

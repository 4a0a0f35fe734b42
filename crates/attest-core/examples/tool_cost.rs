//! What a governed call costs from Rust, on the actions `benchmarks/node_tool.mjs` and
//! `benchmarks/python_tool.py` time (a HubSpot read, and an update that acts and is
//! acknowledged: intent + outcome rows), built the way the bindings are (a debug build of
//! Attest's crates, dependencies at `opt-level = 2`) and opened the way they open it
//! (`setup::attest`: the configuration path, the default policy).
//!
//! `cargo run -q -p attest-core --example tool_cost -- [SAMPLES]` prints one JSON object,
//! `{"rows": [...]}`, with the rows in the scripts' shape (`name`, `samples`, `mean_ns`,
//! `p50_ns`, `p95_ns`); `node benchmarks/node_tool.mjs` runs it beside Node and Python in
//! one run. Each call is awaited before the next (the cost of one call, not a
//! throughput). The ledgers go in a temporary directory, removed after.

use std::time::Instant;

use attest_core::setup::{attest, Overrides};
use attest_core::Outcome;
use attest_policy::{Action, Verb};
use serde_json::{json, Value};

/// The tool: it returns at once, as the scripts' functions do.
async fn deal(params: Value) -> Result<Value, std::io::Error> {
    Ok(json!({"id": params["dealId"]}))
}

/// The scripts' statistics: p50/p95 are sorted[round((n-1)*q)].
fn row(name: &str, mut times: Vec<u128>) -> Value {
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let mean = times.iter().sum::<u128>() as f64 / times.len() as f64;
    json!({"name": name, "samples": times.len(), "mean_ns": mean, "p50_ns": at(0.5), "p95_ns": at(0.95)})
}

/// Times `count` calls of `call`, after a warm-up of up to 50.
async fn measure<F, Fut>(count: usize, mut call: F) -> Vec<u128>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..count.min(50) {
        call().await;
    }
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        call().await;
        times.push(start.elapsed().as_nanos());
    }
    times
}

fn governed(
    dir: &std::path::Path,
    name: &str,
    durability: &str,
) -> Result<attest_core::Attest, Box<dyn std::error::Error>> {
    Ok(attest(&Overrides {
        ledger: Some(dir.join(name).display().to_string()),
        durability: Some(durability.to_owned()),
        agent: Some("bench".to_owned()),
        ..Overrides::default()
    })?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let samples: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 1000,
    };
    let dir = tempfile::tempdir()?;
    let update = || {
        Action::new("hubspot", Verb::Update).with_params(json!({"dealId": "8812", "stage": "won"}))
    };
    let mut rows = vec![row(
        "rust: the bare async function",
        measure(samples, || async {
            let _ = deal(json!({"dealId": "8812"})).await;
        })
        .await,
    )];
    let reader = governed(dir.path(), "read.sqlite", "normal")?;
    rows.push(row(
        "rust: governed read, act + ack, one row (normal)",
        measure(samples, || async {
            let action = Action::new("hubspot", Verb::Get).with_params(json!({"dealId": "8812"}));
            let _ = reader.call(action).run(deal).await;
        })
        .await,
    ));
    for mode in ["normal", "full"] {
        let attest = governed(dir.path(), &format!("{mode}.sqlite"), mode)?;
        match attest.call(update()).run(deal).await? {
            Outcome::Ran { receipt, .. }
                if receipt.level.map(|l| l.as_str()) == Some("acknowledged") => {}
            other => {
                return Err(format!("the update did not act and acknowledge: {other:?}").into())
            }
        }
        let count = if mode == "normal" {
            samples
        } else {
            (samples / 3).max(30)
        };
        rows.push(row(
            &format!("rust: governed update, act + ack, intent + outcome ({mode})"),
            measure(count, || async {
                let _ = attest.call(update()).run(deal).await;
            })
            .await,
        ));
    }
    println!("{}", json!({ "rows": rows }));
    Ok(())
}

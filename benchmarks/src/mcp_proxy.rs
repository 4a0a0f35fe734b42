//! The latency `attest mcp-proxy` adds to a `tools/call`: the same read-only call
//! (`attest_decide`) to the same MCP server (`attest mcp-server`), made directly and
//! through the proxy at each durability, by an rmcp client over stdio.
//!
//! The proxied call pays for everything Attest does per call (detection from the tool
//! name and its annotations, policy, the ledger append, verification) plus one more
//! stdio hop and JSON-RPC round of (de)serialization.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::Context;
use attest_ledger::Durability;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::json;

use crate::measure::{from_times, Row};

/// Calls made before timing starts (process start-up, first ledger open, page cache).
const WARMUP: usize = 20;

/// The `attest` binary built beside this one (`cargo build --release -p attest-cli`).
pub(crate) fn attest_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let attest = exe.with_file_name(format!("attest{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        attest.exists(),
        "{} is missing: build it first (`cargo build --release -p attest-cli`)",
        attest.display()
    );
    Ok(attest)
}

/// One row for the direct call, one per durability through the proxy, and the added
/// p50 of each as a fact.
pub(crate) fn rows(
    dir: &Path,
    runtime: &tokio::runtime::Runtime,
    samples: usize,
    facts: &mut Vec<(String, String)>,
) -> anyhow::Result<Vec<Row>> {
    let attest = attest_binary()?;
    let server = |ledger: &str| -> Vec<String> {
        vec![
            attest.display().to_string(),
            "--ledger".into(),
            dir.join(ledger).display().to_string(),
            "mcp-server".into(),
        ]
    };
    let direct_name = "MCP tools/call, direct to the server";
    let direct = runtime.block_on(time_calls(&server("mcp-direct.sqlite"), samples))?;
    let direct = from_times(direct_name, direct);
    let mut rows = vec![direct.clone()];
    for durability in [Durability::Full, Durability::Normal, Durability::Off] {
        let mut proxied = vec![
            attest.display().to_string(),
            "--ledger".into(),
            dir.join(format!("mcp-proxy-{durability}.sqlite"))
                .display()
                .to_string(),
            "--durability".into(),
            durability.to_string(),
            "mcp-proxy".into(),
            "--server".into(),
            "attest".into(),
            "--".into(),
        ];
        proxied.extend(server(&format!("mcp-upstream-{durability}.sqlite")));
        let times = runtime.block_on(time_calls(&proxied, samples))?;
        let row = from_times(
            &format!("MCP tools/call through attest mcp-proxy ({durability})"),
            times,
        );
        facts.push((
            format!("mcp-proxy added latency per tools/call, p50 ({durability})"),
            format!("{:.0} µs", (row.p50_ns - direct.p50_ns) / 1_000.0),
        ));
        rows.push(row);
    }
    Ok(rows)
}

/// Starts `command` as an MCP server on stdio and times `samples` calls, one by one.
async fn time_calls(command: &[String], samples: usize) -> anyhow::Result<Vec<f64>> {
    let (program, args) = command.split_first().context("empty command")?;
    let mut child = tokio::process::Command::new(program);
    child.args(args);
    let (transport, _) = TokioChildProcess::builder(child)
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    let client = ()
        .serve(transport)
        .await
        .with_context(|| format!("{program} did not initialize"))?;
    let arguments = json!({"tool": "slack_post_message", "server": "slack"});
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    let mut times = Vec::with_capacity(samples);
    for n in 0..WARMUP + samples {
        let call = CallToolRequestParams::new("attest_decide").with_arguments(arguments.clone());
        let start = Instant::now();
        let result = client.call_tool(call).await?;
        let elapsed = start.elapsed().as_nanos() as f64;
        anyhow::ensure!(
            result.is_error != Some(true),
            "attest_decide returned an error: {:?}",
            result.content
        );
        if n >= WARMUP {
            times.push(elapsed);
        }
    }
    client.cancel().await?;
    Ok(times)
}

//! `attest pending`, `attest confirm` and `attest serve`: people deciding on actions
//! policy asked about.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_core::approvals::{ApprovalError, LinkSigner, Secret};
use attest_core::{Answer, ApprovalRequest, Attest, AttestError};
use serde_json::Value;

use crate::cli::{ConfirmArgs, PendingArgs, ServeArgs, Verdict};
use crate::config::Config;
use crate::servers::inbox::{self, InboxState};
use crate::terminal::escape;

/// How long one-click links stay valid.
const LINK_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The pipeline the approval commands decide through.
fn pipeline(config: &Config, create: bool) -> anyhow::Result<Attest> {
    let ledger = config.open_ledger(create)?;
    let attest = Attest::builder()
        .ledger(ledger)
        .policy(config.policy()?)
        .build()?;
    attest
        .approvals()
        .context("cannot open the approval store")?;
    Ok(attest)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub(crate) fn pending(config: &Config, args: &PendingArgs) -> anyhow::Result<ExitCode> {
    let attest = pipeline(config, false)?;
    runtime()?.block_on(attest.expire_due())?;
    let requests = attest.approvals()?.pending()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let list: Vec<Value> = requests.iter().map(ApprovalRequest::summary).collect();
        serde_json::to_writer_pretty(&mut out, &list)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if requests.is_empty() {
        writeln!(out, "(nothing is waiting for a decision)")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<36}  {:<24}  {:<9}  {:<24}  why",
        "id", "action", "risk", "may approve"
    )?;
    for request in &requests {
        let summary = request.summary();
        let who = people(&summary["approver_members"]);
        writeln!(
            out,
            "{:<36}  {:<24}  {:<9}  {:<24}  {}{}",
            escape(&request.id),
            format!(
                "{}.{}",
                escape(&request.action.system),
                request.action.verb.as_str()
            ),
            request.verdict.tier.as_str(),
            if who.is_empty() {
                "anyone".to_owned()
            } else {
                escape(&who).into_owned()
            },
            escape(&request.verdict.reasons.join("; ")),
            if request.verdict.hold {
                " [held: approve with --edits]"
            } else {
                ""
            },
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn people(list: &Value) -> String {
    list.as_array()
        .map(|people| {
            people
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

pub(crate) fn confirm(config: &Config, args: &ConfirmArgs) -> anyhow::Result<ExitCode> {
    let approver = match args.approver.clone().or_else(|| std::env::var("USER").ok()) {
        Some(name) if !name.trim().is_empty() => name,
        _ => anyhow::bail!("name who decides: --approver NAME (or ATTEST_APPROVER)"),
    };
    let mut answer = match args.verdict {
        Verdict::Approve => Answer::approve(approver, "cli"),
        Verdict::Reject => Answer::reject(approver, "cli"),
    };
    if let Some(edits) = &args.edits {
        let edits: Value = serde_json::from_str(edits).context("--edits is not valid JSON")?;
        if !edits.is_object() {
            anyhow::bail!("--edits must be a JSON object (merged into the params)");
        }
        answer = answer.with_edits(edits);
    }
    if let Some(note) = &args.note {
        answer = answer.with_note(note.clone());
    }
    let attest = pipeline(config, false)?;
    match runtime()?.block_on(attest.decide(&args.id, answer)) {
        Ok(decided) => {
            let mut out = std::io::stdout().lock();
            write!(
                out,
                "{} {} by {}",
                decided.request.id,
                decided.request.status,
                decided.request.approver.as_deref().unwrap_or("-"),
            )?;
            match decided.receipt {
                Some(receipt) => writeln!(out, " (ledger seq {})", receipt.seq)?,
                None => writeln!(out, "; it runs when the agent resumes it")?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(AttestError::Approval(err)) if is_no(&err) => {
            eprintln!("attest: not recorded: {err}");
            Ok(ExitCode::from(1))
        }
        Err(err) => Err(err.into()),
    }
}

/// The answers that mean "no" (exit 1) rather than "could not run" (exit 2).
fn is_no(err: &ApprovalError) -> bool {
    matches!(
        err,
        ApprovalError::NotFound
            | ApprovalError::AlreadyDecided { .. }
            | ApprovalError::Expired { .. }
            | ApprovalError::NotAnApprover { .. }
            | ApprovalError::NoApprover { .. }
            | ApprovalError::HoldNeedsEdits { .. }
    )
}

pub(crate) fn serve(config: &Config, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let ip: IpAddr = args
        .host
        .parse()
        .with_context(|| format!("--host {:?} is not an IP address", args.host))?;
    let token = args.token.as_deref().filter(|t| !t.is_empty());
    if !ip.is_loopback() && token.is_none() {
        anyhow::bail!(
            "--host {ip} listens beyond loopback: a bearer token is required (--token or ATTEST_INBOX_TOKEN)"
        );
    }
    let attest = pipeline(config, true)?;
    let runtime = runtime()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, args.port))
            .await
            .with_context(|| format!("cannot listen on {ip}:{}", args.port))?;
        let addr = listener.local_addr()?;
        let public = args
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let state = InboxState {
            attest,
            token: token.map(Secret::new),
            slack_signing_secret: args.slack_signing_secret.as_deref().map(Secret::new),
            links: args
                .link_key
                .as_deref()
                .map(|key| LinkSigner::new(Secret::new(key), public.clone(), LINK_TTL)),
            clock: Arc::new(attest_ledger::SystemClock),
        };
        println!("attest: approval inbox on http://{addr}/");
        std::io::stdout().flush()?;
        inbox::serve(listener, state).await?;
        Ok(ExitCode::SUCCESS)
    })
}

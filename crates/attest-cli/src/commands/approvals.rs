//! `attest pending`, `attest confirm`, `attest approvers` and `attest serve`: people
//! deciding on actions policy asked about.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use attest_core::approvals::{ApprovalError, LinkSigner, Secret};
use attest_core::config::NotifyBy;
use attest_core::setup::{DoorParts, LINK_TTL};
use attest_core::{Answer, ApprovalRequest, Attest, AttestError};
use serde_json::Value;

use crate::cli::{AgentsCommand, ApproversCommand, ConfirmArgs, PendingArgs, ServeArgs, Verdict};
use crate::config::Config;
use crate::secrets::{read_secret, write_private};
use crate::terminal::escape;
use attest_doors::inbox::{self, InboxState};

/// The pipeline the approval commands decide through: the configuration's, which
/// never asks (so no notifier secrets are needed here). It says on stderr which ledger it
/// uses. Without `create`, a ledger file that is not there is an error naming the path
/// and where a ledger comes from, never an empty one made in its place; with it (an
/// administrator's `approvers add` or `agents add` before any agent ran), one is made and
/// that is said.
pub(super) fn pipeline(config: &Config, create: bool) -> anyhow::Result<Attest> {
    let missing = is_missing(config);
    if missing && !create {
        anyhow::bail!("{}", no_ledger(config));
    }
    let attest = config.build(DoorParts::never_asks(!create))?;
    attest
        .approvals()
        .context("cannot open the approval store")?;
    if missing {
        eprintln!(
            "attest: no ledger was at {}, so this made an empty one there; if your agents \
             write elsewhere, name that ledger with --ledger or ATTEST_LEDGER",
            config.ledger_display()
        );
    } else {
        eprintln!("attest: ledger {}", config.ledger_display());
    }
    Ok(attest)
}

/// Whether the configured ledger is a file that is not there (a PostgreSQL URL is never
/// missing here: its server says whether the database exists).
fn is_missing(config: &Config) -> bool {
    let path = config.ledger_path();
    let url = path
        .to_str()
        .is_some_and(|p| p.starts_with("postgres://") || p.starts_with("postgresql://"));
    !url && !path.exists()
}

/// What a command that reads an existing ledger says when there is none: the path, where
/// else it may be, and what makes one.
pub(super) fn no_ledger(config: &Config) -> String {
    format!(
        "no ledger at {}: this command reads an existing ledger and does not make one. If \
         your agents' ledger is elsewhere, name it with --ledger, ATTEST_LEDGER or `ledger:` \
         in .attest/config.yaml (an MCP client's configuration may set ATTEST_LEDGER for the \
         proxy alone); a door's first call (mcp-proxy, gateway, a hook), `attest demo` or \
         `attest approvers add NAME` makes one",
        config.ledger_display()
    )
}

pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
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
    let mut table = vec![[
        "id".to_owned(),
        "action".to_owned(),
        "risk".to_owned(),
        "may approve".to_owned(),
        "why".to_owned(),
    ]];
    for request in &requests {
        let who = people(&request.summary()["approver_members"]);
        table.push([
            escape(&request.id).into_owned(),
            format!(
                "{}.{}",
                escape(&request.action.system),
                request.action.verb.as_str()
            ),
            request.verdict.tier.as_str().to_owned(),
            if who.is_empty() {
                "anyone".to_owned()
            } else {
                escape(&who).into_owned()
            },
            format!(
                "{}{}{}",
                escape(&request.verdict.reasons.join("; ")),
                if request.verdict.hold {
                    " [held: approve with --edits]"
                } else {
                    ""
                },
                match request.verdict.quorum {
                    Some(_) => format!(" [{}]", escape(&request.progress().text())),
                    None => String::new(),
                }
            ),
        ]);
    }
    // Each column as wide as its widest cell, so long approver lists keep the table aligned.
    let mut widths = [0usize; 4];
    for row in &table {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for [id, action, risk, who, why] in &table {
        let [w0, w1, w2, w3] = widths;
        writeln!(
            out,
            "{id:<w0$}  {action:<w1$}  {risk:<w2$}  {who:<w3$}  {why}"
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

/// The pipeline and the approver whose token is in `token_file` or
/// $ATTEST_APPROVER_TOKEN; `Err` inside: the exit code, the reason printed.
pub(super) fn as_approver(
    config: &Config,
    token_file: Option<&std::path::Path>,
) -> anyhow::Result<Result<(Attest, String), ExitCode>> {
    let Some(token) = read_secret(token_file, "ATTEST_APPROVER_TOKEN")? else {
        eprintln!(
            "attest: not recorded: a decision needs your approver token, in $ATTEST_APPROVER_TOKEN \
             or --token-file FILE (an administrator issues one with `attest approvers add NAME`)"
        );
        return Ok(Err(ExitCode::from(1)));
    };
    let attest = pipeline(config, false)?;
    let approver = match attest.approvals()?.authenticate(&token) {
        Ok(approver) => approver.name,
        Err(err) if is_no(&err) => {
            eprintln!("attest: not recorded: {err}");
            return Ok(Err(ExitCode::from(1)));
        }
        Err(err) => return Err(err.into()),
    };
    Ok(Ok((attest, approver)))
}

pub(crate) fn confirm(config: &Config, args: &ConfirmArgs) -> anyhow::Result<ExitCode> {
    let (attest, approver) = match as_approver(config, args.token_file.as_deref())? {
        Ok(found) => found,
        Err(code) => return Ok(code),
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
    if let Some(spec) = &args.grant {
        answer = answer.with_grant(spec.clone());
    }
    // A Teams channel is told of the decision as the inbox tells it (the webhook's URL
    // is in a file, so an approval command can read it without notifier secrets).
    let teams = config.teams()?;
    let decided = runtime()?.block_on(async {
        let decided = attest.decide(&args.id, answer).await;
        if let Ok(decided) = &decided {
            attest_doors::notices::tell_teams_decided(teams.as_deref(), &decided.request).await;
        }
        decided
    });
    match decided {
        Ok(decided) if decided.request.status == attest_core::approvals::Status::Pending => {
            // Under a quorum, a decision that does not meet it leaves the request waiting.
            writeln!(
                std::io::stdout().lock(),
                "{}: recorded; still pending: {}",
                decided.request.id,
                decided.request.progress().text()
            )?;
            Ok(ExitCode::SUCCESS)
        }
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
                // Approved: a call still blocking on it (block mode, within its wait)
                // sees the decision and runs at once; a call answered as held (pending
                // mode, or its wait over) runs when the agent resumes it or calls again.
                None => writeln!(
                    out,
                    "; a call still waiting for it runs now; a held call runs when the agent resumes it or makes it again"
                )?,
            }
            if let Some((grant, receipt)) = &decided.granted {
                writeln!(
                    out,
                    "{} granted: {} calls of {}.{} by {} until {}{} (ledger seq {})",
                    grant.id,
                    grant.calls,
                    grant.system,
                    grant.verb,
                    escape(&grant.agent),
                    attest_ledger::format_ts(grant.expires_at),
                    grant
                        .when
                        .as_deref()
                        .map_or_else(String::new, |when| format!(" where {}", escape(when))),
                    receipt.seq
                )?;
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
pub(super) fn is_no(err: &ApprovalError) -> bool {
    matches!(
        err,
        ApprovalError::NotFound
            | ApprovalError::AlreadyDecided { .. }
            | ApprovalError::Expired { .. }
            | ApprovalError::NotAnApprover { .. }
            | ApprovalError::OwnRequest { .. }
            | ApprovalError::AlreadyVoted { .. }
            | ApprovalError::NoApprover { .. }
            | ApprovalError::HoldNeedsEdits { .. }
            | ApprovalError::BadCredential
            | ApprovalError::UnknownApprover { .. }
            | ApprovalError::BadGrant { .. }
            | ApprovalError::UnknownGrant { .. }
    )
}

pub(crate) fn approvers(config: &Config, command: &ApproversCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match command {
        ApproversCommand::Add(args) => {
            let attest = pipeline(config, true)?;
            let store = attest.approvals()?;
            token_file_is_new(args.token_file.as_deref())?;
            let (approver, token) = match store.add_approver(&args.name, args.slack_user.as_deref())
            {
                Ok(added) => added,
                Err(err @ ApprovalError::BadApprover { .. }) => anyhow::bail!(err),
                Err(err) => return Err(err.into()),
            };
            let shown = hand_out(args.token_file.as_deref(), token.expose())?;
            if args.json {
                serde_json::to_writer(
                    &mut out,
                    &serde_json::json!({
                        "name": approver.name,
                        "slack_user": approver.slack_user,
                        "token": shown,
                    }),
                )?;
                writeln!(out)?;
            } else if let Some(token) = shown {
                writeln!(out, "{token}")?;
                eprintln!(
                    "attest: approver {} added; the token above is shown only once: give it to \
                     them to keep in a file only they can read (mode 0600)",
                    approver.name
                );
            } else {
                eprintln!("attest: approver {} added; token written", approver.name);
            }
        }
        ApproversCommand::List(args) => {
            let attest = pipeline(config, false)?;
            let list = attest.approvals()?.approvers()?;
            if args.json {
                serde_json::to_writer_pretty(&mut out, &list)?;
                writeln!(out)?;
                return Ok(ExitCode::SUCCESS);
            }
            if list.is_empty() {
                writeln!(
                    out,
                    "(no approvers: add one with `attest approvers add NAME`)"
                )?;
            }
            for approver in &list {
                writeln!(
                    out,
                    "{:<32}  {:<12}  {}",
                    approver.name,
                    approver.slack_user.as_deref().unwrap_or("-"),
                    standing(approver.revoked_at)
                )?;
            }
        }
        ApproversCommand::Revoke(args) => {
            let attest = pipeline(config, false)?;
            let revoked = attest.approvals()?.revoke_approver(&args.name);
            return said_revoked(&mut out, revoked.map(|approver| approver.name));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Fails when the token is to go to a file that exists: the file must be new.
fn token_file_is_new(path: Option<&std::path::Path>) -> anyhow::Result<()> {
    match path {
        Some(path) if path.exists() => {
            anyhow::bail!("{} exists; the token file must be new", path.display())
        }
        _ => Ok(()),
    }
}

/// Gives out a new token: written to `file` (created 0600), else returned to be printed.
fn hand_out<'t>(file: Option<&std::path::Path>, token: &'t str) -> anyhow::Result<Option<&'t str>> {
    match file {
        Some(path) => {
            write_private(path, &format!("{token}\n"))?;
            Ok(None)
        }
        None => Ok(Some(token)),
    }
}

/// `active`, or when it was revoked.
fn standing(revoked_at: Option<std::time::SystemTime>) -> String {
    match revoked_at {
        Some(at) => format!("revoked {}", attest_ledger::format_ts(at)),
        None => "active".to_owned(),
    }
}

/// Says who was revoked; an unknown name is exit 1.
fn said_revoked(
    out: &mut impl Write,
    revoked: Result<String, ApprovalError>,
) -> anyhow::Result<ExitCode> {
    match revoked {
        Ok(name) => writeln!(out, "{name} revoked")?,
        Err(err @ (ApprovalError::UnknownApprover { .. } | ApprovalError::UnknownAgent { .. })) => {
            eprintln!("attest: {err}");
            return Ok(ExitCode::from(1));
        }
        Err(err) => return Err(err.into()),
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn agents(config: &Config, command: &AgentsCommand) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match command {
        AgentsCommand::Add(args) => {
            let attest = pipeline(config, true)?;
            let store = attest.approvals()?;
            token_file_is_new(args.token_file.as_deref())?;
            let (agent, token) = match store.add_agent(&args.name) {
                Ok(added) => added,
                Err(err @ ApprovalError::BadAgent { .. }) => anyhow::bail!(err),
                Err(err) => return Err(err.into()),
            };
            let shown = hand_out(args.token_file.as_deref(), token.expose())?;
            if args.json {
                serde_json::to_writer(
                    &mut out,
                    &serde_json::json!({"name": agent.name, "token": shown}),
                )?;
                writeln!(out)?;
            } else if let Some(token) = shown {
                writeln!(out, "{token}")?;
                eprintln!(
                    "attest: agent {} added; the token above is shown only once: give it to the \
                     agent (X-Attest-Token on the gateway, Authorization: Bearer on \
                     mcp-proxy --listen) in a file only it can read (mode 0600)",
                    agent.name
                );
            } else {
                eprintln!("attest: agent {} added; token written", agent.name);
            }
        }
        AgentsCommand::List(args) => {
            let attest = pipeline(config, false)?;
            let list = attest.approvals()?.agents()?;
            if args.json {
                serde_json::to_writer_pretty(&mut out, &list)?;
                writeln!(out)?;
                return Ok(ExitCode::SUCCESS);
            }
            if list.is_empty() {
                writeln!(out, "(no agents: add one with `attest agents add NAME`)")?;
            }
            for agent in &list {
                writeln!(out, "{:<32}  {}", agent.name, standing(agent.revoked_at))?;
            }
        }
        AgentsCommand::Revoke(args) => {
            let attest = pipeline(config, false)?;
            let revoked = attest.approvals()?.revoke_agent(&args.name);
            return said_revoked(&mut out, revoked.map(|agent| agent.name));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn serve(config: &Config, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let (ip, port) = listen_address(config, args)?;
    let slack_signing_secret = read_secret(
        args.slack_signing_secret_file.as_deref(),
        config.file.slack_signing_secret_var(),
    )?;
    let link_key = read_secret(args.link_key_file.as_deref(), config.file.link_key_var())?;
    let public_url = args
        .public_url
        .clone()
        .or_else(|| config.file.inbox.public_url.clone());
    let trusted_identity_header = args
        .trusted_identity_header
        .clone()
        .or_else(|| config.file.inbox.trusted_identity_header.clone());
    let slack_updates = config.slack()?;
    let teams_updates = config.teams()?;
    // Alerts and digests go through the configured notifiers. With `notify.by:
    // surfaces` their secrets may live with the surfaces only: alerts then go to stderr.
    let configured = match (config.notifiers(), config.file.notify.by) {
        (Ok(notifiers), _) => notifiers,
        (Err(err), NotifyBy::Surfaces) if args.review.digest_every.is_none() => {
            eprintln!("attest serve: alerts go to stderr only: {err:#}");
            Vec::new()
        }
        (Err(err), _) => return Err(err.into()),
    };
    let alerts = crate::review::alerts::Alerts::new(configured.clone());
    if args.review.digest_every.is_some() && !alerts.has_notifiers() {
        anyhow::bail!("--digest-every needs a notifier under `notify:` in the configuration file");
    }
    // Reminders and escalations go through every configured notifier, whichever door
    // stored the request: only a long-running server can send them.
    let follow_ups = configured.clone();
    let notifiers = match config.file.notify.by {
        NotifyBy::Inbox => configured,
        NotifyBy::Surfaces => Vec::new(),
    };
    let metrics = crate::secrets::scrape_access(args.metrics_token_file.as_deref())?;
    let oidc_secret =
        match config
            .file
            .inbox
            .oidc
            .as_ref()
            .and_then(|o| o.client_secret_file.as_deref())
        {
            Some(path) => Some(read_secret(Some(path), "")?.with_context(|| {
                format!("inbox.oidc.client_secret_file {}: empty", path.display())
            })?),
            None => None,
        };
    let attest = Arc::new(pipeline(config, false)?);
    let _stream = super::stream::beside(config, attest.ledger())?;
    let review = Arc::new(attest_doors::review::Review::open(
        || {
            config
                .open_ledger_read_only()
                .context("opening it for review")
        },
        alerts,
    )?);
    let runtime = runtime()?;
    runtime.block_on(async move {
        review.start(args.review.schedule()?);
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(ip, port))
            .await
            .with_context(|| format!("cannot listen on {ip}:{port}"))?;
        let addr = listener.local_addr()?;
        let public = public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let oidc = match &config.file.inbox.oidc {
            Some(settings) => Some(Arc::new(
                attest_doors::inbox::oidc::Oidc::discover(attest_doors::inbox::oidc::OidcOptions {
                    issuer: settings.issuer.clone(),
                    client_id: settings.client_id.clone(),
                    client_secret: oidc_secret,
                    claim: settings.claim.clone().unwrap_or_else(|| "email".to_owned()),
                    claim_guaranteed: settings.claim_guaranteed,
                    public_url: public.clone(),
                })
                .await?,
            )),
            None => None,
        };
        let state = InboxState {
            oidc,
            attest,
            origins: inbox::allowed_origins(addr, public_url.as_deref())?,
            trusted_identity_header,
            slack_signing_secret: slack_signing_secret.map(Secret::new),
            links: link_key.map(|key| LinkSigner::new(Secret::new(key), public.clone(), LINK_TTL)),
            clock: Arc::new(attest_ledger::SystemClock),
            slack_updates,
            teams_updates,
            review: Some(review),
            metrics,
        };
        if !notifiers.is_empty() {
            let store = state.attest.approvals()?;
            tokio::spawn(attest_doors::notices::post_pending(store, notifiers));
        }
        tokio::spawn(attest_doors::notices::follow_up(
            Arc::clone(&state.attest),
            follow_ups,
        ));
        println!("attest: approval inbox on http://{addr}/");
        let store = state.attest.approvals()?;
        let approvers = tokio::task::spawn_blocking(move || store.approvers()).await??;
        if approvers.iter().all(|a| a.revoked_at.is_some()) {
            // Every page asks for an approver's token: without one, nobody can sign in.
            eprintln!(
                "attest: no approvers are registered, so nobody can sign in to the inbox or \
                 the dashboard yet: `attest approvers add NAME` registers one and prints their \
                 token (once)"
            );
        }
        eprintln!("attest: dashboard on http://{addr}/dashboard, metrics on http://{addr}/metrics");
        std::io::stdout().flush()?;
        inbox::serve(listener, state).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The inbox's address: `--host`/`--port`, else the configuration's `inbox.listen`, else
/// 127.0.0.1:8321.
fn listen_address(config: &Config, args: &ServeArgs) -> anyhow::Result<(IpAddr, u16)> {
    let configured: Option<SocketAddr> = match &config.file.inbox.listen {
        Some(text) => Some(text.parse().with_context(|| {
            format!("{}: inbox.listen {text:?} is not IP:PORT", config.origin())
        })?),
        None => None,
    };
    let ip = match &args.host {
        Some(host) => host
            .parse()
            .with_context(|| format!("--host {host:?} is not an IP address"))?,
        None => configured.map_or(IpAddr::from([127, 0, 0, 1]), |a| a.ip()),
    };
    let port = args.port.or(configured.map(|a| a.port())).unwrap_or(8321);
    Ok((ip, port))
}

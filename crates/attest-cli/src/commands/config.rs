//! `attest config check`: validates the configuration file and shows the effective
//! settings, each with its source. Secrets are never shown: only the names of the
//! variables that hold them, and whether those are set.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::cli::{ConfigCheckArgs, ConfigCommand, Global};
use crate::config::{env_var, pick, Config, Source, DEFAULT_INBOX, DEFAULT_WAIT};

pub(crate) fn run(global: &Global, command: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConfigCommand::Check(args) => check(global, args),
    }
}

/// One effective setting.
struct Setting {
    key: String,
    value: Value,
    source: Source,
}

fn check(global: &Global, args: &ConfigCheckArgs) -> anyhow::Result<ExitCode> {
    let mut problems = Vec::new();
    let mut settings = Vec::new();
    let config = match Config::load(global) {
        Ok(config) => Some(config),
        Err(err) => {
            problems.push(format!("{err:#}"));
            None
        }
    };
    if let Some(config) = &config {
        settings = effective(config);
        // Everything the file names must load, as the servers would load it.
        let checks: [(&str, anyhow::Result<()>); 4] = [
            ("policy", config.policy().map(drop)),
            ("registry", config.registry().map(drop)),
            ("read-back", config.readback().map(drop)),
            ("notify", config.notifiers().map(drop)),
        ];
        for (_, outcome) in checks {
            if let Err(err) = outcome {
                problems.push(format!("{err:#}"));
            }
        }
        if let Some(listen) = &config.file.inbox.listen {
            if listen.parse::<std::net::SocketAddr>().is_err() {
                problems.push(format!(
                    "{}: inbox.listen: {listen:?} is not IP:PORT",
                    config.origin()
                ));
            }
        }
    }
    let file = config
        .as_ref()
        .and_then(|c| c.file_path.as_ref())
        .map(|(path, _)| path.display().to_string());
    let mut out = std::io::stdout().lock();
    if args.json {
        let list: Vec<Value> = settings
            .iter()
            .map(|s| json!({"key": s.key, "value": s.value, "source": s.source.as_str()}))
            .collect();
        let report = json!({
            "ok": problems.is_empty(),
            "file": file,
            "settings": list,
            "problems": problems,
        });
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        match &file {
            Some(file) => writeln!(out, "configuration file: {file}")?,
            None => writeln!(
                out,
                "configuration file: none (flags, environment and defaults only)"
            )?,
        }
        let width = settings.iter().map(|s| s.key.len()).max().unwrap_or(0);
        for setting in &settings {
            let value = match &setting.value {
                Value::String(text) => text.clone(),
                Value::Null => "-".to_owned(),
                other => other.to_string(),
            };
            writeln!(
                out,
                "  {:width$}  {}  ({})",
                setting.key,
                crate::terminal::escape(&value),
                setting.source.as_str()
            )?;
        }
        for problem in &problems {
            writeln!(out, "problem: {problem}")?;
        }
        if problems.is_empty() {
            writeln!(out, "ok")?;
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Every setting with its effective value and where it came from.
fn effective(config: &Config) -> Vec<Setting> {
    let file = &config.file;
    let mut out = Vec::new();
    let mut push = |key: &str, value: Value, source: Source| {
        out.push(Setting {
            key: key.to_owned(),
            value,
            source,
        })
    };
    let [ledger_source, durability_source, policy_source] = config.sources;
    if let Some((path, source)) = &config.file_path {
        push("config", json!(path.display().to_string()), *source);
    }
    push(
        "ledger",
        json!(config.ledger_path.display().to_string()),
        ledger_source,
    );
    push(
        "durability",
        json!(config.durability.to_string()),
        durability_source,
    );
    push(
        "policy",
        match &config.policy_path {
            Some(path) => json!(path.display().to_string()),
            None => json!("./attest.yaml if present, else the built-in default"),
        },
        policy_source,
    );
    let (key, source) = pick(
        None,
        env_var("ATTEST_SIGNING_KEY"),
        file.key.as_ref().map(|p| p.display().to_string()),
    )
    .unwrap_or_else(|| (config.key_path(None).display().to_string(), Source::Default));
    push("key", json!(key), source);
    let (origin, source) = pick(None, None, file.origin.clone())
        .unwrap_or_else(|| ("attest-ledger".to_owned(), Source::Default));
    push("origin", json!(origin), source);
    for (key, var, value) in [
        ("agent", "ATTEST_AGENT", &file.agent),
        ("actor", "ATTEST_ACTOR", &file.actor),
    ] {
        match pick(None, env_var(var), value.clone()) {
            Some((value, source)) => push(key, json!(value), source),
            None => push(key, Value::Null, Source::Default),
        }
    }
    let paths = |list: &[std::path::PathBuf]| -> (Value, Source) {
        let shown: Vec<String> = list.iter().map(|p| p.display().to_string()).collect();
        let source = if shown.is_empty() {
            Source::Default
        } else {
            Source::File
        };
        (json!(shown), source)
    };
    for (key, list) in [
        ("registry", &file.registry),
        ("recipes", &file.recipes),
        ("openapi", &file.openapi),
    ] {
        let (value, source) = paths(list);
        push(key, value, source);
    }
    for (system, settings) in &file.systems {
        let var = attest_core::verification::base_url_var(system);
        let from_file = settings.base_url.clone();
        if let Some((url, source)) = pick(None, env_var(&var), from_file) {
            push(&format!("systems.{system}.base_url"), json!(url), source);
        }
        if let Some(var) = &settings.credential {
            push(
                &format!("systems.{system}.credential"),
                json!(variable(var)),
                Source::File,
            );
        }
    }
    if let Some(slack) = &file.notify.slack {
        push("notify.slack.channel", json!(slack.channel), Source::File);
        let var = slack
            .token_env
            .as_deref()
            .unwrap_or(attest_core::config::vars::SLACK_TOKEN);
        push("notify.slack.token", json!(variable(var)), Source::File);
        push(
            "notify.slack.signing_secret",
            json!(variable(file.slack_signing_secret_var())),
            Source::File,
        );
    }
    if let Some(webhook) = &file.notify.webhook {
        let url = match (&webhook.url, &webhook.url_env) {
            (Some(url), _) => json!(origin_only(url)),
            (None, Some(var)) => json!(variable(var)),
            (None, None) => Value::Null,
        };
        push("notify.webhook.url", url, Source::File);
        let var = webhook
            .secret_env
            .as_deref()
            .unwrap_or(attest_core::config::vars::WEBHOOK_SECRET);
        push("notify.webhook.secret", json!(variable(var)), Source::File);
    }
    if let Some(email) = &file.notify.email {
        push("notify.email.host", json!(email.host), Source::File);
        push("notify.email.port", json!(email.port), Source::File);
        push("notify.email.tls", json!(email.tls), Source::File);
        push("notify.email.from", json!(email.from), Source::File);
        push("notify.email.to", json!(email.to), Source::File);
        if let Some(user) = &email.username_env {
            push("notify.email.username", json!(variable(user)), Source::File);
            let var = email
                .password_env
                .as_deref()
                .unwrap_or(attest_core::config::vars::SMTP_PASSWORD);
            push("notify.email.password", json!(variable(var)), Source::File);
        }
    }
    let link_source = if file.notify.link_key_env.is_some() {
        Source::File
    } else {
        Source::Default
    };
    push(
        "notify.link_key",
        json!(variable(file.link_key_var())),
        link_source,
    );
    let duration = |value: Option<std::time::Duration>, default: std::time::Duration| match value {
        Some(d) => (json!(d.as_secs()), Source::File),
        None => (json!(default.as_secs()), Source::Default),
    };
    let (value, source) = duration(
        file.approvals.use_by,
        attest_core::approvals::DEFAULT_USE_BY,
    );
    push("approvals.use_by_secs", value, source);
    let (value, source) = duration(file.approvals.wait, DEFAULT_WAIT);
    push("approvals.wait_secs", value, source);
    let (value, source) = match file.hook.approvals {
        Some(attest_core::config::HookApprovals::Attest) => (json!("attest"), Source::File),
        Some(attest_core::config::HookApprovals::Prompt) => (json!("prompt"), Source::File),
        None => (json!("prompt"), Source::Default),
    };
    push("hook.approvals", value, source);
    // Unset, each agent's hook waits 10 s less than the agent's own hook timeout.
    let (value, source) = match file.hook.wait {
        Some(wait) => (json!(wait.as_secs()), Source::File),
        None => (Value::Null, Source::Default),
    };
    push("hook.wait_secs", value, source);
    let optional = |value: &Option<String>, default: Option<&str>| match (value, default) {
        (Some(v), _) => (json!(v), Source::File),
        (None, Some(d)) => (json!(d), Source::Default),
        (None, None) => (Value::Null, Source::Default),
    };
    let (value, source) = optional(&file.inbox.listen, Some(DEFAULT_INBOX));
    push("inbox.listen", value, source);
    let (value, source) = optional(&file.inbox.public_url, None);
    push("inbox.public_url", value, source);
    let (value, source) = optional(&file.inbox.trusted_identity_header, None);
    push("inbox.trusted_identity_header", value, source);
    let (value, source) = optional(&file.gateway.upstream, None);
    push("gateway.upstream", value, source);
    let allow = &file.gateway.allow_upstream;
    push(
        "gateway.allow_upstream",
        json!(allow),
        if allow.is_empty() {
            Source::Default
        } else {
            Source::File
        },
    );
    out
}

/// `$NAME (set)` or `$NAME (not set)`: a secret's variable, never its value.
fn variable(name: &str) -> String {
    let state = if env_var(name).is_some() {
        "set"
    } else {
        "not set"
    };
    format!("${name} ({state})")
}

/// A URL cut to its scheme and host: a webhook's path often is its secret.
fn origin_only(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => format!(
            "{}://{}/…",
            parsed.scheme(),
            parsed.host_str().unwrap_or("?")
        ),
        Err(_) => "(not a URL)".to_owned(),
    }
}

//! `attest config check`: validates the configuration file and shows what every door
//! gets from it (core's [`attest_core::setup::Settings::shown`]), each setting with its
//! source, and builds each part as the doors would. Secrets are never shown: only the
//! names of the variables that hold them, and whether those are set.

use std::io::Write;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::cli::{ConfigCheckArgs, ConfigCommand, Global};
use crate::config::Config;

pub(crate) fn run(global: &Global, command: &ConfigCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConfigCommand::Check(args) => check(global, args),
    }
}

/// The doors that build their pipeline from these settings.
const DOORS: &str =
    "mcp-proxy, gateway, mcp-server, hook claude-code, serve, demo, the Python package";

fn check(global: &Global, args: &ConfigCheckArgs) -> anyhow::Result<ExitCode> {
    let mut problems = Vec::new();
    let mut parts = Vec::new();
    let config = match Config::load(global) {
        Ok(config) => Some(config),
        Err(err) => {
            problems.push(format!("{err:#}"));
            None
        }
    };
    if let Some(config) = &config {
        // Everything the file names must load, as every door loads it.
        let built = [
            (
                "policy",
                config.settings.policy().map(|_| "loads".to_owned()),
            ),
            (
                "registry",
                config
                    .settings
                    .registry()
                    .map(|r| format!("{} systems", r.systems().count())),
            ),
            (
                "openapi operations",
                config
                    .settings
                    .operations()
                    .map(|o| format!("{} operations", o.len())),
            ),
            (
                "read-back",
                config.settings.readback().map(|r| {
                    r.drivers()
                        .map(|d| d.name().to_owned())
                        .collect::<Vec<_>>()
                        .join(", ")
                }),
            ),
            (
                "notifiers",
                config.settings.surface_notifiers().map(|n| {
                    let names: Vec<&str> = n.iter().map(|n| n.name()).collect();
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                }),
            ),
        ];
        for (part, outcome) in built {
            match outcome {
                Ok(what) => parts.push((part, what)),
                Err(err) => problems.push(attest_core::error_chain(&err)),
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
    let settings = config.as_ref().map(|c| c.shown()).unwrap_or_default();
    let file = config
        .as_ref()
        .and_then(|c| c.file_path.as_ref())
        .map(|path| path.value.display().to_string());
    let mut out = std::io::stdout().lock();
    if args.json {
        let list: Vec<Value> = settings
            .iter()
            .map(|s| json!({"key": s.key, "value": s.value, "source": s.source.as_str()}))
            .collect();
        let built: serde_json::Map<String, Value> = parts
            .iter()
            .map(|(part, what)| ((*part).to_owned(), json!(what)))
            .collect();
        let report = json!({
            "ok": problems.is_empty(),
            "file": file,
            "doors": DOORS,
            "settings": list,
            "built": built,
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
        writeln!(out, "every door gets these settings: {DOORS}")?;
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
        for (part, what) in &parts {
            writeln!(out, "built: {part}: {}", crate::terminal::escape(what))?;
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

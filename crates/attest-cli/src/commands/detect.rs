use std::io::Write;
use std::process::ExitCode;

use attest_core::{DetectInput, Detection};

use crate::cli::{CallArgs, DetectArgs};
use crate::config::Config;

/// The detection input the call arguments describe.
pub(crate) fn input(call: &CallArgs) -> anyhow::Result<DetectInput<'_>> {
    if let Some(name) = &call.tool {
        return Ok(match &call.server {
            Some(server) => DetectInput::NamedServerTool { name, server },
            None => DetectInput::Tool { name, server: None },
        });
    }
    if let (Some(method), Some(url)) = (&call.method, &call.url) {
        return Ok(DetectInput::Http {
            method,
            url,
            body: call.body.as_deref().map(str::as_bytes),
        });
    }
    if let Some(path) = &call.sdk {
        return Ok(DetectInput::Sdk { path });
    }
    if let Some(name) = &call.function {
        return Ok(DetectInput::Function { name });
    }
    anyhow::bail!(
        "describe the call: --tool NAME, --method M --url U, --sdk PATH or --function NAME"
    )
}

/// Detects as the servers do: with the configured registry files and hosts.
pub(crate) fn run(config: &Config, args: &DetectArgs) -> anyhow::Result<ExitCode> {
    let detection = config.registry()?.detect(&input(&args.call)?);
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &detection)?;
        writeln!(out)?;
    } else {
        print(&mut out, &detection)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn print(out: &mut impl Write, detection: &Detection) -> std::io::Result<()> {
    writeln!(
        out,
        "system {}  verb {}  target {}  (from {}, {})",
        detection.system,
        detection.verb,
        detection.target.as_deref().unwrap_or("-"),
        detection.source.as_str(),
        if detection.recognised {
            "recognised"
        } else {
            "NOT recognised: writes ask"
        }
    )
}

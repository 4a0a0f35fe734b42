use std::io::Write;
use std::process::ExitCode;

use attest_core::detect::ToolHints;
use attest_core::{
    CallContext, Describer, DetectInput, FunctionCall, HttpCall, McpCall, ProtocolCall, SdkCall,
};
use attest_policy::Action;
use serde_json::{json, Value};

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

/// The tool's annotations `--annotations` gives (none: the tool says nothing): a JSON
/// object as an MCP server lists a tool's `annotations` (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint` as booleans; `title` and `openWorldHint` are read past), or hint names
/// separated by commas. Anything else is refused with what was expected.
pub(crate) fn annotations(call: &CallArgs) -> anyhow::Result<ToolHints> {
    let mut hints = ToolHints::default();
    let Some(text) = call.annotations.as_deref().map(str::trim) else {
        return Ok(hints);
    };
    if text.starts_with('{') {
        let value: serde_json::Map<String, Value> = serde_json::from_str(text)
            .map_err(|err| anyhow::anyhow!("--annotations is not a JSON object: {err}"))?;
        for (key, value) in &value {
            let slot = match key.as_str() {
                "readOnlyHint" => &mut hints.read_only,
                "destructiveHint" => &mut hints.destructive,
                "idempotentHint" => &mut hints.idempotent,
                "title" | "openWorldHint" => continue,
                other => anyhow::bail!(
                    "--annotations: unknown annotation {other:?} (MCP's are readOnlyHint, \
                     destructiveHint, idempotentHint, openWorldHint and title)"
                ),
            };
            *slot = Some(value.as_bool().ok_or_else(|| {
                anyhow::anyhow!("--annotations: {key} must be true or false, not {value}")
            })?);
        }
        return Ok(hints);
    }
    for name in text.split(',').map(str::trim) {
        match name {
            "destructive" | "destructiveHint" => hints.destructive = Some(true),
            "read-only" | "readOnly" | "readOnlyHint" => hints.read_only = Some(true),
            "idempotent" | "idempotentHint" => hints.idempotent = Some(true),
            other => anyhow::bail!(
                "--annotations: unknown hint {other:?} (destructive, read-only, idempotent, \
                 or a JSON object of the tool's annotations)"
            ),
        }
    }
    Ok(hints)
}

/// The action a command is told of, described as the doors describe theirs: `input` as
/// its protocol's call (an MCP tool, an HTTP request, an SDK method, a function), turned
/// into the action by core with the configured registry, operation ids and read-back
/// drivers. `params`, when given, are the action's (else the call's own: an HTTP body's);
/// `hints`, an MCP tool's annotations, weigh as `mcp-proxy` weighs them (core's
/// `apply_hints`, through the MCP call).
pub(crate) fn describe(
    describer: &Describer,
    input: &DetectInput<'_>,
    params: Option<Value>,
    hints: ToolHints,
    context: CallContext<'_>,
) -> Result<Action, String> {
    let arguments = params.clone().unwrap_or_else(|| json!({}));
    let call = match *input {
        DetectInput::Tool { name, server } => ProtocolCall::Mcp(McpCall {
            server: server.unwrap_or_default(),
            tool: name,
            arguments,
            annotations: hints,
            context,
            ..McpCall::default()
        }),
        DetectInput::NamedServerTool { name, server } => ProtocolCall::Mcp(McpCall {
            server,
            server_named: true,
            tool: name,
            arguments,
            annotations: hints,
            context,
            ..McpCall::default()
        }),
        DetectInput::Http { method, url, body } => ProtocolCall::Http(HttpCall {
            method,
            url,
            body: body.unwrap_or_default(),
            context,
            ..HttpCall::default()
        }),
        DetectInput::Sdk { path } => ProtocolCall::Sdk(SdkCall {
            path,
            arguments,
            context,
        }),
        DetectInput::Function { name } => ProtocolCall::Function(FunctionCall {
            name,
            arguments,
            context,
            ..FunctionCall::default()
        }),
        _ => return Err("a call needs a tool, or a method and a url".to_owned()),
    };
    let mut action = describer.action(call);
    if let Some(params) = params {
        action.params = params;
    }
    Ok(action)
}

/// Detects as the doors do: with the configured registry files and hosts.
pub(crate) fn run(config: &Config, args: &DetectArgs) -> anyhow::Result<ExitCode> {
    let describer = config.describer()?;
    let action = describe(
        &describer,
        &input(&args.call)?,
        None,
        annotations(&args.call)?,
        CallContext::default(),
    )
    .map_err(anyhow::Error::msg)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut detection = json!({
            "system": action.system,
            "verb": action.verb,
            "target": action.target,
            "source": action.source,
            "recognised": action.recognised,
        });
        if let Some(risk) = action.risk {
            detection["risk"] = json!(risk);
        }
        if let Some(hint) = &action.extra.risk_hint {
            detection["risk_hint"] = json!(hint);
        }
        serde_json::to_writer(&mut out, &detection)?;
        writeln!(out)?;
    } else {
        print(&mut out, &action)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What detection found of the call `action` describes, on one line.
pub(crate) fn print(out: &mut impl Write, action: &Action) -> std::io::Result<()> {
    writeln!(
        out,
        "system {}  verb {}  target {}  (from {}, {})",
        action.system,
        action.verb,
        action.target.as_deref().unwrap_or("-"),
        action.source.as_str(),
        if action.recognised {
            "recognised"
        } else {
            "NOT recognised: writes ask"
        }
    )?;
    if let Some(risk) = action.risk {
        match &action.extra.risk_hint {
            Some(hint) => writeln!(out, "risk {risk}: the tool's own annotation {hint}"),
            None => writeln!(out, "risk {risk}"),
        }?;
    }
    Ok(())
}

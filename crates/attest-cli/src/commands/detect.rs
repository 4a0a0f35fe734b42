use std::io::Write;
use std::process::ExitCode;

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

/// The action a command is told of, described as the doors describe theirs: `input` as
/// its protocol's call (an MCP tool, an HTTP request, an SDK method, a function), turned
/// into the action by core with the configured registry, operation ids and read-back
/// drivers. `params`, when given, are the action's (else the call's own: an HTTP body's).
pub(crate) fn describe(
    describer: &Describer,
    input: &DetectInput<'_>,
    params: Option<Value>,
    context: CallContext<'_>,
) -> Result<Action, String> {
    let arguments = params.clone().unwrap_or_else(|| json!({}));
    let call = match *input {
        DetectInput::Tool { name, server } => ProtocolCall::Mcp(McpCall {
            server: server.unwrap_or_default(),
            tool: name,
            arguments,
            context,
            ..McpCall::default()
        }),
        DetectInput::NamedServerTool { name, server } => ProtocolCall::Mcp(McpCall {
            server,
            server_named: true,
            tool: name,
            arguments,
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
    )
}

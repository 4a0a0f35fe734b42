//! A coding agent's own tools (Claude Code's names: `Bash`, `Write`, `Edit`, `MultiEdit`,
//! `Read`, `WebFetch`, … and MCP tools `mcp__server__tool`), described from the tool's
//! name and its input: a `Bash` command by what the command does ([`super::shell`]), a
//! file write by its path (a write to the agent's own settings, an Attest policy, CI
//! workflows, keys or `.env` files is riskier than one to source code).

use attest_policy::{Source, Verb};
use serde_json::Value;

use super::protected_path::file_write;
use super::{shell, url, DetectInput, Detection, Registry};

/// The system of file reads and writes on the agent's machine.
pub const FILES_SYSTEM: &str = "files";

/// Detects one coding-agent tool call from its name and input.
pub(super) fn detect_coding_tool(registry: &Registry, name: &str, input: &Value) -> Detection {
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    match name {
        "BashOutput" | "KillShell" | "KillBash" => local("claude-code", Verb::Read, None),
        "Bash" => match text("command") {
            Some(command) => shell::detect_command(registry, command),
            None => Detection::unrecognised(Source::Heuristic),
        },
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
            let path = text("file_path")
                .or_else(|| text("notebook_path"))
                .unwrap_or("");
            file_write(path)
        }
        "Read" | "Glob" | "Grep" | "LS" | "NotebookRead" => {
            local(FILES_SYSTEM, Verb::Read, Some("file"))
        }
        "WebFetch" => match text("url") {
            Some(url) => url::detect_http(registry, "GET", url, None),
            None => local("web", Verb::Read, None),
        },
        "WebSearch" => local("web", Verb::Search, None),
        "TodoWrite"
        | "Task"
        | "Agent"
        | "ExitPlanMode"
        | "ListMcpResourcesTool"
        | "ReadMcpResourceTool" => local("claude-code", Verb::Read, None),
        _ => registry.detect(&DetectInput::Tool { name, server: None }),
    }
}

fn local(system: &str, verb: Verb, target: Option<&str>) -> Detection {
    Detection {
        face_verb: None,
        system: system.to_owned(),
        verb,
        target: target.map(str::to_owned),
        source: Source::Heuristic,
        recognised: true,
        risk: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use attest_policy::Risk;

    use super::*;

    fn found(name: &str, input: Value) -> Detection {
        detect_coding_tool(Registry::shared(), name, &input)
    }

    #[test]
    fn file_writes_are_judged_by_path() {
        let code = found("Edit", json!({"file_path": "/work/src/main.rs"}));
        assert_eq!(
            (code.system.as_str(), code.verb, code.risk),
            ("files", Verb::Write, Some(Risk::Medium))
        );
        for path in [
            "/home/me/.claude/settings.json",
            ".github/workflows/ci.yml",
            "/work/.env.local",
            "/home/me/.ssh/authorized_keys",
            "attest.yaml",
            "/etc/hosts",
            ".mcp.json",
            "/work/.cursor/mcp.json",
            ".codex/config.toml",
            "ledger.sqlite",
            "../outside/file.rs",
            "",
        ] {
            let write = found("Write", json!({"file_path": path, "content": "x"}));
            assert_eq!(write.risk, Some(Risk::High), "{path}");
        }
        let notebook = found("NotebookEdit", json!({"notebook_path": "/work/a.ipynb"}));
        assert_eq!(notebook.verb, Verb::Write);
    }

    #[test]
    fn bash_mcp_and_reads() {
        let push = found("Bash", json!({"command": "git push origin main"}));
        assert_eq!((push.system.as_str(), push.verb), ("git", Verb::Share));
        let issue = found("mcp__github__create_issue", json!({"title": "x"}));
        assert_eq!(
            (issue.system.as_str(), issue.verb),
            ("github", Verb::Create)
        );
        let read = found("Read", json!({"file_path": "/etc/passwd"}));
        assert_eq!(read.verb, Verb::Read);
        let bad = found("Bash", json!({"command": 7}));
        assert!(!bad.recognised);
    }
}

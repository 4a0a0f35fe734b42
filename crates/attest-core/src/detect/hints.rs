//! A tool's own annotations (MCP's `readOnlyHint`, `destructiveHint`, `idempotentHint`),
//! which the MCP specification calls untrusted hints, applied to a detected action.

use attest_policy::{Action, Risk, Verb};

/// What a tool says about itself. Each hint is `None` when the tool does not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// The tool does not change anything.
    pub read_only: Option<bool>,
    /// The tool may destroy something.
    pub destructive: Option<bool>,
    /// Calling the tool twice has the effect of calling it once.
    pub idempotent: Option<bool>,
}

/// Uses a tool's hints. They may make a call stricter, and may make a call Attest could
/// not place a read; they never turn a name Attest recognises as a write into a read.
///
/// - `read_only: true`: an unrecognised call becomes a `read`.
/// - `destructive: true` (on a tool that is not read-only): delete-level risk, `very_high`.
/// - `idempotent: true` on an unplaced `write`: an `update` (a repeatable overwrite).
pub fn apply_hints(action: &mut Action, hints: &ToolHints) {
    if hints.read_only == Some(true) {
        if !action.recognised && !action.verb.is_read() {
            action.verb = Verb::Read;
        }
        if action.verb.is_read() {
            return;
        }
    }
    if hints.destructive == Some(true) {
        if action.base_risk() < Risk::VeryHigh {
            action.extra.risk_hint = Some("destructiveHint: true".to_owned());
        }
        action.risk = Some(Risk::VeryHigh);
    } else if hints.idempotent == Some(true) && action.verb == Verb::Write {
        action.verb = Verb::Update;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use attest_policy::Policy;

    use super::*;
    use crate::detect::{detect_action, DetectInput};

    fn tool(server: &str, name: &str) -> Action {
        let input = DetectInput::Tool {
            name,
            server: Some(server),
        };
        detect_action(&input, json!({}))
    }

    #[test]
    fn hints_make_calls_stricter_or_place_unknown_reads() {
        let read_only = ToolHints {
            read_only: Some(true),
            ..ToolHints::default()
        };
        let mut read = tool("everything", "echo");
        apply_hints(&mut read, &read_only);
        assert!(read.verb.is_read(), "{:?}", read.verb);

        // A name Attest recognises as a write stays a write, whatever the hint says.
        let mut write = tool("github", "create_issue");
        assert!(write.recognised);
        apply_hints(&mut write, &read_only);
        assert_eq!(write.verb, Verb::Create);

        let destructive = ToolHints {
            destructive: Some(true),
            ..ToolHints::default()
        };
        let mut gone = tool("everything", "echo");
        apply_hints(&mut gone, &destructive);
        assert_eq!(gone.base_risk(), Risk::VeryHigh);
        // The policy's verdict names the annotation that raised the tier.
        let verdict = attest_policy::PolicyEngine::default_policy()
            .unwrap()
            .evaluate(&gone)
            .unwrap();
        assert!(
            verdict
                .reasons
                .iter()
                .any(|r| r.contains("destructiveHint: true")),
            "{:?}",
            verdict.reasons
        );
        // A delete is very high risk on its own: the hint raised nothing, and is not named.
        let mut delete = tool("github", "delete_repository");
        apply_hints(&mut delete, &destructive);
        assert_eq!(delete.extra.risk_hint, None);

        let idempotent = ToolHints {
            idempotent: Some(true),
            ..ToolHints::default()
        };
        let mut set = tool("x", "frobnicate");
        set.verb = Verb::Write;
        apply_hints(&mut set, &idempotent);
        assert_eq!(set.verb, Verb::Update);
    }
}

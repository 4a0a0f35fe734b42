//! Damaged policies never panic, and every error names a line inside the text.

use attest_policy::{lint, PolicyEngine, PolicyError, DEFAULT_POLICY_YAML};

#[cfg(test)] // Lets clippy see a test helper, which may panic.
fn check(text: &str) {
    let lines = text.lines().count() + 1;
    match PolicyEngine::from_yaml(text, "damaged.yaml") {
        Ok(_) => {}
        Err(PolicyError::Yaml { line, .. }) => assert!(line <= lines, "{text}"),
        Err(other) => panic!("{other}"),
    }
    for problem in lint(text, "damaged.yaml") {
        assert!(problem.line <= lines, "{problem}\n{text}");
    }
}

#[test]
fn truncated_default_policies() {
    let text = DEFAULT_POLICY_YAML;
    for (at, _) in text.char_indices().step_by(7) {
        check(&text[..at]);
    }
}

#[test]
fn default_policies_with_one_character_replaced() {
    let text = DEFAULT_POLICY_YAML;
    let positions: Vec<usize> = text.char_indices().map(|(i, _)| i).step_by(11).collect();
    for replacement in [":", "[", "{", "\t", "*", "- ", "&a", "*a", "'", "\""] {
        for &at in &positions {
            let end = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
            let damaged = format!("{}{}{}", &text[..at], replacement, &text[end..]);
            check(&damaged);
        }
    }
}

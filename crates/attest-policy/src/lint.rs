//! Reporting policy problems: every one, with its line.

use std::fmt;

use serde::Serialize;

use crate::file::parse_as;
use crate::PolicyError;

/// The largest policy or policy-test file read, in bytes.
pub const MAX_POLICY_BYTES: usize = 1 << 20;

/// Most problems one lint reports; a file with more is mostly noise by then.
const MAX_PROBLEMS: usize = 200;

/// One thing wrong with a policy file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Where the text came from (a file name), as the caller named it.
    pub origin: String,
    /// 1-based line; 0 when the problem is the whole text (for example its size).
    pub line: usize,
    /// 1-based column; 0 when the problem is the whole text.
    pub column: usize,
    /// What is wrong, with the YAML path of the node when known
    /// (`policies[2].match.verb: unknown verb "sned" …`).
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::error::place(
            &self.origin,
            self.line,
            self.column,
            &self.message,
        ))
    }
}

impl From<Problem> for PolicyError {
    fn from(p: Problem) -> Self {
        PolicyError::Yaml {
            origin: p.origin,
            line: p.line,
            column: p.column,
            message: p.message,
        }
    }
}

/// Checks a policy file and returns every problem found, in the order found (an
/// empty list means the file loads). What `attest policy check FILE` prints.
///
/// Every value in a rule (name, decision, approvers, each `match` key, each `params`
/// condition), each rule's own checks, each organisation list and each other top-level
/// section can contribute a problem; a YAML syntax error, or an error outside every rule
/// and section (an unknown top-level key, `policies:` that is not a list), ends the search.
/// A problem with the whole text (an empty file, its size) has line and column 0 and is
/// shown as `file: message`.
pub fn lint(text: &str, origin: &str) -> Vec<Problem> {
    if let Err(error) = check_policy_text(text, origin) {
        let (line, column, message) = match error {
            PolicyError::Yaml {
                line,
                column,
                message,
                ..
            } => (line, column, message),
            PolicyError::TooLarge { size, limit, .. } => (
                0,
                0,
                format!("{size} bytes is more than the limit of {limit} bytes"),
            ),
            other => (0, 0, other.to_string()),
        };
        return vec![Problem {
            origin: origin.to_owned(),
            line,
            column,
            message,
        }];
    }
    let mut problems = lint_slots::<crate::file::PolicyFile>(text, origin);
    if problems.is_empty() {
        // Checks across sections (a `when:` naming a calendar) run on the loaded policy.
        if let Err(PolicyError::Yaml {
            line,
            column,
            message,
            ..
        }) = crate::PolicyEngine::from_yaml(text, origin)
        {
            problems.push(Problem {
                origin: origin.to_owned(),
                line,
                column,
                message,
            });
        }
    }
    problems
}

/// Every mistake in a YAML document of type `T` whose parts are read through [`Leaf`]s
/// (see `attest policy check`): parses, notes the first error and the innermost leaf it
/// was in, parses again with that leaf skipped, and so on; in file order. Empty when `T`
/// loads. A YAML syntax error, or an error outside every leaf, ends the search.
///
/// [`Leaf`]: crate::Leaf
pub fn lint_slots<T: serde::de::DeserializeOwned>(text: &str, origin: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut skip = Vec::new();
    loop {
        let parsed = parse_as::<T>(text, &skip);
        let Err(error) = parsed.result else {
            break;
        };
        let found = problem(&error, origin);
        // Skipping the slot did not get past it (a YAML syntax error fails every pass
        // the same way): the same problem again is not a second one.
        if problems.contains(&found) {
            break;
        }
        problems.push(found);
        match parsed.failed_slot {
            Some(slot) if !skip.contains(&slot) && problems.len() < MAX_PROBLEMS => {
                skip.push(slot);
            }
            _ => break,
        }
    }
    // A part's own checks run after the values inside it: list in the file's order.
    problems.sort_by_key(|p| (p.line, p.column));
    problems
}

/// What is checked before parsing a policy: its size, and that it says something.
/// An empty policy is refused rather than read as "no rules": a file that was
/// truncated or never written must not change what agents may do.
pub(crate) fn check_policy_text(text: &str, origin: &str) -> Result<(), PolicyError> {
    check_size(text, origin)?;
    let says_something = text
        .lines()
        .map(str::trim)
        .any(|line| !line.is_empty() && !line.starts_with('#') && line != "---" && line != "...");
    if !says_something {
        return Err(PolicyError::Yaml {
            origin: origin.to_owned(),
            line: 0,
            column: 0,
            message: "empty policy (write `policies: []` for the built-in rules alone)".to_owned(),
        });
    }
    Ok(())
}

/// Refuses text over [`MAX_POLICY_BYTES`].
pub(crate) fn check_size(text: &str, origin: &str) -> Result<(), PolicyError> {
    if text.len() > MAX_POLICY_BYTES {
        return Err(PolicyError::TooLarge {
            origin: origin.to_owned(),
            size: text.len(),
            limit: MAX_POLICY_BYTES,
        });
    }
    Ok(())
}

/// A serde_yaml error as a problem: its location, and its message without the
/// " at line L column C" that serde_yaml puts in it.
pub(crate) fn problem(error: &serde_yaml::Error, origin: &str) -> Problem {
    let text = error.to_string();
    let (line, column, message) = match error.location() {
        Some(at) => {
            // serde_yaml says where at the end ("… at line 3 column 5"), or before the
            // context of a syntax error ("… at line 3 column 5, while parsing …").
            let place = format!(" at line {} column {}", at.line(), at.column());
            let message = text.replacen(&place, "", 1);
            (at.line(), at.column(), message)
        }
        None => (0, 0, text),
    };
    Problem {
        origin: origin.to_owned(),
        line,
        column,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_file_has_no_problems() {
        let text = "policies:\n  - name: x\n    match: {verb: send}\n    decision: ask\n";
        assert_eq!(lint(text, "p.yaml"), []);
    }

    #[test]
    fn an_unknown_key_inside_match_does_not_hide_the_rules_other_mistakes() {
        let text = concat!(
            "policies:\n",                           // 1
            "  - name: a\n",                         // 2
            "    match: {sytem: x, verb: create}\n", // 3
            "    decision: maybe\n",                 // 4
            "  - name: b\n",                         // 5
            "    decision: act\n",                   // 6
        );
        let found: Vec<(usize, String)> = lint(text, "p.yaml")
            .into_iter()
            .map(|p| (p.line, p.message))
            .collect();
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].1.contains("unknown field `sytem`"), "{found:?}");
        assert_eq!(found[1].0, 4, "{found:?}");
        assert!(
            found[1].1.contains("unknown decision \"maybe\""),
            "{found:?}"
        );
        assert!(found[2].1.contains("missing field `match`"), "{found:?}");
    }

    #[test]
    fn reports_every_bad_rule_and_section() {
        let text = concat!(
            "domains: {internal: [bob@acme.com]}\n",       // 1
            "policies:\n",                                 // 2
            "  - name: a\n",                               // 3
            "    match: {verb: sned}\n",                   // 4
            "    decision: ask\n",                         // 5
            "  - name: b\n",                               // 6
            "    match: {verb: send}\n",                   // 7
            "    decision: maybe\n",                       // 8
            "  - name: c\n",                               // 9
            "    match: {params: {/to: {regex: '(' }}}\n", // 10
            "    decision: act\n",                         // 11
            "  - name: ok\n",                              // 12
            "    match: {}\n",                             // 13
            "    decision: act\n",                         // 14
        );
        let problems = lint(text, "p.yaml");
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [1, 4, 8, 10], "{problems:#?}");
        assert!(problems[1].message.contains("unknown verb \"sned\""));
        assert!(
            problems[1].message.starts_with("policies[0].match.verb"),
            "{}",
            problems[1].message
        );
        assert!(!problems[1].message.contains(" at line "));
        assert_eq!(
            problems[1].to_string(),
            format!("p.yaml:4:{}: {}", problems[1].column, problems[1].message)
        );
    }

    #[test]
    fn reports_every_mistake_inside_one_rule_and_each_org_list() {
        let text = concat!(
            "domains: {internal: [bob@acme.com]}\n",      // 1
            "org:\n",                                     // 2
            "  blocked: [\"gmail\"]\n",                   // 3
            "  approval_required: [\"github.frob\"]\n",   // 4
            "policies:\n",                                // 5
            "  - name: a\n",                              // 6
            "    match: {verb: sned, target: outside}\n", // 7
            "    decision: maybe\n",                      // 8
            "  - name: b\n",                              // 9
            "    match:\n",                               // 10
            "      params:\n",                            // 11
            "        /to: {regex: '('}\n",                // 12
            "    decision: act\n",                        // 13
            "    approvers: [ann@acme.com]\n",            // 14
            "  - name: a\n",                              // 15
            "    match: {risk: extreme}\n",               // 16
            "    decision: ask\n",                        // 17
        );
        let problems = lint(text, "p.yaml");
        let places: Vec<(usize, usize)> = problems.iter().map(|p| (p.line, p.column)).collect();
        assert_eq!(
            places,
            [
                (1, 22),
                (3, 13),
                (4, 23),
                (7, 19),
                (7, 33),
                (8, 15),
                (9, 5),
                (12, 22),
                (15, 5),
                (16, 19)
            ],
            "{problems:#?}"
        );
        for (problem, says) in problems.iter().zip([
            "address, not a domain",
            "names no verb",
            "unknown verb \"frob\"",
            "unknown verb \"sned\"",
            "unknown target class",
            "unknown decision",
            "approvers only apply to decision ask",
            "bad regex",
            "duplicate rule name",
            "unknown risk tier",
        ]) {
            assert!(problem.message.contains(says), "{problem}");
        }
    }

    #[test]
    fn quorum_and_wait_mistakes_are_reported_where_they_are() {
        let text = concat!(
            "policies:\n",                                  // 1
            "  - name: pay\n",                              // 2
            "    match: {verb: pay}\n",                     // 3
            "    decision: ask\n",                          // 4
            "    approvers: {from: [finance], count: 0}\n", // 5
            "    escalate_after: 1h\n",                     // 6
            "    remind_after: soon\n",                     // 7
        );
        let problems = lint(text, "p.yaml");
        let found: Vec<(usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert_eq!(found.len(), 3, "{problems:#?}");
        assert!(
            found
                .iter()
                .any(|(line, m)| *line == 5 && m.contains("count must be at least 1")),
            "{problems:#?}"
        );
        assert!(
            found
                .iter()
                .any(|(line, m)| *line == 7 && m.contains("not a length")),
            "{problems:#?}"
        );
        assert!(
            found
                .iter()
                .any(|(line, m)| *line == 2 && m.contains("escalate_after needs escalate_to")),
            "{problems:#?}"
        );
    }

    #[test]
    fn a_missing_name_or_decision_is_reported() {
        let problems = lint(
            "policies:\n  - match: {}\n    decision: act\n  - name: x\n    match: {}\n",
            "p.yaml",
        );
        let said: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(problems.len(), 2, "{said:?}");
        assert!(said[0].contains("missing field `name`"), "{said:?}");
        assert!(said[1].contains("missing field `decision`"), "{said:?}");
    }

    #[test]
    fn an_empty_file_is_one_problem_about_the_whole_file() {
        for text in ["", "# nothing\n", "---\n"] {
            let problems = lint(text, "empty.yaml");
            assert_eq!(problems.len(), 1);
            assert_eq!(
                problems[0].to_string(),
                "empty.yaml: empty policy (write `policies: []` for the built-in rules alone)"
            );
        }
    }

    #[test]
    fn syntax_errors_stop_the_search() {
        let problems = lint("policies: [\n", "p.yaml");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].line >= 1);
    }

    #[test]
    fn oversized_text_is_one_problem() {
        let text = "#".repeat(MAX_POLICY_BYTES + 1);
        let problems = lint(&text, "big.yaml");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].line, 0);
        assert!(problems[0].message.contains("more than the limit"));
    }

    #[test]
    fn bad_limits_name_their_line_and_field() {
        let text = concat!(
            "policies:\n",
            "  - name: a\n",
            "    match: {}\n",
            "    limit: {count: 5, per: 1h, every: 2}\n",
            "  - name: b\n",
            "    match: {}\n",
            "    limit: {sum: amount, max: 5, per: 1h}\n",
            "  - name: c\n",
            "    match: {}\n",
            "    limit: {count: 5, per: 0s}\n",
            "  - name: d\n",
            "    match: {}\n",
            "    limit: {count: 5, sum: /a, max: 1, per: 1h}\n",
        );
        let problems = lint(text, "p.yaml");
        let found: Vec<(usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert_eq!(problems.len(), 4, "{found:#?}");
        for ((line, message), (want_line, field, says)) in found.iter().zip([
            (4, "policies[0].limit", "unknown field `every`"),
            (7, "policies[1].limit.sum", "not a JSON pointer"),
            (10, "policies[2].limit.per", "shorter than a second"),
            (13, "policies[3].limit", "not both"),
        ]) {
            assert_eq!(*line, want_line, "{message}");
            assert!(
                message.contains(field) && message.contains(says),
                "{message}"
            );
        }
    }

    #[test]
    fn bad_dedupes_name_their_line_and_field() {
        let text = concat!(
            "dedupe: {window: soon}\n",
            "policies:\n",
            "  - name: a\n",
            "    match: {}\n",
            "    decision: act\n",
            "    dedupe: {window: 60s, decision: act}\n",
            "  - name: b\n",
            "    match: {}\n",
            "    decision: act\n",
            "    dedupe: {decision: refuse}\n",
        );
        let problems = lint(text, "p.yaml");
        let found: Vec<(usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert_eq!(problems.len(), 3, "{found:#?}");
        for (want_line, field, says) in [
            (1, "dedupe.window", "not a length"),
            (6, "policies[0].dedupe.decision", "expected ask or refuse"),
            (10, "policies[1].dedupe", "dedupe needs `window`"),
        ] {
            assert!(
                found
                    .iter()
                    .any(|(line, m)| *line == want_line && m.contains(field) && m.contains(says)),
                "{want_line} {field} {says}: {found:#?}"
            );
        }
    }
}

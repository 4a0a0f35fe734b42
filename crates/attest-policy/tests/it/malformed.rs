//! Every kind of malformed policy: an error naming the origin, line and message, and
//! the lint listing every problem.

use attest_policy::{lint, PolicyEngine, PolicyError};

/// (what, YAML, line, a fragment of the message)
const CASES: &[(&str, &str, usize, &str)] = &[
    ("yaml syntax", "policies:\n  - name: a: b\n", 2, "mapping values are not allowed"),
    ("unclosed flow", "policies:\n  - {name: a, match: {}, decision: ask\n", 3, "did not find expected"),
    ("tab indentation", "policies:\n\t- name: a\n", 2, "found character that cannot start any token"),
    ("two documents", "policies: []\n---\npolicies: []\n", 0, "more than one document"),
    ("unknown top-level key", "version: 1\npolicys: []\n", 2, "unknown field `policys`"),
    ("unknown rule key", "policies:\n  - name: a\n    match: {}\n    desicion: ask\n", 4, "unknown field `desicion`"),
    ("unknown match key", "policies:\n  - name: a\n    match:\n      verbs: send\n    decision: ask\n", 4, "unknown field `verbs`"),
    ("bad decision", "policies:\n  - name: a\n    match: {}\n    decision: maybe\n", 4, "unknown decision \"maybe\""),
    ("recorded is not a rule decision", "policies:\n  - name: a\n    match: {}\n    decision: recorded\n", 4, "unknown decision \"recorded\""),
    ("missing decision", "policies:\n  - name: a\n    match: {}\n", 2, "missing field `decision`"),
    ("missing match", "policies:\n  - name: a\n    decision: ask\n", 2, "missing field `match`"),
    ("missing name", "policies:\n  - match: {}\n    decision: ask\n", 2, "missing field `name`"),
    ("empty name", "policies:\n  - name: ''\n    match: {}\n    decision: ask\n", 2, "empty rule name"),
    ("reserved name", "policies:\n  - name: R2\n    match: {}\n    decision: ask\n", 2, "reserved for a built-in rule"),
    ("duplicate rule name", "policies:\n  - {name: a, match: {}, decision: ask}\n  - {name: A, match: {}, decision: act}\n", 3, "duplicate rule name \"A\""),
    ("bad verb", "policies:\n  - name: a\n    match:\n      verb: [send, sned]\n    decision: ask\n", 4, "unknown verb \"sned\""),
    ("bad verb glob", "policies:\n  - name: a\n    match: {verb: 'x*'}\n    decision: ask\n", 3, "unknown verb \"x*\""),
    ("bad target class", "policies:\n  - name: a\n    match:\n      target: outside\n    decision: ask\n", 4, "unknown target class \"outside\""),
    ("bad risk in match", "policies:\n  - name: a\n    match:\n      risk: huge\n    decision: ask\n", 4, "unknown risk tier \"huge\""),
    ("empty list in match", "policies:\n  - name: a\n    match:\n      system: []\n    decision: ask\n", 4, "empty list"),
    ("empty pattern", "policies:\n  - name: a\n    match:\n      system: ''\n    decision: ask\n", 4, "empty pattern"),
    ("null match key", "policies:\n  - name: a\n    match:\n      system:\n    decision: ask\n", 4, "invalid type"),
    ("match is a string", "policies:\n  - name: a\n    match: everything\n    decision: ask\n", 3, "invalid type: string \"everything\""),
    ("recognised is not a boolean", "policies:\n  - name: a\n    match: {recognised: maybe}\n    decision: ask\n", 3, "invalid type"),
    ("bad action pattern", "policies:\n  - name: a\n    match: {action: gmail}\n    decision: ask\n", 3, "names no verb"),
    ("bad regex", "policies:\n  - name: a\n    match:\n      params:\n        /to: {regex: '[a-'}\n    decision: ask\n", 5, "bad regex \"[a-\""),
    ("unknown operator", "policies:\n  - name: a\n    match:\n      params:\n        /amount: {above: 5}\n    decision: ask\n", 5, "unknown field `above`"),
    ("no operator", "policies:\n  - name: a\n    match:\n      params:\n        /amount: {}\n    decision: ask\n", 5, "no operator"),
    ("number as a string", "policies:\n  - name: a\n    match:\n      params:\n        /amount: {gt: '50000'}\n    decision: ask\n", 5, "expected a number"),
    ("list for eq", "policies:\n  - name: a\n    match:\n      params:\n        /amount: {eq: [1, 2]}\n    decision: ask\n", 5, "expected a string, number or boolean"),
    ("exists is not a boolean", "policies:\n  - name: a\n    match:\n      params:\n        /cc: {exists: yes please}\n    decision: ask\n", 5, "invalid type"),
    ("path is not a pointer", "policies:\n  - name: a\n    match:\n      params:\n        amount: {gt: 5}\n    decision: ask\n", 5, "not a JSON pointer"),
    ("duplicate path", "policies:\n  - name: a\n    match:\n      params:\n        /a: {gt: 5}\n        /a: {lt: 9}\n    decision: ask\n", 6, "duplicate key \"/a\""),
    ("approvers on act", "policies:\n  - name: a\n    match: {}\n    decision: act\n    approvers: [finance]\n", 2, "approvers only apply to decision ask"),
    ("policies is not a list", "policies: {name: a}\n", 1, "invalid type: map, expected a sequence"),
    ("agents value is not a list", "agents:\n  bot: {name: a}\n", 2, "invalid type: map, expected a sequence"),
    ("bad rule in an agent", "agents:\n  bot:\n    - name: a\n      match: {verb: fly}\n      decision: ask\n", 4, "unknown verb \"fly\""),
    ("empty agent pattern", "agents:\n  '': []\n", 2, "empty pattern"),
    ("group name with @", "groups:\n  ann@acme.com: [ann@acme.com]\n", 2, "looks like an address"),
    ("duplicate group", "groups:\n  finance: [a@x.io]\n  Finance: [b@x.io]\n", 3, "duplicate key \"Finance\""),
    ("empty group", "groups:\n  finance: []\n", 2, "empty list"),
    ("domain is an address", "domains:\n  internal: [bob@acme.com]\n", 2, "is an address, not a domain"),
    ("domain is not a domain", "domains:\n  known: [acme]\n", 2, "\"acme\" is not a domain name"),
    ("unknown domains key", "domains:\n  external: [x.io]\n", 2, "unknown field `external`"),
    ("org pattern without verb", "org:\n  blocked: [stripe]\n", 2, "names no verb"),
    ("org pattern with bad verb", "org:\n  approval_required:\n    - stripe.refund\n", 3, "unknown verb \"refund\""),
    ("unknown org key", "org:\n  allowed: [x.read]\n", 2, "unknown field `allowed`"),
    ("bad risk override tier", "risk:\n  stripe.pay: extreme\n", 2, "unknown risk tier \"extreme\""),
    ("bad risk override pattern", "risk:\n  stripe: high\n", 2, "names no verb"),
    ("unsupported version", "version: 2\npolicies: []\n", 1, "unsupported policy version \"2\""),
    ("not a mapping", "- name: a\n", 1, "invalid type: sequence"),
];

#[test]
fn every_malformed_policy_names_its_line() {
    let mut failures = Vec::new();
    for case in CASES {
        if let Err(e) = std::panic::catch_unwind(|| check_case(case)) {
            let message = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(message);
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[cfg(test)] // Lets clippy see a test helper, which may panic.
fn check_case(case: &(&str, &str, usize, &str)) {
    {
        let (what, yaml, line, fragment) = case;
        let err = match PolicyEngine::from_yaml(yaml, "bad.yaml") {
            Ok(_) => panic!("{what}: loaded"),
            Err(e) => e,
        };
        let PolicyError::Yaml {
            origin,
            line: got,
            message,
            ..
        } = &err
        else {
            panic!("{what}: {err}");
        };
        assert_eq!(origin, "bad.yaml", "{what}");
        assert_eq!(got, line, "{what}: {err}");
        assert!(message.contains(fragment), "{what}: {err}");
        // A problem with the whole text has no position: `bad.yaml: message`.
        let place = if *line == 0 {
            "bad.yaml: ".to_owned()
        } else {
            format!("bad.yaml:{line}:")
        };
        assert!(err.to_string().starts_with(&place), "{what}: {err}");
        assert!(
            !message.contains(&format!(" at line {line} ")),
            "{what}: {err}"
        );
        // The lint reports the same first problem.
        let problems = lint(yaml, "bad.yaml");
        assert_eq!(
            problems.first().map(|p| p.line),
            Some(*line),
            "{what}: {problems:?}"
        );
    }
}

#[test]
fn columns_point_at_the_value() {
    let yaml = "policies:\n  - name: a\n    match: {verb: sned}\n    decision: ask\n";
    let Err(PolicyError::Yaml { line, column, .. }) = PolicyEngine::from_yaml(yaml, "p") else {
        panic!("loaded");
    };
    assert_eq!((line, column), (3, 19));
}

#[test]
fn the_lint_lists_every_problem() {
    let yaml = concat!(
        "version: 1\n",                                          // 1
        "domains:\n",                                            // 2
        "  internal: [acme]\n",                                  // 3
        "groups:\n",                                             // 4
        "  finance: [ann@acme.com]\n",                           // 5
        "org:\n",                                                // 6
        "  blocked: [hr]\n",                                     // 7
        "risk:\n",                                               // 8
        "  stripe.pay: extreme\n",                               // 9
        "agents:\n",                                             // 10
        "  bot:\n",                                              // 11
        "    - {name: b1, match: {verb: fly}, decision: act}\n", // 12
        "    - {name: b2, match: {}, decision: act}\n",          // 13
        "policies:\n",                                           // 14
        "  - {name: p1, match: {}, decision: maybe}\n",          // 15
        "  - {name: b2, match: {}, decision: ask}\n",            // 16
        "  - name: p3\n",                                        // 17
        "    match:\n",                                          // 18
        "      params: {/to: {regex: '('}}\n",                   // 19
        "    decision: act\n",                                   // 20
        "  - {name: ok, match: {}, decision: act}\n",            // 21
    );
    let problems = lint(yaml, "all.yaml");
    let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, [3, 7, 9, 12, 15, 16, 19], "{problems:#?}");
    assert!(problems.iter().all(|p| p.origin == "all.yaml"));
    assert!(
        problems[5].message.contains("duplicate rule name \"b2\""),
        "{}",
        problems[5]
    );
}

#[test]
fn the_lint_stops_at_an_error_outside_rules() {
    let yaml = "policies:\n  - {name: a, match: {verb: fly}, decision: act}\npolicys: []\n";
    let problems = lint(yaml, "p");
    assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [2, 3]);
}

#[test]
fn an_empty_policy_file_is_an_error() {
    for text in ["", "# only a comment\n"] {
        let err = PolicyEngine::from_yaml(text, "empty.yaml").unwrap_err();
        assert!(err.to_string().starts_with("empty.yaml:"), "{err}");
    }
}

#[test]
fn an_oversized_policy_is_refused() {
    let text = format!(
        "policies: []\n{}",
        "#\n".repeat(attest_policy::MAX_POLICY_BYTES)
    );
    let err = PolicyEngine::from_yaml(&text, "big.yaml").unwrap_err();
    assert!(matches!(err, PolicyError::TooLarge { .. }), "{err}");
}

#[test]
fn alias_bombs_are_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let prev = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    assert!(PolicyEngine::from_yaml(&text, "bomb.yaml").is_err());
}

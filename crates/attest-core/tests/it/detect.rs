//! Detection: the corpus of real tool names and endpoints, registry files, and never panicking.
#![cfg(test)]

use attest_core::detect::{detect, DetectError, DetectInput, Detection, Registry};
use attest_policy::{Source, Verb};
use proptest::prelude::*;
use serde::Deserialize;

/// One corpus case: exactly one of `tool`, `http`, `sdk`, `function`, and what to expect.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    tool: Option<String>,
    server: Option<String>,
    /// `METHOD URL`.
    http: Option<String>,
    body: Option<String>,
    sdk: Option<String>,
    function: Option<String>,
    system: String,
    verb: Verb,
    #[serde(default)]
    target: Option<String>,
    /// Defaults to true.
    recognised: Option<bool>,
}

impl Case {
    fn run(&self) -> Detection {
        let input = if let Some(name) = &self.tool {
            DetectInput::Tool {
                name,
                server: self.server.as_deref(),
            }
        } else if let Some(request) = &self.http {
            let (method, url) = request.split_once(' ').unwrap_or(("GET", request));
            DetectInput::Http {
                method,
                url,
                body: self.body.as_deref().map(str::as_bytes),
            }
        } else if let Some(path) = &self.sdk {
            DetectInput::Sdk { path }
        } else if let Some(name) = &self.function {
            DetectInput::Function { name }
        } else {
            panic!("case without input: {self:?}")
        };
        detect(&input)
    }

    fn source(&self) -> Source {
        if self.tool.is_some() {
            Source::Mcp
        } else if self.http.is_some() {
            Source::Url
        } else if self.sdk.is_some() {
            Source::Sdk
        } else {
            Source::Heuristic
        }
    }

    fn label(&self) -> String {
        let input = [&self.tool, &self.http, &self.sdk, &self.function]
            .into_iter()
            .flatten()
            .next()
            .cloned()
            .unwrap_or_default();
        match &self.server {
            Some(server) => format!("{input} (server {server})"),
            None => input,
        }
    }
}

fn corpus() -> Vec<Case> {
    serde_yaml::from_str(include_str!("../data/detect_corpus.yaml")).unwrap()
}

#[test]
fn the_corpus_passes() {
    let cases = corpus();
    assert!(cases.len() >= 300, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let found = case.run();
        let expected = (
            case.system.as_str(),
            case.verb,
            case.target.as_deref(),
            case.recognised.unwrap_or(true),
            case.source(),
        );
        let got = (
            found.system.as_str(),
            found.verb,
            found.target.as_deref(),
            found.recognised,
            found.source,
        );
        if expected != got {
            failures.push(format!(
                "{}\n    expected {expected:?}\n    got      {got:?}",
                case.label()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_corpus_covers_every_kind_of_input() {
    let cases = corpus();
    let count = |f: fn(&Case) -> bool| cases.iter().filter(|c| f(c)).count();
    assert!(count(|c| c.tool.is_some()) >= 150);
    assert!(count(|c| c.http.is_some()) >= 100);
    assert!(count(|c| c.body.is_some()) >= 10);
    assert!(count(|c| c.sdk.is_some()) >= 20);
    assert!(count(|c| c.function.is_some()) >= 15);
}

#[test]
fn a_malformed_registry_names_file_line_and_column() {
    let text = "systems:\n  acme:\n    aliases: [acme_corp]\n\nverbs:\n  sned: [dispatch]\n";
    let err = Registry::default_with(text, "my-registry.yaml").unwrap_err();
    match &err {
        DetectError::Parse {
            origin,
            line,
            column,
            ..
        } => {
            assert_eq!(origin, "my-registry.yaml");
            assert_eq!(*line, 6);
            assert!(*column >= 1);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().starts_with("my-registry.yaml:6:"), "{err}");
    // The chained source says what was wrong.
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("sned"), "{source}");
}

#[test]
fn malformed_registries_of_every_kind_are_errors() {
    let cases = [
        ("systems: [not, a, map]\n", 1),
        (
            "hosts:\n  - host: api.acme.io\n    paths:\n      - {contains: /x}\n",
            4,
        ),
        ("noise: [ok, 'Not OK']\n", 1),
        ("overrides:\n  - {tool: x, verb: write, risk: extreme}\n", 2),
        ("skip_after:\n  repos: -1\n", 2),
        ("systems:\n  acme:\n    domains: ['http://acme.io']\n", 3),
        ("verbs: {send: [x]\n", 2),
    ];
    for (text, line) in cases {
        match Registry::from_yaml(text, "x.yaml") {
            Err(DetectError::Parse { line: got, .. }) => assert_eq!(got, line, "{text}"),
            other => panic!("{text}: unexpected {other:?}"),
        }
    }
}

#[test]
fn a_users_registry_extends_the_default() {
    let text = r#"
systems:
  acme_crm:
    aliases: [acme]
    domains: [acmecrm.example]
verbs:
  pay: [settleup]
overrides:
  - {tool: acme_sync_ledger, verb: write, risk: high}
"#;
    let registry = Registry::default_with(text, "acme.yaml").unwrap();
    let found = registry.detect(&DetectInput::Tool {
        name: "acme_settleup_invoice",
        server: None,
    });
    assert_eq!((found.system.as_str(), found.verb), ("acme_crm", Verb::Pay));
    let found = registry.detect(&DetectInput::Http {
        method: "POST",
        url: "https://api.acmecrm.example/v1/leads",
        body: None,
    });
    assert_eq!(
        (found.system.as_str(), found.verb),
        ("acme_crm", Verb::Create)
    );
    assert!(found.recognised);
    let found = registry.detect(&DetectInput::Tool {
        name: "sync_ledger",
        server: Some("acme"),
    });
    assert_eq!(found.verb, Verb::Write);
    assert_eq!(found.risk, Some(attest_policy::Risk::High));
    // The built-in systems are still there.
    let found = registry.detect(&DetectInput::Tool {
        name: "slack_post_message",
        server: None,
    });
    assert_eq!(found.system, "slack");
}

#[test]
fn register_fixes_exact_names() {
    let mut registry = Registry::builtin().unwrap();
    let before = registry.detect(&DetectInput::Function { name: "crm_push" });
    assert!(!before.recognised);
    registry.register("crm_push", "acme_crm", Verb::Update);
    for name in ["crm_push", "crmPush", "crm.push"] {
        let found = registry.detect(&DetectInput::Function { name });
        assert_eq!(
            (found.system.as_str(), found.verb),
            ("acme_crm", Verb::Update),
            "{name}"
        );
        assert!(found.recognised);
    }
}

#[test]
fn unrecognised_calls_are_unknown_writes() {
    for input in [
        DetectInput::Tool {
            name: "",
            server: None,
        },
        DetectInput::Tool {
            name: "frobnicate",
            server: Some("nowhere"),
        },
        DetectInput::Function { name: "zzz_qqq" },
        DetectInput::Sdk { path: "..." },
        DetectInput::Http {
            method: "GET",
            url: "",
            body: None,
        },
    ] {
        let found = detect(&input);
        assert!(!found.recognised, "{input:?}");
        assert_eq!(found.system, "unknown", "{input:?}");
    }
    let found = detect(&DetectInput::Tool {
        name: "frobnicate",
        server: None,
    });
    assert_eq!(found.verb, Verb::Write);
}

#[test]
fn odd_inputs_do_not_panic() {
    let long = "x".repeat(10 * 1024);
    let long_words = "create_".repeat(2000);
    let urls = [
        "http://[::1]:8080/v1/items/1?q=a#frag",
        "http://[::1",
        "https://user:pass@host:99999999/x",
        "https://%FF%FE%FD/%C3%28/%E2%82?x=%ZZ",
        "//",
        "?",
        "#",
        ":",
        "https://",
        "mailto:bob@example.com",
        "../../etc/passwd",
        "https://api.github.com//repos///a//b//",
        "https://xn--bcher-kva.example/ä/ö/ü",
        "https://api.stripe.com/v1/customers/:id:/x:y:z",
    ];
    for url in urls
        .iter()
        .copied()
        .chain([long.as_str(), long_words.as_str()])
    {
        for method in ["GET", "POST", "PUT", "DELETE", "", "\u{0}"] {
            let _ = detect(&DetectInput::Http {
                method,
                url,
                body: Some(b"{\"query\": \"mutation {"),
            });
        }
    }
    for name in [
        long.as_str(),
        long_words.as_str(),
        "mcp__",
        "mcp____x",
        "🙂_send_🙂",
        "\u{0}",
    ] {
        let _ = detect(&DetectInput::Tool {
            name,
            server: Some(name),
        });
        let _ = detect(&DetectInput::Sdk { path: name });
        let _ = detect(&DetectInput::Function { name });
    }
    let found = detect(&DetectInput::Tool {
        name: &long_words,
        server: None,
    });
    assert!(found.target.is_none_or(|t| t.len() < 200));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn detect_never_panics_on_names(name in ".{0,300}", server in proptest::option::of(".{0,40}")) {
        let _ = detect(&DetectInput::Tool { name: &name, server: server.as_deref() });
        let _ = detect(&DetectInput::Sdk { path: &name });
        let _ = detect(&DetectInput::Function { name: &name });
    }

    #[test]
    fn detect_never_panics_on_urls(
        scheme in prop_oneof![Just(""), Just("https://"), Just("http://"), Just("//"), Just("ftp://")],
        host in prop_oneof![
            Just("api.github.com".to_owned()),
            Just("[2001:db8::1]".to_owned()),
            Just("127.0.0.1".to_owned()),
            "[a-z0-9.-]{0,30}",
            ".{0,20}",
        ],
        port in proptest::option::of(0u32..100_000),
        path in proptest::collection::vec(
            prop_oneof!["[a-zA-Z0-9_.:~-]{0,20}", "(%[0-9A-Fa-f]{2}){1,4}", ".{0,10}"], 0..12),
        query in ".{0,40}",
        method in prop_oneof![
            Just("GET".to_owned()),
            Just("POST".to_owned()),
            Just("PATCH".to_owned()),
            Just("DELETE".to_owned()),
            ".{0,8}",
        ],
        body in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
    ) {
        let port = port.map(|p| format!(":{p}")).unwrap_or_default();
        let url = format!("{scheme}{host}{port}/{}?{query}", path.join("/"));
        let _ = detect(&DetectInput::Http { method: &method, url: &url, body: body.as_deref() });
    }

    #[test]
    fn graphql_bodies_never_panic(doc in ".{0,200}") {
        let body = serde_json::json!({"query": doc}).to_string();
        let _ = detect(&DetectInput::Http {
            method: "POST",
            url: "https://api.linear.app/graphql",
            body: Some(body.as_bytes()),
        });
        let _ = detect(&DetectInput::Http {
            method: "POST",
            url: "https://api.linear.app/graphql",
            body: Some(doc.as_bytes()),
        });
    }
}

#[test]
fn a_server_the_user_names_is_the_system() {
    // Unknown to the registry: the name itself, and a verb word makes it recognised.
    let found = detect(&DetectInput::NamedServerTool {
        name: "get_employee",
        server: "HR",
    });
    assert_eq!((found.system.as_str(), found.verb), ("hr", Verb::Get));
    assert_eq!(found.target.as_deref(), Some("employee"));
    assert!(found.recognised);
    // The same call with the server as a mere hint stays unknown.
    let hinted = detect(&DetectInput::Tool {
        name: "get_employee",
        server: Some("hr"),
    });
    assert_eq!(hinted.system, "unknown");
    // A tool name that names another system does not move the call off the named server.
    let found = detect(&DetectInput::NamedServerTool {
        name: "slack_post_message",
        server: "hr",
    });
    assert_eq!((found.system.as_str(), found.verb), ("hr", Verb::Send));
    // A known alias is the canonical system; an umbrella is still narrowed by the name.
    let found = detect(&DetectInput::NamedServerTool {
        name: "create_issue",
        server: "gh",
    });
    assert_eq!(found.system, "github");
    let found = detect(&DetectInput::NamedServerTool {
        name: "list_mail_messages",
        server: "microsoft",
    });
    assert_eq!(found.system, "outlook");
    // No verb word: the named system, still an unrecognised write that asks.
    let found = detect(&DetectInput::NamedServerTool {
        name: "frobnicate",
        server: "hr",
    });
    assert_eq!((found.system.as_str(), found.verb), ("hr", Verb::Write));
    assert!(!found.recognised);
    // An empty name is no name: detection as for a hint.
    let found = detect(&DetectInput::NamedServerTool {
        name: "get_employee",
        server: "  ",
    });
    assert_eq!(found.system, "unknown");
}

/// A rough timing, run by hand: `cargo test -p attest-core --release -- --ignored timing`.
#[test]
#[ignore]
fn timing() {
    let inputs = [
        DetectInput::Tool {
            name: "mcp__github__create_pull_request",
            server: None,
        },
        DetectInput::Tool {
            name: "slack_post_message",
            server: Some("slack"),
        },
        DetectInput::Http {
            method: "POST",
            url: "https://gmail.googleapis.com/gmail/v1/users/me/messages/send",
            body: None,
        },
        DetectInput::Http {
            method: "GET",
            url: "https://api.github.com/repos/octocat/Hello-World/issues?state=open",
            body: None,
        },
    ];
    let _ = detect(&inputs[0]);
    for input in &inputs {
        let n = 200_000u32;
        let start = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(detect(std::hint::black_box(input)));
        }
        println!("{input:?}: {:?} per call", start.elapsed() / n);
    }
}

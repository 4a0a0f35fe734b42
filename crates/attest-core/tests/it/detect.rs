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

fn http(method: &str, url: &str, body: Option<&str>) -> Detection {
    detect(&DetectInput::Http {
        method,
        url,
        body: body.map(str::as_bytes),
    })
}

/// Issue 14 item 4: a non-GET/HEAD request is never a read, whatever its path says.
#[test]
fn a_write_method_is_never_read_on_a_path_the_caller_shapes() {
    for (method, path) in [
        ("POST", "/v1/notes;list"),
        ("POST", "/v1/notes:get"),
        ("POST", "/v1/delete_all/search"),
        ("POST", "/v1/search"),
        ("PUT", "/v1/notes/list"),
        ("PATCH", "/v1/items;get"),
        ("DELETE", "/v1/notes/search"),
        ("OPTIONS", "/v1/notes"),
        ("FROB", "/v1/notes/list"),
    ] {
        for host in ["http://127.0.0.1:8080", "https://api.someweirdcrm.io", ""] {
            let url = format!("{host}{path}");
            let found = http(method, &url, None);
            assert!(!found.verb.is_read(), "{method} {url}: {found:?}");
        }
    }
    // Known vendors' POST reads stay reads: the registry knows their routes.
    let found = http("POST", "https://api.notion.com/v1/search", None);
    assert_eq!(found.verb, Verb::Search);
}

/// Issue 14 item 4: `;` parameters and encoded separators cannot change the verb.
#[test]
fn path_parameters_and_encoded_separators_are_read_the_riskiest_way() {
    for url in [
        "https://api.someweirdcrm.io/v1/notes%2Fdelete",
        "https://api.someweirdcrm.io/v1/notes%252Fdelete",
        "https://api.someweirdcrm.io/v1/notes;delete",
        "https://api.someweirdcrm.io/v1/notes%3Bdelete",
        "https://api.someweirdcrm.io/v1/x/..%2Fdelete",
        "https://api.someweirdcrm.io/v1/notes\\delete",
        "https://api.github.com/repos/o/r/issues%2F1%2Fdelete",
    ] {
        let found = http("POST", url, None);
        assert_eq!(found.verb, Verb::Delete, "{url}: {found:?}");
    }
    // Ordinary URLs read as before.
    let found = http("POST", "https://api.github.com/repos/o/r/issues", None);
    assert_eq!(found.verb, Verb::Create);
}

/// Issue 14 item 4: method overrides are judged as the riskier method.
#[test]
fn method_overrides_are_judged_as_the_riskier_method() {
    let registry = Registry::shared();
    let url = "https://api.github.com/repos/o/r";
    for name in [
        "X-HTTP-Method-Override",
        "x-http-method",
        "X-Method-Override",
    ] {
        let found = registry.detect_http_request("GET", url, [(name, b"DELETE".as_slice())], None);
        assert_eq!(found.verb, Verb::Delete, "{name}");
        // Overriding a write down to a read does not make it a read.
        let found = registry.detect_http_request("DELETE", url, [(name, b"GET".as_slice())], None);
        assert_eq!(found.verb, Verb::Delete, "{name}");
        // A value that is not a method (or not text) is an unknown write.
        let found =
            registry.detect_http_request("GET", url, [(name, b"\xff\xfe".as_slice())], None);
        assert!(!found.verb.is_read() && !found.recognised, "{name}");
    }
    let found = http(
        "GET",
        "https://api.github.com/repos/o/r?_method=DELETE",
        None,
    );
    assert_eq!(found.verb, Verb::Delete);
    let found = http(
        "POST",
        "https://api.github.com/repos/o/r",
        Some("name=x&_method=delete"),
    );
    assert_eq!(found.verb, Verb::Delete);
    let found = registry.detect_http_request("GET", url, [("x-other", b"DELETE".as_slice())], None);
    assert_eq!(found.verb, Verb::Get);
}

/// Issue 14 item 4: every root field of every operation in a GraphQL batch counts.
#[test]
fn graphql_takes_the_riskiest_field_of_every_operation() {
    let gh = "https://api.github.com/graphql";
    let found = http(
        "POST",
        gh,
        Some(
            r#"{"query": "mutation { addStar(input: {starrableId: \"x\"}) { clientMutationId } deleteRepository(input: {repositoryId: \"R\"}) { clientMutationId } }"}"#,
        ),
    );
    assert_eq!(found.verb, Verb::Delete, "{found:?}");
    let found = http(
        "POST",
        gh,
        Some(
            r#"[{"query": "{ viewer { login } }"}, {"query": "mutation { deleteRepository(input: {}) { x } }"}]"#,
        ),
    );
    assert_eq!(found.verb, Verb::Delete, "{found:?}");
    // The operation name does not pick a harmless operation.
    let found = http(
        "POST",
        gh,
        Some(
            r#"{"query": "query A { viewer { id } } mutation B { deleteRepository(input: {}) { x } }", "operationName": "A"}"#,
        ),
    );
    assert_eq!(found.verb, Verb::Delete, "{found:?}");
    // A mutation hidden in a fragment at the root is found.
    let found = http(
        "POST",
        gh,
        Some(
            r#"{"query": "mutation { ...F } fragment F on Mutation { deleteRepository(input: {}) { x } }"}"#,
        ),
    );
    assert_eq!(found.verb, Verb::Delete, "{found:?}");
    // A batch with a part that cannot be read is an unrecognised write.
    let found = http(
        "POST",
        gh,
        Some(r#"[{"query": "{ viewer { id } }"}, {"query": "mutation {"}]"#),
    );
    assert!(!found.recognised && !found.verb.is_read(), "{found:?}");
    // A write verb in the path beats a GraphQL-looking body.
    let found = http(
        "POST",
        "https://api.someweirdcrm.io/v1/notes/delete",
        Some(r#"{"query": "{ viewer { id } }"}"#),
    );
    assert_eq!(found.verb, Verb::Delete, "{found:?}");
    // Plain queries stay reads.
    let found = http(
        "POST",
        gh,
        Some(r#"{"query": "{ viewer { login } repository(owner: \"o\", name: \"r\") { id } }"}"#),
    );
    assert!(found.verb.is_read(), "{found:?}");
}

/// Issue 14 item 5: look-alike hosts are not the system they imitate.
#[test]
fn look_alike_hosts_are_not_known_systems() {
    for (url, system) in [
        ("https://api.github.xyz/repos/o/r", "github.xyz"),
        ("https://stripe.xyz/v1/refunds", "stripe.xyz"),
        ("https://api.stripe.com.evil.io/v1/refunds", "evil"),
        ("https://github.com.evil.io/repos/o/r", "evil"),
        ("https://githubusercontent.example/x", "githubusercontent"),
    ] {
        let found = http("POST", url, None);
        assert_eq!(found.system, system, "{url}");
        assert!(!found.recognised, "{url}");
    }
    // A configured base URL (ATTEST_BASE_URL_<SYSTEM>) makes its host that system's.
    let mut registry = Registry::builtin().unwrap();
    let env: std::collections::HashMap<String, String> = [(
        "ATTEST_BASE_URL_GITHUB".to_owned(),
        "https://git.acme.internal:8443/api/v3".to_owned(),
    )]
    .into();
    registry.base_urls_from(&env);
    let found = registry.detect(&DetectInput::Http {
        method: "POST",
        url: "https://git.acme.internal:8443/api/v3/repos/o/r/issues",
        body: None,
    });
    assert_eq!(
        (found.system.as_str(), found.verb),
        ("github", Verb::Create)
    );
    assert!(found.recognised);
    let found = registry.detect(&DetectInput::Http {
        method: "POST",
        url: "https://git.acme.internal.evil.io/api/v3/repos/o/r/issues",
        body: None,
    });
    assert_ne!(found.system, "github");
    for (url, system) in [
        ("https://api.github.com/repos/o/r/issues", "github"),
        ("https://API.GitHub.com./repos/o/r/issues", "github"),
        ("https://api.stripe.com/v1/refunds", "stripe"),
    ] {
        let found = http("POST", url, None);
        assert_eq!(found.system, system, "{url}");
        assert!(found.recognised, "{url}");
    }
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

/// Path pieces an attacker might use to hide a verb: verb words, `;` parameters, custom
/// methods, encoded separators, dot segments.
fn shaped_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "list",
            "get",
            "search",
            "read",
            "query",
            "notes",
            "delete",
            "delete_all",
            "items",
            "v1",
            "graphql",
            "..",
            ".",
            "_method",
            "12345",
        ])
        .prop_map(str::to_owned),
        "[a-z]{1,8}(;|:|%2F|%2f|%3B|%252F|%2E%2E|\\\\)(list|get|search|delete)",
        "[a-zA-Z0-9_.:;%~-]{0,12}",
    ]
}

/// GraphQL documents from the pieces parsers get deep into.
fn graphql_soup() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        proptest::sample::select(vec![
            "{",
            "}",
            "(",
            ")",
            "...",
            "on",
            "mutation",
            "query",
            "subscription",
            "fragment",
            "F",
            "Mutation",
            "deleteRepository",
            "viewer",
            "addStar",
            "x",
            ":",
            "@include",
            "\"s\"",
            "#c\n",
            "$v",
            "[",
            "]",
            ",",
            " ",
        ]),
        0..40,
    )
    .prop_map(|pieces| pieces.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Issue 14 item 4 as a property: on a host the registry does not know, no method but
    /// GET and HEAD is ever a read, whatever the path.
    #[test]
    fn a_write_method_is_never_a_read(
        method in prop_oneof![
            proptest::sample::select(vec!["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "post"])
                .prop_map(str::to_owned),
            "[A-Z]{1,8}".prop_filter("not a read method", |m| m != "GET" && m != "HEAD"),
        ],
        host in prop_oneof![Just("http://127.0.0.1:9"), Just("https://api.someweirdcrm.io"), Just("")],
        path in proptest::collection::vec(shaped_segment(), 0..6),
        query in prop_oneof![Just(String::new()), "[a-z_]{1,8}=[a-z]{0,6}".prop_map(|q| format!("?{q}"))],
    ) {
        let url = format!("{host}/{}{query}", path.join("/"));
        let found = detect(&DetectInput::Http { method: &method, url: &url, body: None });
        prop_assert!(!found.verb.is_read(), "{} {} -> {:?}", method, url, found);
    }

    /// A method override is never less risky than the method it overrides.
    #[test]
    fn an_override_is_judged_as_the_riskier_method(
        method in proptest::sample::select(vec!["GET", "HEAD", "POST", "PUT", "DELETE"]),
        over in proptest::sample::select(vec!["DELETE", "POST", "PATCH", "FROB", "", "GET"]),
        name in proptest::sample::select(attest_core::detect::METHOD_OVERRIDE_HEADERS.to_vec()),
        path in proptest::collection::vec(shaped_segment(), 0..5),
    ) {
        for host in ["https://api.github.com", "https://api.someweirdcrm.io"] {
            let url = format!("{host}/{}", path.join("/"));
            let plain = detect(&DetectInput::Http { method, url: &url, body: None });
            let overridden = Registry::shared().detect_http_request(
                method, &url, [(name, over.as_bytes())], None);
            prop_assert_eq!(overridden.clone().riskier(plain.clone()), overridden.clone());
            // On a host the registry does not know, a write override is never a read.
            if !plain.recognised && over != "GET" && over != "HEAD" {
                prop_assert!(!overridden.verb.is_read(), "{} {} {}: {:?}", method, over, url, overridden);
            }
        }
    }

    #[test]
    fn graphql_documents_never_panic_and_a_delete_anywhere_wins(
        doc in graphql_soup(),
        batch in 0usize..3,
    ) {
        let one = serde_json::json!({"query": doc});
        let body = match batch {
            0 => one.to_string(),
            1 => serde_json::json!([one, {"query": "mutation { deleteRepository(input: {}) { x } }"}]).to_string(),
            _ => doc.clone(),
        };
        let found = detect(&DetectInput::Http {
            method: "POST",
            url: "https://api.github.com/graphql",
            body: Some(body.as_bytes()),
        });
        if batch == 1 {
            // The second request deletes: whatever the first says, it is not a read.
            prop_assert!(!found.verb.is_read(), "{}: {:?}", body, found);
        }
    }

    #[test]
    fn http_bodies_and_headers_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        header in proptest::collection::vec(any::<u8>(), 0..20),
        method in ".{0,8}",
    ) {
        let _ = Registry::shared().detect_http_request(
            &method,
            "https://api.example.com/v1/items?_method=x",
            [("x-http-method-override", header.as_slice())],
            Some(&body),
        );
    }
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

//! Issue 28's bounded fuzz campaign: request shapes (methods, override spellings, content
//! types and codings, GraphQL placements, JSON oddities) and shell commands, generated with
//! a fixed case count so `.ci/run` finishes it in seconds. Two properties: nothing panics,
//! and every generated delete is judged a delete.

use std::io::Write;

use attest_core::detect::Registry;
use attest_core::{detect, DetectInput};
use attest_policy::Verb;
use proptest::prelude::*;

/// Cases per property: fixed, so a CI run is bounded (a few seconds on 2 cores).
const CASES: u32 = 2_000;

/// Where a request hides its delete.
#[derive(Debug, Clone)]
enum Hiding {
    /// A method-override header (any case).
    Header(&'static str),
    /// `_method` in the query, spelled as servers decode it.
    Query(&'static str),
    /// `_method` in the body: JSON, a form, a multipart part.
    Body(&'static str),
    /// A GraphQL delete mutation, in one of the places servers read a document.
    Graphql(&'static str),
}

fn hiding() -> impl Strategy<Value = Hiding> {
    prop_oneof![
        proptest::sample::select(vec![
            "X-HTTP-Method-Override",
            "x-http-method",
            "X-METHOD-OVERRIDE"
        ])
        .prop_map(Hiding::Header),
        proptest::sample::select(vec!["_method", "%5Fmethod", "%5fmethod", "x=1;_method"])
            .prop_map(Hiding::Query),
        proptest::sample::select(vec!["json", "form", "multipart", "json-twice"])
            .prop_map(Hiding::Body),
        proptest::sample::select(vec![
            "json",
            "batch",
            "form",
            "multipart",
            "query-string",
            "graphql",
            "bom",
            "utf16",
            "twice"
        ])
        .prop_map(Hiding::Graphql),
    ]
}

fn coding() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec!["", "identity", "gzip", "deflate", "gzip, identity"])
}

fn delete_spelling() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec!["DELETE", "delete", "Delete", " DELETE "])
}

fn mutation_field() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec![
        "deleteRepository",
        "issueDelete",
        "removeUser",
        "destroyNote",
    ])
}

/// A request: method, URL, headers, body.
type Request = (String, String, Vec<(String, Vec<u8>)>, Vec<u8>);

fn encode(coding: &str, body: Vec<u8>) -> Vec<u8> {
    let mut out = body;
    for step in coding.split(',').map(str::trim) {
        out = match step {
            "gzip" => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                encoder.write_all(&out).unwrap();
                encoder.finish().unwrap()
            }
            "deflate" => {
                let mut encoder =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                encoder.write_all(&out).unwrap();
                encoder.finish().unwrap()
            }
            _ => out,
        };
    }
    out
}

fn request(
    method: &str,
    hiding: &Hiding,
    delete: &str,
    field: &str,
    coding: &str,
    title: &str,
) -> Request {
    let mutation = format!("mutation {{ {field}(id: \"1\") {{ ok }} }}");
    let query_doc = form_urlencoded::byte_serialize(mutation.as_bytes()).collect::<String>();
    let title_json = serde_json::json!(title).to_string();
    let mut url = "http://127.0.0.1:9/v1/notes/n1".to_owned();
    let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
    let mut content_type = "application/json".to_owned();
    let body: Vec<u8> = match hiding {
        Hiding::Header(name) => {
            headers.push(((*name).to_owned(), delete.as_bytes().to_vec()));
            format!("{{\"title\": {title_json}}}").into_bytes()
        }
        Hiding::Query(name) => {
            url.push_str(&format!("?{name}={}", delete.trim()));
            format!("{{\"title\": {title_json}}}").into_bytes()
        }
        Hiding::Body("json") => {
            format!("{{\"title\": {title_json}, \"_method\": \"{delete}\"}}").into_bytes()
        }
        Hiding::Body("json-twice") => {
            format!("{{\"_method\": \"{delete}\", \"title\": {title_json}, \"_method\": \"PUT\"}}")
                .into_bytes()
        }
        Hiding::Body("form") => {
            content_type = "application/x-www-form-urlencoded".to_owned();
            format!("title=x&_method={}", delete.trim()).into_bytes()
        }
        Hiding::Body(_) => {
            content_type = "multipart/form-data; boundary=b0undary".to_owned();
            format!(
                "--b0undary\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\n{}\r\n--b0undary--\r\n",
                delete.trim()
            )
            .into_bytes()
        }
        Hiding::Graphql(place) => {
            url = "http://127.0.0.1:9/graphql".to_owned();
            let one = serde_json::json!({ "query": mutation }).to_string();
            match *place {
                "json" => one.into_bytes(),
                "batch" => {
                    format!("[{{\"query\": \"{{ viewer {{ id }} }}\"}}, {one}]").into_bytes()
                }
                "form" => {
                    content_type = "application/x-www-form-urlencoded".to_owned();
                    format!("query={query_doc}").into_bytes()
                }
                "multipart" => {
                    content_type = "multipart/form-data; boundary=b0undary".to_owned();
                    format!(
                        "--b0undary\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n{one}\r\n--b0undary--\r\n"
                    )
                    .into_bytes()
                }
                "query-string" => {
                    url.push_str(&format!("?query={query_doc}"));
                    Vec::new()
                }
                "graphql" => {
                    content_type = "application/graphql".to_owned();
                    mutation.into_bytes()
                }
                "bom" => [b"\xEF\xBB\xBF".as_slice(), one.as_bytes()].concat(),
                "utf16" => one.encode_utf16().flat_map(u16::to_le_bytes).collect(),
                _ => format!(
                    "{{\"query\": \"{{ viewer {{ id }} }}\", \"query\": {}}}",
                    serde_json::json!(mutation)
                )
                .into_bytes(),
            }
        }
    };
    headers.push(("Content-Type".to_owned(), content_type.into_bytes()));
    if !coding.is_empty() && !body.is_empty() {
        headers.push(("Content-Encoding".to_owned(), coding.as_bytes().to_vec()));
    }
    (method.to_owned(), url, headers, encode(coding, body))
}

fn judged(request: &Request) -> attest_core::Detection {
    let (method, url, headers, body) = request;
    Registry::shared().detect_http_request(
        method,
        url,
        headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
        Some(body),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn every_hidden_delete_is_judged_a_delete(
        method in proptest::sample::select(vec!["POST", "post", "PUT", "PATCH", "GET"]),
        hiding in hiding(),
        delete in delete_spelling(),
        field in mutation_field(),
        coding in coding(),
        title in "[ -~]{0,24}",
    ) {
        let request = request(method, &hiding, delete, field, coding, &title);
        let found = judged(&request);
        prop_assert_eq!(found.verb, Verb::Delete, "{:?} {:?}", hiding, request);
    }

    #[test]
    fn odd_request_shapes_never_panic(
        method in prop_oneof![Just("POST".to_owned()), "[A-Za-z ]{0,8}"],
        url in prop_oneof![Just("/graphql".to_owned()), "/[ -~]{0,40}"],
        content_type in prop_oneof![
            Just("application/json".to_owned()),
            Just("multipart/form-data; boundary=x".to_owned()),
            Just("application/x-www-form-urlencoded".to_owned()),
            Just("application/json; charset=utf-16".to_owned()),
            "[ -~]{0,30}",
        ],
        coding in prop_oneof![Just("gzip".to_owned()), Just("br".to_owned()), Just("deflate".to_owned()), "[ -~]{0,10}"],
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let headers = [
            ("content-type", content_type.as_bytes()),
            ("content-encoding", coding.as_bytes()),
        ];
        let _ = Registry::shared().detect_http_request(&method, &url, headers, Some(&body));
    }

    #[test]
    fn every_generated_shell_delete_is_judged_a_delete(
        prefix in proptest::sample::select(vec!["", "sudo ", "FOO=1 ", "env ", "nohup ", "time ", "cd /tmp && ", "true; ", "echo $(", "git status || "]),
        program in proptest::sample::select(vec!["rm", "/bin/rm", "rmdir", "unlink", "shred"]),
        flags in proptest::sample::select(vec!["", "-f ", "-rf ", "-r -f ", "--recursive ", "-- "]),
        path in "[a-z][a-z0-9_./-]{0,20}",
        suffix in proptest::sample::select(vec!["", " > /dev/null", " 2>&1", "; ls", " && echo ok"]),
    ) {
        let close = if prefix.ends_with("$(") { ")" } else { "" };
        let command = format!("{prefix}{program} {flags}{path}{close}{suffix}");
        let found = detect(&DetectInput::Shell { command: &command });
        prop_assert_eq!(found.verb, Verb::Delete, "{}", command);
    }

    #[test]
    fn odd_shell_commands_never_panic(command in "[ -~\n]{0,200}") {
        let _ = detect(&DetectInput::Shell { command: &command });
    }
}

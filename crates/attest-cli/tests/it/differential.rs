//! Issue 28's differential test: a generated corpus of request shapes (methods, override
//! spellings, content types and codings, GraphQL placements, JSON oddities) is sent to real
//! frameworks' parsers twice, once directly and once through the gateway under "refuse
//! deletes, act on everything else". What a framework would execute through the gateway is
//! never riskier than what Attest judged: no delete it would run gets through.
//!
//! The frameworks (`frameworks/`): Express with body-parser, method-override and graphql-js
//! (npm), Flask on Werkzeug with graphql-core (PyPI), and a Rack app on WEBrick with
//! Rack::MethodOverride (Debian's ruby-rack, ruby-webrick); `.ci/run` installs them, pinned.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::gateway::{curl_missing, start_gateway_with};
use crate::security::{compressed, exchange, utf16le, REFUSE_DELETES};

/// One request of the corpus.
#[derive(Debug, Clone)]
struct Probe {
    method: &'static str,
    path: String,
    headers: Vec<String>,
    body: Vec<u8>,
}

const JSON: &str = "Content-Type: application/json";
const FORM: &str = "Content-Type: application/x-www-form-urlencoded";
const MULTIPART: &str = "Content-Type: multipart/form-data; boundary=b0undary";

fn part(name: &str, value: &str) -> String {
    format!("--b0undary\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
}

/// Every override spelling on a REST item, for every method.
fn rest_probes(out: &mut Vec<Probe>) {
    let title = r#"{"title": "x"}"#;
    for method in ["POST", "PUT", "PATCH", "GET", "post"] {
        let mut add = |path: &str, headers: Vec<&str>, body: String| {
            out.push(Probe {
                method,
                path: path.to_owned(),
                headers: headers.into_iter().map(str::to_owned).collect(),
                body: body.into_bytes(),
            });
        };
        add("/v1/notes/n1", vec![JSON], title.into());
        for header in [
            "X-HTTP-Method-Override: DELETE",
            "X-HTTP-Method: delete",
            "X-Method-Override: DELETE",
        ] {
            add("/v1/notes/n1", vec![JSON, header], title.into());
        }
        for query in [
            "_method=DELETE",
            "%5Fmethod=DELETE",
            "x=1;_method=DELETE",
            "_method=delete",
        ] {
            add(&format!("/v1/notes/n1?{query}"), vec![JSON], title.into());
        }
        add(
            "/v1/notes/n1",
            vec![JSON],
            r#"{"title": "x", "_method": "DELETE"}"#.into(),
        );
        add(
            "/v1/notes/n1",
            vec![JSON],
            r#"{"_method": "DELETE", "title": "x", "_method": "PUT"}"#.into(),
        );
        add(
            "/v1/notes/n1",
            vec![JSON],
            r#"{"_method": "PUT", "title": "x", "_method": "DELETE"}"#.into(),
        );
        add("/v1/notes/n1", vec![FORM], "title=x&_method=DELETE".into());
        add(
            "/v1/notes/n1",
            vec![FORM],
            "title=x&%5Fmethod=DELETE".into(),
        );
        add(
            "/v1/notes/n1",
            vec![MULTIPART],
            format!(
                "{}{}--b0undary--\r\n",
                part("title", "x"),
                part("_method", "DELETE")
            ),
        );
    }
}

/// A document in every place a GraphQL server reads one, in each JSON oddity and content
/// coding, for a deleting and a harmless mutation.
fn graphql_probes(out: &mut Vec<Probe>) {
    for field in ["deleteNote", "createNote"] {
        let mutation = format!("mutation {{ {field}(id: \"n1\") {{ ok }} }}");
        let one = json!({ "query": mutation }).to_string();
        let encoded: String = form_urlencoded::byte_serialize(mutation.as_bytes()).collect();
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend_from_slice(one.as_bytes());
        let placements: Vec<(&str, Vec<&str>, Vec<u8>)> = vec![
            ("/graphql", vec![JSON], one.clone().into_bytes()),
            (
                "/graphql",
                vec![JSON],
                format!("[{{\"query\": \"{{ viewer {{ id }} }}\"}}, {one}]").into_bytes(),
            ),
            (
                "/graphql",
                vec![FORM],
                format!("query={encoded}").into_bytes(),
            ),
            (
                "/graphql",
                vec![MULTIPART],
                format!("{}--b0undary--\r\n", part("operations", &one)).into_bytes(),
            ),
            (
                "/graphql",
                vec!["Content-Type: application/graphql"],
                mutation.clone().into_bytes(),
            ),
            ("/graphql", vec![JSON], bom),
            ("/graphql", vec![JSON], utf16le(&one)),
            (
                "/graphql",
                vec!["Content-Type: application/json; charset=utf-16le"],
                utf16le(&one),
            ),
            (
                "/graphql",
                vec![JSON],
                format!(
                    r#"{{"query": "{{ viewer {{ id }} }}", "query": {}}}"#,
                    json!(mutation)
                )
                .into_bytes(),
            ),
            (
                "/graphql",
                vec![JSON],
                format!(
                    r#"{{"query": {}, "query": "{{ viewer {{ id }} }}"}}"#,
                    json!(mutation)
                )
                .into_bytes(),
            ),
        ];
        for method in ["POST", "GET"] {
            out.push(Probe {
                method,
                path: format!("/graphql?query={encoded}"),
                headers: Vec::new(),
                body: Vec::new(),
            });
            for (at, (path, headers, body)) in placements.iter().enumerate() {
                // Content codings on the plain JSON and the form placements; the other
                // oddities are read after decoding the same way.
                let codings: &[&str] = if at == 0 || at == 2 {
                    &["", "gzip", "deflate"]
                } else {
                    &[""]
                };
                for &coding in codings {
                    let mut headers: Vec<String> =
                        headers.iter().map(|h| (*h).to_owned()).collect();
                    let body = match coding {
                        "" => body.clone(),
                        "gzip" => compressed("gzipSync", body).unwrap(),
                        _ => compressed("deflateSync", body).unwrap(),
                    };
                    if !coding.is_empty() {
                        headers.push(format!("Content-Encoding: {coding}"));
                    }
                    out.push(Probe {
                        method,
                        path: (*path).to_owned(),
                        headers,
                        body,
                    });
                }
            }
        }
    }
}

fn corpus() -> Vec<Probe> {
    let mut out = Vec::new();
    rest_probes(&mut out);
    graphql_probes(&mut out);
    out
}

/// A framework app on 127.0.0.1, killed when the test ends.
struct App(Child, String);

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program script` and reads `listening PORT` from its first line.
fn start_app(program: &Path, script: &str, env: &[(&str, &Path)]) -> App {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/frameworks")
        .join(script);
    let mut child = Command::new(program)
        .arg(script)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .stdout(Stdio::piped())
        // Werkzeug logs every request; the test says what matters.
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    App(child, format!("http://127.0.0.1:{port}"))
}

/// Sends the corpus to `app` directly and through a gateway in front of it; fails if a
/// delete the framework runs gets through, and checks the corpus means something (the
/// framework does run hidden deletes sent directly, and harmless requests still pass).
fn never_riskier_than_judged(app: &App, framework: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), REFUSE_DELETES).unwrap();
    // Durability `off`: this test is about parsers, and hundreds of synced commits on a
    // shared machine would only make it slow.
    let (_gateway, address) =
        start_gateway_with(dir.path(), &app.1, &[], &[("ATTEST_DURABILITY", "off")]);
    let (mut direct_deletes, mut passed) = (0, 0);
    for probe in corpus() {
        let headers: Vec<&str> = probe.headers.iter().map(String::as_str).collect();
        let (_, _, direct) = exchange(
            probe.method,
            &format!("{}{}", app.1, probe.path),
            &headers,
            &probe.body,
        );
        direct_deletes += usize::from(direct == "delete");
        let (status, answer, through) = exchange(
            probe.method,
            &format!("{address}{}", probe.path),
            &headers,
            &probe.body,
        );
        assert_ne!(
            through, "delete",
            "{framework} ran a delete through the gateway ({status} {answer}): {probe:?}"
        );
        passed += usize::from(through == "other");
    }
    assert!(
        direct_deletes >= 20,
        "{framework}: only {direct_deletes} hidden deletes run directly"
    );
    assert!(
        passed >= 20,
        "{framework}: only {passed} harmless requests got through"
    );
}

fn node_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/node/node_modules")
}

#[test]
fn express_never_runs_a_delete_the_gateway_let_through() {
    if curl_missing() {
        return;
    }
    let modules = node_modules();
    let installed = ["express", "body-parser", "method-override", "graphql"]
        .iter()
        .all(|m| modules.join(m).join("package.json").exists());
    if !installed || Command::new("node").arg("--version").output().is_err() {
        crate::peer_missing(
            "node and .ci/node's express, body-parser, method-override, graphql are missing",
        );
        return;
    }
    let app = start_app(
        Path::new("node"),
        "express_app.js",
        &[("NODE_PATH", &modules)],
    );
    never_riskier_than_judged(&app, "express");
}

#[test]
fn flask_never_runs_a_delete_the_gateway_let_through() {
    if curl_missing() {
        return;
    }
    let python = crate::python();
    let installed = Command::new(&python)
        .args(["-c", "import flask, graphql"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed || Command::new("node").arg("--version").output().is_err() {
        crate::peer_missing("flask and graphql-core (.ci/venv), or node (its zlib), are missing");
        return;
    }
    let app = start_app(&python, "flask_app.py", &[]);
    never_riskier_than_judged(&app, "flask");
}

#[test]
fn rack_never_runs_a_delete_the_gateway_let_through() {
    if curl_missing() {
        return;
    }
    let installed = Command::new("ruby")
        .args(["-e", "require 'rack'; require 'webrick'"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed || Command::new("node").arg("--version").output().is_err() {
        crate::peer_missing(
            "ruby with ruby-rack and ruby-webrick, or node (its zlib), are missing",
        );
        return;
    }
    let app = start_app(Path::new("ruby"), "rack_app.rb", &[]);
    never_riskier_than_judged(&app, "rack");
}

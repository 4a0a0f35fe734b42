//! Issue 28: the riskiest reading wherever a parser gives up, one judgement per resource,
//! secrets at one boundary. Each probe goes through the real binary: a gateway in front of
//! a fake upstream on 127.0.0.1 that records what reached it, `attest hook claude-code`,
//! `attest detect`, `attest export`, `attest config check`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::Router;
use serde_json::{json, Value};

use crate::gateway::{curl_missing, serve_app, start_gateway, start_gateway_logging};
use crate::{attest, stderr, stdout};

/// Refuse deletes, act on everything else (unknown writes included): a request the gateway
/// cannot read must still never act as an unknown write.
pub(crate) const REFUSE_DELETES: &str = r#"
version: 1
policies:
  - name: no-deletes
    match: {verb: delete}
    decision: refuse
    reason: nothing is deleted by agents
  - name: everything-else
    match: {verb: [read, get, list, search, create, update, write, execute, send, share]}
    decision: act
    reason: the test upstream is a sandbox
"#;

/// What reached the upstream: `METHOD path?query` and the body.
pub(crate) type Reached = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

pub(crate) fn start_recording_upstream(reached: Reached) -> String {
    serve_app(move || {
        Router::new().fallback(
            move |method: axum::http::Method, uri: axum::http::Uri, body: Bytes| {
                let reached = Arc::clone(&reached);
                async move {
                    reached
                        .lock()
                        .unwrap()
                        .push((format!("{method} {uri}"), body.to_vec()));
                    axum::Json(json!({"ok": true, "id": "n1"}))
                }
            },
        )
    })
}

/// What reached the upstream besides the gateway's own read-backs (a `GET` of the item
/// `n1` a write returned).
pub(crate) fn writes(reached: &Reached) -> Vec<(String, Vec<u8>)> {
    let reached = reached.lock().unwrap();
    reached
        .iter()
        .filter(|(line, _)| !(line.starts_with("GET ") && line.ends_with("/n1")))
        .cloned()
        .collect()
}

/// One request with curl, the body sent byte for byte from standard input: the status
/// and the response body.
pub(crate) fn send(method: &str, url: &str, headers: &[&str], body: &[u8]) -> (u16, String) {
    let (status, body, _) = exchange(method, url, headers, body);
    (status, body)
}

/// [`send`], with the answer's `X-Executed` header too ("" when absent).
pub(crate) fn exchange(
    method: &str,
    url: &str,
    headers: &[&str],
    body: &[u8],
) -> (u16, String, String) {
    let mut command = Command::new("curl");
    command.args([
        "-s",
        "-o",
        "-",
        "-w",
        "\n%{http_code} %header{x-executed}",
        "-X",
        method,
    ]);
    for header in headers {
        command.args(["-H", header]);
    }
    if !body.is_empty() {
        command.args(["--data-binary", "@-"]);
    }
    let mut child = command
        .arg("--globoff")
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let output = child.wait_with_output().unwrap();
    let text = stdout(&output);
    let (body, last) = text.rsplit_once('\n').unwrap();
    let (status, executed) = last.split_once(' ').unwrap_or((last, ""));
    (
        status.trim().parse().unwrap(),
        body.to_owned(),
        executed.trim().to_owned(),
    )
}

/// `data` compressed by Node's zlib (`gzipSync`, `deflateSync`, `deflateRawSync`,
/// `brotliCompressSync`): real encoders, not ours. `None` when Node is missing.
pub(crate) fn compressed(function: &str, data: &[u8]) -> Option<Vec<u8>> {
    let script =
        format!("process.stdout.write(require('zlib').{function}(require('fs').readFileSync(0)))");
    let mut child = Command::new("node")
        .args(["-e", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(data).ok()?;
    let output = child.wait_with_output().ok()?;
    output.status.success().then_some(output.stdout)
}

const DELETE_MUTATION: &str =
    "mutation { deleteRepository(input: {repositoryId: \"R_1\"}) { clientMutationId } }";

pub(crate) fn utf16le(text: &str) -> Vec<u8> {
    text.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// A probe: method, path and query, headers, body, and the status the gateway must answer.
type ExpectedAnswer<'a> = (&'a str, String, Vec<&'a str>, Vec<u8>, u16);

/// Cause 1: every shape below hides a delete from a reader that takes the request at face
/// value, and a real server would run the delete. Each is refused (403) or cannot be read
/// (413/415), and none reaches the upstream; an ordinary write still does.
#[test]
fn the_gateway_takes_the_riskiest_reading_where_a_parser_gives_up() {
    if curl_missing() {
        return;
    }
    let graphql_json = json!({ "query": DELETE_MUTATION }).to_string();
    let Some(gzip) = compressed("gzipSync", graphql_json.as_bytes()) else {
        crate::peer_missing("node is missing (its zlib encodes the compressed bodies)");
        return;
    };
    let deflate = compressed("deflateSync", graphql_json.as_bytes()).unwrap();
    let raw_deflate = compressed("deflateRawSync", graphql_json.as_bytes()).unwrap();
    let brotli = compressed("brotliCompressSync", graphql_json.as_bytes()).unwrap();
    let bomb = compressed("gzipSync", &vec![b' '; 40 * 1024 * 1024]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), REFUSE_DELETES).unwrap();
    let reached = Reached::default();
    let upstream = start_recording_upstream(Arc::clone(&reached));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &["--max-body", "1048576"]);

    let json = "Content-Type: application/json";
    let form = "Content-Type: application/x-www-form-urlencoded";
    let multipart = "Content-Type: multipart/form-data; boundary=XyZ";
    let query =
        |document: &str| form_urlencoded::byte_serialize(document.as_bytes()).collect::<String>();
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(graphql_json.as_bytes());
    let twice_query = format!(
        r#"{{"query": "{{ viewer {{ login }} }}", "query": {}}}"#,
        json!(DELETE_MUTATION)
    );
    let twice_query_reversed = format!(
        r#"{{"query": {}, "query": "{{ viewer {{ login }} }}"}}"#,
        json!(DELETE_MUTATION)
    );
    let operations = format!(
        "--XyZ\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n{graphql_json}\r\n\
         --XyZ\r\nContent-Disposition: form-data; name=\"map\"\r\n\r\n{{}}\r\n--XyZ--\r\n"
    );
    let multipart_override = "--XyZ\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\n\
                              DELETE\r\n--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n\
                              x\r\n--XyZ--\r\n";
    let probes: Vec<ExpectedAnswer<'_>> = vec![
        // Bodies in a content coding.
        (
            "POST",
            "/graphql".into(),
            vec![json, "Content-Encoding: gzip"],
            gzip,
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json, "Content-Encoding: deflate"],
            deflate,
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json, "Content-Encoding: deflate"],
            raw_deflate,
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json, "Content-Encoding: br"],
            brotli,
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json, "Content-Encoding: compress"],
            b"x".to_vec(),
            415,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json, "Content-Encoding: gzip"],
            b"not gzip".to_vec(),
            415,
        ),
        (
            "POST",
            "/v1/notes".into(),
            vec![json, "Content-Encoding: gzip"],
            bomb,
            413,
        ),
        // GraphQL wherever a server reads a document.
        (
            "POST",
            "/graphql".into(),
            vec![form],
            format!("query={}", query(DELETE_MUTATION)).into_bytes(),
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![multipart],
            operations.into_bytes(),
            403,
        ),
        (
            "POST",
            format!("/graphql?query={}", query(DELETE_MUTATION)),
            vec![json],
            b"{}".to_vec(),
            403,
        ),
        (
            "POST",
            format!("/api?query={}", query(DELETE_MUTATION)),
            vec![],
            Vec::new(),
            403,
        ),
        (
            "GET",
            "/graphql".into(),
            vec![json],
            graphql_json.clone().into_bytes(),
            403,
        ),
        // JSON that is not exactly one object a naive reader sees.
        ("POST", "/graphql".into(), vec![json], bom, 403),
        (
            "POST",
            "/graphql".into(),
            vec![json],
            utf16le(&graphql_json),
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec!["Content-Type: application/json; charset=utf-16le"],
            utf16le(&graphql_json),
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json],
            twice_query.into_bytes(),
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec![json],
            twice_query_reversed.into_bytes(),
            403,
        ),
        (
            "POST",
            "/graphql".into(),
            vec!["Content-Type: application/json; charset=koi8-r"],
            graphql_json.clone().into_bytes(),
            403,
        ),
        // Method overrides in every spelling.
        (
            "POST",
            "/v1/notes/n1?%5Fmethod=DELETE".into(),
            vec![json],
            b"{}".to_vec(),
            403,
        ),
        (
            "POST",
            "/v1/notes/n1?x=1;_method=DELETE".into(),
            vec![json],
            b"{}".to_vec(),
            403,
        ),
        (
            "POST",
            "/v1/notes/n1".into(),
            vec![json],
            br#"{"title": "x", "_method": "DELETE"}"#.to_vec(),
            403,
        ),
        (
            "POST",
            "/v1/notes/n1".into(),
            vec![form],
            b"title=x&%5Fmethod=DELETE".to_vec(),
            403,
        ),
        (
            "POST",
            "/v1/notes/n1".into(),
            vec![multipart],
            multipart_override.as_bytes().to_vec(),
            403,
        ),
        (
            "POST",
            "/v1/notes/n1".into(),
            vec![json, "X-HTTP-Method-Override: DELETE"],
            b"{}".to_vec(),
            403,
        ),
        (
            "post",
            "/v1/notes/n1".into(),
            vec![
                json,
                "X-HTTP-Method-Override: delete",
                "X-HTTP-Method-Override: GET",
            ],
            b"{}".to_vec(),
            403,
        ),
    ];
    for (method, path, headers, body, expected) in probes {
        let before = writes(&reached).len();
        let (status, answer) = send(method, &format!("{address}{path}"), &headers, &body);
        assert_eq!(status, expected, "{method} {path} {headers:?}: {answer}");
        assert_eq!(
            writes(&reached).len(),
            before,
            "{method} {path} {headers:?} reached the upstream"
        );
    }
    // The control: an ordinary write, gzip or not, is read and forwarded byte for byte.
    let note = br#"{"title": "hello"}"#;
    let (status, answer) = send("POST", &format!("{address}/v1/notes"), &[json], note);
    assert_eq!(status, 200, "{answer}");
    let gz_note = compressed("gzipSync", note).unwrap();
    let (status, answer) = send(
        "POST",
        &format!("{address}/v1/notes"),
        &[json, "Content-Encoding: gzip"],
        &gz_note,
    );
    assert_eq!(status, 200, "{answer}");
    let reached = writes(&reached);
    assert_eq!(reached.len(), 2, "{reached:?}");
    assert_eq!(reached[1].1, gz_note);
    // Every refused probe is recorded as the delete it is.
    let refused: Vec<Value> = crate::exported_entries(dir.path())
        .into_iter()
        .filter(|e| e["decision"] == "refuse")
        .collect();
    assert!(refused.len() >= 18, "{refused:?}");
    assert!(refused.iter().all(|e| e["verb"] == "delete"), "{refused:?}");
}

/// The hook's answer (`allow`, `ask`, `deny`) for one Claude Code `PreToolUse` event.
pub(crate) fn hook_decision(dir: &Path, tool: &str, input: Value) -> String {
    let event = json!({
        "session_id": "s-28", "cwd": dir.display().to_string(), "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": input, "tool_use_id": "toolu_28",
    });
    let output = crate::hook::hook(dir, &event.to_string());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let answer: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    answer["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned()
}

/// Cause 2: a protected path is judged by the path, whatever writes it; inline code given
/// to an interpreter is a program nobody has read; a tool name is read for its riskiest
/// verb word, wherever it stands.
#[test]
fn one_judgement_per_resource_whatever_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    // The agent's own settings are refused outright (issue 49), not asked about.
    let write_refused = hook_decision(
        dir.path(),
        "Write",
        json!({"file_path": ".claude/settings.json", "content": "{}"}),
    );
    assert_eq!(write_refused, "deny");
    for command in [
        "echo '{}' > .claude/settings.json",
        "printf x >> attest.yaml",
        "echo x>.env",
        "cat x &> .mcp.json",
        "sed -i 's/ask/act/' attest.yaml",
        "cp /tmp/evil.json .claude/settings.json",
        "mv /tmp/evil .git/hooks/pre-commit",
        "tee .github/workflows/ci.yml < /tmp/x",
        "truncate -s 0 ledger.sqlite",
        "ln -sf /tmp/evil .cursor/mcp.json",
        "install -m 755 /tmp/x .git/hooks/pre-push",
        "dd if=/dev/zero of=.attest/signing.key bs=1 count=1",
        "python3 -c \"import shutil; shutil.rmtree('src')\"",
        "node -e \"require('fs').rmSync('src', {recursive: true})\"",
        "node --eval \"process.exit(0)\"",
        "ruby -e 'File.delete(\"x\")'",
        "perl -e 'unlink \"x\"'",
        "bash -c 'echo hi'",
        "python3 <<< 'import os'",
    ] {
        let decision = hook_decision(dir.path(), "Bash", json!({ "command": command }));
        assert_ne!(decision, "allow", "{command}");
    }
    let mcp_json = hook_decision(
        dir.path(),
        "Write",
        json!({"file_path": "/home/dev/app/.mcp.json", "content": "{}"}),
    );
    assert_eq!(mcp_json, "deny");
    // Source code, builds and scripts from files still go ahead.
    for command in [
        "cargo build",
        "python3 scripts/gen.py",
        "echo done > build.log",
        "ls 2>&1 >/dev/null",
    ] {
        let decision = hook_decision(dir.path(), "Bash", json!({ "command": command }));
        assert_eq!(decision, "allow", "{command}");
    }
    for name in [
        "get_delete_repository",
        "list_and_delete",
        "search_and_destroy",
        "read_then_delete",
        "github_list_delete_repos",
    ] {
        let output = attest(dir.path(), &["detect", "--tool", name, "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let found: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
        assert_eq!(found["verb"], "delete", "{name}: {found}");
    }
}

/// The secrets planted in one request, and nowhere else.
const PLANTED: [&str; 7] = [
    "JSESSION0xSECRET",
    "PATHKEY0xSECRET",
    "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "SESSIONID0xSECRET",
    "xoxb-1234567890-PLANTEDSLACK",
    "AKIAPLANTED0EXAMPLE0",
    "hunter2PGpassword",
];

/// Cause 3: secrets in path parameters, credential-named params and token-shaped values
/// never reach the ledger file, the gateway's log, an export (JSON lines, CSV, OCSF) or
/// printed settings.
#[test]
fn planted_secrets_reach_no_ledger_log_export_or_setting() {
    if curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), REFUSE_DELETES).unwrap();
    let reached = Reached::default();
    let upstream = start_recording_upstream(Arc::clone(&reached));
    let log = std::fs::File::create(dir.path().join("gateway.log")).unwrap();
    let (gateway, address) =
        start_gateway_logging(dir.path(), "ledger.sqlite", &upstream, &[], &[], log.into());
    let url = format!(
        "{address}/v1/notes;jsessionid={}/items;api_key={}?session_id={}",
        PLANTED[0], PLANTED[1], PLANTED[3]
    );
    let body = json!({
        "title": format!("key {}", PLANTED[2]),
        "session_id": PLANTED[3],
        "name": PLANTED[4],
        "subject": format!("aws {}", PLANTED[5]),
        "url": format!("https://app:{}@db.example.com/x", PLANTED[6]),
    });
    // Sent twice with one idempotency key: the retry is replayed from the side store,
    // which sits in the ledger file scanned below.
    let headers = [
        "Content-Type: application/json",
        "Idempotency-Key: planted-retry-1",
    ];
    let (status, answer) = send("POST", &url, &headers, body.to_string().as_bytes());
    assert_eq!(status, 200, "{answer}");
    let replayed = send("POST", &url, &headers, body.to_string().as_bytes());
    assert_eq!(replayed, (status, answer.clone()));
    let (status, _) = send("DELETE", &url, &[], b"");
    assert_eq!(status, 403);
    drop(gateway);
    assert_eq!(writes(&reached).len(), 1, "the write reached the upstream");

    let mut places: Vec<(String, Vec<u8>)> = Vec::new();
    for file in ["ledger.sqlite", "ledger.sqlite-wal", "gateway.log"] {
        if let Ok(bytes) = std::fs::read(dir.path().join(file)) {
            places.push((file.to_owned(), bytes));
        }
    }
    for format in ["jsonl", "csv", "ietf", "ocsf"] {
        let output = attest(
            dir.path(),
            &["--ledger", "ledger.sqlite", "export", "--format", format],
        );
        assert_eq!(
            output.status.code(),
            Some(0),
            "{format}: {}",
            stderr(&output)
        );
        assert!(!output.stdout.is_empty(), "{format}");
        places.push((format!("export {format}"), output.stdout));
    }
    let ledger_rows = attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "ledger", "--json"],
    );
    places.push(("attest ledger --json".to_owned(), ledger_rows.stdout));
    let pg = format!(
        "postgres://app:{}@127.0.0.1:1/attest?sslmode=disable",
        PLANTED[6]
    );
    for args in [
        vec!["--ledger", pg.as_str(), "config", "check"],
        vec!["--ledger", pg.as_str(), "config", "check", "--json"],
    ] {
        let output = attest(dir.path(), &args);
        let mut text = output.stdout.clone();
        text.extend_from_slice(&output.stderr);
        assert!(
            String::from_utf8_lossy(&text).contains("127.0.0.1:1"),
            "{}",
            String::from_utf8_lossy(&text)
        );
        places.push((args.join(" "), text));
    }
    for (place, bytes) in &places {
        let text = String::from_utf8_lossy(bytes);
        for secret in PLANTED {
            assert!(!text.contains(secret), "{secret} reached {place}: {text}");
        }
    }
    // The row still says what happened.
    let entries = crate::exported_entries(dir.path());
    assert!(
        entries
            .iter()
            .any(|e| e["decision"] == "refuse" && e["verb"] == "delete"),
        "{entries:?}"
    );
}

/// Cause 5: a row `attest import` wrote claims an approval and a level Attest never saw;
/// every view says so (the row format already marks it `imported`).
#[test]
fn imported_rows_are_shown_as_the_sources_claim_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let line = json!({
        "system": "github", "verb": "delete", "target": "repo", "agent": "bot",
        "ts": "2026-11-30T10:00:00Z", "decision": "ask",
        "confirm": {"outcome": "approved", "approver": "alice"},
        "execution": {"status": "ok"},
        "verification": {"level": "verified", "method": "read-back:recipe"},
    });
    std::fs::write(dir.path().join("past.jsonl"), format!("{line}\n")).unwrap();
    let output = attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "import", "past.jsonl"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let text = stdout(&attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "ledger"],
    ));
    assert!(
        text.contains("imported: the source claims approved by alice, ran")
            && text.contains("verified (claimed)"),
        "{text}"
    );
    let listed: Value = serde_json::from_str(&stdout(&attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "ledger", "--json"],
    )))
    .unwrap();
    let rows = listed
        .as_array()
        .or_else(|| listed["rows"].as_array())
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(rows[0]["imported"], true, "{listed}");

    let digest = stdout(&attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "digest",
            "--json",
            "--since",
            "72h",
            "--until",
            "2026-12-01T00:00:00Z",
        ],
    ));
    assert!(
        digest.contains("ask (imported)") && digest.contains("verified (claimed)"),
        "{digest}"
    );
    let csv = stdout(&attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "export", "--format", "csv"],
    ));
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",hash,imported"), "{csv}");
    assert!(lines.next().unwrap().ends_with(",true"), "{csv}");
    let ocsf: Value = serde_json::from_str(
        stdout(&attest(
            dir.path(),
            &["--ledger", "ledger.sqlite", "export", "--format", "ocsf"],
        ))
        .trim(),
    )
    .unwrap();
    assert_eq!(ocsf["unmapped"]["attest"]["imported"], true, "{ocsf}");
    assert_ne!(ocsf["disposition"], "Approved", "{ocsf}");
    let ietf: Value = serde_json::from_str(
        stdout(&attest(
            dir.path(),
            &["--ledger", "ledger.sqlite", "export", "--format", "ietf"],
        ))
        .trim(),
    )
    .unwrap();
    assert_eq!(
        (ietf["imported"].clone(), ietf["trust_level"].clone()),
        (json!(true), json!("L0"))
    );
}

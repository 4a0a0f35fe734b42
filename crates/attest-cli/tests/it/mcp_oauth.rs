//! `attest mcp-proxy --listen --oauth-issuer`: the proxy as an OAuth protected resource of
//! a local authorization server (`py/oauth_issuer.py`, serving RFC 8414 metadata and a
//! JWKS on 127.0.0.1). Only that server's unexpired tokens for this resource get in; the
//! token's subject is the recorded agent; the token never reaches the upstream or the
//! ledger.
//!
//! And Attest as the OAuth client of a protected upstream (`mcp-login`, `mcp-proxy --url
//! --oauth`), against a local authorization server and MCP server (`py/oauth_notes.py`):
//! the first-run login in a browser (the URL printed, the loopback redirect taken) or
//! headless; the token stored 0600 and never recorded, printed or logged; an expired one
//! refreshed once; a revoked one failing closed with the reason; and both at once, a
//! protected `--listen` in front of a protected upstream, each token kept to its side.

use std::process::Command;

use serde_json::{json, Value};

use crate::mcp::{py, python_with};
use crate::mcp_http::Session;
use crate::mcp_remote::{listening_proxy_with, remote_notes, TOKEN};
use crate::{exported_entries, free_port, start_first_line, stdout};

#[tokio::test]
async fn listen_is_a_protected_resource_that_takes_only_its_issuers_tokens_for_it() {
    if !python_with("mcp") || !python_with("uvicorn") || !python_with("jwt") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_notes, url) = remote_notes(dir.path());
    let (_issuer, issuer) = crate::identity::local_issuer(dir.path());
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let listen = format!("127.0.0.1:{port}");
    let (_proxy, _) = listening_proxy_with(
        dir.path(),
        &url,
        &listen,
        &["--bearer-env", "NOTES_TOKEN", "--oauth-issuer", &issuer],
        &[("NOTES_TOKEN", TOKEN)],
    );

    // RFC 9728 metadata names the resource and its authorization server.
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], resource.as_str());
    assert_eq!(metadata["authorization_servers"], json!([issuer]));

    // No token: 401, and the challenge says where to look.
    let answer = Session::new(&resource, &[]).initialize().await;
    assert_eq!(answer.status, 401);
    let challenge = answer.headers["www-authenticate"].to_str().unwrap();
    assert_eq!(
        challenge,
        format!(r#"Bearer resource_metadata="{metadata_url}""#)
    );

    let refused = [
        (
            format!("sub=mallory&aud={resource}&iss=http://127.0.0.1:9"),
            "another issuer",
        ),
        (
            "sub=mallory&aud=http://127.0.0.1:9/mcp".to_owned(),
            "another resource",
        ),
        (format!("sub=mallory&aud={resource}&exp_in=-120"), "expired"),
        (format!("sub=mallory&aud={resource}&key=other"), "signature"),
    ];
    refused_at(&resource, &issuer, &refused).await;

    // The issuer's token for this resource gets in, and its subject is the agent.
    let token = crate::identity::mint(&issuer, &format!("sub=alice&aud={resource}"));
    alice_creates(dir.path(), &resource, &token).await;
    // The upstream got the proxy's own token (it refuses any other), never alice's.
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(log.contains("create_note"), "{log}");
    let all = serde_json::to_string(&exported_entries(dir.path())).unwrap();
    assert!(!all.contains(&token) && !all.contains(TOKEN));
}

/// Presents each `(mint query, reason)`'s token from `issuer` to the protected resource:
/// each must get a 401 whose challenge says `invalid_token` and `reason`. Every one that
/// did not is listed.
pub(crate) async fn refused_at<Q: AsRef<str>>(resource: &str, issuer: &str, tokens: &[(Q, &str)]) {
    let mut let_in = Vec::new();
    for (query, reason) in tokens {
        let query = query.as_ref();
        let bearer = format!("Bearer {}", crate::identity::mint(issuer, query));
        let answer = Session::new(resource, &[("authorization", &bearer)])
            .initialize()
            .await;
        let challenge = answer
            .headers
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        if answer.status != 401
            || !challenge.contains(r#"error="invalid_token""#)
            || !challenge.contains(reason)
        {
            let_in.push(format!("{query}: {} {challenge}", answer.status));
        }
    }
    assert!(
        let_in.is_empty(),
        "not refused as they should be: {let_in:#?}"
    );
}

/// `token` opens a session on the protected resource and creates a note, recorded as
/// made by `alice`.
pub(crate) async fn alice_creates(dir: &std::path::Path, resource: &str, token: &str) {
    let bearer = format!("Bearer {token}");
    let mut alice = Session::open(resource, &[("authorization", &bearer)]).await;
    let created = alice
        .request(
            "tools/call",
            json!({"name": "create_note", "arguments": {"title": "oauth", "body": "b"}}),
        )
        .await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    let rows = crate::outcome_entries(dir);
    let create = rows.iter().find(|row| row["verb"] == "create").unwrap();
    assert_eq!(create["agent"], "alice", "{create}");
}

/// The OAuth-protected notes server with its own authorization server
/// (`py/oauth_notes.py`), once it accepts connections: running, with its `/mcp` URL.
fn oauth_notes(dir: &std::path::Path) -> (crate::Running, String) {
    oauth_notes_with(dir, &[])
}

fn oauth_notes_with(dir: &std::path::Path, env: &[(&str, &str)]) -> (crate::Running, String) {
    let port = free_port();
    let (server, url) = start_first_line(
        Command::new(crate::python())
            .arg(py("oauth_notes.py"))
            .arg(port.to_string())
            .env("NOTES_LOG", dir.join("notes.log"))
            .env("OAUTH_LOG", dir.join("oauth.log"))
            .envs(env.iter().copied()),
    );
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (server, url)
}

/// The authorization server's grants so far, in order (`register`, `authorization_code`,
/// `refresh_token`, `revoked`); its log's authorization requests left out.
fn grants(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("oauth.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["grant"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// The one token file in `tokens` (beside it, its refresh lock `….json.lock` once it
/// has been refreshed), parsed, with its mode.
fn token_file(tokens: &std::path::Path) -> (std::path::PathBuf, Value, u32) {
    use std::os::unix::fs::PermissionsExt as _;
    let files: Vec<_> = std::fs::read_dir(tokens)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let path = files[0].clone();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    let contents = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    (path, contents, mode)
}

fn access_token(contents: &Value) -> String {
    contents["credentials"]["token_response"]["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_governed_call_through_an_oauth_upstream_refreshes_once_and_fails_closed_when_revoked() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = oauth_notes(dir.path());
    let tokens = dir.path().join("tokens");
    let tokens_arg = tokens.to_string_lossy().into_owned();

    // Without a token, the proxy does not reach the upstream, and says how to sign in.
    let plan = json!({"calls": []});
    let plan_file = dir.path().join("plan0.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let refused = Command::new(crate::python())
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir.path(),
            &[
                "--ledger",
                "ledger.sqlite",
                "mcp-proxy",
                "--url",
                &url,
                "--oauth",
                "--oauth-tokens",
                &tokens_arg,
            ],
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = format!("{}{}", stdout(&refused), crate::stderr(&refused));
    assert!(said.contains("attest mcp-login"), "{said}");

    // The first-run login: discovery, registration, PKCE, the code exchanged.
    let login = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args([
            "mcp-login",
            &url,
            "--login",
            "headless",
            "--oauth-tokens",
            &tokens_arg,
            "--json",
        ])
        .env_clear()
        .output()
        .unwrap();
    assert!(login.status.success(), "{}", crate::stderr(&login));
    let printed: Value = serde_json::from_slice(&login.stdout).unwrap();
    assert_eq!(printed["signed_in"], true, "{printed}");
    assert_eq!(grants(dir.path()), ["register", "authorization_code"]);
    let (path, stored, mode) = token_file(&tokens);
    assert_eq!(mode, 0o600, "{}", path.display());
    assert_eq!(printed["token_file"], path.to_string_lossy().as_ref());
    let first = access_token(&stored);
    assert!(!stdout(&login).contains(&first) && !crate::stderr(&login).contains(&first));

    // A governed call; then the token expires (its clock set back) and the next call
    // refreshes it once; then every token is revoked and the call after fails closed.
    let python = crate::python().to_string_lossy().into_owned();
    let helper = py("oauth_notes.py").to_string_lossy().into_owned();
    let file = path.to_string_lossy().into_owned();
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "first", "body": "b"}},
        {"run": [python, helper, "expire", file]},
        {"tool": "create_note", "args": {"title": "second", "body": "b"}},
        {"run": [python, helper, "revoke", url]},
        {"tool": "create_note", "args": {"title": "third", "body": "b"}},
    ]});
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let output = Command::new(crate::python())
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .args(crate::store_args(
            dir.path(),
            &[
                "--ledger",
                "ledger.sqlite",
                "mcp-proxy",
                "--server",
                "notes",
                "--mode",
                "auto",
                "--url",
                &url,
                "--oauth",
                "--oauth-tokens",
                &tokens_arg,
            ],
        ))
        .current_dir(dir.path())
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&output), crate::stderr(&output)));
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["is_error"], false, "{report}");
    assert_eq!(calls[0]["meta"]["_attest"]["approver"], "auto", "{report}");
    assert_eq!(calls[2]["is_error"], false, "{report}");
    let (_, refreshed, mode) = token_file(&tokens);
    assert_eq!(mode, 0o600);
    let second = access_token(&refreshed);
    assert_ne!(first, second, "the expired token was not replaced");
    // Refreshed once, then revoked; no second login.
    assert_eq!(
        grants(dir.path()),
        [
            "register",
            "authorization_code",
            "refresh_token",
            "revoked",
            "refresh_token"
        ]
    );
    // The revoked token: the call fails, with the reason, and never reaches the server.
    let third = calls[4].to_string();
    assert!(
        third.contains("refused the OAuth token") && third.contains("attest mcp-login"),
        "{report}"
    );
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(
        log.contains("first") && log.contains("second") && !log.contains("third"),
        "{log}"
    );
    // Recorded as tried and failed: decided, then refused upstream.
    // Recorded as tried and failed: decided, then refused upstream.
    let rows = crate::outcome_entries(dir.path());
    let statuses: Vec<&Value> = rows
        .iter()
        .filter(|row| row["verb"] == "create")
        .map(|row| &row["execution"]["status"])
        .collect();
    assert_eq!(
        statuses,
        [&json!("ok"), &json!("ok"), &json!("failed")],
        "{rows:?}"
    );

    // No token in the ledger, its export, the proxy's output or its logs.
    let exported = serde_json::to_string(&exported_entries(dir.path())).unwrap();
    let said = format!("{}{}", stdout(&output), crate::stderr(&output));
    for token in [&first, &second] {
        assert!(!exported.contains(token.as_str()));
        assert!(!said.contains(token.as_str()));
    }
    let refresh = stored["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap();
    assert!(!exported.contains(refresh) && !said.contains(refresh));

    // Signing in again after the revocation uses the client registered the first time.
    let again = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args([
            "mcp-login",
            &url,
            "--login",
            "headless",
            "--oauth-tokens",
            &tokens_arg,
        ])
        .env_clear()
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", crate::stderr(&again));
    assert_eq!(
        grants(dir.path()).last().map(String::as_str),
        Some("authorization_code")
    );
    assert_eq!(
        grants(dir.path())
            .iter()
            .filter(|g| *g == "register")
            .count(),
        1
    );
}

/// `attest mcp-login URL --login headless`, its tokens in `tokens`.
fn headless_login(url: &str, tokens: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["mcp-login", url, "--login", "headless", "--oauth-tokens"])
        .arg(tokens)
        .env_clear()
        .output()
        .unwrap()
}

/// The Python SDK's client driving `attest mcp-proxy --url URL --oauth` (its own ledger,
/// named by `title`), calling `create_note` once with `title`; prints its report.
fn oauth_proxy_creating(
    dir: &std::path::Path,
    url: &str,
    tokens: &std::path::Path,
    title: &str,
) -> Command {
    let plan = json!({"calls": [{"tool": "create_note", "args": {"title": title, "body": "b"}}]});
    let plan_file = dir.join(format!("plan-{title}.json"));
    std::fs::write(&plan_file, plan.to_string()).unwrap();
    let mut command = Command::new(crate::python());
    command
        .arg(py("mcp_driver.py"))
        .arg(&plan_file)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_attest"))
        .args([
            "--ledger",
            &format!("ledger-{title}.sqlite"),
            "mcp-proxy",
            "--server",
            "notes",
            "--mode",
            "auto",
            "--url",
            url,
            "--oauth",
            "--oauth-tokens",
        ])
        .arg(tokens)
        .current_dir(dir);
    command
}

/// The report `mcp_driver.py` printed, or a panic with what it said.
fn driver_report(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(output), crate::stderr(output)))
}

#[test]
fn a_2025_03_26_server_on_its_own_origin_is_its_authorization_server_but_no_other_origin_is() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    // The legacy layout: no protected resource metadata; the root metadata names an
    // issuer under /oauth of the same origin, where the endpoints are. Signed in, and a
    // governed call made (the proxy discovering again from the stored token).
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = oauth_notes_with(dir.path(), &[("OAUTH_LEGACY_ISSUER", "{base}/oauth")]);
    let tokens = dir.path().join("tokens");
    let login = headless_login(&url, &tokens);
    assert!(login.status.success(), "{}", crate::stderr(&login));
    assert_eq!(grants(dir.path()), ["register", "authorization_code"]);
    let output = oauth_proxy_creating(dir.path(), &url, &tokens, "legacy")
        .output()
        .unwrap();
    let report = driver_report(&output);
    assert_eq!(report["calls"][0]["is_error"], false, "{report}");
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(log.contains("legacy"), "{log}");

    // The same layout with an issuer on another origin (a mix-up): refused, before any
    // registration or authorization request.
    let other = tempfile::tempdir().unwrap();
    let (_other_server, other_url) = oauth_notes_with(
        other.path(),
        &[("OAUTH_LEGACY_ISSUER", "http://127.0.0.1:9/oauth")],
    );
    let tokens = other.path().join("tokens");
    let refused = headless_login(&other_url, &tokens);
    assert!(!refused.status.success());
    let said = crate::stderr(&refused);
    assert!(
        said.contains("issuer mismatch") && said.contains("http://127.0.0.1:9/oauth"),
        "{said}"
    );
    assert!(grants(other.path()).is_empty());
    assert!(!tokens.exists() || std::fs::read_dir(&tokens).unwrap().next().is_none());
}

#[test]
fn mcp_login_refuses_an_authorization_server_that_does_not_advertise_s256_pkce() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    // Metadata without code_challenge_methods_supported, then with only `plain`: refused
    // with the reason, before any registration, authorization or token request.
    for (methods, said) in [
        ("", "does not advertise PKCE"),
        ("plain", "does not advertise S256 PKCE"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (_server, url) = oauth_notes_with(dir.path(), &[("OAUTH_PKCE_METHODS", methods)]);
        let tokens = dir.path().join("tokens");
        let refused = headless_login(&url, &tokens);
        let stderr = crate::stderr(&refused);
        assert!(
            !refused.status.success(),
            "{methods:?}: signed in: {stderr}"
        );
        assert!(
            stderr.contains(said) && stderr.contains("MCP authorization spec"),
            "{methods:?}: {stderr}"
        );
        let log = std::fs::read_to_string(dir.path().join("oauth.log")).unwrap_or_default();
        assert_eq!(log, "", "{methods:?}: the authorization server was asked");
        assert!(!tokens.exists() || std::fs::read_dir(&tokens).unwrap().next().is_none());
    }
}

#[test]
fn two_proxies_sharing_a_token_file_spend_its_refresh_token_once() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Each refresh takes a second, so two proxies that both found the token expired
    // are refreshing at the same time unless one waits for the other.
    let (_server, url) = oauth_notes_with(dir.path(), &[("OAUTH_REFRESH_DELAY", "1")]);
    let tokens = dir.path().join("tokens");
    let login = headless_login(&url, &tokens);
    assert!(login.status.success(), "{}", crate::stderr(&login));
    let (path, stored, _) = token_file(&tokens);
    let expire = Command::new(crate::python())
        .arg(py("oauth_notes.py"))
        .arg("expire")
        .arg(&path)
        .status()
        .unwrap();
    assert!(expire.success());

    // Two proxy processes on the one token file, started together, one call each.
    let proxies: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|title| {
            oauth_proxy_creating(dir.path(), &url, &tokens, title)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for proxy in proxies {
        let report = driver_report(&proxy.wait_with_output().unwrap());
        assert_eq!(report["calls"][0]["is_error"], false, "{report}");
    }
    // One refresh: the second proxy, after waiting for the first one's lock, read the
    // refreshed token from the file. (The server rotates refresh tokens: a second
    // refresh with the first token would have been refused, and that call failed.)
    assert_eq!(
        grants(dir.path()),
        ["register", "authorization_code", "refresh_token"]
    );
    let (_, refreshed, mode) = token_file(&tokens);
    assert_eq!(mode, 0o600);
    assert_ne!(access_token(&stored), access_token(&refreshed));
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(log.contains("one") && log.contains("two"), "{log}");
}

#[tokio::test]
async fn an_oauth_protected_listen_in_front_of_an_oauth_upstream_keeps_both_tokens_apart() {
    if !python_with("mcp") || !python_with("uvicorn") || !python_with("jwt") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = oauth_notes(dir.path());
    let tokens = dir.path().join("tokens");
    let tokens_arg = tokens.to_string_lossy().into_owned();
    let login = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args([
            "mcp-login",
            &url,
            "--login",
            "headless",
            "--oauth-tokens",
            &tokens_arg,
        ])
        .env_clear()
        .output()
        .unwrap();
    assert!(login.status.success(), "{}", crate::stderr(&login));
    let upstream_token = access_token(&token_file(&tokens).1);

    let (_issuer, issuer) = crate::identity::local_issuer(dir.path());
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let (_proxy, _) = listening_proxy_with(
        dir.path(),
        &url,
        &format!("127.0.0.1:{port}"),
        &[
            "--oauth",
            "--oauth-tokens",
            &tokens_arg,
            "--oauth-issuer",
            &issuer,
        ],
        &[],
    );
    let token = reqwest::get(format!("{issuer}/mint?sub=alice&aud={resource}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let bearer = format!("Bearer {token}");
    let mut alice = Session::open(&resource, &[("authorization", &bearer)]).await;
    let created = alice
        .request(
            "tools/call",
            json!({"name": "create_note", "arguments": {"title": "both", "body": "b"}}),
        )
        .await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    // The upstream took Attest's own token (it knows no other), alice's stayed here.
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(log.contains("both"), "{log}");
    let rows = crate::outcome_entries(dir.path());
    let create = rows.iter().find(|row| row["verb"] == "create").unwrap();
    assert_eq!(create["agent"], "alice", "{create}");
    let all = serde_json::to_string(&exported_entries(dir.path())).unwrap();
    assert!(!all.contains(&token) && !all.contains(&upstream_token));
}

#[tokio::test]
async fn mcp_login_prints_the_browser_url_and_takes_the_loopback_redirect() {
    if !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = oauth_notes(dir.path());
    let tokens = dir.path().join("tokens");
    let mut login = crate::Running(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(["mcp-login", &url, "--oauth-tokens"])
            .arg(&tokens)
            .env_clear()
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The person's part: open the printed URL; the browser follows the redirect back.
    // (The pipe stays open to the end: the rest of the message is still to come.)
    let mut said = std::io::BufReader::new(login.0.stderr.take().unwrap()).lines();
    let printed = said
        .by_ref()
        .map(Result::unwrap)
        .find_map(|line| {
            line.trim()
                .starts_with("http")
                .then(|| line.trim().to_owned())
        })
        .expect("no authorization URL printed");
    assert!(printed.contains("code_challenge="), "{printed}");
    let page = reqwest::get(&printed).await.unwrap();
    assert!(
        page.url().as_str().starts_with("http://127.0.0.1:"),
        "{}",
        page.url()
    );
    assert!(page.text().await.unwrap().contains("signed in"));
    let status = login.0.wait().unwrap();
    let rest: Vec<String> = said.map(Result::unwrap).collect();
    assert!(status.success(), "{rest:?}");
    let (_, stored, mode) = token_file(&tokens);
    assert_eq!(mode, 0o600);
    assert!(!access_token(&stored).is_empty());
    assert_eq!(grants(dir.path()), ["register", "authorization_code"]);
}

#[test]
fn oauth_client_flags_that_cannot_work_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let tokens = tokens.to_string_lossy();
    let refused = [
        (
            vec![
                "--ledger",
                "l.sqlite",
                "mcp-proxy",
                "--url",
                "http://127.0.0.1:9/mcp",
                "--oauth-scope",
                "notes",
            ],
            "--oauth-scope is for an OAuth upstream",
        ),
        (
            vec![
                "mcp-login",
                "http://127.0.0.1:9/mcp",
                "--oauth-tokens",
                &tokens,
                "--oauth-grant",
                "client-credentials",
            ],
            "--oauth-grant client-credentials: give --oauth-client-id",
        ),
        (
            vec![
                "mcp-login",
                "http://127.0.0.1:9/mcp",
                "--oauth-tokens",
                &tokens,
                "--oauth-client-metadata-url",
                "http://example.com/client.json",
            ],
            "--oauth-client-metadata-url: an https:// URL",
        ),
        (
            vec![
                "mcp-login",
                "https://user:pw@mcp.example.com/mcp",
                "--oauth-tokens",
                &tokens,
            ],
            "no credentials in the URL",
        ),
    ];
    for (args, said) in refused {
        let output = Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(&args)
            .current_dir(dir.path())
            .env_clear()
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let text = crate::stderr(&output);
        assert!(text.contains(said), "{args:?}: {text}");
    }
    // Nothing was written: no token directory for a refused login.
    assert!(!dir.path().join("tokens").exists());
}

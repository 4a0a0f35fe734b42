//! Identities that are proven (issue 34, parts 4 and 5), against a real OpenID Connect
//! provider on 127.0.0.1 (`py/oauth_issuer.py`: discovery, JWKS, an authorization
//! endpoint and a token endpoint that checks the client and PKCE):
//!
//! - approvers sign in to the inbox with the provider (the code flow driven by an HTTP
//!   client, as a browser would): each spoiled ID token (issuer, audience, expiry, nonce,
//!   signature) is refused, a flow not begun in this browser is refused, a signed-in
//!   person who is not a registered approver is refused, and a signed-in approver decides
//!   (from the inbox's origin only);
//! - agents are named by a credential: an `attest agents add` token and a JWT from the
//!   provider name the same agent through the gateway and `mcp-proxy --listen`, the row
//!   says how (`agent_auth`); forged, expired, wrong-audience and revoked credentials and
//!   a label that disagrees are refused and never reach the upstream.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::gateway::{curl, curl_missing, start_gateway, start_vendor, Shared};
use crate::mcp::{py, python_with};
use crate::mcp_http::Session;
use crate::{attest, free_port, outcome_entries, start_first_line, stderr, Running};

/// The provider's confidential client (as `py/oauth_issuer.py` knows it).
const CLIENT_ID: &str = "attest-inbox";
const CLIENT_SECRET: &str = "inbox-client-secret";

/// The local OAuth / OpenID Connect provider on a free port, logging its token requests
/// to `dir/oauth.log`: running, with its issuer URL. The one issuer every identity test
/// (and `mcp_oauth`'s protected resource) uses.
pub(crate) fn local_issuer(dir: &Path) -> (Running, String) {
    start_first_line(
        Command::new(crate::python())
            .arg(py("oauth_issuer.py"))
            .arg(free_port().to_string())
            .env("OAUTH_LOG", dir.join("oauth.log")),
    )
}

/// A token the provider mints for the tests (`/mint?query`).
pub(crate) fn mint(issuer: &str, query: &str) -> String {
    let out = Command::new("curl")
        .args(["-s", "--fail", &format!("{issuer}/mint?{query}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "mint {query}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn write_config(dir: &Path, yaml: &str) {
    std::fs::create_dir_all(dir.join(".attest")).unwrap();
    std::fs::write(dir.join(".attest/config.yaml"), yaml).unwrap();
}

/// What the inbox answered the provider's redirect with.
pub(crate) struct Callback {
    pub(crate) status: u16,
    cookies: Vec<String>,
    pub(crate) body: String,
}

impl Callback {
    /// The session cookie's `name=value`, when one was set.
    pub(crate) fn session(&self) -> Option<String> {
        self.cookies
            .iter()
            .find(|c| c.starts_with("attest_session=") && !c.starts_with("attest_session=;"))
            .map(|c| c.split(';').next().unwrap().to_owned())
    }
}

fn set_cookies(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

/// One sign-in as a browser makes it: `/login`, the provider (signing in `user`, the ID
/// token spoiled as `spoil` says), and back to the inbox with the flow's cookie (unless
/// `cookie` is false: a callback in another browser).
pub(crate) async fn sign_in(base: &str, user: &str, spoil: &str, cookie: bool) -> Callback {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = client.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(login.status(), 302);
    let flow_cookie = set_cookies(&login)
        .into_iter()
        .find(|c| c.starts_with("attest_login="))
        .unwrap();
    assert!(
        flow_cookie.contains("HttpOnly") && flow_cookie.contains("Path=/login"),
        "{flow_cookie}"
    );
    let authorize = login.headers()["location"].to_str().unwrap().to_owned();
    let query: std::collections::HashMap<String, String> = reqwest::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(query["code_challenge_method"], "S256", "{authorize}");
    assert_eq!(query["redirect_uri"], format!("{base}/login/callback"));
    assert!(!query["nonce"].is_empty() && !query["state"].is_empty());
    let at_provider = client
        .get(format!("{authorize}&login_hint={user}&spoil={spoil}"))
        .send()
        .await
        .unwrap();
    assert_eq!(at_provider.status(), 302, "{authorize}");
    let callback = at_provider.headers()["location"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(callback.starts_with(&format!("{base}/login/callback?")));
    let mut request = client.get(&callback);
    if cookie {
        request = request.header("cookie", flow_cookie.split(';').next().unwrap());
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let cookies = set_cookies(&answer);
    let body = answer.text().await.unwrap();
    Callback {
        status,
        cookies,
        body,
    }
}

/// An inbox whose approvers sign in with the local provider: one request pending,
/// `raj@acme.com` a registered approver.
pub(crate) struct OidcInbox {
    _issuer: Running,
    _server: crate::approvals::Server,
    /// The inbox's base URL.
    pub(crate) base: String,
    /// The pending request's id.
    pub(crate) id: String,
}

/// Configures `inbox.oidc` for the local provider (its lines `oidc` added to the
/// section, e.g. `claim: email`) and serves the inbox.
pub(crate) async fn oidc_inbox(dir: &Path, oidc: &[&str]) -> OidcInbox {
    let (id, _token) = crate::approvals::pend(dir).await;
    crate::approvals::add_approver(dir, "raj@acme.com", &[]);
    let (issuer_running, issuer) = local_issuer(dir);
    let secret = dir.join("client.secret");
    std::fs::write(&secret, CLIENT_SECRET).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut yaml = format!(
        "inbox:\n  oidc:\n    issuer: {issuer}\n    client_id: {CLIENT_ID}\n    \
         client_secret_file: {}\n",
        secret.display()
    );
    for line in oidc {
        yaml.push_str(&format!("    {line}\n"));
    }
    write_config(dir, &yaml);
    let server = crate::approvals::serve(dir, &[]);
    OidcInbox {
        _issuer: issuer_running,
        base: server.url.clone(),
        _server: server,
        id,
    }
}

/// Signs raj in once per `(spoil, reason)`, the ID token spoiled so: each must be refused
/// (403) saying `reason`, with no session made. Every one that was not is listed.
pub(crate) async fn refused_sign_ins(base: &str, spoils: &[(&str, &str)]) {
    let mut let_in = Vec::new();
    for (spoil, reason) in spoils {
        let answer = sign_in(base, "raj@acme.com", spoil, true).await;
        if answer.status != 403 || !answer.body.contains(reason) || answer.session().is_some() {
            let_in.push(format!("{spoil}: {} {}", answer.status, answer.body));
        }
    }
    assert!(
        let_in.is_empty(),
        "not refused as they should be: {let_in:#?}"
    );
}

#[tokio::test]
async fn approvers_sign_in_with_the_provider_bad_id_tokens_are_refused_and_the_signed_in_approver_decides(
) {
    if !python_with("jwt") || !python_with("cryptography") || curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inbox = oidc_inbox(dir.path(), &["claim: email"]).await;
    let (base, id) = (inbox.base.clone(), inbox.id.clone());
    let http = reqwest::Client::new();

    // Without a session the API says where to sign in.
    let me = http.get(format!("{base}/api/me")).send().await.unwrap();
    assert_eq!(me.status(), 401);
    assert_eq!(me.json::<Value>().await.unwrap()["login"], "/login");

    // Each spoiled ID token is refused, and no session is made.
    refused_sign_ins(
        &base,
        &[
            ("issuer", "another issuer"),
            ("audience", "another resource"),
            ("expired", "expired"),
            ("nonce", "nonce"),
            ("signature", "signature"),
        ],
    )
    .await;
    // A callback in a browser that did not begin the flow (login CSRF) is refused.
    let elsewhere = sign_in(&base, "raj@acme.com", "", false).await;
    assert_eq!(elsewhere.status, 403, "{}", elsewhere.body);
    assert!(elsewhere.body.contains("not started in this browser"));
    assert_eq!(elsewhere.session(), None);
    // A person the provider knows who is not a registered approver gets no session.
    let eve = sign_in(&base, "eve@acme.com", "", true).await;
    assert_eq!(eve.status, 403, "{}", eve.body);
    assert!(
        eve.body.contains("not a registered approver"),
        "{}",
        eve.body
    );
    assert_eq!(eve.session(), None);

    // Raj signs in: the session cookie is HttpOnly and SameSite=Strict (no Secure on http).
    let raj = sign_in(&base, "raj@acme.com", "", true).await;
    assert_eq!(raj.status, 200, "{}", raj.body);
    let set = raj
        .cookies
        .iter()
        .find(|c| c.starts_with("attest_session="))
        .unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && !set.contains("Secure"),
        "{set}"
    );
    let session = raj.session().unwrap();
    // The provider saw the client's secret, the redirect URI and the PKCE verifier checked.
    let log = std::fs::read_to_string(dir.path().join("oauth.log")).unwrap();
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["checks"],
        json!({"client": true, "code": true, "grant": true, "redirect_uri": true, "pkce": true})
    );
    let me: Value = http
        .get(format!("{base}/api/me"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me, json!({"approver": "raj@acme.com"}));

    // The session is a cookie the browser adds by itself: a decision without the inbox's
    // origin (a forged cross-site request) is refused; from the inbox's page it is recorded.
    let decide = |origin: Option<&str>| {
        let mut request = http
            .post(format!("{base}/api/requests/{id}/decision"))
            .header("cookie", &session)
            .json(&json!({"decision": "approve", "note": "signed in"}));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    assert_eq!(decide(None).await.unwrap().status(), 403);
    assert_eq!(
        decide(Some("http://evil.example")).await.unwrap().status(),
        403
    );
    let decided = decide(Some(&base)).await.unwrap();
    assert_eq!(decided.status(), 200);
    let decided: Value = decided.json().await.unwrap();
    assert_eq!(decided["request"]["status"], "approved", "{decided}");
    assert_eq!(decided["request"]["approver"], "raj@acme.com", "{decided}");

    // Signing out ends the session.
    let out = http
        .post(format!("{base}/logout"))
        .header("cookie", &session)
        .header("origin", &base)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 200);
    let me = http
        .get(format!("{base}/api/me"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 401);
}

/// `attest agents add NAME --json`: the token, printed once.
pub(crate) fn add_agent(dir: &Path, name: &str) -> String {
    let out = attest(
        dir,
        &["--ledger", "ledger.sqlite", "agents", "add", name, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(added["name"], name);
    let token = added["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("atg_"), "{token}");
    token
}

/// The writes that reached the vendor (each one that ran is also read back, a GET).
pub(crate) fn posts(vendor: &Shared) -> usize {
    let vendor = vendor.lock().unwrap();
    vendor
        .hits
        .iter()
        .filter(|hit| hit.starts_with("POST"))
        .count()
}

/// `POST /v1/notes` through the gateway `gw` with the headers `extra`.
pub(crate) fn create_note(gw: &str, extra: &[&str]) -> (u16, HashMap<String, String>, String) {
    let mut headers = Vec::new();
    for header in extra {
        headers.extend(["-H", header]);
    }
    curl(
        "POST",
        &format!("{gw}/v1/notes"),
        Some(&json!({"title": "t"})),
        &headers,
    )
}

/// [`AGENT_POLICY`], and agents named by the local provider's JWTs for the audience
/// `attest-gateway` (their `sub`) or unauthenticated: the provider running, and its issuer.
pub(crate) fn gateway_agents(dir: &Path) -> (Running, String) {
    std::fs::write(dir.join("policy.yaml"), AGENT_POLICY).unwrap();
    let (running, issuer) = local_issuer(dir);
    write_config(
        dir,
        &format!(
            "agents:\n  jwt:\n    issuer: {issuer}\n    audience: attest-gateway\n    \
             claim: sub\n  unauthenticated: record\n"
        ),
    );
    (running, issuer)
}

const AGENT_POLICY: &str = r#"
version: 1
policies:
  - name: unproven-agents-do-not-write
    match: {agent: unauthenticated, verb: create}
    decision: refuse
    reason: an agent that does not prove who it is does not write
  - name: sandbox-writes
    match: {verb: [create, update, write]}
    decision: act
    reason: the test vendor is a sandbox
"#;

#[test]
fn an_agent_token_and_a_jwt_name_the_same_agent_through_the_gateway_and_bad_credentials_never_reach_the_upstream(
) {
    if curl_missing() || !python_with("jwt") || !python_with("cryptography") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_issuer, issuer) = gateway_agents(dir.path());
    let token = add_agent(dir.path(), "billing-bot");
    let listed = attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "agents", "list", "--json"],
    );
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listed.contains("billing-bot") && !listed.contains(&token[4..]),
        "{listed}"
    );
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, gw) = start_gateway(dir.path(), &upstream, &[]);
    let hits = || posts(&vendor);
    let create = |extra: &[&str]| create_note(&gw, extra);

    // The agent's own token, and a JWT whose subject is the agent: both name billing-bot.
    let (status, _, body) = create(&[&format!("X-Attest-Token: {token}")]);
    assert_eq!(status, 201, "{body}");
    let jwt = mint(&issuer, "sub=billing-bot&aud=attest-gateway");
    let (status, _, body) = create(&[
        &format!("X-Attest-Token: {jwt}"),
        "X-Attest-Agent: billing-bot",
    ]);
    assert_eq!(status, 201, "{body}");
    assert_eq!(hits(), 2);

    // Forged, expired, wrong-audience, other-issuer and unknown credentials: 401; a label
    // that disagrees with a good credential: 403. None reaches the vendor.
    let refused = [
        (
            mint(&issuer, "sub=billing-bot&aud=attest-gateway&key=other"),
            401,
            "signature",
        ),
        (
            mint(&issuer, "sub=billing-bot&aud=attest-gateway&exp_in=-120"),
            401,
            "expired",
        ),
        (
            mint(&issuer, "sub=billing-bot&aud=someone-else"),
            401,
            "another resource",
        ),
        (
            mint(
                &issuer,
                "sub=billing-bot&aud=attest-gateway&iss=http://127.0.0.1:9",
            ),
            401,
            "another issuer",
        ),
        ("atg_0000".to_owned(), 401, "not a valid agent token"),
    ];
    for (credential, want, reason) in refused {
        let (status, _, body) = create(&[&format!("X-Attest-Token: {credential}")]);
        assert_eq!(status, want, "{reason}: {body}");
        assert!(body.contains(reason), "{reason}: {body}");
    }
    let (status, _, body) = create(&[
        &format!("X-Attest-Token: {token}"),
        "X-Attest-Agent: ops-bot",
    ]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("disagrees"), "{body}");
    let (status, _, body) = create(&[&format!("X-Attest-Token: {jwt}"), "X-Attest-Agent: ops-bot"]);
    assert_eq!(status, 403, "{body}");
    assert_eq!(hits(), 2);

    // No credential, recorded as configured: the agent is `unauthenticated` (a label does
    // not help), and policy's `match.agent` sees that name, not the label.
    let (status, _, body) = create(&["X-Attest-Agent: billing-bot"]);
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = create(&[]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("does not write"), "{body}");
    assert_eq!(hits(), 2);

    // A revoked token names nobody.
    let revoked = attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "agents",
            "revoke",
            "billing-bot",
        ],
    );
    assert_eq!(revoked.status.code(), Some(0), "{}", stderr(&revoked));
    let (status, _, body) = create(&[&format!("X-Attest-Token: {token}")]);
    assert_eq!(status, 401, "{body}");
    assert_eq!(hits(), 2);

    let rows = outcome_entries(dir.path());
    let how: Vec<(Value, Value, Value)> = rows
        .iter()
        .filter(|row| row["verb"] == "create")
        .map(|row| {
            (
                row["agent"].clone(),
                row["agent_auth"].clone(),
                row["decision"].clone(),
            )
        })
        .collect();
    assert_eq!(
        how,
        vec![
            (json!("billing-bot"), json!("token"), json!("act")),
            (json!("billing-bot"), json!("jwt"), json!("act")),
            (
                json!("unauthenticated"),
                json!("unauthenticated"),
                json!("refuse")
            ),
        ],
        "{rows:?}"
    );
    let all = serde_json::to_string(&crate::exported_entries(dir.path())).unwrap();
    assert!(!all.contains(&token) && !all.contains(&jwt));
}

#[tokio::test]
async fn an_agent_token_and_a_jwt_name_the_same_agent_through_mcp_proxy_listen() {
    if !python_with("mcp") || !python_with("uvicorn") || !python_with("jwt") || curl_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_notes, url) = crate::mcp_remote::remote_notes(dir.path());
    let (_issuer, issuer) = local_issuer(dir.path());
    write_config(
        dir.path(),
        &format!("agents:\n  jwt:\n    issuer: {issuer}\n    audience: attest-mcp\n"),
    );
    let token = add_agent(dir.path(), "notes-bot");
    let (_proxy, endpoint) = crate::mcp_remote::listening_proxy_with(
        dir.path(),
        &url,
        "127.0.0.1:0",
        &["--bearer-env", "NOTES_TOKEN"],
        &[("NOTES_TOKEN", crate::mcp_remote::TOKEN)],
    );

    // No credential, and bad ones: 401 before any session (nothing reaches the upstream).
    let forged = mint(&issuer, "sub=notes-bot&aud=attest-mcp&key=other");
    let expired = mint(&issuer, "sub=notes-bot&aud=attest-mcp&exp_in=-120");
    let elsewhere = mint(&issuer, "sub=notes-bot&aud=another-door");
    assert_eq!(Session::new(&endpoint, &[]).initialize().await.status, 401);
    for bad in [&forged, &expired, &elsewhere, &"atg_0000".to_owned()] {
        let bearer = format!("Bearer {bad}");
        let answer = Session::new(&endpoint, &[("authorization", &bearer)])
            .initialize()
            .await;
        assert_eq!(answer.status, 401, "{bad}");
    }

    let jwt = mint(&issuer, "sub=notes-bot&aud=attest-mcp");
    for (credential, title) in [(&token, "by token"), (&jwt, "by jwt")] {
        let bearer = format!("Bearer {credential}");
        let mut session = Session::open(&endpoint, &[("authorization", &bearer)]).await;
        let created = session
            .request(
                "tools/call",
                json!({"name": "create_note", "arguments": {"title": title, "body": "b"}}),
            )
            .await;
        assert_eq!(created["result"]["isError"], false, "{created}");
    }
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert_eq!(log.matches("create_note").count(), 2, "{log}");
    let how: Vec<(Value, Value)> = outcome_entries(dir.path())
        .iter()
        .filter(|row| row["verb"] == "create")
        .map(|row| (row["agent"].clone(), row["agent_auth"].clone()))
        .collect();
    assert_eq!(
        how,
        vec![
            (json!("notes-bot"), json!("token")),
            (json!("notes-bot"), json!("jwt")),
        ]
    );
    let all = serde_json::to_string(&crate::exported_entries(dir.path())).unwrap();
    assert!(!all.contains(&token) && !all.contains(&jwt));
}

#[test]
fn mcp_server_with_agents_configured_starts_only_for_a_proven_agent() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "agents: {}\n");
    let token = add_agent(dir.path(), "notes-bot");
    let start = |env: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(crate::store_args(
                dir.path(),
                &["--ledger", "ledger.sqlite", "mcp-server"],
            ))
            .current_dir(dir.path())
            .env_clear()
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let none = start(&[]);
    assert!(!none.status.success());
    assert!(
        stderr(&none).contains("ATTEST_AGENT_TOKEN"),
        "{}",
        stderr(&none)
    );
    let forged = start(&[("ATTEST_AGENT_TOKEN", "atg_0000")]);
    assert!(!forged.status.success());
    assert!(
        stderr(&forged).contains("not a valid agent token"),
        "{}",
        stderr(&forged)
    );
    // Its own token gets past the check (to the MCP handshake, which has no client here).
    let own = start(&[("ATTEST_AGENT_TOKEN", &token)]);
    assert!(
        !stderr(&own).contains("ATTEST_AGENT_TOKEN"),
        "{}",
        stderr(&own)
    );
}

#[test]
fn a_stdio_mcp_proxy_with_agents_configured_is_its_proven_agents() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "agents: {}\n");
    let token = add_agent(dir.path(), "notes-bot");
    let plan = json!({"calls": [
        {"tool": "create_note", "args": {"title": "stdio", "body": "b"}},
    ]});
    let server = py("notes_server.py");
    let python = crate::python();
    let report = crate::mcp::drive_with(
        dir.path(),
        &plan,
        &["--mode", "auto", "--server", "notes"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
        &[("ATTEST_AGENT_TOKEN", &token)],
    );
    assert_eq!(report["calls"][0]["is_error"], false, "{report}");
    let how: Vec<(Value, Value)> = outcome_entries(dir.path())
        .iter()
        .filter(|row| row["verb"] == "create")
        .map(|row| (row["agent"].clone(), row["agent_auth"].clone()))
        .collect();
    assert_eq!(how, vec![(json!("notes-bot"), json!("token"))]);
}

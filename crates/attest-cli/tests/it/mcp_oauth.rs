//! `attest mcp-proxy --listen --oauth-issuer`: the proxy as an OAuth protected resource of
//! a local authorization server (`py/oauth_issuer.py`, serving RFC 8414 metadata and a
//! JWKS on 127.0.0.1). Only that server's unexpired tokens for this resource get in; the
//! token's subject is the recorded agent; the token never reaches the upstream or the
//! ledger.

use std::process::Command;

use serde_json::{json, Value};

use crate::mcp::{py, python_with};
use crate::mcp_http::Session;
use crate::mcp_remote::{listening_proxy_with, remote_notes, TOKEN};
use crate::{exported_entries, free_port, start_first_line};

#[tokio::test]
async fn listen_is_a_protected_resource_that_takes_only_its_issuers_tokens_for_it() {
    if !python_with("mcp") || !python_with("uvicorn") || !python_with("jwt") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_notes, url) = remote_notes(dir.path());
    let (_issuer, issuer) = start_first_line(
        Command::new(crate::python())
            .arg(py("oauth_issuer.py"))
            .arg(free_port().to_string()),
    );
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

    let mint = |query: String| {
        let issuer = issuer.clone();
        async move {
            reqwest::get(format!("{issuer}/mint?{query}"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
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
    for (query, reason) in refused {
        let bearer = format!("Bearer {}", mint(query.clone()).await);
        let answer = Session::new(&resource, &[("authorization", &bearer)])
            .initialize()
            .await;
        assert_eq!(answer.status, 401, "{query}");
        let challenge = answer.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains(r#"error="invalid_token""#) && challenge.contains(reason),
            "{query}: {challenge}"
        );
    }

    // The issuer's token for this resource gets in, and its subject is the agent.
    let token = mint(format!("sub=alice&aud={resource}")).await;
    let bearer = format!("Bearer {token}");
    let mut alice = Session::open(&resource, &[("authorization", &bearer)]).await;
    let created = alice
        .request(
            "tools/call",
            json!({"name": "create_note", "arguments": {"title": "oauth", "body": "b"}}),
        )
        .await;
    assert_eq!(created["result"]["isError"], false, "{created}");
    let rows = crate::outcome_entries(dir.path());
    let create = rows.iter().find(|row| row["verb"] == "create").unwrap();
    assert_eq!(create["agent"], "alice", "{create}");
    // The upstream got the proxy's own token (it refuses any other), never alice's.
    let log = std::fs::read_to_string(dir.path().join("notes.log")).unwrap();
    assert!(log.contains("create_note"), "{log}");
    let all = serde_json::to_string(&exported_entries(dir.path())).unwrap();
    assert!(!all.contains(&token) && !all.contains(TOKEN));
}

//! What a JWT and an OpenID Connect sign-in are bound to (issue 50, part 4), against the
//! real provider on 127.0.0.1 (`py/oauth_issuer.py`) at each door that checks one: the
//! gateway (an agent's JWT), `mcp-proxy --listen --oauth-issuer` (an access token) and the
//! inbox's sign-in (an ID token). A token for later (`nbf` an hour ahead, or an `nbf`
//! that is not a time) and a token whose header marks an extension critical (`crit`, or
//! the forbidden empty `crit`) are refused at each; one inside the clock-skew leeway, and
//! a plain one, still get in. An e-mail names an approver only when the provider says it
//! verified it, or when the operator guarantees the claim.

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::gateway::{curl_missing, start_gateway, start_vendor, Shared};
use crate::identity::{
    create_note, gateway_agents, local_issuer, mint, oidc_inbox, posts, refused_sign_ins, sign_in,
    write_config,
};
use crate::mcp::python_with;
use crate::mcp_oauth::{alice_creates, refused_at};

/// Tokens no door takes, as `mint` queries added to a good one's, with the reason each
/// door gives. `%22` and `%5B…%5D` are a JSON string and list in the query.
const NOT_NOW_OR_NOT_UNDERSTOOD: [(&str, &str); 4] = [
    ("nbf_in=3600", "not valid yet"),
    ("nbf=%22soon%22", "nbf is not a time"),
    (
        "crit=%5B%22urn:example:unknown%22%5D",
        "marks as critical (crit) an extension",
    ),
    ("crit=%5B%5D", "empty crit list"),
];

/// Inside the leeway: the issuer's clock a little ahead of ours.
const SLIGHTLY_AHEAD: &str = "nbf_in=10";

/// An inbox (`claim: email`) that refuses raj's ID token spoiled as each `(spoil,
/// reason)` says, and takes the unspoiled one.
async fn refuses_then_signs_in(spoils: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let inbox = oidc_inbox(dir.path(), &["claim: email"]).await;
    refused_sign_ins(&inbox.base, spoils).await;
    signs_in(&inbox.base, "").await;
}

/// Raj signs in to the inbox at `base`, the ID token as `spoil` says: a session.
async fn signs_in(base: &str, spoil: &str) {
    let answer = sign_in(base, "raj@acme.com", spoil, true).await;
    assert_eq!(answer.status, 200, "{spoil}: {}", answer.body);
    assert!(answer.session().is_some(), "{spoil}");
}

fn peers_missing() -> bool {
    !python_with("jwt") || !python_with("cryptography") || curl_missing()
}

#[test]
fn a_jwt_for_later_or_with_a_critical_extension_is_refused_at_the_gateway() {
    if peers_missing() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_issuer, issuer) = gateway_agents(dir.path());
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (_gateway, gw) = start_gateway(dir.path(), &upstream, &[]);
    let create = |query: &str| {
        let jwt = mint(
            &issuer,
            &format!("sub=billing-bot&aud=attest-gateway&{query}"),
        );
        create_note(&gw, &[&format!("X-Attest-Token: {jwt}")])
    };
    let let_in: Vec<String> = NOT_NOW_OR_NOT_UNDERSTOOD
        .iter()
        .filter_map(|(query, reason)| {
            let (status, _, body) = create(query);
            (status != 401 || !body.contains(reason)).then(|| format!("{query}: {status} {body}"))
        })
        .collect();
    assert!(
        let_in.is_empty(),
        "not refused as they should be: {let_in:#?}"
    );
    assert_eq!(posts(&vendor), 0, "a refused token reached the vendor");
    for query in [SLIGHTLY_AHEAD, "exp_in=300"] {
        let (status, _, body) = create(query);
        assert_eq!(status, 201, "{query}: {body}");
    }
    assert_eq!(posts(&vendor), 2);
}

#[tokio::test]
async fn a_jwt_for_later_or_with_a_critical_extension_is_refused_at_mcp_proxy_listen() {
    if peers_missing() || !python_with("mcp") || !python_with("uvicorn") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_notes, url) = crate::mcp_remote::remote_notes(dir.path());
    let (_issuer, issuer) = local_issuer(dir.path());
    let port = crate::free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let (_proxy, _) = crate::mcp_remote::listening_proxy_with(
        dir.path(),
        &url,
        &format!("127.0.0.1:{port}"),
        &["--bearer-env", "NOTES_TOKEN", "--oauth-issuer", &issuer],
        &[("NOTES_TOKEN", crate::mcp_remote::TOKEN)],
    );
    let tokens: Vec<(String, &str)> = NOT_NOW_OR_NOT_UNDERSTOOD
        .iter()
        .map(|(query, reason)| (format!("sub=mallory&aud={resource}&{query}"), *reason))
        .collect();
    refused_at(&resource, &issuer, &tokens).await;
    let token = mint(
        &issuer,
        &format!("sub=alice&aud={resource}&{SLIGHTLY_AHEAD}"),
    );
    alice_creates(dir.path(), &resource, &token).await;
}

#[tokio::test]
async fn an_id_token_for_later_or_with_a_critical_extension_signs_nobody_in_to_the_inbox() {
    if peers_missing() {
        return;
    }
    refuses_then_signs_in(&[
        ("nbf", "not valid yet"),
        ("crit", "marks as critical (crit) an extension"),
        ("crit_empty", "empty crit list"),
    ])
    .await;
}

#[tokio::test]
async fn an_email_names_an_approver_only_when_the_provider_verified_it_or_the_claim_is_guaranteed()
{
    if peers_missing() {
        return;
    }
    refuses_then_signs_in(&[
        (
            "email_unverified",
            "has not verified this e-mail address (email_verified is false)",
        ),
        (
            "email_verified_absent",
            "does not say it verified this e-mail address (no email_verified)",
        ),
    ])
    .await;

    // The operator guarantees the claim (a provider that issues only its own domain's
    // addresses and says nothing of verification): the address is taken as it is.
    let guaranteed_dir = tempfile::tempdir().unwrap();
    let guaranteed = oidc_inbox(
        guaranteed_dir.path(),
        &["claim: email", "claim_guaranteed: true"],
    )
    .await;
    signs_in(&guaranteed.base, "email_verified_absent").await;

    // A claim OpenID Connect does not promise names one person, not guaranteed: the inbox
    // does not start.
    let other_dir = tempfile::tempdir().unwrap();
    let (_issuer, issuer) = local_issuer(other_dir.path());
    write_config(
        other_dir.path(),
        &format!(
            "inbox:\n  oidc:\n    issuer: {issuer}\n    client_id: attest-inbox\n    \
             claim: preferred_username\n"
        ),
    );
    crate::approvals::make_ledger(other_dir.path(), &[]);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_attest"))
        .args(["serve", "--port", "0"])
        .current_dir(other_dir.path())
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    if !first.is_empty() {
        let _ = serve.kill();
    }
    let output = serve.wait_with_output().unwrap();
    assert_eq!(first, "", "the inbox started");
    let said = crate::stderr(&output);
    assert!(
        !output.status.success()
            && said.contains("inbox.oidc.claim preferred_username")
            && said.contains("claim_guaranteed"),
        "{said}"
    );
}

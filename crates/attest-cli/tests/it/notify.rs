//! Notifications from the binary: a call held for a person through `attest mcp-proxy` is
//! posted to the configured signed webhook and mailed over SMTP, each with a one-click
//! link that works against a running `attest serve`.

use std::process::Command;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::approvals::add_approver;
use crate::mcp::{drive_with, py, python_with};
use crate::{attest, free_port, start_first_line, stdout, Running};

const WEBHOOK_SECRET: &str = "whsec-test-1";
const LINK_KEY: &str = "link-key-for-tests";
/// Creating a note asks ann.
const NOTES_POLICY: &str = "version: 1
policies:
  - name: notes
    match: {system: notes, verb: create}
    decision: ask
    approvers: [ann@acme.com]
    reason: notes need ann
";

/// A webhook receiver on 127.0.0.1: each POST /hook is sent down the channel as
/// (timestamp header, signature header, body).
pub(crate) async fn receiver() -> (String, mpsc::UnboundedReceiver<(String, String, Bytes)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let tx = tx.clone();
            async move {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned()
                };
                let _ = tx.send((
                    header("x-attest-timestamp"),
                    header("x-attest-signature"),
                    body,
                ));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

/// A minimal SMTP sink on 127.0.0.1: answers each command as a relay would and sends
/// the DATA of each message down the channel.
async fn smtp_sink() -> (u16, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = tokio::io::BufReader::new(read).lines();
                write.write_all(b"220 sink ESMTP\r\n").await.unwrap();
                let mut data: Option<String> = None;
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(message) = data.as_mut() {
                        if line == "." {
                            let _ = tx.send(data.take().unwrap_or_default());
                            write.write_all(b"250 queued\r\n").await.unwrap();
                        } else {
                            message.push_str(&line);
                            message.push('\n');
                        }
                        continue;
                    }
                    let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
                    let answer: &[u8] = match verb.as_str() {
                        "EHLO" | "HELO" => b"250 sink\r\n",
                        "DATA" => {
                            data = Some(String::new());
                            b"354 go on\r\n"
                        }
                        "QUIT" => {
                            write.write_all(b"221 bye\r\n").await.unwrap();
                            break;
                        }
                        _ => b"250 ok\r\n",
                    };
                    write.write_all(answer).await.unwrap();
                }
            });
        }
    });
    (port, rx)
}

/// `attest serve` with the configuration in `dir` (its address from `inbox.listen`).
fn inbox(dir: &std::path::Path, env: &[(&str, &str)]) -> Running {
    let (running, line) = start_first_line(
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .arg("serve")
            .current_dir(dir)
            .env_clear()
            .env("ATTEST_LINK_KEY", LINK_KEY)
            .envs(env.iter().copied()),
    );
    assert!(line.contains("approval inbox on"), "{line}");
    running
}

/// A quoted-printable text decoded (soft line breaks joined, `=XX` as the byte).
fn quoted_printable(text: &str) -> String {
    let joined = text.replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'=', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_call_is_posted_to_a_signed_webhook_and_mailed_with_working_links() {
    held_call_notified(false).await;
}

/// With `notify.by: inbox`, `attest serve` posts what the proxy stored; the proxy has no
/// notifier secrets at all.
#[tokio::test(flavor = "multi_thread")]
async fn with_notify_by_inbox_the_running_inbox_posts_the_request() {
    held_call_notified(true).await;
}

async fn held_call_notified(by_inbox: bool) {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (hook_url, mut hooks) = receiver().await;
    let (smtp_port, mut mails) = smtp_sink().await;
    let inbox_port = free_port();
    std::fs::write(dir.path().join("policy.yaml"), NOTES_POLICY).unwrap();
    std::fs::create_dir(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        format!(
            "ledger: '{ledger}'
policy: ../policy.yaml
inbox: {{listen: '127.0.0.1:{inbox_port}'}}
notify:
  by: {by}
  webhook: {{url: '{hook_url}', secret_env: HOOK_SECRET}}
  email: {{host: 127.0.0.1, port: {smtp_port}, tls: none, from: 'Attest <attest@acme.com>', to: [ann@acme.com]}}
",
            by = if by_inbox { "inbox" } else { "surfaces" },
            // The proxy's ledger, as `drive_with` passes it.
            ledger = crate::test_ledger_at(dir.path()),
        ),
    )
    .unwrap();
    add_approver(dir.path(), "ann@acme.com", &[]);
    let secrets = [
        ("HOOK_SECRET", WEBHOOK_SECRET),
        ("ATTEST_LINK_KEY", LINK_KEY),
    ];
    let (inbox_env, proxy_env): (&[_], &[_]) = if by_inbox {
        (&secrets, &[])
    } else {
        (&[], &secrets)
    };
    let _inbox = inbox(dir.path(), inbox_env);
    let plan = json!({"calls": [{"tool": "create_note", "args": {"title": "q3", "body": "b"}}]});
    let server = py("notes_server.py");
    let python = crate::python();
    let report = drive_with(
        dir.path(),
        &plan,
        &["--server", "notes", "--mode", "pending"],
        &[python.to_str().unwrap(), server.to_str().unwrap()],
        proxy_env,
    );
    assert!(
        report["calls"][0]["text"]
            .as_str()
            .unwrap()
            .contains("holding"),
        "{report}"
    );

    // The webhook: signed with the secret (HMAC-SHA256 over "timestamp.body").
    let (ts, signature, body) = tokio::time::timeout(Duration::from_secs(10), hooks.recv())
        .await
        .unwrap()
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(WEBHOOK_SECRET.as_bytes()).unwrap();
    mac.update(ts.as_bytes());
    mac.update(b".");
    mac.update(&body);
    let expected = format!("v1={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(signature, expected);
    let notice: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(notice["type"], "approval.requested");
    assert_eq!(notice["request"]["system"], "notes");
    let id = notice["request"]["id"].as_str().unwrap().to_owned();
    let approve = notice["links"][0]["approve"].as_str().unwrap().to_owned();
    assert!(
        approve.starts_with(&format!(
            "http://127.0.0.1:{inbox_port}/links/{id}/approve?"
        )),
        "{approve}"
    );

    // The e-mail: the action, and the same kind of link.
    let mail = tokio::time::timeout(Duration::from_secs(10), mails.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        mail.contains("Subject: Approval needed: notes.create"),
        "{mail}"
    );
    let body = quoted_printable(&mail);
    assert!(body.contains(&format!("/links/{id}/reject?")), "{body}");
    assert!(body.contains("approver=ann%40acme.com"), "{body}");
    assert!(!mail.contains(WEBHOOK_SECRET) && !mail.contains(LINK_KEY));

    // The webhook's link works against the running inbox: GET shows, POST decides.
    let origin = format!("http://127.0.0.1:{inbox_port}");
    let client = reqwest::Client::new();
    let page = client.get(&approve).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let done = client
        .post(&approve)
        .header("origin", &origin)
        .send()
        .await
        .unwrap();
    assert_eq!(done.status().as_u16(), 200);
    assert!(done.text().await.unwrap().contains("approved"));
    let pending = stdout(&attest(dir.path(), &["pending", "--json"]));
    assert_eq!(pending.trim(), "[]", "{pending}");
}

/// A fake of Slack's Web API on 127.0.0.1: each call is sent down the channel as (method,
/// bearer token, body), and answered `ok` with a message timestamp.
async fn fake_slack() -> (String, mpsc::UnboundedReceiver<(String, String, Value)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/{method}",
        axum::routing::post(
            move |axum::extract::Path(method): axum::extract::Path<String>,
                  headers: HeaderMap,
                  body: Bytes| {
                let tx = tx.clone();
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let _ = tx.send((method, auth, body));
                    axum::Json(json!({"ok": true, "channel": "C0APPROVALS", "ts": "1700.0001"}))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

/// The proxy posts a card with buttons; a press reaches the inbox, decides as the approver
/// with that Slack user id, and the card is replaced with the outcome.
#[tokio::test(flavor = "multi_thread")]
async fn a_slack_card_is_posted_and_updated_after_the_press() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (api, mut calls) = fake_slack().await;
    let inbox_port = free_port();
    let bot_token = "xoxb-test-token";
    let signing_secret = "slack-signing-secret";
    std::fs::write(dir.path().join("attest.yaml"), NOTES_POLICY).unwrap();
    std::fs::create_dir(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        format!(
            "inbox: {{listen: '127.0.0.1:{inbox_port}'}}\nnotify:\n  slack: {{channel: '#approvals', api_url: '{api}'}}\n"
        ),
    )
    .unwrap();
    add_approver(dir.path(), "ann@acme.com", &["--slack-user", "U1ANN"]);
    let env = [
        ("ATTEST_SLACK_TOKEN", bot_token),
        ("ATTEST_SLACK_SIGNING_SECRET", signing_secret),
    ];
    let _inbox = inbox(dir.path(), &env);
    let plan = json!({"calls": [{"tool": "create_note", "args": {"title": "q3", "body": "b"}}]});
    let server = py("notes_server.py");
    let python = crate::python();
    let ledger = dir.path().join(".attest/ledger.sqlite");
    let mut args = vec!["--ledger", ledger.to_str().unwrap()];
    args.extend(["--server", "notes", "--mode", "pending"]);
    drive_with(
        dir.path(),
        &plan,
        &args,
        &[python.to_str().unwrap(), server.to_str().unwrap()],
        &env,
    );
    let (method, auth, card) = tokio::time::timeout(Duration::from_secs(10), calls.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(method, "chat.postMessage");
    assert_eq!(auth, format!("Bearer {bot_token}"));
    assert_eq!(card["channel"], "#approvals");
    let id = card["blocks"][2]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    // Ann presses Approve on the card.
    let body = crate::approvals::form_urlencoded_body(
        &json!({
            "type": "block_actions",
            "user": {"id": "U1ANN"},
            "container": {"channel_id": "C0APPROVALS", "message_ts": "1700.0001"},
            "actions": [{"action_id": "attest_approve", "value": id}],
        })
        .to_string(),
    );
    let now = crate::approvals::unix_now().to_string();
    let pressed = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{inbox_port}/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", &now)
        .header(
            "x-slack-signature",
            crate::approvals::slack_signature(signing_secret, &now, &body),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(pressed.status().as_u16(), 200);
    let (method, auth, update) = tokio::time::timeout(Duration::from_secs(10), calls.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(method, "chat.update");
    assert_eq!(auth, format!("Bearer {bot_token}"));
    assert_eq!(update["channel"], "C0APPROVALS");
    assert_eq!(update["ts"], "1700.0001");
    let text = update["text"].as_str().unwrap();
    assert!(
        text.contains("approved by ann@acme.com via slack"),
        "{text}"
    );
    assert!(update["blocks"]
        .to_string()
        .find("attest_approve")
        .is_none());
}

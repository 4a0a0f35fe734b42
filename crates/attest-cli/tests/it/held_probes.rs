//! Issue 28: the probes that held, kept as regressions through the real binary. The
//! gateway runs in front of a fake upstream on 127.0.0.1 that records what reached it,
//! under "refuse deletes, act on everything else"; shell commands go through
//! `attest hook claude-code`. (Percent-encoded verbs and odd host spellings are rows in
//! `attest-core`'s detection corpus.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::gateway::start_gateway;
use crate::security::{hook_decision, start_recording_upstream, writes, Reached, REFUSE_DELETES};

/// Writes `request` byte for byte to the gateway at `address` (`http://host:port`), as no
/// client library would frame it, and returns the status the gateway answered.
fn raw_status(address: &str, request: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(address.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"))
}

/// `body` in HTTP/1.1 chunked framing, split into chunks of `size` bytes.
fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut framed = Vec::new();
    for chunk in body.chunks(size) {
        framed.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        framed.extend_from_slice(chunk);
        framed.extend_from_slice(b"\r\n");
    }
    framed.extend_from_slice(b"0\r\n\r\n");
    framed
}

/// A `POST path` with `headers` (each ending in CRLF) and `body` as the wire carries it.
fn post(path: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut request =
        format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\r\n")
            .into_bytes();
    request.extend_from_slice(body);
    request
}

/// A delete in a chunked body, or framed both by Content-Length and Transfer-Encoding
/// (request smuggling's shape), is read whole and refused, or rejected as unreadable;
/// it never reaches the upstream. An ordinary chunked write still does.
#[test]
fn chunked_and_cl_te_bodies_carrying_a_delete_never_reach_the_upstream() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.yaml"), REFUSE_DELETES).unwrap();
    let reached = Reached::default();
    let upstream = start_recording_upstream(Arc::clone(&reached));
    let (_gateway, address) = start_gateway(dir.path(), &upstream, &[]);

    let graphql = json!({
        "query": "mutation { deleteRepository(input: {repositoryId: \"R_1\"}) { clientMutationId } }"
    })
    .to_string();
    let json_type = "Content-Type: application/json\r\n";
    let form_type = "Content-Type: application/x-www-form-urlencoded\r\n";
    let te = "Transfer-Encoding: chunked\r\n";
    let override_form = b"title=x&_method=DELETE";
    let probes: Vec<(&str, String, Vec<u8>)> = vec![
        (
            "/graphql",
            format!("{json_type}{te}"),
            chunked(graphql.as_bytes(), 7),
        ),
        (
            "/v1/notes/n1",
            format!("{form_type}{te}"),
            chunked(override_form, 5),
        ),
        // Content-Length says the body is `{}`; the chunks carry the delete.
        (
            "/graphql",
            format!("{json_type}Content-Length: 2\r\n{te}"),
            chunked(graphql.as_bytes(), 16),
        ),
        (
            "/v1/notes/n1",
            format!("{form_type}{te}Content-Length: 3\r\n"),
            chunked(override_form, 4),
        ),
        // The reverse reading: chunked framing hidden from a reader that trusts the length.
        (
            "/graphql",
            format!(
                "{json_type}Content-Length: {}\r\nTransfer-Encoding: identity, chunked\r\n",
                graphql.len()
            ),
            chunked(graphql.as_bytes(), 32),
        ),
    ];
    for (path, headers, body) in probes {
        let before = writes(&reached).len();
        let status = raw_status(&address, &post(path, &headers, &body));
        assert!(
            matches!(status, 400 | 403 | 411 | 413 | 415),
            "{path} {headers:?}: {status}"
        );
        assert_eq!(
            writes(&reached).len(),
            before,
            "{path} {headers:?} reached the upstream"
        );
    }
    // The control: an ordinary chunked write is forwarded, its body whole.
    let note = br#"{"title": "hello"}"#;
    let status = raw_status(
        &address,
        &post("/v1/notes", &format!("{json_type}{te}"), &chunked(note, 5)),
    );
    assert_eq!(status, 200);
    let reached = writes(&reached);
    assert_eq!(reached.len(), 1, "{reached:?}");
    assert_eq!(reached[0].1, note);
    let refused = crate::exported_entries(dir.path())
        .into_iter()
        .filter(|e| e["decision"] == "refuse")
        .collect::<Vec<_>>();
    assert!(refused.iter().all(|e| e["verb"] == "delete"), "{refused:?}");
    assert!(!refused.is_empty(), "no probe was read as the delete it is");
}

/// Force-push spellings, `rm` behind a wrapper and a delete fed to a shell by a heredoc
/// are each the delete they run: denied under "refuse deletes", while the plain push and
/// a harmless heredoc go ahead.
#[test]
fn force_pushes_rm_wrappers_and_heredocs_are_deletes_to_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("attest.yaml"), REFUSE_DELETES).unwrap();
    for command in [
        "git push -f origin main",
        "git push --force-with-lease origin main",
        "git push origin +main",
        "git push origin +HEAD:main",
        "sudo rm -rf build",
        "find . -name '*.tmp' | xargs rm",
        "find . -print0 | xargs -0 -I {} rm -f {}",
        "env rm -rf build",
        "command rm -rf build",
        "find . -delete",
        "bash <<'EOF'\nrm -rf build\nEOF",
        "sh <<EOF\ngit push --force origin main\nEOF",
    ] {
        let decision = hook_decision(dir.path(), "Bash", json!({ "command": command }));
        assert_eq!(decision, "deny", "{command}");
    }
    for command in ["git push origin main", "ls -la", "cat <<EOF\nhello\nEOF"] {
        let decision = hook_decision(dir.path(), "Bash", json!({ "command": command }));
        assert_eq!(decision, "allow", "{command}");
    }
    // With no policy, a program fed to an interpreter by a heredoc is one nobody has read.
    let plain = tempfile::tempdir().unwrap();
    for command in [
        "python3 <<EOF\nimport os\nEOF",
        "bash <<'EOF'\necho hi\nEOF",
    ] {
        let decision = hook_decision(plain.path(), "Bash", json!({ "command": command }));
        assert_ne!(decision, "allow", "{command}");
    }
}

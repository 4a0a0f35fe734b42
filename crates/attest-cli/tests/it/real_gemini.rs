//! Issue 48 with the real Gemini CLI (`@google/gemini-cli` 0.61.0, `gemini -p … --yolo`):
//! a model server on 127.0.0.1 speaks the Gemini API (`streamGenerateContent`, reached
//! through `GOOGLE_GEMINI_BASE_URL` with a dummy `GEMINI_API_KEY`) and scripts the calls;
//! Gemini runs inside a network namespace with only loopback, telemetry, usage statistics
//! and auto-update off in its user settings, in a project where `attest hook install
//! gemini --project` ran.
//!
//! What the real program showed, and these tests hold it to: headless Gemini CLI refuses
//! to run in a folder that is not trusted (exit 55), and `--skip-trust` runs it there
//! *without* the project's settings, so without its hooks; a folder trusted in
//! `~/.gemini/trustedFolders.json` (`"DIR": "TRUST_FOLDER"`) or by
//! `GEMINI_CLI_TRUST_WORKSPACE=true` loads them.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::json;

use crate::agent_runs::{approve, approver, held_id, Api, FakeModel, Project, Step};

/// The version `.ci/run` pins.
const VERSION: &str = "0.61.0";

/// `gemini.js` of the pinned package, or `None` (skipped, said) without it.
fn gemini() -> Option<PathBuf> {
    crate::agent_runs::agent_script("@google/gemini-cli", "bundle/gemini.js", VERSION)
}

/// Gemini CLI's user settings in the project's home: API-key auth, no telemetry, no usage
/// statistics, no update check; the project trusted when `trusted`.
fn configure(project: &Project, trusted: bool) {
    let home = project.home().join(".gemini");
    std::fs::create_dir_all(&home).unwrap();
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "telemetry": {"enabled": false},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
    });
    std::fs::write(home.join("settings.json"), settings.to_string()).unwrap();
    if trusted {
        trust(project);
    }
}

/// What `attest hook install gemini` tells a person to do: the project folder as
/// `TRUST_FOLDER` in `~/.gemini/trustedFolders.json`.
fn trust(project: &Project) {
    let dir = project.dir().canonicalize().unwrap();
    let trusted = json!({ dir.display().to_string(): "TRUST_FOLDER" });
    std::fs::write(
        project.home().join(".gemini/trustedFolders.json"),
        trusted.to_string(),
    )
    .unwrap();
}

/// `gemini -p PROMPT --yolo` with `flags`, in the project, against `model`.
fn run(project: &Project, gemini: &Path, model: &FakeModel, flags: &[&str]) -> Output {
    run_with(project, gemini, model, flags, &[])
}

/// [`run`] with `extra` in the environment.
fn run_with(
    project: &Project,
    gemini: &Path,
    model: &FakeModel,
    flags: &[&str],
    extra: &[(&'static str, &str)],
) -> Output {
    let mut args = vec!["-m", "gemini-2.5-flash", "--yolo"];
    args.extend_from_slice(flags);
    args.extend(["-p", "do what the script says"]);
    let mut env = vec![
        ("GEMINI_API_KEY", "not-a-key".to_owned()),
        ("GOOGLE_GEMINI_BASE_URL", model.base()),
    ];
    env.extend(extra.iter().map(|(key, value)| (*key, (*value).to_owned())));
    project.run_agent(model, gemini, &args, &env)
}

fn force_push() -> Vec<Step> {
    vec![
        Step::Call(
            "run_shell_command",
            json!({"command": "git push --force origin main"}),
        ),
        Step::Text("pushed"),
    ]
}

fn show(out: &Output) -> String {
    format!("{}{}", crate::stdout(out), crate::stderr(out))
}

#[test]
fn gemini_force_push_runs_without_the_hook_and_is_blocked_and_recorded_with_it_in_every_session() {
    let Some(gemini) = gemini() else { return };
    let model = FakeModel::scripted(Api::Gemini, force_push());

    // Control: no hook, so Gemini runs the force push and the remote is rewritten.
    let project = Project::new();
    configure(&project, true);
    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "rewritten", "{}", show(&out));

    // The same script with the hook, twice (two sessions): blocked both times.
    let project = Project::new();
    configure(&project, true);
    project.install("gemini");
    let mut sessions = Vec::new();
    for session in 0..2 {
        let out = run(&project, &gemini, &model, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert_eq!(
            project.remote_main(),
            "published",
            "session {session}: {}",
            show(&out)
        );
        let told = model.tool_results().join("\n");
        assert!(
            told.contains("Attest"),
            "the model reads Attest's reason: {told}"
        );
        let rows = project.rows_about("git");
        assert_eq!(
            rows.len(),
            session + 1,
            "one attempt row per session: {rows:#?}"
        );
        let row = &rows[session];
        assert_ne!(row["decision"], "act", "{row}");
        let outcome = row["outcome"].as_str().unwrap_or_default();
        assert!(!outcome.is_empty() && !outcome.contains("ran"), "{row}");
        let runs: Vec<_> = project
            .entries()
            .iter()
            .filter(|entry| entry["system"] == "git")
            .map(|entry| entry["run_id"].clone())
            .collect();
        sessions.push(runs[session].clone());
    }
    assert!(
        sessions[0].is_string() && sessions[0] != sessions[1],
        "{sessions:?}"
    );
}

#[test]
fn a_read_gemini_makes_runs_and_is_recorded() {
    let Some(gemini) = gemini() else { return };
    let project = Project::new();
    let notes = project.dir().join("notes.txt");
    let model = FakeModel::scripted(
        Api::Gemini,
        vec![
            Step::Call(
                "read_file",
                json!({"file_path": notes.display().to_string()}),
            ),
            Step::Text("read"),
        ],
    );
    configure(&project, true);
    project.install("gemini");
    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let told = model.tool_results().join("\n");
    assert!(told.contains("first notes"), "the read ran: {told}");
    let rows = project.rows();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["decision"], "act", "{}", rows[0]);
    assert_eq!(rows[0]["outcome"], "ran", "{}", rows[0]);
}

#[test]
fn an_approval_for_gemini_is_held_then_runs_exactly_once() {
    let Some(gemini) = gemini() else { return };
    let project = Project::new();
    let model = FakeModel::scripted(
        Api::Gemini,
        vec![
            Step::Call(
                "run_shell_command",
                json!({"command": "curl -s -X POST {base}/deploy"}),
            ),
            Step::Text("asked"),
        ],
    );
    configure(&project, true);
    project.install("gemini");
    std::fs::write(
        project.dir().join(".attest/config.yaml"),
        "hook: {approvals: attest, wait: 0s}\n",
    )
    .unwrap();
    let token = approver(&project, "alice@example.com");

    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(model.deploys(), 0, "{}", show(&out));
    let told = model.tool_results().join("\n");
    let id = held_id(&told).unwrap_or_else(|| panic!("not held: {told}"));
    approve(&project, &token, &id);

    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(model.deploys(), 1, "{}", show(&out));

    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(model.deploys(), 1, "{}", show(&out));
    let again = held_id(&model.tool_results().join("\n"));
    assert!(
        again.is_some() && again.as_deref() != Some(id.as_str()),
        "{again:?}"
    );
    let rows = project.rows();
    let ran: Vec<_> = rows
        .iter()
        .filter(|row| row["outcome"] == "approved by alice@example.com, ran")
        .collect();
    assert_eq!(ran.len(), 1, "it ran once, approved by alice: {rows:#?}");
}

#[test]
fn gemini_runs_no_project_hook_in_an_untrusted_folder_and_hook_install_says_how_to_trust_it() {
    let Some(gemini) = gemini() else { return };
    let project = Project::new();
    let model = FakeModel::scripted(Api::Gemini, force_push());
    configure(&project, false);
    let said = project.install("gemini");
    let dir = project.dir().canonicalize().unwrap().display().to_string();
    for needed in [
        "not loaded until trusted",
        "trustedFolders.json",
        "TRUST_FOLDER",
        "GEMINI_CLI_TRUST_WORKSPACE=true",
        "--skip-trust",
        dir.as_str(),
    ] {
        assert!(said.contains(needed), "{needed:?} in: {said}");
    }

    // Not trusted: headless Gemini CLI refuses to start; nothing runs.
    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(55), "{}", show(&out));
    assert!(
        show(&out).contains("not running in a trusted directory"),
        "{}",
        show(&out)
    );
    assert_eq!(project.remote_main(), "published");

    // `--skip-trust` runs it there without the project's settings: the force push runs
    // and no hook saw it.
    let out = run(&project, &gemini, &model, &["--skip-trust"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "rewritten", "{}", show(&out));
    assert_eq!(project.rows(), Vec::<serde_json::Value>::new());

    // Trusted for one run by the variable the message names: governed, recorded.
    project.reset_remote();
    let out = run_with(
        &project,
        &gemini,
        &model,
        &[],
        &[("GEMINI_CLI_TRUST_WORKSPACE", "true")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "published", "{}", show(&out));
    assert_eq!(project.rows_about("git").len(), 1, "{:#?}", project.rows());

    // Trusted in trustedFolders.json as the message says: governed, recorded.
    trust(&project);
    let out = run(&project, &gemini, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "published", "{}", show(&out));
    assert_eq!(project.rows_about("git").len(), 2, "{:#?}", project.rows());
}

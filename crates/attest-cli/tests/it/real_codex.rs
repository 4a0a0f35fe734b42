//! Issue 48 with the real Codex CLI (`@openai/codex` 0.171.0, `codex exec`): a model
//! server on 127.0.0.1 speaks the Responses API and scripts the calls; Codex runs inside a
//! network namespace with only loopback, update checks and analytics off in its
//! `config.toml`, in a project where `attest hook install codex --project` ran.
//!
//! What the real program showed, and these tests hold it to: Codex loads a project's
//! `.codex/hooks.json` only when the project is trusted (`codex exec --trust`, or
//! `[projects."DIR"] trust_level = "trusted"` in `$CODEX_HOME/config.toml`) **and** each
//! hook is trusted by its hash (`/hooks` in an interactive `codex`); `codex exec` never
//! asks and runs an untrusted hook not at all, without a word, unless
//! `--dangerously-bypass-hook-trust` is given for that run.

use std::path::PathBuf;
use std::process::Output;

use serde_json::json;

use crate::agent_runs::{approve, approver, held_id, Api, FakeModel, Project, Step};

/// The version `.ci/run` pins.
const VERSION: &str = "0.171.0";

/// `codex.js` of the pinned package, or `None` (skipped, said) without it.
fn codex() -> Option<PathBuf> {
    crate::agent_runs::agent_script("@openai/codex", "bin/codex.js", VERSION)
}

/// Codex's own settings in the project's home: the fake model as its provider (a dummy
/// key from the environment), no update check, no analytics.
fn configure(project: &Project, model: &FakeModel, trusted_project: bool) {
    let home = project.home().join(".codex");
    std::fs::create_dir_all(&home).unwrap();
    let mut config = format!(
        "model = \"scripted\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\n\
         env_key = \"SCRIPTED_MODEL_KEY\"\nwire_api = \"responses\"\n\n[analytics]\nenabled = false\n",
        model.base()
    );
    if trusted_project {
        config.push_str(&format!(
            "\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            project.dir().canonicalize().unwrap().display()
        ));
    }
    std::fs::write(home.join("config.toml"), config).unwrap();
}

/// `codex exec PROMPT` with `flags`, in the project, against `model`.
fn exec(project: &Project, codex: &std::path::Path, model: &FakeModel, flags: &[&str]) -> Output {
    let mut args = vec!["exec", "--skip-git-repo-check", "-s", "danger-full-access"];
    args.extend_from_slice(flags);
    args.push("do what the script says");
    let env = [
        (
            "CODEX_HOME",
            project.home().join(".codex").display().to_string(),
        ),
        ("SCRIPTED_MODEL_KEY", "not-a-key".to_owned()),
    ];
    project.run_agent(model, codex, &args, &env)
}

/// Governed: the project trusted in Codex's config and the hook trusted for the run.
const GOVERNED: &[&str] = &["--dangerously-bypass-hook-trust"];

fn force_push() -> Vec<Step> {
    vec![
        Step::Call(
            "exec_command",
            json!({"cmd": "git push --force origin main"}),
        ),
        Step::Text("pushed"),
    ]
}

fn show(out: &Output) -> String {
    format!("{}{}", crate::stdout(out), crate::stderr(out))
}

#[test]
fn codex_force_push_runs_without_the_hook_and_is_blocked_and_recorded_with_it_in_every_session() {
    let Some(codex) = codex() else { return };
    let project = Project::new();
    let model = FakeModel::scripted(Api::Responses, force_push());
    configure(&project, &model, true);

    // Control: no hook, so Codex runs the force push and the remote is rewritten.
    let out = exec(&project, &codex, &model, GOVERNED);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "rewritten", "{}", show(&out));

    // The same script with the hook, twice (two sessions): blocked both times.
    let project = Project::new();
    configure(&project, &model, true);
    project.install("codex");
    let mut sessions = Vec::new();
    for session in 0..2 {
        let out = exec(&project, &codex, &model, GOVERNED);
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
        assert_eq!(row["agent"], "codex", "{row}");
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
fn a_read_codex_makes_runs_and_is_recorded() {
    let Some(codex) = codex() else { return };
    let project = Project::new();
    let model = FakeModel::scripted(
        Api::Responses,
        vec![
            Step::Call("exec_command", json!({"cmd": "cat notes.txt"})),
            Step::Text("read"),
        ],
    );
    configure(&project, &model, true);
    project.install("codex");
    let out = exec(&project, &codex, &model, GOVERNED);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let told = model.tool_results().join("\n");
    assert!(told.contains("first notes"), "the read ran: {told}");
    let rows = project.rows();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["decision"], "act", "{}", rows[0]);
    assert_eq!(rows[0]["outcome"], "ran", "{}", rows[0]);
}

#[test]
fn an_approval_for_codex_is_held_then_runs_exactly_once() {
    let Some(codex) = codex() else { return };
    let project = Project::new();
    let model = FakeModel::scripted(
        Api::Responses,
        vec![
            Step::Call(
                "exec_command",
                json!({"cmd": "curl -s -X POST {base}/deploy"}),
            ),
            Step::Text("asked"),
        ],
    );
    configure(&project, &model, true);
    project.install("codex");
    std::fs::write(
        project.dir().join(".attest/config.yaml"),
        "hook: {approvals: attest, wait: 0s}\n",
    )
    .unwrap();
    let token = approver(&project, "alice@example.com");

    // Session 1: the deploy is held for an approver; it does not run.
    let out = exec(&project, &codex, &model, GOVERNED);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(model.deploys(), 0, "{}", show(&out));
    let told = model.tool_results().join("\n");
    let id = held_id(&told).unwrap_or_else(|| panic!("not held: {told}"));
    approve(&project, &token, &id);

    // Session 2 makes the same call: it runs, once.
    let out = exec(&project, &codex, &model, GOVERNED);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(model.deploys(), 1, "{}", show(&out));

    // Session 3, the same call again: a new request, not the used approval.
    let out = exec(&project, &codex, &model, GOVERNED);
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
fn codex_runs_no_untrusted_hook_and_hook_install_says_how_to_trust_it() {
    let Some(codex) = codex() else { return };
    let project = Project::new();
    let model = FakeModel::scripted(Api::Responses, force_push());
    configure(&project, &model, false);
    let said = project.install("codex");
    let dir = project.dir().canonicalize().unwrap().display().to_string();
    for needed in [
        "not loaded until trusted",
        "codex exec --trust",
        "/hooks",
        "--dangerously-bypass-hook-trust",
        dir.as_str(),
    ] {
        assert!(said.contains(needed), "{needed:?} in: {said}");
    }

    // Not trusted at all: Codex disables the project's configuration; the force push runs
    // and no hook saw it (no row).
    let out = exec(&project, &codex, &model, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "rewritten", "{}", show(&out));
    assert!(
        crate::stderr(&out).contains("Untrusted project-local configuration is disabled"),
        "{}",
        show(&out)
    );
    assert_eq!(project.rows(), Vec::<serde_json::Value>::new());

    // The project trusted as the message says (`codex exec --trust`), the hook not: Codex
    // still runs the force push without it, and says nothing.
    project.reset_remote();
    let out = exec(&project, &codex, &model, &["--trust"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let config =
        std::fs::read_to_string(project.home().join(".codex/config.toml")).unwrap_or_default();
    assert!(config.contains("trust_level = \"trusted\""), "{config}");
    assert_eq!(project.remote_main(), "rewritten", "{}", show(&out));
    assert_eq!(project.rows(), Vec::<serde_json::Value>::new());

    // And the hook trusted for the run as the message says: governed, recorded.
    project.reset_remote();
    let out = exec(&project, &codex, &model, GOVERNED);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(project.remote_main(), "published", "{}", show(&out));
    assert_eq!(project.rows_about("git").len(), 1, "{:#?}", project.rows());
}

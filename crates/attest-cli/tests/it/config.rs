//! The configuration file: found, checked, overridden by the environment and flags, and
//! read by the servers (a user's detection registry reaches the MCP proxy).

use serde_json::{json, Value};

use crate::approvals::attest_env;
use crate::mcp::{drive, py, python_with};
use crate::{attest, stderr, stdout};

fn check_json(dir: &std::path::Path, env: &[(&str, &str)], extra: &[&str]) -> (i32, Value) {
    let mut args = extra.to_vec();
    args.extend(["config", "check", "--json"]);
    let output = attest_env(dir, &args, env);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&output), stderr(&output)));
    (output.status.code().unwrap(), report)
}

fn setting<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("no setting {key} in {report}"))
}

#[test]
fn config_check_names_each_setting_source_and_never_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        "ledger: audit.sqlite
durability: normal
agent: claims-bot
approvals: {use_by: 10m}
hook: {approvals: attest, wait: 45s}
systems:
  github: {base_url: 'http://127.0.0.1:9/api/v3', credential: GHE_TOKEN}
notify:
  webhook: {url: 'https://hooks.acme.com/T000/secret-path', secret_env: HOOK_SECRET}
",
    )
    .unwrap();
    let secret = "hook-secret-value-123";
    let env = [("HOOK_SECRET", secret), ("ATTEST_DURABILITY", "off")];
    let (code, report) = check_json(dir.path(), &env, &["--policy", "none.yaml"]);
    // The flag names a policy file that does not exist: a problem, reported.
    assert_eq!(code, 1, "{report}");
    assert!(report["problems"][0]
        .as_str()
        .unwrap()
        .contains("none.yaml"));
    assert_eq!(setting(&report, "policy")["source"], "flag");
    let (code, report) = check_json(dir.path(), &env, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["ok"], true);
    // The file's ledger is relative to the file.
    let ledger = setting(&report, "ledger");
    assert_eq!(ledger["source"], "file");
    assert!(ledger["value"]
        .as_str()
        .unwrap()
        .ends_with(".attest/audit.sqlite"));
    // The environment beats the file; the default is named as such.
    assert_eq!(setting(&report, "durability")["value"], "off");
    assert_eq!(setting(&report, "durability")["source"], "env");
    assert_eq!(setting(&report, "agent")["value"], "claims-bot");
    assert_eq!(setting(&report, "approvals.use_by_secs")["value"], 600);
    assert_eq!(setting(&report, "approvals.wait_secs")["source"], "default");
    assert_eq!(setting(&report, "hook.approvals")["value"], "attest");
    assert_eq!(setting(&report, "hook.wait_secs")["value"], 45);
    assert_eq!(
        setting(&report, "notify.webhook.secret")["value"],
        "$HOOK_SECRET (set)"
    );
    assert_eq!(
        setting(&report, "systems.github.credential")["value"],
        "$GHE_TOKEN (not set)"
    );
    let text = report.to_string();
    assert!(
        !text.contains(secret) && !text.contains("secret-path"),
        "{text}"
    );
    // A flag beats both.
    let (_, report) = check_json(dir.path(), &env, &["--ledger", "other.sqlite"]);
    assert_eq!(setting(&report, "ledger")["value"], "other.sqlite");
    assert_eq!(setting(&report, "ledger")["source"], "flag");
    // Without the secret the webhook cannot be built: a problem naming the variable.
    let (code, report) = check_json(dir.path(), &[], &[]);
    assert_eq!(code, 1);
    assert!(
        report["problems"].to_string().contains("HOOK_SECRET"),
        "{report}"
    );
}

#[test]
fn a_bad_configuration_file_is_an_error_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("attest-config.yaml"),
        "ledger: l.sqlite\nnotify:\n  webhook:\n    urll: https://x\n",
    )
    .unwrap();
    let env = [("ATTEST_CONFIG", "attest-config.yaml")];
    let output = attest_env(dir.path(), &["ledger"], &env);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("attest-config.yaml:4:5: notify.webhook: unknown field `urll`"),
        "{err}"
    );
    let output = attest_env(dir.path(), &["config", "check"], &env);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("unknown field `urll`"));
    // A file named on the command line that is not there is an error, not a default.
    let output = attest(dir.path(), &["--config", "missing.yaml", "ledger"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("missing.yaml"));
}

#[test]
fn the_configured_ledger_agent_and_origin_are_used() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "ledger: books/audit.sqlite\norigin: acme-audit\n",
    )
    .unwrap();
    let output = attest(dir.path(), &["--config", "c.yaml", "demo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(dir.path().join("books/audit.sqlite").exists());
    let output = attest(dir.path(), &["--config", "c.yaml", "keygen"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("acme-audit+"),
        "{}",
        stdout(&output)
    );
    assert!(dir.path().join("books/signing.key").exists());
}

/// A user's registry file names an in-house MCP server's tools; through the proxy, with the
/// configuration naming that file, the call is detected as that system (not `unknown`).
#[test]
fn a_registry_file_from_the_configuration_reaches_the_proxy() {
    if !python_with("mcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("inhouse.yaml"),
        "systems:\n  notebook: {aliases: [notes_app]}\noverrides:\n  - {tool: create_note, system: notebook, verb: create}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("policy.yaml"),
        "version: 1\npolicies:\n  - name: notebook\n    match: {system: notebook}\n    decision: act\n    reason: the team notebook is ours\n",
    )
    .unwrap();
    let plan = json!({"calls": [{"tool": "create_note", "args": {"title": "t", "body": "b"}}]});
    let server = py("notes_server.py");
    let python = crate::python();
    let upstream = [python.to_str().unwrap(), server.to_str().unwrap()];
    // Without the configuration: not recognised, and policy asks (held in pending mode).
    let report = drive(dir.path(), &plan, &["--mode", "pending"], &upstream);
    assert!(
        report["calls"][0]["text"]
            .as_str()
            .unwrap()
            .contains("holding"),
        "{report}"
    );
    std::fs::write(
        dir.path().join("config.yaml"),
        "registry: [inhouse.yaml]\npolicy: policy.yaml\n",
    )
    .unwrap();
    let mut args = vec!["--config"];
    let config = dir.path().join("config.yaml");
    args.push(config.to_str().unwrap());
    args.extend(["--mode", "pending"]);
    let report = drive(dir.path(), &plan, &args, &upstream);
    let call = &report["calls"][0];
    assert_eq!(call["is_error"], false, "{report}");
    let rows = crate::outcome_entries(dir.path());
    let last = rows.last().unwrap();
    assert_eq!(last["system"], "notebook", "{last}");
    assert_eq!(last["verb"], "create");
    assert_eq!(last["decision"], "act");
}

#[test]
fn detect_and_explain_use_the_configured_registry_and_hosts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("inhouse.yaml"),
        "overrides:\n  - {tool: push_ledger, system: books, verb: update}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        "registry: [inhouse.yaml]\nsystems:\n  github: {base_url: 'http://127.0.0.1:4999/api/v3'}\n",
    )
    .unwrap();
    let detect = |args: &[&str]| -> Value {
        let mut all = vec!["--config", "c.yaml", "detect", "--json"];
        all.extend_from_slice(args);
        let output = attest(dir.path(), &all);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let tool = detect(&["--tool", "push_ledger"]);
    assert_eq!(tool["system"], "books", "{tool}");
    let http = detect(&[
        "--method",
        "POST",
        "--url",
        "http://127.0.0.1:4999/api/v3/repos/o/r/issues",
    ]);
    assert_eq!(http["system"], "github", "{http}");
    let output = attest(
        dir.path(),
        &[
            "--config",
            "c.yaml",
            "policy",
            "explain",
            "--tool",
            "push_ledger",
            "--json",
        ],
    );
    let explained: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(explained["system"], "books", "{explained}");
}

#[test]
fn recipes_list_shows_the_configured_recipe_directories_first() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ours")).unwrap();
    std::fs::write(
        dir.path().join("ours/books.yaml"),
        "recipes:\n  - name: books.entry\n    system: books\n    verbs: [update]\n    read: {url: \"{base}/entries/{params.id}\"}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("c.yaml"), "recipes: [ours]\n").unwrap();
    let output = attest(
        dir.path(),
        &["--config", "c.yaml", "recipes", "list", "--json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let rows: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(rows[0]["name"], "books.entry", "{rows}");
}

#[test]
fn a_tilde_and_variables_in_configured_paths_are_expanded() {
    let root = tempfile::tempdir().unwrap();
    let (home, work) = (root.path().join("home"), root.path().join("work"));
    std::fs::create_dir_all(work.join(".attest")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let home_var = home.display().to_string();
    let env = [("HOME", home_var.as_str()), ("BOOKS", "books")];
    std::fs::write(
        work.join(".attest/config.yaml"),
        "ledger: ~/books/agents.sqlite\npolicy: ${HOME}/$BOOKS/policy.yaml\n",
    )
    .unwrap();
    let (_, report) = check_json(&work, &env, &[]);
    let expected = home.join("books/agents.sqlite").display().to_string();
    assert_eq!(setting(&report, "ledger")["value"], expected, "{report}");
    let policy = home.join("books/policy.yaml").display().to_string();
    assert_eq!(setting(&report, "policy")["value"], policy, "{report}");
    std::fs::write(
        work.join(".attest/config.yaml"),
        "ledger: ~/books/agents.sqlite\n",
    )
    .unwrap();
    let output = attest_env(&work, &["demo"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(home.join("books/agents.sqlite").exists());
    assert!(
        !work.join(".attest/~").exists(),
        "a folder named ~ appeared"
    );
    assert!(!work.join(".attest/ledger.sqlite").exists());
}

#[test]
fn an_unset_variable_in_a_configured_path_is_an_error_naming_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".attest")).unwrap();
    std::fs::write(
        dir.path().join(".attest/config.yaml"),
        "ledger: audit.sqlite\nkey: ${NOPE}/checkpoint.key\n",
    )
    .unwrap();
    // `config check` reports it as a problem (exit 1); a door that starts on it refuses.
    let output = attest_env(dir.path(), &["config", "check"], &[("HOME", "/nowhere")]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(
        said.contains("problem: .attest/config.yaml: key: $NOPE is not set"),
        "{said}"
    );
    let output = attest_env(dir.path(), &["demo"], &[("HOME", "/nowhere")]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(err.contains(".attest/config.yaml"), "{err}");
    assert!(err.contains("key: $NOPE is not set"), "{err}");
    assert!(!dir.path().join(".attest/audit.sqlite").exists());
}

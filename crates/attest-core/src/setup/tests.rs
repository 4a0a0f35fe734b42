use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> Arc<dyn Env> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(map)
}

fn config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "ledger: file.sqlite\nagent: file-agent\nactor: file-actor\ndurability: normal\napprovals: {wait: 7}\n");
    let given = Overrides {
        config: Some(path.clone()),
        agent: Some("flag-agent".to_owned()),
        ..Overrides::default()
    };
    let settings = Settings::resolve(
        &given,
        env(&[("ATTEST_AGENT", "env-agent"), ("ATTEST_ACTOR", "env-actor")]),
    )
    .unwrap();
    assert_eq!(settings.agent.as_ref().unwrap().value, "flag-agent");
    assert_eq!(settings.agent.as_ref().unwrap().source, Source::Flag);
    assert_eq!(settings.actor.as_ref().unwrap().value, "env-actor");
    assert_eq!(settings.actor.as_ref().unwrap().source, Source::Env);
    assert_eq!(settings.ledger_path.value, dir.path().join("file.sqlite"));
    assert_eq!(settings.ledger_path.source, Source::File);
    assert_eq!(settings.durability.value, Durability::Normal);
    assert_eq!(settings.wait.value, Duration::from_secs(7));
    assert_eq!(settings.use_by.source, Source::Default);
    assert_eq!(settings.file_path.as_ref().unwrap().source, Source::Flag);

    // The environment names the file when no flag does.
    let from_env = Settings::resolve(
        &Overrides::default(),
        env(&[("ATTEST_CONFIG", path.to_str().unwrap())]),
    )
    .unwrap();
    assert_eq!(from_env.file_path.unwrap().source, Source::Env);
    assert_eq!(from_env.agent.unwrap().value, "file-agent");

    // A door's own default agent is the last resort.
    let none = Settings::resolve(
        &Overrides {
            ledger: Some(dir.path().join("x.sqlite").display().to_string()),
            default_agent: Some("claude-code".to_owned()),
            ..Overrides::default()
        },
        env(&[]),
    )
    .unwrap();
    assert_eq!(none.agent.unwrap().source, Source::Default);
}

#[test]
fn a_bad_value_names_the_setting_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "agent: a\n");
    let err = Settings::resolve(
        &Overrides {
            config: Some(path.clone()),
            ..Overrides::default()
        },
        env(&[("ATTEST_DURABILITY", "fast")]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("durability (from env)"), "{err}");
    assert!(err.contains("\"fast\""), "{err}");

    let path = config(
        dir.path(),
        "agent: a\nsystems:\n  acmecrm: {base_url: [x]}\n",
    );
    let err = Settings::resolve(
        &Overrides {
            config: Some(path.clone()),
            ..Overrides::default()
        },
        env(&[]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with(&format!("{}:3:", path.display())), "{err}");
    assert!(err.contains("base_url"), "{err}");
}

#[test]
fn a_named_file_that_does_not_exist_is_an_error() {
    let err = Settings::resolve(
        &Overrides {
            config: Some(PathBuf::from("/nonexistent/attest.yaml")),
            ..Overrides::default()
        },
        env(&[]),
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
}

#[test]
fn build_wires_the_registry_the_read_back_and_the_operations() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("in-house.yaml"),
        "overrides:\n  - {tool: frobnicate_widget, system: acmecrm, verb: list}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("crm.yaml"),
        "openapi: 3.0.0\ninfo: {title: crm, version: '1'}\npaths:\n  /v1/deals/{id}/close:\n    post: {operationId: closeDeal}\n",
    )
    .unwrap();
    let path = config(
        dir.path(),
        "ledger: l.sqlite\nregistry: [in-house.yaml]\nopenapi: [crm.yaml]\nsystems:\n  acmecrm: {base_url: 'http://127.0.0.1:9/api'}\n",
    );
    let settings = Settings::resolve(
        &Overrides {
            config: Some(path),
            ..Overrides::default()
        },
        env(&[]),
    )
    .unwrap();
    let attest = settings.build(DoorParts::default()).unwrap();
    let found = attest.registry().detect(&crate::DetectInput::Function {
        name: "frobnicate_widget",
    });
    assert_eq!(found.system, "acmecrm");
    assert_eq!(found.verb, attest_policy::Verb::List);
    assert_eq!(
        attest.operations().find("POST", "/v1/deals/d1/close"),
        Some("closeDeal")
    );
    assert!(attest.readback().is_some());
    assert!(attest.ledger().path().ends_with("l.sqlite"));
}

#[test]
fn shown_settings_never_carry_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(
        dir.path(),
        "ledger: 'postgres://app:hunter2@db.internal/attest?password=hunter2'\nsystems:\n  acmecrm: {base_url: 'http://u:hunter2@127.0.0.1:9/api?key=hunter2', credential: ACME_TOKEN}\nnotify:\n  webhook: {url: 'https://hooks.example/T0/hunter2', secret_env: HOOK_SECRET}\n",
    );
    let settings = Settings::resolve(
        &Overrides {
            config: Some(path),
            ..Overrides::default()
        },
        env(&[("ACME_TOKEN", "hunter2"), ("HOOK_SECRET", "hunter2")]),
    )
    .unwrap();
    let shown = serde_json::to_string(
        &settings
            .shown()
            .iter()
            .map(|s| (s.key.clone(), s.value.clone()))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("$ACME_TOKEN (set)"), "{shown}");
    assert!(
        shown.contains("postgres://app@db.internal/attest"),
        "{shown}"
    );
}

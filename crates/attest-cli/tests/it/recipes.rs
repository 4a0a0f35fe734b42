//! `attest recipes list|check`: exit codes and file:line problems.

use crate::{attest, stdout};

#[test]
fn list_shows_the_builtin_recipes() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["recipes", "list", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows.len() >= 25);
    assert!(rows.iter().any(|r| r["name"] == "stripe.refund"
        && r["credential_env"] == "STRIPE_API_KEY"
        && r["base_url_env"] == "ATTEST_BASE_URL_STRIPE"));
}

#[test]
fn check_passes_the_shipped_recipes() {
    let dir = tempfile::tempdir().unwrap();
    let recipes = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/recipes");
    let output = attest(dir.path(), &["recipes", "check", recipes]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).starts_with("ok: "));
}

#[test]
fn check_names_the_file_and_line_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let bad =
        "recipes:\n  - name: x\n    system: y\n    verbs: [sned]\n    read: {url: \"{base}/a\"}\n";
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    let output = attest(dir.path(), &["recipes", "check", "."]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("bad.yaml:4:"), "{text}");
    assert!(text.contains("sned"), "{text}");
}

#[test]
fn check_of_a_missing_directory_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = attest(dir.path(), &["recipes", "check", "no-such-dir"]);
    assert_eq!(output.status.code(), Some(2));
}

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

#[test]
fn check_lists_a_mistake_in_every_recipe_and_an_empty_file_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = concat!(
        "recipes:\n",                                        // 1
        "  - name: a\n",                                     // 2
        "    system: y\n",                                   // 3
        "    verbs: [sned]\n",                               // 4
        "    read: {url: \"{base}/a\"}\n",                   // 5
        "  - name: b\n",                                     // 6
        "    system: y\n",                                   // 7
        "    verbs: [create]\n",                             // 8
        "    colour: red\n",                                 // 9
        "    read: {url: \"{base}/b\"}\n",                   // 10
        "  - name: ok\n",                                    // 11
        "    system: y\n",                                   // 12
        "    verbs: [update]\n",                             // 13
        "    read: {url: \"{base}/c\"}\n",                   // 14
        "  - name: c\n",                                     // 15
        "    system: y\n",                                   // 16
        "    verbs: [pay]\n",                                // 17
        "    read: {url: \"{base}/d\", method: TELEPORT}\n", // 18
    );
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    std::fs::write(dir.path().join("empty.yaml"), "").unwrap();
    let output = attest(dir.path(), &["recipes", "check", "."]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("./bad.yaml:4:") && lines[0].contains("sned"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("./bad.yaml:9:") && lines[1].contains("colour"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("./bad.yaml:18:") && lines[2].contains("TELEPORT"),
        "{text}"
    );
    assert!(
        lines[3].starts_with("./empty.yaml") && !lines[3].contains(":0:0"),
        "{text}"
    );
    assert_eq!(lines[4], "4 problem(s) in 2 file(s)", "{text}");
}

#[test]
fn check_lists_every_mistake_inside_each_recipe() {
    let dir = tempfile::tempdir().unwrap();
    let bad = concat!(
        "recipes:\n",                                           // 1
        "  - name: a\n",                                        // 2
        "    system: y\n",                                      // 3
        "    verbs: [sned]\n",                                  // 4
        "    base_url: ftp://example.com\n",                    // 5
        "    read:\n",                                          // 6
        "      method: TELEPORT\n",                             // 7
        "      url: \"{base}/a/{id}\"\n",                       // 8
        "      id: [reslt:/id]\n",                              // 9
        "  - name: b\n",                                        // 10
        "    system: y\n",                                      // 11
        "    verbs: []\n",                                      // 12
        "    read:\n",                                          // 13
        "      url: \"{base}/b/{id}\"\n",                       // 14
        "      graphql: {query: \"{ b }\"}\n",                  // 15
        "    compare:\n",                                       // 16
        "      fields: [{name: t, want: params:/t, got: t}]\n", // 17
    );
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    let output = attest(dir.path(), &["recipes", "check", "bad.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    let expected = [
        ("bad.yaml:4:", "sned"),
        ("bad.yaml:5:", "`base_url` must start with"),
        ("bad.yaml:7:", "TELEPORT"),
        ("bad.yaml:9:", "reslt"),
        (
            "bad.yaml:10:",
            "recipe b: the read uses {id} but `read.id` says nowhere",
        ),
        (
            "bad.yaml:10:",
            "recipe b: a `graphql` read needs `method: post`",
        ),
        ("bad.yaml:12:", "`verbs` is empty"),
        ("bad.yaml:17:", "must start with"),
    ];
    assert_eq!(lines.len(), expected.len() + 1, "{text}");
    for (line, (place, says)) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(place) && line.contains(says),
            "{place} {says}: {text}"
        );
        // file:line:column: message
        let column = line[place.len()..].split(':').next().unwrap();
        assert!(column.parse::<usize>().unwrap() > 0, "{line}");
    }
    assert_eq!(lines[expected.len()], "8 problem(s) in 1 file(s)", "{text}");
}

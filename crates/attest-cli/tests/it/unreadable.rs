//! Requests a parser gives up on, and method overrides that list several methods, through
//! the gateway: each is judged by its riskiest reading, and no rule is escaped by it.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;

use crate::gateway::{curl_missing, start_gateway_on, start_vendor, Gateway, Shared, POLICY};

/// A vendor and a gateway in front of it, in a directory of their own, on its test
/// ledger under a policy.
pub(crate) struct Under {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) vendor: Shared,
    /// The vendor's URL.
    pub(crate) upstream: String,
    pub(crate) gateway: Gateway,
    /// The gateway's URL.
    pub(crate) address: String,
}

/// Starts [`Under`] `policy`; `None` without curl (the tests are skipped).
pub(crate) fn gateway_under(policy: &str) -> Option<Under> {
    if curl_missing() {
        return None;
    }
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    std::fs::write(dir.join("policy.yaml"), policy).unwrap();
    let vendor = Shared::default();
    let upstream = start_vendor(Arc::clone(&vendor));
    let (gateway, address) = start_gateway_on(dir, &crate::test_ledger(dir), &upstream, &[], &[]);
    Some(Under {
        dir: temp,
        vendor,
        upstream,
        gateway,
        address,
    })
}

/// A POST of `body` (bytes as given, as JSON) to the gateway's `/v1/notes` with
/// `headers` only: (status, response headers by lower-case name, body).
pub(crate) fn post_raw(
    gateway: &str,
    headers: &[&str],
    body: &str,
) -> (u16, HashMap<String, String>, String) {
    let mut command = Command::new("curl");
    command.args([
        "-s",
        "-i",
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
    ]);
    for header in headers {
        command.args(["-H", header]);
    }
    let output = command
        .args(["--data-binary", body])
        .arg(format!("{gateway}/v1/notes"))
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let named = head.lines().skip(1).filter_map(|line| {
        let (name, value) = line.split_once(':')?;
        Some((name.to_ascii_lowercase(), value.trim().to_owned()))
    });
    (status, named.collect(), body.to_owned())
}

/// [`post_raw`] with the vendor's token.
fn post(gateway: &str, headers: &[&str], body: &str) -> (u16, String) {
    let mut all = vec!["Authorization: Bearer sekret-token-42"];
    all.extend_from_slice(headers);
    let (status, _, body) = post_raw(gateway, &all, body);
    (status, body)
}

/// The writes that reached the vendor (its reads are the gateway's read-backs).
fn hits(vendor: &Shared) -> Vec<String> {
    let vendor = vendor.lock().unwrap();
    vendor
        .hits
        .iter()
        .filter(|hit| !hit.starts_with("GET "))
        .cloned()
        .collect()
}

/// The last row the ledger holds.
fn last_row(dir: &Path) -> Value {
    crate::exported_entries(dir).pop().expect("a row")
}

/// A budget on notes' `/amount`, refused when crossed or unreadable.
const BUDGET: &str = "version: 1
policies:
  - name: notes-budget
    match: {verb: create}
    limit: {sum: /amount, max: 500, per: 24h}
    decision: refuse
    reason: notes are budgeted
  - name: sandbox-writes
    match: {verb: [create, update, write]}
    decision: act
    reason: the test vendor is a sandbox
";

/// A body whose amount cannot be read (a number JSON cannot hold, a field nested past
/// the reader's depth, a lone surrogate elsewhere) is not re-read as another verb that
/// no budget watches: the budget applies and refuses it, and the vendor never sees it.
#[test]
fn an_unreadable_amount_under_a_budget_is_refused_not_reread_as_another_verb() {
    let Some(under) = gateway_under(BUDGET) else {
        return;
    };
    let (dir, vendor, address) = (under.dir.path(), &under.vendor, &under.address);
    // A readable amount under the budget runs.
    let (status, text) = post(address, &[], r#"{"amount": 5, "title": "ok"}"#);
    assert_eq!(status, 201, "{text}");
    assert_eq!(hits(vendor).len(), 1);

    let deep = format!(
        r#"{{"amount": 5, "x": {}{}}}"#,
        "[".repeat(129),
        "]".repeat(129)
    );
    for body in [
        r#"{"amount": 1e400, "title": "huge"}"#.to_owned(),
        deep,
        r#"{"amount": 5, "title": "\ud800"}"#.to_owned(),
    ] {
        let (status, text) = post(address, &[], &body);
        assert_eq!(status, 403, "{}: {text}", &body[..body.len().min(40)]);
        assert!(text.contains("cannot count it and applies"), "{text}");
        let row = last_row(dir);
        assert_eq!(row["decision"], "refuse", "{row}");
        let fired = row["rules_fired"].as_array().unwrap();
        assert!(fired.contains(&Value::from("notes-budget")), "{row}");
    }
    assert_eq!(
        hits(vendor).len(),
        1,
        "no unreadable body reached the vendor"
    );
}

/// `X-HTTP-Method-Override: PATCH, DELETE` (or `X-Method-Override: PUT,DELETE`, or the
/// header repeated) is read as every method it lists: a POST that a server may take as a
/// DELETE is judged and recorded as a delete, refused by `no-deletes`, and not sent.
#[test]
fn comma_listed_and_repeated_method_overrides_are_read_as_the_riskiest_method() {
    let Some(under) = gateway_under(POLICY) else {
        return;
    };
    let (dir, vendor, address) = (under.dir.path(), &under.vendor, &under.address);
    let note = r#"{"title": "hello"}"#;
    for headers in [
        &["X-HTTP-Method-Override: PATCH, DELETE"][..],
        &["X-Method-Override: PUT,DELETE"],
        &["X-HTTP-Method: DELETE ,PATCH"],
        &[
            "X-HTTP-Method-Override: PATCH",
            "X-HTTP-Method-Override: DELETE",
        ],
    ] {
        let (status, text) = post(address, headers, note);
        assert_eq!(status, 403, "{headers:?}: {text}");
        let row = last_row(dir);
        assert_eq!(
            (row["verb"].as_str(), row["decision"].as_str()),
            (Some("delete"), Some("refuse")),
            "{headers:?}: {row}"
        );
    }
    assert!(hits(vendor).is_empty(), "{:?}", hits(vendor));
    // A plain POST still runs.
    let (status, text) = post(address, &[], note);
    assert_eq!(status, 201, "{text}");
}

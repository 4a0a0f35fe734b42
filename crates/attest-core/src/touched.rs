//! What a row says was touched: the surface's call, the target with its id, and the ids
//! a write's result returned.
//!
//! Everything here reads the action and the result and writes nothing secret: URLs go
//! through [`redact_url`], ids are scalars cut to [`MAX_ID_CHARS`], and no body or
//! param value other than an id reaches the row.

use attest_ledger::Call;
use attest_policy::{redact_url, Action, Source};
use serde_json::Value;

/// The longest id kept, in characters; a longer value is not an id.
pub const MAX_ID_CHARS: usize = 128;

/// The most ids a row keeps from one result.
const MAX_RESULT_IDS: usize = 8;

/// The params that name an issue or pull request by number, in GitHub's tools' words.
const NUMBER_PARAMS: [&str; 3] = ["issue_number", "pull_number", "number"];

/// The call as the surface saw it: MCP server and tool, HTTP method and URL (redacted:
/// no userinfo, query string, fragment or token-bearing segment), or the SDK path or
/// function name. `None` for an action given by hand with none of these.
pub fn call_of(action: &Action) -> Option<Call> {
    let extra = &action.extra;
    let mut call = Call {
        method: extra
            .method
            .as_deref()
            .map(|m| cut(m.trim()).to_ascii_uppercase()),
        url: extra.url.as_deref().map(|url| cut(&redact_url(url))),
        server: extra.server.as_deref().map(cut),
        sandboxed: extra.sandboxed,
        ..Call::default()
    };
    if let Some(name) = extra.tool_name.as_deref().map(cut) {
        let is_tool = extra.server.is_some() || action.source == Source::Mcp;
        if is_tool {
            call.tool = Some(name);
        } else {
            call.function = Some(name);
        }
    }
    (!call.is_empty()).then_some(call)
}

/// The ids a write's result returned: `id` and `number` of the result (or, for an HTTP
/// answer `{"status", "body"}`, of its body), and of each item when it is a list.
/// Empty for anything else.
pub fn result_ids(result: &Value) -> Vec<String> {
    let record = payload(result);
    let items: Vec<&Value> = match record {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut ids = Vec::new();
    for item in items {
        for key in ["id", "number"] {
            if let Some(id) = item.get(key).and_then(id_text) {
                if !ids.contains(&id) && ids.len() < MAX_RESULT_IDS {
                    ids.push(id);
                }
            }
        }
    }
    ids
}

/// The target with its id, when the call or its result names one: `o/r#12` for a
/// GitHub-style call (params `owner`, `repo` and an issue or pull number, or the
/// result's `number`), `deals/987654` for an HTTP call whose path ends in an id, else
/// the detected kind with the result's id (`issue/42`). A target the caller set by hand
/// is kept as it is.
pub fn target_of(action: &Action, result: Option<&Value>) -> Option<String> {
    if action.source == Source::Manual {
        return action.target.clone();
    }
    let record = result.map(payload);
    let params = action.call_params();
    let param = |name: &str| params.get(name).and_then(id_text);
    if let (Some(owner), Some(repo)) = (param("owner"), param("repo")) {
        let number = NUMBER_PARAMS
            .iter()
            .find_map(|name| param(name))
            .or_else(|| record.and_then(|r| r.get("number")).and_then(id_text));
        return Some(match number {
            Some(number) => format!("{owner}/{repo}#{number}"),
            None => format!("{owner}/{repo}"),
        });
    }
    let result_id = record.and_then(|r| r.get("id")).and_then(id_text);
    if let Some(url) = action.extra.url.as_deref() {
        if let Some(target) = url_target(url, result_id.as_deref()) {
            return Some(target);
        }
    }
    match (&action.target, result_id) {
        (Some(kind), Some(id)) if !kind.contains('/') => Some(format!("{kind}/{id}")),
        (target, _) => target.clone(),
    }
}

/// `collection/id` from a URL's path: its last two segments when the last is an id,
/// else its last segment and the created record's id.
fn url_target(url: &str, created: Option<&str>) -> Option<String> {
    let redacted = redact_url(url);
    let path = redacted
        .split_once("://")
        .map_or(redacted.as_str(), |(_, rest)| {
            rest.find('/').map_or("", |at| &rest[at..])
        });
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        [.., collection, last] if looks_like_id(last) && !looks_like_id(collection) => {
            Some(cut(&format!("{collection}/{last}")))
        }
        [.., last] if !looks_like_id(last) => created.map(|id| cut(&format!("{last}/{id}"))),
        _ => None,
    }
}

/// An id-shaped path segment: it has a digit (`987654`, `cus_9a`, a UUID) and is not a
/// version word such as `v1` or a redaction.
fn looks_like_id(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let version =
        lower.starts_with('v') && lower[1..].chars().all(|c| c.is_ascii_digit() || c == '.');
    segment.chars().any(|c| c.is_ascii_digit()) && !version && segment != attest_policy::REDACTED
}

/// What an HTTP answer (`{"status", "body"}`) holds, else the result itself.
pub(crate) fn payload(result: &Value) -> &Value {
    let Some(map) = result.as_object() else {
        return result;
    };
    let shape = map
        .keys()
        .all(|key| matches!(key.as_str(), "status" | "body" | "location"));
    match (map.get("status"), map.get("body")) {
        (Some(Value::Number(_)), Some(body)) if shape => body,
        _ => result,
    }
}

/// A scalar id as text: a non-empty string of at most [`MAX_ID_CHARS`] characters
/// without controls, or an integer.
fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => {
            let text = text.trim();
            let fits = !text.is_empty()
                && text.chars().count() <= MAX_ID_CHARS
                && !text.chars().any(char::is_control);
            fits.then(|| text.to_owned())
        }
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// `text` cut to [`MAX_ID_CHARS`] × 4 characters: names and URLs are bounded in the row.
fn cut(text: &str) -> String {
    text.chars().take(MAX_ID_CHARS * 4).collect()
}

#[cfg(test)]
mod tests {
    use attest_policy::Verb;
    use serde_json::json;

    use super::*;

    fn http(method: &str, url: &str, target: Option<&str>) -> Action {
        let mut action = Action::new("hubspot", Verb::Update);
        action.source = Source::Url;
        action.target = target.map(str::to_owned);
        action.extra.method = Some(method.to_owned());
        action.extra.url = Some(url.to_owned());
        action
    }

    #[test]
    fn http_calls_name_method_and_redacted_url() {
        let action = http(
            "patch",
            "https://u:p@api.hubapi.com/crm/v3/objects/deals/987654?hapikey=s",
            Some("deals"),
        );
        let call = call_of(&action).unwrap();
        assert_eq!(call.method.as_deref(), Some("PATCH"));
        assert_eq!(
            call.url.as_deref(),
            Some("https://api.hubapi.com/crm/v3/objects/deals/987654")
        );
        assert_eq!(target_of(&action, None).as_deref(), Some("deals/987654"));
        let created = http(
            "POST",
            "https://api.hubapi.com/crm/v3/objects/deals",
            Some("deals"),
        );
        let result = json!({"status": 201, "body": {"id": "77"}});
        assert_eq!(
            target_of(&created, Some(&result)).as_deref(),
            Some("deals/77")
        );
        assert_eq!(result_ids(&result), ["77"]);
        assert_eq!(target_of(&created, None).as_deref(), Some("deals"));
        let versioned = http("POST", "https://x.test/v1/notes", None);
        assert_eq!(target_of(&versioned, None), None);
    }

    #[test]
    fn github_style_targets_name_owner_repo_and_number() {
        let mut action = Action::new("github", Verb::Create)
            .with_params(json!({"owner": "o", "repo": "r", "title": "t"}));
        action.source = Source::Mcp;
        action.target = Some("issue".into());
        action.extra.server = Some("github".into());
        action.extra.tool_name = Some("create_issue".into());
        assert_eq!(target_of(&action, None).as_deref(), Some("o/r"));
        let result = json!({"number": 12, "id": 900});
        assert_eq!(target_of(&action, Some(&result)).as_deref(), Some("o/r#12"));
        assert_eq!(result_ids(&result), ["900", "12"]);
        let call = call_of(&action).unwrap();
        assert_eq!(
            (call.server.as_deref(), call.tool.as_deref()),
            (Some("github"), Some("create_issue"))
        );
    }

    #[test]
    fn hand_made_actions_keep_their_target_and_have_no_call() {
        let action = Action::new("gmail", Verb::Send).with_target("bob@example.com");
        assert_eq!(call_of(&action), None);
        assert_eq!(
            target_of(&action, Some(&json!({"id": "m1"}))).as_deref(),
            Some("bob@example.com")
        );
        assert!(result_ids(&json!({"id": {"nested": 1}, "ok": true})).is_empty());
        assert!(result_ids(&json!({"id": "x".repeat(200)})).is_empty());
    }
}

//! The convention driver (opt-in): REST guesswork for calls through the HTTP gateway.
//!
//! `POST <collection>` → `GET <collection>/{id}` (the id from the result's `id`);
//! `PUT`/`PATCH <url>` → `GET <url>`. The fields of the request body that the record
//! also has are compared. A POST's record must carry the result's id, so a wrong guess
//! can only yield `unverified` (fields or id differ) or `acknowledged` (nothing
//! overlaps), never `verified` by accident. Only URLs under a prefix the caller allows
//! are read.

use async_trait::async_trait;
use attest_policy::Action;
use serde_json::Value;

use super::http::{HttpReader, ReadMethod, ReadRequest};
use super::readback::{ReadBackDriver, ReadContext};
use super::template::scalar_text;
use super::{CustomCheck, Evidence, Finding};

/// Reads REST writes back by convention; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct ConventionDriver {
    prefixes: Vec<String>,
    auth_env: Option<String>,
}

impl ConventionDriver {
    /// A driver that reads nothing until [`allow`](ConventionDriver::allow) is called.
    pub fn new() -> Self {
        ConventionDriver::default()
    }

    /// Allows reading back calls whose URL starts with `prefix`
    /// (`https://api.example.com/v1/`).
    pub fn allow(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// Sends `Authorization: Bearer` with the secret in the variable `name`.
    pub fn auth_env(mut self, name: impl Into<String>) -> Self {
        self.auth_env = Some(name.into());
        self
    }
}

#[async_trait]
impl ReadBackDriver for ConventionDriver {
    fn name(&self) -> &str {
        "convention"
    }

    fn supports(&self, action: &Action, result: &Value) -> bool {
        let Some((method, url)) = http_call(action) else {
            return false;
        };
        self.prefixes.iter().any(|p| url.starts_with(p.as_str()))
            && action.params.as_object().is_some_and(|m| !m.is_empty())
            && (method != "POST" || result_id(result).is_some())
    }

    async fn read_back(&self, ctx: &ReadContext<'_>, action: &Action, result: &Value) -> Finding {
        let Some((method, url)) = http_call(action) else {
            return Finding::degraded("not an http call", Evidence::default());
        };
        let base = without_query(url);
        let id = result_id(result);
        let target = match (method, &id) {
            ("POST", Some(id)) => format!("{}/{}", base.trim_end_matches('/'), encode_segment(id)),
            ("POST", None) => return Finding::degraded("no id in the result", Evidence::default()),
            _ => base.to_owned(),
        };
        let mut evidence = Evidence::new(format!("GET {}", super::compare::cut_text(&target)));
        if let Some(id) = &id {
            evidence.id("id", id);
        }
        let expect_id = if method == "POST" {
            id.as_deref()
        } else {
            None
        };
        read_and_compare(
            ctx,
            &action.system,
            self.auth_env.as_deref(),
            target,
            action,
            expect_id,
            evidence,
        )
        .await
    }
}

/// GETs `url` (with a bearer credential from `auth_env` when given) and compares the
/// request body's top-level fields with the record's fields of the same name. With
/// `expect_id`, the record's `id` must equal it.
pub(crate) async fn read_and_compare(
    ctx: &ReadContext<'_>,
    system: &str,
    auth_env: Option<&str>,
    url: String,
    action: &Action,
    expect_id: Option<&str>,
    mut evidence: Evidence,
) -> Finding {
    let mut headers = vec![("accept".to_owned(), "application/json".to_owned())];
    if let Some(name) = auth_env {
        let Some(secret) = ctx.credential(system, name) else {
            return Finding::degraded(
                format!("missing credential: {name} is not set, so {system} cannot be read back"),
                evidence,
            );
        };
        headers.push(("authorization".to_owned(), format!("Bearer {secret}")));
    }
    let request = ReadRequest {
        method: ReadMethod::Get,
        url,
        headers,
        body: None,
    };
    let fetched = match ctx.fetch(&request).await {
        Ok(fetched) => fetched,
        Err(error) => return Finding::degraded(error.to_string(), evidence),
    };
    evidence.status = Some(fetched.status);
    evidence.attempts = Some(fetched.attempts);
    Finding::from_record(evidence, &action.params, &fetched.body, expect_id)
}

/// The gateway call's method (upper-cased; writes only) and URL.
pub(crate) fn http_call(action: &Action) -> Option<(&'static str, &str)> {
    let method = action.extra.method.as_deref()?;
    let url = action.extra.url.as_deref()?;
    let method = ["POST", "PUT", "PATCH"]
        .into_iter()
        .find(|m| m.eq_ignore_ascii_case(method.trim()))?;
    Some((method, url))
}

/// The result's `id`, as text.
pub(crate) fn result_id(result: &Value) -> Option<String> {
    result
        .get("id")
        .and_then(scalar_text)
        .filter(|id| !id.trim().is_empty())
}

/// A URL without its query string or fragment, which may carry tokens: fit for evidence.
pub fn without_query(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

/// Percent-encodes an id for one path segment.
pub(crate) fn encode_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    super::template::percent_encode(id, &mut out);
    out
}

/// The caller's own read-back of an HTTP write, with the credentials the caller sent
/// (`Authorization`, `Cookie`, `X-Api-Key`; held for this call only, never recorded):
/// `GET` the answer's same-origin `location`, else the URL a `PUT`/`PATCH` went to,
/// else the created `id` under the URL a `POST` went to, and compare the fields sent.
/// Recorded as method `read-back:gateway`; tried after the configured drivers, so a
/// system's recipe reads it with the recipe's own credential first.
///
/// The result is an HTTP answer as the gateway records it: `{"status", "body"}`, with
/// `"location"` when the upstream sent one.
pub fn caller_read_back(http: HttpReader, credentials: Vec<(String, String)>) -> CustomCheck {
    let mut headers = vec![("accept".to_owned(), "application/json".to_owned())];
    headers.extend(credentials);
    CustomCheck::read_back_fallback("gateway", move |action, result| {
        let url = answer_url(action, result);
        let http = http.clone();
        let headers = headers.clone();
        let sent = action.params.clone();
        async move {
            let Some(url) = url else {
                let evidence = Evidence::new("gateway");
                return Finding::degraded("no URL to read the write back from", evidence);
            };
            let mut evidence = Evidence::new(format!("GET {}", without_query(&url)));
            let request = ReadRequest {
                method: ReadMethod::Get,
                url,
                headers,
                body: None,
            };
            match http.fetch(&request).await {
                Ok(fetched) => {
                    evidence.status = Some(fetched.status);
                    evidence.attempts = Some(fetched.attempts);
                    Finding::from_record(evidence, &sent, &fetched.body, None)
                }
                Err(err) => Finding::degraded(err.to_string(), evidence),
            }
        }
    })
}

/// Where an HTTP write can be read back, given its answer. A `location` on another
/// origin is ignored: the read carries the caller's credentials.
pub(crate) fn answer_url(action: &Action, answer: &Value) -> Option<String> {
    let method = action.extra.method.as_deref()?.trim().to_ascii_uppercase();
    let url = url::Url::parse(action.extra.url.as_deref()?).ok()?;
    let location = answer.get("location").and_then(Value::as_str);
    if let Some(found) = location.and_then(|l| url.join(l).ok()) {
        if found.origin() == url.origin() {
            return Some(found.to_string());
        }
    }
    match method.as_str() {
        "PUT" | "PATCH" => Some(url.to_string()),
        "POST" => {
            let id = result_id(crate::touched::payload(answer))?;
            let mut item = url;
            item.set_query(None);
            item.path_segments_mut().ok()?.pop_if_empty().push(&id);
            Some(item.to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use attest_policy::Verb;
    use serde_json::json;

    use super::*;

    fn call(method: &str) -> Action {
        let mut action = Action::new("notes", Verb::Create);
        action.extra.method = Some(method.to_owned());
        action.extra.url = Some("http://v.test/v1/notes".to_owned());
        action
    }

    #[test]
    fn answer_urls_prefer_a_same_origin_location() {
        let located = json!({"status": 201, "body": null, "location": "/v1/notes/7"});
        assert_eq!(
            answer_url(&call("POST"), &located).as_deref(),
            Some("http://v.test/v1/notes/7")
        );
        let created = json!({"status": 201, "body": {"id": 8}});
        assert_eq!(
            answer_url(&call("POST"), &created).as_deref(),
            Some("http://v.test/v1/notes/8")
        );
        assert_eq!(
            answer_url(&call("PATCH"), &created).as_deref(),
            Some("http://v.test/v1/notes")
        );
        // A Location on another origin is never read with the caller's credentials.
        let elsewhere =
            json!({"status": 201, "body": {"id": 9}, "location": "http://evil.test/v1/notes/7"});
        assert_eq!(
            answer_url(&call("POST"), &elsewhere).as_deref(),
            Some("http://v.test/v1/notes/9")
        );
        assert_eq!(answer_url(&call("DELETE"), &created), None);
    }
}

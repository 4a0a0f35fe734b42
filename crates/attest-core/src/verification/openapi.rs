//! The OpenAPI driver: reads a write back with the GET its API describes.
//!
//! Given an OpenAPI 3 spec (JSON or YAML), a `POST /things` call is read back with
//! `GET /things/{id}` when the spec has that operation (the id from the result's `id`,
//! or the result field the path parameter names); a `PUT`/`PATCH /things/{id}` with
//! `GET /things/{id}`. No such GET in the spec: no guess, the driver does not apply.
//! Fields of the request body that the record also has are compared.

use std::path::Path;

use async_trait::async_trait;
use attest_policy::Action;
use serde_json::Value;

use super::convention::{encode_segment, http_call, read_and_compare, result_id, without_query};
use super::readback::{ReadBackDriver, ReadContext};
use super::template::scalar_text;
use super::{Evidence, Finding};
use crate::AttestError;

/// The largest spec read, in bytes.
pub(crate) const MAX_SPEC_BYTES: usize = 8 << 20;

/// An OpenAPI (or Swagger) spec's text, JSON or YAML, parsed: at most [`MAX_SPEC_BYTES`],
/// with a `paths` object. Errors name `origin`, and the line and column when YAML says.
pub(crate) fn parse_spec(text: &str, origin: &str) -> Result<Value, AttestError> {
    let error = |message: String| AttestError::Recipe {
        origin: origin.to_owned(),
        line: 0,
        column: 0,
        message,
    };
    if text.len() > MAX_SPEC_BYTES {
        return Err(error(format!("larger than {MAX_SPEC_BYTES} bytes")));
    }
    let spec: Value = serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        AttestError::Recipe {
            origin: origin.to_owned(),
            line,
            column,
            message: e.to_string(),
        }
    })?;
    if spec.get("paths").and_then(Value::as_object).is_none() {
        return Err(error("the spec has no `paths` object".to_owned()));
    }
    Ok(spec)
}

/// A parsed spec's `paths` ([`parse_spec`] made sure there is one).
pub(crate) fn spec_paths(spec: &Value) -> impl Iterator<Item = (&String, &Value)> {
    spec.get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// A spec file's text, at most [`MAX_SPEC_BYTES`].
pub(crate) fn read_spec_file(path: &Path) -> Result<String, AttestError> {
    super::catalog::read_recipe_file_capped(path, MAX_SPEC_BYTES)
}

/// Reads writes back with the GET operations of an OpenAPI spec.
#[derive(Debug, Clone)]
pub struct OpenApiDriver {
    base: String,
    gets: Vec<Vec<Segment>>,
    auth_env: Option<String>,
}

/// One segment of a path template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    Literal(String),
    Param(String),
}

/// How a write is read back: the GET path, filled.
struct Plan {
    url: String,
    operation: String,
    id: Option<String>,
}

impl OpenApiDriver {
    /// A driver from a spec's text; `origin` names it in errors. The base URL is the
    /// spec's first `servers` entry unless [`base_url`](OpenApiDriver::base_url) sets one.
    pub fn from_spec(text: &str, origin: &str) -> Result<Self, AttestError> {
        let spec = parse_spec(text, origin)?;
        let gets = spec_paths(&spec)
            .filter(|(_, item)| item.get("get").is_some())
            .map(|(path, _)| parse_path(path))
            .collect();
        let base = spec
            .pointer("/servers/0/url")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_owned();
        Ok(OpenApiDriver {
            base,
            gets,
            auth_env: None,
        })
    }

    /// A driver from a spec file.
    pub fn from_file(path: &Path) -> Result<Self, AttestError> {
        let text = read_spec_file(path)?;
        OpenApiDriver::from_spec(&text, &path.display().to_string())
    }

    /// The base URL calls are made under (overrides the spec's `servers`).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Sends `Authorization: Bearer` with the secret in the variable `name`.
    pub fn auth_env(mut self, name: impl Into<String>) -> Self {
        self.auth_env = Some(name.into());
        self
    }

    fn plan(&self, action: &Action, result: &Value) -> Option<Plan> {
        let (method, url) = http_call(action)?;
        if self.base.is_empty() {
            return None;
        }
        let rest = without_query(url).strip_prefix(self.base.as_str())?;
        let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        match method {
            "POST" => self.gets.iter().find_map(|get| {
                let (last, parent) = get.split_last()?;
                let Segment::Param(name) = last else {
                    return None;
                };
                if !fits(parent, &segments) {
                    return None;
                }
                let id = result
                    .get(name)
                    .and_then(scalar_text)
                    .or_else(|| result_id(result))?;
                Some(Plan {
                    url: format!(
                        "{}/{}",
                        without_query(url).trim_end_matches('/'),
                        encode_segment(&id)
                    ),
                    operation: format!("GET {}", show(get)),
                    id: Some(id),
                })
            }),
            _ => self
                .gets
                .iter()
                .find(|get| fits(get, &segments))
                .map(|get| Plan {
                    url: without_query(url).to_owned(),
                    operation: format!("GET {}", show(get)),
                    id: None,
                }),
        }
    }
}

#[async_trait]
impl ReadBackDriver for OpenApiDriver {
    fn name(&self) -> &str {
        "openapi"
    }

    fn supports(&self, action: &Action, result: &Value) -> bool {
        action.params.is_object() && self.plan(action, result).is_some()
    }

    async fn read_back(&self, ctx: &ReadContext<'_>, action: &Action, result: &Value) -> Finding {
        let Some(plan) = self.plan(action, result) else {
            return Finding::degraded("the spec has no read for this call", Evidence::default());
        };
        let mut evidence = Evidence::new(plan.operation);
        if let Some(id) = &plan.id {
            evidence.id("id", id);
        }
        read_and_compare(
            ctx,
            &action.system,
            self.auth_env.as_deref(),
            plan.url,
            action,
            plan.id.as_deref(),
            evidence,
        )
        .await
    }
}

/// A path template's segments (`/things/{id}`: `things`, the parameter `id`).
pub(crate) fn parse_path(path: &str) -> Vec<Segment> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => Segment::Param(name.to_owned()),
                None => Segment::Literal(s.to_owned()),
            },
        )
        .collect()
}

fn fits(template: &[Segment], segments: &[&str]) -> bool {
    template.len() == segments.len()
        && template.iter().zip(segments).all(|(t, s)| match t {
            Segment::Literal(lit) => lit == s,
            Segment::Param(_) => !s.is_empty(),
        })
}

fn show(template: &[Segment]) -> String {
    let mut out = String::new();
    for segment in template {
        out.push('/');
        match segment {
            Segment::Literal(lit) => out.push_str(lit),
            Segment::Param(name) => {
                out.push('{');
                out.push_str(name);
                out.push('}');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SPEC: &str = r#"
openapi: 3.0.0
servers: [{url: "https://api.example.com/v1"}]
paths:
  /pets:
    post: {}
  /pets/{petId}:
    get: {}
    patch: {}
  /orders:
    post: {}
"#;

    fn call(method: &str, url: &str) -> Action {
        let mut action = Action::new("petstore", attest_policy::Verb::Create)
            .with_params(json!({"name": "Rex"}));
        action.extra.method = Some(method.to_owned());
        action.extra.url = Some(url.to_owned());
        action
    }

    #[test]
    fn plans_the_matching_get_or_nothing() {
        let driver = OpenApiDriver::from_spec(SPEC, "spec.yaml").unwrap();
        let post = call("POST", "https://api.example.com/v1/pets");
        let plan = driver.plan(&post, &json!({"id": 7})).unwrap();
        assert_eq!(plan.url, "https://api.example.com/v1/pets/7");
        assert_eq!(plan.operation, "GET /pets/{petId}");
        let patch = call("PATCH", "https://api.example.com/v1/pets/7?x=1");
        assert_eq!(
            driver.plan(&patch, &json!({})).unwrap().url,
            "https://api.example.com/v1/pets/7"
        );
        // No GET for orders: no guess.
        assert!(driver
            .plan(
                &call("POST", "https://api.example.com/v1/orders"),
                &json!({"id": 1})
            )
            .is_none());
        assert!(driver
            .plan(
                &call("POST", "https://other.example.com/v1/pets"),
                &json!({"id": 1})
            )
            .is_none());
        assert!(OpenApiDriver::from_spec("openapi: 3.0.0\n", "x").is_err());
        assert!(OpenApiDriver::from_spec("paths: [\n", "x").is_err());
    }
}

//! Operation ids from OpenAPI specs: what an HTTP call's operation is named, so that
//! detection reads `cancelRefund` where the method and path alone say little.

use std::path::Path;

use super::{DetectInput, Detection, Registry};
use crate::verification::openapi::{parse_path, parse_spec, read_spec_file, spec_paths, Segment};
use crate::AttestError;

/// The operation ids of one or more OpenAPI (or Swagger) specs, by method and path
/// template.
#[derive(Debug, Clone, Default)]
pub struct OperationIds {
    operations: Vec<Operation>,
}

#[derive(Debug, Clone)]
struct Operation {
    method: String,
    template: Vec<Segment>,
    id: String,
}

impl OperationIds {
    /// The operation ids of a spec's text; `origin` names it in errors.
    pub fn from_spec(text: &str, origin: &str) -> Result<Self, AttestError> {
        let spec = parse_spec(text, origin)?;
        let mut operations = Vec::new();
        for (template, item) in spec_paths(&spec) {
            let Some(item) = item.as_object() else {
                continue;
            };
            for (method, op) in item {
                if let Some(id) = op.get("operationId").and_then(serde_json::Value::as_str) {
                    operations.push(Operation {
                        method: method.to_ascii_uppercase(),
                        template: parse_path(template),
                        id: id.to_owned(),
                    });
                }
            }
        }
        Ok(OperationIds { operations })
    }

    /// The operation ids of a spec file.
    pub fn from_file(path: &Path) -> Result<Self, AttestError> {
        let text = read_spec_file(path)?;
        OperationIds::from_spec(&text, &path.display().to_string())
    }

    /// Adds another spec's operation ids (tried after these).
    pub fn extend(&mut self, other: OperationIds) {
        self.operations.extend(other.operations);
    }

    /// How many operations are known.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether no operation is known.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// The id of the operation whose template matches the end of `path` (so a base
    /// path before it is allowed) for `method`.
    pub fn find(&self, method: &str, path: &str) -> Option<&str> {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        self.operations
            .iter()
            .find(|op| {
                op.method.eq_ignore_ascii_case(method)
                    && segments.len() >= op.template.len()
                    && segments[segments.len() - op.template.len()..]
                        .iter()
                        .zip(&op.template)
                        .all(|(seg, part)| match part {
                            Segment::Literal(lit) => seg == lit,
                            Segment::Param(_) => true,
                        })
            })
            .map(|op| op.id.as_str())
    }

    /// Refines an HTTP call's detection with its operation id, read by `registry` as a
    /// function name: it names the verb (and target), but never makes a write's method a
    /// read, so the riskiest reading stands.
    pub fn refine(&self, registry: &Registry, method: &str, path: &str, detection: &mut Detection) {
        let Some(id) = self.find(method, path) else {
            return;
        };
        let named = registry.detect(&DetectInput::Function { name: id });
        let read_method = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
        if !named.verb.is_read() || read_method {
            detection.verb = named.verb;
        }
        if named.target.is_some() {
            detection.target = named.target;
        }
    }
}

#[cfg(test)]
mod tests {
    use attest_policy::Verb;

    use super::*;

    #[test]
    fn operation_ids_match_templates_at_the_end_of_a_path() {
        let ops = OperationIds::from_spec(
            "paths:\n  /v1/refunds/{id}/cancel:\n    post: {operationId: cancelRefund}\n  /v1/notes:\n    post: {operationId: createNote}\n",
            "spec.yaml",
        )
        .unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(
            ops.find("POST", "/api/v1/refunds/re_1/cancel"),
            Some("cancelRefund")
        );
        assert!(ops.find("GET", "/v1/notes").is_none());
        assert!(OperationIds::from_spec("{}", "spec.yaml").is_err());
        assert!(OperationIds::from_spec(": : :", "spec.yaml").is_err());
    }

    #[test]
    fn an_operation_named_like_a_read_never_makes_a_write_a_read() {
        let ops = OperationIds::from_spec(
            "paths:\n  /v1/things:\n    post: {operationId: listThings}\n    get: {operationId: deleteThings}\n",
            "spec.yaml",
        )
        .unwrap();
        let registry = Registry::shared();
        let mut post = registry.detect(&DetectInput::Http {
            method: "POST",
            url: "https://api.example.com/v1/things",
            body: None,
        });
        let before = post.verb;
        ops.refine(registry, "POST", "/v1/things", &mut post);
        assert_eq!(post.verb, before);
        let mut get = registry.detect(&DetectInput::Http {
            method: "GET",
            url: "https://api.example.com/v1/things",
            body: None,
        });
        ops.refine(registry, "GET", "/v1/things", &mut get);
        assert_eq!(get.verb, Verb::Delete);
    }
}

//! The recipe driver: reads a write back the way a declarative recipe says.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use attest_policy::Action;
use base64::Engine;
use serde_json::{Map, Value};

use super::catalog;
use super::compare::{cut, matches, FieldResult, Rule};
use super::http::ReadRequest;
use super::readback::{ReadBackDriver, ReadContext};
use super::recipe::{Check, Missing, Recipe, Scheme, Source, Test};
use super::template::{scalar_text, Encoding, PathPart, Vars};
use super::{Evidence, Finding};
use crate::detect::Registry;
use crate::AttestError;

/// Reads writes back with recipes; the first recipe that applies to an action is used.
#[derive(Debug, Clone, Default)]
pub struct RecipeDriver {
    recipes: Vec<Recipe>,
    /// The registry whose aliases name one system (`None`: the compiled-in one).
    registry: Option<Arc<Registry>>,
}

impl RecipeDriver {
    /// A driver with exactly these recipes, tried in order.
    pub fn new(recipes: Vec<Recipe>) -> Self {
        RecipeDriver {
            recipes,
            registry: None,
        }
    }

    /// Tells a recipe's system from an action's by `registry`'s aliases (the configured
    /// registry, whose files may name systems and aliases the compiled-in one lacks).
    #[must_use]
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    fn registry(&self) -> &Registry {
        self.registry
            .as_deref()
            .unwrap_or_else(|| Registry::shared())
    }

    /// The built-in recipes (`policies/recipes/*.yaml`, compiled in).
    pub fn builtin() -> Result<Self, AttestError> {
        Ok(RecipeDriver::new(catalog::builtin()?))
    }

    /// Adds every `*.yaml`/`*.yml` recipe in `dir`, tried before the recipes already
    /// held; a recipe with the name of one already held replaces it.
    pub fn with_dir(mut self, dir: &Path) -> Result<Self, AttestError> {
        let mut loaded = catalog::load_dir(dir)?;
        self.recipes
            .retain(|old| !loaded.iter().any(|new| new.name == old.name));
        loaded.append(&mut self.recipes);
        self.recipes = loaded;
        Ok(self)
    }

    /// The recipes, in the order they are tried.
    pub fn recipes(&self) -> &[Recipe] {
        &self.recipes
    }

    /// The recipe that applies to `action`, if any.
    pub fn recipe_for(&self, action: &Action, result: &Value) -> Option<&Recipe> {
        let registry = self.registry();
        self.recipes
            .iter()
            .find(|r| applies(registry, r, action, result))
    }
}

#[async_trait]
impl ReadBackDriver for RecipeDriver {
    fn name(&self) -> &str {
        "recipe"
    }

    fn supports(&self, action: &Action, result: &Value) -> bool {
        self.recipe_for(action, result).is_some()
    }

    fn path_params(&self, action: &Action) -> Option<Map<String, Value>> {
        let url = action.extra.url.as_deref()?;
        let segments = url_segments(url)?;
        self.recipes
            .iter()
            .filter(|recipe| same_system(self.registry(), &recipe.system, &action.system))
            .find_map(|recipe| {
                let pattern = recipe
                    .read
                    .url
                    .path_pattern(Some(id_param(recipe)?))
                    .or_else(|| recipe.read.url.path_pattern(None))?;
                match_path(&pattern, &segments)
            })
    }

    async fn read_back(&self, ctx: &ReadContext<'_>, action: &Action, result: &Value) -> Finding {
        match self.recipe_for(action, result) {
            Some(recipe) => read_back(recipe, ctx, action, result).await,
            None => Finding::degraded("no recipe applies", Evidence::default()),
        }
    }
}

/// Whether `recipe` applies: system, verb, `when`, and every placeholder but `{base}`
/// has a value.
fn applies(registry: &Registry, recipe: &Recipe, action: &Action, result: &Value) -> bool {
    if !same_system(registry, &recipe.system, &action.system)
        || !recipe.verbs.contains(&action.verb)
    {
        return false;
    }
    let when = &recipe.when;
    let conditions = when.params.iter().all(|p| p.present(&action.params))
        && when
            .params_absent
            .iter()
            .all(|p| !p.present(&action.params))
        && when.result.iter().all(|p| p.present(result))
        && when
            .result_checks
            .iter()
            .all(|check| check_value(check, result, None).1);
    if !conditions {
        return false;
    }
    let id = id_of(recipe, action, result);
    let vars = Vars {
        base: None,
        id: id.as_deref(),
        params: &action.params,
        result,
    };
    let read = &recipe.read;
    read.url.resolvable(&vars)
        && read.headers.values().all(|t| t.resolvable(&vars))
        && read
            .graphql
            .as_ref()
            .is_none_or(|g| g.variables.values().all(|t| t.resolvable(&vars)))
}

/// Whether a recipe's system is the action's: the same name, or two names of one
/// system in the detection registry (`google-calendar` and `calendar`).
fn same_system(registry: &Registry, recipe: &str, action: &str) -> bool {
    if recipe.eq_ignore_ascii_case(action) {
        return true;
    }
    let canonical = |name: &str| registry.system_named(name).map(str::to_owned);
    canonical(recipe).is_some_and(|found| Some(found) == canonical(action))
}

/// The param a recipe's `{id}` comes from (`params:/issue_number` gives `issue_number`).
fn id_param(recipe: &Recipe) -> Option<&str> {
    recipe.read.id.iter().find_map(|source| match source {
        Source::Params(pointer) => pointer.single_key(),
        _ => None,
    })
}

/// A URL's path segments, percent-decoded; `None` for a URL that does not parse.
fn url_segments(url: &str) -> Option<Vec<String>> {
    let parsed = url::Url::parse(url).ok()?;
    let segments = parsed.path_segments()?;
    Some(
        segments
            .filter(|s| !s.is_empty())
            .map(crate::detect::url::percent_decode_path)
            .collect(),
    )
}

/// The params a path names under `pattern`: the whole pattern at the end of the path
/// (an item), or the pattern without its last placeholder (the collection a record is
/// created in). A numeric segment becomes a number, as the vendors' tools take it.
fn match_path(pattern: &[PathPart], segments: &[String]) -> Option<Map<String, Value>> {
    let collection = match pattern.split_last() {
        Some((PathPart::Param(_), rest)) => Some(rest),
        _ => None,
    };
    [Some(pattern), collection]
        .into_iter()
        .flatten()
        .filter(|p| !p.is_empty() && p.len() <= segments.len())
        .find_map(|pattern| {
            let tail = &segments[segments.len() - pattern.len()..];
            let mut params = Map::new();
            for (part, segment) in pattern.iter().zip(tail) {
                match part {
                    PathPart::Literal(text) if text == segment => {}
                    PathPart::Literal(_) => return None,
                    PathPart::Param(name) if name.is_empty() => {}
                    PathPart::Param(name) => {
                        params.insert(name.clone(), segment_value(segment));
                    }
                }
            }
            (!params.is_empty()).then_some(params)
        })
}

/// `12` as the number 12, anything else (`0012`, `abc`) as text.
fn segment_value(segment: &str) -> Value {
    let numeric = !segment.is_empty()
        && segment.len() <= 15
        && segment.bytes().all(|b| b.is_ascii_digit())
        && !(segment.len() > 1 && segment.starts_with('0'));
    match segment.parse::<u64>() {
        Ok(n) if numeric => Value::from(n),
        _ => Value::String(segment.to_owned()),
    }
}

fn id_of(recipe: &Recipe, action: &Action, result: &Value) -> Option<String> {
    recipe.read.id.iter().find_map(|source| {
        source
            .get(action.target.as_deref(), &action.params, result)
            .as_ref()
            .and_then(scalar_text)
            .filter(|t| !t.trim().is_empty())
    })
}

async fn read_back(
    recipe: &Recipe,
    ctx: &ReadContext<'_>,
    action: &Action,
    result: &Value,
) -> Finding {
    let mut evidence = Evidence::new(recipe.name.clone());
    let id = id_of(recipe, action, result);
    if let Some(id) = &id {
        evidence.id("id", id);
    }
    let base = ctx.base_url(&recipe.system, recipe.base_url.as_deref());
    if recipe.read.url.uses_base() && base.is_none() {
        return Finding::degraded(
            format!(
                "no base url for {}: set {} or configure one",
                recipe.system,
                super::env::base_url_var(&recipe.system)
            ),
            evidence,
        );
    }
    let vars = Vars {
        base: base.as_deref(),
        id: id.as_deref(),
        params: &action.params,
        result,
    };
    let request = match request(recipe, ctx, &vars) {
        Ok(request) => request,
        Err(reason) => return Finding::degraded(reason, evidence),
    };
    let fetched = match ctx.fetch(&request).await {
        Ok(fetched) => fetched,
        Err(error) => return Finding::degraded(error.to_string(), evidence),
    };
    evidence.status = Some(fetched.status);
    evidence.attempts = Some(fetched.attempts);
    let body = &fetched.body;
    if let Some(reason) = api_refused(recipe, body) {
        return Finding::degraded(reason, evidence);
    }
    let record = match &recipe.read.record {
        Some(pointer) => pointer.lookup(body, Some(&vars)).filter(|r| !r.is_null()),
        None => Some(body.clone()),
    };
    let Some(record) = record else {
        return match recipe.read.missing {
            Missing::Degrade => Finding::degraded("record not found in the response", evidence),
            Missing::Contradict => {
                evidence.fields.push(FieldResult {
                    field: "record".to_owned(),
                    want: Value::String("present".to_owned()),
                    got: Value::Null,
                    ok: false,
                });
                Finding::Compared(evidence)
            }
        };
    };
    for field in &recipe.compare.fields {
        let Some(want) = field
            .want
            .get(action.target.as_deref(), &action.params, result)
        else {
            continue;
        };
        let got = field.got.lookup(&record, Some(&vars));
        evidence.fields.push(FieldResult::compare(
            &field.name,
            &want,
            got.as_ref(),
            Rule::from(field.rule),
            field.private,
        ));
    }
    for check in &recipe.compare.checks {
        evidence.fields.push(run_check(check, &record, &vars));
    }
    Finding::Compared(evidence)
}

/// The HTTP request a recipe makes; `Err` is a degrade reason.
fn request(recipe: &Recipe, ctx: &ReadContext<'_>, vars: &Vars<'_>) -> Result<ReadRequest, String> {
    let read = &recipe.read;
    let missing = |name: String| format!("cannot fill {name} in the read");
    let url = read.url.render(vars, Encoding::Url).map_err(missing)?;
    let mut headers = vec![("accept".to_owned(), "application/json".to_owned())];
    for (name, template) in &read.headers {
        headers.push((
            name.clone(),
            template.render(vars, Encoding::Plain).map_err(missing)?,
        ));
    }
    if let Some(auth) = &recipe.auth {
        let secret = ctx.credential(&recipe.system, &auth.env).ok_or_else(|| {
            format!(
                "missing credential: {} is not set, so {} cannot be read back",
                ctx.credential_var(&recipe.system, &auth.env),
                recipe.system
            )
        })?;
        let value = match auth.scheme {
            Scheme::Bearer => format!("Bearer {secret}"),
            Scheme::Basic => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(secret.as_bytes())
            ),
            Scheme::Raw => secret,
        };
        let header = auth
            .header
            .clone()
            .unwrap_or_else(|| "authorization".to_owned());
        headers.push((header, value));
    }
    let body = match &read.graphql {
        Some(graphql) => {
            let mut variables = Map::new();
            for (name, template) in &graphql.variables {
                variables.insert(name.clone(), template.render_value(vars).map_err(missing)?);
            }
            let mut body = Map::new();
            body.insert("query".to_owned(), Value::String(graphql.query.0.clone()));
            body.insert("variables".to_owned(), Value::Object(variables));
            Some(Value::Object(body))
        }
        None => None,
    };
    Ok(ReadRequest {
        method: read.method,
        url,
        headers,
        body,
    })
}

/// An API-level refusal inside a 2xx answer: Slack's `ok: false`, GraphQL `errors`.
fn api_refused(recipe: &Recipe, body: &Value) -> Option<String> {
    if let Some(ok) = &recipe.read.ok {
        if ok.lookup(body, None) == Some(Value::Bool(false)) {
            let why = body
                .get("error")
                .and_then(Value::as_str)
                .map(|e| format!(": {}", super::compare::cut_text(e)))
                .unwrap_or_default();
            return Some(format!("the api answered not ok{why}"));
        }
    }
    if recipe.read.graphql.is_some() {
        if let Some(Value::Array(errors)) = body.get("errors") {
            if !errors.is_empty() {
                return Some(format!(
                    "the graphql api answered {} error(s)",
                    errors.len()
                ));
            }
        }
    }
    None
}

fn run_check(check: &Check, record: &Value, vars: &Vars<'_>) -> FieldResult {
    let (got, ok) = check_value(check, record, Some(vars));
    let want = match &check.test {
        Test::Equals(value) | Test::Contains(value) => cut(value),
        Test::OneOf(values) => cut(&Value::Array(values.clone())),
        Test::Exists(wanted) => {
            Value::String(if *wanted { "present" } else { "absent" }.to_owned())
        }
    };
    FieldResult {
        field: format!("check {}", check.path.as_str()),
        want,
        got: got.as_ref().map_or(Value::Null, cut),
        ok,
    }
}

/// What `check`'s path holds in `value`, and whether the check passes.
fn check_value(check: &Check, value: &Value, vars: Option<&Vars<'_>>) -> (Option<Value>, bool) {
    let got = check.path.lookup(value, vars);
    let present = got.as_ref().is_some_and(|g| !g.is_null());
    let ok = match &check.test {
        Test::Equals(want) => matches(want, got.as_ref()),
        Test::OneOf(wants) => wants.iter().any(|w| matches(w, got.as_ref())),
        Test::Contains(want) => match got.as_ref() {
            Some(Value::Array(items)) => items.iter().any(|i| matches(want, Some(i))),
            Some(Value::String(text)) => want.as_str().is_some_and(|w| text.contains(w)),
            _ => false,
        },
        Test::Exists(wanted) => present == *wanted,
    };
    (got, ok)
}

#[cfg(test)]
mod tests {
    use attest_policy::Verb;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_recipe_names_its_system_by_an_alias_of_the_configured_registry() {
        let recipes = super::super::recipe::parse_recipes(
            "recipes:\n  - name: books.entry\n    system: ledgerly\n    verbs: [update]\n    read: {url: \"{base}/entries/{id}\", id: [params:/id]}\n",
            "books.yaml",
        )
        .unwrap();
        let mut registry = Registry::builtin().unwrap();
        registry
            .extend_yaml(
                "systems:\n  books:\n    aliases: [ledgerly]\n",
                "in-house.yaml",
            )
            .unwrap();
        let action = Action::new("books", Verb::Update).with_params(json!({"id": "e1"}));
        let compiled = RecipeDriver::new(recipes);
        let by_its_own_name =
            Action::new("ledgerly", Verb::Update).with_params(json!({"id": "e1"}));
        assert!(compiled.recipe_for(&by_its_own_name, &json!({})).is_some());
        assert!(compiled.recipe_for(&action, &json!({})).is_none());
        let configured = compiled.with_registry(Arc::new(registry));
        let found = configured.recipe_for(&action, &json!({}));
        assert_eq!(found.map(|r| r.name.as_str()), Some("books.entry"));
    }
}

//! Read-back recipes: YAML that says how to read one kind of write back.
//!
//! A recipe file holds `recipes:`, a list of:
//!
//! ```yaml
//! recipes:
//!   - name: slack.message             # unique; shown in evidence
//!     system: slack                   # the action's system
//!     verbs: [send, create]           # the action's verb is one of these
//!     when:                           # optional: all must hold
//!       params: [/channel, /text]     # these params are present
//!       params_absent: [/thread_ts]   # these are not
//!       result: [/ts]                 # these result fields are present
//!       result_checks: [{path: /object, equals: message}]   # the result shows these
//!     base_url: https://slack.com/api # overridable: ATTEST_BASE_URL_SLACK or code
//!     auth: {env: SLACK_TOKEN}        # scheme: bearer (default) | basic | raw; header: NAME
//!     read:
//!       method: get                   # get (default) | post
//!       url: "{base}/conversations.history?channel={channel}&latest={id}&inclusive=true&limit=1"
//!       id: [result:/ts]              # where {id} comes from: result:/ptr, params:/ptr, target
//!       headers: {Accept: application/json}
//!       graphql: {query: "…", variables: {id: "{id}"}}   # POSTs {query, variables}
//!       ok: /ok                       # an API-level success flag; false degrades
//!       record: /messages/[ts={id}]   # where the record is in the response
//!       missing: contradict           # record absent: degrade (default) | contradict
//!     compare:
//!       fields:                       # want (params:/… or result:/…) against got (in the record)
//!         - {name: text, want: params:/text, got: /text, private: true}
//!       checks:                       # facts the record must show
//!         - {path: /subtype, exists: false}
//! ```
//!
//! Pointers are JSON Pointers with `*` and `[key=value]` (see the pointer module);
//! templates take `{base}`, `{id}`, `{param}`, `{result.field}` (see the template
//! module). Credentials come only from the variable `auth.env` names (or a reader set in
//! code); a recipe never holds a secret.

use std::collections::BTreeMap;

use attest_policy::{lint_slots, Leaf, Problem, Verb};
use serde::Deserialize;
use serde_json::Value;

use super::compare::Rule;
use super::http::ReadMethod;
use super::pointer::Pointer;
use super::template::Template;
use crate::AttestError;

/// The largest recipe file read, in bytes.
pub const MAX_RECIPE_BYTES: usize = 1 << 20;

/// One recipe: how to read one kind of write back and what to compare.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RecipeDe")]
pub struct Recipe {
    pub(crate) name: String,
    pub(crate) system: String,
    pub(crate) verbs: Vec<Verb>,
    pub(crate) when: When,
    pub(crate) base_url: Option<String>,
    pub(crate) auth: Option<Auth>,
    pub(crate) read: Read,
    pub(crate) compare: Compare,
    pub(crate) origin: String,
}

impl Recipe {
    /// The recipe's name (`gmail.send`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The system it reads (`gmail`).
    pub fn system(&self) -> &str {
        &self.system
    }

    /// The verbs it applies to.
    pub fn verbs(&self) -> &[Verb] {
        &self.verbs
    }

    /// Where it was loaded from (a file path, or `builtin:<file>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The environment variable holding its credential, if it needs one.
    pub fn credential_var(&self) -> Option<&str> {
        self.auth.as_ref().map(|a| a.env.as_str())
    }

    /// The default base URL, if the recipe has one.
    pub fn default_base_url(&self) -> Option<&str> {
        self.base_url.as_deref()
    }

    /// The read's URL template, as written.
    pub fn url_template(&self) -> &str {
        self.read.url.as_str()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeDe {
    name: NonEmpty,
    system: NonEmpty,
    verbs: Vec<Verb>,
    #[serde(default)]
    when: When,
    #[serde(default)]
    base_url: Option<NonEmpty>,
    #[serde(default)]
    auth: Option<Auth>,
    read: Read,
    #[serde(default)]
    compare: Compare,
}

impl TryFrom<RecipeDe> for Recipe {
    type Error = String;

    fn try_from(de: RecipeDe) -> Result<Self, String> {
        let name = de.name.0;
        if de.verbs.is_empty() {
            return Err(format!("recipe {name}: `verbs` is empty"));
        }
        if let Some(base) = &de.base_url {
            if !(base.0.starts_with("https://") || base.0.starts_with("http://")) {
                return Err(format!(
                    "recipe {name}: `base_url` must start with https:// or http://"
                ));
            }
        }
        let url = de.read.url.as_str();
        if !(de.read.url.uses_base() || url.starts_with("https://") || url.starts_with("http://")) {
            return Err(format!(
                "recipe {name}: `read.url` must start with {{base}} or an http(s) URL"
            ));
        }
        let needs_id = de.read.url.uses_id()
            || de.read.headers.values().any(Template::uses_id)
            || de
                .read
                .graphql
                .as_ref()
                .is_some_and(|g| g.variables.values().any(Template::uses_id));
        if needs_id && de.read.id.is_empty() {
            return Err(format!(
                "recipe {name}: the read uses {{id}} but `read.id` says nowhere to take it from"
            ));
        }
        if de.read.graphql.is_some() && de.read.method != ReadMethod::Post {
            return Err(format!(
                "recipe {name}: a `graphql` read needs `method: post`"
            ));
        }
        Ok(Recipe {
            name,
            system: de.system.0,
            verbs: de.verbs,
            when: de.when,
            base_url: de.base_url.map(|b| b.0),
            auth: de.auth,
            read: de.read,
            compare: de.compare,
            origin: String::new(),
        })
    }
}

/// Conditions on the action for a recipe to apply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct When {
    #[serde(default)]
    pub(crate) params: Vec<Pointer>,
    #[serde(default)]
    pub(crate) params_absent: Vec<Pointer>,
    #[serde(default)]
    pub(crate) result: Vec<Pointer>,
    /// Facts the result must show (`{path: /object, equals: refund}`).
    #[serde(default)]
    pub(crate) result_checks: Vec<Check>,
}

/// Where the credential comes from and how it is sent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Auth {
    pub(crate) env: String,
    #[serde(default)]
    pub(crate) scheme: Scheme,
    /// The header to send it in (default `Authorization`).
    #[serde(default)]
    pub(crate) header: Option<String>,
}

/// How a credential is written into its header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Scheme {
    /// `Bearer <secret>`.
    #[default]
    Bearer,
    /// `Basic base64(<secret>)`, the secret being `user:password`.
    Basic,
    /// The secret as it is.
    Raw,
}

/// The read: one HTTP request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Read {
    #[serde(default)]
    pub(crate) method: ReadMethod,
    pub(crate) url: Template,
    #[serde(default)]
    pub(crate) id: Vec<Source>,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, Template>,
    #[serde(default)]
    pub(crate) graphql: Option<GraphQl>,
    #[serde(default)]
    pub(crate) ok: Option<Pointer>,
    #[serde(default)]
    pub(crate) record: Option<Pointer>,
    #[serde(default)]
    pub(crate) missing: Missing,
}

/// A GraphQL query and its variables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GraphQl {
    pub(crate) query: NonEmpty,
    #[serde(default)]
    pub(crate) variables: BTreeMap<String, Template>,
}

/// What an absent record means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Missing {
    /// The check could not run (the default: a wrong id or a permission looks the same).
    #[default]
    Degrade,
    /// The write was lost: a listing that must hold it does not.
    Contradict,
}

/// What to compare.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Compare {
    #[serde(default)]
    pub(crate) fields: Vec<Field>,
    #[serde(default)]
    pub(crate) checks: Vec<Check>,
}

/// One intended field.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Field {
    pub(crate) name: NonEmpty,
    pub(crate) want: Source,
    pub(crate) got: Pointer,
    #[serde(default)]
    pub(crate) rule: RuleDe,
    /// Keep only hashes in evidence (message bodies, document text).
    #[serde(default)]
    pub(crate) private: bool,
}

/// The comparison rule as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RuleDe {
    /// Equality by the comparison rules.
    #[default]
    Auto,
    /// The wanted text appears in what is there.
    Contains,
}

impl From<RuleDe> for Rule {
    fn from(rule: RuleDe) -> Self {
        match rule {
            RuleDe::Auto => Rule::Auto,
            RuleDe::Contains => Rule::Contains,
        }
    }
}

/// A fact the record must show.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "CheckDe")]
pub(crate) struct Check {
    pub(crate) path: Pointer,
    pub(crate) test: Test,
}

/// What a check tests.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Test {
    /// Equal by the comparison rules.
    Equals(Value),
    /// A list holding the value (or text holding the text).
    Contains(Value),
    /// One of these values.
    OneOf(Vec<Value>),
    /// Present (or absent).
    Exists(bool),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckDe {
    path: Pointer,
    #[serde(default)]
    equals: Option<Value>,
    #[serde(default)]
    contains: Option<Value>,
    #[serde(default)]
    one_of: Option<Vec<Value>>,
    #[serde(default)]
    exists: Option<bool>,
}

impl TryFrom<CheckDe> for Check {
    type Error = String;

    fn try_from(de: CheckDe) -> Result<Self, String> {
        let tests: Vec<Test> = [
            de.equals.map(Test::Equals),
            de.contains.map(Test::Contains),
            de.one_of.map(Test::OneOf),
            de.exists.map(Test::Exists),
        ]
        .into_iter()
        .flatten()
        .collect();
        match <[Test; 1]>::try_from(tests) {
            Ok([test]) => Ok(Check {
                path: de.path,
                test,
            }),
            Err(_) => Err(format!(
                "check on {}: give exactly one of `equals`, `contains`, `one_of`, `exists`",
                de.path.as_str()
            )),
        }
    }
}

/// Where a value comes from: `params:/ptr`, `result:/ptr` or `target`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
pub(crate) enum Source {
    /// A pointer into the action's params.
    Params(Pointer),
    /// A pointer into the tool's result.
    Result(Pointer),
    /// The action's target.
    Target,
}

impl TryFrom<String> for Source {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text == "target" {
            return Ok(Source::Target);
        }
        if let Some(ptr) = text.strip_prefix("params:") {
            return Pointer::parse(ptr).map(Source::Params);
        }
        if let Some(ptr) = text.strip_prefix("result:") {
            return Pointer::parse(ptr).map(Source::Result);
        }
        Err(format!(
            "source {text:?}: expected `params:/pointer`, `result:/pointer` or `target`"
        ))
    }
}

impl Source {
    /// The value this source names for an action and its result.
    pub(crate) fn get(
        &self,
        target: Option<&str>,
        params: &Value,
        result: &Value,
    ) -> Option<Value> {
        match self {
            Source::Params(ptr) => ptr.lookup(params, None),
            Source::Result(ptr) => ptr.lookup(result, None),
            Source::Target => target.map(|t| Value::String(t.to_owned())),
        }
        .filter(|v| !v.is_null())
    }
}

impl<'de> Deserialize<'de> for Pointer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Pointer::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Template::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for ReadMethod {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "get" => Ok(ReadMethod::Get),
            "post" => Ok(ReadMethod::Post),
            _ => Err(serde::de::Error::custom(format!(
                "method {text:?}: expected get or post (reads never change anything)"
            ))),
        }
    }
}

/// A string that is not empty after trimming.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(crate) struct NonEmpty(pub(crate) String);

impl TryFrom<String> for NonEmpty {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("empty string".to_owned());
        }
        Ok(NonEmpty(trimmed.to_owned()))
    }
}

impl std::ops::Deref for NonEmpty {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    /// Each recipe is a [`Leaf`], so that `attest recipes check` reports a mistake in every
    /// recipe, not only the first ([`lint_slots`]).
    recipes: Vec<Leaf<Recipe>>,
}

/// Parses a recipe file; `origin` names it in errors and in each recipe.
pub fn parse_recipes(text: &str, origin: &str) -> Result<Vec<Recipe>, AttestError> {
    parse(text, origin).map_err(|p| AttestError::Recipe {
        origin: p.origin,
        line: p.line,
        column: p.column,
        message: p.message,
    })
}

/// Checks a recipe file and returns every problem found (empty: it loads), in file
/// order. What `attest recipes check` prints. Each recipe's mistake is reported (a YAML
/// syntax error ends the search at its line); names used twice are each reported.
pub fn lint_recipes(text: &str, origin: &str) -> Vec<Problem> {
    match parse(text, origin) {
        Ok(recipes) => duplicates(&recipes, text, origin),
        Err(problem) if problem.line == 0 => vec![problem],
        Err(_) => lint_slots::<RecipeFile>(text, origin),
    }
}

fn parse(text: &str, origin: &str) -> Result<Vec<Recipe>, Problem> {
    let problem = |line, column, message: String| Problem {
        origin: origin.to_owned(),
        line,
        column,
        message,
    };
    if text.len() > MAX_RECIPE_BYTES {
        return Err(problem(
            0,
            0,
            format!("larger than {MAX_RECIPE_BYTES} bytes"),
        ));
    }
    let file: RecipeFile = serde_yaml::from_str(text).map_err(|error| {
        let (line, column) = error.location().map_or((0, 0), |l| (l.line(), l.column()));
        // serde_yaml repeats the place in the text; the problem carries it already.
        let place = format!(" at line {line} column {column}");
        let message = error.to_string().replacen(&place, "", 1);
        problem(line, column, message)
    })?;
    Ok(file
        .recipes
        .into_iter()
        // Outside a lint nothing is skipped: every recipe is a value.
        .filter_map(|leaf| match leaf {
            Leaf::Value(recipe) => Some(recipe),
            Leaf::Absent | Leaf::Skipped => None,
        })
        .map(|mut recipe| {
            recipe.origin = origin.to_owned();
            recipe
        })
        .collect())
}

fn duplicates(recipes: &[Recipe], text: &str, origin: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (i, recipe) in recipes.iter().enumerate() {
        if recipes[..i].iter().any(|r| r.name == recipe.name) {
            problems.push(Problem {
                origin: origin.to_owned(),
                line: line_of_name(text, &recipe.name, 2),
                column: 0,
                message: format!("recipe name {:?} is used twice", recipe.name),
            });
        }
    }
    problems
}

/// The 1-based line of the `nth` `name: <name>` in `text` (0 when not found).
pub(crate) fn line_of_name(text: &str, name: &str, nth: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let l = line.trim_start().trim_start_matches("- ").trim_start();
            l.strip_prefix("name:")
                .is_some_and(|rest| rest.trim().trim_matches(['"', '\'']) == name)
        })
        .nth(nth.saturating_sub(1))
        .map_or(0, |(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
recipes:
  - name: demo.get
    system: demo
    verbs: [create]
    base_url: https://api.example.com
    auth: {env: DEMO_TOKEN}
    read:
      url: "{base}/things/{id}"
      id: [result:/id]
    compare:
      fields:
        - {name: title, want: params:/title, got: /title}
      checks:
        - {path: /state, one_of: [open, new]}
"#;

    #[test]
    fn parses_a_recipe() {
        let recipes = parse_recipes(GOOD, "demo.yaml").unwrap();
        assert_eq!(recipes.len(), 1);
        assert_eq!(recipes[0].name(), "demo.get");
        assert_eq!(recipes[0].credential_var(), Some("DEMO_TOKEN"));
        assert_eq!(recipes[0].origin(), "demo.yaml");
        assert!(lint_recipes(GOOD, "demo.yaml").is_empty());
    }

    #[test]
    fn problems_name_the_line() {
        let cases = [
            (
                GOOD.replace("verbs: [create]", "verbs: [creat]"),
                4,
                "creat",
            ),
            (
                GOOD.replace("{base}/things/{id}", "{base}/things/{id"),
                9,
                "unclosed",
            ),
            (GOOD.replace("result:/id", "reslt:/id"), 10, "source"),
            (
                GOOD.replace("one_of: [open, new]", "one_of: [open], exists: true"),
                15,
                "exactly one",
            ),
            (
                GOOD.replace("got: /title", "got: title"),
                13,
                "must start with",
            ),
            (GOOD.replace("auth:", "auht:"), 6, "unknown field"),
            (GOOD.replace("      id: [result:/id]\n", ""), 3, "read.id"),
        ];
        for (text, line, needle) in cases {
            let problems = lint_recipes(&text, "demo.yaml");
            assert_eq!(problems.len(), 1, "{text}");
            let p = &problems[0];
            assert!(p.message.contains(needle), "{p}");
            assert!(!p.message.contains(" at line "), "{p}");
            assert!(
                p.line.abs_diff(line) <= 1,
                "{needle}: line {} not near {line}: {p}",
                p.line
            );
        }
    }

    #[test]
    fn duplicate_names_are_reported_at_the_second() {
        let text = format!("{GOOD}{}", GOOD.replace("recipes:\n", ""));
        let problems = lint_recipes(&text, "d.yaml");
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].line, 17);
        assert!(lint_recipes(&"x".repeat(MAX_RECIPE_BYTES + 1), "big").len() == 1);
    }
}

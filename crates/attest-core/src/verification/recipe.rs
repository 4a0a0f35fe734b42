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

use std::fmt;
use std::marker::PhantomData;

use attest_policy::{check_slot, checked_map, lint_slots, Leaf, Problem, Verb};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
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
#[derive(Debug, Clone)]
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

/// A recipe as written. Each value is a [`Leaf`], so that `attest recipes check` reports
/// a mistake in every value, not only the first of the recipe; the checks that look at
/// several values run in a [`check_slot`] each, for the same reason.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeDe {
    #[serde(default)]
    name: Leaf<NonEmpty>,
    #[serde(default)]
    system: Leaf<NonEmpty>,
    #[serde(default)]
    verbs: Leaf<Verbs>,
    #[serde(default)]
    when: Leaf<When>,
    #[serde(default)]
    base_url: Leaf<Option<HttpUrl>>,
    #[serde(default)]
    auth: Leaf<Option<Auth>>,
    #[serde(default)]
    read: Leaf<ReadDe>,
    #[serde(default)]
    compare: Leaf<Compare>,
}

/// One entry of `recipes:`: the recipe, or `None` when the lint skipped one of its values
/// (its mistake is reported; outside a lint nothing is skipped).
struct RecipeSlot(Option<Recipe>);

impl<'de> Deserialize<'de> for RecipeSlot {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a recipe with name, system, verbs and read",
            RecipeSlot::check,
        )
    }
}

/// `Err` naming `key` when it is missing (a skipped value is not missing).
fn present<T>(leaf: &Leaf<T>, key: &str) -> Result<(), String> {
    match leaf {
        Leaf::Absent => Err(format!("missing field `{key}`")),
        Leaf::Value(_) | Leaf::Skipped => Ok(()),
    }
}

/// The value read; `None` when absent or skipped.
fn value<T>(leaf: Leaf<T>) -> Option<T> {
    match leaf {
        Leaf::Value(value) => Some(value),
        Leaf::Absent | Leaf::Skipped => None,
    }
}

/// The value read, or its default when absent; `None` when skipped.
fn value_or_default<T: Default>(leaf: Leaf<T>) -> Option<T> {
    match leaf {
        Leaf::Value(value) => Some(value),
        Leaf::Absent => Some(T::default()),
        Leaf::Skipped => None,
    }
}

impl RecipeSlot {
    /// The checks that look at several values, each in its own slot, and then the recipe.
    /// A check whose values the lint skipped says nothing.
    fn check(de: RecipeDe) -> Result<RecipeSlot, String> {
        let label = match &de.name {
            Leaf::Value(name) => format!("recipe {}: ", name.0),
            Leaf::Absent | Leaf::Skipped => String::new(),
        };
        check_slot(|| present(&de.name, "name"))?;
        check_slot(|| present(&de.system, "system"))?;
        check_slot(|| present(&de.verbs, "verbs"))?;
        check_slot(|| present(&de.read, "read"))?;
        check_slot(|| match &de.read {
            Leaf::Value(read) => read.check_id(&label),
            Leaf::Absent | Leaf::Skipped => Ok(()),
        })?;
        check_slot(|| match &de.read {
            Leaf::Value(read) => read.check_graphql(&label),
            Leaf::Absent | Leaf::Skipped => Ok(()),
        })?;
        let recipe = (|| {
            Some(Recipe {
                name: value(de.name)?.0,
                system: value(de.system)?.0,
                verbs: value(de.verbs)?.0,
                when: value_or_default(de.when)?,
                base_url: value_or_default(de.base_url)?.map(|b| b.0),
                auth: value_or_default(de.auth)?,
                read: value(de.read)?.into_read()?,
                compare: value_or_default(de.compare)?,
                origin: String::new(),
            })
        })();
        Ok(RecipeSlot(recipe))
    }
}

/// `verbs:`, a non-empty list of verbs.
#[derive(Debug)]
struct Verbs(Vec<Verb>);

impl<'de> Deserialize<'de> for Verbs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct VerbsVisitor;

        impl<'de> Visitor<'de> for VerbsVisitor {
            type Value = Verbs;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of verbs such as [send, create]")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Verbs, A::Error> {
                let mut verbs = Vec::new();
                while let Some(verb) = seq.next_element::<Verb>()? {
                    verbs.push(verb);
                }
                // Raised inside the list's visitor, so that it is reported at the list.
                if verbs.is_empty() {
                    return Err(de::Error::custom("`verbs` is empty"));
                }
                Ok(Verbs(verbs))
            }
        }

        deserializer.deserialize_seq(VerbsVisitor)
    }
}

/// An `http://` or `https://` URL (`base_url`).
#[derive(Debug)]
struct HttpUrl(String);

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(deserializer, "an http(s) URL", |text| {
            let NonEmpty(url) = NonEmpty::try_from(text.to_owned())?;
            if url.starts_with("https://") || url.starts_with("http://") {
                Ok(HttpUrl(url))
            } else {
                Err("`base_url` must start with https:// or http://".to_owned())
            }
        })
    }
}

/// `read.url`: a template that starts with `{base}` or an http(s) URL.
#[derive(Debug)]
struct ReadUrl(Template);

impl<'de> Deserialize<'de> for ReadUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(deserializer, "a URL template", |text| {
            let url = Template::parse(text)?;
            let at = url.as_str();
            if url.uses_base() || at.starts_with("https://") || at.starts_with("http://") {
                Ok(ReadUrl(url))
            } else {
                Err("`read.url` must start with {base} or an http(s) URL".to_owned())
            }
        })
    }
}

/// Reads a scalar as text and parses it inside the scalar's visitor, so that a mistake is
/// reported at the scalar (not at the mapping around it).
fn from_str<'de, D, T>(
    deserializer: D,
    expecting: &'static str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct TextVisitor<F, T> {
        expecting: &'static str,
        parse: F,
        marker: PhantomData<fn() -> T>,
    }

    impl<F: FnOnce(&str) -> Result<T, String>, T> Visitor<'_> for TextVisitor<F, T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.expecting)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            (self.parse)(v).map_err(E::custom)
        }
    }

    deserializer.deserialize_str(TextVisitor {
        expecting,
        parse,
        marker: PhantomData,
    })
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
#[derive(Debug, Clone)]
pub(crate) struct Read {
    pub(crate) method: ReadMethod,
    pub(crate) url: Template,
    pub(crate) id: Vec<Source>,
    pub(crate) headers: BTreeMap<String, Template>,
    pub(crate) graphql: Option<GraphQl>,
    pub(crate) ok: Option<Pointer>,
    pub(crate) record: Option<Pointer>,
    pub(crate) missing: Missing,
}

/// `read:` as written, each value a [`Leaf`] of its own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadFields {
    #[serde(default)]
    method: Leaf<ReadMethod>,
    #[serde(default)]
    url: Leaf<ReadUrl>,
    #[serde(default)]
    id: Leaf<Vec<Source>>,
    #[serde(default)]
    headers: Leaf<BTreeMap<String, Template>>,
    #[serde(default)]
    graphql: Leaf<Option<GraphQl>>,
    #[serde(default)]
    ok: Leaf<Option<Pointer>>,
    #[serde(default)]
    record: Leaf<Option<Pointer>>,
    #[serde(default)]
    missing: Leaf<Missing>,
}

/// `read:` with its `url` (the recipe checks the rest, with the recipe's name).
struct ReadDe(ReadFields);

impl<'de> Deserialize<'de> for ReadDe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        checked_map(
            deserializer,
            "a read such as {url: \"{base}/things/{id}\", id: [result:/id]}",
            |fields: ReadFields| {
                present(&fields.url, "url")?;
                Ok(ReadDe(fields))
            },
        )
    }
}

impl ReadDe {
    /// A read that uses `{id}` says where to take it from (unless the lint skipped `id`).
    fn check_id(&self, label: &str) -> Result<(), String> {
        let read = &self.0;
        let needs_id = matches!(&read.url, Leaf::Value(url) if url.0.uses_id())
            || matches!(&read.headers, Leaf::Value(h) if h.values().any(Template::uses_id))
            || matches!(&read.graphql, Leaf::Value(Some(g)) if g.variables.values().any(Template::uses_id));
        let has_id = match &read.id {
            Leaf::Value(id) => !id.is_empty(),
            Leaf::Absent => false,
            Leaf::Skipped => true,
        };
        if needs_id && !has_id {
            return Err(format!(
                "{label}the read uses {{id}} but `read.id` says nowhere to take it from"
            ));
        }
        Ok(())
    }

    /// A `graphql` read posts (unless the lint skipped `graphql` or `method`).
    fn check_graphql(&self, label: &str) -> Result<(), String> {
        let read = &self.0;
        let posts = match &read.method {
            Leaf::Value(method) => *method == ReadMethod::Post,
            Leaf::Absent => false,
            Leaf::Skipped => true,
        };
        if matches!(&read.graphql, Leaf::Value(Some(_))) && !posts {
            return Err(format!("{label}a `graphql` read needs `method: post`"));
        }
        Ok(())
    }

    /// The read, unless the lint skipped one of its values.
    fn into_read(self) -> Option<Read> {
        let read = self.0;
        Some(Read {
            method: value_or_default(read.method)?,
            url: value(read.url)?.0,
            id: value_or_default(read.id)?,
            headers: value_or_default(read.headers)?,
            graphql: value_or_default(read.graphql)?,
            ok: value_or_default(read.ok)?,
            record: value_or_default(read.record)?,
            missing: value_or_default(read.missing)?,
        })
    }
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
#[derive(Debug, Clone)]
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

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Checked inside the mapping's visitor, so that a mistake is reported at the check.
        checked_map(
            deserializer,
            "a check such as {path: /state, equals: open}",
            <Check as TryFrom<CheckDe>>::try_from,
        )
    }
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
#[derive(Debug, Clone)]
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

impl<'de> Deserialize<'de> for Source {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(
            deserializer,
            "`params:/pointer`, `result:/pointer` or `target`",
            |text| Source::try_from(text.to_owned()),
        )
    }
}

impl<'de> Deserialize<'de> for Pointer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(deserializer, "a JSON pointer", Pointer::parse)
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(deserializer, "a template", Template::parse)
    }
}

impl<'de> Deserialize<'de> for ReadMethod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(deserializer, "get or post", |text| {
            match text.to_ascii_lowercase().as_str() {
                "get" => Ok(ReadMethod::Get),
                "post" => Ok(ReadMethod::Post),
                _ => Err(format!(
                    "method {text:?}: expected get or post (reads never change anything)"
                )),
            }
        })
    }
}

/// A string that is not empty after trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NonEmpty(pub(crate) String);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        from_str(deserializer, "a non-empty string", |text| {
            NonEmpty::try_from(text.to_owned())
        })
    }
}

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    /// Each recipe is a [`Leaf`] (and each of its values), so that `attest recipes check`
    /// reports every mistake, not only the first ([`lint_slots`]).
    recipes: Vec<Leaf<RecipeSlot>>,
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
/// order. What `attest recipes check` prints. Every value of a recipe and of its `read`
/// can contribute a problem at its own line and column, and each check that looks at
/// several values (`read.id`, a `graphql` read's method, a missing field) one at the
/// recipe's; an unknown key skips the rest of its recipe, and a YAML syntax error ends the
/// search at its line. Names used twice are each reported.
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
            Leaf::Value(RecipeSlot(recipe)) => recipe,
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
    fn every_mistake_in_a_recipe_is_reported_at_its_place() {
        let text = concat!(
            "recipes:\n",                          // 1
            "  - name: a\n",                       // 2
            "    system: y\n",                     // 3
            "    verbs: []\n",                     // 4
            "    base_url: ftp://x\n",             // 5
            "    read:\n",                         // 6
            "      method: put\n",                 // 7
            "      url: \"/things/{id}\"\n",       // 8
            "      record: nope\n",                // 9
            "  - name: b\n",                       // 10
            "    verbs: [send]\n",                 // 11
            "    read:\n",                         // 12
            "      url: \"{base}/q/{id}\"\n",      // 13
            "      graphql: {query: \"{ x }\"}\n", // 14
            "  - name: ok\n",                      // 15
            "    system: y\n",                     // 16
            "    verbs: [send]\n",                 // 17
            "    read: {method: post, url: \"{base}/q/{id}\", id: [target], graphql: {query: q}}\n",
        );
        let problems = lint_recipes(text, "r.yaml");
        let places: Vec<(usize, usize)> = problems.iter().map(|p| (p.line, p.column)).collect();
        assert_eq!(
            places,
            [
                (4, 12),
                (5, 15),
                (7, 15),
                (8, 12),
                (9, 15),
                (10, 5),
                (10, 5),
                (10, 5)
            ],
            "{problems:#?}"
        );
        for (problem, says) in problems.iter().zip([
            "`verbs` is empty",
            "`base_url` must start with",
            "expected get or post",
            "`read.url` must start with",
            "must start with",
            "missing field `system`",
            "recipe b: the read uses {id} but `read.id` says nowhere",
            "recipe b: a `graphql` read needs `method: post`",
        ]) {
            assert!(problem.message.contains(says), "{problem}");
        }
        // A value the lint skipped does not make the checks that use it complain.
        let skipped = concat!(
            "recipes:\n",
            "  - name: c\n",
            "    system: y\n",
            "    verbs: [send]\n",
            "    read:\n",
            "      method: put\n",
            "      url: \"{base}/q/{id}\"\n",
            "      id: [reslt:/id]\n",
            "      graphql: {query: q}\n",
        );
        let problems = lint_recipes(skipped, "s.yaml");
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [6, 8], "{problems:#?}");
        // A load reports the first, as before.
        let error = parse_recipes(text, "r.yaml").unwrap_err().to_string();
        assert!(error.contains("`verbs` is empty"), "{error}");
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

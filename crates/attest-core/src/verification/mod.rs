//! Verification: how sure Attest is that an action did what it claimed.
//!
//! The ladder, tried once per action that ran:
//! 1. **read-back**: the caller's own read-back for this call
//!    ([`CustomCheck::read_back`]), else the first [`ReadBackDriver`] that supports the
//!    action reads it back from the system of record and compares ([`RecipeDriver`],
//!    [`OpenApiDriver`], [`ConventionDriver`]), else a surface's own read-back tried after
//!    the drivers ([`McpPair`] through an MCP server's getter, [`caller_read_back`] with an
//!    HTTP caller's credentials); read-back beats a yes/no custom check;
//! 2. else the caller's yes/no [`CustomCheck`];
//! 3. else the acknowledgement driver ([`acknowledges`]).
//!
//! A check that could not run (network error, timeout, 404, not JSON, nothing fetched,
//! a missing credential, a driver error) degrades to `acknowledged` or `attested-only`
//! with its reason kept as evidence; it is never `unverified`. `unverified` means a check
//! ran and contradicted the intent. A read-back that found the record but had no intended
//! field to compare is `acknowledged` ("found; nothing comparable").
//!
//! The ledger row keeps the level, the method (`read-back:<driver>`, `custom`, `ack`,
//! `none`), whether it matched, and evidence: ids and per-field want/got/ok, values cut
//! to [`EVIDENCE_MAX_CHARS`] characters; never bodies, headers or secrets.

mod ack;
mod catalog;
mod compare;
mod convention;
mod custom;
mod env;
mod finding;
mod http;
mod judged;
mod level;
mod mcp_pair;
pub(crate) mod openapi;
mod pointer;
mod readback;
mod recipe;
mod recipe_driver;
mod reconcile;
mod template;

use attest_ledger::Verification;
use attest_policy::Action;
use serde_json::{Map, Value};

pub use ack::acknowledges;
pub use catalog::{builtin as builtin_recipes, load_dir as load_recipe_dir, BUILTIN_RECIPES};
pub use catalog::{read_recipe_file, recipe_files};
pub use compare::{cut, FieldResult, EVIDENCE_MAX_CHARS};
pub use convention::{caller_read_back, without_query, ConventionDriver};
pub use custom::CustomCheck;
pub use env::{base_url_var, Credentials, Env, ProcessEnv};
pub use finding::{Evidence, Finding};
pub use http::{FetchError, Fetched, HttpOptions, HttpReader, ReadMethod, ReadRequest};
pub use judged::{caller_check, CallerCheck, CheckCancelled, Judgement, JudgementSlot};
pub use level::Level;
pub use mcp_pair::{pair_getter, ListedTool, McpPair, ToolCaller};
pub use openapi::OpenApiDriver;
pub use readback::{ReadBack, ReadBackDriver, ReadContext};
pub use recipe::{lint_recipes, parse_recipes, Recipe, MAX_RECIPE_BYTES};
pub use recipe_driver::RecipeDriver;
pub(crate) use reconcile::{read_outcome, ReadOutcome};

/// Verifies a result by the ladder: read-back, else the custom check, else the
/// acknowledgement driver.
pub(crate) async fn verify(
    action: &Action,
    result: &Value,
    check: Option<&CustomCheck>,
    readback: Option<&ReadBack>,
) -> (Level, Verification) {
    // Drivers read the call as a whole: an HTTP call's path parameters are params too.
    let view;
    let action = if action.extra.path_params.is_empty() {
        action
    } else {
        let mut whole = action.clone();
        whole.params = action.call_params().into_owned();
        view = whole;
        &view
    };
    let ack_level = if acknowledges(result) {
        Level::Acknowledged
    } else {
        Level::AttestedOnly
    };
    let mut found = None;
    let first = check.filter(|c| !c.is_fallback());
    if let Some(check) = first {
        found = check.read(action, result).await;
    }
    if let (None, Some(readback)) = (&found, readback) {
        // An HTTP answer (`{"status", "body"}`) is read as its body, as a vendor's
        // tools return it, so a recipe written for those works on the gateway too.
        let answer = match action.extra.url {
            Some(_) => crate::touched::payload(result),
            None => result,
        };
        found = readback.check(action, answer).await;
    }
    if let (None, Some(check)) = (&found, check.filter(|c| c.is_fallback())) {
        found = check.read(action, result).await;
    }
    if let Some((driver, finding)) = found {
        let level = finding.level(ack_level);
        let matched = finding.matched();
        let method = format!("read-back:{driver}");
        return (
            level,
            verification(level, &method, matched, finding.into_evidence()),
        );
    }
    let outcome = match check {
        Some(check) => check.run(action, result).await,
        None => None,
    };
    let Some(outcome) = outcome else {
        return (ack_level, verification(ack_level, "ack", None, Map::new()));
    };
    match outcome {
        Ok(true) => (
            Level::VerifiedCustom,
            verification(Level::VerifiedCustom, "custom", Some(true), Map::new()),
        ),
        Ok(false) => (
            Level::Unverified,
            verification(Level::Unverified, "custom", Some(false), Map::new()),
        ),
        Err(err) => {
            // The error text may carry tokens or bodies; the ledger keeps only that it
            // failed, or that it was cancelled (the tool ran, its check did not finish).
            let why = if err.is::<CheckCancelled>() {
                "custom check cancelled"
            } else {
                "custom check could not run"
            };
            let mut evidence = Map::new();
            evidence.insert("degraded".to_owned(), Value::String(why.to_owned()));
            (ack_level, verification(ack_level, "custom", None, evidence))
        }
    }
}

fn verification(
    level: Level,
    method: &str,
    matched: Option<bool>,
    evidence: Map<String, Value>,
) -> Verification {
    Verification {
        level: level.as_str().to_owned(),
        method: method.to_owned(),
        matched,
        evidence,
    }
}

//! `attest recipes list|check`: the read-back recipes Attest knows, and a linter for
//! recipe files.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use attest_core::verification::{
    base_url_var, builtin_recipes, lint_recipes, load_recipe_dir, read_recipe_file, recipe_files,
    Recipe,
};
use serde_json::json;

use crate::cli::{Global, RecipesCommand, RecipesListArgs};
use crate::config::Config;

pub(crate) fn run(global: &Global, command: &RecipesCommand) -> anyhow::Result<ExitCode> {
    match command {
        RecipesCommand::List(args) => list(global, args),
        RecipesCommand::Check(args) => check(&args.path),
    }
}

/// The built-in recipes, after those in `--dir` (else the configuration's `recipes`
/// directories), in the order read-back tries them.
fn list(global: &Global, args: &RecipesListArgs) -> anyhow::Result<ExitCode> {
    let dirs = match &args.dir {
        Some(dir) => vec![dir.clone()],
        None => Config::load(global)?.settings.file.recipes,
    };
    let mut recipes = Vec::new();
    for dir in &dirs {
        let loaded = load_recipe_dir(dir)
            .with_context(|| format!("cannot load the recipe directory {}", dir.display()))?;
        for recipe in loaded {
            if !recipes
                .iter()
                .any(|old: &Recipe| old.name() == recipe.name())
            {
                recipes.push(recipe);
            }
        }
    }
    recipes.extend(builtin_recipes().context("the built-in recipes do not load")?);
    let mut out = std::io::stdout().lock();
    if args.json {
        let rows: Vec<_> = recipes.iter().map(row).collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<24} {:<16} {:<28} {:<22} BASE URL",
        "NAME", "SYSTEM", "VERBS", "CREDENTIAL"
    )?;
    for recipe in &recipes {
        let verbs: Vec<&str> = recipe.verbs().iter().map(|v| v.as_str()).collect();
        writeln!(
            out,
            "{:<24} {:<16} {:<28} {:<22} {}",
            recipe.name(),
            recipe.system(),
            verbs.join(","),
            recipe.credential_var().unwrap_or("-"),
            base_url(recipe)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn base_url(recipe: &Recipe) -> String {
    match recipe.default_base_url() {
        Some(url) => url.to_owned(),
        None => format!("(set {})", base_url_var(recipe.system())),
    }
}

fn row(recipe: &Recipe) -> serde_json::Value {
    json!({
        "name": recipe.name(),
        "system": recipe.system(),
        "verbs": recipe.verbs().iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        "credential_env": recipe.credential_var(),
        "base_url": recipe.default_base_url(),
        "base_url_env": base_url_var(recipe.system()),
        "origin": recipe.origin(),
    })
}

/// Lints every recipe file in `path` (a directory, or one file). Exit 1 when any
/// problem is found.
fn check(path: &Path) -> anyhow::Result<ExitCode> {
    let files = if path.is_dir() {
        recipe_files(path)?
    } else {
        vec![path.to_owned()]
    };
    let mut out = std::io::stdout().lock();
    let mut problems = 0usize;
    let mut recipes = 0usize;
    for file in &files {
        let text = match read_recipe_file(file) {
            Ok(text) => text,
            Err(attest_core::AttestError::Recipe {
                origin,
                line,
                column,
                message,
            }) => {
                writeln!(out, "{origin}:{line}:{column}: {message}")?;
                problems += 1;
                continue;
            }
            Err(other) => return Err(other.into()),
        };
        let origin = file.display().to_string();
        let found = lint_recipes(&text, &origin);
        if found.is_empty() {
            recipes += attest_core::verification::parse_recipes(&text, &origin)
                .map(|r| r.len())
                .unwrap_or(0);
        }
        for problem in &found {
            writeln!(out, "{problem}")?;
        }
        problems += found.len();
    }
    if problems > 0 {
        writeln!(out, "{problems} problem(s) in {} file(s)", files.len())?;
        return Ok(ExitCode::from(1));
    }
    writeln!(out, "ok: {recipes} recipe(s) in {} file(s)", files.len())?;
    Ok(ExitCode::SUCCESS)
}

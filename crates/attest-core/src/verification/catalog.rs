//! The recipe catalogue: the reviewed recipes compiled in, and user directories.

use std::path::Path;

use super::recipe::{parse_recipes, Recipe, MAX_RECIPE_BYTES};
use crate::AttestError;

/// The built-in recipe files, `(file name, text)`, from `policies/recipes/`.
pub const BUILTIN_RECIPES: &[(&str, &str)] = &[
    (
        "gmail.yaml",
        include_str!("../../../../policies/recipes/gmail.yaml"),
    ),
    (
        "slack.yaml",
        include_str!("../../../../policies/recipes/slack.yaml"),
    ),
    (
        "hubspot.yaml",
        include_str!("../../../../policies/recipes/hubspot.yaml"),
    ),
    (
        "google-calendar.yaml",
        include_str!("../../../../policies/recipes/google-calendar.yaml"),
    ),
    (
        "google-drive.yaml",
        include_str!("../../../../policies/recipes/google-drive.yaml"),
    ),
    (
        "google-docs.yaml",
        include_str!("../../../../policies/recipes/google-docs.yaml"),
    ),
    (
        "google-sheets.yaml",
        include_str!("../../../../policies/recipes/google-sheets.yaml"),
    ),
    (
        "notion.yaml",
        include_str!("../../../../policies/recipes/notion.yaml"),
    ),
    (
        "linear.yaml",
        include_str!("../../../../policies/recipes/linear.yaml"),
    ),
    (
        "outlook.yaml",
        include_str!("../../../../policies/recipes/outlook.yaml"),
    ),
    (
        "teams.yaml",
        include_str!("../../../../policies/recipes/teams.yaml"),
    ),
    (
        "github.yaml",
        include_str!("../../../../policies/recipes/github.yaml"),
    ),
    (
        "jira.yaml",
        include_str!("../../../../policies/recipes/jira.yaml"),
    ),
    (
        "stripe.yaml",
        include_str!("../../../../policies/recipes/stripe.yaml"),
    ),
    (
        "salesforce.yaml",
        include_str!("../../../../policies/recipes/salesforce.yaml"),
    ),
];

/// Every built-in recipe, in file order.
pub fn builtin() -> Result<Vec<Recipe>, AttestError> {
    let mut all = Vec::new();
    for (file, text) in BUILTIN_RECIPES {
        all.extend(parse_recipes(text, &format!("builtin:{file}"))?);
    }
    Ok(all)
}

/// The recipe files (`*.yaml`, `*.yml`) in `dir`, sorted by name.
pub fn recipe_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, AttestError> {
    let io = |source| AttestError::RecipeIo {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e == "yaml" || e == "yml");
        if yaml && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads one recipe file (at most [`MAX_RECIPE_BYTES`]).
pub fn read_recipe_file(path: &Path) -> Result<String, AttestError> {
    read_recipe_file_capped(path, MAX_RECIPE_BYTES)
}

/// Reads a file of at most `cap` bytes.
pub(crate) fn read_recipe_file_capped(path: &Path, cap: usize) -> Result<String, AttestError> {
    let io = |source| AttestError::RecipeIo {
        path: path.to_owned(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > cap as u64 {
        return Err(AttestError::Recipe {
            origin: path.display().to_string(),
            line: 0,
            column: 0,
            message: format!("larger than {cap} bytes"),
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

/// Every recipe in `dir`'s recipe files, in file order.
pub fn load_dir(dir: &Path) -> Result<Vec<Recipe>, AttestError> {
    let mut all = Vec::new();
    for path in recipe_files(dir)? {
        let text = read_recipe_file(&path)?;
        all.extend(parse_recipes(&text, &path.display().to_string())?);
    }
    Ok(all)
}

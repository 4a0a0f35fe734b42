//! Where read-back finds credentials and base-URL overrides.
//!
//! Read-back never reads the process environment deep inside a driver: it asks an
//! [`Env`], which is the process environment by default ([`ProcessEnv`]) and a map or a
//! closure in tests and embedded uses. Credentials come only from the variable a recipe
//! names (or from a [`Credentials`] reader configured in code); they go into request
//! headers and nowhere else.

use std::collections::HashMap;

/// A source of named settings (environment variables, by default).
pub trait Env: Send + Sync {
    /// The value of `name`, when set and not empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| !v.is_empty()).cloned()
    }
}

impl<F> Env for F
where
    F: Fn(&str) -> Option<String> + Send + Sync,
{
    fn var(&self, name: &str) -> Option<String> {
        self(name).filter(|v| !v.is_empty())
    }
}

/// A credential reader configured in code: given the system and the variable name a
/// recipe asks for, the secret (or `None` to fall back to the [`Env`]).
pub trait Credentials: Send + Sync {
    /// The secret for `system` that a recipe names `name`.
    fn credential(&self, system: &str, name: &str) -> Option<String>;
}

impl<F> Credentials for F
where
    F: Fn(&str, &str) -> Option<String> + Send + Sync,
{
    fn credential(&self, system: &str, name: &str) -> Option<String> {
        self(system, name)
    }
}

/// The variable that overrides a system's base URL: `ATTEST_BASE_URL_` and the system
/// name upper-cased, other characters than letters and digits as `_`
/// (`google-calendar` → `ATTEST_BASE_URL_GOOGLE_CALENDAR`).
pub fn base_url_var(system: &str) -> String {
    let mut name = String::from("ATTEST_BASE_URL_");
    name.extend(system.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_variable_names() {
        assert_eq!(base_url_var("slack"), "ATTEST_BASE_URL_SLACK");
        assert_eq!(
            base_url_var("google-calendar"),
            "ATTEST_BASE_URL_GOOGLE_CALENDAR"
        );
    }

    #[test]
    fn maps_and_closures_are_environments() {
        let map: HashMap<String, String> = [("A".to_owned(), "1".to_owned())].into();
        assert_eq!(map.var("A").as_deref(), Some("1"));
        assert_eq!(map.var("B"), None);
        let f = |name: &str| (name == "X").then(String::new);
        assert_eq!(f.var("X"), None, "empty counts as unset");
    }
}

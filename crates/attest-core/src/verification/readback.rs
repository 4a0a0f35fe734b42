//! Read-back: the drivers, and the configuration they share (HTTP reader,
//! environment, credentials, base URLs).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use attest_policy::Action;
use serde_json::{Map, Value};

use super::env::{base_url_var, Credentials, Env, ProcessEnv};
use super::http::{FetchError, Fetched, HttpOptions, HttpReader, ReadRequest};
use super::recipe_driver::RecipeDriver;
use super::Finding;
use crate::AttestError;

/// A way to read an action back from its system of record.
///
/// Drivers are tried in order; the first whose [`supports`](ReadBackDriver::supports)
/// says yes reads the action back, and its [`Finding`] decides the level. A driver
/// that cannot run returns [`Finding::Degraded`], never a contradiction.
#[async_trait]
pub trait ReadBackDriver: Send + Sync + fmt::Debug {
    /// The driver's name, recorded as the method `read-back:<name>`.
    fn name(&self) -> &str;

    /// Whether this driver knows how to read `action` back, given the tool's result.
    /// Cheap and without I/O.
    fn supports(&self, action: &Action, result: &Value) -> bool;

    /// An HTTP call's path parameters under the names this driver's reads use
    /// (`owner`, `repo`, `issue_number` from `/repos/o/r/issues/12`), when it knows the
    /// call's shape. Cheap and without I/O.
    fn path_params(&self, _action: &Action) -> Option<Map<String, Value>> {
        None
    }

    /// Reads the action back and compares.
    async fn read_back(&self, ctx: &ReadContext<'_>, action: &Action, result: &Value) -> Finding;
}

/// What a driver may use while reading back.
#[derive(Clone, Copy)]
pub struct ReadContext<'a> {
    http: &'a HttpReader,
    env: &'a dyn Env,
    credentials: Option<&'a dyn Credentials>,
    base_urls: &'a HashMap<String, String>,
    credential_vars: &'a HashMap<String, String>,
}

impl fmt::Debug for ReadContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadContext")
            .field("http", self.http)
            .field("base_urls", self.base_urls)
            .finish_non_exhaustive()
    }
}

impl ReadContext<'_> {
    /// Reads one request with the shared reader.
    pub async fn fetch(&self, request: &ReadRequest) -> Result<Fetched, FetchError> {
        self.http.fetch(request).await
    }

    /// The base URL for `system`: the one configured in code, else
    /// `ATTEST_BASE_URL_<SYSTEM>`, else `default`. Without a trailing `/`.
    pub fn base_url(&self, system: &str, default: Option<&str>) -> Option<String> {
        let found = self
            .base_urls
            .get(system)
            .cloned()
            .or_else(|| self.env.var(&base_url_var(system)))
            .or_else(|| default.map(str::to_owned))?;
        Some(found.trim_end_matches('/').to_owned())
    }

    /// The credential a recipe names `name` for `system`: from the reader configured in
    /// code, else the environment variable [`ReadContext::credential_var`] names.
    pub fn credential(&self, system: &str, name: &str) -> Option<String> {
        self.credentials
            .and_then(|c| c.credential(system, name))
            .filter(|v| !v.is_empty())
            .or_else(|| self.env.var(self.credential_var(system, name)))
    }

    /// The variable `system`'s credential is read from: the one configured for it
    /// ([`ReadBack::credential_var`], a configuration file's `systems.*.credential`),
    /// else `name`, the one its recipe names. A message about a missing credential names
    /// this one.
    pub fn credential_var<'n>(&'n self, system: &str, name: &'n str) -> &'n str {
        self.credential_vars
            .get(system)
            .map_or(name, String::as_str)
    }
}

/// Read-back configuration for the pipeline: the drivers in order, the HTTP reader,
/// and where settings and credentials come from.
///
/// ```
/// # fn main() -> Result<(), attest_core::AttestError> {
/// use std::collections::HashMap;
/// use attest_core::ReadBack;
///
/// // The built-in recipes, pointed at a sandbox, with the token given in code.
/// let env: HashMap<String, String> = [("SLACK_TOKEN".to_owned(), "xoxb-test".to_owned())].into();
/// let readback = ReadBack::builtin()?
///     .env(env)
///     .base_url("slack", "http://127.0.0.1:9");
/// assert!(readback.drivers().any(|d| d.name() == "recipe"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ReadBack {
    drivers: Vec<Arc<dyn ReadBackDriver>>,
    http: HttpReader,
    env: Arc<dyn Env>,
    credentials: Option<Arc<dyn Credentials>>,
    base_urls: HashMap<String, String>,
    credential_vars: HashMap<String, String>,
}

impl fmt::Debug for ReadBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadBack")
            .field("drivers", &self.drivers)
            .field("http", &self.http)
            .field("base_urls", &self.base_urls)
            .finish_non_exhaustive()
    }
}

impl ReadBack {
    /// No drivers yet, the default HTTP options, the process environment.
    pub fn new() -> Result<Self, AttestError> {
        Ok(ReadBack {
            drivers: Vec::new(),
            http: HttpReader::new(HttpOptions::default())?,
            env: Arc::new(ProcessEnv),
            credentials: None,
            base_urls: HashMap::new(),
            credential_vars: HashMap::new(),
        })
    }

    /// The built-in recipes (`policies/recipes/*.yaml`) as the one driver.
    pub fn builtin() -> Result<Self, AttestError> {
        Ok(ReadBack::new()?.driver(RecipeDriver::builtin()?))
    }

    /// Adds a driver after the ones already added.
    pub fn driver(mut self, driver: impl ReadBackDriver + 'static) -> Self {
        self.drivers.push(Arc::new(driver));
        self
    }

    /// Replaces the HTTP options (timeouts, retries, size cap).
    pub fn http(mut self, options: HttpOptions) -> Result<Self, AttestError> {
        self.http = HttpReader::new(options)?;
        Ok(self)
    }

    /// Where settings (`ATTEST_BASE_URL_*`) and recipe credentials come from.
    pub fn env(mut self, env: impl Env + 'static) -> Self {
        self.env = Arc::new(env);
        self
    }

    /// A credential reader consulted before the environment.
    pub fn credentials(mut self, credentials: impl Credentials + 'static) -> Self {
        self.credentials = Some(Arc::new(credentials));
        self
    }

    /// Reads `system`'s credential from the variable `var` instead of the one its
    /// recipe names.
    pub fn credential_var(mut self, system: impl Into<String>, var: impl Into<String>) -> Self {
        self.credential_vars.insert(system.into(), var.into());
        self
    }

    /// Overrides `system`'s base URL (beats `ATTEST_BASE_URL_<SYSTEM>` and the recipe).
    pub fn base_url(mut self, system: impl Into<String>, url: impl Into<String>) -> Self {
        self.base_urls.insert(system.into(), url.into());
        self
    }

    /// The drivers, in the order they are tried.
    pub fn drivers(&self) -> impl Iterator<Item = &dyn ReadBackDriver> {
        self.drivers.iter().map(|d| d.as_ref())
    }

    /// The first driver that supports `action`.
    pub fn driver_for(&self, action: &Action, result: &Value) -> Option<&dyn ReadBackDriver> {
        self.drivers()
            .find(|driver| driver.supports(action, result))
    }

    /// Sets an HTTP call's path parameters ([`Action::call_params`]) from the first
    /// driver that knows its shape, unless the action has some already.
    pub fn fill_path_params(&self, action: &mut Action) {
        if !action.extra.path_params.is_empty() || action.extra.url.is_none() {
            return;
        }
        if let Some(found) = self.drivers().find_map(|driver| driver.path_params(action)) {
            action.extra.path_params = found;
        }
    }

    /// Reads `action` back with the first driver that supports it: `None` when no
    /// driver does, else the driver's name and what it found.
    pub async fn check(&self, action: &Action, result: &Value) -> Option<(String, Finding)> {
        let driver = self.driver_for(action, result)?;
        let ctx = ReadContext {
            http: &self.http,
            env: self.env.as_ref(),
            credentials: self.credentials.as_deref(),
            base_urls: &self.base_urls,
            credential_vars: &self.credential_vars,
        };
        let finding = driver.read_back(&ctx, action, result).await;
        Some((driver.name().to_owned(), finding))
    }
}

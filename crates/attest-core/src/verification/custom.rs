//! The caller's own check that an action landed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use attest_policy::Action;
use serde_json::Value;

use super::Finding;
use crate::ToolError;

type CheckFuture = Pin<Box<dyn Future<Output = Result<bool, ToolError>> + Send>>;
type CheckFn = dyn Fn(&Action, &Value) -> CheckFuture + Send + Sync;
type ReadFuture = Pin<Box<dyn Future<Output = Finding> + Send>>;
type ReadFn = dyn Fn(&Action, &Value) -> ReadFuture + Send + Sync;

/// The caller's own check that an action landed, for one call.
///
/// Either a yes/no check (recorded as method `custom`, level `verified-custom`): `Ok(true)`
/// confirms, `Ok(false)` contradicts, an error means it could not run (and the outcome
/// degrades, it is never called unverified). Or a read-back the caller does through a
/// connection only it holds, such as the MCP proxy's upstream session or the gateway's
/// caller credentials ([`CustomCheck::read_back`]): recorded like any read-back driver's,
/// as method `read-back:<name>` with its evidence, and tried before the configured drivers.
pub struct CustomCheck(Kind);

enum Kind {
    Check(Box<CheckFn>),
    ReadBack {
        name: String,
        read: Box<ReadFn>,
        /// Tried only when no configured driver supports the action.
        fallback: bool,
    },
}

impl fmt::Debug for CustomCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Check(_) => f.write_str("CustomCheck"),
            Kind::ReadBack { name, .. } => write!(f, "CustomCheck::read_back({name:?})"),
        }
    }
}

impl CustomCheck {
    /// A check that runs at once.
    pub fn sync(
        check: impl Fn(&Action, &Value) -> Result<bool, ToolError> + Send + Sync + 'static,
    ) -> Self {
        CustomCheck(Kind::Check(Box::new(move |action, result| {
            let outcome = check(action, result);
            Box::pin(async move { outcome })
        })))
    }

    /// A check that awaits something (a read from another service, say). The closure
    /// gets borrowed values and must return a future that owns what it needs.
    pub fn future<Fut>(check: impl Fn(&Action, &Value) -> Fut + Send + Sync + 'static) -> Self
    where
        Fut: Future<Output = Result<bool, ToolError>> + Send + 'static,
    {
        CustomCheck(Kind::Check(Box::new(move |action, result| {
            Box::pin(check(action, result))
        })))
    }

    /// A read-back named `name` (recorded as `read-back:<name>`): the closure reads the
    /// record the action wrote and reports a [`Finding`], usually
    /// [`Finding::from_record`].
    pub fn read_back<Fut>(
        name: impl Into<String>,
        read: impl Fn(&Action, &Value) -> Fut + Send + Sync + 'static,
    ) -> Self
    where
        Fut: Future<Output = Finding> + Send + 'static,
    {
        CustomCheck(Kind::ReadBack {
            name: name.into(),
            read: Box::new(move |action, result| Box::pin(read(action, result))),
            fallback: false,
        })
    }

    /// A read-back like [`CustomCheck::read_back`], tried only when no configured
    /// driver supports the action: a server's own way to read back (the MCP upstream's
    /// getter, the gateway caller's credentials) after the recipes, which read the
    /// vendor's API with the recipe's own credential.
    pub fn read_back_fallback<Fut>(
        name: impl Into<String>,
        read: impl Fn(&Action, &Value) -> Fut + Send + Sync + 'static,
    ) -> Self
    where
        Fut: Future<Output = Finding> + Send + 'static,
    {
        let mut check = CustomCheck::read_back(name, read);
        if let Kind::ReadBack { fallback, .. } = &mut check.0 {
            *fallback = true;
        }
        check
    }

    /// Whether this is a read-back tried after the configured drivers.
    pub(crate) fn is_fallback(&self) -> bool {
        matches!(self.0, Kind::ReadBack { fallback: true, .. })
    }

    /// Runs a yes/no check; `None` for a read-back.
    pub(crate) async fn run(
        &self,
        action: &Action,
        result: &Value,
    ) -> Option<Result<bool, ToolError>> {
        match &self.0 {
            Kind::Check(check) => Some(check(action, result).await),
            Kind::ReadBack { .. } => None,
        }
    }

    /// Runs a read-back: its name and what it found; `None` for a yes/no check.
    pub(crate) async fn read(&self, action: &Action, result: &Value) -> Option<(String, Finding)> {
        match &self.0 {
            Kind::Check(_) => None,
            Kind::ReadBack { name, read, .. } => Some((name.clone(), read(action, result).await)),
        }
    }
}

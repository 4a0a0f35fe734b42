//! The caller's own check that an action landed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use attest_policy::Action;
use serde_json::Value;

use crate::ToolError;

type CheckFuture = Pin<Box<dyn Future<Output = Result<bool, ToolError>> + Send>>;
type CheckFn = dyn Fn(&Action, &Value) -> CheckFuture + Send + Sync;

/// The caller's own check that an action landed: `Ok(true)` confirms, `Ok(false)`
/// contradicts, an error means it could not run (and the outcome degrades, it is never
/// called unverified).
pub struct CustomCheck(Box<CheckFn>);

impl fmt::Debug for CustomCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CustomCheck")
    }
}

impl CustomCheck {
    /// A check that runs at once.
    pub fn sync(
        check: impl Fn(&Action, &Value) -> Result<bool, ToolError> + Send + Sync + 'static,
    ) -> Self {
        CustomCheck(Box::new(move |action, result| {
            let outcome = check(action, result);
            Box::pin(async move { outcome })
        }))
    }

    /// A check that awaits something (a read from another service, say). The closure
    /// gets borrowed values and must return a future that owns what it needs.
    pub fn future<Fut>(check: impl Fn(&Action, &Value) -> Fut + Send + Sync + 'static) -> Self
    where
        Fut: Future<Output = Result<bool, ToolError>> + Send + 'static,
    {
        CustomCheck(Box::new(move |action, result| {
            Box::pin(check(action, result))
        }))
    }

    pub(crate) async fn run(&self, action: &Action, result: &Value) -> Result<bool, ToolError> {
        (self.0)(action, result).await
    }
}

//! Tools: wrap a tool object once, call it through the pipeline many times.

use async_trait::async_trait;
use attest_policy::Action;
use serde_json::Value;

use crate::{Attest, AttestError, CustomCheck, Receipt, ResumeToken, ToolError};

/// A tool an agent can call, described well enough for policy to decide on it.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Describes a call with `params` as an action (system, verb, target, params).
    fn action(&self, params: Value) -> Action;

    /// Performs the call.
    async fn call(&self, params: Value) -> Result<Value, ToolError>;

    /// The tool's own check that a call landed, if it has one.
    fn check(&self) -> Option<&CustomCheck> {
        None
    }
}

/// A tool bound to a pipeline: every call is decided, run, verified and recorded.
#[derive(Debug, Clone)]
pub struct Governed<T> {
    attest: Attest,
    tool: T,
}

impl<T: Tool> Governed<T> {
    /// Calls the tool through the pipeline.
    pub async fn call(&self, params: Value) -> Result<Receipt, AttestError> {
        let action = self.tool.action(params);
        let execute = |params| self.tool.call(params);
        match self.tool.check() {
            Some(check) => self.attest.run_checked(action, execute, check).await,
            None => self.attest.run(action, execute).await,
        }
    }

    /// Runs the call a resume token stands for, once a person has approved it (see
    /// [`Attest::resume`]); in this process or another that wraps the same tool.
    pub async fn resume(&self, token: &ResumeToken) -> Result<Receipt, AttestError> {
        let execute = |params| self.tool.call(params);
        match self.tool.check() {
            Some(check) => self.attest.resume_checked(token, execute, check).await,
            None => self.attest.resume(token, execute).await,
        }
    }

    /// The wrapped tool.
    pub fn tool(&self) -> &T {
        &self.tool
    }
}

impl Attest {
    /// Wraps `tool` so each call goes through this pipeline.
    pub fn wrap<T: Tool>(&self, tool: T) -> Governed<T> {
        Governed {
            attest: self.clone(),
            tool,
        }
    }
}

//! Tools: wrap a tool object once, call it through the pipeline many times.

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    Attest, AttestError, CustomCheck, Outcome, ProtocolCall, ResumeToken, Start, ToolError,
};

/// A tool an agent can call, described well enough for policy to decide on it.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Describes a call with `params` in its protocol's terms (a function's name and
    /// arguments, an MCP tool, what its declaration fixes); the pipeline it is wrapped
    /// in turns that into the action ([`Attest::action`]), with its configured registry.
    fn describe(&self, params: Value) -> ProtocolCall<'_>;

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

/// How a governed tool call ended: [`Outcome`] over a [`Tool`]'s JSON output and error.
pub type ToolOutcome = Outcome<Value, ToolError>;

impl<T: Tool> Governed<T> {
    /// Calls the tool through the pipeline.
    pub async fn call(&self, params: Value) -> Result<ToolOutcome, AttestError> {
        self.run(self.action(params).into()).await
    }

    /// Runs the call a resume token stands for, once a person has approved it (see
    /// [`Attest::call`]); in this process or another that wraps the same tool.
    pub async fn resume(&self, token: &ResumeToken) -> Result<ToolOutcome, AttestError> {
        self.run(token.into()).await
    }

    async fn run(&self, start: Start) -> Result<ToolOutcome, AttestError> {
        let call = self.attest.call(start);
        let call = match self.tool.check() {
            Some(check) => call.check(check),
            None => call,
        };
        call.run(|params| self.tool.call(params)).await
    }

    /// The wrapped tool.
    pub fn tool(&self) -> &T {
        &self.tool
    }

    /// The action a call with `params` is: the tool's description, as this pipeline's
    /// configuration sees it.
    pub fn action(&self, params: Value) -> attest_policy::Action {
        self.attest.action(self.tool.describe(params))
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

//! Integration tests of attest-policy: one binary, one module per subject.

mod builtin_rules;
mod default_policy;
mod examples;
mod fuzz;
mod history;
mod malformed;
mod param_conditions;
mod robustness;
mod when;

use attest_policy::{Action, Policy, PolicyEngine, Verdict};

/// Loads a policy from YAML, panicking with the error on failure.
#[cfg(test)] // Lets clippy see a test helper, which may panic.
pub fn engine(yaml: &str) -> PolicyEngine {
    match PolicyEngine::from_yaml(yaml, "test.yaml") {
        Ok(engine) => engine,
        Err(e) => panic!("policy does not load: {e}"),
    }
}

/// Evaluates, panicking on error.
#[cfg(test)] // Lets clippy see a test helper, which may panic.
pub fn decide(policy: &PolicyEngine, action: &Action) -> Verdict {
    policy.evaluate(action).unwrap()
}

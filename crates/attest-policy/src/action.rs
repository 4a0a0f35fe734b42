use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{PolicyError, Risk, TargetClass, Verb};

/// How the system and verb of an action were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Given explicitly by the caller.
    #[default]
    Manual,
    /// From an MCP tool name.
    Mcp,
    /// From an HTTP method and URL.
    Url,
    /// From an SDK path such as `stripe.Refund.create`.
    Sdk,
    /// Guessed from a plain function name.
    Heuristic,
}

impl Source {
    /// The word used in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Manual => "manual",
            Source::Mcp => "mcp",
            Source::Url => "url",
            Source::Sdk => "sdk",
            Source::Heuristic => "heuristic",
        }
    }
}

/// Where a call came from, kept for detection and for people reading the ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extra {
    /// HTTP method, for calls through the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// HTTP URL, for calls through the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The tool's own name, as the agent called it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The MCP server the tool belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The agent framework that made the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<String>,
    /// How the agent was proven (`token`, `jwt`, `unauthenticated`), set by a door with
    /// agents configured; `None`: the agent is a label the caller gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_auth: Option<String>,
    /// The person the proven agent acts for (`agents.owners`), set by a door with agents
    /// configured from the credential, never from a header: a requester that separation
    /// of duties excludes from approving, whatever the caller's headers name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_owner: Option<String>,
    /// Set where a parser gave up on the call (an encoding, a content type, JSON that is
    /// not exactly one object) and `verb` became the riskiest there is: the verb it read
    /// as on its face. Policy judges both readings and the stricter verdict stands, so a
    /// rule written for the face verb (a budget's `limit` that cannot read its amount)
    /// still applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub face_verb: Option<Verb>,
    /// An HTTP call's path parameters, under the names the vendor's own tools use
    /// (`owner`, `repo`, `issue_number` from `/repos/o/r/issues/12`). They are part of
    /// the action (see [`Action::call_params`]) without being sent in the body.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub path_params: serde_json::Map<String, Value>,
    /// Set by the door when the call writes a path in the governor's protected set (an
    /// agent's hooks or settings, a file the running configuration uses): the path and
    /// why. Such a call is refused whatever policy says, in shadow mode too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected: Option<String>,
    /// Set where the tool's own annotation raised the call's risk (MCP's
    /// `destructiveHint: true`): the annotation as the tool gave it, which the verdict's
    /// reasons name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk_hint: Option<String>,
    /// Set by a coding agent's hook on a shell command: whether it runs inside `attest
    /// sandbox` (true) or as the agent runs it (false), recorded in the row's `call`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandboxed: Option<bool>,
}

/// One thing an agent wants to do: the unit that policy decides and the ledger records.
///
/// `params` are the tool's raw arguments. They are used to decide and to run the
/// action, and are never written to the ledger: only [`Action::params_hash`] and an
/// allow-listed preview are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// A unique id; the pipeline assigns one when this is empty.
    #[serde(default)]
    pub id: String,
    /// The system acted on (`gmail`, `stripe`, `unknown`, …).
    pub system: String,
    /// What the action does.
    pub verb: Verb,
    /// What it acts on: an address, an id, a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Who the target is, when the caller already knows (policy's R2 works it out otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_class: Option<TargetClass>,
    /// The tool's arguments.
    #[serde(default)]
    pub params: Value,
    /// The person on whose behalf the agent acts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The person whose connection (credentials) the action uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The agent that asked for the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The agent run (conversation, job) the action belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// A risk tier set by the caller; it beats every other source of risk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    /// How system and verb were found.
    #[serde(default)]
    pub source: Source,
    /// Whether detection recognised the call; an unrecognised write is high risk.
    #[serde(default = "recognised_by_default")]
    pub recognised: bool,
    /// Where the call came from.
    #[serde(default)]
    pub extra: Extra,
}

fn recognised_by_default() -> bool {
    true
}

impl Action {
    /// An action on `system` with `verb`, no params, and nothing else set.
    pub fn new(system: impl Into<String>, verb: Verb) -> Self {
        Action {
            id: String::new(),
            system: system.into(),
            verb,
            target: None,
            target_class: None,
            params: Value::Object(serde_json::Map::new()),
            actor: None,
            owner: None,
            agent: None,
            run_id: None,
            risk: None,
            source: Source::Manual,
            recognised: true,
            extra: Extra::default(),
        }
    }

    /// Sets the target.
    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Sets the params.
    pub fn with_params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }

    /// Sets the actor.
    pub fn with_actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Sets the owner of the connection.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Sets the agent.
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Sets an explicit risk tier.
    pub fn with_risk(mut self, risk: Risk) -> Self {
        self.risk = Some(risk);
        self
    }

    /// What a person reads when asked about it: `system.verb`, and ` → target` when
    /// there is one (`gmail.send → bob@example.com`).
    pub fn label(&self) -> String {
        match &self.target {
            Some(target) => format!("{}.{} → {target}", self.system, self.verb.as_str()),
            None => format!("{}.{}", self.system, self.verb.as_str()),
        }
    }

    /// The risk tier before any policy file is consulted: explicit risk, then
    /// `delete` and unrecognised writes, then the verb's tier.
    pub fn base_risk(&self) -> Risk {
        if let Some(risk) = self.risk {
            return risk;
        }
        if self.verb == Verb::Delete {
            return Risk::VeryHigh;
        }
        if !self.recognised && !self.verb.is_read() {
            return Risk::High.max(self.verb.default_risk());
        }
        self.verb.default_risk()
    }

    /// The params with the call's path parameters ([`Extra::path_params`]) added: what
    /// the call says as a whole, the way the vendor's tools would take it. A path
    /// parameter wins over a body field of the same name (the path is where the call
    /// goes). Borrowed when there are none.
    pub fn call_params(&self) -> std::borrow::Cow<'_, Value> {
        if self.extra.path_params.is_empty() {
            return std::borrow::Cow::Borrowed(&self.params);
        }
        let mut merged = match &self.params {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        for (name, value) in &self.extra.path_params {
            merged.insert(name.clone(), value.clone());
        }
        std::borrow::Cow::Owned(Value::Object(merged))
    }

    /// Lower-case hex SHA-256 of the RFC 8785 canonical form of `params`.
    ///
    /// Equal params give equal hashes whatever their key order, so an auditor who holds
    /// the params can show they are the ones that ran.
    pub fn params_hash(&self) -> Result<String, PolicyError> {
        let canonical =
            serde_json_canonicalizer::to_vec(&self.params).map_err(PolicyError::Canonical)?;
        Ok(hex::encode(Sha256::digest(&canonical)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn params_hash_ignores_key_order_but_not_values() {
        let a = Action::new("gmail", Verb::Send).with_params(json!({"to": "a@x.io", "n": 1}));
        let b = Action::new("gmail", Verb::Send).with_params(json!({"n": 1, "to": "a@x.io"}));
        let c = Action::new("gmail", Verb::Send).with_params(json!({"n": 2, "to": "a@x.io"}));
        assert_eq!(a.params_hash().unwrap(), b.params_hash().unwrap());
        assert_ne!(a.params_hash().unwrap(), c.params_hash().unwrap());
        // SHA-256 of the canonical bytes `{"n":1,"to":"a@x.io"}`.
        let expected = hex::encode(Sha256::digest(br#"{"n":1,"to":"a@x.io"}"#));
        assert_eq!(a.params_hash().unwrap(), expected);
    }

    #[test]
    fn explicit_risk_wins_then_delete_then_unrecognised_writes() {
        let mut action = Action::new("unknown", Verb::Update);
        assert_eq!(action.base_risk(), Risk::Medium);
        action.recognised = false;
        assert_eq!(action.base_risk(), Risk::High);
        action.verb = Verb::Delete;
        assert_eq!(action.base_risk(), Risk::VeryHigh);
        action = action.with_risk(Risk::Low);
        assert_eq!(action.base_risk(), Risk::Low);
    }
}

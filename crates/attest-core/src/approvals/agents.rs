//! Registered agents: the callers a door names by a credential rather than a label.
//!
//! `attest agents add NAME` makes a token (`atg_` and 256 random bits, hex), shows it
//! once, and keeps only its SHA-256 in table `agents` beside the ledger (its SQLite
//! file, or its PostgreSQL database under the ledger's tenant), as approvers are kept.
//! A door with agents configured (the gateway, `mcp-proxy --listen`) takes the token
//! and records the agent it belongs to; a revoked agent's token names nobody.

use std::time::SystemTime;

use serde::Serialize;
use subtle::ConstantTimeEq;

use super::approvers::checked_name;
use super::backend::{Cell, APPROVER_KEY};
use super::store::{from_millis, millis};
use super::token::{hash_token, random_token};
use super::{ApprovalError, ApprovalStore};

/// The prefix of every agent token, so one is recognisable to a secret scanner.
pub const AGENT_TOKEN_PREFIX: &str = "atg_";

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agents (
    name        TEXT PRIMARY KEY COLLATE NOCASE,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    tenant      TEXT NOT NULL DEFAULT ''
);
";

/// The same table in a PostgreSQL ledger's database (every tenant's agents).
pub(super) const PG_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS agents (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE UNIQUE INDEX IF NOT EXISTS agents_name ON agents (tenant, lower(name));
";

/// A registered agent, as listed (the token is never kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// The name its calls are recorded under (what policy's `match.agent` sees).
    pub name: String,
    /// When the agent was added.
    #[serde(serialize_with = "super::request::rfc3339")]
    pub created_at: SystemTime,
    /// When the agent was revoked; a revoked agent's token names nobody.
    #[serde(serialize_with = "super::request::rfc3339_opt")]
    pub revoked_at: Option<SystemTime>,
}

/// An agent token: shown once, when the agent is added.
#[derive(Clone, PartialEq, Eq)]
pub struct AgentToken(String);

impl AgentToken {
    /// The token's text, to give to the agent.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AgentToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AgentToken({AGENT_TOKEN_PREFIX}…)")
    }
}

impl ApprovalStore {
    /// Registers agent `name` and returns its token, which is shown only here. A revoked
    /// name may be added again (with a new token); an active one may not.
    pub fn add_agent(&self, name: &str) -> Result<(Agent, AgentToken), ApprovalError> {
        let name = checked_name(name).map_err(|err| match err {
            ApprovalError::BadApprover { name, detail } => ApprovalError::BadAgent { name, detail },
            other => other,
        })?;
        let token = AgentToken(random_token(AGENT_TOKEN_PREFIX)?);
        let changed = self.backend().execute(
            "adding an agent",
            &format!(
                "INSERT INTO agents (tenant, name, token_hash, created_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT ({APPROVER_KEY}) DO UPDATE SET name = ?2, token_hash = ?3,
                     created_at = ?4, revoked_at = NULL
                 WHERE agents.revoked_at IS NOT NULL"
            ),
            &[
                name.into(),
                hash_token(token.expose()).as_str().into(),
                millis(self.now()).into(),
            ],
        )?;
        if changed == 0 {
            return Err(ApprovalError::BadAgent {
                name: name.to_owned(),
                detail: "already registered (revoke it first to issue a new token)".to_owned(),
            });
        }
        Ok((self.agent_where("lower(name) = lower(?2)", name)?, token))
    }

    /// Every registered agent, revoked ones included, by name.
    pub fn agents(&self) -> Result<Vec<Agent>, ApprovalError> {
        self.backend()
            .query(
                "listing agents",
                "SELECT name, created_at, revoked_at FROM agents
                 WHERE tenant = ?1 ORDER BY lower(name)",
                &[],
            )?
            .into_iter()
            .map(read_agent)
            .collect()
    }

    /// Revokes agent `name`: its token names nobody from now on.
    pub fn revoke_agent(&self, name: &str) -> Result<Agent, ApprovalError> {
        let changed = self.backend().execute(
            "revoking an agent",
            "UPDATE agents SET revoked_at = ?2
             WHERE tenant = ?1 AND lower(name) = lower(?3) AND revoked_at IS NULL",
            &[millis(self.now()).into(), name.trim().into()],
        )?;
        if changed == 0 {
            return Err(ApprovalError::UnknownAgent {
                name: name.trim().to_owned(),
            });
        }
        self.agent_where("lower(name) = lower(?2)", name.trim())
    }

    /// The registered, not revoked agent this token belongs to
    /// ([`ApprovalError::BadCredential`] otherwise).
    pub fn authenticate_agent(&self, token: &str) -> Result<Agent, ApprovalError> {
        let hash = hash_token(token.trim());
        let agent = self
            .agent_where("token_hash = ?2 AND revoked_at IS NULL", &hash)
            .map_err(|err| match err {
                ApprovalError::UnknownAgent { .. } => ApprovalError::BadCredential,
                other => other,
            })?;
        // The row was found by its hash; compare again in constant time, as approvers'.
        let stored = self.backend().query(
            "checking an agent token",
            "SELECT token_hash FROM agents WHERE tenant = ?1 AND lower(name) = lower(?2)",
            &[agent.name.as_str().into()],
        )?;
        let matches = stored
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next())
            .and_then(Cell::text)
            .is_some_and(|stored| bool::from(stored.as_bytes().ct_eq(hash.as_bytes())));
        if matches {
            Ok(agent)
        } else {
            Err(ApprovalError::BadCredential)
        }
    }

    fn agent_where(&self, filter: &str, key: &str) -> Result<Agent, ApprovalError> {
        self.backend()
            .query(
                "reading an agent",
                &format!(
                    "SELECT name, created_at, revoked_at FROM agents WHERE tenant = ?1 AND {filter}"
                ),
                &[key.into()],
            )?
            .into_iter()
            .next()
            .map(read_agent)
            .transpose()?
            .ok_or_else(|| ApprovalError::UnknownAgent {
                name: key.to_owned(),
            })
    }
}

fn read_agent(row: Vec<Cell>) -> Result<Agent, ApprovalError> {
    let mut cells = row.into_iter();
    let mut next = || cells.next().unwrap_or(Cell::Null);
    let name = next()
        .text()
        .ok_or(ApprovalError::Internal("an agent row without its name"))?;
    let created_at = next().int().ok_or(ApprovalError::Internal(
        "an agent row without its creation time",
    ))?;
    Ok(Agent {
        name,
        created_at: from_millis(created_at),
        revoked_at: next().int().map(from_millis),
    })
}

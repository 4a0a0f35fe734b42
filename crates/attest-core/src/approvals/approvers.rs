//! Registered approvers: the people who may decide, each with a personal token.
//!
//! `attest approvers add NAME` makes a token (`ata_` and 256 random bits, hex), shows it
//! once, and keeps only its SHA-256 in table `approvers` beside the ledger (its SQLite
//! file, or its PostgreSQL database under the ledger's tenant). A
//! decision names its approver only after one of these checks: the token (CLI, inbox
//! API), the Slack user id mapped to an approver (Slack buttons), a signed link made for
//! that approver, or a configured trusted identity header. A name typed by whoever asks
//! is never enough: [`ApprovalStore::decide`] refuses an approver that is not registered
//! or was revoked.

use std::fmt;
use std::time::SystemTime;

use serde::Serialize;
use subtle::ConstantTimeEq;

use super::backend::{is_unique_violation, Cell, APPROVER_KEY};
use super::store::{from_millis, millis};
use super::token::{hash_token, random_token};
use super::{ApprovalError, ApprovalStore};

/// The prefix of every approver token, so one is recognisable to a secret scanner.
pub const APPROVER_TOKEN_PREFIX: &str = "ata_";

/// The longest approver name accepted.
const MAX_NAME: usize = 128;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvers (
    name        TEXT PRIMARY KEY COLLATE NOCASE,
    token_hash  TEXT NOT NULL UNIQUE,
    slack_user  TEXT UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    tenant      TEXT NOT NULL DEFAULT ''
);
";

/// A registered approver, as listed (the token is never kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approver {
    /// The name decisions are recorded under (matched against a rule's `approvers`,
    /// case-insensitively).
    pub name: String,
    /// The Slack user id (`U…`) whose button presses count as this approver's.
    pub slack_user: Option<String>,
    /// When the approver was added.
    #[serde(serialize_with = "super::request::rfc3339")]
    pub created_at: SystemTime,
    /// When the approver was revoked; a revoked approver decides nothing.
    #[serde(serialize_with = "super::request::rfc3339_opt")]
    pub revoked_at: Option<SystemTime>,
}

/// A personal approver token: shown once, when the approver is added.
#[derive(Clone, PartialEq, Eq)]
pub struct ApproverToken(String);

impl ApproverToken {
    fn generate() -> Result<ApproverToken, ApprovalError> {
        random_token(APPROVER_TOKEN_PREFIX).map(ApproverToken)
    }

    /// The token's text, to give to the approver.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApproverToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApproverToken({APPROVER_TOKEN_PREFIX}…)")
    }
}

impl ApprovalStore {
    /// Registers `name` (optionally with the Slack user id that acts as them) and returns
    /// their token, which is shown only here. A revoked name may be added again (with a
    /// new token); an active one may not.
    pub fn add_approver(
        &self,
        name: &str,
        slack_user: Option<&str>,
    ) -> Result<(Approver, ApproverToken), ApprovalError> {
        let name = checked_name(name)?;
        let slack_user = slack_user.map(str::trim).filter(|s| !s.is_empty());
        if let Some(user) = slack_user {
            if !user.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(ApprovalError::BadApprover {
                    name: name.to_owned(),
                    detail: "a Slack user id is letters and digits (U…)".to_owned(),
                });
            }
        }
        let token = ApproverToken::generate()?;
        let now = millis(self.now());
        let token_hash = hash_token(token.expose());
        let changed = self
            .backend()
            .execute(
                "adding an approver",
                &format!(
                    "INSERT INTO approvers (tenant, name, token_hash, slack_user, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT ({APPROVER_KEY}) DO UPDATE SET name = ?2, token_hash = ?3,
                         slack_user = ?4, created_at = ?5, revoked_at = NULL
                     WHERE approvers.revoked_at IS NOT NULL"
                ),
                &[
                    name.into(),
                    token_hash.as_str().into(),
                    slack_user.into(),
                    now.into(),
                ],
            )
            .map_err(|err| {
                if is_unique_violation(&err) {
                    ApprovalError::BadApprover {
                        name: name.to_owned(),
                        detail: "that Slack user id belongs to another approver".to_owned(),
                    }
                } else {
                    err
                }
            })?;
        if changed == 0 {
            return Err(ApprovalError::BadApprover {
                name: name.to_owned(),
                detail: "already registered (revoke it first to issue a new token)".to_owned(),
            });
        }
        Ok((self.approver(name)?, token))
    }

    /// Every registered approver, revoked ones included, by name.
    pub fn approvers(&self) -> Result<Vec<Approver>, ApprovalError> {
        self.backend()
            .query(
                "listing approvers",
                "SELECT name, slack_user, created_at, revoked_at FROM approvers
                 WHERE tenant = ?1 ORDER BY lower(name)",
                &[],
            )?
            .into_iter()
            .map(read_approver)
            .collect()
    }

    /// Revokes `name`: their token, Slack id and links decide nothing from now on.
    pub fn revoke_approver(&self, name: &str) -> Result<Approver, ApprovalError> {
        let changed = self.backend().execute(
            "revoking an approver",
            "UPDATE approvers SET revoked_at = ?2
             WHERE tenant = ?1 AND lower(name) = lower(?3) AND revoked_at IS NULL",
            &[millis(self.now()).into(), name.trim().into()],
        )?;
        if changed == 0 {
            return Err(ApprovalError::UnknownApprover {
                name: name.trim().to_owned(),
            });
        }
        self.approver(name.trim())
    }

    /// The registered, not revoked approver this token belongs to.
    pub fn authenticate(&self, token: &str) -> Result<Approver, ApprovalError> {
        let hash = hash_token(token.trim());
        let found = self
            .backend()
            .query(
                "checking an approver token",
                "SELECT token_hash, revoked_at FROM approvers WHERE tenant = ?1 AND token_hash = ?2",
                &[hash.as_str().into()],
            )?
            .into_iter()
            .next()
            .map(|row| {
                let mut cells = row.into_iter();
                let stored = cells.next().and_then(Cell::text);
                let revoked = cells.next().unwrap_or(Cell::Null);
                (stored, revoked)
            });
        match found {
            Some((Some(stored), Cell::Null))
                if bool::from(stored.as_bytes().ct_eq(hash.as_bytes())) =>
            {
                self.approver_where("token_hash = ?2", &hash)
            }
            _ => Err(ApprovalError::BadCredential),
        }
    }

    /// The registered, not revoked approver the Slack user id `user` acts as.
    pub fn approver_for_slack_user(&self, user: &str) -> Result<Approver, ApprovalError> {
        self.approver_where("slack_user = ?2 AND revoked_at IS NULL", user)
            .map_err(|err| match err {
                ApprovalError::UnknownApprover { .. } => ApprovalError::UnknownApprover {
                    name: format!("slack user {user}"),
                },
                other => other,
            })
    }

    /// The approver named `name` (revoked or not), matched case-insensitively.
    pub fn approver(&self, name: &str) -> Result<Approver, ApprovalError> {
        self.approver_where("lower(name) = lower(?2)", name)
    }

    /// The registered, not revoked approver named `name`: what every decision needs.
    pub fn active_approver(&self, name: &str) -> Result<Approver, ApprovalError> {
        self.approver_where(
            "lower(name) = lower(?2) AND revoked_at IS NULL",
            name.trim(),
        )
        .map_err(|err| match err {
            ApprovalError::UnknownApprover { .. } => ApprovalError::UnknownApprover {
                name: name.trim().to_owned(),
            },
            other => other,
        })
    }

    fn approver_where(&self, filter: &str, key: &str) -> Result<Approver, ApprovalError> {
        self.backend()
            .query(
                "reading an approver",
                &format!(
                    "SELECT name, slack_user, created_at, revoked_at FROM approvers
                     WHERE tenant = ?1 AND {filter}"
                ),
                &[key.into()],
            )?
            .into_iter()
            .next()
            .map(read_approver)
            .transpose()?
            .ok_or_else(|| ApprovalError::UnknownApprover {
                name: key.to_owned(),
            })
    }
}

fn read_approver(row: Vec<Cell>) -> Result<Approver, ApprovalError> {
    let mut cells = row.into_iter();
    let mut next = || cells.next().unwrap_or(Cell::Null);
    let name = next()
        .text()
        .ok_or(ApprovalError::Internal("an approver row without its name"))?;
    let slack_user = next().text();
    let created_at = next().int().ok_or(ApprovalError::Internal(
        "an approver row without its creation time",
    ))?;
    Ok(Approver {
        name,
        slack_user,
        created_at: from_millis(created_at),
        revoked_at: next().int().map(from_millis),
    })
}

/// A name is printable, without surrounding spaces, at most [`MAX_NAME`] bytes.
pub(super) fn checked_name(name: &str) -> Result<&str, ApprovalError> {
    let trimmed = name.trim();
    let bad = |detail: &str| ApprovalError::BadApprover {
        name: name.to_owned(),
        detail: detail.to_owned(),
    };
    if trimmed.is_empty() {
        return Err(bad("a name is required"));
    }
    if trimmed.len() > MAX_NAME {
        return Err(bad("longer than 128 bytes"));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(bad("control characters are not allowed"));
    }
    Ok(trimmed)
}

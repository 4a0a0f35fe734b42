//! Bounded grants: a person approves a request and, with it, the next calls like it —
//! at most N calls, until a time, by the request's authenticated agent, each call's
//! params meeting a condition (`attest confirm ID approve --grant
//! 'calls=3,for=1h,when=params.amount <= 50'`).
//!
//! A grant is kept in table `grants` beside the ledger (its SQLite file, or its
//! PostgreSQL database under the ledger's tenant), as agents and approvers are, so every
//! process on the ledger reads the same grants, and a revocation holds from the next
//! call in every one of them. It is bound to what the request was: its agent and how that
//! agent was proven (a token or a JWT, never a label the caller picked), its system and
//! verb, and the rules that asked; a call policy refuses, or that another rule asks
//! about, is never covered. Its uses are counted in the ledger's window counts
//! ([`attest_ledger::Ledger::reserve_windows`], key `grant:ID`), checked and counted in
//! one transaction, so of callers racing for the last use, in any process on any host,
//! one gets it.
//!
//! A grant becomes usable once its row is in the ledger (`issued_seq`): a grant whose
//! row could not be written covers nothing.

use std::str::FromStr;
use std::time::{Duration, SystemTime};

use attest_ledger::WindowClaim;
use attest_policy::{Action, Bound};
use serde::Serialize;

use super::backend::{Arg, Cell};
use super::store::{from_millis, millis};
use super::{ApprovalError, ApprovalRequest, ApprovalStore};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS grants (
    tenant      TEXT NOT NULL DEFAULT '',
    id          TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    action_id   TEXT NOT NULL,
    agent       TEXT NOT NULL,
    agent_auth  TEXT NOT NULL,
    system      TEXT NOT NULL,
    verb        TEXT NOT NULL,
    rules       TEXT NOT NULL,
    calls       INTEGER NOT NULL,
    bound       TEXT,
    approver    TEXT NOT NULL,
    channel     TEXT NOT NULL,
    issued_at   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    issued_seq  INTEGER,
    revoked_at  INTEGER,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS grants_for ON grants (tenant, agent, system, verb);
";

/// The same table in a PostgreSQL ledger's database (every tenant's grants).
pub(super) const PG_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS grants (
    tenant      TEXT NOT NULL,
    id          TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    action_id   TEXT NOT NULL,
    agent       TEXT NOT NULL,
    agent_auth  TEXT NOT NULL,
    system      TEXT NOT NULL,
    verb        TEXT NOT NULL,
    rules       TEXT NOT NULL,
    calls       BIGINT NOT NULL,
    bound       TEXT,
    approver    TEXT NOT NULL,
    channel     TEXT NOT NULL,
    issued_at   BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    issued_seq  BIGINT,
    revoked_at  BIGINT,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS grants_for ON grants (tenant, agent, system, verb);
";

/// The rule name grants speak under in a verdict's `rules_fired` (and a grant's own row).
pub const GRANT_RULE: &str = "grant";

/// The most calls one grant may cover.
pub const MAX_GRANT_CALLS: u64 = 10_000;

/// The longest a grant may last.
pub const MAX_GRANT_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// What an approver grants: `calls=N,for=DURATION[,when=EXPR]` (`when=` last: the
/// expression is the rest of the text, commas and all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantSpec {
    /// How many calls it covers (1 to [`MAX_GRANT_CALLS`]).
    pub calls: u64,
    /// How long it lasts from now (up to [`MAX_GRANT_LIFETIME`]).
    pub lasts: Duration,
    /// The condition each call's params must meet (CEL over `params`), if any.
    pub when: Option<String>,
}

impl FromStr for GrantSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<GrantSpec, String> {
        let (head, when) = match text.find("when=") {
            Some(at) => (&text[..at], Some(text[at + "when=".len()..].trim())),
            None => (text, None),
        };
        let (mut calls, mut lasts) = (None, None);
        for part in head.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some(("calls", n)) => {
                    calls = Some(
                        n.trim()
                            .parse::<u64>()
                            .map_err(|_| format!("calls={n}: not a whole number of calls"))?,
                    );
                }
                Some(("for", length)) => {
                    lasts = Some(humantime::parse_duration(length.trim()).map_err(|err| {
                        format!("for={length}: not a length such as 30m, 1h or 2d ({err})")
                    })?);
                }
                _ => {
                    return Err(format!(
                        "{part:?}: expected calls=N, for=LENGTH or when=EXPR (last)"
                    ))
                }
            }
        }
        let spec = GrantSpec {
            calls: calls.ok_or("calls=N is missing")?,
            lasts: lasts.ok_or("for=LENGTH is missing")?,
            when: when.map(str::to_owned),
        };
        spec.check()?;
        Ok(spec)
    }
}

impl GrantSpec {
    /// Whether the spec is within bounds and its condition compiles.
    fn check(&self) -> Result<(), String> {
        if !(1..=MAX_GRANT_CALLS).contains(&self.calls) {
            return Err(format!(
                "calls={}: a grant covers 1 to {MAX_GRANT_CALLS} calls",
                self.calls
            ));
        }
        if self.lasts < Duration::from_secs(1) || self.lasts > MAX_GRANT_LIFETIME {
            return Err(format!(
                "for={}: a grant lasts from 1s to 30 days",
                humantime::format_duration(self.lasts)
            ));
        }
        if let Some(when) = &self.when {
            Bound::parse(when).map_err(|err| err.to_string())?;
        }
        Ok(())
    }
}

/// A grant, as kept and listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grant {
    /// Its id (`grant-` and a time-ordered UUID).
    pub id: String,
    /// The approval request it was given on.
    pub request: String,
    /// That request's action id.
    pub action_id: String,
    /// The agent it covers (the request's, as its credential proved it).
    pub agent: String,
    /// How that agent was proven (`token` or `jwt`).
    pub agent_auth: String,
    /// The system it covers.
    pub system: String,
    /// The verb it covers.
    pub verb: String,
    /// The rules that asked about the request: a call another rule asks about is not
    /// covered.
    pub rules: Vec<String>,
    /// How many calls it covers.
    pub calls: u64,
    /// The condition each call's params must meet, if any.
    pub when: Option<String>,
    /// Who granted it.
    pub approver: String,
    /// Where (`cli`, `inbox`, …).
    pub channel: String,
    /// When it was granted.
    #[serde(serialize_with = "super::request::rfc3339")]
    pub issued_at: SystemTime,
    /// When it ends.
    #[serde(serialize_with = "super::request::rfc3339")]
    pub expires_at: SystemTime,
    /// Its row in the ledger; a grant without one covers nothing.
    pub issued_seq: Option<u64>,
    /// When it was revoked.
    #[serde(serialize_with = "super::request::rfc3339_opt")]
    pub revoked_at: Option<SystemTime>,
}

/// Why a grant does not cover a call now.
#[derive(Debug, Clone, PartialEq)]
pub enum Unusable {
    /// Its row was never written.
    Unrecorded,
    /// Revoked at this time.
    Revoked(SystemTime),
    /// Ended at this time.
    Expired(SystemTime),
}

impl Grant {
    /// The window its uses are counted in: `calls` within its whole life.
    pub fn claim(&self) -> WindowClaim {
        WindowClaim {
            key: format!("grant:{}", self.id),
            per: self
                .expires_at
                .duration_since(self.issued_at)
                .unwrap_or_default()
                .saturating_add(Duration::from_secs(1)),
            max: self.calls as f64,
            adds: 1.0,
        }
    }

    /// Whether it may cover calls at `now` (uses and params aside).
    pub fn unusable(&self, now: SystemTime) -> Option<Unusable> {
        if let Some(at) = self.revoked_at {
            return Some(Unusable::Revoked(at));
        }
        if now >= self.expires_at {
            return Some(Unusable::Expired(self.expires_at));
        }
        if self.issued_seq.is_none() {
            return Some(Unusable::Unrecorded);
        }
        None
    }

    /// Whether `action` is the kind of call it covers: the same agent, proven the same
    /// way, system and verb, asked about by the same rules.
    pub fn fits(&self, action: &Action, rules: &[String]) -> bool {
        action.agent.as_deref() == Some(self.agent.as_str())
            && action.extra.agent_auth.as_deref() == Some(self.agent_auth.as_str())
            && action.system == self.system
            && action.verb.as_str() == self.verb
            && rules == self.rules.as_slice()
    }
}

/// Whether `request` may be approved as a grant: an approval as asked, of an
/// authenticated agent, outside a quorum and a placeholder hold.
pub(super) fn grantable(request: &ApprovalRequest, spec: &GrantSpec) -> Result<(), ApprovalError> {
    let no = |detail: &str| ApprovalError::BadGrant {
        id: request.id.clone(),
        detail: detail.to_owned(),
    };
    spec.check().map_err(|detail| no(&detail))?;
    if request.verdict.quorum.is_some() {
        return Err(no(
            "the rule needs a quorum, and a grant is one person's approval of calls not yet seen",
        ));
    }
    if request.verdict.hold {
        return Err(no("the action is held for unfilled placeholders"));
    }
    if request.action.agent.is_none() {
        return Err(no("the request names no agent"));
    }
    match request.action.extra.agent_auth.as_deref() {
        Some("token" | "jwt") => Ok(()),
        _ => Err(no(
            "its agent was not proven by a token or a JWT (configure `agents:`), and a grant \
             is bound to an authenticated agent, never a label",
        )),
    }
}

const COLUMNS: &str = "id, request_id, action_id, agent, agent_auth, system, verb, rules, calls,
    bound, approver, channel, issued_at, expires_at, issued_seq, revoked_at";

impl ApprovalStore {
    /// Keeps a grant given with the approval of `request` (see [`grantable`]); it covers
    /// nothing until [`ApprovalStore::set_grant_row`] names its ledger row.
    pub(crate) fn issue_grant(
        &self,
        request: &ApprovalRequest,
        approver: &str,
        channel: &str,
        spec: &GrantSpec,
    ) -> Result<Grant, ApprovalError> {
        grantable(request, spec)?;
        let id = format!("grant-{}", uuid::Uuid::now_v7());
        let issued_at = self.now();
        // The rules that asked; a line a grant added (one not used) is not a rule.
        let asked_by: Vec<&String> = request
            .verdict
            .rules_fired
            .iter()
            .filter(|rule| *rule != GRANT_RULE)
            .collect();
        let rules = serde_json::to_string(&asked_by)
            .map_err(|_| ApprovalError::Internal("rule names that are not JSON"))?;
        let agent = request.action.agent.as_deref().unwrap_or_default();
        let auth = request
            .action
            .extra
            .agent_auth
            .as_deref()
            .unwrap_or_default();
        let calls = i64::try_from(spec.calls).unwrap_or(i64::MAX);
        self.backend().execute(
            "keeping a grant",
            "INSERT INTO grants (tenant, id, request_id, action_id, agent, agent_auth, system,
                 verb, rules, calls, bound, approver, channel, issued_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            &[
                id.as_str().into(),
                request.id.as_str().into(),
                request.action.id.as_str().into(),
                agent.into(),
                auth.into(),
                request.action.system.as_str().into(),
                request.action.verb.as_str().into(),
                rules.as_str().into(),
                calls.into(),
                spec.when.as_deref().map(str::trim).into(),
                approver.into(),
                channel.into(),
                millis(issued_at).into(),
                millis(issued_at + spec.lasts).into(),
            ],
        )?;
        self.grant(&id)
    }

    /// Names the ledger row that records grant `id`: from now on it covers calls.
    pub(crate) fn set_grant_row(&self, id: &str, seq: u64) -> Result<(), ApprovalError> {
        self.backend().execute(
            "recording a grant's row",
            "UPDATE grants SET issued_seq = ?3 WHERE tenant = ?1 AND id = ?2",
            &[id.into(), i64::try_from(seq).unwrap_or(i64::MAX).into()],
        )?;
        Ok(())
    }

    /// The grant with this id.
    pub fn grant(&self, id: &str) -> Result<Grant, ApprovalError> {
        self.grants_where("id = ?2", &[id])?
            .into_iter()
            .next()
            .ok_or_else(|| ApprovalError::UnknownGrant { id: id.to_owned() })
    }

    /// Every grant, newest first.
    pub fn grants(&self) -> Result<Vec<Grant>, ApprovalError> {
        self.grants_where("1 = 1", &[])
    }

    /// The grants given for calls of `action`'s agent, system and verb, oldest first.
    pub fn grants_for(&self, action: &Action) -> Result<Vec<Grant>, ApprovalError> {
        let Some(agent) = action.agent.as_deref() else {
            return Ok(Vec::new());
        };
        let mut found = self.grants_where(
            "agent = ?2 AND system = ?3 AND verb = ?4",
            &[agent, &action.system, action.verb.as_str()],
        )?;
        found.reverse();
        Ok(found)
    }

    /// Revokes grant `id`: it covers no call from the next one on, in every process.
    pub fn revoke_grant(&self, id: &str) -> Result<Grant, ApprovalError> {
        let changed = self.backend().execute(
            "revoking a grant",
            "UPDATE grants SET revoked_at = ?3 WHERE tenant = ?1 AND id = ?2 AND revoked_at IS NULL",
            &[id.trim().into(), millis(self.now()).into()],
        )?;
        if changed == 0 {
            return Err(ApprovalError::UnknownGrant {
                id: id.trim().to_owned(),
            });
        }
        self.grant(id.trim())
    }

    fn grants_where(&self, filter: &str, args: &[&str]) -> Result<Vec<Grant>, ApprovalError> {
        let args: Vec<Arg<'_>> = args.iter().map(|a| Arg::from(*a)).collect();
        self.backend()
            .query(
                "reading grants",
                &format!(
                    "SELECT {COLUMNS} FROM grants WHERE tenant = ?1 AND {filter}
                     ORDER BY issued_at DESC, id DESC"
                ),
                &args,
            )?
            .into_iter()
            .map(read_grant)
            .collect()
    }
}

fn read_grant(row: Vec<Cell>) -> Result<Grant, ApprovalError> {
    let mut cells = row.into_iter();
    let mut next = || cells.next().unwrap_or(Cell::Null);
    let mut text = |what: &'static str| next().text().ok_or(ApprovalError::Internal(what));
    let id = text("a grant row without its id")?;
    let request = text("a grant row without its request")?;
    let action_id = text("a grant row without its action")?;
    let agent = text("a grant row without its agent")?;
    let agent_auth = text("a grant row without its agent's proof")?;
    let system = text("a grant row without its system")?;
    let verb = text("a grant row without its verb")?;
    let rules = text("a grant row without its rules")?;
    let rules: Vec<String> = serde_json::from_str(&rules)
        .map_err(|_| ApprovalError::Internal("a grant row whose rules are not a list"))?;
    let calls = next()
        .int()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or(ApprovalError::Internal("a grant row without its calls"))?;
    let when = next().text();
    let approver = next()
        .text()
        .ok_or(ApprovalError::Internal("a grant row without its approver"))?;
    let channel = next()
        .text()
        .ok_or(ApprovalError::Internal("a grant row without its channel"))?;
    let issued_at = next()
        .int()
        .ok_or(ApprovalError::Internal("a grant row without its time"))?;
    let expires_at = next()
        .int()
        .ok_or(ApprovalError::Internal("a grant row without its end"))?;
    Ok(Grant {
        id,
        request,
        action_id,
        agent,
        agent_auth,
        system,
        verb,
        rules,
        calls,
        when,
        approver,
        channel,
        issued_at: from_millis(issued_at),
        expires_at: from_millis(expires_at),
        issued_seq: next().int().and_then(|n| u64::try_from(n).ok()),
        revoked_at: next().int().map(from_millis),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_calls_length_and_a_condition_with_commas() {
        let spec: GrantSpec =
            r#"calls=3,for=1h,when=params.amount <= 50 && params.currency in ["EUR", "USD"]"#
                .parse()
                .unwrap();
        assert_eq!(spec.calls, 3);
        assert_eq!(spec.lasts, Duration::from_secs(3600));
        assert_eq!(
            spec.when.as_deref(),
            Some(r#"params.amount <= 50 && params.currency in ["EUR", "USD"]"#)
        );
        let spec: GrantSpec = "for=30m, calls=1".parse().unwrap();
        assert_eq!((spec.calls, spec.when), (1, None));
    }

    #[test]
    fn a_bad_spec_says_what_is_wrong() {
        for (text, says) in [
            ("for=1h", "calls=N is missing"),
            ("calls=3", "for=LENGTH is missing"),
            ("calls=0,for=1h", "1 to 10000 calls"),
            ("calls=-1,for=1h", "not a whole number"),
            ("calls=3,for=soon", "not a length"),
            ("calls=3,for=90d", "1s to 30 days"),
            ("calls=3,for=1h,agent=x", "expected calls=N"),
            ("calls=3,for=1h,when=agent == 'x'", "reads only params"),
            ("calls=3,for=1h,when=params.amount <", "column"),
        ] {
            let err = text.parse::<GrantSpec>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}

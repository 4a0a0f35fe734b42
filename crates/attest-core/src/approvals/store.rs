//! The approval store: table `approvals` beside the ledger, in its SQLite file (on a
//! connection of its own) or in its PostgreSQL database (rows marked with the ledger's
//! tenant, so each tenant has its own requests and approvers, as its own chain).
//!
//! Every state change is one conditional `UPDATE … WHERE status = 'pending'` (or
//! `consumed_at IS NULL`), so threads and processes sharing the file race safely: the
//! first decision wins and an approval runs at most once. Under a quorum each person's
//! decision is one row of `approval_decisions` (its key: request and person), inserted only
//! while the request is pending; the request then moves off `pending` in the same one
//! conditional update, so of several processes approving at once exactly one approves it,
//! and one of them always sees every vote committed before its own (each reads after its
//! own insert committed).
//!
//! Known limitation: the store and the ledger are written in separate transactions. A
//! crash between a rejection and its ledger row leaves the request decided in the store
//! with no outcome row; the decision itself (who, when, channel) stays in the store.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use attest_ledger::{Clock, Ledger, PgDatabase, SystemClock};
use attest_policy::{Action, Verdict};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::backend::{is_unique_violation, Arg, Backend, Cell, Home, EMPTY_PARAMS};
use super::request::Vote;
use super::request::{action_digest, apply_edits};
use super::token::ResumeToken;
use super::{agents, approvers, grants};
use super::{Answer, ApprovalError, ApprovalRequest, Status};

/// The version of the `approvals` table, kept in `attest_meta` under
/// `approvals_schema_version`; bump it with a migration.
pub const APPROVALS_SCHEMA_VERSION: u32 = 4;

/// How long a writer waits for another's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
    id              TEXT PRIMARY KEY,
    token_hash      TEXT NOT NULL UNIQUE,
    action          TEXT NOT NULL,
    digest          TEXT NOT NULL,
    verdict         TEXT NOT NULL,
    tier            TEXT NOT NULL,
    approvers       TEXT NOT NULL,
    hold            INTEGER NOT NULL,
    requested_at    INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    decided_at      INTEGER,
    status          TEXT NOT NULL,
    approver        TEXT,
    channel         TEXT,
    edits           TEXT,
    note            TEXT,
    approved_digest TEXT,
    consumed_at     INTEGER,
    ask_seq         INTEGER,
    ask_hash        TEXT,
    ask_ts          TEXT,
    outcome_seq     INTEGER,
    outcome_hash    TEXT,
    outcome_ts      TEXT,
    notify_error    TEXT,
    use_by_ms       INTEGER NOT NULL DEFAULT 3600000,
    purged_at       INTEGER,
    tenant          TEXT NOT NULL DEFAULT '',
    remind_at       INTEGER,
    escalate_at     INTEGER,
    reminded_at     INTEGER,
    escalated_at    INTEGER,
    approved_by     TEXT
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals(status, expires_at);
";

/// Every decision on every request (who, yes or no, where, note, when): one row per
/// person and request, so a quorum counts each person once.
const DECISIONS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approval_decisions (
    tenant      TEXT NOT NULL DEFAULT '',
    id          TEXT NOT NULL,
    approver    TEXT NOT NULL,
    approve     INTEGER NOT NULL,
    channel     TEXT NOT NULL,
    note        TEXT,
    decided_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, id, approver)
);
";

/// More resume tokens of a request, beside the one it was filed with: one for each later
/// attempt of the same call held under it ([`ApprovalStore::add_token`]), so an earlier
/// attempt's token still resumes it. A table of its own, made where missing (no other
/// change, so no version of its own), in SQLite and in PostgreSQL alike.
const TOKENS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approval_tokens (
    tenant      TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    id          TEXT NOT NULL
);
";

/// Version 3 to 4: quorums (the decisions table, who approved), reminders and
/// escalation (when each is due, and when it fired).
const MIGRATE_3_TO_4: &str = "
ALTER TABLE approvals ADD COLUMN remind_at INTEGER;
ALTER TABLE approvals ADD COLUMN escalate_at INTEGER;
ALTER TABLE approvals ADD COLUMN reminded_at INTEGER;
ALTER TABLE approvals ADD COLUMN escalated_at INTEGER;
ALTER TABLE approvals ADD COLUMN approved_by TEXT;
";

/// The same version 3 to 4 in PostgreSQL (idempotent: processes may race on it), with
/// [`PG_DECISIONS_SCHEMA`].
const PG_MIGRATE_3_TO_4: &str = "
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS remind_at BIGINT;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS escalate_at BIGINT;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS reminded_at BIGINT;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS escalated_at BIGINT;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS approved_by TEXT;
";

/// The decisions table in PostgreSQL, made with the others and by the 3 to 4 upgrade.
const PG_DECISIONS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approval_decisions (
    tenant      TEXT NOT NULL,
    id          TEXT NOT NULL,
    approver    TEXT NOT NULL,
    approve     BOOLEAN NOT NULL,
    channel     TEXT NOT NULL,
    note        TEXT,
    decided_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, id, approver)
);
";

/// The same tables in a PostgreSQL ledger's database: one set for every tenant, keyed
/// by tenant first (as the ledger's own tables).
const PG_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS approvals (
    tenant          TEXT NOT NULL,
    id              TEXT NOT NULL,
    token_hash      TEXT NOT NULL UNIQUE,
    action          TEXT NOT NULL,
    digest          TEXT NOT NULL,
    verdict         TEXT NOT NULL,
    tier            TEXT NOT NULL,
    approvers       TEXT NOT NULL,
    hold            BOOLEAN NOT NULL,
    requested_at    BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    decided_at      BIGINT,
    status          TEXT NOT NULL,
    approver        TEXT,
    channel         TEXT,
    edits           TEXT,
    note            TEXT,
    approved_digest TEXT,
    consumed_at     BIGINT,
    ask_seq         BIGINT,
    ask_hash        TEXT,
    ask_ts          TEXT,
    outcome_seq     BIGINT,
    outcome_hash    TEXT,
    outcome_ts      TEXT,
    notify_error    TEXT,
    use_by_ms       BIGINT NOT NULL DEFAULT 3600000,
    purged_at       BIGINT,
    remind_at       BIGINT,
    escalate_at     BIGINT,
    reminded_at     BIGINT,
    escalated_at    BIGINT,
    approved_by     TEXT,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (tenant, status, expires_at);
CREATE TABLE IF NOT EXISTS approvers (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    slack_user  TEXT,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT,
    UNIQUE (tenant, slack_user)
);
CREATE UNIQUE INDEX IF NOT EXISTS approvers_name ON approvers (tenant, lower(name));
";

/// Version 2 to 3: a tenant column, so one set of statements serves a SQLite file (one
/// tenant, `''`) and a PostgreSQL database (many). The approvers table gets it too, if
/// it was made.
const MIGRATE_2_TO_3: &str = "ALTER TABLE approvals ADD COLUMN tenant TEXT NOT NULL DEFAULT '';";
const MIGRATE_APPROVERS_2_TO_3: &str =
    "ALTER TABLE approvers ADD COLUMN tenant TEXT NOT NULL DEFAULT '';";

/// Version 1 to 2: approvals get a use-by time and their params are purged once used or
/// ended; the digest now covers where the call goes (server, tool, method, URL), so every
/// stored digest is computed again.
const MIGRATE_1_TO_2: &str = "
ALTER TABLE approvals ADD COLUMN use_by_ms INTEGER NOT NULL DEFAULT 3600000;
ALTER TABLE approvals ADD COLUMN purged_at INTEGER;
";

const COLUMNS: &str = "id, action, digest, verdict, requested_at, expires_at, decided_at, status,
    approver, channel, edits, note, approved_digest, consumed_at, ask_seq, ask_hash, ask_ts,
    outcome_seq, outcome_hash, outcome_ts, notify_error, use_by_ms, purged_at, reminded_at,
    escalated_at, approved_by";

/// Durable approval requests, shared by every process that opens the same ledger.
pub struct ApprovalStore {
    backend: Backend,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ApprovalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalStore")
            .field("path", &self.backend.path())
            .finish_non_exhaustive()
    }
}

impl ApprovalStore {
    /// Opens the store beside `ledger` (its SQLite file, or its PostgreSQL database and
    /// tenant), creating or upgrading the tables if needed.
    pub fn open(ledger: &Ledger) -> Result<ApprovalStore, ApprovalError> {
        ApprovalStore::open_with_clock(ledger, default_clock())
    }

    /// Like [`ApprovalStore::open`], with the clock that times requests and expiry.
    pub fn open_with_clock(
        ledger: &Ledger,
        clock: Arc<dyn Clock>,
    ) -> Result<ApprovalStore, ApprovalError> {
        let home = match ledger.postgres() {
            Some(db) => {
                attest_ledger::off_runtime(|| init_postgres(&db))?;
                Home::Postgres(db)
            }
            None => Home::Sqlite {
                conn: Mutex::new(open_sqlite(ledger.path())?),
                path: ledger.path().to_path_buf(),
            },
        };
        Ok(ApprovalStore {
            backend: Backend::new(home),
            clock,
        })
    }

    /// The database file, or the PostgreSQL database's URL without credentials.
    pub fn path(&self) -> &Path {
        self.backend.path()
    }

    /// The store's current time.
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    pub(super) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Stores a pending request for `action` (which must carry its final id, agent and
    /// actor), expiring after `ttl`; once approved, the approval may be used for `use_by`.
    /// Returns it with its resume token, which is shown only here.
    pub fn create(
        &self,
        action: &Action,
        verdict: &Verdict,
        ttl: Duration,
        use_by: Duration,
    ) -> Result<(ApprovalRequest, ResumeToken), ApprovalError> {
        if action.id.is_empty() {
            return Err(ApprovalError::Internal(
                "an approval request needs an action id",
            ));
        }
        let token = ResumeToken::generate()?;
        let digest = action_digest(action)?;
        let now = self.now();
        let waits = verdict.escalation();
        // The rule's `expire_after`, when it sets one, is how long its requests wait.
        let ttl = waits.expire_after.map_or(ttl, Duration::from_secs);
        let expires = now.checked_add(ttl).unwrap_or(now);
        let after = |secs: Option<u64>| {
            secs.map(|secs| millis(now.checked_add(Duration::from_secs(secs)).unwrap_or(now)))
        };
        let (remind_at, escalate_at) = (after(waits.remind_after), after(waits.escalate_after));
        let action_json = to_json(&action.id, "action", action)?;
        let verdict_json = to_json(&action.id, "verdict", verdict)?;
        let approvers_json = to_json(&action.id, "approvers", &verdict.approvers)?;
        let token_hash = token.hash();
        self.backend.execute(
            "storing an approval request",
            "INSERT INTO approvals (tenant, id, token_hash, action, digest, verdict, tier, approvers,
                 hold, requested_at, expires_at, status, use_by_ms, remind_at, escalate_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'pending', ?12, ?13, ?14)",
            &[
                action.id.as_str().into(),
                token_hash.as_str().into(),
                action_json.as_str().into(),
                digest.as_str().into(),
                verdict_json.as_str().into(),
                verdict.tier.as_str().into(),
                approvers_json.as_str().into(),
                verdict.hold.into(),
                millis(now).into(),
                millis(expires).into(),
                i64::try_from(use_by.as_millis()).unwrap_or(i64::MAX).into(),
                Arg::Int(remind_at),
                Arg::Int(escalate_at),
            ],
        )?;
        let request = self.get_by_id(&action.id)?;
        Ok((request, token))
    }

    /// The request with this id, or with this resume token.
    pub fn get(&self, id_or_token: &str) -> Result<ApprovalRequest, ApprovalError> {
        if ResumeToken::looks_like_token(id_or_token) {
            self.get_by_token(&ResumeToken::new(id_or_token))
        } else {
            self.get_by_id(id_or_token)
        }
    }

    /// The request with this id.
    pub fn get_by_id(&self, id: &str) -> Result<ApprovalRequest, ApprovalError> {
        self.query_one("id = ?2", id)
    }

    /// The request this resume token belongs to.
    pub fn get_by_token(&self, token: &ResumeToken) -> Result<ApprovalRequest, ApprovalError> {
        self.query_one(
            "(token_hash = ?2
              OR id IN (SELECT id FROM approval_tokens WHERE tenant = ?1 AND token_hash = ?2))",
            &token.hash(),
        )
    }

    fn query_one(&self, filter: &str, key: &str) -> Result<ApprovalRequest, ApprovalError> {
        let rows = self.backend.query(
            "reading an approval request",
            &format!("SELECT {COLUMNS} FROM approvals WHERE tenant = ?1 AND {filter}"),
            &[key.into()],
        )?;
        let row = rows.into_iter().next().ok_or(ApprovalError::NotFound)?;
        self.with_votes(RawRow::read(row)?.parse()?)
    }

    /// The request with its decisions read from the decisions table.
    fn with_votes(&self, mut request: ApprovalRequest) -> Result<ApprovalRequest, ApprovalError> {
        request.votes = self.votes(&request.id)?;
        Ok(request)
    }

    /// Every decision recorded on the request, in the order they were made.
    pub fn votes(&self, id: &str) -> Result<Vec<Vote>, ApprovalError> {
        let rows = self.backend.query(
            "reading the decisions on a request",
            "SELECT approver, approve, channel, note, decided_at FROM approval_decisions
             WHERE tenant = ?1 AND id = ?2 ORDER BY decided_at, approver",
            &[id.into()],
        )?;
        rows.into_iter()
            .map(|row| {
                let mut cells = row.into_iter();
                let mut next = || cells.next().unwrap_or(Cell::Null);
                let bad = |field| ApprovalError::Tampered {
                    id: id.to_owned(),
                    field,
                };
                Ok(Vote {
                    approver: next().text().ok_or_else(|| bad("decision approver"))?,
                    approve: next().int().ok_or_else(|| bad("decision approve"))? != 0,
                    channel: next().text().ok_or_else(|| bad("decision channel"))?,
                    note: next().text(),
                    at: from_millis(next().int().ok_or_else(|| bad("decision time"))?),
                })
            })
            .collect()
    }

    /// Requests nobody has decided that have not expired, oldest first.
    pub fn pending(&self) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let rows = self.backend.query(
            "listing pending requests",
            &format!(
                "SELECT {COLUMNS} FROM approvals
                 WHERE tenant = ?1 AND status = 'pending' AND expires_at > ?2
                 ORDER BY requested_at, id"
            ),
            &[millis(self.now()).into()],
        )?;
        rows.into_iter()
            .map(|row| self.with_votes(RawRow::read(row)?.parse()?))
            .collect()
    }

    /// A further resume token for request `id` while it is pending (`None` once it is
    /// not): for a later attempt of the same call held under it. Every token of a
    /// request resumes it, and it still runs once.
    pub fn add_token(&self, id: &str) -> Result<Option<ResumeToken>, ApprovalError> {
        let token = ResumeToken::generate()?;
        let added = self.backend.execute(
            "adding a resume token",
            "INSERT INTO approval_tokens (tenant, token_hash, id)
             SELECT ?1, ?2, ?3 WHERE EXISTS
               (SELECT 1 FROM approvals WHERE tenant = ?1 AND id = ?3 AND status = 'pending')",
            &[token.hash().as_str().into(), id.into()],
        )?;
        Ok((added > 0).then_some(token))
    }

    /// The newest request for the call with this [`action_digest`] that may still be
    /// used: pending and not expired, or approved (or edited) and neither used nor past
    /// its use-by time. How a door finds the request an earlier attempt of the same call
    /// filed, in any process that opens the ledger ([`super::StoreGate::same_call`]).
    pub fn open_for_call(&self, digest: &str) -> Result<Option<ApprovalRequest>, ApprovalError> {
        let rows = self.backend.query(
            "finding the request of the same call",
            &format!(
                "SELECT {COLUMNS} FROM approvals
                 WHERE tenant = ?1 AND digest = ?2 AND purged_at IS NULL AND consumed_at IS NULL
                   AND ((status = 'pending' AND expires_at > ?3)
                     OR (status IN ('approved', 'edited') AND decided_at + use_by_ms > ?3))
                 ORDER BY requested_at DESC, id DESC LIMIT 1"
            ),
            &[digest.into(), millis(self.now()).into()],
        )?;
        rows.into_iter()
            .next()
            .map(|row| self.with_votes(RawRow::read(row)?.parse()?))
            .transpose()
    }

    /// The `limit` most recently decided requests (approved, edited, rejected, expired
    /// or cancelled), newest first: the inbox's decision history.
    pub fn decided(&self, limit: usize) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let rows = self.backend.query(
            "listing decided requests",
            &format!(
                "SELECT {COLUMNS} FROM approvals
                 WHERE tenant = ?1 AND status <> 'pending' AND decided_at IS NOT NULL
                 ORDER BY decided_at DESC, id DESC LIMIT ?2"
            ),
            &[i64::try_from(limit).unwrap_or(i64::MAX).into()],
        )?;
        rows.into_iter()
            .map(|row| self.with_votes(RawRow::read(row)?.parse()?))
            .collect()
    }

    /// Records `answer` on the request with this id or token, if it is still pending,
    /// has not expired, and the approver may decide it. The first decision wins.
    pub fn decide(
        &self,
        id_or_token: &str,
        answer: &Answer,
    ) -> Result<ApprovalRequest, ApprovalError> {
        let request = self.get(id_or_token)?;
        let id = request.id.clone();
        if request.status != Status::Pending {
            return Err(ApprovalError::AlreadyDecided {
                id,
                status: request.status,
            });
        }
        let now = self.now();
        if now >= request.expires_at {
            return Err(ApprovalError::Expired { id });
        }
        if answer.approver.trim().is_empty() {
            return Err(ApprovalError::NoApprover { id });
        }
        // Only a registered, not revoked approver decides; the name recorded is theirs.
        let approver = self.active_approver(&answer.approver)?.name;
        if !request.may_decide(&approver) {
            return Err(ApprovalError::NotAnApprover { id, approver });
        }
        let quorum = request.verdict.quorum.clone();
        // Separation of duties: who asked, and whose connection it uses, never approve
        // their own request (they may withdraw it: reject, except where a quorum counts
        // rejections too).
        if request.is_own(&approver) && (answer.approve || quorum.is_some()) {
            return Err(ApprovalError::OwnRequest { id, approver });
        }
        if let Some(spec) = &answer.grant {
            if !answer.approve || answer.edits.is_some() {
                return Err(ApprovalError::BadGrant {
                    id,
                    detail: "a grant comes with an approval of the action as asked".to_owned(),
                });
            }
            grants::grantable(&request, spec)?;
        }
        if quorum.is_some() && answer.edits.is_some() {
            return Err(ApprovalError::BadEdits {
                id,
                detail: "a request under a quorum is approved as asked (every approval is for \
                         the same action); reject it and have the agent ask again with the change"
                    .to_owned(),
            });
        }
        let (status, approved_digest) = match (&answer.edits, answer.approve) {
            (Some(_), false) => {
                return Err(ApprovalError::BadEdits {
                    id,
                    detail: "edits come with an approval, not a rejection".to_owned(),
                })
            }
            (Some(edits), true) => {
                let edited = apply_edits(&id, &request.action, edits)?;
                (Status::Edited, Some(action_digest(&edited)?))
            }
            (None, true) if request.verdict.hold => {
                return Err(ApprovalError::HoldNeedsEdits { id })
            }
            (None, true) => (Status::Approved, Some(request.digest.clone())),
            (None, false) => (Status::Rejected, None),
        };
        let edits = answer
            .edits
            .as_ref()
            .map(|edits| to_json(&id, "edits", edits))
            .transpose()?;
        // Every decision is recorded, once per person, while the request is still open.
        let recorded = self.backend.execute(
            "recording a decision",
            "INSERT INTO approval_decisions (tenant, id, approver, approve, channel, note, decided_at)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
             WHERE EXISTS (SELECT 1 FROM approvals WHERE tenant = ?1 AND id = ?2
                           AND status = 'pending' AND expires_at > ?7)",
            &[
                id.as_str().into(),
                approver.as_str().into(),
                answer.approve.into(),
                answer.channel.as_str().into(),
                answer.note.as_deref().into(),
                millis(now).into(),
            ],
        );
        match recorded {
            Ok(0) => return Err(self.not_open(id)?),
            Ok(_) => {}
            Err(err) if is_unique_violation(&err) => {
                return Err(ApprovalError::AlreadyVoted { id, approver })
            }
            Err(err) => return Err(err),
        }
        let approved_by = match &quorum {
            None => vec![approver.clone()],
            Some(quorum) => {
                let after = self.get_by_id(&id)?;
                let progress = after.progress();
                if !answer.approve && progress.rejections < quorum.reject {
                    return Ok(after);
                }
                if answer.approve && progress.have < progress.need {
                    return Ok(after);
                }
                progress.approved_by
            }
        };
        let approved_by = match status {
            Status::Rejected => None,
            _ => Some(to_json(&id, "approved_by", &approved_by)?),
        };
        // The decision point: only one conditional update can move the row off `pending`.
        let changed = self.backend.execute(
            "recording a decision",
            "UPDATE approvals SET status = ?2, approver = ?3, channel = ?4, edits = ?5,
                 note = ?6, decided_at = ?7, approved_digest = ?8, approved_by = ?10
             WHERE tenant = ?1 AND id = ?9 AND status = 'pending' AND expires_at > ?7",
            &[
                status.as_str().into(),
                approver.as_str().into(),
                answer.channel.as_str().into(),
                edits.as_deref().into(),
                answer.note.as_deref().into(),
                millis(now).into(),
                approved_digest.as_deref().into(),
                id.as_str().into(),
                approved_by.as_deref().into(),
            ],
        )?;
        let after = self.get_by_id(&id)?;
        if changed == 0 {
            // Under a quorum, another approver's call may have met it with this vote
            // counted: the approval stands (and is recorded when it runs). A rejection
            // is only ever reported by the call that made it, which records it.
            if quorum.is_some() && answer.approve && after.status == Status::Approved {
                return Ok(after);
            }
            return Err(match after.status {
                Status::Pending => ApprovalError::Expired { id },
                status => ApprovalError::AlreadyDecided { id, status },
            });
        }
        Ok(after)
    }

    /// Why a request no longer takes decisions: decided already, or expired.
    fn not_open(&self, id: String) -> Result<ApprovalError, ApprovalError> {
        let after = self.get_by_id(&id)?;
        Ok(match after.status {
            Status::Pending => ApprovalError::Expired { id },
            status => ApprovalError::AlreadyDecided { id, status },
        })
    }

    /// Marks every pending request whose reminder is due as reminded, and returns those
    /// this call marked: with several servers running, each reminder is sent once.
    pub fn remind_due(&self) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        self.mark_due(
            "marking reminders",
            "UPDATE approvals SET reminded_at = ?2
             WHERE tenant = ?1 AND status = 'pending' AND expires_at > ?2
               AND remind_at IS NOT NULL AND remind_at <= ?2 AND reminded_at IS NULL
             RETURNING id",
        )
    }

    /// Marks every pending request whose escalation is due as escalated (its rule's
    /// `escalate_to` may decide it from then on), and returns those this call marked:
    /// each escalation happens once, whichever server gets there first.
    pub fn escalate_due(&self) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        self.mark_due(
            "marking escalations",
            "UPDATE approvals SET escalated_at = ?2
             WHERE tenant = ?1 AND status = 'pending' AND expires_at > ?2
               AND escalate_at IS NOT NULL AND escalate_at <= ?2 AND escalated_at IS NULL
             RETURNING id",
        )
    }

    /// One conditional `UPDATE … RETURNING id` (bound: tenant, now): a row is marked by
    /// exactly one caller, on either store.
    fn mark_due(
        &self,
        during: &'static str,
        sql: &str,
    ) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let rows = self
            .backend
            .query(during, sql, &[millis(self.now()).into()])?;
        rows.into_iter()
            .map(|row| {
                let id =
                    row.into_iter()
                        .next()
                        .and_then(Cell::text)
                        .ok_or(ApprovalError::Internal(
                            "a marked request came back without its id",
                        ))?;
                self.get_by_id(&id)
            })
            .collect()
    }

    /// Marks as `expired` every pending request whose time ran out, and every approval
    /// not used before its use-by time, and returns those this call marked (another
    /// process may mark some first; each is returned once). An unused approval keeps its
    /// approver, so the record says who approved what was never run.
    pub fn expire_due(&self) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        self.mark_due(
            "expiring requests",
            "UPDATE approvals SET status = 'expired',
                 decided_at = CASE WHEN status = 'pending' THEN ?2 ELSE decided_at END
             WHERE tenant = ?1
               AND ((status = 'pending' AND expires_at <= ?2)
                    OR (status IN ('approved', 'edited') AND consumed_at IS NULL
                        AND decided_at + use_by_ms <= ?2))
             RETURNING id",
        )
    }

    /// Marks a request whose caller went away as `cancelled`, if nobody has decided it yet;
    /// returns whether this call changed it. Not a decision: no approver, nothing runs.
    pub fn cancel(&self, id: &str) -> Result<bool, ApprovalError> {
        let changed = self.backend.execute(
            "cancelling a request",
            "UPDATE approvals SET status = 'cancelled', decided_at = ?2
             WHERE tenant = ?1 AND id = ?3 AND status = 'pending'",
            &[millis(self.now()).into(), id.into()],
        )?;
        self.purge()?;
        Ok(changed > 0)
    }

    /// Marks an approved request as used, before its use-by time, and purges its params
    /// (the caller holds the action it runs); fails if it was used before or its use-by
    /// time passed. Called just before the action runs.
    pub(crate) fn consume(&self, id: &str) -> Result<(), ApprovalError> {
        let now = millis(self.now());
        let changed = self.backend.execute(
            "using an approval",
            "UPDATE approvals SET consumed_at = ?2
             WHERE tenant = ?1 AND id = ?3 AND status IN ('approved', 'edited')
               AND consumed_at IS NULL AND decided_at + use_by_ms > ?2",
            &[now.into(), id.into()],
        )?;
        if changed == 0 {
            let request = self.get_by_id(id)?;
            return Err(match request.use_by {
                Some(use_by) if !request.consumed && millis(use_by) <= now => {
                    ApprovalError::Expired { id: id.to_owned() }
                }
                _ => ApprovalError::AlreadyUsed { id: id.to_owned() },
            });
        }
        self.purge()
    }

    /// Deletes the params (and edits) of every request that can never run again: used,
    /// cancelled, or rejected or expired with its ledger row written. What remains is what the
    /// ledger already says (who, when, how), plus the digest.
    pub fn purge(&self) -> Result<(), ApprovalError> {
        self.backend.execute(
            "purging used params",
            &format!(
                "UPDATE approvals SET action = {EMPTY_PARAMS}, edits = NULL, purged_at = ?2
                 WHERE tenant = ?1 AND purged_at IS NULL
                   AND (consumed_at IS NOT NULL
                        OR status = 'cancelled'
                        OR (status IN ('rejected', 'expired') AND outcome_seq IS NOT NULL))"
            ),
            &[millis(self.now()).into()],
        )?;
        Ok(())
    }

    /// Remembers the ledger row of the ask (seq, hash, ts).
    pub(crate) fn set_ask_row(
        &self,
        id: &str,
        row: (u64, &str, &str),
    ) -> Result<(), ApprovalError> {
        self.set_row(
            id,
            row,
            "UPDATE approvals SET ask_seq = ?2, ask_hash = ?3, ask_ts = ?4
             WHERE tenant = ?1 AND id = ?5",
        )
    }

    /// Remembers the ledger row of a rejection or expiry.
    pub(crate) fn set_outcome_row(
        &self,
        id: &str,
        row: (u64, &str, &str),
    ) -> Result<(), ApprovalError> {
        self.set_row(
            id,
            row,
            "UPDATE approvals SET outcome_seq = ?2, outcome_hash = ?3, outcome_ts = ?4
             WHERE tenant = ?1 AND id = ?5",
        )
    }

    fn set_row(
        &self,
        id: &str,
        (seq, hash, ts): (u64, &str, &str),
        sql: &str,
    ) -> Result<(), ApprovalError> {
        let seq =
            i64::try_from(seq).map_err(|_| ApprovalError::Internal("a ledger seq beyond i64"))?;
        self.backend.execute(
            "linking a ledger row",
            sql,
            &[seq.into(), hash.into(), ts.into(), id.into()],
        )?;
        Ok(())
    }

    /// Remembers that a notifier failed (the request stays pending and listed).
    pub fn set_notify_error(&self, id: &str, error: &str) -> Result<(), ApprovalError> {
        self.backend.execute(
            "noting a notifier failure",
            "UPDATE approvals SET notify_error = ?2 WHERE tenant = ?1 AND id = ?3",
            &[error.into(), id.into()],
        )?;
        Ok(())
    }
}

/// Test-only: in a debug build, `ATTEST_TEST_CLOCK_FILE` names a file holding the time
/// (Unix milliseconds) every store opened with [`ApprovalStore::open`] reads as now, so
/// tests drive reminders, escalation and expiry in several processes on one controlled
/// clock. Release builds never read it.
pub const TEST_CLOCK_VAR: &str = "ATTEST_TEST_CLOCK_FILE";

fn default_clock() -> Arc<dyn Clock> {
    #[cfg(debug_assertions)]
    if let Some(path) = std::env::var_os(TEST_CLOCK_VAR) {
        return Arc::new(FileClock(PathBuf::from(path)));
    }
    Arc::new(SystemClock)
}

/// The time written in a file (Unix milliseconds); the system's when it cannot be read.
#[cfg(debug_assertions)]
struct FileClock(PathBuf);

#[cfg(debug_assertions)]
impl Clock for FileClock {
    fn now(&self) -> SystemTime {
        std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|text| text.trim().parse::<i64>().ok())
            .map_or_else(SystemTime::now, from_millis)
    }
}

/// Opens the ledger's SQLite file on a connection of the store's own and brings the
/// tables to [`APPROVALS_SCHEMA_VERSION`].
fn open_sqlite(path: &Path) -> Result<Connection, ApprovalError> {
    let sqlite = |during| {
        let path = path.to_path_buf();
        move |source| ApprovalError::Sqlite {
            path,
            during,
            source,
        }
    };
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite("opening"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sqlite("setting the busy timeout"))?;
    attest_ledger::switch_to_wal(&conn, BUSY_TIMEOUT).map_err(sqlite("switching to WAL"))?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(sqlite("setting durability"))?;
    // Purged params are overwritten with zeros in the file, not just unlinked.
    conn.pragma_update(None, "secure_delete", "ON")
        .map_err(sqlite("setting secure delete"))?;
    init_sqlite(path, &mut conn)?;
    conn.execute_batch(approvers::SCHEMA)
        .map_err(sqlite("creating the approvers table"))?;
    conn.execute_batch(agents::SCHEMA)
        .map_err(sqlite("creating the agents table"))?;
    conn.execute_batch(grants::SCHEMA)
        .map_err(sqlite("creating the grants table"))?;
    conn.execute_batch(TOKENS_SCHEMA)
        .map_err(sqlite("creating the resume tokens table"))?;
    Ok(conn)
}

fn init_sqlite(path: &Path, conn: &mut Connection) -> Result<(), ApprovalError> {
    let sqlite = |during| {
        let path = path.to_path_buf();
        move |source| ApprovalError::Sqlite {
            path,
            during,
            source,
        }
    };
    let upgrading = "upgrading the approvals table";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sqlite("reading the schema"))?;
    let found: Option<String> = tx
        .query_row(
            "SELECT value FROM attest_meta WHERE key = 'approvals_schema_version'",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(sqlite("reading the approvals schema version"))?;
    let has_table = |name: &str| -> Result<bool, ApprovalError> {
        tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            [name],
            |row| row.get(0),
        )
        .map_err(sqlite("reading the schema"))
    };
    match found.as_deref() {
        Some(version) if version == APPROVALS_SCHEMA_VERSION.to_string() => return Ok(()),
        Some("3") => {
            tx.execute_batch(MIGRATE_3_TO_4)
                .map_err(sqlite(upgrading))?;
            tx.execute_batch(DECISIONS_SCHEMA)
                .map_err(sqlite(upgrading))?;
            tx.execute(
                "UPDATE attest_meta SET value = ?1 WHERE key = 'approvals_schema_version'",
                [APPROVALS_SCHEMA_VERSION.to_string()],
            )
            .map_err(sqlite(upgrading))?;
            return tx.commit().map_err(sqlite(upgrading));
        }
        Some(version @ ("1" | "2")) => {
            if version == "1" {
                tx.execute_batch(MIGRATE_1_TO_2)
                    .map_err(sqlite(upgrading))?;
                redigest(&tx).map_err(|err| match err {
                    ApprovalError::Sqlite { source, .. } => ApprovalError::Sqlite {
                        path: path.to_path_buf(),
                        during: upgrading,
                        source,
                    },
                    other => other,
                })?;
            }
            tx.execute_batch(MIGRATE_2_TO_3)
                .map_err(sqlite(upgrading))?;
            if has_table("approvers")? {
                tx.execute_batch(MIGRATE_APPROVERS_2_TO_3)
                    .map_err(sqlite(upgrading))?;
            }
            tx.execute_batch(MIGRATE_3_TO_4)
                .map_err(sqlite(upgrading))?;
            tx.execute_batch(DECISIONS_SCHEMA)
                .map_err(sqlite(upgrading))?;
            tx.execute(
                "UPDATE attest_meta SET value = ?1 WHERE key = 'approvals_schema_version'",
                [APPROVALS_SCHEMA_VERSION.to_string()],
            )
            .map_err(sqlite(upgrading))?;
            return tx.commit().map_err(sqlite(upgrading));
        }
        Some(version) => {
            return Err(ApprovalError::SchemaVersion {
                path: path.to_path_buf(),
                found: version.to_owned(),
                expected: APPROVALS_SCHEMA_VERSION,
            })
        }
        None if has_table("approvals")? => {
            return Err(ApprovalError::SchemaVersion {
                path: path.to_path_buf(),
                found: "none (an approvals table this build did not make)".to_owned(),
                expected: APPROVALS_SCHEMA_VERSION,
            })
        }
        None => {}
    }
    tx.execute_batch(SCHEMA)
        .map_err(sqlite("creating the approvals table"))?;
    tx.execute_batch(DECISIONS_SCHEMA)
        .map_err(sqlite("creating the approvals table"))?;
    tx.execute(
        "INSERT INTO attest_meta (key, value) VALUES ('approvals_schema_version', ?1)",
        [APPROVALS_SCHEMA_VERSION.to_string()],
    )
    .map_err(sqlite("creating the approvals table"))?;
    tx.commit().map_err(sqlite("creating the approvals table"))
}

/// Creates the tables in a PostgreSQL ledger's database (once for every tenant; the
/// version is kept under tenant `''`) or checks their version. Processes opening a new
/// database at once race on the catalog; the loser's transaction fails and it tries again.
fn init_postgres(db: &PgDatabase) -> Result<(), ApprovalError> {
    let during = "creating the approvals table";
    let version = APPROVALS_SCHEMA_VERSION.to_string();
    let mut last = None;
    for _ in 0..8 {
        let mut client = db.connect().map_err(|source| ApprovalError::Connection {
            during,
            source: Box::new(source),
        })?;
        let attempt = (|| -> Result<Option<String>, postgres::Error> {
            let read = "SELECT value FROM attest_meta WHERE tenant = '' AND key = 'approvals_schema_version'";
            // Made already: no DDL (and none of the table locks it takes).
            if let Some(row) = client.query_opt(read, &[])? {
                // A database made before agents were kept gets their table (no other
                // change, so no version of its own).
                let has_agents: bool = client
                    .query_one("SELECT to_regclass('agents') IS NOT NULL", &[])?
                    .get(0);
                if !has_agents {
                    client.batch_execute(agents::PG_SCHEMA)?;
                }
                // Likewise grants: a table of their own, no other change.
                let has_grants: bool = client
                    .query_one("SELECT to_regclass('grants') IS NOT NULL", &[])?
                    .get(0);
                if !has_grants {
                    client.batch_execute(grants::PG_SCHEMA)?;
                }
                let has_tokens: bool = client
                    .query_one("SELECT to_regclass('approval_tokens') IS NOT NULL", &[])?
                    .get(0);
                if !has_tokens {
                    client.batch_execute(TOKENS_SCHEMA)?;
                }
                let found: String = row.get(0);
                if found != "3" {
                    return Ok(Some(found));
                }
                // Version 3 to 4, once: whoever updates the version row ran the DDL.
                let mut tx = client.transaction()?;
                tx.batch_execute(PG_MIGRATE_3_TO_4)?;
                tx.batch_execute(PG_DECISIONS_SCHEMA)?;
                tx.execute(
                    "UPDATE attest_meta SET value = $1
                     WHERE tenant = '' AND key = 'approvals_schema_version' AND value = '3'",
                    &[&version],
                )?;
                let found = tx.query_opt(read, &[])?.map(|row| row.get(0));
                tx.commit()?;
                return Ok(found);
            }
            let mut tx = client.transaction()?;
            tx.batch_execute(PG_SCHEMA)?;
            tx.batch_execute(PG_DECISIONS_SCHEMA)?;
            tx.batch_execute(agents::PG_SCHEMA)?;
            tx.batch_execute(grants::PG_SCHEMA)?;
            tx.batch_execute(TOKENS_SCHEMA)?;
            tx.execute(
                "INSERT INTO attest_meta (tenant, key, value) VALUES ('', 'approvals_schema_version', $1)
                 ON CONFLICT (tenant, key) DO NOTHING",
                &[&version],
            )?;
            let found = tx.query_opt(read, &[])?.map(|row| row.get(0));
            tx.commit()?;
            Ok(found)
        })();
        match attempt {
            Ok(found) if found.as_deref() == Some(version.as_str()) => return Ok(()),
            Ok(found) => {
                return Err(ApprovalError::SchemaVersion {
                    path: db.name().to_path_buf(),
                    found: found.unwrap_or_else(|| "none".to_owned()),
                    expected: APPROVALS_SCHEMA_VERSION,
                })
            }
            Err(err) => {
                last = Some(err);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    Err(match last {
        Some(source) => ApprovalError::Postgres {
            path: db.name().to_path_buf(),
            during,
            source,
        },
        None => ApprovalError::Internal("creating the approvals table never ran"),
    })
}

fn to_json(
    id: &str,
    field: &'static str,
    value: &impl serde::Serialize,
) -> Result<String, ApprovalError> {
    serde_json::to_string(value).map_err(|source| ApprovalError::BadColumn {
        id: id.to_owned(),
        field,
        source,
    })
}

/// Milliseconds since the Unix epoch; times before it count as 0.
pub(super) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(super) fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// One row as the store returns it, before the JSON columns are parsed.
struct RawRow {
    id: String,
    action: String,
    digest: String,
    verdict: String,
    requested_at: i64,
    expires_at: i64,
    decided_at: Option<i64>,
    status: String,
    approver: Option<String>,
    channel: Option<String>,
    edits: Option<String>,
    note: Option<String>,
    approved_digest: Option<String>,
    consumed_at: Option<i64>,
    ask: (Option<i64>, Option<String>, Option<String>),
    outcome: (Option<i64>, Option<String>, Option<String>),
    notify_error: Option<String>,
    use_by_ms: i64,
    purged_at: Option<i64>,
    reminded_at: Option<i64>,
    escalated_at: Option<i64>,
    approved_by: Option<String>,
}

impl RawRow {
    /// The cells of one [`COLUMNS`] row; a NULL or wrong type where a value is required
    /// is reported as a tampered store.
    fn read(cells: Vec<Cell>) -> Result<RawRow, ApprovalError> {
        let mut cells = cells.into_iter();
        let mut next = || cells.next().unwrap_or(Cell::Null);
        let id = next()
            .text()
            .ok_or(ApprovalError::Internal("an approval row without its id"))?;
        let bad = |field| ApprovalError::Tampered {
            id: id.clone(),
            field,
        };
        Ok(RawRow {
            action: next().text().ok_or_else(|| bad("action"))?,
            digest: next().text().ok_or_else(|| bad("digest"))?,
            verdict: next().text().ok_or_else(|| bad("verdict"))?,
            requested_at: next().int().ok_or_else(|| bad("requested_at"))?,
            expires_at: next().int().ok_or_else(|| bad("expires_at"))?,
            decided_at: next().int(),
            status: next().text().ok_or_else(|| bad("status"))?,
            approver: next().text(),
            channel: next().text(),
            edits: next().text(),
            note: next().text(),
            approved_digest: next().text(),
            consumed_at: next().int(),
            ask: (next().int(), next().text(), next().text()),
            outcome: (next().int(), next().text(), next().text()),
            notify_error: next().text(),
            use_by_ms: next().int().ok_or_else(|| bad("use_by_ms"))?,
            purged_at: next().int(),
            reminded_at: next().int(),
            escalated_at: next().int(),
            approved_by: next().text(),
            id,
        })
    }

    fn parse(self) -> Result<ApprovalRequest, ApprovalError> {
        let id = self.id;
        let column = |field: &'static str, id: &str| {
            let id = id.to_owned();
            move |source| ApprovalError::BadColumn { id, field, source }
        };
        let action: Action = serde_json::from_str(&self.action).map_err(column("action", &id))?;
        let verdict: Verdict =
            serde_json::from_str(&self.verdict).map_err(column("verdict", &id))?;
        let edits: Option<Value> = self
            .edits
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(column("edits", &id))?;
        let approved_by: Vec<String> = self
            .approved_by
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(column("approved_by", &id))?
            .unwrap_or_default();
        let status = Status::parse(&self.status).ok_or(ApprovalError::Tampered {
            id: id.clone(),
            field: "status",
        })?;
        let use_by = match (status, self.decided_at) {
            (Status::Approved | Status::Edited, Some(decided)) => {
                Some(from_millis(decided.saturating_add(self.use_by_ms)))
            }
            _ => None,
        };
        Ok(ApprovalRequest {
            action,
            digest: self.digest,
            use_by,
            purged: self.purged_at.is_some(),
            verdict,
            requested_at: from_millis(self.requested_at),
            expires_at: from_millis(self.expires_at),
            decided_at: self.decided_at.map(from_millis),
            status,
            approver: self.approver,
            channel: self.channel,
            edits,
            note: self.note,
            consumed: self.consumed_at.is_some(),
            notify_error: self.notify_error,
            approved_digest: self.approved_digest,
            reminded_at: self.reminded_at.map(from_millis),
            escalated_at: self.escalated_at.map(from_millis),
            approved_by,
            votes: Vec::new(),
            ask_row: triple(self.ask),
            outcome_row: triple(self.outcome),
            id,
        })
    }
}

/// Computes every stored digest again, the way this version does (the v1 → v2 upgrade).
fn redigest(tx: &rusqlite::Transaction<'_>) -> Result<(), ApprovalError> {
    let sqlite = |source| ApprovalError::Sqlite {
        path: PathBuf::new(),
        during: "upgrading the approvals table",
        source,
    };
    let rows: Vec<(String, String, Option<String>, String)> = {
        let mut stmt = tx
            .prepare("SELECT id, action, edits, status FROM approvals")
            .map_err(sqlite)?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .map_err(sqlite)?;
        rows.collect::<Result<_, _>>().map_err(sqlite)?
    };
    for (id, action, edits, status) in rows {
        let bad = |field| {
            let id = id.clone();
            move |source| ApprovalError::BadColumn { id, field, source }
        };
        let action: Action = serde_json::from_str(&action).map_err(bad("action"))?;
        let digest = action_digest(&action)?;
        let approved = match (status.as_str(), edits) {
            ("approved", _) => Some(digest.clone()),
            ("edited", Some(edits)) => {
                let edits: Value = serde_json::from_str(&edits).map_err(bad("edits"))?;
                Some(action_digest(&apply_edits(&id, &action, &edits)?)?)
            }
            _ => None,
        };
        tx.execute(
            "UPDATE approvals SET digest = ?1, approved_digest = ?2 WHERE id = ?3",
            params![digest, approved, id],
        )
        .map_err(sqlite)?;
    }
    Ok(())
}

fn triple(
    (seq, hash, ts): (Option<i64>, Option<String>, Option<String>),
) -> Option<(u64, String, String)> {
    Some((u64::try_from(seq?).ok()?, hash?, ts?))
}

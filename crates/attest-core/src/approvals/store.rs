//! The approval store: table `approvals` in the ledger's SQLite file, on its own
//! connection.
//!
//! Every state change is one conditional `UPDATE … WHERE status = 'pending'` (or
//! `consumed_at IS NULL`), so threads and processes sharing the file race safely: the
//! first decision wins and an approval runs at most once.
//!
//! Known limitation: the store and the ledger are written in separate transactions. A
//! crash between a rejection and its ledger row leaves the request decided in the store
//! with no outcome row; the decision itself (who, when, channel) stays in the store.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use attest_ledger::{Clock, Ledger, SystemClock};
use attest_policy::{Action, Verdict};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row, TransactionBehavior};
use serde_json::Value;

use super::approvers;
use super::request::{action_digest, apply_edits};
use super::token::ResumeToken;
use super::{Answer, ApprovalError, ApprovalRequest, Status};

/// The version of the `approvals` table, kept in `attest_meta` under
/// `approvals_schema_version`; bump it with a migration.
pub const APPROVALS_SCHEMA_VERSION: u32 = 2;

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
    purged_at       INTEGER
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals(status, expires_at);
";

/// Version 1 to 2: approvals get a use-by time and their params are purged once used or
/// ended; the digest now covers where the call goes (server, tool, method, URL), so every
/// stored digest is computed again.
const MIGRATE_1_TO_2: &str = "
ALTER TABLE approvals ADD COLUMN use_by_ms INTEGER NOT NULL DEFAULT 3600000;
ALTER TABLE approvals ADD COLUMN purged_at INTEGER;
";

const COLUMNS: &str = "id, action, digest, verdict, requested_at, expires_at, decided_at, status,
    approver, channel, edits, note, approved_digest, consumed_at, ask_seq, ask_hash, ask_ts,
    outcome_seq, outcome_hash, outcome_ts, notify_error, use_by_ms, purged_at";

/// Durable approval requests, shared by every process that opens the same ledger file.
pub struct ApprovalStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ApprovalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ApprovalStore {
    /// Opens the store in `ledger`'s file, creating the `approvals` table if needed.
    pub fn open(ledger: &Ledger) -> Result<ApprovalStore, ApprovalError> {
        ApprovalStore::open_with_clock(ledger, Arc::new(SystemClock))
    }

    /// Like [`ApprovalStore::open`], with the clock that times requests and expiry.
    pub fn open_with_clock(
        ledger: &Ledger,
        clock: Arc<dyn Clock>,
    ) -> Result<ApprovalStore, ApprovalError> {
        let path = ledger.path().to_path_buf();
        let sqlite = |during| {
            let path = path.clone();
            move |source| ApprovalError::Sqlite {
                path,
                during,
                source,
            }
        };
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sqlite("opening"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sqlite("setting the busy timeout"))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite("switching to WAL"))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sqlite("setting durability"))?;
        // Purged params are overwritten with zeros in the file, not just unlinked.
        conn.pragma_update(None, "secure_delete", "ON")
            .map_err(sqlite("setting secure delete"))?;
        let store = ApprovalStore {
            path,
            conn: Mutex::new(conn),
            clock,
        };
        store.init_schema()?;
        store
            .lock()
            .execute_batch(approvers::SCHEMA)
            .map_err(store.sqlite("creating the approvers table"))?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store's current time.
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    pub(super) fn sqlite(
        &self,
        during: &'static str,
    ) -> impl FnOnce(rusqlite::Error) -> ApprovalError + '_ {
        move |source| ApprovalError::Sqlite {
            path: self.path.clone(),
            during,
            source,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        // rusqlite rolls back an open transaction on drop, so a poisoned lock is sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn init_schema(&self) -> Result<(), ApprovalError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sqlite("reading the schema"))?;
        let found: Option<String> = tx
            .query_row(
                "SELECT value FROM attest_meta WHERE key = 'approvals_schema_version'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(self.sqlite("reading the approvals schema version"))?;
        let has_table: bool = tx
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approvals')",
                [],
                |row| row.get(0),
            )
            .map_err(self.sqlite("reading the schema"))?;
        match found {
            Some(version) if version == APPROVALS_SCHEMA_VERSION.to_string() => return Ok(()),
            Some(version) if version == "1" => {
                tx.execute_batch(MIGRATE_1_TO_2)
                    .map_err(self.sqlite("upgrading the approvals table"))?;
                redigest(&tx).map_err(|err| match err {
                    ApprovalError::Sqlite { source, .. } => ApprovalError::Sqlite {
                        path: self.path.clone(),
                        during: "upgrading the approvals table",
                        source,
                    },
                    other => other,
                })?;
                tx.execute(
                    "UPDATE attest_meta SET value = ?1 WHERE key = 'approvals_schema_version'",
                    [APPROVALS_SCHEMA_VERSION.to_string()],
                )
                .map_err(self.sqlite("upgrading the approvals table"))?;
                return tx
                    .commit()
                    .map_err(self.sqlite("upgrading the approvals table"));
            }
            Some(version) => {
                return Err(ApprovalError::SchemaVersion {
                    path: self.path.clone(),
                    found: version,
                    expected: APPROVALS_SCHEMA_VERSION,
                })
            }
            None if has_table => {
                return Err(ApprovalError::SchemaVersion {
                    path: self.path.clone(),
                    found: "none (an approvals table this build did not make)".to_owned(),
                    expected: APPROVALS_SCHEMA_VERSION,
                })
            }
            None => {}
        }
        tx.execute_batch(SCHEMA)
            .map_err(self.sqlite("creating the approvals table"))?;
        tx.execute(
            "INSERT INTO attest_meta (key, value) VALUES ('approvals_schema_version', ?1)",
            [APPROVALS_SCHEMA_VERSION.to_string()],
        )
        .map_err(self.sqlite("creating the approvals table"))?;
        tx.commit()
            .map_err(self.sqlite("creating the approvals table"))
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
        let expires = now.checked_add(ttl).unwrap_or(now);
        let action_json = to_json(&action.id, "action", action)?;
        let verdict_json = to_json(&action.id, "verdict", verdict)?;
        let approvers_json = to_json(&action.id, "approvers", &verdict.approvers)?;
        self.lock()
            .execute(
                "INSERT INTO approvals (id, token_hash, action, digest, verdict, tier, approvers, hold,
                     requested_at, expires_at, status, use_by_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending', ?11)",
                params![
                    action.id,
                    token.hash(),
                    action_json,
                    digest,
                    verdict_json,
                    verdict.tier.as_str(),
                    approvers_json,
                    verdict.hold,
                    millis(now),
                    millis(expires),
                    i64::try_from(use_by.as_millis()).unwrap_or(i64::MAX),
                ],
            )
            .map_err(self.sqlite("storing an approval request"))?;
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
        self.query_one("WHERE id = ?1", id)
    }

    /// The request this resume token belongs to.
    pub fn get_by_token(&self, token: &ResumeToken) -> Result<ApprovalRequest, ApprovalError> {
        self.query_one("WHERE token_hash = ?1", &token.hash())
    }

    fn query_one(&self, filter: &str, key: &str) -> Result<ApprovalRequest, ApprovalError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM approvals {filter}"))
            .map_err(self.sqlite("reading an approval request"))?;
        let raw = stmt
            .query_row([key], RawRow::read)
            .optional()
            .map_err(self.sqlite("reading an approval request"))?;
        raw.ok_or(ApprovalError::NotFound)?.parse()
    }

    /// Requests nobody has decided that have not expired, oldest first.
    pub fn pending(&self) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let now = millis(self.now());
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE status = 'pending' AND expires_at > ?1
                 ORDER BY requested_at, id"
            ))
            .map_err(self.sqlite("listing pending requests"))?;
        let rows = stmt
            .query_map([now], RawRow::read)
            .map_err(self.sqlite("listing pending requests"))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(
                row.map_err(self.sqlite("listing pending requests"))?
                    .parse()?,
            );
        }
        Ok(out)
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
        // The decision point: only one conditional update can move the row off `pending`.
        let changed = self
            .lock()
            .execute(
                "UPDATE approvals SET status = ?1, approver = ?2, channel = ?3, edits = ?4,
                     note = ?5, decided_at = ?6, approved_digest = ?7
                 WHERE id = ?8 AND status = 'pending' AND expires_at > ?6",
                params![
                    status.as_str(),
                    approver,
                    answer.channel,
                    edits,
                    answer.note,
                    millis(now),
                    approved_digest,
                    id,
                ],
            )
            .map_err(self.sqlite("recording a decision"))?;
        let after = self.get_by_id(&id)?;
        if changed == 0 {
            return Err(match after.status {
                Status::Pending => ApprovalError::Expired { id },
                status => ApprovalError::AlreadyDecided { id, status },
            });
        }
        Ok(after)
    }

    /// Marks as `expired` every pending request whose time ran out, and every approval
    /// not used before its use-by time, and returns those this call marked (another
    /// process may mark some first; each is returned once). An unused approval keeps its
    /// approver, so the record says who approved what was never run.
    pub fn expire_due(&self) -> Result<Vec<ApprovalRequest>, ApprovalError> {
        let now = millis(self.now());
        let ids: Vec<String> = {
            let conn = self.lock();
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE approvals SET status = 'expired',
                         decided_at = CASE WHEN status = 'pending' THEN ?1 ELSE decided_at END
                     WHERE (status = 'pending' AND expires_at <= ?1)
                        OR (status IN ('approved', 'edited') AND consumed_at IS NULL
                            AND decided_at + use_by_ms <= ?1)
                     RETURNING id",
                )
                .map_err(self.sqlite("expiring requests"))?;
            let rows = stmt
                .query_map([now], |row| row.get(0))
                .map_err(self.sqlite("expiring requests"))?;
            rows.collect::<Result<_, _>>()
                .map_err(self.sqlite("expiring requests"))?
        };
        ids.iter().map(|id| self.get_by_id(id)).collect()
    }

    /// Marks a request whose caller went away as `cancelled`, if nobody has decided it yet;
    /// returns whether this call changed it. Not a decision: no approver, nothing runs.
    pub fn cancel(&self, id: &str) -> Result<bool, ApprovalError> {
        let changed = self
            .lock()
            .execute(
                "UPDATE approvals SET status = 'cancelled', decided_at = ?1
                 WHERE id = ?2 AND status = 'pending'",
                params![millis(self.now()), id],
            )
            .map_err(self.sqlite("cancelling a request"))?;
        self.purge()?;
        Ok(changed > 0)
    }

    /// Marks an approved request as used, before its use-by time, and purges its params
    /// (the caller holds the action it runs); fails if it was used before or its use-by
    /// time passed. Called just before the action runs.
    pub(crate) fn consume(&self, id: &str) -> Result<(), ApprovalError> {
        let now = millis(self.now());
        let changed = self
            .lock()
            .execute(
                "UPDATE approvals SET consumed_at = ?1
                 WHERE id = ?2 AND status IN ('approved', 'edited') AND consumed_at IS NULL
                   AND decided_at + use_by_ms > ?1",
                params![now, id],
            )
            .map_err(self.sqlite("using an approval"))?;
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
        self.lock()
            .execute(
                "UPDATE approvals SET action = json_set(action, '$.params', json('{}')),
                     edits = NULL, purged_at = ?1
                 WHERE purged_at IS NULL
                   AND (consumed_at IS NOT NULL
                        OR status = 'cancelled'
                        OR (status IN ('rejected', 'expired') AND outcome_seq IS NOT NULL))",
                [millis(self.now())],
            )
            .map_err(self.sqlite("purging used params"))?;
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
            "UPDATE approvals SET ask_seq = ?1, ask_hash = ?2, ask_ts = ?3 WHERE id = ?4",
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
            "UPDATE approvals SET outcome_seq = ?1, outcome_hash = ?2, outcome_ts = ?3 WHERE id = ?4",
        )
    }

    fn set_row(
        &self,
        id: &str,
        (seq, hash, ts): (u64, &str, &str),
        sql: &str,
    ) -> Result<(), ApprovalError> {
        self.lock()
            .execute(sql, params![seq, hash, ts, id])
            .map_err(self.sqlite("linking a ledger row"))?;
        Ok(())
    }

    /// Remembers that a notifier failed (the request stays pending and listed).
    pub fn set_notify_error(&self, id: &str, error: &str) -> Result<(), ApprovalError> {
        self.lock()
            .execute(
                "UPDATE approvals SET notify_error = ?1 WHERE id = ?2",
                params![error, id],
            )
            .map_err(self.sqlite("noting a notifier failure"))?;
        Ok(())
    }
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

/// One row as SQLite returns it, before the JSON columns are parsed.
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
    ask: (Option<u64>, Option<String>, Option<String>),
    outcome: (Option<u64>, Option<String>, Option<String>),
    notify_error: Option<String>,
    use_by_ms: i64,
    purged_at: Option<i64>,
}

impl RawRow {
    fn read(row: &Row<'_>) -> rusqlite::Result<RawRow> {
        Ok(RawRow {
            id: row.get(0)?,
            action: row.get(1)?,
            digest: row.get(2)?,
            verdict: row.get(3)?,
            requested_at: row.get(4)?,
            expires_at: row.get(5)?,
            decided_at: row.get(6)?,
            status: row.get(7)?,
            approver: row.get(8)?,
            channel: row.get(9)?,
            edits: row.get(10)?,
            note: row.get(11)?,
            approved_digest: row.get(12)?,
            consumed_at: row.get(13)?,
            ask: (row.get(14)?, row.get(15)?, row.get(16)?),
            outcome: (row.get(17)?, row.get(18)?, row.get(19)?),
            notify_error: row.get(20)?,
            use_by_ms: row.get(21)?,
            purged_at: row.get(22)?,
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
    (seq, hash, ts): (Option<u64>, Option<String>, Option<String>),
) -> Option<(u64, String, String)> {
    Some((seq?, hash?, ts?))
}

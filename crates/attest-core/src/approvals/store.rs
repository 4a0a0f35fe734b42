//! The approval store: table `approvals` beside the ledger, in its SQLite file (on a
//! connection of its own) or in its PostgreSQL database (rows marked with the ledger's
//! tenant, so each tenant has its own requests and approvers, as its own chain).
//!
//! Every state change is one conditional `UPDATE … WHERE status = 'pending'` (or
//! `consumed_at IS NULL`), so threads and processes sharing the file race safely: the
//! first decision wins and an approval runs at most once.
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

use super::backend::{Backend, Cell, Home, EMPTY_PARAMS};
use super::request::{action_digest, apply_edits};
use super::token::ResumeToken;
use super::{agents, approvers};
use super::{Answer, ApprovalError, ApprovalRequest, Status};

/// The version of the `approvals` table, kept in `attest_meta` under
/// `approvals_schema_version`; bump it with a migration.
pub const APPROVALS_SCHEMA_VERSION: u32 = 3;

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
    tenant          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals(status, expires_at);
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
    outcome_seq, outcome_hash, outcome_ts, notify_error, use_by_ms, purged_at";

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
        ApprovalStore::open_with_clock(ledger, Arc::new(SystemClock))
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
        let expires = now.checked_add(ttl).unwrap_or(now);
        let action_json = to_json(&action.id, "action", action)?;
        let verdict_json = to_json(&action.id, "verdict", verdict)?;
        let approvers_json = to_json(&action.id, "approvers", &verdict.approvers)?;
        let token_hash = token.hash();
        self.backend.execute(
            "storing an approval request",
            "INSERT INTO approvals (tenant, id, token_hash, action, digest, verdict, tier, approvers,
                 hold, requested_at, expires_at, status, use_by_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'pending', ?12)",
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
        self.query_one("token_hash = ?2", &token.hash())
    }

    fn query_one(&self, filter: &str, key: &str) -> Result<ApprovalRequest, ApprovalError> {
        let rows = self.backend.query(
            "reading an approval request",
            &format!("SELECT {COLUMNS} FROM approvals WHERE tenant = ?1 AND {filter}"),
            &[key.into()],
        )?;
        let row = rows.into_iter().next().ok_or(ApprovalError::NotFound)?;
        RawRow::read(row)?.parse()
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
            .map(|row| RawRow::read(row)?.parse())
            .collect()
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
            .map(|row| RawRow::read(row)?.parse())
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
        let changed = self.backend.execute(
            "recording a decision",
            "UPDATE approvals SET status = ?2, approver = ?3, channel = ?4, edits = ?5,
                 note = ?6, decided_at = ?7, approved_digest = ?8
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
            ],
        )?;
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
        let rows = self.backend.query(
            "expiring requests",
            "UPDATE approvals SET status = 'expired',
                 decided_at = CASE WHEN status = 'pending' THEN ?2 ELSE decided_at END
             WHERE tenant = ?1
               AND ((status = 'pending' AND expires_at <= ?2)
                    OR (status IN ('approved', 'edited') AND consumed_at IS NULL
                        AND decided_at + use_by_ms <= ?2))
             RETURNING id",
            &[millis(self.now()).into()],
        )?;
        rows.into_iter()
            .map(|row| {
                let id =
                    row.into_iter()
                        .next()
                        .and_then(Cell::text)
                        .ok_or(ApprovalError::Internal(
                            "an expired request came back without its id",
                        ))?;
                self.get_by_id(&id)
            })
            .collect()
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
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite("switching to WAL"))?;
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
                return Ok(Some(row.get(0)));
            }
            let mut tx = client.transaction()?;
            tx.batch_execute(PG_SCHEMA)?;
            tx.batch_execute(agents::PG_SCHEMA)?;
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
    (seq, hash, ts): (Option<i64>, Option<String>, Option<String>),
) -> Option<(u64, String, String)> {
    Some((u64::try_from(seq?).ok()?, hash?, ts?))
}

//! Why an approval request could not be created, found, decided or run.

use std::path::PathBuf;

use thiserror::Error;

use super::Status;

/// Why an approval request could not be created, found, decided or run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No request has this id or resume token. (The key is not repeated: it may be a token.)
    #[error("no approval request has this id or resume token")]
    NotFound,
    /// Somebody decided first; the first decision stands.
    #[error("approval request {id} is already decided ({status})")]
    AlreadyDecided {
        /// The request.
        id: String,
        /// What it was decided as.
        status: Status,
    },
    /// Nobody decided before the request expired; it counts as a rejection.
    #[error("approval request {id} expired before anyone decided")]
    Expired {
        /// The request.
        id: String,
    },
    /// The rule names its approvers, and this person is not one of them.
    #[error("{approver:?} may not decide approval request {id}: not a listed approver")]
    NotAnApprover {
        /// The request.
        id: String,
        /// Who tried.
        approver: String,
    },
    /// The person who asked for the action (its actor) or whose connection it uses (its
    /// owner) may not approve it (under a quorum, not decide it at all): their approval
    /// never counts.
    #[error("{approver:?} may not approve approval request {id}: they asked for it or own its connection, and someone else must decide")]
    OwnRequest {
        /// The request.
        id: String,
        /// Who tried.
        approver: String,
    },
    /// This person has already decided this request (a quorum counts each person once).
    #[error("{approver:?} has already decided approval request {id}")]
    AlreadyVoted {
        /// The request.
        id: String,
        /// Who tried again.
        approver: String,
    },
    /// The action holds unfilled placeholders: it may only run once a person edits it.
    #[error("approval request {id} is held for unfilled placeholders: approve it with edits")]
    HoldNeedsEdits {
        /// The request.
        id: String,
    },
    /// The edits are not a JSON object (a merge patch on the params), or do not apply.
    #[error("bad edits for approval request {id}: {detail}")]
    BadEdits {
        /// The request.
        id: String,
        /// What is wrong.
        detail: String,
    },
    /// No credential, or one that belongs to no registered, active approver.
    #[error("no valid approver credential (a personal token from `attest approvers add`)")]
    BadCredential,
    /// Nobody registered (and not revoked) has this name or Slack user id.
    #[error("{name:?} is not a registered approver (see `attest approvers list`)")]
    UnknownApprover {
        /// The name or id looked up.
        name: String,
    },
    /// A grant cannot be given as asked (approval request `id`).
    #[error("approval request {id}: no grant: {detail}")]
    BadGrant {
        /// The request.
        id: String,
        /// Why not.
        detail: String,
    },
    /// No grant has this id, or it is revoked already.
    #[error("no active grant has id {id:?} (see `attest grants list`)")]
    UnknownGrant {
        /// The id looked up.
        id: String,
    },
    /// No registered agent has this name, or it was revoked.
    #[error("{name:?} is not a registered agent (see `attest agents list`)")]
    UnknownAgent {
        /// The name looked up.
        name: String,
    },
    /// An agent cannot be added as asked.
    #[error("agent {name:?}: {detail}")]
    BadAgent {
        /// The name given.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// An approver cannot be added as asked.
    #[error("approver {name:?}: {detail}")]
    BadApprover {
        /// The name given.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// A decision named no approver.
    #[error("a decision on approval request {id} must name its approver")]
    NoApprover {
        /// The request.
        id: String,
    },
    /// The action presented with the resume token is not the action that was approved.
    #[error("the action presented for approval request {id} is not the one that was asked about")]
    DigestMismatch {
        /// The request.
        id: String,
    },
    /// The stored request no longer matches its own digest: somebody changed the store.
    #[error("approval request {id} was altered in the store ({field} does not match its digest)")]
    Tampered {
        /// The request.
        id: String,
        /// The altered field.
        field: &'static str,
    },
    /// The approval was already used to run the action once.
    #[error("approval request {id} was already used")]
    AlreadyUsed {
        /// The request.
        id: String,
    },
    /// SQLite failed.
    #[error("approval store {path}: {during}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What was being done.
        during: &'static str,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// PostgreSQL failed.
    #[error("approval store {path}: {during}")]
    Postgres {
        /// The database (`postgres://user@host:port/db`, no credentials).
        path: PathBuf,
        /// What was being done.
        during: &'static str,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// No connection to the ledger's PostgreSQL database could be had.
    #[error("approval store: no database connection while {during}")]
    Connection {
        /// What was being done.
        during: &'static str,
        /// The ledger's error.
        #[source]
        source: Box<attest_ledger::LedgerError>,
    },
    /// The `approvals` table was made by another version of Attest.
    #[error("approval store {path}: schema version {found}, expected {expected}")]
    SchemaVersion {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: String,
        /// The version this build uses.
        expected: u32,
    },
    /// A stored JSON column does not parse.
    #[error("approval request {id}: stored {field} is not valid")]
    BadColumn {
        /// The request.
        id: String,
        /// The column.
        field: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The action could not be put in canonical form for its digest.
    #[error("cannot compute the action digest")]
    Canonical(#[source] attest_ledger::LedgerError),
    /// The operating system's random number generator failed.
    #[error("cannot generate a resume token")]
    Random(#[source] rand_core::Error),
    /// A state the code believes impossible; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl ApprovalError {
    /// Whether the store itself failed (database, connection), not the request.
    pub fn is_store_failure(&self) -> bool {
        matches!(
            self,
            ApprovalError::Sqlite { .. }
                | ApprovalError::Postgres { .. }
                | ApprovalError::Connection { .. }
        )
    }
}

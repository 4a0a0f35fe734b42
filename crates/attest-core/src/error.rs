use thiserror::Error;

use crate::approvals::{ApprovalError, ResumeToken};
use crate::Receipt;

/// The error a tool returns; any error type will do.
pub type ToolError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an action did not complete. Every variant that carries a [`Receipt`] was
/// recorded in the ledger; the others could not be.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AttestError {
    /// Policy refused the action; it did not run.
    #[error("refused by policy: {}", .receipt.reasons.join("; "))]
    Refused {
        /// The ledger row of the refusal.
        receipt: Box<Receipt>,
    },
    /// A person (or a gate standing in for one) rejected the action; it did not run.
    #[error("rejected by {approver}")]
    Rejected {
        /// Who rejected it.
        approver: String,
        /// The ledger row of the rejection.
        receipt: Box<Receipt>,
    },
    /// Nobody has answered yet: the request waits in the approval store. Hand `token` to
    /// whoever will resume it ([`crate::Attest::resume`]); `receipt` is the ask's row.
    #[error("waiting for a person to approve request {id}")]
    Pending {
        /// The approval request's id.
        id: String,
        /// The token that resumes the action once it is decided.
        token: ResumeToken,
        /// The ledger row of the ask (execution `pending`).
        receipt: Box<Receipt>,
    },
    /// Nobody answered before the request expired: counted as a rejection, recorded as
    /// `expired`; the action did not run.
    #[error("approval request {id} expired before anyone decided")]
    Expired {
        /// The approval request's id.
        id: String,
        /// The ledger row of the expiry.
        receipt: Box<Receipt>,
    },
    /// The approval store refused or failed (unknown token, already used, altered, …).
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// The tool ran and failed.
    #[error("the tool failed")]
    ToolFailed {
        /// The ledger row of the failure.
        receipt: Box<Receipt>,
        /// The tool's own error.
        #[source]
        source: ToolError,
    },
    /// The action's params could not be hashed; nothing ran and nothing was recorded.
    #[error("cannot describe the action")]
    Policy(#[from] attest_policy::PolicyError),
    /// The ledger could not record the action.
    #[error("cannot record the action")]
    Ledger(#[from] attest_ledger::LedgerError),
    /// The ledger did not accept the intent row a write needs before it runs, so the
    /// tool was not called. Retrying fails the same way until the ledger accepts rows
    /// again (a full or read-only disk).
    #[error("the action did not run: the ledger did not accept its intent row")]
    NotRecorded(#[source] Box<AttestError>),
    /// The ledger writer task stopped unexpectedly.
    #[error("the ledger writer stopped")]
    Writer(#[source] tokio::task::JoinError),
    /// The ledger's writer thread could not be started.
    #[error("cannot start the ledger writer thread")]
    WriterThread(#[source] std::io::Error),
    /// The ledger's writer thread is gone; nothing more can be recorded.
    #[error("the ledger writer thread stopped")]
    WriterStopped,
    /// The read-back HTTP client could not be built.
    #[error("cannot build the read-back http client")]
    Http(#[source] reqwest::Error),
    /// A read-back recipe (or OpenAPI spec) is wrong; `line` and `column` are 1-based,
    /// 0 when the problem is the whole file.
    #[error("{origin}:{line}:{column}: {message}")]
    Recipe {
        /// The file (or built-in name) the recipe came from.
        origin: String,
        /// The line of the problem.
        line: usize,
        /// The column of the problem.
        column: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A recipe directory or spec file could not be read.
    #[error("cannot read {path}")]
    RecipeIo {
        /// The file or directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A state the code believes impossible; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl AttestError {
    /// The receipt of the recorded row, when the failure was recorded.
    pub fn receipt(&self) -> Option<&Receipt> {
        match self {
            AttestError::Refused { receipt }
            | AttestError::Rejected { receipt, .. }
            | AttestError::ToolFailed { receipt, .. }
            | AttestError::Pending { receipt, .. }
            | AttestError::Expired { receipt, .. } => Some(receipt),
            _ => None,
        }
    }
}

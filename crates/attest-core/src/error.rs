use thiserror::Error;

use crate::approvals::ApprovalError;
use crate::Receipt;

/// An error and its causes on one line, `a: b: c` (a cause whose text its parent already
/// ends with, as a transparent wrapper's does, is said once): what every surface shows.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The error a tool returns; any error type will do.
pub type ToolError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why Attest could not decide or record a call. The normal ends of a call (refused,
/// rejected, held, expired, the tool failed) are not errors: they are [`crate::Outcome`]s.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AttestError {
    /// A call's idempotency key was refused: malformed, used for another call, or still
    /// held by a call with no outcome. Nothing ran and nothing was recorded.
    #[error(transparent)]
    Idempotency(#[from] crate::IdempotencyError),
    /// The approval store refused or failed (unknown token, already used, altered, …).
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// With agents configured, the caller's credential did not prove an agent (none,
    /// unknown, revoked, expired, for another audience), or proved another agent than
    /// its label names. Nothing ran and nothing was recorded.
    #[error(transparent)]
    Agent(#[from] crate::agents::AgentRefusal),
    /// The tool ran, but its output has no JSON form to hash and check (a map with
    /// non-string keys, a `Serialize` that fails): recorded as a failed execution.
    #[error("the tool ran, but its output cannot be recorded")]
    OutputNotJson {
        /// The ledger row of the execution (recorded as failed).
        receipt: Box<Receipt>,
        /// Why the output has no JSON form.
        #[source]
        source: serde_json::Error,
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
    #[cfg(feature = "http")]
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
            AttestError::OutputNotJson { receipt, .. } => Some(receipt),
            _ => None,
        }
    }
}

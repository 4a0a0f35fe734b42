use thiserror::Error;

/// Why a policy could not be loaded or could not decide.
///
/// A policy that cannot decide must not let the action run: callers treat every
/// variant as "do not act".
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A word that should name a verb does not.
    #[error("unknown verb {word:?} (expected one of: {expected})")]
    UnknownVerb {
        /// The word as given.
        word: String,
        /// The accepted words, comma-separated.
        expected: &'static str,
    },
    /// A word that should name a risk tier does not.
    #[error("unknown risk tier {word:?} (expected low, medium, high or very_high)")]
    UnknownRisk {
        /// The word as given.
        word: String,
    },
    /// The params could not be put in canonical form (they hold a number JSON cannot carry).
    #[error("params cannot be canonicalized")]
    Canonical(#[source] serde_json::Error),
    /// A policy or policy-test file is not valid: bad YAML, an unknown key, a wrong
    /// type, a bad decision, verb, pattern or regex.
    #[error("{}", place(origin, *line, *column, message))]
    Yaml {
        /// Where the text came from (a file name), as the caller named it.
        origin: String,
        /// 1-based line of the offending node; 0 when the problem is the whole text.
        line: usize,
        /// 1-based column of the offending node; 0 when the problem is the whole text.
        column: usize,
        /// What is wrong, with the YAML path of the node when known.
        message: String,
    },
    /// A policy or policy-test file is larger than attest reads.
    #[error("{origin}: {size} bytes is more than the limit of {limit} bytes")]
    TooLarge {
        /// Where the text came from.
        origin: String,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A grant's condition (a CEL expression over `params`) is not valid.
    #[error("grant condition {bound:?}: {message}")]
    BadBound {
        /// The condition as given.
        bound: String,
        /// What is wrong, with the column where the compiler says.
        message: String,
    },
    /// A state the code believes impossible; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// `origin:line:column: message`, or `origin: message` for a problem with the whole text
/// (line 0), which has no position to name.
pub(crate) fn place(origin: &str, line: usize, column: usize, message: &str) -> String {
    if line == 0 {
        format!("{origin}: {message}")
    } else {
        format!("{origin}:{line}:{column}: {message}")
    }
}

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
    /// A state the code believes impossible; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

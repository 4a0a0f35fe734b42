//! What can go wrong when loading a detection registry.

use std::path::PathBuf;

/// A detection registry that could not be loaded.
///
/// Detection itself never fails: an input it cannot make sense of is `unknown`/`write`.
/// Only building a [`Registry`](super::Registry) from a file can.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DetectError {
    /// The file is not valid YAML, has an unknown key, or has a bad value.
    #[error("{origin}:{line}:{column}: invalid detection registry")]
    Parse {
        /// The file, as named by the caller.
        origin: String,
        /// 1-based line of the problem (0 when the parser could not tell).
        line: usize,
        /// 1-based column of the problem (0 when the parser could not tell).
        column: usize,
        /// The parser's own message.
        #[source]
        source: serde_yaml::Error,
    },
    /// The file parses but contradicts itself.
    #[error("{origin}: {field}: {message}")]
    Invalid {
        /// The file, as named by the caller.
        origin: String,
        /// The section at fault.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The file is larger than a registry can reasonably be.
    #[error("{origin}: registry file is larger than {limit} bytes")]
    TooLarge {
        /// The file, as named by the caller.
        origin: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The file could not be read.
    #[error("cannot read detection registry {path}")]
    Io {
        /// The path given.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
}

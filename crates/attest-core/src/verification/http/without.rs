//! The reader of a build without the `http` feature: every read fails with
//! [`FetchError::NoHttp`], so a read-back over HTTP degrades and never verifies.

use super::{FetchError, Fetched, HttpOptions, ReadRequest};
use crate::AttestError;

/// The reader: in this build (no `http` feature), one that reads nothing.
#[derive(Debug, Clone)]
pub struct HttpReader {
    options: HttpOptions,
}

impl HttpReader {
    /// A reader with `options` (kept, unused).
    pub fn new(options: HttpOptions) -> Result<Self, AttestError> {
        Ok(HttpReader { options })
    }

    /// The reader's options.
    pub fn options(&self) -> &HttpOptions {
        &self.options
    }

    /// Fails with [`FetchError::NoHttp`]: this build has no HTTP client.
    pub async fn fetch(&self, _request: &ReadRequest) -> Result<Fetched, FetchError> {
        Err(FetchError::NoHttp)
    }
}

//! The HTTP reader read-back drivers share: timeouts, bounded retries, a size cap (over
//! reqwest with the `http` feature; without it, a reader that fetches nothing).
//!
//! Every failure is a [`FetchError`] whose text is safe for the ledger: it names what
//! went wrong (status, timeout, size), never a header, a body or a URL's query.

use std::time::Duration;

use serde_json::Value;
use thiserror::Error;

#[cfg(feature = "http")]
mod client;
#[cfg(feature = "http")]
pub use client::HttpReader;
#[cfg(not(feature = "http"))]
mod without;
#[cfg(not(feature = "http"))]
pub use without::HttpReader;

/// How the reader talks to vendors. `Default` suits real APIs; tests shorten it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpOptions {
    /// How long to wait for a connection.
    pub connect_timeout: Duration,
    /// How long to wait for each read of the response.
    pub read_timeout: Duration,
    /// How long one attempt may take in all.
    pub request_timeout: Duration,
    /// How many times a 429 or 5xx answer is retried (0: never).
    pub retries: u32,
    /// The wait before the first retry when the server gives no `Retry-After`; doubled
    /// after each retry.
    pub backoff: Duration,
    /// The longest `Retry-After` honoured; a longer one ends the read.
    pub max_retry_after: Duration,
    /// The largest response body read, in bytes; a larger one ends the read.
    pub max_body_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(20),
            retries: 2,
            backoff: Duration::from_millis(250),
            max_retry_after: Duration::from_secs(5),
            max_body_bytes: 2 << 20,
        }
    }
}

/// An HTTP method a read uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMethod {
    /// `GET`.
    #[default]
    Get,
    /// `POST` (GraphQL queries, search endpoints).
    Post,
}

/// One read: method, URL, headers and an optional JSON body.
#[derive(Clone, Default)]
pub struct ReadRequest {
    /// The method.
    pub method: ReadMethod,
    /// The full URL.
    pub url: String,
    /// Request headers (credentials among them; never logged or recorded).
    pub headers: Vec<(String, String)>,
    /// A JSON body (for `POST`).
    pub body: Option<Value>,
}

impl std::fmt::Debug for ReadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Headers carry tokens: print their names only.
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("ReadRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &names)
            .finish_non_exhaustive()
    }
}

/// A response that was read and parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    /// The HTTP status (2xx).
    pub status: u16,
    /// The parsed JSON body.
    pub body: Value,
    /// How many attempts it took.
    pub attempts: u32,
}

/// Why a read found nothing to compare. Every one degrades the verification; none
/// makes it `unverified`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL could not be used.
    #[error("bad read-back url: {0}")]
    BadUrl(String),
    /// A header name or value could not be sent.
    #[error("bad header {0}")]
    BadHeader(String),
    /// No connection could be made, or it broke.
    #[error("network error: {0}")]
    Network(&'static str),
    /// The server was too slow.
    #[error("timed out after {0} ms")]
    Timeout(u128),
    /// The record was not there (or not visible with this credential).
    #[error("not found (404)")]
    NotFound,
    /// The server answered with an error status (after any retries).
    #[error("http status {status} after {attempts} attempt(s)")]
    Status {
        /// The last status.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The server asked to wait longer than allowed.
    #[error("rate limited: retry-after {0} s is longer than allowed")]
    RetryAfterTooLong(u64),
    /// The body was larger than the cap.
    #[error("response larger than {0} bytes")]
    TooLarge(usize),
    /// The body was empty.
    #[error("empty response: nothing fetched")]
    Empty,
    /// The body was not JSON.
    #[error("response is not json")]
    NotJson,
    /// The server redirected to another origin (scheme, host, port), which is never
    /// followed: the read carries the caller's credentials.
    #[error("redirected to another origin: not followed with the caller's credentials")]
    CrossOriginRedirect,
    /// This build has no HTTP client (attest-core without its `http` feature).
    #[error("this build reads nothing over http (attest-core feature `http`)")]
    NoHttp,
}

//! Integration tests for attest-core: the pipeline on a real SQLite ledger.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fake;
mod pipeline;
mod readback;
mod recipes;
mod secrets;

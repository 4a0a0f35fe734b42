//! Integration tests for attest-core, in one test binary: the pipeline on a real
//! SQLite ledger, and detection against its corpus.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod detect;
mod group_commit;
mod pipeline;
mod secrets;

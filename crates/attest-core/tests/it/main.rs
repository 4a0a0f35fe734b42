//! Integration tests for attest-core, in one test binary: the pipeline on a real
//! SQLite ledger, detection against its corpus, and read-back against local vendors.

// Helpers outside #[test] functions unwrap too: a panic is the test failing, with its backtrace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod approvals;
mod detect;
mod fake;
mod group_commit;
#[path = "../../../attest-ledger/tests/it/peers.rs"]
mod peers;
#[path = "../../../attest-ledger/tests/it/pg_db.rs"]
mod pg_db;
mod pipeline;
mod readback;
mod recipes;
mod request_fuzz;
mod same_call;
mod secrets;
mod support;

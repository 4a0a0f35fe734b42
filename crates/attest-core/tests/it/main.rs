//! Integration tests for attest-core, in one test binary.

mod detect;

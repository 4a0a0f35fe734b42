//! HTTP servers: routers over `attest-core` types, apart from the code that serves them.

pub(crate) mod inbox;

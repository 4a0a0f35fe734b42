//! MCP, both ways: the proxy between an agent and an upstream MCP server ([`proxy`],
//! over stdio or [`listen`]ing on streamable HTTP), Attest's own MCP server ([`server`]),
//! and what they need below them: sessions bound to a caller, notifications routed to
//! their streams, upstream transports and Attest as an OAuth client of a remote upstream.

mod http_streams;
pub(crate) mod keys;
pub mod listen;
pub mod oauth_client;
mod order;
pub mod proxy;
pub(crate) mod resource;
pub mod server;
mod sessions;
mod streams;
pub mod transport;

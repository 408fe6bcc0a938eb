//! What the crates of the MCP client toolkit share (the sqlx-macros-core pattern): no
//! proc-macro, and by default nothing but `std`, `serde`, `serde_json` and `memchr` (and, on
//! Unix, `libc`: whose a snapshot folder is), so a build
//! script can use it cheaply. The runtime, the `#[mcp]` macro, the agent and the `mcp`
//! CLI use the same code, so they can never disagree. The optional features add what
//! is shared at run time.
//!
//! * [`snapshot`]: the committed snapshot of a server (`.mcp/<name>.json`);
//! * [`url_rule`]: where the client may send anything (`https://`, or `http://` to this
//!   machine);
//! * [`build`]: a one-line `build.rs` helper that makes snapshots take effect however
//!   they arrive;
//! * [`protocol`]: facts of the protocol (versions, eras, `_meta` keys, error codes, the
//!   [`Method`](protocol::Method) table, [`TaskSupport`](protocol::TaskSupport));
//! * [`jsonrpc`]: JSON-RPC messages and their one parse;
//! * [`gather`]: a long message parsed as it arrives — its long strings moved out of
//!   the read buffer — so that it is held once, not as bytes and again as its value;
//! * [`sse`]: the Server-Sent Events parser both the MCP transports and the model wires
//!   read streams with;
//! * [`text`]: text a peer sent, made safe to show;
//! * [`Secret`] and [`BoxFuture`];
//! * with feature `http`: `http`, the one HTTP client stack (hyper, rustls, the checked
//!   resolver, bounded reads) of the MCP transports and the agent's model wires;
//! * with feature `postgres`: `postgres`, the PostgreSQL connections of the credential
//!   store and the run store.

#![deny(missing_docs)]

pub mod build;
pub mod config;
pub mod gather;
#[cfg(feature = "http")]
pub mod http;
pub mod jsonrpc;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod protocol;
mod secret;
pub mod snapshot;
pub mod sse;
pub mod text;
pub mod url_rule;

mod rt;

pub use rt::{lock, BoxFuture};
pub use secret::Secret;

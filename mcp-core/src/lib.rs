//! What the crates of the MCP client toolkit share, with no proc-macro and nothing but
//! `std` and `serde_json` (the sqlx-macros-core pattern): the runtime, the `#[mcp]` macro
//! and the `mcp` CLI use the same code, so they can never disagree, and a build script
//! can use it cheaply.
//!
//! * [`snapshot`]: the committed snapshot of a server (`.mcp/<name>.json`);
//! * [`url_rule`]: where the client may send anything (`https://`, or `http://` to this
//!   machine);
//! * [`build`]: a one-line `build.rs` helper that makes snapshots take effect however
//!   they arrive.

#![deny(missing_docs)]

pub mod build;
pub mod snapshot;
pub mod url_rule;

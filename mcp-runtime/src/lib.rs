//! The runtime of the MCP client toolkit: a session with one Model Context Protocol
//! server, in whichever protocol era it speaks, over stdio or a transport of your own.
//!
//! ```no_run
//! # #[allow(dead_code)]
//! # async fn run() -> mcp_runtime::Result<()> {
//! use mcp_runtime::{Client, StdioConfig};
//!
//! let files = Client::builder()
//!     .name("files")
//!     .stdio(StdioConfig::new("npx").args(["-y", "@modelcontextprotocol/server-filesystem", "."]))?;
//! let tools = files.tools().await?;
//! let listing = files
//!     .call("list_directory", serde_json::json!({"path": "."}))
//!     .await?;
//! println!("{} tools; {}", tools.len(), listing.text());
//! files.close().await?;
//! # Ok(()) }
//! ```
//!
//! * [`Client`] — the session: era negotiation (`server/discover` probe, then the
//!   `initialize` handshake for older servers), pipelined requests, pagination, caching
//!   by `ttlMs`, multi-round input (`input_required` and legacy `elicitation/create`),
//!   progress, cancellation and timeouts.
//! * [`Transport`] — what carries the messages: [`StdioTransport`] or your own.
//! * [`Error`] — one opaque error with `is_*` predicates. A tool that fails is not an
//!   error but a [`CallToolResult`] whose `is_error()` is true.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
#[cfg(feature = "oauth")]
pub mod auth;
pub mod client;
pub use mcp_runtime_core::config;
#[cfg(any(feature = "stdio", feature = "http"))]
pub mod declared;
pub mod digest;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod hold;
pub mod input;
pub use mcp_runtime_core::jsonrpc;
pub mod model;
pub(crate) use mcp_runtime_core::protocol;
pub mod skills;
pub use mcp_runtime_core::snapshot;
#[cfg(feature = "schema")]
pub mod schema;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) use mcp_runtime_core::text;
pub mod transport;
#[cfg(feature = "http")]
pub(crate) use mcp_runtime_core::url_rule;

pub use mcp_runtime_core::BoxFuture;

// The crate root keeps the names most programs use; the rest are in their modules:
// `client` (eras, tasks, server details), `model` (what a server sends), `input`,
// `skills`, `declared` (declarations, shapes, contexts), `transport`, `auth`.
pub use client::{CallTool, Change, Client, ClientBuilder, RequestOptions};
#[cfg(any(feature = "stdio", feature = "http"))]
pub use declared::{Mcp, McpBuilder, McpTool, Typed};
pub use error::{Error, Result};
pub use input::{CallOutcome, InputRequest, InputResponse, PendingInput};
pub use mcp_runtime_core::Secret;
#[cfg(feature = "macros")]
pub use mcp_runtime_macros::mcp;
pub use model::{CallToolResult, Content, Tool};
pub use tokio_util::sync::CancellationToken;
#[cfg(feature = "http")]
pub use transport::http::{HttpConfig, HttpTransport};
#[cfg(feature = "stdio")]
pub use transport::stdio::{StdioConfig, StdioTransport};
pub use transport::Transport;

/// The names most programs use, for one `use mcp_runtime::prelude::*;`.
pub mod prelude {
    #[cfg(feature = "http")]
    pub use crate::HttpConfig;
    #[cfg(feature = "stdio")]
    pub use crate::StdioConfig;
    pub use crate::{
        CallOutcome, CallToolResult, Client, Content, Error, InputRequest, InputResponse,
        RequestOptions, Result, Tool,
    };
    #[cfg(any(feature = "stdio", feature = "http"))]
    pub use crate::{Mcp, McpTool};
    #[cfg(feature = "macros")]
    pub use mcp_runtime_macros::mcp;
}

//! The agent layer of the MCP client toolkit (permission modes, allow-lists, durable
//! approvals) is planned work. Until then this crate only re-exports the runtime.
#![deny(missing_docs)]

pub use mcp_runtime as runtime;

//! Procedural macros of the MCP client toolkit.
//!
//! The `#[mcp(...)]` attribute (declare a server once on a struct, with typed per-tool
//! methods checked against a committed schema snapshot) is planned work: this crate is a
//! placeholder in the workspace until then, and exports nothing yet.
#![deny(missing_docs)]

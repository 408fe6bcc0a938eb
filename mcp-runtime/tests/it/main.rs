#![allow(clippy::unwrap_used, clippy::await_holding_lock)]
//! Integration tests of mcp-runtime against real MCP servers: the npm reference servers
//! (server-everything, server-filesystem) and a PyPI `mcp` server of the project's own
//! that speaks both protocol eras. `support::peers()` installs them (pinned) on first
//! use and fails loudly when it cannot.

mod support;

mod config_files;
mod containment;
mod declared;
mod era;
mod everything;
mod filesystem;
mod hostile;
mod http;
mod lifecycle;
mod macros;
mod malformed;
mod oauth;
mod oauth_shared;
mod peers;
mod python;
#[cfg(feature = "skills")]
mod skills;
mod tasks;

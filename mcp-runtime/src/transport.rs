//! Transports carry JSON-RPC messages between the client and a server.
//!
//! The session ([`Client`](crate::Client)) speaks the protocol; a transport only moves
//! messages. Its four operations are the ones a custom transport implements:
//! [`request`](Transport::request), [`notify`](Transport::notify),
//! [`cancel`](Transport::cancel) and [`close`](Transport::close). Whatever the server
//! sends that is not the response (progress, log messages, list changes, and — with
//! servers before 2026-07-28 — requests such as `ping` or `elicitation/create`) goes to
//! the [`Incoming`] handle the session passes with every request.

pub(crate) mod headers;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
pub(crate) use mcp_runtime_core::sse;
#[cfg(feature = "stdio")]
pub mod stdio;
#[cfg(feature = "stdio")]
pub mod watchdog;

mod contract;
pub(crate) use contract::IncomingHandler;
pub use contract::{Incoming, RequestContext, Transport, DEFAULT_MAX_MESSAGE_SIZE};

#[cfg(feature = "http")]
pub(crate) use crate::hold::with_hold;
pub use crate::hold::{Hold, HoldGuard};
pub use crate::BoxFuture;

//! The handle ([`Client`]) and the state its clones share (`Inner`): one owner per
//! concern (`parts.rs`, `index.rs`), the transport and its inbox.

use super::index::ToolIndex;
use super::parts::{
    InputRouting, ListCache, Listeners, ProgressRegistry, Session, Settings, TaskWatch,
};
use crate::transport::{Incoming, Transport};
use mcp_runtime_core::lock;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A client for one MCP server.
///
/// Cheap to clone (clones share the connection). Requests may run concurrently: they
/// are pipelined on the one connection. The session starts on the first request:
/// the client probes with `server/discover` and falls back to the `initialize`
/// handshake for servers before 2026-07-28.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run() -> mcp_runtime::Result<()> {
/// use mcp_runtime::{Client, StdioConfig};
/// let client = Client::builder().stdio(
///     StdioConfig::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]),
/// )?;
/// for tool in client.tools().await? {
///     println!("{}: {}", tool.name, tool.description.unwrap_or_default());
/// }
/// let result = client.call("echo", serde_json::json!({"message": "hi"})).await?;
/// println!("{}", result.text());
/// client.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<Inner>,
    pub(super) life: Arc<Life>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.inner.settings.name)
            .finish_non_exhaustive()
    }
}

pub(super) struct Inner {
    /// The session's inbox, handed to the transport with each request.
    pub(super) incoming: Incoming,
    pub(super) transport: Box<dyn Transport>,
    /// The HTTP transport, for its OAuth authorization (built by `ClientBuilder::http`).
    #[cfg(feature = "oauth")]
    pub(super) oauth: Option<crate::transport::http::HttpTransport>,
    pub(super) settings: Settings,
    pub(super) session: Session,
    pub(super) input_routing: InputRouting,
    pub(super) lists: ListCache,
    pub(super) progress: ProgressRegistry,
    pub(super) listeners: Listeners,
    /// What a call needs to know of each tool (headers, UI resource, task support).
    pub(super) tool_index: ToolIndex,
    pub(super) tasks: TaskWatch,
    /// Verified files of this server's skills (see [`crate::skills`]).
    #[cfg(feature = "skills")]
    pub(super) skill_files: Mutex<crate::skills::FileCache>,
}

/// Owned by every clone of a [`Client`]: when the last one goes, the listener stops.
#[derive(Default)]
pub(super) struct Life {
    pub(super) listener: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Life {
    pub(super) fn stop_listener(&self) {
        if let Some(h) = lock(&self.listener).take() {
            h.abort();
        }
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        self.stop_listener();
    }
}

//! The session's types, at the bottom of `client/`: the handle ([`Client`]), its shared
//! state (`Inner`) and what that is made of. Definitions only; the behaviour is in the
//! modules above (`mod`, `exchange`, `cache`, `handshake`, `listen`, `tasks`, …).

use super::index::ToolIndex;
use crate::input::{InputHandler, InputKinds, RootsHandler, SamplingHandler};
use crate::jsonrpc::Id;
use crate::model::{Implementation, LogLevel, Progress, ServerCapabilities};
use crate::protocol::Era;
use crate::transport::{Incoming, Transport};
use mcp_core::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

pub(super) type ChangeCallback = Arc<dyn Fn(&Change) + Send + Sync>;

pub(super) type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Which era to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProtocolMode {
    /// Probe with `server/discover`, fall back to `initialize` (the default). The era is
    /// decided by what the server answers, never by how long it takes.
    #[default]
    Auto,
    /// Only the modern protocol: fail if the server does not speak it. The probe waits
    /// as long as any request would.
    Modern,
    /// Only the legacy handshake: go straight to `initialize`.
    Legacy,
}

/// Something the server announced as changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The tool list changed (the client has already forgotten the old one).
    Tools,
    /// The prompt list changed.
    Prompts,
    /// The resource list changed.
    Resources,
    /// The contents of this resource changed.
    Resource(String),
    /// A task's status changed (pushed by the server, or seen after a reconnect).
    Task(TaskStatus),
}

/// What the client learned about the server when the session started.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerDetails {
    /// The era the server speaks.
    pub era: Era,
    /// The protocol version in use.
    pub protocol_version: String,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's name and version.
    pub info: Implementation,
    /// How to use the server, for a model.
    pub instructions: Option<String>,
}

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
            .field("name", &self.inner.name)
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
    pub(super) name: String,
    pub(super) client_info: Value,
    pub(super) capabilities: Value,
    pub(super) timeout: Duration,
    pub(super) max_timeout: Duration,
    /// How long each request of the connect may wait (`ClientBuilder::connect_timeout`).
    pub(super) connect_timeout: Duration,
    /// The server once left `server/discover` unanswered: later connects (after the
    /// process restarts) ask `initialize` first.
    pub(super) ignores_discover: AtomicBool,
    pub(super) log_level: Option<LogLevel>,
    pub(super) input: Option<Arc<dyn InputHandler>>,
    pub(super) input_kinds: InputKinds,
    pub(super) sampling: Option<Arc<dyn SamplingHandler>>,
    pub(super) roots: Option<Arc<dyn RootsHandler>>,
    pub(super) max_input_rounds: u32,
    pub(super) on_change: Vec<ChangeCallback>,
    pub(super) on_progress: Vec<ProgressCallback>,
    pub(super) protocol: ProtocolMode,
    pub(super) next_id: AtomicI64,
    pub(super) connect_lock: tokio::sync::Mutex<()>,
    pub(super) state: Mutex<Option<Arc<ServerDetails>>>,
    pub(super) progress: Mutex<HashMap<Id, Arc<CallProgress>>>,
    pub(super) cache: Mutex<HashMap<String, CacheEntry>>,
    pub(super) cache_generation: AtomicU64,
    pub(super) listens: Mutex<HashMap<Id, ListenSlot>>,
    pub(super) session_reset: Notify,
    /// What a call needs to know of each tool (headers, UI resource, task support).
    pub(super) tool_index: ToolIndex,
    /// Woken when a task's status arrives, for those waiting on it.
    pub(super) task_waiters: Mutex<HashMap<String, Arc<Notify>>>,
    /// The last task status reported to `on_change`, per task (state and message), so
    /// a status pushed and also polled is reported once.
    pub(super) task_reported: Mutex<HashMap<String, (TaskState, Option<String>)>>,
    /// Verified files of this server's skills (see [`crate::skills`]).
    pub(super) skill_files: Mutex<crate::skills::FileCache>,
}

/// An open `subscriptions/listen` request: told when the server acknowledges it, and
/// when the server ends it with `notifications/cancelled`.
pub(super) struct ListenSlot {
    pub(super) ack: Option<tokio::sync::oneshot::Sender<Value>>,
    pub(super) ended: Option<tokio::sync::oneshot::Sender<()>>,
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

pub(super) struct CallProgress {
    pub(super) callback: Option<ProgressCallback>,
    pub(super) notify: Notify,
}

pub(super) struct CacheEntry {
    pub(super) expires: Instant,
    pub(super) value: Arc<Vec<Value>>,
}

/// Where a task stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// Running.
    Working,
    /// Waiting for input from the client (answered by [`Task::wait`]).
    InputRequired,
    /// Finished with a result (which may be a tool error: `isError`).
    Completed,
    /// Failed (a protocol error, not a tool error).
    Failed,
    /// Cancelled.
    Cancelled,
    /// A state this client does not know.
    Other(String),
}

/// What a server said about a task.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskStatus {
    /// The task's id.
    pub id: String,
    /// Where it stands.
    pub state: TaskState,
    /// What it is doing, for a person.
    pub message: Option<String>,
    /// How often the server wants to be asked.
    pub poll_interval: Option<Duration>,
    /// When it was created (as the server wrote it).
    pub created_at: Option<String>,
    /// When it last changed (as the server wrote it).
    pub last_updated_at: Option<String>,
    /// How long the server keeps it after it was created.
    pub ttl: Option<Duration>,
}

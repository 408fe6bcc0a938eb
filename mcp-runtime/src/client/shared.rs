//! The session's data types, at the bottom of `client/`: what the server is
//! ([`ServerDetails`]), what changed ([`Change`]), where a task stands, the protocol
//! mode, and the callback types. The handle and its state are in `inner.rs`, the state's
//! owners in `parts.rs`; the behaviour is in the modules above (`mod`, `exchange`,
//! `cache`, `handshake`, `listen`, `tasks`, …).

use crate::model::{Implementation, Progress, ServerCapabilities};
use crate::protocol::Era;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

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

/// An open `subscriptions/listen` request: told when the server acknowledges it, and
/// when the server ends it with `notifications/cancelled`.
pub(super) struct ListenSlot {
    pub(super) ack: Option<tokio::sync::oneshot::Sender<Value>>,
    pub(super) ended: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Where a task stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// Running.
    Working,
    /// Waiting for input from the client (answered by [`Task::wait`](crate::client::Task::wait)).
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

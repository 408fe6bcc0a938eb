//! What a server said about a task ([`TaskStatus`]) and where it stands ([`TaskState`]).

use std::time::Duration;

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

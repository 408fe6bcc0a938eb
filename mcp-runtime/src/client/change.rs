//! What the server announces as changed ([`Change`]), the callbacks told of changes and
//! progress, and an open `subscriptions/listen` request's slot.

use super::task_status::TaskStatus;
use crate::model::{LogMessage, Progress};
use serde_json::Value;
use std::sync::Arc;

/// A callback told of each change.
pub(super) type ChangeCallback = Arc<dyn Fn(&Change) + Send + Sync>;

/// A callback told of each progress notification.
pub(super) type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// A callback told of each log message.
pub(super) type LogCallback = Arc<dyn Fn(&LogMessage) + Send + Sync>;

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

/// An open `subscriptions/listen` request: told when the server acknowledges it, and
/// when the server ends it with `notifications/cancelled`.
pub(super) struct ListenSlot {
    pub(super) ack: Option<tokio::sync::oneshot::Sender<Value>>,
    pub(super) ended: Option<tokio::sync::oneshot::Sender<()>>,
}

//! What the client learned about the server when the session started
//! ([`ServerDetails`]) and which era it may speak ([`ProtocolMode`]).

use crate::model::{Implementation, ServerCapabilities};
use crate::protocol::Era;

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

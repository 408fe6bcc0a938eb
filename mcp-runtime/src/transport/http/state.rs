//! The HTTP transport's handle ([`HttpTransport`]) and the state its clones share:
//! the configuration, the connection pool, which wire is in use (`Mode`), what was
//! learned about each origin. Definitions only; the behaviour is in the modules above
//! (`http`, `connect`, `streamable`, `legacy`, `sse2024`).

use super::config::HttpConfig;
use super::sessions::{LegacySession, SseSession};
use crate::jsonrpc::{Id, Response};
use crate::transport::sse;
use http::Uri;
use mcp_runtime_core::http::Clients;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

/// What this process learned about an origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Detected {
    Modern,
    Streamable,
    Sse,
}

pub(super) fn era_cache() -> &'static Mutex<HashMap<String, Detected>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Detected>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

pub(super) enum Mode {
    Fresh,
    Streamable(LegacySession),
    Sse(Arc<SseSession>),
}

/// The HTTP transport. Create it with [`HttpTransport::new`] or
/// [`ClientBuilder::http`](crate::ClientBuilder::http). Clones share the connections
/// and the session.
#[derive(Clone)]
pub struct HttpTransport {
    pub(super) inner: Arc<Shared>,
}

pub(super) struct Shared {
    #[cfg(feature = "oauth")]
    pub(super) auth: Option<crate::auth::ServerAuthorization>,
    pub(super) config: HttpConfig,
    pub(super) url: Uri,
    pub(super) origin: String,
    pub(super) clients: Clients,
    pub(super) mode: Mutex<Mode>,
    pub(super) reinit: AtomicU64,
    /// Held while a lost legacy session is replaced: one replacement at a time; the
    /// requests that find no session meanwhile wait for the new one rather than go
    /// out with none (taken only then, never on a request's ordinary path).
    pub(super) reinit_gate: tokio::sync::Mutex<()>,
    /// The params of the last legacy `initialize`, until the transport is closed: what
    /// replaces a lost session, even after an attempt to replace it failed (the server
    /// was still down) and left no session.
    pub(super) last_init: Mutex<Option<Value>>,
    pub(super) get_stream: tokio::sync::watch::Sender<GetStream>,
    /// Legacy requests waiting for their response, by id: a response that arrives on
    /// another stream (a server may answer a request whose reply stream broke on the
    /// standalone GET stream) still reaches its caller.
    pub(super) waiting:
        Mutex<std::collections::HashMap<Id, tokio::sync::oneshot::Sender<Response>>>,
}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// How a reply (JSON body or event stream) ended.
pub(super) enum Reply {
    Answer(Response),
    /// The event stream ended before the answer: the parser holds the last event id
    /// and `retry:` for resuming; `delivered` says whether any message came.
    Broken {
        parser: sse::Parser,
        delivered: bool,
    },
}

/// Whether the standalone GET stream of a legacy session is there, for `listen`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum GetStream {
    /// Not asked yet, or no answer yet.
    Starting,
    /// Open (or reconnecting).
    Open,
    /// The server offers none, or it failed for good: why.
    Unavailable(String),
}

//! The HTTP transport's types, at the bottom of `transport/http/`: the handle
//! ([`HttpTransport`]), its shared state and the sessions of each wire. Definitions only;
//! the behaviour is in the modules above (`mod`, `connect`, `streamable`, `legacy`,
//! `sse2024`).

use super::config::HttpConfig;
use super::connect::SessionHeaders;
use crate::error::Result;
use crate::jsonrpc::{Id, Response};
use crate::transport::sse;
use http::Uri;
use mcp_runtime_core::http::Clients;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::oneshot;

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

pub(super) type Pending = Mutex<HashMap<Id, oneshot::Sender<Result<Response>>>>;

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
    pub(super) auth: Option<crate::auth::Session>,
    pub(super) config: HttpConfig,
    pub(super) url: Uri,
    pub(super) origin: String,
    pub(super) clients: Clients,
    pub(super) mode: Mutex<Mode>,
    pub(super) reinit: AtomicU64,
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

/// A legacy Streamable HTTP session.
pub(super) struct LegacySession {
    pub(super) session_id: Option<String>,
    /// The session id and the negotiated version as headers, made once.
    pub(super) headers: SessionHeaders,
    pub(super) init_params: Value,
    pub(super) get_stream: Option<tokio::task::AbortHandle>,
}

/// A 2024-11-05 HTTP+SSE session.
pub(super) struct SseSession {
    pub(super) post_url: Uri,
    pub(super) pending: Arc<Pending>,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) task: tokio::task::AbortHandle,
}

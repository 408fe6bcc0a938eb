//! The HTTP transport's types, at the bottom of `transport/http/`: the handle
//! ([`HttpTransport`]), its shared state and the sessions of each wire. Definitions only;
//! the behaviour is in the modules above (`mod`, `connect`, `streamable`, `legacy`,
//! `sse2024`).

use super::config::HttpConfig;
use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Response};
use crate::transport::sse;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Uri};
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

/// The header names the transport sends on every request, made once (a name parsed
/// per request is copied per request).
pub(super) static KNOWN: [HeaderName; 5] = [
    HeaderName::from_static("mcp-session-id"),
    HeaderName::from_static("mcp-protocol-version"),
    HeaderName::from_static("mcp-method"),
    HeaderName::from_static("mcp-name"),
    HeaderName::from_static("last-event-id"),
];

/// The headers a legacy session adds to each request (`Mcp-Session-Id`, and
/// `MCP-Protocol-Version` from 2025-06-18), made once when the session starts: a
/// request clones a reference to them, not a string (a known version is static).
#[derive(Clone, Default)]
pub(super) struct SessionHeaders {
    pub(super) session: Option<HeaderValue>,
    pub(super) version: Option<HeaderValue>,
}

impl SessionHeaders {
    pub(super) fn new(session: Option<&str>, version: Option<&str>) -> Result<SessionHeaders> {
        let value = |name: &str, v: &str| {
            HeaderValue::try_from(v).map_err(|_| {
                Error::config(format!("the value of `{name}` is not a valid header value"))
            })
        };
        let session = session.map(|s| value("mcp-session-id", s)).transpose()?;
        // 2025-03-26 servers do not know the header; later ones require it.
        let version = match version {
            Some(v) if v >= "2025-06-18" => Some(
                match crate::protocol::LEGACY_VERSIONS
                    .iter()
                    .chain(crate::protocol::MODERN_VERSIONS)
                    .find(|known| **known == v)
                {
                    Some(known) => HeaderValue::from_static(known),
                    None => value("mcp-protocol-version", v)?,
                },
            ),
            _ => None,
        };
        Ok(SessionHeaders { session, version })
    }

    pub(super) fn apply(&self, h: &mut HeaderMap) {
        if let Some(s) = &self.session {
            h.insert(KNOWN[0].clone(), s.clone());
        }
        if let Some(v) = &self.version {
            h.insert(KNOWN[1].clone(), v.clone());
        }
    }
}

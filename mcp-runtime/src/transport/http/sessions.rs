//! The session each HTTP wire keeps: a legacy Streamable HTTP session (its id and the
//! headers made from it once), a 2024-11-05 HTTP+SSE session (its POST URL and the
//! requests waiting for their answer on the event stream).

use crate::error::{Error, Result};
use crate::jsonrpc::{Id, Response};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Uri};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The requests of a 2024-11-05 session waiting for their answer, by id.
pub(super) type Pending = Mutex<HashMap<Id, oneshot::Sender<Result<Response>>>>;

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

//! Streamable HTTP — the stateless 2026-07-28 wire and the legacy session wire
//! (2025-03-26 … 2025-11-25) — and the 2024-11-05 HTTP+SSE transport, on hyper with
//! rustls and pooled keep-alive connections (HTTP/1.1, or h2 where the server offers it).
//!
//! * `https://` always; plain `http://` only to loopback addresses, refused before any
//!   byte is sent otherwise.
//! * Headers and the bearer token are evaluated for every request, so a rotated token
//!   is used on the next request without reconnecting. Their values never appear in
//!   `Debug`, errors or logs.
//! * Redirects are not followed (credentials are never sent to another place): a 3xx
//!   is an error naming the new location's origin.
//! * 2026-07-28: every request is a POST with `MCP-Protocol-Version`, `Mcp-Method`,
//!   `Mcp-Name` and the `Mcp-Param-*` headers the session computed. Replies are JSON or
//!   SSE. Cancelling drops the response stream. A reply stream that breaks before the
//!   answer is re-issued on a new id only for requests the session marks idempotent
//!   ([`RequestContext::idempotent`](crate::transport::RequestContext::idempotent); never
//!   `tools/call`): a tool call is never run twice behind your back.
//! * Legacy: `initialize` (capturing `Mcp-Session-Id`), `MCP-Protocol-Version` after it,
//!   server requests on reply streams answered by POST, a standalone GET stream for
//!   unrelated messages, resumption by GET with `Last-Event-ID` after the server's
//!   `retry:` delay, one transparent re-initialize on 404 (expired session), and DELETE
//!   on close. A 400 naming the session starts a new session and sends the request
//!   again only when the body proves the request unread (the TypeScript SDK's
//!   words) or the request is idempotent; a tool call the server may have run fails
//!   with [`Error::is_outcome_unknown`](crate::Error::is_outcome_unknown) instead
//!   (docs/http.md).
//! * When `initialize` gets 400/404/405 without a JSON-RPC body, the 2024-11-05
//!   HTTP+SSE transport is tried: GET the URL, wait for the `endpoint` event, POST to it,
//!   read every answer from the event stream.
//! * The era detected is remembered per endpoint (origin and path) for the life of the
//!   process; when the remembered answer stops working, detection starts over.
//! * Every read is bounded by [`HttpConfig::max_message_size`] (64 MiB by default): a
//!   JSON body (refused from its `Content-Length` when that says too much), an event of
//!   a reply stream, of the standalone GET stream or of the 2024-11-05 stream. Past it
//!   the request fails with an error for which
//!   [`Error::is_too_large`](crate::Error::is_too_large) is true and the connection is
//!   dropped. Reconnecting event streams wait at least 250 ms whatever `retry:` says,
//!   and back off while reconnections bring nothing.
//! * `localhost` and names under `.localhost` count as loopback only when every address
//!   they resolve to is a loopback address; otherwise the connection is refused before
//!   anything is sent.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::HeaderName;
use http::Uri;
#[cfg(feature = "oauth")]
use hyper::body::Incoming as Body;
#[cfg(feature = "oauth")]
use serde_json::Value;

use super::{BoxFuture, RequestContext, Transport};
use crate::error::{Error, Result};
use crate::jsonrpc::{Message, Notification, Request, Response};
use crate::protocol::{Era, MODERN_VERSIONS};

mod config;
mod connect;

/// What `crate::fuzzing` reaches: an `endpoint` event resolved as the 2024-11-05
/// transport resolves it, and whether the result is on the stream's origin (the
/// transport refuses it otherwise).
pub(crate) fn fuzzing_endpoint(
    base: &str,
    reference: &str,
) -> Option<Result<(String, bool), String>> {
    let base: http::Uri = base.parse().ok()?;
    Some(
        connect::resolve(&base, reference)
            .map(|u| {
                let same = connect::origin_of(&u) == connect::origin_of(&base);
                (u.to_string(), same)
            })
            .map_err(|e| e.to_string()),
    )
}
mod legacy;
mod sessions;
mod sse2024;
mod state;
mod streamable;

pub use config::HttpConfig;
use connect::{insert, origin_of};
use mcp_runtime_core::http::{Clients, PoolOptions};
use mcp_runtime_core::lock;
pub use state::HttpTransport;
use state::{era_cache, Detected, GetStream, Mode, Shared};
#[cfg(test)]
mod tests;

impl HttpTransport {
    /// Checks the URL and settings and builds the connection pool. Nothing is sent yet.
    pub fn new(config: HttpConfig) -> Result<Self> {
        crate::url_rule::check(&config.url).map_err(Error::config)?;
        let url: Uri = config.url.parse().map_err(|e| {
            Error::config(format!(
                "`{}` is not a valid URL: {e}",
                crate::url_rule::redact(&config.url)
            ))
        })?;
        for (name, _) in &config.headers {
            HeaderName::try_from(name.as_str())
                .map_err(|_| Error::config(format!("`{name}` is not a valid HTTP header name")))?;
        }
        let clients = Clients::new(&PoolOptions {
            connect_timeout: Some(config.connect_timeout),
            idle_timeout: Duration::from_secs(90),
            proxy: config.proxy.clone(),
        })
        .map_err(Error::config)?;
        Ok(HttpTransport {
            inner: Arc::new(Shared {
                #[cfg(feature = "oauth")]
                auth: config
                    .oauth
                    .clone()
                    .map(|o| crate::auth::ServerAuthorization::new(o, config.url.clone())),
                origin: origin_of(&url),
                url,
                clients,
                config,
                mode: Mutex::new(Mode::Fresh),
                reinit: AtomicU64::new(0),
                reinit_gate: tokio::sync::Mutex::new(()),
                last_init: Mutex::new(None),
                get_stream: tokio::sync::watch::Sender::new(GetStream::Starting),
                waiting: Mutex::default(),
            }),
        })
    }
}

impl Shared {
    /// What was detected at this endpoint before (keyed by origin and path).
    fn cached_era(&self) -> Option<Detected> {
        lock(era_cache()).get(&self.config.url).copied()
    }

    fn remember(&self, d: Detected) {
        lock(era_cache()).insert(self.config.url.clone(), d);
    }
}

impl Shared {
    /// An authorization server's reply, bounded like every other read.
    #[cfg(feature = "oauth")]
    async fn reply(&self, resp: http::Response<Body>) -> Result<crate::auth::HttpReply> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = self.read_body(resp, "OAuth reply").await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(crate::auth::HttpReply {
            status,
            headers,
            body,
        })
    }
}

impl Transport for HttpTransport {
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        let hold = cx.hold.clone();
        let shared = &self.inner;
        // Each path is a future of its own size: a call does not carry (and copy) the
        // state of the handshake, SSE and legacy paths it does not take.
        let path: BoxFuture<'_, Result<Response>> = if MODERN_VERSIONS
            .contains(&cx.version.as_str())
        {
            Box::pin(shared.modern(request, cx))
        } else if request.method == crate::protocol::Method::Initialize.as_str() {
            Box::pin(shared.initialize(request, cx))
        } else {
            let sse = match &*lock(&shared.mode) {
                Mode::Sse(s) => Some(s.clone()),
                _ => None,
            };
            match sse {
                Some(s) => {
                    Box::pin(async move { shared.sse_request(&s, request, cx.idempotent).await })
                }
                None => Box::pin(shared.legacy(request, cx)),
            }
        };
        Box::pin(super::with_hold(hold, path))
    }

    fn notify<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let shared = &self.inner;
            let sse = match &*lock(&shared.mode) {
                Mode::Sse(s) => Some(s.clone()),
                _ => None,
            };
            if let Some(s) = sse {
                return shared.sse_post(&s, Message::Notification(n), true).await;
            }
            let mut h = shared
                .base_headers("application/json, text/event-stream")
                .await?;
            if MODERN_VERSIONS.contains(&version) {
                insert(&mut h, "mcp-protocol-version", version)?;
                insert(&mut h, "mcp-method", &n.method)?;
            } else {
                shared.session_headers(version)?.apply(&mut h);
            }
            shared
                .post_message(
                    &shared.url,
                    h,
                    &Message::Notification(n),
                    true,
                    "the server refused a notification",
                )
                .await
        })
    }

    fn cancel<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if MODERN_VERSIONS.contains(&version) {
                // Dropping the request closed its stream: that is the cancellation.
                return Ok(());
            }
            // Legacy: a dropped stream is not a cancellation; say it.
            self.notify(n, version).await
        })
    }

    fn close(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            *lock(&self.inner.last_init) = None;
            self.inner.end_session(true).await;
            Ok(())
        })
    }

    fn era_hint(&self) -> Option<Era> {
        match self.inner.cached_era()? {
            Detected::Modern => Some(Era::Modern),
            Detected::Streamable | Detected::Sse => Some(Era::Legacy),
        }
    }

    fn mirrors_param_headers(&self) -> bool {
        true
    }

    fn answers_every_request(&self) -> bool {
        true
    }

    fn listen_ready(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            match &*lock(&self.inner.mode) {
                Mode::Streamable(_) => {}
                // The 2024-11-05 stream carries everything; modern servers answer
                // `subscriptions/listen` on its own request.
                Mode::Sse(_) | Mode::Fresh => return Ok(()),
            }
            self.inner.get_stream_ready().await
        })
    }
}

impl HttpTransport {
    /// The OAuth authorization of this server, when it is configured with
    /// [`HttpConfig::oauth`]: for applications that send the user to the authorization
    /// server themselves.
    #[cfg(feature = "oauth")]
    pub fn authorization(&self) -> Option<crate::auth::Authorization<'_>> {
        let session = self.inner.auth.as_ref()?;
        Some(crate::auth::Authorization {
            session,
            http: self.inner.as_ref(),
        })
    }
}

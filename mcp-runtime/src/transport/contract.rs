//! What a transport is to the session: the [`Transport`] trait, the context of one
//! request, and the [`Incoming`] handle for everything the server sends unasked. At the
//! bottom of `transport/`: the transports implement it, the session calls it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::hold::Hold;
use crate::jsonrpc::{Notification, Request, Response};
use mcp_runtime_core::BoxFuture;

/// The largest message a built-in transport accepts from a server unless configured
/// otherwise (64 MiB): large enough for real tool results, small enough that a hostile
/// server cannot exhaust memory. Set it with
/// [`StdioConfig::max_message_size`](crate::StdioConfig::max_message_size) or
/// [`HttpConfig::max_message_size`](crate::HttpConfig::max_message_size).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// What the session says about one request besides the message itself.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RequestContext {
    /// The protocol version of the request (for HTTP's `MCP-Protocol-Version`).
    pub version: String,
    /// A deadline shorter than the transport's own, when the session needs one. The
    /// session enforces its own timeouts in any case.
    pub timeout: Option<Duration>,
    /// Extra HTTP headers for this request (`Mcp-Param-*` mirrored from arguments).
    pub headers: Vec<(String, String)>,
    /// Sending the request twice does no harm: it only reads, lists or sets a state
    /// (`ping`, the `*/list` methods, `resources/read`, `prompts/get`,
    /// `completion/complete`, `logging/setLevel`, `resources/(un)subscribe`,
    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, and the handshake).
    /// Never for `tools/call`, `subscriptions/listen`, `tasks/update` or a method the
    /// protocol does not name. A transport may send an idempotent request again (on a
    /// new id when its connection broke before the answer, or in a new session when
    /// the server lost the old one); any other request at most once.
    pub idempotent: bool,
    /// Where to hand everything the server sends that is not this request's response.
    pub incoming: Incoming,
    /// Stops the session's timeouts for this request while held: for a transport that
    /// waits on a person (an OAuth authorization in a browser) under its own deadline.
    pub hold: Hold,
}

/// Carries messages to and from one server.
///
/// Implement it to reach a server through anything: a tunnel, a message queue, an
/// in-process channel. The transport handles its own authentication and connection
/// management. Return [`Error::transport`](crate::Error::transport) or
/// [`Error::closed`](crate::Error::closed) when the server cannot be reached; when a
/// connection the transport keeps breaks, call [`Incoming::disconnected`] so the session
/// starts afresh on the next request.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an MCP transport",
    note = "implement `mcp_runtime::Transport` (request, notify, cancel, close) for it"
)]
pub trait Transport: Send + Sync + 'static {
    /// Sends a request and returns its response. Messages the server sends meanwhile
    /// (notifications, and server requests with older servers) go to `cx.incoming`.
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>>;

    /// Sends a notification.
    fn notify<'a>(
        &'a self,
        notification: Notification,
        version: &'a str,
    ) -> BoxFuture<'a, Result<()>>;

    /// Cancels a request the client sent: `notification` is the
    /// `notifications/cancelled` message. Transports where closing the request's stream
    /// is the cancellation (HTTP) may do nothing here, since the session drops the
    /// request's future too.
    fn cancel<'a>(
        &'a self,
        notification: Notification,
        version: &'a str,
    ) -> BoxFuture<'a, Result<()>>;

    /// Releases the connection (stops a local server process). The next request
    /// connects again.
    fn close(&self) -> BoxFuture<'_, Result<()>>;

    /// Gets ready to carry requests before the session starts: a stdio transport
    /// starts the server process here. The session calls it before it negotiates, so
    /// no clock of the negotiation runs while a process is being started. The default
    /// does nothing (the first request connects).
    fn connect<'a>(&'a self, incoming: &'a Incoming) -> BoxFuture<'a, Result<()>> {
        let _ = incoming;
        Box::pin(async { Ok(()) })
    }

    /// True when every request gets an answer of some kind (an HTTP status at least),
    /// so the session never has to read meaning into silence. When false (the
    /// default: message streams such as stdio, where an old server may ignore a request
    /// it does not know before the handshake), a `server/discover` probe left
    /// unanswered for the whole connect timeout makes the session [`close`](Self::close)
    /// the connection and send `initialize` alone on a fresh one, so that no server
    /// reads two handshakes.
    fn answers_every_request(&self) -> bool {
        false
    }

    /// Waits until the server can send messages on its own (notifications between
    /// requests), or says why it cannot: [`Client::listen`](crate::Client::listen)
    /// calls it with servers before 2026-07-28. The default says it can.
    fn listen_ready(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// The era this transport already knows the server speaks (from an earlier
    /// connection to the same place), so the session can skip the probe. The session
    /// probes anyway if the hint turns out wrong.
    fn era_hint(&self) -> Option<crate::client::Era> {
        None
    }

    /// True when the server expects tool arguments annotated `x-mcp-header` mirrored
    /// into `Mcp-Param-*` headers (HTTP). The session then computes them for
    /// [`RequestContext::headers`] and leaves tools with invalid annotations out of
    /// the tool list.
    fn mirrors_param_headers(&self) -> bool {
        false
    }
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn request(&self, request: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
        (**self).request(request, cx)
    }
    fn notify<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        (**self).notify(n, version)
    }
    fn cancel<'a>(&'a self, n: Notification, version: &'a str) -> BoxFuture<'a, Result<()>> {
        (**self).cancel(n, version)
    }
    fn close(&self) -> BoxFuture<'_, Result<()>> {
        (**self).close()
    }
    fn connect<'a>(&'a self, incoming: &'a Incoming) -> BoxFuture<'a, Result<()>> {
        (**self).connect(incoming)
    }
    fn answers_every_request(&self) -> bool {
        (**self).answers_every_request()
    }
    fn listen_ready(&self) -> BoxFuture<'_, Result<()>> {
        (**self).listen_ready()
    }
    fn era_hint(&self) -> Option<crate::client::Era> {
        (**self).era_hint()
    }
    fn mirrors_param_headers(&self) -> bool {
        (**self).mirrors_param_headers()
    }
}

pub(crate) trait IncomingHandler: Send + Sync {
    fn notification(&self, notification: Notification);
    fn request(&self, request: Request) -> BoxFuture<'static, Response>;
    fn disconnected(&self);
}

/// The session's inbox for what a server sends on its own: notifications, server
/// requests, and the news that the connection broke.
#[derive(Clone)]
pub struct Incoming(pub(crate) Arc<dyn IncomingHandler>);

impl Incoming {
    /// Delivers a notification. Cheap and non-blocking: call it from the reading loop.
    pub fn notification(&self, notification: Notification) {
        self.0.notification(notification)
    }

    /// Delivers a server request (`ping`, `elicitation/create`, `roots/list`,
    /// `sampling/createMessage`) and returns the response to send back. The future may
    /// wait for a person (elicitation), so do not block the reading loop on it.
    pub fn request(&self, request: Request) -> BoxFuture<'static, Response> {
        self.0.request(request)
    }

    /// Says the connection broke: the session forgets the negotiated protocol state
    /// and negotiates again on the next request.
    pub fn disconnected(&self) {
        self.0.disconnected()
    }
}

impl fmt::Debug for Incoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Incoming")
    }
}

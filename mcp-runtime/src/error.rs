//! The one error type of the runtime.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::protocol::code;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to an MCP server.
///
/// The type is opaque: ask it what happened with the `is_*` predicates, and for a
/// server's JSON-RPC error read [`code`](Error::code), [`message`](Error::message) and
/// [`data`](Error::data). The `Display` text explains the failure and what to do about
/// it; it is not API and may change. It never contains credentials: header values,
/// bearer tokens and environment values are never part of an error.
///
/// A tool that fails is **not** an error: `tools/call` returns a
/// [`CallToolResult`](crate::CallToolResult) whose `is_error()` is true, which is meant
/// for the model to read.
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: Kind,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    /// Came from authorizing with the server: asking the server another way (the
    /// other protocol era) would only repeat it.
    authorization: bool,
    /// The request reached the server, which may have acted on it, and nothing says
    /// whether it did; it was not sent again.
    outcome_unknown: bool,
    /// What to do about it, when the failure has a known remedy (shown after the
    /// error in `Display`).
    hint: Option<String>,
    /// The last lines a stdio server wrote to stderr before it ended by itself (never
    /// in `Display`: they may hold anything the server printed).
    server_stderr: Option<String>,
}

#[derive(Debug)]
enum Kind {
    /// The server answered with a JSON-RPC error object.
    Protocol {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// No answer in time. `setting` names what sets the limit, when known.
    Timeout {
        method: String,
        after: Duration,
        setting: Option<&'static str>,
    },
    /// The server sent a message larger than the transport accepts; the connection
    /// was dropped.
    TooLarge {
        what: String,
        limit: usize,
        setting: String,
    },
    /// The caller cancelled the request.
    Cancelled { method: String },
    /// The server cannot be reached, or the connection failed.
    Transport { detail: String },
    /// The connection ended (the server process exited, the stream closed).
    Closed { detail: String },
    /// The server sent something that is not a valid answer.
    InvalidResponse { detail: String },
    /// The client is configured in a way that cannot work.
    Config { detail: String },
    /// The server and client have nothing in common (protocol version, capability).
    Unsupported { detail: String },
    /// An HTTP server answered with an error status and no JSON-RPC error.
    Http { status: u16, detail: String },
}

impl Error {
    fn new(kind: Kind) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                source: None,
                authorization: false,
                outcome_unknown: false,
                hint: None,
                server_stderr: None,
            }),
        }
    }

    /// The last lines a stdio server wrote to stderr before it ended by itself (at most
    /// 10, each cut at 300 characters, control characters escaped), when this error
    /// says it ended: most often why (`API_KEY is not set`). They are not part of
    /// `Display`, which applications log and store: a server may print anything
    /// there, its secrets included. Show them to the person who started the server.
    pub fn server_stderr(&self) -> Option<&str> {
        self.inner.server_stderr.as_deref()
    }

    /// Attaches what a stdio server wrote to stderr last (see [`server_stderr`](Self::server_stderr)).
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub(crate) fn with_server_stderr(mut self, lines: Option<String>) -> Self {
        self.inner.server_stderr = lines;
        self
    }

    /// Attaches the underlying cause, reported through [`std::error::Error::source`].
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.inner.source = Some(Box::new(source));
        self
    }

    /// Marks an error of the authorization flow (see `Inner::authorization`).
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn in_authorization(mut self) -> Self {
        self.inner.authorization = true;
        self
    }

    /// Marks an error after which the request's outcome is unknown (see
    /// [`is_outcome_unknown`](Error::is_outcome_unknown)).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn with_outcome_unknown(mut self) -> Self {
        self.inner.outcome_unknown = true;
        self
    }

    /// Adds what to do about the failure (shown after it); its kind, code and
    /// predicates stay.
    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.inner.hint = Some(hint.into());
        self
    }

    /// True when the request reached the server, which may have acted on it (run the
    /// tool), and nothing in its answer says whether it did; the request was **not**
    /// sent again. Check before repeating a request that has effects.
    ///
    /// The HTTP transport says so when a server with a session answers HTTP 400 naming
    /// the session but without the words that prove it refused the request unread (the
    /// TypeScript SDK's "No valid session ID provided"), to a request that is not safe to
    /// repeat, such as `tools/call`; and when a server answers a request with an error
    /// status and a *result* (docs/http.md). Other failures (a timeout, a connection
    /// that closed mid-request) can leave an outcome unknown too without it.
    pub fn is_outcome_unknown(&self) -> bool {
        self.inner.outcome_unknown
    }

    /// True for an error of the authorization flow.
    pub(crate) fn is_authorization(&self) -> bool {
        self.inner.authorization || self.is_unauthorized()
    }

    /// A JSON-RPC error answered by the server.
    pub fn protocol(code: i64, message: impl Into<String>, data: Option<Value>) -> Self {
        Self::new(Kind::Protocol {
            code,
            message: message.into(),
            data,
        })
    }

    /// The server cannot be reached, or the transport failed. For custom transports.
    pub fn transport(detail: impl Into<String>) -> Self {
        Self::new(Kind::Transport {
            detail: detail.into(),
        })
    }

    /// The connection to the server ended. For custom transports.
    pub fn closed(detail: impl Into<String>) -> Self {
        Self::new(Kind::Closed {
            detail: detail.into(),
        })
    }

    /// The server answered with something that is not valid MCP. For custom transports.
    pub fn invalid_response(detail: impl Into<String>) -> Self {
        Self::new(Kind::InvalidResponse {
            detail: detail.into(),
        })
    }

    /// A request took longer than allowed. For custom transports with their own timeouts.
    pub fn timeout(method: impl Into<String>, after: Duration) -> Self {
        Self::new(Kind::Timeout {
            method: method.into(),
            after,
            setting: None,
        })
    }

    /// A timeout set by `setting` (named in the message, so people raise the right one).
    pub(crate) fn timeout_of(
        method: impl Into<String>,
        after: Duration,
        setting: &'static str,
    ) -> Self {
        Self::new(Kind::Timeout {
            method: method.into(),
            after,
            setting: Some(setting),
        })
    }

    /// The server sent a message (`what`: a line, a body, an event) larger than
    /// `limit` bytes, which `setting` configures; the transport dropped the connection.
    /// For custom transports.
    pub fn too_large(what: impl Into<String>, limit: usize, setting: impl Into<String>) -> Self {
        Self::new(Kind::TooLarge {
            what: what.into(),
            limit,
            setting: setting.into(),
        })
    }

    /// An HTTP error status without a JSON-RPC error in the body. For custom transports.
    pub fn http_status(status: u16, detail: impl Into<String>) -> Self {
        Self::new(Kind::Http {
            status,
            detail: detail.into(),
        })
    }

    pub(crate) fn cancelled(method: impl Into<String>) -> Self {
        Self::new(Kind::Cancelled {
            method: method.into(),
        })
    }

    pub(crate) fn config(detail: impl Into<String>) -> Self {
        Self::new(Kind::Config {
            detail: detail.into(),
        })
    }

    /// What a configuration error says, without the "configuration error:" prefix (to
    /// gather several into one); any other error's text.
    pub(crate) fn config_detail(&self) -> String {
        match &self.inner.kind {
            Kind::Config { detail } => detail.clone(),
            _ => self.to_string(),
        }
    }

    pub(crate) fn unsupported(detail: impl Into<String>) -> Self {
        Self::new(Kind::Unsupported {
            detail: detail.into(),
        })
    }

    /// True when the server answered the request with a JSON-RPC error.
    pub fn is_protocol(&self) -> bool {
        matches!(self.inner.kind, Kind::Protocol { .. })
    }

    /// True when the request got no answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self.inner.kind, Kind::Timeout { .. })
    }

    /// True when the request was cancelled by the caller.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.inner.kind, Kind::Cancelled { .. })
    }

    /// True when the server could not be reached or the connection failed, including
    /// a connection that closed ([`is_closed`](Error::is_closed)).
    pub fn is_transport(&self) -> bool {
        matches!(
            self.inner.kind,
            Kind::Transport { .. } | Kind::Closed { .. } | Kind::TooLarge { .. }
        )
    }

    /// True when the server sent a message larger than the transport accepts (see
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::transport::DEFAULT_MAX_MESSAGE_SIZE)). The connection
    /// was dropped; the next request reconnects.
    pub fn is_too_large(&self) -> bool {
        matches!(self.inner.kind, Kind::TooLarge { .. })
    }

    /// True when an HTTP server answered with an error status (see
    /// [`status`](Error::status)).
    pub fn is_http(&self) -> bool {
        matches!(self.inner.kind, Kind::Http { .. })
    }

    /// True when the server requires authorization it did not get (HTTP 401), or
    /// refuses the credentials given (HTTP 403).
    pub fn is_unauthorized(&self) -> bool {
        matches!(
            self.inner.kind,
            Kind::Http {
                status: 401 | 403,
                ..
            }
        )
    }

    /// The HTTP status, for an HTTP error.
    pub fn status(&self) -> Option<u16> {
        match self.inner.kind {
            Kind::Http { status, .. } => Some(status),
            _ => None,
        }
    }

    /// True when the connection ended, for example because the server process exited.
    /// The next request reconnects.
    pub fn is_closed(&self) -> bool {
        matches!(self.inner.kind, Kind::Closed { .. })
    }

    /// True when the server sent an answer that is not valid MCP.
    pub fn is_invalid_response(&self) -> bool {
        matches!(self.inner.kind, Kind::InvalidResponse { .. })
    }

    /// True when the client's configuration cannot work (bad command, bad setting).
    pub fn is_config(&self) -> bool {
        matches!(self.inner.kind, Kind::Config { .. })
    }

    /// True when client and server share no protocol version or a needed capability.
    pub fn is_unsupported(&self) -> bool {
        matches!(self.inner.kind, Kind::Unsupported { .. })
    }

    /// True for a "not found" answer: an unknown tool, prompt or resource
    /// (`-32602` with the 2026-07-28 protocol, `-32002` from older servers).
    pub fn is_not_found(&self) -> bool {
        match &self.inner.kind {
            Kind::Protocol {
                code: code::RESOURCE_NOT_FOUND,
                ..
            } => true,
            Kind::Protocol {
                code: code::INVALID_PARAMS,
                message,
                data,
            } => {
                let m = message.to_ascii_lowercase();
                [
                    "not found",
                    "unknown",
                    "no such",
                    "not served",
                    "does not exist",
                    "no skill",
                ]
                .iter()
                .any(|w| m.contains(w))
                    || data.as_ref().is_some_and(|d| d.get("uri").is_some())
            }
            _ => false,
        }
    }

    /// The JSON-RPC error code, for a protocol error.
    pub fn code(&self) -> Option<i64> {
        match &self.inner.kind {
            Kind::Protocol { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The server's error message, for a protocol error.
    pub fn message(&self) -> Option<&str> {
        match &self.inner.kind {
            Kind::Protocol { message, .. } => Some(message),
            _ => None,
        }
    }

    /// The error's `data`, for a protocol error that has one.
    pub fn data(&self) -> Option<&Value> {
        match &self.inner.kind {
            Kind::Protocol { data, .. } => data.as_ref(),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_kind(f)?;
        if let Some(hint) = &self.inner.hint {
            write!(f, "; {hint}")?;
        }
        if self.inner.outcome_unknown {
            f.write_str(
                "; the outcome is unknown: the server may have acted on the request, and it was not sent again",
            )?;
        }
        Ok(())
    }
}

impl Error {
    fn fmt_kind(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner.kind {
            Kind::Protocol { code, message, .. } => {
                write!(f, "the server answered with error {code}: {message}")?;
                match *code {
                    code::METHOD_NOT_FOUND => f.write_str(" (the server does not offer this method)"),
                    code::INVALID_PARAMS => f.write_str(" (check the name and the arguments)"),
                    code::UNSUPPORTED_VERSION => f.write_str(" (no protocol version in common)"),
                    _ => Ok(()),
                }
            }
            Kind::Timeout {
                method,
                after,
                setting,
            } => write!(
                f,
                "`{method}` got no answer within {:.1}s; if the server is only slow, raise {}",
                after.as_secs_f64(),
                setting.unwrap_or("the timeout")
            ),
            Kind::TooLarge {
                what,
                limit,
                setting,
            } => write!(
                f,
                "the server sent a message larger than {} ({what}); the connection was dropped and the next request reconnects; if such messages are expected, raise {setting}",
                crate::text::size(*limit)
            ),
            Kind::Cancelled { method } => write!(f, "`{method}` was cancelled"),
            Kind::Transport { detail } => write!(f, "cannot reach the server: {detail}"),
            Kind::Closed { detail } => write!(
                f,
                "the connection to the server closed: {detail}; the next request reconnects"
            ),
            Kind::InvalidResponse { detail } => {
                write!(f, "the server sent an invalid answer: {detail}")
            }
            Kind::Config { detail } => write!(f, "configuration error: {detail}"),
            Kind::Unsupported { detail } => write!(f, "unsupported: {detail}"),
            Kind::Http { status: 401, detail } => write!(
                f,
                "the server requires authorization (HTTP 401){}; configure a bearer token or OAuth for it",
                if detail.is_empty() { String::new() } else { format!(": {detail}") }
            ),
            Kind::Http { status: 403, detail } => write!(
                f,
                "the server refused the request (HTTP 403){}; check the credentials and their scopes",
                if detail.is_empty() { String::new() } else { format!(": {detail}") }
            ),
            Kind::Http { status, detail } => {
                write!(f, "the server answered HTTP {status}")?;
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.inner.kind);
        if self.inner.outcome_unknown {
            d.field("outcome_unknown", &true);
        }
        if let Some(source) = &self.inner.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner
            .source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

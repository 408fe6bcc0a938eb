//! A provider's refusals as [`ModelError`] kinds: an HTTP error answer, a stream that
//! failed mid-answer, a part a wire cannot carry. Each wire says only what its own
//! words are ([`Wire::rate_limited`](super::skeleton::Wire::rate_limited),
//! [`Wire::too_long`](super::skeleton::Wire::too_long)); the kinds are decided here.

use serde_json::Value;

use super::http::Answer;
use crate::model::ModelError;

/// What an HTTP error answer says, read the way both built-in wires read it: the
/// message (`/error/message`, else the start of the body with the secrets scrubbed),
/// the kind (`/error/type`) and the code (`/error/code`, when it is a string).
pub(crate) struct ErrorReply<'a> {
    /// The HTTP status.
    pub status: u16,
    /// The provider's message.
    pub message: String,
    /// `/error/type`, or empty.
    pub kind: &'a str,
    /// `/error/code` when a string, or empty.
    pub code: &'a str,
    /// The wait the answer asks for before a retry.
    pub retry_after: Option<std::time::Duration>,
}

impl<'a> ErrorReply<'a> {
    /// Reads `a`; `secrets` are scrubbed from a body quoted as the message.
    pub fn read(a: &'a Answer, secrets: &[&str]) -> Self {
        let text = |pointer: &str| a.json.pointer(pointer).and_then(Value::as_str);
        ErrorReply {
            status: a.status,
            message: text("/error/message")
                .map(str::to_owned)
                .unwrap_or_else(|| a.preview(secrets)),
            kind: text("/error/type").unwrap_or_default(),
            code: text("/error/code").unwrap_or_default(),
            retry_after: a.retry_after,
        }
    }

    /// The error: rate limited (429, or what the wire says is), unauthorized (401,
    /// 403), the context too long (what the wire says is), the provider unavailable
    /// (a 5xx, 408), or another failure — each with `HTTP {status}: {message}`, a
    /// rate limit and an unavailable provider with the wait the answer asks for.
    pub fn error(&self, rate_limited: bool, too_long: bool) -> ModelError {
        let detail = format!("HTTP {}: {}", self.status, self.message);
        let retry_after = self.retry_after;
        if self.status == 429 || rate_limited {
            ModelError::RateLimited {
                detail,
                retry_after,
            }
        } else if matches!(self.status, 401 | 403) {
            ModelError::Unauthorized { detail }
        } else if too_long {
            ModelError::ContextTooLong { detail }
        } else if self.status >= 500 || self.status == 408 {
            ModelError::Unavailable {
                detail,
                retry_after,
            }
        } else {
            ModelError::Other { detail }
        }
    }
}

/// An error event in an answer's stream: the provider failed mid-answer.
pub(crate) fn stream_failed(message: &str, rate_limited: bool) -> ModelError {
    let detail = format!("the stream failed: {message}");
    if rate_limited {
        ModelError::rate_limited(detail)
    } else {
        ModelError::Other { detail }
    }
}

/// A part of the transcript the wire named `wire` cannot carry: nothing is sent.
pub(crate) fn unsupported(wire: &str, what: &str) -> ModelError {
    ModelError::Unsupported {
        detail: format!("{wire} cannot carry {what}"),
    }
}

/// A file other than a PDF (neither built-in wire takes one).
pub(crate) fn not_pdf(wire: &str, media_type: &str) -> ModelError {
    unsupported(wire, &format!("a file of type `{media_type}` (only PDF)"))
}

//! The one skeleton every model wire runs on: a provider implements [`Wire`] (its
//! body, its headers, its answer, its words for an error) and [`Stream`] (how its
//! streamed answer is put together); [`complete`] does the rest, the same for every
//! provider — the URL rule, the extra headers and body fields, the bounded answer or
//! event stream, the error kinds, a connection dropped after a cut stream, and the
//! secrets scrubbed from every error.

use std::borrow::Cow;

use mcp_runtime::Secret;
use serde_json::Value;

use super::endpoint::Endpoint;
use super::errors::ErrorReply;
use super::http::{replay_events, Answer};
use crate::model::{text_sink, Block, ChatRequest, ChatResponse, ModelError, Stop, OUTPUT_TOOL};

/// Called with each piece of streamed text.
pub(crate) type OnText<'a> = Option<&'a (dyn Fn(&str) + Send + Sync)>;

/// What differs between providers. The inherent builder methods come from
/// [`settings!`](super::endpoint::settings); the [`Model`](crate::Model) impl calls
/// [`complete`].
pub(crate) trait Wire: Sized + Send + Sync {
    /// The path requests go to under the base URL (`/chat/completions`).
    const PATH: &'static str;
    /// Which refusal comes first when both the URL (plain `http://` to another
    /// machine, not allowed) and the transcript (a part this wire cannot carry) are
    /// refused: the URL's (`true`) or the transcript's. Each wire keeps the order it
    /// had before the skeleton; nothing is sent either way.
    const URL_FIRST: bool;
    /// How this provider's streamed answer is put together.
    type Stream: Stream;
    /// A typed answer comes as a call of [`OUTPUT_TOOL`] (the provider has no answer
    /// format of its own): [`complete`] turns the call into the answer's text.
    const OUTPUT_BY_TOOL: bool = false;

    /// The endpoint: URL, model, key, settings, client.
    fn endpoint(&self) -> &Endpoint;

    /// The request body for `request` (without the extra body fields); an error,
    /// naming this wire, for a part it cannot carry.
    fn body(&self, request: &ChatRequest) -> Result<Value, ModelError>;

    /// Makes `body` the one sent: asks for a stream when `streamed`, and merges the
    /// extra body fields ([`Endpoint::finish_body`]) — in the order this wire does.
    fn finish(&self, body: &mut Value, streamed: bool);

    /// The provider's own plain headers, sent after the extra ones.
    fn headers(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }

    /// The credential header for the API key, if one is set.
    fn credential(&self) -> Option<(&'static str, Cow<'_, Secret>)>;

    /// Reads a whole (non-streamed, or assembled) answer.
    fn answer(v: &Value) -> Result<ChatResponse, ModelError>;

    /// Whether an HTTP error answer says the rate is limited (429 always is).
    fn rate_limited(_reply: &ErrorReply<'_>) -> bool {
        false
    }

    /// Whether an HTTP error answer says the transcript is longer than the context.
    fn too_long(reply: &ErrorReply<'_>) -> bool;
}

/// A streamed answer being put together from its events.
pub(crate) trait Stream: Default + Send {
    /// One event (`name` is its `event:` field, often empty), handing text pieces to
    /// `on_text` as they come.
    fn event(&mut self, name: &str, data: &str, on_text: OnText<'_>) -> Result<(), ModelError>;

    /// The answer as a non-streamed one would have carried it; an error for a stream
    /// that was cut before its end, never an answer.
    fn answer(self) -> Result<Value, ModelError>;
}

/// One turn on wire `w`: the [`Model::complete`](crate::Model::complete) of every
/// built-in wire. Every error comes back with the endpoint's secrets scrubbed.
pub(crate) async fn complete<W: Wire>(
    w: &W,
    request: &ChatRequest,
) -> Result<ChatResponse, ModelError> {
    let mut answer = exchange(w, request)
        .await
        .map_err(|e| w.endpoint().redact(e))?;
    if W::OUTPUT_BY_TOOL && request.output.is_some() {
        answer_from_output_tool(&mut answer);
    }
    Ok(answer)
}

/// The call of [`OUTPUT_TOOL`] in `answer` becomes its only text (the typed answer:
/// prose beside it, or a second call, would make the answer unreadable); with no
/// other call, the model has answered.
fn answer_from_output_tool(answer: &mut ChatResponse) {
    let Some(value) = answer.message.content.iter().find_map(|b| match b {
        Block::ToolCall {
            name, arguments, ..
        } if name == OUTPUT_TOOL => Some(arguments.to_string()),
        _ => None,
    }) else {
        return;
    };
    answer.message.content.retain(|b| match b {
        Block::Text { .. } => false,
        Block::ToolCall { name, .. } => name != OUTPUT_TOOL,
        _ => true,
    });
    answer.message.content.push(Block::Text { text: value });
    let calls = answer
        .message
        .content
        .iter()
        .any(|b| matches!(b, Block::ToolCall { .. }));
    if !calls && answer.stop == Stop::ToolCalls {
        answer.stop = Stop::End;
    }
}

/// One request and its answer (errors not yet cleared of secrets).
async fn exchange<W: Wire>(w: &W, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
    let endpoint = w.endpoint();
    let (url, mut body) = if W::URL_FIRST {
        let url = endpoint.url(W::PATH)?;
        (url, w.body(request)?)
    } else {
        let body = w.body(request)?;
        (endpoint.url(W::PATH)?, body)
    };
    let streamed = endpoint.stream;
    w.finish(&mut body, streamed);
    let (mut headers, mut secrets) = endpoint.extra_headers();
    headers.extend(w.headers());
    let credential = w.credential();
    secrets.extend(credential.as_ref().map(|(k, v)| (*k, v.as_ref())));
    if !streamed {
        let a = endpoint.http.post(&url, &headers, &secrets, &body).await?;
        if (200..300).contains(&a.status) {
            return W::answer(&a.json);
        }
        return Err(error::<W>(&a, endpoint));
    }
    let mut assembled = W::Stream::default();
    // The endpoint's own hook, and the run's watchers (a started run's text sink).
    let (on_text, sink) = (endpoint.on_text.clone(), text_sink());
    // Whether the application was handed any of the answer's text: a stream that
    // fails after that is not tried again (it would hand the same text twice).
    let delivered = std::sync::atomic::AtomicBool::new(false);
    let both = |text: &str| {
        if !text.is_empty() {
            delivered.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(f) = &on_text {
            f(text);
        }
        if let Some(f) = &sink {
            f(text);
        }
    };
    let hook: OnText<'_> = (on_text.is_some() || sink.is_some()).then_some(&both);
    let mut on = |event: &str, data: &str| assembled.event(event, data, hook);
    let sent = endpoint
        .http
        .post_events(&url, &headers, &secrets, &body, &mut on)
        .await;
    let after_text = |e: ModelError| {
        if delivered.load(std::sync::atomic::Ordering::Relaxed) {
            e.final_because("part of the answer had been streamed, so it is not tried again")
        } else {
            e
        }
    };
    match sent {
        Ok(Some(a)) => Err(error::<W>(&a, endpoint)),
        Err(e) => Err(after_text(e)),
        Ok(None) => match assembled.answer() {
            Ok(a) => W::answer(&a),
            Err(e) => {
                // The connection that carried a cut stream is not used again (servers
                // leave it dead: llama-cpp-python).
                endpoint.http.reset();
                Err(after_text(e))
            }
        },
    }
}

/// The error an HTTP error answer means, in the wire's words.
fn error<W: Wire>(a: &Answer, endpoint: &Endpoint) -> ModelError {
    let reply = ErrorReply::read(a, &endpoint.secrets());
    reply.error(W::rate_limited(&reply), W::too_long(&reply))
}

/// What `crate::fuzzing` reaches: a streamed answer's body, assembled as
/// [`complete`] assembles it, then read as an answer.
pub(crate) fn fuzz_stream<W: Wire>(body: &[u8]) -> Result<ChatResponse, ModelError> {
    let mut assembled = W::Stream::default();
    replay_events(body, &mut |event, data| assembled.event(event, data, None))?;
    W::answer(&assembled.answer()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ChatCompletions, Messages};
    use serde_json::json;

    fn answer(status: u16, json: Value) -> Answer {
        let raw = bytes::Bytes::from(json.to_string());
        Answer {
            status,
            json,
            raw,
            retry_after: None,
        }
    }

    fn kind(e: &ModelError) -> &'static str {
        match e {
            ModelError::RateLimited { .. } => "rate",
            ModelError::Unauthorized { .. } => "auth",
            ModelError::ContextTooLong { .. } => "long",
            ModelError::Unavailable { .. } => "unavailable",
            ModelError::Other { .. } => "other",
            ModelError::Unsupported { .. } => "unsupported",
        }
    }

    /// Each wire's error kinds, as they were before the skeleton: the shared rules
    /// (429, 401/403) and each wire's own words.
    #[test]
    fn each_wire_keeps_its_error_kinds() {
        let err = |kind: &str, code: &str, message: &str| json!({"error": {"type": kind, "code": code, "message": message}});
        let openai = ChatCompletions::new("http://127.0.0.1:9/v1", "m").unwrap();
        let anthropic = Messages::new("http://127.0.0.1:9", "m").unwrap();
        let cases: [(u16, Value, &str, &str); 17] = [
            (429, err("", "", "slow down"), "rate", "rate"),
            (401, err("", "", "bad key"), "auth", "auth"),
            (403, err("", "", "no"), "auth", "auth"),
            (
                529,
                err("overloaded_error", "", "busy"),
                "unavailable",
                "rate",
            ),
            (400, err("rate_limit_error", "", "slow"), "other", "rate"),
            (401, err("rate_limit_error", "", "slow"), "auth", "rate"),
            (
                400,
                err("", "context_length_exceeded", "x"),
                "long",
                "other",
            ),
            (
                400,
                err("exceed_context_size_error", "", "x"),
                "long",
                "other",
            ),
            (
                500,
                err("", "", "maximum context length"),
                "long",
                "unavailable",
            ),
            (
                400,
                err("invalid_request_error", "", "prompt is too long: 9 > 8"),
                "other",
                "long",
            ),
            (
                413,
                err("request_too_large", "", "Request too large"),
                "other",
                "long",
            ),
            (400, json!("prompt is too long"), "other", "long"),
            (
                500,
                err("api_error", "", "prompt is too long"),
                "unavailable",
                "unavailable",
            ),
            (
                400,
                err("overloaded_error", "", "prompt is too long"),
                "other",
                "other",
            ),
            (
                400,
                err("invalid_request_error", "", "bad"),
                "other",
                "other",
            ),
            (502, Value::Null, "unavailable", "unavailable"),
            (408, Value::Null, "unavailable", "unavailable"),
        ];
        for (status, body, on_openai, on_anthropic) in cases {
            let a = answer(status, body.clone());
            let e = error::<ChatCompletions>(&a, openai.endpoint());
            assert_eq!(kind(&e), on_openai, "openai {status} {body}: {e}");
            let e = error::<Messages>(&a, anthropic.endpoint());
            assert_eq!(kind(&e), on_anthropic, "anthropic {status} {body}: {e}");
            assert!(e.to_string().contains(&format!("HTTP {status}: ")), "{e}");
        }
    }
}

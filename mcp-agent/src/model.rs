//! The model side, provider-neutral: a transcript of [`Message`]s, the tools offered as
//! [`ToolSpec`]s, and the [`Model`] trait the agent loop calls. Wires for providers
//! implement it ([`crate::openai::ChatCompletions`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcp_runtime::BoxFuture;

/// Who said it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
    /// Tool results, answering the model's tool calls.
    Tool,
}

/// One piece of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool call.
    ToolCall {
        /// The provider's id for the call (answered by a [`Block::ToolResult`]).
        id: String,
        /// The tool's model-facing name.
        name: String,
        /// The arguments (a JSON object).
        arguments: Value,
    },
    /// The result of a tool call, for the model.
    ToolResult {
        /// The call it answers.
        id: String,
        /// The result as text (what is not text is noted in it).
        content: String,
        /// The call failed (or was denied).
        is_error: bool,
        /// The result's images ([`Block::Image`]), for wires that carry them (both
        /// built-in wires do).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<Block>,
    },
    /// An image, base64-encoded: in a person's input, or of a tool result.
    Image {
        /// Its MIME type (`image/png`, …).
        media_type: String,
        /// Base64 data.
        data: String,
    },
    /// Audio, base64-encoded, in a person's input.
    Audio {
        /// Its MIME type (`audio/wav`, `audio/mpeg`, …).
        media_type: String,
        /// Base64 data.
        data: String,
    },
    /// A file, base64-encoded, in a person's input: a PDF goes as a document on both
    /// built-in wires; other types are refused by the wire, naming it.
    File {
        /// Its MIME type (`application/pdf`, …).
        media_type: String,
        /// Base64 data.
        data: String,
        /// Its name or URI, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A provider's own item, kept verbatim so it round-trips in the transcript.
    Provider {
        /// The item.
        value: Value,
    },
}

/// One message of the transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: Vec<Block>,
}

impl Block {
    /// A tool result of text only.
    pub fn tool_result(id: impl Into<String>, content: impl Into<String>, is_error: bool) -> Block {
        Block::ToolResult {
            id: id.into(),
            content: content.into(),
            is_error,
            parts: Vec::new(),
        }
    }
}

impl Message {
    /// A text message.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message {
            role,
            content: vec![Block::Text { text: text.into() }],
        }
    }

    /// The text blocks, joined.
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The tool calls it asks for.
    pub fn tool_calls(&self) -> Vec<(String, String, Value)> {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect()
    }
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The model-facing name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// Kept out of the model's context until a tool search loads it (providers with a
    /// native tool search get the flag; for others the agent emulates the search).
    #[serde(default)]
    pub defer: bool,
}

/// What the agent asks the model.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    /// The transcript so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The shape the final answer must take, in a typed run: the wire asks for it
    /// the way its provider supports natively (Chat Completions `response_format`
    /// `json_schema`; Anthropic Messages a tool the model must call to answer). A
    /// [`Model`] of its own may ignore it: the agent checks the answer either way.
    pub output: Option<OutputFormat>,
}

impl ChatRequest {
    /// A request of `messages`, offering `tools`, with no required answer shape.
    pub fn new(messages: Vec<Message>, tools: Vec<ToolSpec>) -> ChatRequest {
        ChatRequest {
            messages,
            tools,
            output: None,
        }
    }
}

/// The name of the tool a wire without a native answer format (Anthropic Messages)
/// offers for a typed answer: the model calls it with the answer, and the wire hands
/// the agent its arguments as the answer's text.
pub const OUTPUT_TOOL: &str = "final_answer";

/// A typed answer's shape, as the wire sends it.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputFormat {
    /// Its name (`[A-Za-z0-9_-]`, at most 64 characters).
    pub name: String,
    /// A JSON Schema of an object (a schema of another type is wrapped by the agent
    /// as the property `value` of one).
    pub schema: Value,
    /// The schema meets OpenAI's strict mode (every object closed, every property
    /// required): the provider may be told to hold the model to it.
    pub strict: bool,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// It finished its answer.
    End,
    /// It asks for tool calls.
    ToolCalls,
    /// It ran out of output tokens.
    Length,
    /// Something else the provider said.
    Other(String),
}

/// The model's answer: one assistant message. Made with [`ChatResponse::new`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The assistant message (text, tool calls, provider items).
    pub message: Message,
    /// Why it stopped.
    pub stop: Stop,
    /// The tokens it took, when the provider says.
    pub usage: Option<Usage>,
}

impl ChatResponse {
    /// An answer: the assistant message and why it stopped.
    pub fn new(message: Message, stop: Stop) -> Self {
        ChatResponse {
            message,
            stop,
            usage: None,
        }
    }

    /// With the tokens it took.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// Tokens a model call took (or a run, summed), as the provider reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read (the prompt, the transcript, the tools).
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
    /// Of the input, read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Of the output, spent reasoning (thinking) before answering.
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Adds `other` to this sum.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }

    /// Input and output together.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// Which tools the model may or must call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (sent whenever tools are offered: some servers ignore the
    /// tools without it).
    #[default]
    Auto,
    /// No tool: an answer in text.
    None,
    /// At least one tool call.
    Required,
    /// This tool (model-facing name).
    Tool(String),
}

/// Where the text a model streams goes while a started run
/// ([`Agent::start`](crate::Agent::start)) calls it: set for the run's task, read by
/// the built-in wires as they stream.
pub(crate) type TextSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

tokio::task_local! {
    static TEXT_SINK: TextSink;
}

/// The text sink of the task this runs in, when it has one.
pub(crate) fn text_sink() -> Option<TextSink> {
    TEXT_SINK.try_with(TextSink::clone).ok()
}

/// Hands a piece of the answer a [`Model`] of your own is streaming to the watchers of
/// the run it answers for: [`RunHandle::events`](crate::RunHandle::events) gets it as an
/// [`Event::TextDelta`](crate::Event::TextDelta) (live only, never stored), exactly as
/// the built-in wires do. Call it from within [`Model::complete`]'s future (the run is
/// known from the task it runs on; a task of its own spawned by the model is not that
/// run); outside a started run ([`Agent::start`](crate::Agent::start)) it does nothing.
/// Once text went out, report a failure of that answer as [`ModelError::Other`], not
/// as transient: a retry would stream the text again.
pub fn stream_text(piece: &str) {
    if let Some(sink) = text_sink() {
        sink(piece);
    }
}

/// Runs `f` with `sink` as its task's text sink.
pub(crate) async fn with_text_sink<F: std::future::Future>(sink: TextSink, f: F) -> F::Output {
    TEXT_SINK.scope(sink, f).await
}

/// A language model the agent loop can talk to. Implement it for any provider; two
/// wires are built in: [`crate::ChatCompletions`] and [`crate::Messages`], each
/// streamed or not.
pub trait Model: Send + Sync + 'static {
    /// One turn: the transcript and the tools in, one assistant message out.
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>>;

    /// True when the provider searches deferred tools itself ([`ToolSpec::defer`]); the
    /// agent then sends every tool with its flag instead of emulating a `tool_search`.
    fn native_tool_search(&self) -> bool {
        false
    }

    /// The provider, for traces (`gen_ai.provider.name`: `openai`, `anthropic`, …).
    fn provider(&self) -> &str {
        "unknown"
    }

    /// The model's id, for traces (`gen_ai.request.model`).
    fn model_id(&self) -> &str {
        ""
    }
}

impl<T: Model + ?Sized> Model for std::sync::Arc<T> {
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
        (**self).complete(request)
    }
    fn native_tool_search(&self) -> bool {
        (**self).native_tool_search()
    }
    fn provider(&self) -> &str {
        (**self).provider()
    }
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
}

impl<T: Model + ?Sized> Model for Box<T> {
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
        (**self).complete(request)
    }
    fn native_tool_search(&self) -> bool {
        (**self).native_tool_search()
    }
    fn provider(&self) -> &str {
        (**self).provider()
    }
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
}

/// What went wrong on the model side.
///
/// Which errors are worth trying again is one function: [`ModelError::is_transient`]
/// (a rate limit, a server error, a connection error or a timeout). The agent retries
/// those under its [`RetryPolicy`](crate::RetryPolicy), waiting at least what the
/// provider asked for ([`ModelError::retry_after`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider limits the rate (HTTP 429, or the provider's words for it): wait
    /// and try again.
    RateLimited {
        /// What the provider said.
        detail: String,
        /// How long the provider asked to wait (its `Retry-After` or
        /// `retry-after-ms` header), when it said.
        retry_after: Option<std::time::Duration>,
    },
    /// The transcript is longer than the model's context.
    ContextTooLong {
        /// What the provider said.
        detail: String,
    },
    /// The provider refused the credentials.
    Unauthorized {
        /// What the provider said.
        detail: String,
    },
    /// The provider could not answer now: a server error (HTTP 5xx, 408), a
    /// connection that could not be made or broke, no answer within the timeout.
    /// Trying again later may work.
    Unavailable {
        /// What happened.
        detail: String,
        /// How long the provider asked to wait (its `Retry-After` header), when it
        /// said.
        retry_after: Option<std::time::Duration>,
    },
    /// Any other failure (an HTTP error that is not one of the above, an answer that
    /// is not the wire, a streamed answer that failed after part of it was
    /// delivered).
    Other {
        /// What happened.
        detail: String,
    },
    /// The transcript holds something this wire cannot carry (audio to Anthropic, an
    /// image in a system message, …): nothing was sent.
    Unsupported {
        /// What, and on which wire.
        detail: String,
    },
}

impl ModelError {
    /// A rate limit, with no wait asked for.
    pub fn rate_limited(detail: impl Into<String>) -> ModelError {
        ModelError::RateLimited {
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// The provider could not answer now, with no wait asked for.
    pub fn unavailable(detail: impl Into<String>) -> ModelError {
        ModelError::Unavailable {
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// Trying the same call again later may work: a rate limit
    /// ([`ModelError::RateLimited`]) or the provider unavailable
    /// ([`ModelError::Unavailable`]: a 5xx, a connection error, a timeout). A context
    /// too long, refused credentials, an unsupported part or any other failure is
    /// not: the same request fails the same way. This is the one rule the agent's
    /// retries follow.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. } | ModelError::Unavailable { .. }
        )
    }

    /// How long the provider asked to wait before trying again (its `Retry-After`,
    /// in seconds or as an HTTP date, or `retry-after-ms`), when it said.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. }
            | ModelError::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// What the provider said, or what happened.
    pub fn detail(&self) -> &str {
        match self {
            ModelError::RateLimited { detail, .. }
            | ModelError::ContextTooLong { detail }
            | ModelError::Unauthorized { detail }
            | ModelError::Unavailable { detail, .. }
            | ModelError::Other { detail }
            | ModelError::Unsupported { detail } => detail,
        }
    }

    /// The same error, not to be tried again: a transient one becomes
    /// [`ModelError::Other`] with `why` added (its kind's words kept in the text).
    pub(crate) fn final_because(self, why: &str) -> ModelError {
        if !self.is_transient() {
            return self;
        }
        ModelError::Other {
            detail: format!("{self}; {why}"),
        }
    }

    /// The same error with every one of `secrets` in its text, in any JSON spelling
    /// (`\/`, `\u002f`, …), replaced by `[redacted]`: a provider that echoes the key
    /// it was sent ("Incorrect API key provided: sk-…") does not put it in an error, a
    /// log or a stored run.
    pub(crate) fn redacted(self, secrets: &[&str]) -> ModelError {
        let scrub = |d: String| crate::wire::redact::scrub(&d, secrets);
        match self {
            ModelError::RateLimited {
                detail,
                retry_after,
            } => ModelError::RateLimited {
                detail: scrub(detail),
                retry_after,
            },
            ModelError::ContextTooLong { detail } => ModelError::ContextTooLong {
                detail: scrub(detail),
            },
            ModelError::Unauthorized { detail } => ModelError::Unauthorized {
                detail: scrub(detail),
            },
            ModelError::Unavailable {
                detail,
                retry_after,
            } => ModelError::Unavailable {
                detail: scrub(detail),
                retry_after,
            },
            ModelError::Other { detail } => ModelError::Other {
                detail: scrub(detail),
            },
            ModelError::Unsupported { detail } => ModelError::Unsupported {
                detail: scrub(detail),
            },
        }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::RateLimited { detail, .. } => {
                write!(
                    f,
                    "the model provider limits the rate; try again later: {detail}"
                )
            }
            ModelError::ContextTooLong { detail } => write!(
                f,
                "the conversation is longer than the model's context: {detail}"
            ),
            ModelError::Unauthorized { detail } => write!(
                f,
                "the model provider refused the credentials (check the API key): {detail}"
            ),
            ModelError::Unavailable { detail, .. } => write!(
                f,
                "the model call failed (the provider is unavailable; try again later): {detail}"
            ),
            ModelError::Other { detail } => write!(f, "the model call failed: {detail}"),
            ModelError::Unsupported { detail } => {
                write!(f, "the model cannot be sent this: {detail}")
            }
        }
    }
}

impl std::error::Error for ModelError {}

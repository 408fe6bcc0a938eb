//! The Anthropic Messages wire (`POST {base}/v1/messages`). Blocks this crate does not
//! model — the tool-search blocks among them — are kept verbatim in the transcript and
//! sent back untouched.

use std::borrow::Cow;
use std::collections::BTreeMap;

use mcp_runtime::{BoxFuture, Secret};
use serde_json::{json, Value};

use super::endpoint::{settings, Endpoint};
use super::errors::{not_pdf, stream_failed, ErrorReply};
use super::fields::{arguments_from_text, count, string};
use super::skeleton::{complete, OnText, Stream, Wire};
use crate::model::{
    Block, ChatRequest, ChatResponse, Message, Model, ModelError, Role, Stop, ToolChoice, Usage,
    OUTPUT_TOOL,
};

/// This wire's name, in what it refuses.
const NAME: &str = "Anthropic Messages";

/// The Messages API version sent in `anthropic-version`.
const VERSION: &str = "2023-06-01";

/// A model served over the Anthropic Messages API. The model is chosen by
/// configuration only: there is no default.
#[derive(Clone, Debug)]
pub struct Messages {
    endpoint: Endpoint,
    beta: Option<String>,
    thinking: Option<u32>,
    caching: bool,
}

/// The most output tokens per turn when none is set (the API requires a number).
const DEFAULT_MAX_TOKENS: u32 = 4096;

impl Messages {
    /// A model at `base_url` (`https://api.anthropic.com`), by its id.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<Self, ModelError> {
        Ok(Messages {
            endpoint: Endpoint::new(base_url.into(), model.into())?,
            beta: None,
            thinking: None,
            caching: false,
        })
    }

    settings!();

    /// An `anthropic-beta` header, for deployments that still gate a feature.
    pub fn beta(mut self, value: impl Into<String>) -> Self {
        self.beta = Some(value.into());
        self
    }

    /// Extended thinking with this budget of tokens: the model reasons before it
    /// answers (its thinking blocks are kept in the transcript and sent back). The
    /// answer's `max_tokens` must exceed the budget; unset, it is the budget plus
    /// 4096.
    pub fn thinking(mut self, budget_tokens: u32) -> Self {
        self.thinking = Some(budget_tokens);
        self
    }

    /// Prompt caching: the tool list and the system prompt are marked as cache
    /// breakpoints (`cache_control`), so later turns read them from the provider's
    /// cache (reported as [`Usage::cached_input_tokens`]).
    pub fn prompt_caching(mut self, on: bool) -> Self {
        self.caching = on;
        self
    }
}

impl Wire for Messages {
    const PATH: &'static str = "/v1/messages";
    const URL_FIRST: bool = true;
    type Stream = MessageStream;
    const OUTPUT_BY_TOOL: bool = true;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn body(&self, request: &ChatRequest) -> Result<Value, ModelError> {
        let mut system = Vec::new();
        let mut messages: Vec<Value> = Vec::new();
        for m in &request.messages {
            let role = match m.role {
                Role::System => {
                    if m.content.iter().any(|b| !matches!(b, Block::Text { .. })) {
                        return Err(unsupported("anything but text in a system message"));
                    }
                    system.push(m.joined_text());
                    continue;
                }
                Role::Assistant => "assistant",
                // Tool results go back in a user turn.
                Role::User | Role::Tool => "user",
            };
            let mut content: Vec<Value> = Vec::with_capacity(m.content.len());
            for b in &m.content {
                content.push(match b {
                    Block::Text { text } => json!({"type": "text", "text": text}),
                    Block::ToolCall {
                        id,
                        name,
                        arguments,
                    } => {
                        // Arguments that were not a JSON object did not run (the model
                        // was told why); Anthropic takes only an object here.
                        let input = if arguments.is_object() {
                            arguments.clone()
                        } else {
                            json!({})
                        };
                        json!({"type": "tool_use", "id": id, "name": name, "input": input})
                    }
                    Block::ToolResult {
                        id,
                        content,
                        is_error,
                        parts,
                    } => {
                        let body = if parts.is_empty() {
                            Value::String(content.clone())
                        } else {
                            let mut blocks = vec![json!({"type": "text", "text": content})];
                            for p in parts {
                                blocks.push(media(p)?);
                            }
                            Value::Array(blocks)
                        };
                        json!({"type": "tool_result", "tool_use_id": id, "content": body, "is_error": is_error})
                    }
                    Block::Provider { value } => value.clone(),
                    media_block => {
                        if m.role == Role::Assistant {
                            return Err(unsupported("an image or a file in the model's own turn"));
                        }
                        media(media_block)?
                    }
                });
            }
            // Consecutive turns of one role merge (a user prompt after tool results).
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(a) = last["content"].as_array_mut() {
                        a.extend(content);
                    }
                }
                _ => messages.push(json!({"role": role, "content": content})),
            }
        }
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let mut v = json!({"name": t.name, "description": t.description, "input_schema": t.input_schema});
                if t.defer {
                    v["defer_loading"] = Value::Bool(true);
                }
                v
            })
            .collect();
        // A typed answer: a tool the model must call to answer (the Messages API has
        // no answer format of its own); the skeleton hands its input back as text.
        if let Some(o) = &request.output {
            if request.tools.iter().any(|t| t.name == OUTPUT_TOOL) {
                return Err(unsupported(
                    "a typed answer while a server offers a tool named `final_answer`",
                ));
            }
            tools.push(json!({
                "name": OUTPUT_TOOL,
                "description": format!("Give your final answer ({}): call this, with the answer as its input, when you are done; do not answer in text.", o.name),
                "input_schema": o.schema,
            }));
        }
        // Deferred tools are found by the provider's own tool search.
        if request.tools.iter().any(|t| t.defer) {
            tools.push(
                json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}),
            );
        }
        let st = &self.endpoint.settings;
        let max_tokens = match (st.max_tokens, self.thinking) {
            (Some(n), _) => n,
            (None, Some(budget)) => budget.saturating_add(DEFAULT_MAX_TOKENS),
            (None, None) => DEFAULT_MAX_TOKENS,
        };
        let mut body =
            json!({"model": self.endpoint.model, "max_tokens": max_tokens, "messages": messages});
        if !system.is_empty() {
            let text = system.join("\n\n");
            body["system"] = if self.caching {
                json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}])
            } else {
                Value::String(text)
            };
        }
        st.sampling(&mut body);
        if !st.stop.is_empty() {
            body["stop_sequences"] = json!(st.stop);
        }
        if let Some(budget) = self.thinking {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        if !tools.is_empty() {
            if self.caching {
                if let Some(last) = tools
                    .iter_mut()
                    .rev()
                    .find(|t| t.get("input_schema").is_some())
                {
                    last["cache_control"] = json!({"type": "ephemeral"});
                }
            }
            body["tools"] = Value::Array(tools);
            let mut choice = match st.tool_choice_for(request) {
                // A typed answer: some tool, the answer's at the latest (extended
                // thinking takes only `auto`: the agent's check holds the answer then).
                _ if request.output.is_some() && self.thinking.is_none() => {
                    json!({"type": "any"})
                }
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
                _ => json!({"type": "auto"}),
            };
            if st.parallel_tool_calls == Some(false) && choice["type"] != "none" {
                choice["disable_parallel_tool_use"] = json!(true);
            }
            body["tool_choice"] = choice;
        }
        Ok(body)
    }

    fn answer(v: &Value) -> Result<ChatResponse, ModelError> {
        let blocks =
            v.get("content")
                .and_then(Value::as_array)
                .ok_or_else(|| ModelError::Other {
                    detail: "the answer has no content".into(),
                })?;
        let content = blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => Block::Text {
                    text: string(b, "text"),
                },
                Some("tool_use") => Block::ToolCall {
                    id: string(b, "id"),
                    name: string(b, "name"),
                    arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
                },
                // server_tool_use, tool_search_tool_result, thinking, …: verbatim.
                _ => Block::Provider { value: b.clone() },
            })
            .collect();
        let stop = match v.get("stop_reason").and_then(Value::as_str) {
            Some("end_turn") | Some("stop_sequence") | None => Stop::End,
            Some("tool_use") => Stop::ToolCalls,
            Some("max_tokens") => Stop::Length,
            Some(other) => Stop::Other(other.to_owned()),
        };
        let usage = v.get("usage").filter(|u| u.is_object()).map(|u| {
            let cached = count(u, "/cache_read_input_tokens");
            Usage {
                // Anthropic counts cached and cache-writing input apart.
                input_tokens: count(u, "/input_tokens")
                    .saturating_add(cached)
                    .saturating_add(count(u, "/cache_creation_input_tokens")),
                output_tokens: count(u, "/output_tokens"),
                cached_input_tokens: cached,
                reasoning_tokens: 0,
            }
        });
        Ok(ChatResponse {
            message: Message {
                role: Role::Assistant,
                content,
            },
            stop,
            usage,
        })
    }

    fn finish(&self, body: &mut Value, streamed: bool) {
        self.endpoint.finish_body(body);
        if streamed {
            body["stream"] = Value::Bool(true);
        }
    }

    fn headers(&self) -> Vec<(&'static str, &str)> {
        let mut headers = vec![("anthropic-version", VERSION)];
        if let Some(b) = &self.beta {
            headers.push(("anthropic-beta", b.as_str()));
        }
        headers
    }

    fn credential(&self) -> Option<(&'static str, Cow<'_, Secret>)> {
        let key = self.endpoint.api_key.as_ref()?;
        Some(("x-api-key", Cow::Borrowed(key)))
    }

    fn rate_limited(reply: &ErrorReply<'_>) -> bool {
        reply.kind == "rate_limit_error" || reply.status == 529
    }

    fn too_long(reply: &ErrorReply<'_>) -> bool {
        matches!(reply.status, 400 | 413)
            && matches!(
                reply.kind,
                "invalid_request_error" | "request_too_large" | ""
            )
            && too_long(&reply.message)
    }
}

fn unsupported(what: &str) -> ModelError {
    super::errors::unsupported(NAME, what)
}

/// An image or a file as a Messages content block (audio it does not take).
fn media(b: &Block) -> Result<Value, ModelError> {
    Ok(match b {
        Block::Image { media_type, data } => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        Block::File {
            media_type, data, ..
        } if media_type == "application/pdf" => {
            json!({"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        Block::File { media_type, .. } => return Err(not_pdf(NAME, media_type)),
        Block::Audio { .. } => return Err(unsupported("audio")),
        _ => return Err(unsupported("this block here")),
    })
}

/// Anthropic's words for a request longer than the model's context window ("prompt
/// is too long: 208310 tokens > 200000 maximum", "input length and `max_tokens`
/// exceed context limit: …") — not any message that says "context".
fn too_long(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("prompt is too long")
        || m.contains("exceed context limit")
        || m.contains("exceeds the context window")
        || m.contains("request too large")
}

/// A streamed Messages answer being put together from its events.
#[derive(Default)]
pub(crate) struct MessageStream {
    blocks: BTreeMap<u64, serde_json::Map<String, Value>>,
    /// `input_json_delta` pieces by block, parsed when the block stops.
    partial: BTreeMap<u64, String>,
    stop: Option<String>,
    /// The usage: `message_start` has the input's, `message_delta` the output's.
    usage: serde_json::Map<String, Value>,
    /// The blocks that ended (`content_block_stop`).
    stopped: std::collections::BTreeSet<u64>,
    /// `message_stop` came.
    ended: bool,
}

impl Stream for MessageStream {
    fn event(&mut self, name: &str, data: &str, on_text: OnText<'_>) -> Result<(), ModelError> {
        let v: Value = serde_json::from_str(data).map_err(|e| ModelError::Other {
            detail: format!("a streamed event is not JSON: {e}"),
        })?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(name);
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "content_block_start" => {
                let Some(block) = v.get("content_block").and_then(Value::as_object) else {
                    return Err(ModelError::Other {
                        detail: "a streamed content block is not an object".into(),
                    });
                };
                self.blocks.insert(index, block.clone());
            }
            "content_block_delta" => {
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(ModelError::Other {
                        detail: format!("a delta for content block {index}, which never started"),
                    });
                };
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                let mut append = |field: &str, piece: &str| match block.get_mut(field) {
                    Some(Value::String(t)) => t.push_str(piece),
                    _ => {
                        block.insert(field.into(), Value::String(piece.into()));
                    }
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        append("text", text("text"));
                        if let Some(f) = on_text {
                            f(text("text"));
                        }
                    }
                    Some("thinking_delta") => append("thinking", text("thinking")),
                    Some("signature_delta") => {
                        block.insert("signature".into(), Value::String(text("signature").into()));
                    }
                    Some("input_json_delta") => self
                        .partial
                        .entry(index)
                        .or_default()
                        .push_str(text("partial_json")),
                    _ => {}
                }
            }
            "message_stop" => self.ended = true,
            "content_block_stop" => {
                self.stopped.insert(index);
                if let Some(json) = self.partial.remove(&index) {
                    let input = arguments_from_text(json);
                    if let Some(block) = self.blocks.get_mut(&index) {
                        block.insert("input".into(), input);
                    }
                }
            }
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage").and_then(Value::as_object) {
                    self.usage.extend(u.clone());
                }
            }
            "message_delta" => {
                if let Some(stop) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop.to_owned());
                }
                if let Some(u) = v.get("usage").and_then(Value::as_object) {
                    self.usage.extend(u.clone());
                }
            }
            "error" => {
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                let kind = v.pointer("/error/type").and_then(Value::as_str);
                let rate_limited = matches!(kind, Some("overloaded_error" | "rate_limit_error"));
                return Err(stream_failed(message, rate_limited));
            }
            _ => {}
        }
        Ok(())
    }

    /// The answer as a non-streamed message would have carried it. A stream cut before
    /// its end — no `message_stop` and no stop reason, or a block that never stopped
    /// (a tool call whose input never came whole) — is an error, never an answer.
    fn answer(self) -> Result<Value, ModelError> {
        if !self.ended && self.stop.is_none() {
            return Err(ModelError::Other {
                detail: "the streamed answer ended before it was complete (no message_stop, no stop_reason): the server failed mid-answer".into(),
            });
        }
        if let Some(open) = self.blocks.keys().find(|i| !self.stopped.contains(i)) {
            return Err(ModelError::Other {
                detail: format!("the streamed answer ended with content block {open} unfinished"),
            });
        }
        let content: Vec<Value> = self.blocks.into_values().map(Value::Object).collect();
        let mut answer = json!({"content": content, "stop_reason": self.stop});
        if !self.usage.is_empty() {
            answer["usage"] = Value::Object(self.usage);
        }
        Ok(answer)
    }
}

impl Model for Messages {
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
        Box::pin(complete(self, request))
    }

    fn native_tool_search(&self) -> bool {
        true
    }

    fn provider(&self) -> &str {
        "anthropic"
    }

    fn model_id(&self) -> &str {
        &self.endpoint.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    #[test]
    fn requests_and_answers_on_the_wire() {
        let m = Messages::new("http://127.0.0.1:9", "some-model").unwrap();
        let search = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "write"}});
        let req = ChatRequest {
            messages: vec![
                Message::text(Role::System, "be brief"),
                Message::text(Role::User, "write it"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Block::Provider {
                            value: search.clone(),
                        },
                        Block::ToolCall {
                            id: "t1".into(),
                            name: "write_file".into(),
                            arguments: json!({"path": "/x"}),
                        },
                    ],
                },
                Message {
                    role: Role::Tool,
                    content: vec![Block::ToolResult {
                        id: "t1".into(),
                        content: "ok".into(),
                        is_error: false,
                        parts: vec![Block::Image {
                            media_type: "image/png".into(),
                            data: "AA==".into(),
                        }],
                    }],
                },
            ],
            tools: vec![
                ToolSpec {
                    name: "read".into(),
                    description: "r".into(),
                    input_schema: json!({"type": "object"}),
                    defer: false,
                },
                ToolSpec {
                    name: "write_file".into(),
                    description: "w".into(),
                    input_schema: json!({"type": "object"}),
                    defer: true,
                },
            ],
            output: None,
        };
        let body = m.body(&req).unwrap();
        // A tool result's image goes inside the tool_result.
        assert_eq!(
            body["messages"][2]["content"][0]["content"][1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}})
        );
        // A person's PDF is a document; audio is refused, naming the wire.
        let with = |b: Block| ChatRequest {
            messages: vec![Message {
                role: Role::User,
                content: vec![b],
            }],
            tools: vec![],
            output: None,
        };
        let pdf = m
            .body(&with(Block::File {
                media_type: "application/pdf".into(),
                data: "JVBE".into(),
                name: None,
            }))
            .unwrap();
        assert_eq!(pdf["messages"][0]["content"][0]["type"], "document");
        let e = m
            .body(&with(Block::Audio {
                media_type: "audio/wav".into(),
                data: "AA==".into(),
            }))
            .unwrap_err();
        assert!(
            matches!(e, ModelError::Unsupported { .. })
                && e.to_string().contains("Anthropic Messages"),
            "{e}"
        );
        assert_eq!(body["system"], "be brief");
        assert_eq!(
            body["messages"][1]["content"][0], search,
            "provider blocks round-trip"
        );
        assert_eq!(body["messages"][2]["role"], "user");
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "t1");
        assert_eq!(body["tools"][1]["defer_loading"], true);
        assert_eq!(body["tools"][2]["name"], "tool_search_tool_bm25");
        assert!(body["tools"][0].get("defer_loading").is_none());
        let r = Messages::answer(&json!({"content": [
            {"type": "server_tool_use", "id": "s", "name": "tool_search_tool_bm25", "input": {}},
            {"type": "tool_search_tool_result", "tool_use_id": "s", "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": "write_file"}]}},
            {"type": "tool_use", "id": "t2", "name": "write_file", "input": {"path": "/y"}}],
            "stop_reason": "tool_use"}))
        .unwrap();
        assert_eq!(r.stop, Stop::ToolCalls);
        assert_eq!(r.message.content.len(), 3);
        assert!(matches!(r.message.content[1], Block::Provider { .. }));
        assert_eq!(r.message.tool_calls().len(), 1);
        let keyed = Messages::new("http://127.0.0.1:9", "m")
            .unwrap()
            .api_key("sk-ant-SECRET");
        assert!(!format!("{keyed:?}").contains("sk-ant-SECRET"));
    }

    #[test]
    fn hostile_streams_fail_cleanly() {
        let mut m = MessageStream::default();
        assert!(m.event("", "not json", None).is_err());
        assert!(m
            .event(
                "",
                r#"{"type":"content_block_start","index":0,"content_block":5}"#,
                None
            )
            .is_err());
        assert!(m
            .event("", r#"{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"x"}}"#, None)
            .is_err());
        let overloaded = m.event(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
            None,
        );
        assert!(matches!(overloaded, Err(ModelError::RateLimited { .. })));
        // A block whose text is not a string is replaced, not panicked on.
        let mut m = MessageStream::default();
        m.event(
            "",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":3}}"#,
            None,
        )
        .unwrap();
        m.event(
            "",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}"#,
            None,
        )
        .unwrap();
        m.event("", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#, None)
            .unwrap();
        m.event("", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}"#, None)
            .unwrap();
        // Input that is not JSON stays its text (the loop does not run such a call,
        // and tells the model why).
        m.event("", r#"{"type":"content_block_stop","index":1}"#, None)
            .unwrap();
        assert_eq!(m.blocks[&1]["input"], json!("{\"a\""));
        // Never completed (no message_stop, blocks unfinished): an error, not an answer.
        let e = m.answer().unwrap_err();
        assert!(e.to_string().contains("before it was complete"), "{e}");
        let mut cut = MessageStream::default();
        cut.event("", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"rm","input":{}}}"#, None)
            .unwrap();
        cut.event(
            "",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
            None,
        )
        .unwrap();
        let e = cut.answer().unwrap_err();
        assert!(
            e.to_string().contains("unfinished"),
            "a tool call without its input never runs: {e}"
        );
    }
}

//! The OpenAI-compatible Chat Completions wire: OpenAI, Ollama, vLLM, llama.cpp server,
//! LM Studio, OpenRouter — anything serving `POST {base}/chat/completions`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use mcp_runtime::{BoxFuture, Secret};
use serde_json::{json, Map, Value};

use super::endpoint::{settings, Endpoint};
use super::errors::{not_pdf, stream_failed, unsupported, ErrorReply};
use super::fields::{arguments_from_text, bearer, count, result_text, string};
use super::skeleton::{complete, OnText, Stream, Wire};
use crate::model::{
    Block, ChatRequest, ChatResponse, Message, Model, ModelError, Role, Stop, ToolChoice, Usage,
};

/// This wire's name, in what it refuses.
const NAME: &str = "Chat Completions";

/// A model served over Chat Completions. The model is chosen by configuration only:
/// there is no default.
#[derive(Clone, Debug)]
pub struct ChatCompletions {
    endpoint: Endpoint,
    reasoning_effort: Option<String>,
}

impl ChatCompletions {
    /// A model at `base_url` (e.g. `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`), by its id. Plain `http://` to another machine only
    /// with [`allow_insecure_http`](Self::allow_insecure_http).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<Self, ModelError> {
        Ok(ChatCompletions {
            endpoint: Endpoint::new(base_url.into(), model.into())?,
            reasoning_effort: None,
        })
    }

    settings!();

    /// How hard a reasoning model thinks before it answers (`"low"`, `"medium"`,
    /// `"high"`): sent as `reasoning_effort`.
    pub fn reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.reasoning_effort = Some(effort.into());
        self
    }
}

impl Wire for ChatCompletions {
    const PATH: &'static str = "/chat/completions";
    const URL_FIRST: bool = false;
    type Stream = ChatStream;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The request body for `request`; an error, naming this wire, for a part it
    /// cannot carry.
    fn body(&self, request: &ChatRequest) -> Result<Value, ModelError> {
        let mut messages = Vec::new();
        // Chat Completions carries only text in a tool message: the results' images
        // follow in one user message after the last tool message of the row.
        let mut images = Vec::new();
        for (n, m) in request.messages.iter().enumerate() {
            match m.role {
                Role::Tool => {
                    for b in &m.content {
                        if let Block::ToolResult {
                            id,
                            content,
                            parts,
                            is_error,
                        } = b
                        {
                            let content = result_text(content, *is_error);
                            messages.push(
                                json!({"role": "tool", "tool_call_id": id, "content": content}),
                            );
                            if !parts.is_empty() {
                                images.push(json!({"type": "text", "text": format!("The images of tool call {id}:")}));
                                for p in parts {
                                    images.push(part(p, Role::User)?);
                                }
                            }
                        }
                    }
                    let row_ends = request
                        .messages
                        .get(n + 1)
                        .is_none_or(|next| next.role != Role::Tool);
                    if row_ends && !images.is_empty() {
                        messages
                            .push(json!({"role": "user", "content": std::mem::take(&mut images)}));
                    }
                }
                role => {
                    let role_name = match role {
                        Role::System => "system",
                        Role::User => "user",
                        _ => "assistant",
                    };
                    let mut msg = Map::new();
                    msg.insert("role".into(), role_name.into());
                    let calls: Vec<Value> = m
                        .tool_calls()
                        .into_iter()
                        .map(|(id, name, args)| {
                            json!({"id": id, "type": "function",
                                   "function": {"name": name, "arguments": args.to_string()}})
                        })
                        .collect();
                    let only_text = m.content.iter().all(|b| {
                        matches!(
                            b,
                            Block::Text { .. } | Block::ToolCall { .. } | Block::Provider { .. }
                        )
                    });
                    // A tool-call turn's empty content is "", not null: OpenAI and
                    // llama.cpp take both, llama-cpp-python refuses null.
                    let content = if only_text {
                        Value::String(m.joined_text())
                    } else {
                        let mut parts = Vec::new();
                        for b in &m.content {
                            if !matches!(b, Block::ToolCall { .. } | Block::Provider { .. }) {
                                parts.push(part(b, role)?);
                            }
                        }
                        Value::Array(parts)
                    };
                    msg.insert("content".into(), content);
                    if !calls.is_empty() {
                        msg.insert("tool_calls".into(), Value::Array(calls));
                    }
                    messages.push(Value::Object(msg));
                }
            }
        }
        let mut body = json!({"model": self.endpoint.model, "messages": messages});
        let st = &self.endpoint.settings;
        st.sampling(&mut body);
        if let Some(n) = st.max_tokens {
            body["max_tokens"] = json!(n);
        }
        if !st.stop.is_empty() {
            body["stop"] = json!(st.stop);
        }
        if let Some(e) = &self.reasoning_effort {
            body["reasoning_effort"] = json!(e);
        }
        if let Some(o) = &request.output {
            body["response_format"] = json!({"type": "json_schema", "json_schema": {
                "name": o.name, "schema": o.schema, "strict": o.strict}});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.input_schema}})
                })
                .collect();
            // Always said: some servers (llama-cpp-python) ignore tools without it.
            body["tool_choice"] = match st.tool_choice_for(request) {
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
                _ => json!("auto"),
            };
            if let Some(p) = st.parallel_tool_calls {
                body["parallel_tool_calls"] = json!(p);
            }
        }
        Ok(body)
    }

    /// Reads a `chat.completion` answer.
    fn answer(v: &Value) -> Result<ChatResponse, ModelError> {
        let choice = v
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| ModelError::Other {
                detail: "the answer has no choices".into(),
            })?;
        let msg = choice.get("message").cloned().unwrap_or(Value::Null);
        let mut content = Vec::new();
        if let Some(text) = msg.get("content").and_then(Value::as_str) {
            if !text.is_empty() {
                content.push(Block::Text { text: text.into() });
            }
        }
        for call in msg
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let f = call.get("function").cloned().unwrap_or(Value::Null);
            let raw = f.get("arguments").cloned().unwrap_or(Value::Null);
            // Arguments come as a JSON string; some servers send an object.
            let arguments = match raw {
                Value::String(s) => arguments_from_text(s),
                Value::Null => json!({}),
                other => other,
            };
            content.push(Block::ToolCall {
                id: string(call, "id"),
                name: string(&f, "name"),
                arguments,
            });
        }
        let stop = match choice.get("finish_reason").and_then(Value::as_str) {
            Some("stop") | None => Stop::End,
            Some("tool_calls") | Some("function_call") => Stop::ToolCalls,
            Some("length") => Stop::Length,
            Some(other) => Stop::Other(other.to_owned()),
        };
        let usage = v.get("usage").filter(|u| u.is_object()).map(|u| Usage {
            input_tokens: count(u, "/prompt_tokens"),
            output_tokens: count(u, "/completion_tokens"),
            cached_input_tokens: count(u, "/prompt_tokens_details/cached_tokens"),
            reasoning_tokens: count(u, "/completion_tokens_details/reasoning_tokens"),
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
        if streamed {
            body["stream"] = Value::Bool(true);
            // The usage comes in a last chunk, when asked for.
            body["stream_options"] = json!({"include_usage": true});
        }
        self.endpoint.finish_body(body);
    }

    fn credential(&self) -> Option<(&'static str, Cow<'_, Secret>)> {
        bearer(&self.endpoint)
    }

    fn too_long(reply: &ErrorReply<'_>) -> bool {
        // `code` is a string (OpenAI, llama-cpp-python) or a number (llama.cpp, whose
        // kind is in `type`).
        reply.code == "context_length_exceeded"
            || reply.kind == "exceed_context_size_error"
            || reply.message.contains("context length")
            || reply.message.contains("maximum context")
            || reply.message.contains("exceeds the available context size")
    }
}

/// One part of a message's `content` array. Images, audio and files only in a user's
/// message (Chat Completions takes them nowhere else).
fn part(b: &Block, role: Role) -> Result<Value, ModelError> {
    let unsupported = |what: &str| unsupported(NAME, what);
    let media = !matches!(b, Block::Text { .. });
    if media && role != Role::User {
        return Err(unsupported(
            "an image, audio or a file outside a user message",
        ));
    }
    Ok(match b {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::Image { media_type, data } => {
            json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}})
        }
        Block::Audio { media_type, data } => {
            let format = match media_type.as_str() {
                "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
                "audio/mpeg" | "audio/mp3" => "mp3",
                other => {
                    return Err(unsupported(&format!(
                        "audio of type `{other}` (only wav and mp3)"
                    )))
                }
            };
            json!({"type": "input_audio", "input_audio": {"data": data, "format": format}})
        }
        Block::File {
            media_type,
            data,
            name,
        } if media_type == "application/pdf" => {
            json!({"type": "file", "file": {
                "filename": name.as_deref().unwrap_or("document.pdf"),
                "file_data": format!("data:{media_type};base64,{data}")}})
        }
        Block::File { media_type, .. } => return Err(not_pdf(NAME, media_type)),
        _ => return Err(unsupported("this block in a content array")),
    })
}

/// A streamed answer being put together from `chat.completion.chunk`s.
#[derive(Default)]
pub(crate) struct ChatStream {
    text: String,
    /// By index: id, name, the arguments' JSON text.
    calls: BTreeMap<u64, (String, String, String)>,
    finish: Option<String>,
    usage: Option<Value>,
    /// `data: [DONE]` came.
    done: bool,
}

impl ChatStream {
    fn chunk(&mut self, data: &str, on_text: OnText<'_>) -> Result<(), ModelError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| ModelError::Other {
            detail: format!("a streamed chunk is not JSON: {e}"),
        })?;
        if let Some(err) = v.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(stream_failed(message, false));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        // A chunk without choices (the usage) carries nothing else for the answer.
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(());
        };
        if let Some(piece) = choice.pointer("/delta/content").and_then(Value::as_str) {
            if !piece.is_empty() {
                self.text.push_str(piece);
                if let Some(f) = on_text {
                    f(piece);
                }
            }
        }
        for call in choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = self.calls.entry(index).or_default();
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                entry.0 = id.to_owned();
            }
            // The name is set once: some servers (llama-cpp-python) repeat it in
            // every delta; only the arguments come in pieces.
            if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                if entry.1.is_empty() {
                    entry.1 = name.to_owned();
                }
            }
            if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                entry.2.push_str(args);
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_owned());
        }
        Ok(())
    }
}

impl Stream for ChatStream {
    fn event(&mut self, _name: &str, data: &str, on_text: OnText<'_>) -> Result<(), ModelError> {
        self.chunk(data, on_text)
    }

    /// The answer as a `chat.completion` would have carried it. A stream that ended
    /// with neither a `finish_reason` nor `[DONE]` failed on the server (which closed
    /// the body cleanly): an error, never an empty answer.
    fn answer(self) -> Result<Value, ModelError> {
        if self.finish.is_none() && !self.done {
            return Err(ModelError::Other {
                detail: "the streamed answer ended before it was complete (no finish_reason, no [DONE]): the server failed mid-answer".into(),
            });
        }
        let calls: Vec<Value> = self
            .calls
            .into_values()
            .map(|(id, name, arguments)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": self.text});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let mut answer =
            json!({"choices": [{"index": 0, "message": message, "finish_reason": self.finish}]});
        if let Some(u) = self.usage {
            answer["usage"] = u;
        }
        Ok(answer)
    }
}

impl Model for ChatCompletions {
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
        Box::pin(complete(self, request))
    }

    fn provider(&self) -> &str {
        "openai"
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
        let m = ChatCompletions::new("http://127.0.0.1:9/v1/", "some-model").unwrap();
        let req = ChatRequest {
            messages: vec![
                Message::text(Role::System, "be brief"),
                Message::text(Role::User, "list /tmp"),
                Message {
                    role: Role::Assistant,
                    content: vec![Block::ToolCall {
                        id: "c1".into(),
                        name: "list_directory".into(),
                        arguments: json!({"path": "/tmp"}),
                    }],
                },
                Message {
                    role: Role::Tool,
                    content: vec![Block::tool_result("c1", "[FILE] a", false)],
                },
            ],
            tools: vec![ToolSpec {
                name: "list_directory".into(),
                description: "List".into(),
                input_schema: json!({"type": "object"}),
                defer: false,
            }],
            output: None,
        };
        let body = m.body(&req).unwrap();
        assert_eq!(body["model"], "some-model");
        assert_eq!(body["messages"][2]["content"], "");
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"/tmp\"}"
        );
        assert_eq!(body["messages"][3]["role"], "tool");
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["name"], "list_directory");
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "read_text_file", "arguments": "{\"path\":\"/tmp/a\"}"}}]},
            "finish_reason": "tool_calls"}]});
        let r = ChatCompletions::answer(&answer).unwrap();
        assert_eq!(r.stop, Stop::ToolCalls);
        assert_eq!(
            r.message.tool_calls(),
            vec![(
                "c2".into(),
                "read_text_file".into(),
                json!({"path": "/tmp/a"})
            )]
        );
        // Images of tool results follow in a user message; a person's image, audio and
        // PDF are content parts; what the wire cannot carry is refused, naming it.
        let req = ChatRequest {
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        Block::Text {
                            text: "look".into(),
                        },
                        Block::Image {
                            media_type: "image/png".into(),
                            data: "AA==".into(),
                        },
                        Block::Audio {
                            media_type: "audio/mpeg".into(),
                            data: "AA==".into(),
                        },
                        Block::File {
                            media_type: "application/pdf".into(),
                            data: "JVBE".into(),
                            name: Some("a.pdf".into()),
                        },
                    ],
                },
                Message {
                    role: Role::Tool,
                    content: vec![Block::ToolResult {
                        id: "c1".into(),
                        content: "[image attached]".into(),
                        is_error: false,
                        parts: vec![Block::Image {
                            media_type: "image/png".into(),
                            data: "BB==".into(),
                        }],
                    }],
                },
            ],
            tools: vec![],
            output: None,
        };
        let body = m.body(&req).unwrap();
        let parts = &body["messages"][0]["content"];
        assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
        assert_eq!(parts[1]["image_url"]["url"], "data:image/png;base64,AA==");
        assert_eq!(parts[2]["input_audio"]["format"], "mp3");
        assert_eq!(parts[3]["file"]["filename"], "a.pdf");
        assert_eq!(body["messages"][1]["content"], "[image attached]");
        assert_eq!(body["messages"][2]["role"], "user");
        assert_eq!(
            body["messages"][2]["content"][1]["image_url"]["url"],
            "data:image/png;base64,BB=="
        );
        // Results in several tool messages (an application's own history): their
        // images come after the last of them, not between; a failure is said in text.
        let image = |d: &str| Block::Image {
            media_type: "image/png".into(),
            data: d.into(),
        };
        let split = ChatRequest {
            messages: vec![
                Message {
                    role: Role::Tool,
                    content: vec![Block::ToolResult {
                        id: "a".into(),
                        content: "one".into(),
                        is_error: false,
                        parts: vec![image("AA==")],
                    }],
                },
                Message {
                    role: Role::Tool,
                    content: vec![Block::ToolResult {
                        id: "b".into(),
                        content: "boom".into(),
                        is_error: true,
                        parts: vec![image("BB==")],
                    }],
                },
            ],
            tools: vec![],
            output: None,
        };
        let body = m.body(&split).unwrap();
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["tool", "tool", "user"]);
        assert_eq!(body["messages"][1]["content"], "[the tool failed] boom");
        assert_eq!(body["messages"][2]["content"].as_array().unwrap().len(), 4);
        let e = m
            .body(&ChatRequest {
                messages: vec![Message {
                    role: Role::System,
                    content: vec![Block::Image {
                        media_type: "image/png".into(),
                        data: "AA==".into(),
                    }],
                }],
                tools: vec![],
                output: None,
            })
            .unwrap_err();
        assert!(
            e.to_string().contains("Chat Completions cannot carry"),
            "{e}"
        );
        // Plain http to another machine: made, but refused before anything is sent.
        let lan = ChatCompletions::new("http://example.com/v1", "m").unwrap();
        assert!(lan.endpoint.url("/chat/completions").is_err());
        assert!(lan
            .allow_insecure_http()
            .endpoint
            .url("/chat/completions")
            .is_ok());
        assert!(ChatCompletions::new("ftp://example.com/v1", "m").is_err());
        assert!(ChatCompletions::new("http://127.0.0.1/v1", " ").is_err());
        let with_key = ChatCompletions::new("http://127.0.0.1:9/v1", "m")
            .unwrap()
            .api_key("sk-SECRET");
        assert!(!format!("{with_key:?}").contains("sk-SECRET"));
    }

    #[test]
    fn streamed_chunks_assemble_and_hostile_ones_fail_cleanly() {
        let mut c = ChatStream::default();
        for chunk in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"y","arguments":"{\"k\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"2}"}}]}}]}"#,
            r#"{"choices":[],"usage":{"total_tokens":3}}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ] {
            c.chunk(chunk, None).unwrap();
        }
        let r = ChatCompletions::answer(&c.answer().unwrap()).unwrap();
        assert_eq!(r.stop, Stop::ToolCalls);
        assert_eq!(r.message.joined_text(), "Hello");
        assert_eq!(
            r.message.tool_calls(),
            vec![
                ("a".into(), "x".into(), json!({})),
                ("b".into(), "y".into(), json!({"k": 2}))
            ]
        );
        let mut c = ChatStream::default();
        assert!(c.chunk("{", None).is_err());
        assert!(c
            .chunk(r#"{"error":{"message":"server overloaded"}}"#, None)
            .is_err());
        // Wrong types are ignored, never panicked on.
        c.chunk(
            r#"{"choices":[{"delta":{"content":5,"tool_calls":"x"}}]}"#,
            None,
        )
        .unwrap();
        c.chunk(
            r#"{"choices":[{"delta":{"tool_calls":[7,{"index":"x"}]}}]}"#,
            None,
        )
        .unwrap();
    }
}

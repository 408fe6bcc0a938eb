//! The OpenAI Responses wire: `POST {base}/responses` — OpenAI's current API (many
//! newer models are served only there) and llama.cpp's server. The whole conversation
//! goes in every request (`input` items; no `previous_response_id`, which servers such
//! as llama.cpp refuse, and which would tie the run to what the provider kept); the
//! items the agent does not model — reasoning, with its encrypted content when the
//! provider returns it — are kept verbatim and sent back in the next turn, with the
//! items that followed them as they came. OpenAI keeps each response unless told not
//! to: [`Responses::stateless`] sends `store: false`.

use std::borrow::Cow;

use mcp_runtime::{BoxFuture, Secret};
use serde_json::{json, Value};

use super::endpoint::{settings, Endpoint};
use super::errors::{not_pdf, stream_failed, unsupported, ErrorReply};
use super::fields::{arguments_from_text, bearer, count, result_text, string};
use super::skeleton::{complete, OnText, Stream, Wire};
use crate::model::{
    Block, ChatRequest, ChatResponse, Message, Model, ModelError, Role, Stop, ToolChoice, Usage,
};

/// This wire's name, in what it refuses.
const NAME: &str = "Responses";

/// A model served over the Responses API. The model is chosen by configuration only:
/// there is no default.
#[derive(Clone, Debug)]
pub struct Responses {
    endpoint: Endpoint,
    reasoning_effort: Option<String>,
    stateless: bool,
}

impl Responses {
    /// A model at `base_url` (e.g. `https://api.openai.com/v1`,
    /// `http://localhost:8080/v1`), by its id. Plain `http://` to another machine only
    /// with [`allow_insecure_http`](Self::allow_insecure_http).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<Self, ModelError> {
        Ok(Responses {
            endpoint: Endpoint::new(base_url.into(), model.into())?,
            reasoning_effort: None,
            stateless: false,
        })
    }

    settings!();

    /// How hard a reasoning model thinks before it answers (`"low"`, `"medium"`,
    /// `"high"`): sent as `reasoning.effort`.
    pub fn reasoning_effort(mut self, effort: impl Into<String>) -> Self {
        self.reasoning_effort = Some(effort.into());
        self
    }

    /// The provider keeps nothing (`store: false`), and returns reasoning items with
    /// their encrypted content (`include: ["reasoning.encrypted_content"]`), which
    /// the agent sends back in the next turn: for organisations that may not keep
    /// data with the provider.
    pub fn stateless(mut self, on: bool) -> Self {
        self.stateless = on;
        self
    }
}

impl Wire for Responses {
    const PATH: &'static str = "/responses";
    const URL_FIRST: bool = false;
    type Stream = ResponseStream;

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn body(&self, request: &ChatRequest) -> Result<Value, ModelError> {
        let mut instructions: Vec<String> = Vec::new();
        let mut input: Vec<Value> = Vec::new();
        for m in &request.messages {
            match m.role {
                // The system prompt is the request's instructions.
                Role::System => instructions.push(m.joined_text()),
                Role::User => {
                    let only_text = m.content.iter().all(|b| matches!(b, Block::Text { .. }));
                    let content = if only_text {
                        Value::String(m.joined_text())
                    } else {
                        Value::Array(m.content.iter().map(part).collect::<Result<_, _>>()?)
                    };
                    input.push(json!({"role": "user", "content": content}));
                }
                // A turn kept item by item (it had reasoning, which must go back with
                // the items that followed it, ids and all): those items, verbatim.
                Role::Assistant if m.content.iter().any(kept_item) => {
                    for b in &m.content {
                        if let Block::Provider { value } = b {
                            input.push(value.clone());
                        }
                    }
                }
                Role::Assistant => {
                    let mut text = String::new();
                    let flush = |text: &mut String, input: &mut Vec<Value>| {
                        if !text.is_empty() {
                            input.push(
                                json!({"role": "assistant", "content": std::mem::take(text)}),
                            );
                        }
                    };
                    for b in &m.content {
                        match b {
                            Block::Text { text: t } => text.push_str(t),
                            Block::ToolCall {
                                id,
                                name,
                                arguments,
                            } => {
                                flush(&mut text, &mut input);
                                input.push(json!({"type": "function_call", "call_id": id,
                                    "name": name, "arguments": arguments.to_string()}));
                            }
                            // Reasoning items (and any other the agent does not model),
                            // verbatim, in their place.
                            Block::Provider { value } => {
                                flush(&mut text, &mut input);
                                input.push(value.clone());
                            }
                            _ => {
                                return Err(unsupported(
                                    NAME,
                                    "an image, audio or a file in the model's own turn",
                                ))
                            }
                        }
                    }
                    flush(&mut text, &mut input);
                }
                Role::Tool => {
                    let mut images = Vec::new();
                    for b in &m.content {
                        let Block::ToolResult {
                            id,
                            content,
                            is_error,
                            parts,
                        } = b
                        else {
                            continue;
                        };
                        let output = result_text(content, *is_error);
                        input.push(
                            json!({"type": "function_call_output", "call_id": id, "output": output}),
                        );
                        if !parts.is_empty() {
                            images.push(json!({"type": "input_text", "text": format!("The images of tool call {id}:")}));
                            for p in parts {
                                images.push(part(p)?);
                            }
                        }
                    }
                    if !images.is_empty() {
                        input.push(json!({"role": "user", "content": images}));
                    }
                }
            }
        }
        let st = &self.endpoint.settings;
        if !st.stop.is_empty() {
            return Err(unsupported(NAME, "stop sequences"));
        }
        let mut body = json!({"model": self.endpoint.model, "input": input});
        if !instructions.is_empty() {
            body["instructions"] = Value::String(instructions.join("\n\n"));
        }
        st.sampling(&mut body);
        if let Some(n) = st.max_tokens {
            body["max_output_tokens"] = json!(n);
        }
        if let Some(e) = &self.reasoning_effort {
            body["reasoning"] = json!({"effort": e});
        }
        if self.stateless {
            body["store"] = Value::Bool(false);
            body["include"] = json!(["reasoning.encrypted_content"]);
        }
        if let Some(o) = &request.output {
            body["text"] = json!({"format": {"type": "json_schema", "name": o.name,
                "schema": o.schema, "strict": o.strict}});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.input_schema, "strict": false})
                })
                .collect();
            body["tool_choice"] = match st.tool_choice_for(request) {
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
                _ => json!("auto"),
            };
            if let Some(p) = st.parallel_tool_calls {
                body["parallel_tool_calls"] = json!(p);
            }
        }
        Ok(body)
    }

    /// Reads a `response` object.
    fn answer(v: &Value) -> Result<ChatResponse, ModelError> {
        let status = v
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("completed");
        if status == "failed" {
            let message = v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(ModelError::Other {
                detail: format!("the response failed: {}", crate::error::clip(message, 300)),
            });
        }
        let output =
            v.get("output")
                .and_then(Value::as_array)
                .ok_or_else(|| ModelError::Other {
                    detail: "the answer has no output".into(),
                })?;
        let mut content = Vec::new();
        let mut calls = false;
        // With reasoning, every item is kept as it came too (its id included): the
        // provider wants the reasoning back with the items that followed it.
        let keep_items = output
            .iter()
            .any(|i| i.get("type").and_then(Value::as_str) == Some("reasoning"));
        for item in output {
            let kind = item.get("type").and_then(Value::as_str);
            if keep_items && matches!(kind, Some("message") | Some("function_call")) {
                content.push(Block::Provider {
                    value: item.clone(),
                });
            }
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    for c in item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let text = match c.get("type").and_then(Value::as_str) {
                            Some("output_text") => string(c, "text"),
                            Some("refusal") => format!("[refused] {}", string(c, "refusal")),
                            _ => continue,
                        };
                        if !text.is_empty() {
                            content.push(Block::Text { text });
                        }
                    }
                }
                Some("function_call") => {
                    calls = true;
                    let arguments = match item.get("arguments").cloned() {
                        Some(Value::String(s)) => arguments_from_text(s),
                        None | Some(Value::Null) => json!({}),
                        Some(other) => other,
                    };
                    content.push(Block::ToolCall {
                        id: string(item, "call_id"),
                        name: string(item, "name"),
                        arguments,
                    });
                }
                // Reasoning (with its encrypted content) and the rest: verbatim, sent
                // back as they came.
                _ => content.push(Block::Provider {
                    value: item.clone(),
                }),
            }
        }
        let stop = match status {
            "incomplete" => {
                match v
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str)
                {
                    Some("max_output_tokens") => Stop::Length,
                    Some(other) => Stop::Other(other.to_owned()),
                    None => Stop::Other("incomplete".into()),
                }
            }
            _ if calls => Stop::ToolCalls,
            _ => Stop::End,
        };
        let usage = v.get("usage").filter(|u| u.is_object()).map(|u| Usage {
            input_tokens: count(u, "/input_tokens"),
            output_tokens: count(u, "/output_tokens"),
            cached_input_tokens: count(u, "/input_tokens_details/cached_tokens"),
            reasoning_tokens: count(u, "/output_tokens_details/reasoning_tokens"),
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
        }
        self.endpoint.finish_body(body);
    }

    fn credential(&self) -> Option<(&'static str, Cow<'_, Secret>)> {
        bearer(&self.endpoint)
    }

    fn too_long(reply: &ErrorReply<'_>) -> bool {
        reply.code == "context_length_exceeded"
            || reply.kind == "exceed_context_size_error"
            || reply.message.contains("context length")
            || reply.message.contains("context window")
            || reply.message.contains("exceeds the available context size")
    }
}

/// A `message` or `function_call` item kept as it came (see [`Responses::answer`]).
fn kept_item(b: &Block) -> bool {
    matches!(b, Block::Provider { value }
        if matches!(value.get("type").and_then(Value::as_str), Some("message") | Some("function_call")))
}

/// One part of a user message's `content` array.
fn part(b: &Block) -> Result<Value, ModelError> {
    Ok(match b {
        Block::Text { text } => json!({"type": "input_text", "text": text}),
        Block::Image { media_type, data } => {
            json!({"type": "input_image", "image_url": format!("data:{media_type};base64,{data}")})
        }
        Block::File {
            media_type,
            data,
            name,
        } if media_type == "application/pdf" => json!({"type": "input_file",
            "filename": name.as_deref().unwrap_or("document.pdf"),
            "file_data": format!("data:{media_type};base64,{data}")}),
        Block::File { media_type, .. } => return Err(not_pdf(NAME, media_type)),
        Block::Audio { .. } => return Err(unsupported(NAME, "audio")),
        _ => return Err(unsupported(NAME, "this block in a content array")),
    })
}

/// A streamed answer: the text handed on as it comes, the whole response taken from
/// the last event (`response.completed` or `response.incomplete` carry it), the
/// output items as they were done in case that one carries none.
#[derive(Default)]
pub(crate) struct ResponseStream {
    /// The final response, once it came.
    done: Option<Value>,
    /// The items as each was done.
    items: Vec<Value>,
}

impl Stream for ResponseStream {
    fn event(&mut self, name: &str, data: &str, on_text: OnText<'_>) -> Result<(), ModelError> {
        let v: Value = serde_json::from_str(data).map_err(|e| ModelError::Other {
            detail: format!("a streamed event is not JSON: {e}"),
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(name)
            .to_owned();
        match kind.as_str() {
            "response.output_text.delta" => {
                if let (Some(piece), Some(f)) = (v.get("delta").and_then(Value::as_str), on_text) {
                    if !piece.is_empty() {
                        f(piece);
                    }
                }
            }
            "response.output_item.done" => {
                if let Some(item) = v.get("item") {
                    self.items.push(item.clone());
                }
            }
            "response.completed" | "response.incomplete" => {
                let mut response = v.get("response").cloned().unwrap_or(Value::Null);
                if !response.is_object() {
                    return Err(ModelError::Other {
                        detail: format!("`{kind}` carries no response"),
                    });
                }
                if response.get("output").and_then(Value::as_array).is_none() {
                    response["output"] = Value::Array(std::mem::take(&mut self.items));
                }
                self.done = Some(response);
            }
            "response.failed" => {
                let message = v
                    .pointer("/response/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                return Err(stream_failed(message, false));
            }
            "error" => {
                let message = v
                    .get("message")
                    .or_else(|| v.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                let rate_limited = v
                    .get("code")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.contains("rate_limit"));
                return Err(stream_failed(message, rate_limited));
            }
            _ => {}
        }
        Ok(())
    }

    /// The response as a non-streamed answer carries it; a stream that ended before
    /// its last event failed on the server: an error, never an empty answer.
    fn answer(self) -> Result<Value, ModelError> {
        self.done.ok_or_else(|| ModelError::Other {
            detail: "the streamed answer ended before it was complete (no response.completed): the server failed mid-answer".into(),
        })
    }
}

impl Model for Responses {
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
    fn requests_carry_the_conversation_as_items() {
        let m = Responses::new("http://127.0.0.1:9", "m").unwrap();
        let reasoning =
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"});
        let mut req = ChatRequest::new(
            vec![
                Message::text(Role::System, "be brief"),
                Message::text(Role::User, "list /tmp"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Block::Provider {
                            value: reasoning.clone(),
                        },
                        Block::ToolCall {
                            id: "call_1".into(),
                            name: "list_directory".into(),
                            arguments: json!({"path": "/tmp"}),
                        },
                    ],
                },
                Message {
                    role: Role::Tool,
                    content: vec![Block::tool_result("call_1", "[FILE] a", false)],
                },
            ],
            vec![ToolSpec {
                name: "list_directory".into(),
                description: "List".into(),
                input_schema: json!({"type": "object"}),
                defer: false,
            }],
        );
        req.output = None;
        let body = m.body(&req).unwrap();
        assert_eq!(body["instructions"], "be brief");
        assert_eq!(
            body["input"][0],
            json!({"role": "user", "content": "list /tmp"})
        );
        assert_eq!(body["input"][1], reasoning, "reasoning goes back verbatim");
        assert_eq!(body["input"][2]["type"], "function_call");
        assert_eq!(body["input"][2]["arguments"], r#"{"path":"/tmp"}"#);
        assert_eq!(
            body["input"][3],
            json!({"type": "function_call_output", "call_id": "call_1", "output": "[FILE] a"})
        );
        assert_eq!(body["tools"][0]["name"], "list_directory");
        assert_eq!(body["tool_choice"], "auto");
        assert!(body.get("previous_response_id").is_none());
        let stateless = Responses::new("http://127.0.0.1:9", "m")
            .unwrap()
            .stateless(true)
            .body(&req)
            .unwrap();
        assert_eq!(stateless["store"], false);
        assert_eq!(stateless["include"], json!(["reasoning.encrypted_content"]));
    }

    #[test]
    fn answers_keep_reasoning_and_read_calls_and_stops() {
        let a = Responses::answer(&json!({"status": "completed", "output": [
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": []},
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{\"x\":1}"}
        ], "usage": {"input_tokens": 10, "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 3}}}))
        .unwrap();
        assert_eq!(a.stop, Stop::ToolCalls);
        assert!(
            matches!(&a.message.content[0], Block::Provider { value } if value["encrypted_content"] == "gAAA")
        );
        assert_eq!(a.message.tool_calls()[0].2, json!({"x": 1}));
        assert_eq!(a.usage.unwrap().reasoning_tokens, 3);
        // With reasoning, the call goes back as it came (its item id with it).
        let m = Responses::new("http://127.0.0.1:9", "m").unwrap();
        let req = ChatRequest::new(
            vec![Message::text(Role::User, "go"), a.message.clone()],
            Vec::new(),
        );
        let body = m.body(&req).unwrap();
        assert_eq!(body["input"][1]["type"], "reasoning");
        assert_eq!(body["input"][2]["id"], "fc_1");
        assert_eq!(body["input"][2]["call_id"], "c1");
        assert_eq!(body["input"].as_array().unwrap().len(), 3, "{body}");
        let cut = Responses::answer(
            &json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hel"}]}]}),
        )
        .unwrap();
        assert_eq!(cut.stop, Stop::Length);
        assert!(
            Responses::answer(&json!({"status": "failed", "error": {"message": "boom"}})).is_err()
        );
    }
}

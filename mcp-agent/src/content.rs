//! What a run is given ([`Input`]: text, images, audio, files, an MCP prompt's
//! messages, a resource's contents) and what of a tool's result reaches the model.

use mcp_runtime::{
    model::GetPromptResult, model::ReadResourceResult, model::ResourceContents, CallToolResult,
    Content,
};
use serde_json::Value;

use crate::model::{Block, Message, Role};

/// The most bytes of a tool result's text the model is sent by default
/// ([`AgentBuilder::max_result_size`](crate::AgentBuilder::max_result_size)).
pub const DEFAULT_MAX_RESULT_SIZE: usize = 100_000;

/// The most image bytes (base64) one tool result attaches, its images together; what
/// does not fit is noted. Providers refuse images over about 5 MB.
pub const MAX_IMAGE_SIZE: usize = 5_000_000;

/// What a run is given: one or more messages. A `&str` or `String` is one user message;
/// an MCP prompt's result keeps its messages and their roles; a resource's contents
/// become one user message; an application that keeps its own history gives all of
/// it ([`Agent::run_with`](crate::Agent::run_with)).
///
/// Images and audio go to models that take them; a part a wire cannot carry fails the
/// model call with [`ModelError::Unsupported`](crate::ModelError::Unsupported), naming
/// the wire, and nothing is sent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Input {
    pub(crate) messages: Vec<Message>,
}

impl Input {
    /// No messages yet.
    pub fn new() -> Self {
        Input::default()
    }

    /// Adds a message.
    pub fn message(mut self, message: Message) -> Self {
        self.messages.push(message);
        self
    }

    /// Adds a user message of these parts.
    pub fn user(self, parts: Vec<Block>) -> Self {
        self.message(Message {
            role: Role::User,
            content: parts,
        })
    }

    /// Adds what `other` holds.
    pub fn and(mut self, other: impl Into<Input>) -> Self {
        self.messages.extend(other.into().messages);
        self
    }

    /// The messages.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// True when it holds nothing to send (no parts, or only empty text).
    pub fn is_empty(&self) -> bool {
        self.messages.iter().all(|m| {
            m.content
                .iter()
                .all(|b| matches!(b, Block::Text { text } if text.trim().is_empty()))
        })
    }
}

impl From<&str> for Input {
    fn from(text: &str) -> Self {
        Input::new().message(Message::text(Role::User, text))
    }
}

impl From<String> for Input {
    fn from(text: String) -> Self {
        Input::new().message(Message::text(Role::User, text))
    }
}

impl From<&String> for Input {
    fn from(text: &String) -> Self {
        Input::from(text.as_str())
    }
}

impl From<Message> for Input {
    fn from(message: Message) -> Self {
        Input::new().message(message)
    }
}

impl From<Vec<Message>> for Input {
    fn from(messages: Vec<Message>) -> Self {
        Input { messages }
    }
}

impl From<Vec<Block>> for Input {
    fn from(parts: Vec<Block>) -> Self {
        Input::new().user(parts)
    }
}

/// An MCP prompt's messages, roles kept (the seed's `chat.ask server.prompt(…)`).
impl From<GetPromptResult> for Input {
    fn from(prompt: GetPromptResult) -> Self {
        let mut input = Input::new();
        for m in prompt.messages {
            let role = match m.role {
                mcp_runtime::model::Role::Assistant => Role::Assistant,
                _ => Role::User,
            };
            let parts = input_parts(m.content);
            // Consecutive messages of one role stay one message.
            match input.messages.last_mut() {
                Some(last) if last.role == role => last.content.extend(parts),
                _ => input.messages.push(Message {
                    role,
                    content: parts,
                }),
            }
        }
        input
    }
}

/// A resource's contents, as one user message.
impl From<ReadResourceResult> for Input {
    fn from(read: ReadResourceResult) -> Self {
        Input::new().user(read.contents.into_iter().map(resource_part).collect())
    }
}

/// An MCP content block as a part of a person's input.
fn input_parts(content: Content) -> Vec<Block> {
    match content {
        Content::Text { text, .. } => vec![Block::Text { text }],
        Content::Image {
            data, mime_type, ..
        } => vec![Block::Image {
            media_type: mime_type,
            data,
        }],
        Content::Audio {
            data, mime_type, ..
        } => vec![Block::Audio {
            media_type: mime_type,
            data,
        }],
        Content::Resource { resource, .. } => vec![resource_part(resource)],
        Content::ResourceLink(r) => vec![Block::Text {
            text: format!("[resource link: {}]", r.uri),
        }],
        other => vec![Block::Text {
            text: format!("[content of type `{}` left out]", kind(&other)),
        }],
    }
}

/// A resource's contents as a part of a person's input: text inline (headed by its
/// URI); a binary one as an image, audio or a file by its MIME type.
fn resource_part(r: ResourceContents) -> Block {
    let mime = r
        .mime_type
        .clone()
        .unwrap_or_else(|| "application/octet-stream".into());
    match (r.text, r.blob) {
        (Some(text), _) => Block::Text {
            text: format!("[resource {} ({mime})]\n{text}", r.uri),
        },
        (None, Some(data)) if mime.starts_with("image/") => Block::Image {
            media_type: mime,
            data,
        },
        (None, Some(data)) if mime.starts_with("audio/") => Block::Audio {
            media_type: mime,
            data,
        },
        (None, Some(data)) => Block::File {
            media_type: mime,
            data,
            name: Some(r.uri),
        },
        (None, None) => Block::Text {
            text: format!("[resource {} is empty]", r.uri),
        },
    }
}

fn kind(content: &Content) -> String {
    match content {
        Content::Unknown(v) => v
            .get("type")
            .and_then(Value::as_str)
            .map(|t| crate::error::clip(t, 40))
            .unwrap_or_else(|| "unknown".into()),
        _ => "unknown".into(),
    }
}

/// How many bytes base64 `data` decodes to (padding counted out).
fn decoded_size(data: &str) -> usize {
    let pad = data.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (data.len() / 4 * 3).saturating_sub(pad)
}

/// What of a tool's result the model is sent: its text, with what is not text noted in
/// it (audio, binary resources, links, unknown blocks), its images as parts, the
/// structured content as JSON when there is no text — the text cut at `max` bytes with
/// a note giving the original size — and whether the tool failed.
pub(crate) fn tool_result_for_model(r: CallToolResult, max: usize) -> (String, Vec<Block>, bool) {
    let mut text = String::new();
    let mut parts = Vec::new();
    let mut push = |text: &mut String, s: &str| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(s);
    };
    for c in r.content {
        match c {
            Content::Text { text: t, .. } => push(&mut text, &t),
            Content::Image {
                data, mime_type, ..
            } => attach(&mut text, &mut parts, &mut push, data, mime_type, None),
            Content::Audio {
                mime_type, data, ..
            } => push(
                &mut text,
                &format!(
                    "[audio ({}, {} bytes) left out: the model is not sent audio from tools]",
                    clip_meta(&mime_type),
                    decoded_size(&data)
                ),
            ),
            Content::ResourceLink(link) => {
                let mut note = format!("[resource link: {}", clip_meta(&link.uri));
                if let Some(m) = &link.mime_type {
                    note.push_str(&format!(" ({})", clip_meta(m)));
                }
                note.push(']');
                push(&mut text, &note);
            }
            Content::Resource { resource, .. } => {
                let uri = clip_meta(&resource.uri);
                let mime = resource
                    .mime_type
                    .clone()
                    .unwrap_or_else(|| "application/octet-stream".into());
                match (resource.text, resource.blob) {
                    (Some(t), _) => push(
                        &mut text,
                        &format!("[resource {uri} ({})]\n{t}", clip_meta(&mime)),
                    ),
                    (None, Some(data)) if mime.starts_with("image/") => {
                        attach(&mut text, &mut parts, &mut push, data, mime, Some(&uri))
                    }
                    (None, Some(data)) => push(
                        &mut text,
                        &format!(
                            "[resource {uri}: {} bytes of {} left out]",
                            decoded_size(&data),
                            clip_meta(&mime)
                        ),
                    ),
                    (None, None) => push(&mut text, &format!("[resource {uri} is empty]")),
                }
            }
            other => push(
                &mut text,
                &format!("[content of type `{}` left out]", kind(&other)),
            ),
        }
    }
    if text.is_empty() {
        if let Some(s) = &r.structured_content {
            text = s.to_string();
        }
    }
    let mut text = cap(text, max);
    if let mcp_runtime::model::OutputCheck::Mismatch { reason: why, .. } = &r.output_check {
        // After the cap: the model always reads it.
        text.push_str(&format!(
            "\n[error: the tool's structured result does not match its outputSchema ({}); do not rely on its shape — the tool did run]",
            crate::error::clip(why, 1000)
        ));
    }
    (text, parts, r.is_error)
}

/// An image of a tool result: attached, or noted when it is too large.
fn attach(
    text: &mut String,
    parts: &mut Vec<Block>,
    push: &mut impl FnMut(&mut String, &str),
    data: String,
    mime: String,
    uri: Option<&str>,
) {
    let from = uri.map(|u| format!(" {u}")).unwrap_or_default();
    // One result's images together stay within MAX_IMAGE_SIZE.
    let attached: usize = parts
        .iter()
        .map(|p| match p {
            Block::Image { data, .. } => data.len(),
            _ => 0,
        })
        .sum();
    if attached + data.len() > MAX_IMAGE_SIZE || !mime.starts_with("image/") {
        push(
            text,
            &format!(
                "[image{from} ({}, {} bytes) left out: too large to attach]",
                clip_meta(&mime),
                decoded_size(&data)
            ),
        );
        return;
    }
    push(
        text,
        &format!(
            "[image{from} ({}, {} bytes) attached]",
            clip_meta(&mime),
            decoded_size(&data)
        ),
    );
    parts.push(Block::Image {
        media_type: mime,
        data,
    });
}

/// A server's short string (a MIME type, a URI) as a note may quote it.
fn clip_meta(s: &str) -> String {
    mcp_runtime_core::text::escape(&crate::error::clip(s, 200), false).into_owned()
}

/// Trims `messages` — what is about to be sent to the model — to about `max_bytes`
/// (their JSON size) for an [`on_context`](crate::AgentBuilder::on_context) hook: the
/// oldest messages go first, never a system message nor the last message, and a model
/// turn goes together with the tool results that answer it (a wire refuses results
/// without their calls). A note says how many messages were left out.
pub fn trim_to(messages: &mut Vec<Message>, max_bytes: usize) {
    let size = |m: &Message| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0);
    let mut total: usize = messages.iter().map(size).sum();
    let mut dropped = 0usize;
    loop {
        if total <= max_bytes {
            break;
        }
        // The oldest message that may go (not a system message), with the tool results
        // that follow it (they answer its calls) — unless that reaches the last
        // message: the turn in progress stays whole.
        let Some(first) = messages.iter().position(|m| m.role != Role::System) else {
            break;
        };
        let mut end = first + 1;
        while end < messages.len() && messages[end].role == Role::Tool {
            end += 1;
        }
        if end >= messages.len() {
            break;
        }
        for m in messages.drain(first..end) {
            total = total.saturating_sub(size(&m));
            dropped += 1;
        }
    }
    if dropped > 0 {
        let at = messages
            .iter()
            .position(|m| m.role != Role::System)
            .unwrap_or(messages.len());
        messages.insert(
            at,
            Message::text(
                Role::User,
                format!("[{dropped} earlier messages of this conversation were left out]"),
            ),
        );
    }
}

/// `text` cut to at most `max` bytes (at a character boundary), with a note saying how
/// large it was.
pub(crate) fn cap(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let size = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[truncated: the result was {size} bytes; the first {end} are shown]"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: Value) -> CallToolResult {
        CallToolResult::from_value(v).unwrap()
    }

    #[test]
    fn every_kind_of_result_reaches_the_model_as_well_as_it_can() {
        let (text, parts, err) = tool_result_for_model(
            result(json!({"content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "mem://t", "mimeType": "text/plain", "text": "inline"}},
                {"type": "resource", "resource": {"uri": "mem://b", "mimeType": "application/zip", "blob": "AAAAAAAA"}},
                {"type": "hologram"}
            ], "isError": true})),
            DEFAULT_MAX_RESULT_SIZE,
        );
        assert!(err);
        assert_eq!(parts.len(), 1);
        for want in [
            "hello",
            "[image (image/png, 5 bytes) attached]",
            "[audio (audio/wav, 3 bytes) left out",
            "[resource link: file:///a.txt (text/plain)]",
            "[resource mem://t (text/plain)]\ninline",
            "[resource mem://b: 6 bytes of application/zip left out]",
            "[content of type `hologram` left out]",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        // Structured content when there is no text.
        let (text, _, _) = tool_result_for_model(
            result(json!({"content": [], "structuredContent": {"sum": 3}})),
            100,
        );
        assert_eq!(text, r#"{"sum":3}"#);
    }

    #[test]
    fn trimming_keeps_system_last_and_calls_with_their_results() {
        let call = Message {
            role: Role::Assistant,
            content: vec![Block::ToolCall {
                id: "c".into(),
                name: "t".into(),
                arguments: json!({}),
            }],
        };
        let result = Message {
            role: Role::Tool,
            content: vec![Block::tool_result("c", "x".repeat(500), false)],
        };
        let mut m = vec![
            Message::text(Role::System, "sys"),
            Message::text(Role::User, "first"),
            call.clone(),
            result.clone(),
            Message::text(Role::Assistant, "answer"),
            Message::text(Role::User, "last"),
        ];
        trim_to(&mut m, 300);
        assert_eq!(m[0].joined_text(), "sys");
        assert!(m[1].joined_text().contains("earlier messages"));
        assert_eq!(m.last().unwrap().joined_text(), "last");
        // No result is left without its call.
        assert!(!m.iter().any(|x| x.role == Role::Tool));
        let mut small = vec![Message::text(Role::User, "hi")];
        trim_to(&mut small, 1);
        assert_eq!(small.len(), 1, "the last message stays");
        // Mid-run, the last message is the results of the turn in progress: the call
        // they answer stays with them.
        let mut mid = vec![
            Message::text(Role::System, "sys"),
            Message::text(Role::User, "x".repeat(500)),
            call,
            result,
        ];
        trim_to(&mut mid, 10);
        let roles: Vec<Role> = mid.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::System, Role::User, Role::Assistant, Role::Tool]
        );
        assert!(mid[1].joined_text().contains("1 earlier messages"));
    }

    #[test]
    fn a_large_result_is_cut_with_a_note_of_its_size() {
        let long = "é".repeat(100);
        let out = cap(long, 51);
        assert!(out.starts_with(&"é".repeat(25)));
        assert!(out.ends_with("[truncated: the result was 200 bytes; the first 50 are shown]"));
        assert_eq!(cap("short".into(), 10), "short");
    }

    #[test]
    fn prompts_keep_their_roles_and_resources_become_parts() {
        let prompt: GetPromptResult = serde_json::from_value(json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "review"}},
            {"role": "user", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}},
            {"role": "assistant", "content": {"type": "text", "text": "ok"}}
        ]}))
        .unwrap();
        let input = Input::from(prompt);
        assert_eq!(input.messages.len(), 2);
        assert_eq!(input.messages[0].role, Role::User);
        assert!(matches!(input.messages[0].content[1], Block::Image { .. }));
        assert_eq!(input.messages[1].role, Role::Assistant);
        let read: ReadResourceResult = serde_json::from_value(json!({"contents": [
            {"uri": "mem://a", "mimeType": "text/plain", "text": "alpha"},
            {"uri": "mem://p", "mimeType": "application/pdf", "blob": "JVBERg=="}
        ]}))
        .unwrap();
        let input = Input::from(read);
        assert!(
            matches!(&input.messages[0].content[0], Block::Text { text } if text.contains("alpha"))
        );
        assert!(
            matches!(&input.messages[0].content[1], Block::File { media_type, .. } if media_type == "application/pdf")
        );
        assert!(Input::new().is_empty() && Input::from(" ").is_empty());
        assert!(!Input::from("x").is_empty());
    }
}

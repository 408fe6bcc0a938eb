//! The MCP data types a client reads: tools, prompts, resources and their results.
//!
//! Every type keeps what it does not know: fields this crate has no name for are kept in
//! `extra` (key order preserved), and schemas stay raw [`serde_json::Value`]s, so a tool's
//! `inputSchema` serializes back exactly as the server wrote it (same keys, same order,
//! same values).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Takes a typed view of a result `Value`, moving its contents.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(what: &str, value: Value) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| Error::invalid_response(format!("malformed {what} result: {e}")))
}

/// Name, version and description of a client or server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// Programmatic name.
    #[serde(default)]
    pub name: String,
    /// Version string.
    #[serde(default)]
    pub version: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Website.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Hints a server gives about a tool. They are hints from the server, not guarantees:
/// trust them only as far as you trust the server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not change its environment (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy or overwrite (default true, when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling again with the same arguments has no further effect (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches outside the server (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool the server offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The name to call it by.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments, exactly as the server sent it.
    #[serde(default = "empty_object_schema")]
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, exactly as the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Icons, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Value>,
    /// `_meta`, as sent (MCP Apps put `ui` here).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

impl Tool {
    /// The name to show a person: `title`, else `annotations.title`, else `name`.
    pub fn display_name(&self) -> &str {
        self.title
            .as_deref()
            .or_else(|| self.annotations.as_ref().and_then(|a| a.title.as_deref()))
            .unwrap_or(&self.name)
    }

    /// The server says the tool only reads (`readOnlyHint`).
    pub fn is_read_only(&self) -> bool {
        self.annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false)
    }

    /// The tool may destroy or overwrite: the protocol's default unless the server says
    /// it is read-only or not destructive.
    pub fn is_destructive(&self) -> bool {
        !self.is_read_only()
            && self
                .annotations
                .as_ref()
                .and_then(|a| a.destructive_hint)
                .unwrap_or(true)
    }

    /// Where MCP Apps say this tool may be used from (`_meta.ui.visibility`); both
    /// `"model"` and `"app"` when not said.
    pub fn visibility(&self) -> Vec<String> {
        self.meta
            .as_ref()
            .and_then(|m| m.get("ui"))
            .and_then(|ui| ui.get("visibility"))
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_else(|| vec!["model".to_owned(), "app".to_owned()])
    }

    /// True when only an MCP App's UI may call this tool, never the model.
    pub fn is_app_only(&self) -> bool {
        !self.visibility().iter().any(|v| v == "model")
    }

    /// The UI resource an MCP App renders for this tool's results
    /// (`_meta.ui.resourceUri`, or the draft's `_meta["ui/resourceUri"]`).
    pub fn ui_resource_uri(&self) -> Option<String> {
        ui_resource_uri(self.meta.as_ref()?)
    }
}

/// `_meta.ui.resourceUri` (or the draft's flat `ui/resourceUri` key) of a tool.
pub(crate) fn ui_resource_uri(meta: &Value) -> Option<String> {
    meta.pointer("/ui/resourceUri")
        .or_else(|| meta.get("ui/resourceUri"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The MIME type of an MCP App's UI resource.
pub const MCP_APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// An MCP App: the HTML a tool's results are shown with, and how the host must frame it
/// (`_meta.ui`: content security policy, permissions, border), read with
/// [`Client::read_ui`](crate::Client::read_ui).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct UiResource {
    /// The resource's URI (`ui://…`).
    pub uri: String,
    /// The HTML document.
    pub html: String,
    /// Its MIME type (`text/html;profile=mcp-app`).
    pub mime_type: String,
    /// `_meta.ui.csp`: the domains the app may connect to and load from. Render the
    /// app in a sandboxed frame with exactly this policy.
    pub csp: Option<Value>,
    /// `_meta.ui.permissions`: what the app asks the host for (camera, clipboard, …).
    pub permissions: Option<Value>,
    /// `_meta.ui.prefersBorder`: whether the host should draw a border around it.
    pub prefers_border: Option<bool>,
    /// `_meta.ui.domain`: the origin the host should serve it from, if it asks one.
    pub domain: Option<String>,
    /// The whole `_meta` of the contents, as sent.
    pub meta: Option<Value>,
}

impl UiResource {
    /// Reads the app out of a `resources/read` result: the first `text/html` contents
    /// (the MCP Apps profile preferred); `_meta.ui` of the contents, else of the result.
    pub(crate) fn from_read(uri: &str, result: &ReadResourceResult) -> Option<UiResource> {
        let html = |c: &&ResourceContents| {
            c.mime_type
                .as_deref()
                .is_some_and(|m| m.trim().to_ascii_lowercase().starts_with("text/html"))
                && c.text.is_some()
        };
        let c = result
            .contents
            .iter()
            .find(|c| c.mime_type.as_deref() == Some(MCP_APP_MIME_TYPE) && c.text.is_some())
            .or_else(|| result.contents.iter().find(html))?;
        let meta = c.meta.clone().or_else(|| result.meta.clone());
        let ui = meta.as_ref().and_then(|m| m.get("ui"));
        let field = |k: &str| ui.and_then(|u| u.get(k)).cloned();
        Some(UiResource {
            uri: if c.uri.is_empty() {
                uri.to_owned()
            } else {
                c.uri.clone()
            },
            html: c.text.clone().unwrap_or_default(),
            mime_type: c.mime_type.clone().unwrap_or_default(),
            csp: field("csp"),
            permissions: field("permissions"),
            prefers_border: field("prefersBorder").and_then(|v| v.as_bool()),
            domain: field("domain").and_then(|v| v.as_str().map(str::to_owned)),
            meta,
        })
    }
}

/// The result of `tools/call`.
///
/// `is_error` true means the tool ran and failed; that is a value for the model to read,
/// not an [`Error`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// What the tool returned.
    pub content: Vec<Content>,
    /// Structured output, when the tool has an `outputSchema`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// The tool failed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// `_meta`, as sent.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// The MCP Apps UI resource of the tool that produced it (`ui://…`), when the
    /// tool has one: read it with [`Client::read_ui`](crate::Client::read_ui) and
    /// render it with this result. Not part of the wire result.
    #[serde(skip)]
    pub ui_resource: Option<String>,
}

impl CallToolResult {
    /// True when the tool ran and failed.
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The text blocks, joined by newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let Content::Text { text, .. } = c {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// Reads a result object, moving its contents (no copy of large payloads).
    pub fn from_value(value: Value) -> Result<Self> {
        let Value::Object(mut map) = value else {
            return Err(Error::invalid_response(
                "tools/call result is not an object",
            ));
        };
        let content = match map.shift_remove("content") {
            Some(Value::Array(items)) => items.into_iter().map(Content::from_value).collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(Error::invalid_response(
                    "tools/call result `content` is not an array",
                ))
            }
        };
        let structured_content = map.shift_remove("structuredContent");
        let is_error = matches!(map.shift_remove("isError"), Some(Value::Bool(true)));
        let meta = map.shift_remove("_meta");
        map.shift_remove("resultType");
        Ok(CallToolResult {
            content,
            structured_content,
            is_error,
            meta,
            extra: map,
            ui_resource: None,
        })
    }
}

/// One block of content in a tool result or prompt message.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data.
        data: String,
        /// MIME type.
        mime_type: String,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// Audio, base64-encoded.
    Audio {
        /// Base64 data.
        data: String,
        /// MIME type.
        mime_type: String,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// A link to a resource the client may read.
    ResourceLink(Resource),
    /// A resource embedded in the result.
    Resource {
        /// The contents.
        resource: ResourceContents,
        /// `annotations` and `_meta`, as sent.
        meta: Extras,
    },
    /// A block of a type this crate does not know, as sent.
    Unknown(Value),
}

/// The fields of a content block other than its payload (`annotations`, `_meta`, and
/// anything else), kept as sent.
pub type Extras = Map<String, Value>;

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text {
            text: text.into(),
            meta: Map::new(),
        }
    }

    /// Reads a content block, moving its contents. Never fails: what cannot be read is
    /// kept as [`Content::Unknown`].
    pub fn from_value(value: Value) -> Self {
        let Value::Object(mut map) = value else {
            return Content::Unknown(value);
        };
        let kind = match map.get("type").and_then(Value::as_str) {
            Some(k) => k.to_owned(),
            None => return Content::Unknown(Value::Object(map)),
        };
        let take_str = |map: &mut Map<String, Value>, key: &str| match map.shift_remove(key) {
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                map.insert(key.to_owned(), other);
                None
            }
            None => None,
        };
        match kind.as_str() {
            "text" => match take_str(&mut map, "text") {
                Some(text) => {
                    map.shift_remove("type");
                    Content::Text { text, meta: map }
                }
                None => Content::Unknown(Value::Object(map)),
            },
            "image" | "audio" => {
                let (Some(data), Some(mime_type)) =
                    (take_str(&mut map, "data"), take_str(&mut map, "mimeType"))
                else {
                    return Content::Unknown(Value::Object(map));
                };
                map.shift_remove("type");
                if kind == "image" {
                    Content::Image {
                        data,
                        mime_type,
                        meta: map,
                    }
                } else {
                    Content::Audio {
                        data,
                        mime_type,
                        meta: map,
                    }
                }
            }
            "resource_link" => {
                let mut v = Value::Object(map);
                if let Some(m) = v.as_object_mut() {
                    m.shift_remove("type");
                }
                match serde_json::from_value::<Resource>(v.clone()) {
                    Ok(r) => Content::ResourceLink(r),
                    Err(_) => Content::Unknown(v),
                }
            }
            "resource" => match map.shift_remove("resource") {
                Some(r) => match serde_json::from_value::<ResourceContents>(r) {
                    Ok(resource) => {
                        map.shift_remove("type");
                        Content::Resource {
                            resource,
                            meta: map,
                        }
                    }
                    Err(_) => Content::Unknown(Value::Object(map)),
                },
                None => Content::Unknown(Value::Object(map)),
            },
            _ => Content::Unknown(Value::Object(map)),
        }
    }

    /// The block as JSON, as the protocol writes it.
    pub fn to_value(&self) -> Value {
        fn with(kind: &str, meta: &Extras, fields: &[(&str, Value)]) -> Value {
            let mut m = Map::new();
            m.insert("type".into(), Value::String(kind.into()));
            for (k, v) in fields {
                m.insert((*k).into(), v.clone());
            }
            for (k, v) in meta {
                m.insert(k.clone(), v.clone());
            }
            Value::Object(m)
        }
        match self {
            Content::Text { text, meta } => with("text", meta, &[("text", text.as_str().into())]),
            Content::Image {
                data,
                mime_type,
                meta,
            } => with(
                "image",
                meta,
                &[
                    ("data", data.as_str().into()),
                    ("mimeType", mime_type.as_str().into()),
                ],
            ),
            Content::Audio {
                data,
                mime_type,
                meta,
            } => with(
                "audio",
                meta,
                &[
                    ("data", data.as_str().into()),
                    ("mimeType", mime_type.as_str().into()),
                ],
            ),
            Content::ResourceLink(r) => {
                let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
                if let Some(m) = v.as_object_mut() {
                    m.insert("type".into(), "resource_link".into());
                }
                v
            }
            Content::Resource { resource, meta } => with(
                "resource",
                meta,
                &[(
                    "resource",
                    serde_json::to_value(resource).unwrap_or(Value::Null),
                )],
            ),
            Content::Unknown(v) => v.clone(),
        }
    }
}

impl Serialize for Content {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Value::deserialize(d).map(Content::from_value)
    }
}

/// A prompt the server offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prompt {
    /// The name to get it by.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the prompt is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
    /// `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An argument of a prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default)]
    pub required: bool,
}

/// Who speaks a prompt message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// One message of a filled-in prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// Who speaks it.
    pub role: Role,
    /// What is said.
    pub content: Content,
}

/// The result of `prompts/get`: messages ready for a chat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    /// What the prompt is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages.
    #[serde(default)]
    pub messages: Vec<PromptMessage>,
    /// `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// A resource the server lists (or links to from a tool result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Fields this crate does not model (`annotations`, `icons`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A URI template for resources (RFC 6570).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// The RFC 6570 template.
    pub uri_template: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    /// Fields this crate does not model.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The contents of a resource: text or a base64 blob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// Its URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary contents, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl ResourceContents {
    /// The binary contents, decoded; `None` for text or undecodable base64.
    pub fn blob_bytes(&self) -> Option<Vec<u8>> {
        use base64::Engine as _;
        let blob = self.blob.as_deref()?;
        base64::engine::general_purpose::STANDARD.decode(blob).ok()
    }
}

/// The result of `resources/read`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// One or more contents (a directory may give several).
    #[serde(default)]
    pub contents: Vec<ResourceContents>,
    /// `_meta`, as sent.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// What `completion/complete` completes an argument of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompletionRef {
    /// A prompt, by name.
    Prompt(String),
    /// A resource template, by its URI template.
    Resource(String),
}

impl CompletionRef {
    pub(crate) fn to_value(&self) -> Value {
        match self {
            CompletionRef::Prompt(name) => serde_json::json!({"type": "ref/prompt", "name": name}),
            CompletionRef::Resource(uri) => {
                serde_json::json!({"type": "ref/resource", "uri": uri})
            }
        }
    }
}

/// Suggested values for an argument.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// Up to 100 values.
    #[serde(default)]
    pub values: Vec<String>,
    /// How many there are in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// More values exist than were sent.
    #[serde(default)]
    pub has_more: bool,
}

/// Progress a server reports while it works on a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// How far along (increases every time).
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// What is happening.
    pub message: Option<String>,
}

/// The protocol's log levels, from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Notice.
    Notice,
    /// Warning.
    Warning,
    /// Error.
    Error,
    /// Critical.
    Critical,
    /// Alert.
    Alert,
    /// Emergency.
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The protocol's name for the level.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

impl std::str::FromStr for LogLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        LogLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| {
                Error::config(format!(
                    "unknown MCP log level `{s}`; use one of debug, info, notice, warning, error, critical, alert, emergency"
                ))
            })
    }
}

/// What the server can do, as it said when the session started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerCapabilities(pub Value);

impl ServerCapabilities {
    fn flag(&self, area: &str, key: Option<&str>) -> bool {
        match self.0.get(area) {
            None | Some(Value::Null) => false,
            Some(v) => match key {
                None => true,
                Some(k) => v.get(k).and_then(Value::as_bool).unwrap_or(false),
            },
        }
    }
    /// The server offers tools.
    pub fn tools(&self) -> bool {
        self.flag("tools", None)
    }
    /// The server offers prompts.
    pub fn prompts(&self) -> bool {
        self.flag("prompts", None)
    }
    /// The server offers resources.
    pub fn resources(&self) -> bool {
        self.flag("resources", None)
    }
    /// The server completes arguments.
    pub fn completions(&self) -> bool {
        self.flag("completions", None)
    }
    /// The server sends log messages.
    pub fn logging(&self) -> bool {
        self.flag("logging", None)
    }
    /// The server announces changes to its tool list.
    pub fn tools_list_changed(&self) -> bool {
        self.flag("tools", Some("listChanged"))
    }
    /// The server announces changes to its prompt list.
    pub fn prompts_list_changed(&self) -> bool {
        self.flag("prompts", Some("listChanged"))
    }
    /// The server announces changes to its resource list.
    pub fn resources_list_changed(&self) -> bool {
        self.flag("resources", Some("listChanged"))
    }
    /// The server lets clients subscribe to resource changes.
    pub fn resources_subscribe(&self) -> bool {
        self.flag("resources", Some("subscribe"))
    }
    /// The extensions the server supports (`capabilities.extensions`).
    pub fn extensions(&self) -> Vec<String> {
        self.0
            .get("extensions")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_serialize_back_as_the_server_wrote_them() {
        let schema = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"z":{"type":"integer","minimum":-3,"maximum":9007199254740991},"a":{"type":"number","multipleOf":0.5,"default":1.25},"m":{"$ref":"#/$defs/m"}},"$defs":{"m":{"oneOf":[{"const":"x"},{"enum":[null,true,"\u00e9"]}]}},"required":["z","a"],"additionalProperties":false,"x-vendor":{"b":1,"a":[]}}"##;
        let tool_json = format!(
            r#"{{"name":"t","inputSchema":{schema},"outputSchema":{schema},"somethingNew":{{"k":[1,2]}}}}"#
        );
        let tool: Tool = serde_json::from_str(&tool_json).unwrap();
        assert_eq!(
            serde_json::to_string(&tool.input_schema).unwrap(),
            schema.replace("\\u00e9", "é")
        );
        assert_eq!(
            serde_json::to_string(tool.output_schema.as_ref().unwrap()).unwrap(),
            schema.replace("\\u00e9", "é")
        );
        let back = serde_json::to_string(&tool).unwrap();
        assert_eq!(back, tool_json.replace("\\u00e9", "é"));
    }

    #[test]
    fn content_blocks_round_trip_and_unknown_ones_are_kept() {
        let blocks = serde_json::json!([
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x://1", "blob": "AAE=", "mimeType": "application/octet-stream"}},
            {"type": "resource_link", "uri": "x://2", "name": "two"},
            {"type": "hologram", "depth": 3},
            "not even an object"
        ]);
        let result = CallToolResult::from_value(
            serde_json::json!({"content": blocks.clone(), "isError": true, "novel": 1}),
        )
        .unwrap();
        assert!(result.is_error());
        assert_eq!(result.extra["novel"], 1);
        assert!(
            matches!(&result.content[2], Content::Resource { resource, .. } if resource.blob_bytes() == Some(vec![0, 1]))
        );
        assert!(matches!(&result.content[4], Content::Unknown(_)));
        let again: Vec<Value> = result.content.iter().map(Content::to_value).collect();
        assert_eq!(Value::Array(again), blocks);
    }

    #[test]
    fn tool_hints_follow_the_protocol_defaults() {
        let t: Tool = serde_json::from_value(serde_json::json!({"name": "t"})).unwrap();
        assert!(t.is_destructive() && !t.is_read_only() && !t.is_app_only());
        assert_eq!(t.input_schema, serde_json::json!({"type": "object"}));
        let t: Tool = serde_json::from_value(
            serde_json::json!({"name": "t", "annotations": {"readOnlyHint": true},
            "_meta": {"ui": {"visibility": ["app"]}}}),
        )
        .unwrap();
        assert!(!t.is_destructive() && t.is_read_only() && t.is_app_only());
    }
}

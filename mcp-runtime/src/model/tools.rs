//! Tools, their results, and MCP Apps' UI resources.

#[allow(unused_imports)]
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Content, ReadResourceResult, ResourceContents};
use crate::error::{Error, Result};

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

pub(super) fn empty_object_schema() -> Value {
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
    /// Whether `structuredContent` matched the tool's `outputSchema` (feature
    /// `schema`). Not part of the wire result.
    #[serde(skip)]
    pub output_check: OutputCheck,
}

/// What the client found when it checked a result's `structuredContent` against the
/// tool's `outputSchema` (the specification says clients SHOULD).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputCheck {
    /// Not checked: the tool declares no `outputSchema`, the session does not know
    /// the tool (it was never listed, nor declared), the result is an error, or the
    /// crate was built without the `schema` feature.
    #[default]
    Unchecked,
    /// `structuredContent` matches the `outputSchema`.
    Matched,
    /// It does not — or the tool declares an `outputSchema` and returned no
    /// `structuredContent`.
    Mismatch {
        /// Why: each violation's path, rule and message (a message may quote the
        /// value: it is the tool's output).
        reason: String,
        /// Only the paths and the rules (`at /sum (`type`)`): nothing of the value, for
        /// logs and records the output must not reach.
        rules: String,
    },
    /// The tool's `outputSchema` cannot be checked (it refers outside itself, breaks a
    /// bound, or is not a schema): why.
    Unusable(String),
}

impl OutputCheck {
    /// True when the structured output was checked and does not match.
    pub fn is_mismatch(&self) -> bool {
        matches!(self, OutputCheck::Mismatch { .. })
    }
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
            output_check: OutputCheck::Unchecked,
        })
    }
}

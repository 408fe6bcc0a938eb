//! The MCP data types a client reads: tools, prompts, resources and their results.
//!
//! Every type keeps what it does not know: fields this crate has no name for are kept in
//! `extra` (key order preserved), and schemas stay raw [`serde_json::Value`]s, so a tool's
//! `inputSchema` serializes back exactly as the server wrote it (same keys, same order,
//! same values).

mod content;
mod prompts;
mod resources;
mod session;
#[cfg(test)]
mod tests;
mod tools;

pub use content::{Content, Extras};
pub use prompts::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
pub use resources::{
    Completion, CompletionRef, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
pub use session::{Implementation, LogLevel, LogMessage, Progress, ServerCapabilities};
pub use tools::{
    CallToolResult, OutputCheck, Tool, ToolAnnotations, UiResource, MCP_APP_MIME_TYPE,
};

/// Takes a typed view of a result `Value`, moving its contents.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    what: &str,
    value: serde_json::Value,
) -> crate::error::Result<T> {
    serde_json::from_value(value)
        .map_err(|e| crate::error::Error::invalid_response(format!("malformed {what} result: {e}")))
}

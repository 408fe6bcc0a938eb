//! The MCP data types a client reads: tools, prompts, resources and their results.
//!
//! Every type keeps what it does not know: fields this crate has no name for are kept in
//! `extra` (key order preserved), and schemas stay raw [`serde_json::Value`]s, so a tool's
//! `inputSchema` serializes back exactly as the server wrote it (same keys, same order,
//! same values).

mod common;
mod content;
mod prompts;
mod resources;
#[cfg(test)]
mod tests;
mod tools;

pub(crate) use common::from_value;
pub use common::{Implementation, LogLevel, Progress, ServerCapabilities};
pub use content::{Content, Extras};
pub use prompts::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
pub use resources::{
    Completion, CompletionRef, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
pub use tools::{CallToolResult, Tool, ToolAnnotations, UiResource, MCP_APP_MIME_TYPE};

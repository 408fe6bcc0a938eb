//! Not public API: referenced by code `#[mcp(...)]` generates.
#![doc(hidden)]

pub use serde;
pub use serde_json;

/// Turns a setting method's return value into a JSON value.
pub fn to_value<T: serde::Serialize>(v: T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// Escapes control characters (and text-reordering Unicode controls) in text a server
/// sent, before it is printed to a terminal; newlines stay when `keep_newlines`.
pub fn escape_controls(text: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    crate::text::escape(text, keep_newlines)
}

//! Reading what a provider sends — numbers of its usage object, strings of its
//! answer, a tool call's arguments when they come as text — and what both OpenAI
//! wires send alike (the bearer credential, a failed result's text).

use serde_json::{json, Value};

/// A tool result's text for a wire with no error flag (both OpenAI wires): the model
/// reads that the tool failed in the text (a denial's `{"error": …}` says so already).
pub(crate) fn result_text(content: &str, is_error: bool) -> String {
    if is_error && !content.trim_start().starts_with("{\"error\"") {
        format!("[the tool failed] {content}")
    } else {
        content.to_owned()
    }
}

/// The `authorization: Bearer …` credential of both OpenAI wires, when a key is set.
pub(crate) fn bearer(
    endpoint: &super::endpoint::Endpoint,
) -> Option<(&'static str, std::borrow::Cow<'_, mcp_runtime::Secret>)> {
    let key = endpoint.api_key.as_ref()?;
    let bearer = mcp_runtime::Secret::new(format!("Bearer {}", key.expose()));
    Some(("authorization", std::borrow::Cow::Owned(bearer)))
}

/// A number from a provider's usage object (absent: 0).
pub(crate) fn count(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A string field of a provider's object (absent, or not a string: empty).
pub(crate) fn string(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A tool call's arguments from their JSON text. Empty text is no arguments (`{}`);
/// text that is not JSON stays text: the call does not run, and the model reads why
/// (the loop refuses arguments that are not an object).
pub(crate) fn arguments_from_text(text: String) -> Value {
    if text.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }
}

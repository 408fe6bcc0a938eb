//! Not public API: referenced by code `#[mcp(...)]` generates.
#![doc(hidden)]

pub use serde;
pub use serde_json;

/// Turns a setting method's return value into a JSON value.
pub fn to_value<T: serde::Serialize>(v: T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

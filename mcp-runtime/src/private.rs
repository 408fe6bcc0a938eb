//! Not public API: referenced by code `#[mcp(...)]` generates.
#![doc(hidden)]

pub use serde;
pub use serde_json;

#[cfg(any(feature = "stdio", feature = "http"))]
pub use crate::declared::calls::typed_arguments as declared_arguments;

/// Turns a setting method's return value into a JSON value.
pub fn to_value<T: serde::Serialize>(v: T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

/// The object a generated output type reads its fields from (one shared deserializer
/// instead of a derive per type: see docs/performance.md, compile cost).
pub fn object<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<serde_json::Map<String, serde_json::Value>, D::Error> {
    use serde::de::Error as _;
    match <serde_json::Value as serde::Deserialize>::deserialize(d)? {
        serde_json::Value::Object(m) => Ok(m),
        other => Err(D::Error::custom(format!(
            "expected an object, found {}",
            kind(&other)
        ))),
    }
}

/// A required field of a generated output type.
pub fn required<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    m: &mut serde_json::Map<String, serde_json::Value>,
    key: &'static str,
) -> Result<T, E> {
    match m.remove(key) {
        Some(v) => T::deserialize(v).map_err(|e| E::custom(format!("field `{key}`: {e}"))),
        None => Err(E::missing_field(key)),
    }
}

/// An optional field of a generated output type (absent or `null`: `None`).
pub fn optional<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    m: &mut serde_json::Map<String, serde_json::Value>,
    key: &'static str,
) -> Result<Option<T>, E> {
    match m.remove(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => T::deserialize(v)
            .map(Some)
            .map_err(|e| E::custom(format!("field `{key}`: {e}"))),
    }
}

/// The string a generated output enum reads its variant from.
pub fn variant<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    <String as serde::Deserialize>::deserialize(d)
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

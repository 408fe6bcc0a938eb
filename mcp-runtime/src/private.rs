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

/// The runtime's rule for where anything may be sent (`https://`, or `http://` to this
/// machine): `Ok` with the URL's origin, or what is wrong.
pub fn check_url(url: &str) -> Result<String, String> {
    crate::url_rule::check(url).map(|c| c.origin)
}

/// A URL safe to show: no userinfo, no query.
pub fn redact_url(url: &str) -> String {
    crate::url_rule::redact(url)
}

/// PostgreSQL connections shared with the agent's run store.
#[cfg(feature = "postgres")]
pub use crate::auth::PgPool;
/// The PostgreSQL client the pool hands out.
#[cfg(feature = "postgres")]
pub use tokio_postgres;

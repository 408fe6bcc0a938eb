//! Which era a server speaks, decided only by what it answers.
//!
//! The session asks with `server/discover` (2026-07-28) and, for older servers, with
//! the `initialize` handshake. These pure functions read one answer each and say what
//! it settles; the session ([`crate::Client`]) sends the requests and applies the rule
//! (docs/architecture.md, "How the era is decided"):
//!
//! * a successful `server/discover` answer, or an `initialize` refused with `-32022`
//!   listing a 2026-07-28 version, means the modern era;
//! * a successful `initialize` answer means the legacy era;
//! * a version error lists what the server speaks, and the client asks again with a
//!   version from that list;
//! * one handshake at a time: `initialize` only after `server/discover` was answered
//!   (a slow server is never mistaken for an old one); over a message stream, a probe
//!   unanswered for the whole connect timeout leads to a fresh connection asked
//!   `initialize` alone (docs/runtime.md, "How the era is decided").

use serde_json::Value;

use crate::error::Error;
use crate::protocol::code::{UNSUPPORTED_VERSION, UNSUPPORTED_VERSION_DRAFT};
use crate::protocol::{LEGACY_VERSIONS, MODERN_VERSIONS};

/// What one `server/discover` answer settles.
#[derive(Debug)]
pub(crate) enum Probe {
    /// The server speaks the modern era, at this version: the discover result.
    Modern(Value, String),
    /// The server speaks the modern era but not at the version asked: ask again with
    /// this one (the error says what happened, if asking again fails too).
    Retry(String, Error),
    /// The answer does not make the server modern (no such method, an HTTP error, a
    /// version list with only handshake versions): it may speak the legacy era.
    NotModern(Error),
    /// Nothing to try: the server cannot be reached, or speaks no version we speak.
    Fail(Error),
}

/// What one `initialize` answer settles.
#[derive(Debug)]
pub(crate) enum Handshake {
    /// The legacy era, at this version: the initialize result.
    Legacy(Value, String),
    /// The server refused the handshake and listed a modern version: it speaks the
    /// modern era.
    Modern(String, Error),
    /// The server refused the version offered and listed another handshake version.
    Retry(String),
    /// The handshake failed for good.
    Fail(Error),
}

/// The versions a version error lists (`data.supported`).
fn supported(e: &Error) -> Vec<String> {
    listed(e.data().and_then(|d| d.get("supported")))
}

fn listed(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn is_version_error(e: &Error) -> bool {
    matches!(
        e.code(),
        Some(UNSUPPORTED_VERSION | UNSUPPORTED_VERSION_DRAFT)
    )
}

/// The first modern version this client speaks that `versions` lists.
fn modern_in(versions: &[String]) -> Option<&'static str> {
    MODERN_VERSIONS
        .iter()
        .copied()
        .find(|m| versions.iter().any(|s| s == m))
}

/// The first handshake version this client speaks that `versions` lists.
fn legacy_in(versions: &[String]) -> Option<&'static str> {
    LEGACY_VERSIONS
        .iter()
        .copied()
        .find(|m| versions.iter().any(|s| s == m))
}

fn nothing_in_common(server: &str, versions: &[String]) -> Error {
    Error::unsupported(format!(
        "{server} speaks protocol versions {versions:?}; this client speaks {} and {}",
        MODERN_VERSIONS.join(", "),
        LEGACY_VERSIONS.join(", ")
    ))
}

/// Reads the answer to `server/discover` sent at `version`.
pub(crate) fn probe(server: &str, answer: Result<Value, Error>, version: &str) -> Probe {
    match answer {
        Ok(v) => {
            let versions = listed(v.get("supportedVersions"));
            if versions.is_empty() || versions.iter().any(|s| s == version) {
                return Probe::Modern(v, version.to_owned());
            }
            match modern_in(&versions) {
                Some(m) => Probe::Retry(
                    m.to_owned(),
                    Error::unsupported(format!(
                        "{server} does not speak {version}; it lists {versions:?}"
                    )),
                ),
                None if legacy_in(&versions).is_some() => Probe::NotModern(Error::unsupported(
                    format!("{server} lists only handshake versions {versions:?}"),
                )),
                None => Probe::Fail(nothing_in_common(server, &versions)),
            }
        }
        Err(e) if is_version_error(&e) => {
            let versions = supported(&e);
            match modern_in(&versions) {
                // Possibly the same version again: some servers list it anyway.
                Some(m) => Probe::Retry(m.to_owned(), e),
                None if legacy_in(&versions).is_some() => Probe::NotModern(e),
                None => Probe::Fail(nothing_in_common(server, &versions).with_source(e)),
            }
        }
        // The server cannot be reached at all, or authorizing with it failed: the
        // handshake would fail the same way (and ask a person again).
        Err(e) if e.is_config() || (e.is_transport() && !e.is_closed()) || e.is_authorization() => {
            Probe::Fail(e)
        }
        Err(e) => Probe::NotModern(e),
    }
}

/// Reads the answer to `initialize` offered at `offered`.
pub(crate) fn handshake(server: &str, answer: Result<Value, Error>, offered: &str) -> Handshake {
    match answer {
        Ok(v) => {
            let version = v
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if LEGACY_VERSIONS.contains(&version.as_str()) {
                Handshake::Legacy(v, version)
            } else {
                Handshake::Fail(Error::unsupported(format!(
                    "{server} answered initialize with protocol version `{version}`, which this client does not speak (it speaks {})",
                    LEGACY_VERSIONS.join(", ")
                )))
            }
        }
        Err(e) => {
            let versions = supported(&e);
            if versions.is_empty() && !is_version_error(&e) {
                return Handshake::Fail(e);
            }
            if let Some(m) = modern_in(&versions) {
                return Handshake::Modern(m.to_owned(), e);
            }
            match legacy_in(&versions) {
                Some(l) if l != offered => Handshake::Retry(l.to_owned()),
                _ => Handshake::Fail(nothing_in_common(server, &versions).with_source(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn version_error(supported: Value) -> Error {
        Error::protocol(
            UNSUPPORTED_VERSION,
            "unsupported",
            Some(json!({ "supported": supported })),
        )
    }

    #[test]
    fn discover_answers() {
        let ok = json!({"supportedVersions": ["2026-07-28"], "capabilities": {}});
        assert!(matches!(
            probe("s", Ok(ok), "2026-07-28"),
            Probe::Modern(_, v) if v == "2026-07-28"
        ));
        // No list at all: the version asked is taken.
        assert!(matches!(
            probe("s", Ok(json!({})), "2026-07-28"),
            Probe::Modern(..)
        ));
        // A version error listing a modern version (even the same one): ask again.
        assert!(matches!(
            probe("s", Err(version_error(json!(["2026-07-28"]))), "2026-07-28"),
            Probe::Retry(v, _) if v == "2026-07-28"
        ));
        // Listing only handshake versions: try initialize.
        assert!(matches!(
            probe("s", Err(version_error(json!(["2025-06-18"]))), "2026-07-28"),
            Probe::NotModern(_)
        ));
        // Listing nothing we speak: stop.
        assert!(matches!(
            probe("s", Err(version_error(json!(["2099-01-01"]))), "2026-07-28"),
            Probe::Fail(e) if e.is_unsupported()
        ));
        // Method not found, an HTTP 400, a closed stream: maybe an older server.
        for e in [
            Error::protocol(-32601, "Method not found", None),
            Error::http_status(400, "Bad Request: Server not initialized"),
            Error::closed("gone"),
        ] {
            assert!(matches!(
                probe("s", Err(e), "2026-07-28"),
                Probe::NotModern(_)
            ));
        }
        // Unreachable: initialize would fail the same way.
        assert!(matches!(
            probe("s", Err(Error::transport("refused")), "2026-07-28"),
            Probe::Fail(_)
        ));
    }

    #[test]
    fn initialize_answers() {
        let ok = json!({"protocolVersion": "2025-06-18", "capabilities": {}});
        assert!(matches!(
            handshake("s", Ok(ok), "2025-11-25"),
            Handshake::Legacy(_, v) if v == "2025-06-18"
        ));
        assert!(matches!(
            handshake("s", Ok(json!({"protocolVersion": "1999-01-01"})), "2025-11-25"),
            Handshake::Fail(e) if e.is_unsupported()
        ));
        // A server serving the modern era refuses the handshake and says so.
        assert!(matches!(
            handshake("s", Err(version_error(json!(["2026-07-28"]))), "2025-11-25"),
            Handshake::Modern(v, _) if v == "2026-07-28"
        ));
        assert!(matches!(
            handshake("s", Err(version_error(json!(["2025-03-26"]))), "2025-11-25"),
            Handshake::Retry(v) if v == "2025-03-26"
        ));
        assert!(matches!(
            handshake("s", Err(version_error(json!(["2025-11-25"]))), "2025-11-25"),
            Handshake::Fail(_)
        ));
        assert!(matches!(
            handshake("s", Err(Error::protocol(-32603, "boom", None)), "2025-11-25"),
            Handshake::Fail(e) if e.code() == Some(-32603)
        ));
    }
}

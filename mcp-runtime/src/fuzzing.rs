//! Entry points for the fuzz targets (`fuzz/`, its README): the library's own parsers
//! of what a peer sends, reached from outside the crate. Each calls the function the
//! library uses — none is a copy. Not an API: hidden, and it may change at any time.

/// `WWW-Authenticate`: the challenges, as (scheme, parameters).
#[cfg(feature = "oauth")]
pub fn www_authenticate(header: &str) -> Vec<(String, Vec<(String, String)>)> {
    crate::auth::fuzz_www_authenticate(header)
}

/// An authorization server's metadata document, read as the client reads it
/// (`issuer` checked by the caller).
#[cfg(feature = "oauth")]
pub fn as_metadata(issuer: &str, body: &[u8]) -> Result<String, String> {
    crate::auth::fuzz_as_metadata(issuer, body)
}

/// Whether a protected resource's `resource` names this server (RFC 9728 §3.3).
#[cfg(feature = "oauth")]
pub fn resource_matches(resource: &str, server: &str, at_root: bool) -> bool {
    crate::auth::fuzz_resource_matches(resource, server, at_root)
}

/// `SKILL.md`: its frontmatter split off and parsed (YAML, with the alias budget).
#[cfg(feature = "skills")]
pub fn skill_frontmatter(
    text: &str,
) -> Option<Result<serde_json::Map<String, serde_json::Value>, String>> {
    crate::skills::fuzzing_frontmatter(text)
}

/// The 2024-11-05 transport's `endpoint` event, resolved against the stream's URL:
/// the URL, and whether it is on the stream's origin.
#[cfg(feature = "http")]
pub fn endpoint(base: &str, reference: &str) -> Option<Result<(String, bool), String>> {
    crate::transport::http::fuzzing_endpoint(base, reference)
}

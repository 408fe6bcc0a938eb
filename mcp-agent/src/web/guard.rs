//! What every request goes through: who is asking (the application's extractor), the
//! same-origin and CSRF checks of a request that changes anything, and the security
//! headers of every response.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::state::Web;
use crate::agent::Principal;

/// The header a request that changes anything carries its CSRF token in.
pub(super) const CSRF_HEADER: &str = "x-csrf-token";

/// Scripts, styles and requests from the router only; no inline script, no frames,
/// no forms, no plugins.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A JSON error: `{"error": why}` with `status`.
pub(super) fn error(status: StatusCode, why: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": why.into() });
    (status, axum::Json(body)).into_response()
}

/// The CSRF token of `who` under `key`: HMAC-SHA-256 of its id, hex.
pub(super) fn csrf_token(key: &[u8; 32], who: &Principal) -> String {
    // HMAC takes a key of any length: this cannot fail.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(who.id.as_bytes());
    mcp_runtime::digest::hex(&mac.finalize().into_bytes())
}

/// Whether `given` is `want`, in time that does not depend on where they differ.
fn same_token(given: &[u8], want: &[u8]) -> bool {
    given.len() == want.len()
        && !want.is_empty()
        && given
            .iter()
            .zip(want)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Whether a request comes from a page of this origin, as far as the browser says:
/// `Sec-Fetch-Site` (when sent) is `same-origin`, and `Origin` (when sent) names the
/// host the request was sent to. A client that is not a browser sends neither (the
/// CSRF token still guards it).
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        if site.as_bytes() != b"same-origin" {
            return false;
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false; // `null`, or a scheme a page of ours is never served on
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    host.is_some_and(|h| h.eq_ignore_ascii_case(authority))
}

/// The headers every response carries.
fn secure(mut response: Response) -> Response {
    let h = response.headers_mut();
    let set = |h: &mut HeaderMap, name: &'static str, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(h, "content-security-policy", CSP);
    set(h, "x-content-type-options", "nosniff");
    set(h, "x-frame-options", "DENY");
    set(h, "referrer-policy", "no-referrer");
    set(h, "cross-origin-opener-policy", "same-origin");
    set(h, "cross-origin-resource-policy", "same-origin");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, "cache-control", "no-store");
    }
    response
}

/// The middleware: a principal or `401`; for a request that changes anything, the
/// same origin and the session's CSRF token or `403`; the security headers always.
pub(super) async fn guard(State(web): State<Web>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let who = web.options.principal.as_ref().and_then(|f| f(&parts));
    let Some(who) = who else {
        return secure(error(
            StatusCode::UNAUTHORIZED,
            "who is asking is not known: sign in to the application first",
        ));
    };
    let reads = matches!(parts.method, Method::GET | Method::HEAD);
    if !reads {
        if !same_origin(&parts.headers) {
            return secure(error(
                StatusCode::FORBIDDEN,
                "refused: the request does not come from a page of this inbox (same-origin check)",
            ));
        }
        let Some(key) = web.csrf_key.as_deref() else {
            return secure(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "refused: the server could not draw the key its CSRF tokens are made with",
            ));
        };
        let want = csrf_token(key, &who);
        let given = parts.headers.get(CSRF_HEADER).map(|v| v.as_bytes());
        if !given.is_some_and(|g| same_token(g, want.as_bytes())) {
            return secure(error(
                StatusCode::FORBIDDEN,
                "refused: missing or wrong CSRF token (fetch api/session again)",
            ));
        }
    }
    parts.extensions.insert(who);
    secure(next.run(Request::from_parts(parts, body)).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_this_origin_passes() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ])));
        for bad in [
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", "http://evil.example"),
            ][..],
            &[("host", "127.0.0.1:8080"), ("origin", "null")],
            &[("origin", "http://127.0.0.1:8080")],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
        ] {
            assert!(!same_origin(&headers(bad)), "{bad:?}");
        }
    }

    #[test]
    fn tokens_are_per_principal_and_compared_whole() {
        let key = [7u8; 32];
        let ann = csrf_token(&key, &Principal::new("ann"));
        let bob = csrf_token(&key, &Principal::new("bob"));
        assert_ne!(ann, bob);
        assert_eq!(ann.len(), 64);
        assert!(same_token(ann.as_bytes(), ann.as_bytes()));
        assert!(!same_token(bob.as_bytes(), ann.as_bytes()));
        assert!(!same_token(&ann.as_bytes()[..63], ann.as_bytes()));
        assert!(!same_token(b"", b""));
    }
}

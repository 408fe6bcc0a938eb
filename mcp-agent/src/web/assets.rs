//! The page: its HTML, script and style, compiled in and served by the router.

use axum::extract::OriginalUri;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("inbox.html");
const SCRIPT: &str = include_str!("inbox.js");
const STYLE: &str = include_str!("inbox.css");

/// The page, with the path it is served at as the base of its script, style and API
/// (mounted with `nest("/inbox", …)` it is `/inbox`, and they are `/inbox/…`).
pub(super) async fn page(OriginalUri(uri): OriginalUri) -> Response {
    let mut base = uri.path().to_owned();
    if !base.ends_with('/') {
        base.push('/');
    }
    let page = PAGE.replace("{{base}}", &attribute(&base));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// `text` for an HTML attribute value in double quotes.
fn attribute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(super) async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

pub(super) async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_base_cannot_leave_its_attribute() {
        assert_eq!(
            super::attribute("/a\"><script>&'/"),
            "/a&quot;&gt;&lt;script&gt;&amp;&#39;/"
        );
    }
}

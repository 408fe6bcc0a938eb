use super::connect::resolve;
use super::*;

#[test]
fn plain_http_only_for_loopback() {
    for ok in [
        "http://localhost:3000/mcp",
        "http://127.0.0.1/mcp",
        "http://[::1]:8080/",
        "https://example.com/mcp",
    ] {
        assert!(HttpTransport::new(HttpConfig::new(ok)).is_ok(), "{ok}");
    }
    for bad in [
        "http://example.com/mcp",
        "http://10.0.0.1/mcp",
        "ftp://example.com",
        "not a url",
    ] {
        let e = HttpTransport::new(HttpConfig::new(bad)).unwrap_err();
        assert!(e.is_config(), "{bad}: {e}");
    }
    let e = HttpTransport::new(HttpConfig::new("http://example.com/mcp")).unwrap_err();
    assert!(e.to_string().contains("https://example.com"), "{e}");
    // Userinfo is refused, and never shown.
    let e =
        HttpTransport::new(HttpConfig::new("https://user:PWSECRET@example.com/mcp")).unwrap_err();
    assert!(!e.to_string().contains("PWSECRET"), "{e}");
    // A key in the query stays out of Debug.
    let c = HttpConfig::new("https://example.com/mcp?key=QSECRET");
    assert!(!format!("{c:?}").contains("QSECRET"), "{c:?}");
}

#[test]
fn secrets_stay_out_of_debug() {
    let c = HttpConfig::new("https://example.com/mcp")
        .bearer_token("tok-123456")
        .header("X-Api-Key", "key-987654");
    let d = format!("{c:?}");
    assert!(
        !d.contains("tok-123456") && !d.contains("key-987654"),
        "{d}"
    );
    assert!(d.contains("X-Api-Key"));
}

#[test]
fn endpoint_resolution() {
    let base: Uri = "http://127.0.0.1:3001/sse".parse().unwrap();
    assert_eq!(
        resolve(&base, "/message?sessionId=1").unwrap().to_string(),
        "http://127.0.0.1:3001/message?sessionId=1"
    );
    assert_eq!(
        resolve(&base, "message?x=1").unwrap().to_string(),
        "http://127.0.0.1:3001/message?x=1"
    );
    assert_eq!(
        resolve(&base, "http://127.0.0.1:3001/m")
            .unwrap()
            .to_string(),
        "http://127.0.0.1:3001/m"
    );
}

/// A 400 to a request in a legacy session proves the request unread only in the
/// TypeScript SDK's words (JSON-RPC error -32000, no id, a null id, or — as
/// server-everything answers — the request's own id); an answer to the request's id
/// is the answer; anything else that speaks of the session proves nothing.
#[test]
fn a_400_is_read_for_what_it_proves() {
    use super::legacy::{refusal, Refusal};
    use crate::jsonrpc::Id;
    let id = Id::Number(7);
    let unread = [
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":7}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Mcp-Session-Id header is required"},"id":null}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"No valid session ID provided"},"id":null}"#,
    ];
    for body in unread {
        assert_eq!(refusal(body.as_bytes(), &id), Refusal::Unread, "{body}");
    }
    let answer = [
        // The server read this request and answered it, whatever it says.
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"Bad Request: Session expired"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"No valid session ID provided"}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{"session":"gone"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}"#,
        "Bad Request: invalid JSON",
        "",
    ];
    for body in answer {
        assert_eq!(refusal(body.as_bytes(), &id), Refusal::Answer, "{body}");
    }
    let session = [
        "Invalid or missing SESSION id",
        "Bad Request: No valid session ID provided",
        // Another request's id, a near miss of the SDK's words, another code.
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"No valid session ID provided"},"id":8}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided!"},"id":null}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32001,"message":"No valid session ID provided"},"id":null}"#,
    ];
    for body in session {
        assert_eq!(refusal(body.as_bytes(), &id), Refusal::Session, "{body}");
    }
    // Only the first kilobyte is read for the word.
    let late = [vec![b' '; 2048], b"session".to_vec()].concat();
    assert_eq!(refusal(&late, &id), Refusal::Answer);
}

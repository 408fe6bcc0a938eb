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

/// A 400 to a request in a legacy session means the session is gone only when its
/// body says so (the TypeScript SDK's words, and others'); any other 400 is the answer.
#[test]
fn a_400_is_a_lost_session_only_when_it_says_so() {
    use super::legacy::speaks_of_session;
    assert!(speaks_of_session(
        br#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#
    ));
    assert!(speaks_of_session(b"Invalid or missing SESSION id"));
    assert!(!speaks_of_session(
        br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}"#
    ));
    assert!(!speaks_of_session(b""));
    // Only the first kilobyte is read.
    let late = [vec![b' '; 2048], b"session".to_vec()].concat();
    assert!(!speaks_of_session(&late));
}

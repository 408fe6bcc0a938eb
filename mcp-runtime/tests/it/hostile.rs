//! Deliberately misbehaving servers (tests/peers/hostile.py): floods without a newline
//! on stdout and stderr, invalid UTF-8 on stderr, floods in HTTP bodies and in every
//! kind of event stream, endless streams, `retry: 0`, a server with no event stream, a
//! restarted server that refuses a new session once; servers that run a tool call and
//! then answer 400 naming the session (on every HTTP wire: the call runs once);
//! long results (held once, not as bytes and as text).
//! Every read stays bounded, the client's peak memory stays far below the flood, and
//! the next request works.

use std::time::Duration;

use mcp_runtime::{Client, Error, HttpConfig};
use serde_json::json;

use crate::support::{self, HttpServer};

/// What a 300 MB flood may cost this process at most, with the default 64 MiB limit.
const PEAK_LIMIT_MIB: u64 = 200;

fn check_too_large(e: &Error, setting: &str) {
    assert!(e.is_too_large(), "{e}");
    assert!(e.is_transport(), "{e}");
    let text = e.to_string();
    assert!(text.contains("64 MiB") && text.contains(setting), "{text}");
}

fn check_peak(what: &str) {
    let peak = support::peak_rss_mib();
    eprintln!("peak RSS after a 300 MB flood ({what}): {peak} MiB");
    assert!(
        peak < PEAK_LIMIT_MIB,
        "{what}: peak RSS {peak} MiB; the flood was held"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_without_newline_on_stdout_is_cut_at_the_limit() {
    let client = Client::builder()
        .stdio(support::hostile(&["stdio", "flood-stdout", "300"]))
        .unwrap();
    let e = client.call("flood", json!({})).await.unwrap_err();
    check_too_large(&e, "StdioConfig::max_message_size");
    check_peak("stdio stdout");
    // The connection was dropped; the next request starts the server again.
    let r = client
        .call("echo", json!({"message": "after"}))
        .await
        .unwrap();
    assert!(r.text().contains("after"), "{}", r.text());
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_limit_is_honoured_and_named() {
    let client = Client::builder()
        .stdio(support::hostile(&["stdio", "flood-stdout", "5"]).max_message_size(1 << 20))
        .unwrap();
    let e = client.call("flood", json!({})).await.unwrap_err();
    assert!(e.is_too_large() && e.to_string().contains("1 MiB"), "{e}");
}

// One thread: the captured log is this thread's.
#[tokio::test]
async fn a_flood_on_stderr_is_drained_and_bounded() {
    let (captured, _guard) = support::capture(tracing::Level::INFO);
    let transport = std::sync::Arc::new(mcp_runtime::StdioTransport::new(support::hostile(&[
        "stdio",
        "flood-stderr",
        "300",
    ])));
    let client = Client::builder().build(transport.clone()).unwrap();
    client.connect().await.unwrap();
    let pid = transport.pid().unwrap();
    // Calls work while the server floods its stderr, and after.
    for i in 0..20 {
        let r = client
            .call("echo", json!({"message": format!("m{i}")}))
            .await
            .unwrap();
        assert!(r.text().contains(&format!("m{i}")));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Wait until the flood's line ended and was logged (cut), then check memory.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !captured.text().contains("more bytes not shown") {
        assert!(
            std::time::Instant::now() < deadline,
            "the stderr flood never ended"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check_peak("stdio stderr");
    assert!(
        support::process_exists(pid),
        "the server died (its stderr broke)"
    );
    let r = client
        .call("echo", json!({"message": "end"}))
        .await
        .unwrap();
    assert!(r.text().contains("end"));
    assert_eq!(transport.pid(), Some(pid), "the server was restarted");
    client.close().await.unwrap();
}

// One thread: the captured log is this thread's.
#[tokio::test]
async fn invalid_utf8_on_stderr_does_not_stop_the_reader() {
    let (captured, _guard) = support::capture(tracing::Level::INFO);
    let transport = std::sync::Arc::new(mcp_runtime::StdioTransport::new(support::hostile(&[
        "stdio",
        "bad-utf8-stderr",
    ])));
    let client = Client::builder().build(transport.clone()).unwrap();
    client.connect().await.unwrap();
    let pid = transport.pid().unwrap();
    // The server writes invalid UTF-8 to stderr on every request, and exits the moment
    // a write to stderr fails: every call working means stderr is still being read.
    for i in 0..30 {
        let r = client
            .call("echo", json!({"message": format!("m{i}")}))
            .await
            .unwrap();
        assert!(r.text().contains(&format!("m{i}")));
    }
    assert_eq!(
        transport.pid(),
        Some(pid),
        "the server died and was restarted"
    );
    let logged = captured.text();
    assert!(
        logged.contains("(invalid utf-8)"),
        "{}",
        &logged[..logged.len().min(500)]
    );
    assert!(logged.contains('\u{fffd}'), "decoded lossily");
    client.close().await.unwrap();
}

async fn http_flood(mode: &str, what: &str) {
    let server = support::hostile_http(&[mode, "300"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let e = client.call("flood", json!({})).await.unwrap_err();
    check_too_large(&e, "HttpConfig::max_message_size");
    check_peak(what);
    // The next request works on a new connection.
    assert!(client
        .tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "flood"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_in_a_json_body_is_cut_at_the_limit() {
    http_flood("flood-json", "HTTP JSON body").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_declared_too_large_is_refused_from_its_header() {
    http_flood("flood-json-declared", "HTTP declared body").await;
    // Refused from the header: nothing of the body was held at all.
    assert!(
        support::peak_rss_mib() < 64,
        "{} MiB",
        support::peak_rss_mib()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_in_an_sse_reply_is_cut_at_the_limit() {
    http_flood("flood-sse", "SSE reply").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_event_stream_stays_bounded_and_times_out() {
    let server = support::hostile_http(&["endless-sse"]);
    let client = Client::builder()
        .timeout(Duration::from_secs(4))
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let e = client.call("flood", json!({})).await.unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(
        support::peak_rss_mib() < 100,
        "{} MiB",
        support::peak_rss_mib()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_the_get_stream_is_dropped_and_the_stream_reopened() {
    let server = support::hostile_http(&["flood-get", "300"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    client.connect().await.unwrap();
    // The client reads up to the limit, drops the stream and opens it again.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let gets: u32 = support::http_get_text(server.port, "/count")
            .parse()
            .unwrap();
        if gets >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the GET stream was never reopened"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check_peak("HTTP GET stream");
    // Requests still work meanwhile.
    client.tools().await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_the_2024_event_stream_fails_the_call() {
    let server = support::hostile_http(&["flood-2024", "300"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    assert!(client
        .tools()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == "flood"));
    let e = client.call("flood", json!({})).await.unwrap_err();
    check_too_large(&e, "HttpConfig::max_message_size");
    check_peak("HTTP+SSE 2024 stream");
}

/// `retry: 0` and a stream that ends at once: reconnections have a floor and back off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_zero_does_not_make_the_client_spin() {
    let server = support::hostile_http(&["retry-zero"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    client.connect().await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let gets: u32 = support::http_get_text(server.port, "/count")
        .parse()
        .unwrap();
    eprintln!("GET streams opened in 6 s with retry: 0: {gets}");
    // 250 ms floor doubling while nothing comes: at most 6 in 6 s (a spinning client
    // opens thousands); a slow machine only opens fewer.
    assert!((1..=8).contains(&gets), "{gets} GET requests in 6 s");
    client.close().await.unwrap();
}

/// A server that forgot the session (it restarted; 400 "No valid session ID provided",
/// as the TypeScript SDK answers) and then refused the new session (still down, 503):
/// that call fails cleanly, and the next one starts a new session rather than go out
/// with none — before, every later request went out with no session and got a 400,
/// for as long as the client lived (found by the soak run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_replacement_failed_is_replaced_by_the_next_request() {
    let server = support::hostile_http(&["restart-400"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let echo = |m: &'static str| client.call("echo", json!({ "message": m }));
    assert_eq!(echo("1").await.unwrap().text(), "echo: 1");
    // The server restarted after that call: the session is gone, and its replacement
    // is refused.
    let e = tokio::time::timeout(Duration::from_secs(60), echo("2"))
        .await
        .expect("a clean error, not a hang")
        .unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    // The server is back: the next call starts a new session and gets through.
    assert_eq!(echo("3").await.unwrap().text(), "echo: 3");
    assert_eq!(echo("4").await.unwrap().text(), "echo: 4");
    let stats: serde_json::Value =
        serde_json::from_str(&support::http_get_text(server.port, "/stats")).unwrap();
    // The first session, the refused replacement, the one that worked; the one request
    // that met the forgotten session; and never a request without one.
    assert_eq!(
        stats,
        json!({"initialize": 3, "unknown": 1, "sessionless": 0}),
        "{stats}"
    );
    client.close().await.unwrap();
}

/// What a `ran-400*` server counted: sessions started, tool calls run, requests in a
/// session it did not know.
fn ran_stats(server: &HttpServer) -> serde_json::Value {
    serde_json::from_str(&support::http_get_text(server.port, "/stats")).unwrap()
}

/// A server with sessions that runs a tool call and then answers 400 naming the
/// session, in a JSON-RPC error to the call's own id: that is the call's answer (the
/// server read it), returned as the protocol error it is. No new session, not sent
/// again: the tool ran once. Before, "session" in a 400 meant "unread": a new session
/// and the call once more — the transfer ran twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_naming_the_session_in_an_answer_to_the_call_runs_it_once() {
    let server = support::hostile_http(&["ran-400", "id"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let e = client
        .call("echo", json!({"message": "transfer"}))
        .await
        .unwrap_err();
    assert!(e.is_protocol(), "{e}");
    assert_eq!(e.code(), Some(-32000), "{e}");
    assert_eq!(e.message(), Some("Bad Request: Session expired"), "{e}");
    assert_eq!(
        ran_stats(&server),
        json!({"initialize": 1, "executed": 1, "unknown": 0})
    );
    // The session is the one it was: other requests go on in it.
    client.ping().await.unwrap();
    assert_eq!(ran_stats(&server)["initialize"], 1);
    client.close().await.unwrap();
}

/// The same server, with a 400 that names the session in plain text: nothing shows
/// the call was not run, so it is not sent again. Its error says the outcome is
/// unknown, and the next request starts in a new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_naming_the_session_in_other_words_runs_the_call_once_and_says_the_outcome_is_unknown(
) {
    let server = support::hostile_http(&["ran-400", "text"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let e = client
        .call("echo", json!({"message": "transfer"}))
        .await
        .unwrap_err();
    // Run once; a new session for the next request.
    assert_eq!(
        ran_stats(&server),
        json!({"initialize": 2, "executed": 1, "unknown": 0}),
        "{e}"
    );
    assert!(e.is_outcome_unknown(), "{e}");
    assert!(e.is_http() && e.status() == Some(400), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("Invalid or expired session") && text.contains("outcome is unknown"),
        "{text}"
    );
    client.ping().await.unwrap();
    assert_eq!(
        ran_stats(&server),
        json!({"initialize": 2, "executed": 1, "unknown": 0})
    );
    client.close().await.unwrap();
}

/// A session the server forgot, answered with a 400 that names the session in words
/// other than the TypeScript SDK's: a request that is safe to repeat (`ping`) gets a
/// new session and goes again; a tool call does not — even though this server did not
/// run it, nothing in its answer says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_request_safe_to_repeat_is_sent_again_after_a_400_that_proves_nothing() {
    let server = support::hostile_http(&["ran-400", "text"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    client.connect().await.unwrap();
    support::http_get_text(server.port, "/forget");
    client.ping().await.unwrap();
    assert_eq!(
        ran_stats(&server),
        json!({"initialize": 2, "executed": 0, "unknown": 1})
    );
    support::http_get_text(server.port, "/forget");
    let e = client
        .call("echo", json!({"message": "transfer"}))
        .await
        .unwrap_err();
    assert!(e.is_outcome_unknown(), "{e}");
    assert_eq!(
        ran_stats(&server),
        json!({"initialize": 3, "executed": 0, "unknown": 2})
    );
    client.close().await.unwrap();
}

/// A 400 whose body is a *result* to the call (saying "session expired"): the server
/// read the call and says both that it failed and how it ended. Not a success, not
/// sent again: an HTTP error whose outcome is unknown, on either Streamable HTTP wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_with_a_result_runs_the_call_once_and_says_the_outcome_is_unknown() {
    for mode in ["ran-400", "ran-400-modern"] {
        let server = support::hostile_http(&[mode, "result"]);
        let client = Client::builder()
            .http(HttpConfig::new(server.url("/mcp")))
            .unwrap();
        let e = client
            .call("echo", json!({"message": "transfer"}))
            .await
            .unwrap_err();
        assert_eq!(ran_stats(&server)["executed"], 1, "{mode}: {e}");
        assert!(e.is_outcome_unknown(), "{mode}: {e}");
        assert_eq!(e.status(), Some(400), "{mode}: {e}");
        client.close().await.unwrap();
    }
}

/// The 2026-07-28 wire (no sessions) and the 2024-11-05 HTTP+SSE transport: a server
/// that runs the call and then answers 400 naming a session gets it once, and the
/// caller its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_400_naming_the_session_runs_the_call_once_on_the_other_http_wires() {
    for (mode, shape) in [
        ("ran-400-modern", Some("id")),
        ("ran-400-modern", Some("text")),
        ("ran-400-2024", None),
    ] {
        let mut args = vec![mode];
        args.extend(shape);
        let server = support::hostile_http(&args);
        let client = Client::builder()
            .http(HttpConfig::new(server.url("/mcp")))
            .unwrap();
        let e = client
            .call("echo", json!({"message": "transfer"}))
            .await
            .unwrap_err();
        match shape {
            Some("id") => assert_eq!(e.message(), Some("Bad Request: Session expired"), "{e}"),
            _ => assert_eq!(e.status(), Some(400), "{mode}: {e}"),
        }
        assert_eq!(ran_stats(&server)["executed"], 1, "{mode} {shape:?}: {e}");
        client.close().await.unwrap();
    }
}

/// An older HTTP server without a standalone event stream (GET answers 405) cannot
/// tell the client anything between requests: `listen` says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_on_a_server_that_cannot_stream_says_so() {
    let server = support::hostile_http(&["no-get-stream"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    let e = client.listen(&[]).await.unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(e.to_string().contains("405"), "{e}");
    // Requests work all the same.
    let r = client.call("echo", json!({"message": "x"})).await.unwrap();
    assert!(r.text().contains('x'));
}

/// The same check passes where the stream exists (server-everything, legacy HTTP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_on_a_server_with_a_stream_works() {
    let server = HttpServer::everything("streamableHttp");
    // By name: `localhost` resolves to loopback here, so plain http is allowed.
    let client = Client::builder()
        .http(HttpConfig::new(format!(
            "http://localhost:{}/mcp",
            server.port
        )))
        .unwrap();
    client.listen(&[]).await.unwrap();
    client.close().await.unwrap();
}

/// The text of hostile.py's `big` result, repeated.
const BIG_UNIT: &str = "é\"\\\n😀 0123456789abcdef";

/// A 48 MiB result line (30 MiB of text once decoded) costs its bytes once, not its
/// bytes and its text at once (78 MiB): the long string is moved out of the read
/// buffer as it arrives (`mcp_runtime_core::gather`) and decoded in place, every
/// escape as the parser would. (Text with few escapes costs its own size.)
fn check_big(r: &mcp_runtime::CallToolResult, before: u64, what: &str) {
    let grown = support::peak_rss_mib() - before;
    let [mcp_runtime::Content::Text { text, .. }] = r.content.as_slice() else {
        panic!("{what}: {:?}", r.content.len())
    };
    assert!(text.len() > 28 << 20, "{what}: {} bytes", text.len());
    assert!(
        text.as_bytes()
            .chunks(BIG_UNIT.len())
            .all(|c| c == BIG_UNIT.as_bytes()),
        "{what}: the text decodes to BIG_UNIT repeated"
    );
    eprintln!("{what}: peak RSS grew {grown} MiB for a 48 MiB line");
    assert!(
        grown < 60,
        "{what}: peak RSS grew {grown} MiB: the line was held"
    );
    // Positive control: the line's bytes held beside the text trip the same check.
    let line = std::hint::black_box(vec![1u8; 48 << 20]);
    let held = support::peak_rss_mib() - before;
    assert!(held >= 60, "{what}: {held} MiB with the line held");
    drop(line);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_result_over_stdio_is_held_once() {
    let client = Client::builder()
        .stdio(support::hostile(&["stdio", "big-stdout", "48"]))
        .unwrap();
    client.connect().await.unwrap();
    let before = support::peak_rss_mib();
    let r = client.call("big", json!({})).await.unwrap();
    check_big(&r, before, "stdio");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_result_in_a_json_body_is_held_once() {
    let server = support::hostile_http(&["big-json", "48"]);
    let client = Client::builder()
        .http(HttpConfig::new(server.url("/mcp")))
        .unwrap();
    client.connect().await.unwrap();
    let before = support::peak_rss_mib();
    let r = client.call("big", json!({})).await.unwrap();
    check_big(&r, before, "HTTP");
}

/// A result's `structuredContent` is checked against the tool's `outputSchema` once the
/// session knows the tool: a match, a mismatch naming the path and the rule, and a
/// missing structured result are told apart; a declared server's typed call reads no
/// output that does not match.
#[tokio::test]
async fn structured_output_is_checked_against_the_output_schema() {
    use mcp_runtime::model::OutputCheck;
    let client = Client::builder()
        .build(std::sync::Arc::new(mcp_runtime::StdioTransport::new(
            support::hostile(&["stdio", "schemas"]),
        )))
        .unwrap();
    // Before any list, the session does not know the tool's schema: not checked.
    let r = client.call("sum_bad", json!({})).await.unwrap();
    assert_eq!(r.output_check, OutputCheck::Unchecked);
    client.tools().await.unwrap();
    let r = client.call("sum_ok", json!({})).await.unwrap();
    assert_eq!(r.output_check, OutputCheck::Matched);
    let r = client.call("sum_bad", json!({})).await.unwrap();
    match &r.output_check {
        OutputCheck::Mismatch { reason, rules } => {
            assert!(
                reason.contains("at /sum") && reason.contains("`type`"),
                "{reason}"
            );
            assert!(
                reason.contains("three"),
                "the reason quotes the value: {reason}"
            );
            assert_eq!(rules, "at /sum (`type`)", "the rules do not");
        }
        other => panic!("{other:?}"),
    }
    assert!(r.output_check.is_mismatch());
    let r = client.call("sum_none", json!({})).await.unwrap();
    match &r.output_check {
        OutputCheck::Mismatch { reason, .. } => {
            assert!(reason.contains("no structuredContent"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // A tool without an outputSchema is not checked.
    let r = client.call("echo", json!({"message": "x"})).await.unwrap();
    assert_eq!(r.output_check, OutputCheck::Unchecked);
    client.close().await.unwrap();

    // The typed call of a declared server: the same check; a mismatch is not read.
    let mcp = mcp_runtime::Mcp::builder("hostile")
        .command(support::hostile_argv(&["stdio", "schemas"]))
        .build()
        .unwrap();
    let ok: mcp_runtime::Typed<serde_json::Value> =
        mcp.call_typed("sum_ok", &json!({})).await.unwrap();
    assert_eq!(ok.output, Some(json!({"sum": 3})));
    assert_eq!(ok.result.output_check, OutputCheck::Matched);
    let bad: mcp_runtime::Typed<serde_json::Value> =
        mcp.call_typed("sum_bad", &json!({})).await.unwrap();
    assert!(bad.result.output_check.is_mismatch());
    assert_eq!(
        bad.output, None,
        "a structured result that does not match is not read"
    );
    mcp.close().await.unwrap();
}

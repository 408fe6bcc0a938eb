//! The project's PyPI `mcp` 2.3.0 server over stdio, in both eras: 2026-07-28 (the
//! probe finds it) and legacy (the client is told to use the handshake).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_runtime::{
    client::Era, client::ProtocolMode, input::InputKind, input::InputKinds, model::CompletionRef,
    model::LogLevel, Client, ClientBuilder, InputRequest, InputResponse,
};
use serde_json::json;

use crate::support::{self, Recording};

fn builder(era: Era) -> ClientBuilder {
    let b = Client::builder().name("py");
    match era {
        Era::Modern => b.protocol(ProtocolMode::Auto),
        Era::Legacy => b.protocol(ProtocolMode::Legacy),
    }
}

fn answering(era: Era, answer: InputResponse) -> (Client, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let c = builder(era)
        .input_handler(move |req: InputRequest| {
            a.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            async move {
                assert_eq!(req.message, "What is your name?");
                assert!(matches!(req.kind, InputKind::Form { .. }));
                answer
            }
        })
        .stdio(support::pyserver())
        .unwrap();
    (c, asked)
}

async fn tools_prompts_resources(era: Era) {
    let (rec, log, _) = Recording::new(support::pyserver());
    let c = builder(era).build(rec).unwrap();
    let d = c.connect().await.unwrap();
    assert_eq!(d.era, era);
    match era {
        Era::Modern => assert_eq!(d.protocol_version, "2026-07-28"),
        Era::Legacy => assert_eq!(d.protocol_version, "2025-11-25"),
    }
    assert_eq!(d.info.name, "pyserver");
    assert_eq!(
        c.instructions().await.unwrap().as_deref(),
        Some("Test peer for the Rust MCP client.")
    );

    let tools = c.tools().await.unwrap();
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert!(add.output_schema.is_some());
    let r = c.call("echo", json!({"message": "hi"})).await.unwrap();
    assert_eq!(r.text(), "Echo: hi");
    let r = c.call("add", json!({"a": 1.5, "b": 2})).await.unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 3.5})));
    let r = c.call("fail", json!({})).await.unwrap();
    assert!(r.is_error());
    assert!(r.text().contains("always fails"));

    let p = c.prompt("greet", [("name", "Ann")]).await.unwrap();
    assert!(
        matches!(&p.messages[0].content, mcp_runtime::Content::Text { text, .. } if text.contains("Ann"))
    );
    let read = c.resource("py://readme").await.unwrap();
    assert!(read.contents[0]
        .text
        .as_deref()
        .unwrap()
        .contains("pyserver readme"));
    let templates = c.resource_templates().await.unwrap();
    assert!(templates
        .iter()
        .any(|t| t.uri_template == "py://items/{id}"));
    let read = c.resource("py://items/42").await.unwrap();
    assert_eq!(read.contents[0].text.as_deref(), Some("item 42"));

    // Every modern request carries the 2026-07-28 envelope; legacy ones do not.
    let log = log.lock().unwrap();
    for r in log.requests.iter().filter(|r| r.method != "initialize") {
        let meta = r.params.get("_meta");
        match era {
            Era::Modern => {
                let meta = meta.unwrap_or_else(|| panic!("{} without _meta", r.method));
                assert_eq!(
                    meta["io.modelcontextprotocol/protocolVersion"],
                    "2026-07-28"
                );
                assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
                assert_eq!(
                    meta["io.modelcontextprotocol/clientInfo"]["name"],
                    "mcp-runtime"
                );
            }
            Era::Legacy => assert!(meta
                .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
                .is_none()),
        }
    }
    drop(log);
    c.close().await.unwrap();
}

#[tokio::test]
async fn modern_tools_prompts_resources() {
    tools_prompts_resources(Era::Modern).await;
}

#[tokio::test]
async fn legacy_tools_prompts_resources() {
    tools_prompts_resources(Era::Legacy).await;
}

async fn elicitation_round(era: Era) {
    let (c, asked) = answering(era, InputResponse::accept(json!({"name": "Ann"})));
    let r = c.call("ask_name", json!({})).await.unwrap();
    assert_eq!(r.text(), "Hello, Ann");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    c.close().await.unwrap();

    let (c, _) = answering(era, InputResponse::Decline);
    assert_eq!(
        c.call("ask_name", json!({})).await.unwrap().text(),
        "declined"
    );
    c.close().await.unwrap();
    let (c, _) = answering(era, InputResponse::Cancel);
    assert_eq!(
        c.call("ask_name", json!({})).await.unwrap().text(),
        "cancelled"
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn modern_elicitation_round_trip() {
    elicitation_round(Era::Modern).await;
}

#[tokio::test]
async fn legacy_elicitation_round_trip() {
    elicitation_round(Era::Legacy).await;
}

#[tokio::test]
async fn modern_input_required_retry_echoes_request_state_on_a_new_id() {
    let (rec, log, _) = Recording::new(support::pyserver());
    let c = Client::builder()
        .input_handler(|_req: InputRequest| async { InputResponse::accept(json!({"name": "Bo"})) })
        .build(rec)
        .unwrap();
    let r = c.call("ask_name", json!({})).await.unwrap();
    assert_eq!(r.text(), "Hello, Bo");
    let log = log.lock().unwrap();
    let calls: Vec<_> = log
        .requests
        .iter()
        .filter(|r| r.method == "tools/call")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].id, calls[1].id, "the retry has a new id");
    assert!(calls[0].params.get("requestState").is_none());
    let state = calls[1].params["requestState"].as_str().unwrap();
    assert!(state.starts_with("v1."), "{state}");
    let responses = calls[1].params["inputResponses"].as_object().unwrap();
    let (_, answer) = responses.iter().next().unwrap();
    assert_eq!(
        answer,
        &json!({"action": "accept", "content": {"name": "Bo"}})
    );
    assert_eq!(calls[1].params["name"], "ask_name");
    drop(log);
    c.close().await.unwrap();
}

async fn no_input_never_waits(era: Era) {
    // No handler: no elicitation capability; the server says so at once.
    // A client that waited for an answer nobody gives would end in its request
    // timeout (an `is_timeout()` error), not in the server's -32021: the error's code
    // is the proof, with no clock that a slow start of the server could beat.
    let c = builder(era).stdio(support::pyserver()).unwrap();
    let e = c.call("ask_name", json!({})).await.unwrap_err();
    assert!(e.is_protocol() && !e.is_timeout(), "{e}");
    assert_eq!(e.code(), Some(-32021), "{e}");
    c.close().await.unwrap();

    // A handler, but input requests switched off: the same.
    let c = builder(era)
        .input_handler(|_r: InputRequest| async { panic!("must not be asked") })
        .input_requests(InputKinds::NONE)
        .stdio(support::pyserver())
        .unwrap();
    let e = c.call("ask_name", json!({})).await.unwrap_err();
    assert_eq!(e.code(), Some(-32021), "{e}");
    c.close().await.unwrap();
}

#[tokio::test]
async fn modern_without_input_never_waits() {
    no_input_never_waits(Era::Modern).await;
}

#[tokio::test]
async fn legacy_without_input_never_waits() {
    no_input_never_waits(Era::Legacy).await;
}

async fn progress(era: Era) {
    let c = builder(era).stdio(support::pyserver()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let r = c
        .call("slow", json!({"seconds": 0.4, "steps": 4}))
        .on_progress(move |p| {
            s.lock()
                .unwrap()
                .push((p.progress, p.total, p.message.clone()))
        })
        .await
        .unwrap();
    assert_eq!(r.text(), "done");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[3], (4.0, Some(4.0), Some("step 4/4".to_owned())));
    c.close().await.unwrap();
}

#[tokio::test]
async fn modern_progress() {
    progress(Era::Modern).await;
}

#[tokio::test]
async fn legacy_progress() {
    progress(Era::Legacy).await;
}

async fn server_logs_reach_tracing(era: Era) {
    let (captured, _guard) = support::capture(tracing::Level::DEBUG);
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    let c = builder(era)
        .log_level(LogLevel::Warning)
        .after_log(move |m| h.lock().unwrap().push(m.clone()))
        .stdio(support::pyserver())
        .unwrap();
    let r = c
        .call("log", json!({"message": "disk almost full"}))
        .await
        .unwrap();
    assert_eq!(r.text(), "logged");
    c.close().await.unwrap();
    // `after_log` hears each message, as sent.
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].level, Some(LogLevel::Warning));
    assert_eq!(heard[0].logger.as_deref(), Some("pyserver"));
    assert_eq!(heard[0].data, json!("disk almost full"));
    let out = captured.text();
    let line = out
        .lines()
        .find(|l| l.contains("disk almost full"))
        .unwrap_or_else(|| panic!("no server log line in:\n{out}"));
    assert!(
        line.contains("WARN") && line.contains("mcp_runtime::server_log"),
        "{line}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn modern_server_logs_reach_tracing() {
    server_logs_reach_tracing(Era::Modern).await;
}

#[tokio::test(flavor = "current_thread")]
async fn legacy_server_logs_reach_tracing() {
    server_logs_reach_tracing(Era::Legacy).await;
}

async fn pagination_blob_completion(era: Era) {
    let (rec, log, _) = Recording::new(support::pyserver());
    let c = builder(era).build(rec).unwrap();
    let resources = c.resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris.len(), 28, "{uris:?}");
    assert_eq!(uris[0], "py://readme");
    assert_eq!(uris[26], "py://gen/24");
    // The second page's cursor is the empty string: it is sent back, not taken as the end.
    let cursors: Vec<Option<serde_json::Value>> = log
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.method == "resources/list")
        .map(|r| r.params.get("cursor").cloned())
        .collect();
    assert_eq!(cursors, [None, Some(json!("")), Some(json!("p3"))]);

    let blob = c.resource("py://blob").await.unwrap();
    assert_eq!(
        blob.contents[0].mime_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(
        blob.contents[0].blob_bytes().unwrap(),
        (0..=255u8).collect::<Vec<_>>()
    );
    let generated = c.resource("py://gen/7").await.unwrap();
    assert_eq!(generated.contents[0].text.as_deref(), Some("generated 7"));
    let missing = c.resource("py://gen/99").await.unwrap_err();
    assert!(missing.is_protocol() && missing.is_not_found(), "{missing}");

    let names = c
        .complete(CompletionRef::Prompt("greet".into()), "name", "A", &[])
        .await
        .unwrap();
    assert_eq!(names.values, ["Ann", "Alice"]);
    assert_eq!(names.total, Some(2));
    c.close().await.unwrap();
}

#[tokio::test]
async fn modern_pagination_blob_completion() {
    pagination_blob_completion(Era::Modern).await;
}

#[tokio::test]
async fn legacy_pagination_blob_completion() {
    pagination_blob_completion(Era::Legacy).await;
}

#[tokio::test]
async fn modern_tool_list_is_cached_for_its_ttl() {
    let (rec, log, _) = Recording::new(support::pyserver());
    let c = Client::builder().build(rec).unwrap();
    let first = c.tools().await.unwrap();
    let second = c.tools().await.unwrap();
    assert_eq!(first, second);
    let lists = |log: &Mutex<support::Log>| {
        log.lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.method == "tools/list")
            .count()
    };
    assert_eq!(
        lists(&log),
        1,
        "ttlMs 60000: the second list comes from the cache"
    );
    // Other lists have ttlMs 0 and are fetched every time.
    c.prompts().await.unwrap();
    c.prompts().await.unwrap();
    let prompts = log
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.method == "prompts/list")
        .count();
    assert_eq!(prompts, 2);
    // Closing forgets the cache.
    c.close().await.unwrap();
    c.tools().await.unwrap();
    assert_eq!(lists(&log), 2);
    c.close().await.unwrap();
}

#[tokio::test]
async fn legacy_list_changed_refreshes_tools() {
    let changes = Arc::new(Mutex::new(Vec::new()));
    let ch = changes.clone();
    let c = builder(Era::Legacy)
        .after_change(move |change| ch.lock().unwrap().push(change.clone()))
        .stdio(support::pyserver())
        .unwrap();
    let before = c.tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name == "extra_tool"));
    c.call("add_tool", json!({})).await.unwrap();
    // The notification arrives before the call's result.
    assert_eq!(
        changes.lock().unwrap().as_slice(),
        [mcp_runtime::Change::Tools]
    );
    let after = c.tools().await.unwrap();
    assert!(after.iter().any(|t| t.name == "extra_tool"));
    assert_eq!(
        c.call("extra_tool", json!({})).await.unwrap().text(),
        "extra"
    );
    c.close().await.unwrap();
}

async fn timeout_and_cancel(era: Era) {
    let (rec, log, _) = Recording::new(support::pyserver());
    let c = builder(era).build(rec).unwrap();
    c.connect().await.unwrap();
    let start = Instant::now();
    let e = c
        .call("sleep_forever", json!({}))
        .timeout(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(e.is_timeout() && !e.is_protocol(), "{e}");
    assert!(start.elapsed() < Duration::from_secs(3));
    let token = mcp_runtime::CancellationToken::new();
    let t = token.clone();
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call("sleep_forever", json!({})).cancel_on(t).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    token.cancel();
    assert!(call.await.unwrap().unwrap_err().is_cancelled());
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Both the timeout and the cancel told the server to stop.
    let cancels = log.lock().unwrap().cancels.len();
    assert_eq!(cancels, 2);
    // The session carries on.
    assert_eq!(
        c.call("echo", json!({"message": "on"}))
            .await
            .unwrap()
            .text(),
        "Echo: on"
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn modern_timeout_and_cancel() {
    timeout_and_cancel(Era::Modern).await;
}

#[tokio::test]
async fn legacy_timeout_and_cancel() {
    timeout_and_cancel(Era::Legacy).await;
}

#[tokio::test]
async fn ten_megabyte_messages_pass_both_ways() {
    let c = Client::builder().stdio(support::pyserver()).unwrap();
    let big: String = "x".repeat(10 * 1024 * 1024);
    let r = c
        .call("echo", json!({"message": big}))
        .timeout(Duration::from_secs(60))
        .await
        .unwrap();
    let text = r.text();
    assert_eq!(text.len(), 10 * 1024 * 1024 + "Echo: ".len());
    assert!(text.starts_with("Echo: xxx") && text.ends_with("xxx"));
    // And the connection is fine afterwards.
    assert_eq!(
        c.call("echo", json!({"message": "small"}))
            .await
            .unwrap()
            .text(),
        "Echo: small"
    );
    c.close().await.unwrap();
}

async fn wait_for(changes: &Mutex<Vec<mcp_runtime::Change>>, want: &mcp_runtime::Change) {
    // Long enough for a new server process to start on a busy machine: only a change
    // that never comes reaches it.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !changes.lock().unwrap().contains(want) {
        assert!(
            Instant::now() < deadline,
            "no {want:?} in {:?}",
            changes.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn modern_listen_hears_list_changes_and_reopens_after_a_restart() {
    let changes = Arc::new(Mutex::new(Vec::new()));
    let ch = changes.clone();
    let (rec, log, _) = Recording::new(support::pyserver());
    let c = Client::builder()
        .after_change(move |change| ch.lock().unwrap().push(change.clone()))
        .build(rec)
        .unwrap();
    let before = c.tools().await.unwrap();
    c.listen(&["py://readme"]).await.unwrap();
    let listen = log
        .lock()
        .unwrap()
        .requests
        .iter()
        .find(|r| r.method == "subscriptions/listen")
        .cloned()
        .expect("a listen request");
    assert_eq!(listen.params["notifications"]["toolsListChanged"], true);
    assert_eq!(
        listen.params["notifications"]["resourceSubscriptions"],
        json!(["py://readme"])
    );

    c.call("add_tool", json!({})).await.unwrap();
    wait_for(&changes, &mcp_runtime::Change::Tools).await;
    let after = c.tools().await.unwrap();
    assert_eq!(after.len(), before.len() + 1, "the cached list was dropped");

    // The server dies; the listener reopens the stream on a new process, and then
    // reports everything it listens to as changed.
    changes.lock().unwrap().clear();
    let _ = c.call("crash", json!({})).await;
    wait_for(
        &changes,
        &mcp_runtime::Change::Resource("py://readme".into()),
    )
    .await;
    let listens = log
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.method == "subscriptions/listen")
        .count();
    assert_eq!(listens, 2);
    c.close().await.unwrap();
}

#[tokio::test]
async fn legacy_listen_refuses_resources_the_server_cannot_watch() {
    let c = builder(Era::Legacy).stdio(support::pyserver()).unwrap();
    let e = c.listen(&["py://readme"]).await.unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("py://readme"),
        "{e}"
    );
    // List changes need no listener with older servers.
    c.listen(&[]).await.unwrap();
    c.close().await.unwrap();
}

//! server-everything over stdio: a legacy-era (2025-11-25) server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_runtime::{
    client::Era, input::InputKind, model::CompletionRef, CancellationToken, Client, Content,
    InputResponse,
};
use serde_json::json;

use crate::support::{self, Recording};

fn client() -> Client {
    Client::builder().stdio(support::everything()).unwrap()
}

#[tokio::test]
async fn negotiates_legacy_era_after_probe() {
    let (rec, log, _) = Recording::new(support::everything());
    let c = Client::builder().name("everything").build(rec).unwrap();
    let d = c.connect().await.unwrap();
    assert_eq!(d.era, Era::Legacy);
    assert_eq!(d.protocol_version, "2025-11-25");
    assert_eq!(d.info.name, "mcp-servers/everything");
    assert!(d.instructions.as_deref().is_some_and(|i| !i.is_empty()));
    assert!(d.capabilities.tools() && d.capabilities.completions());
    let log = log.lock().unwrap();
    let methods: Vec<&str> = log.requests.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["server/discover", "initialize"]);
    // The probe carries the 2026-07-28 envelope.
    let meta = &log.requests[0].params["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
    assert_eq!(log.requests[1].params["protocolVersion"], "2025-11-25");
    assert_eq!(log.notifications[0].method, "notifications/initialized");
    drop(log);
    c.close().await.unwrap();
}

#[tokio::test]
async fn tools_list_and_call() {
    let c = client();
    let tools = c.tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for want in [
        "echo",
        "get-sum",
        "get-structured-content",
        "trigger-long-running-operation",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // Schemas stay as the server wrote them, unknown keys included.
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(
        echo.input_schema["$schema"],
        "http://json-schema.org/draft-07/schema#"
    );
    assert!(
        echo.extra.contains_key("execution"),
        "unknown fields are kept"
    );

    let r = c.call("echo", json!({"message": "hi"})).await.unwrap();
    assert!(!r.is_error());
    assert_eq!(r.text(), "Echo: hi");

    let r = c.call("get-sum", json!({"a": 1, "b": 2})).await.unwrap();
    assert_eq!(r.text(), "The sum of 1 and 2 is 3.");

    let r = c
        .call("get-structured-content", json!({"location": "New York"}))
        .await
        .unwrap();
    let s = r.structured_content.expect("structuredContent");
    assert!(s["temperature"].is_number(), "{s}");

    let r = c.call("get-tiny-image", json!({})).await.unwrap();
    assert!(r
        .content
        .iter()
        .any(|b| matches!(b, Content::Image { mime_type, .. } if mime_type == "image/png")));

    // A protocol error (unknown tool) is an Err, distinguishable from a tool failure.
    let e = c.call("no-such-tool", json!({})).await;
    match e {
        Err(e) => assert!(e.is_protocol(), "{e}"),
        Ok(r) => assert!(r.is_error(), "unknown tool must fail one way or the other"),
    }
    c.close().await.unwrap();
}

#[tokio::test]
async fn pipelines_many_requests_on_one_connection() {
    let c = client();
    c.connect().await.unwrap();
    let calls = (0..50).map(|i| {
        let c = c.clone();
        async move {
            let r = c
                .call("echo", json!({"message": format!("m{i}")}))
                .await
                .unwrap();
            assert_eq!(r.text(), format!("Echo: m{i}"));
        }
    });
    let start = Instant::now();
    // Five one-second operations at once finish together, not one after the other.
    let slow = (0..5).map(|_| {
        let c = c.clone();
        async move {
            c.call(
                "trigger-long-running-operation",
                json!({"duration": 1, "steps": 1}),
            )
            .await
            .unwrap();
        }
    });
    tokio::join!(
        futures_join_all(calls.collect()),
        futures_join_all(slow.collect())
    );
    assert!(
        start.elapsed() < Duration::from_millis(4500),
        "requests were not pipelined: {:?}",
        start.elapsed()
    );
    c.close().await.unwrap();
}

async fn futures_join_all<F: std::future::Future<Output = ()> + Send + 'static>(futs: Vec<F>) {
    let handles: Vec<_> = futs.into_iter().map(tokio::spawn).collect();
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test]
async fn prompts_resources_templates_completion() {
    let c = client();
    let prompts = c.prompts().await.unwrap();
    assert!(prompts.iter().any(|p| p.name == "simple-prompt"));
    let args = prompts.iter().find(|p| p.name == "args-prompt").unwrap();
    assert!(args
        .arguments
        .iter()
        .any(|a| a.name == "city" && a.required));

    let p = c.prompt("args-prompt", [("city", "Lisbon")]).await.unwrap();
    assert!(!p.messages.is_empty());
    assert!(
        matches!(&p.messages[0].content, Content::Text { text, .. } if text.contains("Lisbon"))
    );

    let resources = c.resources().await.unwrap();
    assert!(resources.len() >= 7, "{}", resources.len());
    let doc = &resources[0];
    let read = c.resource(&doc.uri).await.unwrap();
    assert!(read.contents[0]
        .text
        .as_deref()
        .is_some_and(|t| !t.is_empty()));

    let templates = c.resource_templates().await.unwrap();
    let blob = templates
        .iter()
        .find(|t| t.uri_template.contains("/blob/"))
        .expect("blob template");
    let uri = blob.uri_template.replace("{resourceId}", "3");
    let read = c.resource(&uri).await.unwrap();
    let bytes = read.contents[0].blob_bytes().expect("a base64 blob");
    assert!(!bytes.is_empty());

    let done = c
        .complete(
            CompletionRef::Prompt("completable-prompt".into()),
            "department",
            "E",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(done.values, ["Engineering"]);
    let names = c
        .complete(
            CompletionRef::Prompt("completable-prompt".into()),
            "name",
            "",
            &[("department", "Engineering")],
        )
        .await
        .unwrap();
    assert!(
        names.values.iter().any(|v| v == "Alice"),
        "{:?}",
        names.values
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn progress_reaches_the_call_and_resets_its_timeout() {
    let c = client();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    // 2s of work in 5 steps with a 1s timeout: progress keeps the call alive.
    let r = c
        .call(
            "trigger-long-running-operation",
            json!({"duration": 2, "steps": 5}),
        )
        .timeout(Duration::from_millis(1000))
        .on_progress(move |p| s.lock().unwrap().push((p.progress, p.total)))
        .await
        .unwrap();
    assert!(r.text().contains("completed"), "{}", r.text());
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 4, "{seen:?}");
    assert_eq!(seen.last().unwrap().1, Some(5.0));

    // The hard maximum holds whatever the progress.
    let e = c
        .call(
            "trigger-long-running-operation",
            json!({"duration": 3, "steps": 10}),
        )
        .timeout(Duration::from_millis(1000))
        .max_timeout(Duration::from_millis(1200))
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");

    // Without progress the plain timeout applies.
    let start = Instant::now();
    let e = c
        .call(
            "trigger-long-running-operation",
            json!({"duration": 5, "steps": 1}),
        )
        .timeout(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(start.elapsed() < Duration::from_secs(2));
    // The connection is still good.
    assert_eq!(
        c.call("echo", json!({"message": "x"}))
            .await
            .unwrap()
            .text(),
        "Echo: x"
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn cancellation_sends_notifications_cancelled() {
    let (rec, log, _) = Recording::new(support::everything());
    let c = Client::builder().build(rec).unwrap();
    c.connect().await.unwrap();

    // Explicit cancel.
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        t.cancel();
    });
    let e = c
        .call(
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
        )
        .cancel_on(token)
        .await
        .unwrap_err();
    assert!(e.is_cancelled(), "{e}");

    // Dropping the future cancels too.
    let dropped = tokio::time::timeout(
        Duration::from_millis(200),
        c.call(
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
        )
        .into_future(),
    )
    .await;
    assert!(dropped.is_err());
    // The cancel is sent from a task; give it a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let log_now = log.lock().unwrap();
    let calls: Vec<_> = log_now
        .requests
        .iter()
        .filter(|r| r.method == "tools/call")
        .map(|r| r.id.clone())
        .collect();
    assert_eq!(log_now.cancels.len(), 2, "{:?}", log_now.cancels);
    for (cancel, id) in log_now.cancels.iter().zip(&calls) {
        assert_eq!(cancel.method, "notifications/cancelled");
        assert_eq!(
            cancel.params.as_ref().unwrap()["requestId"],
            serde_json::to_value(id).unwrap()
        );
    }
    drop(log_now);
    assert_eq!(
        c.call("echo", json!({"message": "after"}))
            .await
            .unwrap()
            .text(),
        "Echo: after"
    );
    c.close().await.unwrap();
}

use std::future::IntoFuture;

#[tokio::test]
async fn legacy_elicitation_goes_to_the_input_handler() {
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let c = Client::builder()
        .name("everything")
        .input_handler(move |req: mcp_runtime::InputRequest| {
            a.fetch_add(1, Ordering::SeqCst);
            async move {
                assert_eq!(req.server, "everything");
                match &req.kind {
                    InputKind::Form { schema } => InputResponse::accept(support::fill_form(schema)),
                    _ => InputResponse::Decline,
                }
            }
        })
        .stdio(support::everything())
        .unwrap();
    let tools = c.tools().await.unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t.name == "trigger-elicitation-request"),
        "declaring elicitation makes the server offer its elicitation tool"
    );
    let r = c
        .call("trigger-elicitation-request", json!({}))
        .await
        .unwrap();
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(
        r.text().contains("User provided the requested information"),
        "{}",
        r.text()
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn list_changed_invalidates_and_notifies() {
    let changes = Arc::new(Mutex::new(Vec::new()));
    let ch = changes.clone();
    let c = Client::builder()
        .after_change(move |change| ch.lock().unwrap().push(change.clone()))
        .stdio(support::everything())
        .unwrap();
    c.connect().await.unwrap();
    c.tools().await.unwrap();
    // server-everything announces its tool list right after the handshake.
    let deadline = Instant::now() + Duration::from_secs(5);
    while changes.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(changes
        .lock()
        .unwrap()
        .contains(&mcp_runtime::Change::Tools));
    c.close().await.unwrap();
}

#[tokio::test]
async fn url_elicitation_and_input_kinds() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let c = Client::builder()
        .input_handler(move |req: mcp_runtime::InputRequest| {
            s.lock().unwrap().push(req.kind.clone());
            async { InputResponse::accept(json!({})) }
        })
        .stdio(support::everything())
        .unwrap();
    let r = c
        .call(
            "trigger-url-elicitation",
            json!({"url": "https://example.com/consent", "message": "Please consent", "elicitationId": "e-1"}),
        )
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [InputKind::Url {
            url: "https://example.com/consent".into(),
            elicitation_id: Some("e-1".into())
        }]
    );
    c.close().await.unwrap();

    // Forms only: the URL tool is not even offered (no url capability declared).
    let c = Client::builder()
        .input_handler(|_req: mcp_runtime::InputRequest| async { InputResponse::Decline })
        .input_requests(mcp_runtime::input::InputKinds::FORM)
        .stdio(support::everything())
        .unwrap();
    let tools = c.tools().await.unwrap();
    assert!(tools
        .iter()
        .any(|t| t.name == "trigger-elicitation-request"));
    assert!(!tools.iter().any(|t| t.name == "trigger-url-elicitation"));
    c.close().await.unwrap();
}

#[tokio::test]
async fn legacy_listen_subscribes_to_resources() {
    let changes = Arc::new(Mutex::new(Vec::new()));
    let ch = changes.clone();
    let c = Client::builder()
        .after_change(move |change| ch.lock().unwrap().push(change.clone()))
        .stdio(support::everything())
        .unwrap();
    let uri = "demo://resource/static/document/architecture.md";
    c.listen(&[uri]).await.unwrap();
    c.call("toggle-subscriber-updates", json!({}))
        .await
        .unwrap();
    let want = mcp_runtime::Change::Resource(uri.into());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !changes.lock().unwrap().contains(&want) {
        assert!(
            Instant::now() < deadline,
            "no update for {uri}: {:?}",
            changes.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.close().await.unwrap();
}

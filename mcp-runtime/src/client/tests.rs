//! Protocol paths no real peer shows on demand (version retries, silent probes,
//! endless input rounds, unknown result types), driven through a scripted
//! transport. Everything else is tested against real servers in `tests/it`.
use super::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::Result;
use crate::input::{InputRequest, InputResponse};
use crate::jsonrpc::{Id, Notification, Request, Response};
use crate::model::Tool;
use crate::protocol::{meta, Era};
use crate::testing::{discover_ok, scripted, scripted_log, Scripted, Step};
use crate::transport::{BoxFuture, RequestContext, Transport};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn unsupported_version_is_retried_with_a_listed_version() {
    let (c, seen) = scripted(Client::builder(), |r, n| match (r.method.as_str(), n) {
        ("server/discover", 0) => Step::Fail(
            -32022,
            json!({"supported": ["2026-07-28"], "requested": "x"}),
        ),
        ("server/discover", _) => Step::Reply(discover_ok()),
        _ => Step::Reply(json!({"tools": []})),
    });
    let d = c.connect().await.unwrap();
    assert_eq!(d.era, Era::Modern);
    assert_eq!(d.info.version, "9");
    let seen = lock(&seen);
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0].id, seen[1].id);
    assert_eq!(seen[1].params["_meta"][meta::VERSION], "2026-07-28");
}

#[tokio::test]
async fn a_version_error_never_falls_back_to_initialize() {
    let (c, seen) = scripted(Client::builder(), |_, _| {
        Step::Fail(-32022, json!({"supported": ["2099-01-01"]}))
    });
    let e = c.connect().await.unwrap_err();
    assert!(e.is_unsupported(), "{e}");
    assert!(lock(&seen).iter().all(|r| r.method == "server/discover"));
}

/// The transport's log as plain strings.
fn logged(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    lock(log).clone()
}

/// A server that never answers `server/discover`: once the connect timeout passes,
/// the server is restarted and asked `initialize` alone (it never reads both), and
/// later connects ask `initialize` first.
#[tokio::test(start_paused = true)]
async fn a_silent_probe_restarts_the_server_and_sends_initialize_alone() {
    let (c, (_, log)) = scripted_log(
        Client::builder().connect_timeout(Duration::from_secs(5)),
        |r, _| match r.method.as_str() {
            "server/discover" => Step::Hang,
            "initialize" => {
                Step::Reply(json!({"protocolVersion": "2024-11-05", "capabilities": {},
                                               "serverInfo": {"name": "old", "version": "1"}}))
            }
            _ => Step::Reply(json!({})),
        },
    );
    let d = c.connect().await.unwrap();
    assert_eq!(
        (d.era, d.protocol_version.as_str()),
        (Era::Legacy, "2024-11-05")
    );
    assert_eq!(logged(&log), ["server/discover", "close", "initialize"]);
    // The next connection (the process restarted) skips the probe it would ignore.
    c.close().await.unwrap();
    lock(&log).clear();
    assert_eq!(c.connect().await.unwrap().era, Era::Legacy);
    assert_eq!(logged(&log), ["initialize"]);
}

/// A server that answers nothing: a timeout naming the setting and both requests,
/// and the connection closed so the next connect starts afresh.
#[tokio::test(start_paused = true)]
async fn a_server_that_answers_nothing_fails_with_a_clear_timeout() {
    let (c, (_, log)) = scripted_log(Client::builder(), |_, _| Step::Hang);
    let e = c.connect().await.unwrap_err();
    let text = e.to_string();
    assert!(
        e.is_timeout()
            && text.contains("server/discover")
            && text.contains("initialize")
            && text.contains("ClientBuilder::connect_timeout"),
        "{text}"
    );
    assert_eq!(
        logged(&log),
        ["server/discover", "close", "initialize", "close"]
    );
}

fn legacy_ok() -> Value {
    json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "old", "version": "1"}})
}

fn late(ms: u64, step: Step) -> Step {
    Step::Late(Duration::from_millis(ms), Box::new(step))
}

/// A dual-era server that is slow to start (30 s): the client waits for its answer
/// to `server/discover` and sends nothing else meanwhile. The session is modern.
#[tokio::test(start_paused = true)]
async fn a_slow_modern_server_is_not_taken_for_an_old_one() {
    let (c, (_, log)) = scripted_log(Client::builder(), |r, _| match r.method.as_str() {
        "server/discover" => late(30_000, Step::Reply(discover_ok())),
        "initialize" => Step::Reply(legacy_ok()),
        _ => Step::Reply(json!({})),
    });
    let d = c.connect().await.unwrap();
    assert_eq!(d.era, Era::Modern);
    assert_eq!(logged(&log), ["server/discover"]);
}

/// `initialize` refused with a version error listing 2026-07-28 means modern: the
/// session asks `server/discover` again at that version.
#[tokio::test(start_paused = true)]
async fn initialize_refused_for_a_modern_version_means_modern() {
    // The first probe is never answered: restart, initialize (refused), discover.
    let (c, (_, log)) = scripted_log(
        Client::builder().connect_timeout(Duration::from_secs(5)),
        |r, n| match (r.method.as_str(), n) {
            ("server/discover", 0) => Step::Hang,
            ("server/discover", _) => Step::Reply(discover_ok()),
            ("initialize", _) => Step::Fail(-32022, json!({"supported": ["2026-07-28"]})),
            _ => Step::Reply(json!({})),
        },
    );
    assert_eq!(c.connect().await.unwrap().era, Era::Modern);
    assert_eq!(
        logged(&log),
        ["server/discover", "close", "initialize", "server/discover"]
    );
    // The first probe refused late (a server not ready yet), then the same.
    let (c, (_, log)) = scripted_log(Client::builder(), |r, n| match (r.method.as_str(), n) {
        ("server/discover", 0) => late(20_000, Step::Fail(-32601, json!(null))),
        ("server/discover", _) => Step::Reply(discover_ok()),
        ("initialize", _) => Step::Fail(-32022, json!({"supported": ["2026-07-28"]})),
        _ => Step::Reply(json!({})),
    });
    assert_eq!(c.connect().await.unwrap().era, Era::Modern);
    assert_eq!(
        logged(&log),
        ["server/discover", "initialize", "server/discover"]
    );
}

/// A slow server of the handshake era: discover is refused late, and only then is
/// initialize sent.
#[tokio::test(start_paused = true)]
async fn a_slow_old_server_is_old() {
    let (c, (_, log)) = scripted_log(Client::builder(), |r, _| match r.method.as_str() {
        "server/discover" => late(30_000, Step::Fail(-32601, json!(null))),
        "initialize" => late(1_000, Step::Reply(legacy_ok())),
        _ => Step::Reply(json!({})),
    });
    let d = c.connect().await.unwrap();
    assert_eq!(
        (d.era, d.protocol_version.as_str()),
        (Era::Legacy, "2025-11-25")
    );
    assert_eq!(logged(&log), ["server/discover", "initialize"]);
}

/// Forced modern waits like any request: no probe clock.
#[tokio::test(start_paused = true)]
async fn forced_modern_waits_for_a_slow_server() {
    let (c, seen) = scripted(
        Client::builder().protocol(ProtocolMode::Modern),
        |r, _| match r.method.as_str() {
            "server/discover" => late(40_000, Step::Reply(discover_ok())),
            _ => Step::Reply(json!({})),
        },
    );
    assert_eq!(c.connect().await.unwrap().era, Era::Modern);
    assert_eq!(lock(&seen).len(), 1);
    // Past the ordinary timeout it is a timeout that names the setting to raise.
    let (c, _) = scripted(
        Client::builder()
            .protocol(ProtocolMode::Modern)
            .timeout(Duration::from_secs(10)),
        |_, _| Step::Hang,
    );
    let e = c.connect().await.unwrap_err();
    assert!(
        e.is_timeout() && e.to_string().contains("ClientBuilder::connect_timeout"),
        "{e}"
    );
}

/// Where the transport answers every request (HTTP), there is no probe clock at all.
#[tokio::test(start_paused = true)]
async fn no_probe_clock_where_every_request_is_answered() {
    struct Answering(Scripted);
    impl Transport for Answering {
        fn request(&self, r: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
            self.0.request(r, cx)
        }
        fn notify<'a>(&'a self, n: Notification, v: &'a str) -> BoxFuture<'a, Result<()>> {
            self.0.notify(n, v)
        }
        fn cancel<'a>(&'a self, n: Notification, v: &'a str) -> BoxFuture<'a, Result<()>> {
            self.0.cancel(n, v)
        }
        fn close(&self) -> BoxFuture<'_, Result<()>> {
            self.0.close()
        }
        fn answers_every_request(&self) -> bool {
            true
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let t = Answering(Scripted {
        script: Box::new(|r: &Request, _| match r.method.as_str() {
            "server/discover" => late(45_000, Step::Reply(discover_ok())),
            _ => Step::Reply(legacy_ok()),
        }),
        seen: seen.clone(),
        log: Arc::default(),
        mirrors: false,
        headers: Arc::default(),
        answers_every: true,
    });
    let c = Client::builder().build(t).unwrap();
    assert_eq!(c.connect().await.unwrap().era, Era::Modern);
    assert_eq!(lock(&seen).len(), 1, "no initialize was sent");
}

/// Forced legacy against a server that only speaks 2026-07-28: an error that says
/// which setting to change.
#[tokio::test]
async fn forced_legacy_against_a_modern_only_server_says_what_to_do() {
    let (c, _) = scripted(Client::builder().protocol(ProtocolMode::Legacy), |_, _| {
        Step::Fail(-32022, json!({"supported": ["2026-07-28"]}))
    });
    let e = c.connect().await.unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("ProtocolMode::Auto"),
        "{e}"
    );
}

#[tokio::test]
async fn an_unknown_handshake_version_is_refused() {
    let (c, _) = scripted(Client::builder().protocol(ProtocolMode::Legacy), |_, _| {
        Step::Reply(json!({"protocolVersion": "1999-01-01", "capabilities": {}}))
    });
    let e = c.connect().await.unwrap_err();
    assert!(
        e.is_unsupported() && e.to_string().contains("1999-01-01"),
        "{e}"
    );
}

#[tokio::test]
async fn result_types() {
    let (c, _) = scripted(Client::builder(), |r, _| match r.method.as_str() {
        "server/discover" => Step::Reply(discover_ok()),
        "tools/call" if r.params["name"] == "weird" => {
            Step::Reply(json!({"resultType": "task", "content": []}))
        }
        "tools/call" => {
            Step::Reply(json!({"content": [{"type": "text", "text": "no resultType"}]}))
        }
        _ => Step::Reply(json!({})),
    });
    let e = c.call("weird", json!({})).await.unwrap_err();
    assert!(
        e.is_invalid_response() && e.to_string().contains("task"),
        "{e}"
    );
    assert_eq!(
        c.call("plain", json!({})).await.unwrap().text(),
        "no resultType"
    );
}

#[tokio::test]
async fn input_rounds_are_bounded_and_state_only_retries_at_once() {
    let (c, seen) = scripted(
        Client::builder()
            .max_input_rounds(3)
            .input_handler(|_r: InputRequest| async { InputResponse::Cancel }),
        |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            "tools/call" if r.params["name"] == "shed" => match r.params.get("requestState") {
                None => {
                    Step::Reply(json!({"resultType": "input_required", "requestState": "s\u{e9}1"}))
                }
                Some(_) => Step::Reply(json!({"resultType": "complete", "content": []})),
            },
            _ => Step::Reply(json!({"resultType": "input_required",
                "inputRequests": {"a": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object"}}}},
                "requestState": "again"})),
        },
    );
    let e = c.call("loop", json!({})).await.unwrap_err();
    assert!(
        e.is_invalid_response() && e.to_string().contains("3 rounds"),
        "{e}"
    );
    let calls = lock(&seen)
        .iter()
        .filter(|r| r.method == "tools/call")
        .count();
    assert_eq!(calls, 4, "the first request and 3 retries");
    lock(&seen).clear();
    c.call("shed", json!({})).await.unwrap();
    let seen = lock(&seen);
    assert_eq!(seen[1].params["requestState"], "s\u{e9}1");
    assert!(seen[1].params.get("inputResponses").is_none());
}

#[tokio::test]
async fn tasks_are_polled_answered_and_finished() {
    let polls = Arc::new(Mutex::new(0));
    let p = polls.clone();
    let (c, seen) = scripted(
        Client::builder()
            .extension("io.modelcontextprotocol/tasks", json!({}))
            .input_handler(|_r: InputRequest| async { InputResponse::accept(json!({"ok": true})) }),
        move |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            "tools/call" => Step::Reply(
                json!({"resultType": "task", "taskId": "t1", "status": "working", "pollIntervalMs": 5}),
            ),
            "tasks/get" => {
                let mut n = lock(&p);
                *n += 1;
                Step::Reply(match *n {
                    1 => json!({"resultType": "complete", "taskId": "t1", "status": "working"}),
                    2 | 3 => {
                        json!({"resultType": "complete", "taskId": "t1", "status": "input_required",
                        "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {"type": "object"}}}}})
                    }
                    _ => {
                        json!({"resultType": "complete", "taskId": "t1", "status": "completed",
                        "result": {"content": [{"type": "text", "text": "done"}]}})
                    }
                })
            }
            _ => Step::Reply(json!({"resultType": "complete"})),
        },
    );
    let r = c.call("long", json!({})).await.unwrap();
    assert_eq!(r.text(), "done");
    let seen = lock(&seen);
    let updates: Vec<&Request> = seen.iter().filter(|r| r.method == "tasks/update").collect();
    assert_eq!(updates.len(), 1, "each input request is answered once");
    assert_eq!(
        updates[0].params["inputResponses"]["confirm"]["action"],
        "accept"
    );
    assert_eq!(updates[0].params["taskId"], "t1");
}

#[tokio::test]
async fn a_failed_task_is_an_error_and_a_cancelled_wait_cancels_the_task() {
    let (c, _) = scripted(
        Client::builder().extension("io.modelcontextprotocol/tasks", json!({})),
        |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            "tools/call" => Step::Reply(
                json!({"resultType": "task", "taskId": "t2", "status": "working", "pollIntervalMs": 5}),
            ),
            "tasks/get" => Step::Reply(
                json!({"taskId": "t2", "status": "failed", "error": {"code": -32000, "message": "disk full"}}),
            ),
            _ => Step::Reply(json!({})),
        },
    );
    let e = c.call("x", json!({})).await.unwrap_err();
    assert!(e.is_protocol() && e.message() == Some("disk full"), "{e}");

    let (c, seen) = scripted(
        Client::builder().extension("io.modelcontextprotocol/tasks", json!({})),
        |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            "tools/call" => Step::Reply(
                json!({"resultType": "task", "taskId": "t3", "status": "working", "pollIntervalMs": 5}),
            ),
            "tasks/get" => Step::Reply(json!({"taskId": "t3", "status": "working"})),
            _ => Step::Reply(json!({})),
        },
    );
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        t.cancel();
    });
    let e = c.call("x", json!({})).cancel_on(token).await.unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(lock(&seen)
        .iter()
        .any(|r| r.method == "tasks/cancel" && r.params["taskId"] == "t3"));

    // Without the extension declared, a task answer is invalid.
    let (c, _) = scripted(Client::builder(), |r, _| match r.method.as_str() {
        "server/discover" => Step::Reply(discover_ok()),
        _ => Step::Reply(json!({"resultType": "task", "taskId": "t4"})),
    });
    assert!(c
        .call("x", json!({}))
        .await
        .unwrap_err()
        .is_invalid_response());
}

#[tokio::test]
async fn server_requests_without_handlers_get_errors() {
    let (c, _) = scripted(
        Client::builder().roots(vec![crate::input::Root {
            uri: "file:///p".into(),
            name: None,
        }]),
        |_, _| Step::Reply(json!({})),
    );
    let inbox = c.inner.incoming.clone();
    let ask = |method: &str| {
        inbox.request(Request {
            id: Id::Number(1),
            method: method.into(),
            params: json!({}),
        })
    };
    assert_eq!(ask("ping").await.outcome, Ok(json!({})));
    assert_eq!(
        ask("roots/list").await.outcome,
        Ok(json!({"roots": [{"uri": "file:///p"}]}))
    );
    assert_eq!(
        ask("sampling/createMessage")
            .await
            .outcome
            .unwrap_err()
            .code,
        -32601
    );
    assert_eq!(
        ask("elicitation/create").await.outcome.unwrap_err().code,
        -32601
    );
    assert_eq!(ask("nope/nope").await.outcome.unwrap_err().code, -32601);
}

/// Every page is fetched (following `nextCursor`), and the list is served from the
/// cache while the server's `ttlMs` allows.
#[tokio::test]
async fn lists_follow_every_page_and_are_cached_for_their_ttl() {
    let (c, seen) = scripted(Client::builder(), |r, _| match r.method.as_str() {
        "server/discover" => Step::Reply(discover_ok()),
        "tools/list" => match r.params.get("cursor").and_then(Value::as_str) {
            None => Step::Reply(json!({"resultType": "complete", "ttlMs": 60_000,
                "tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "p2"})),
            Some("p2") => Step::Reply(json!({"resultType": "complete", "ttlMs": 60_000,
                "tools": [{"name": "b", "inputSchema": {"type": "object"}}]})),
            Some(other) => Step::Fail(-32602, json!({"cursor": other})),
        },
        _ => Step::Reply(json!({})),
    });
    let names = |tools: Vec<Tool>| tools.into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(c.tools().await.unwrap()), ["a", "b"]);
    assert_eq!(names(c.tools().await.unwrap()), ["a", "b"]);
    let lists = lock(&seen)
        .iter()
        .filter(|r| r.method == "tools/list")
        .count();
    assert_eq!(
        lists, 2,
        "two pages once; the second listing came from the cache"
    );
}

/// Input left to the caller carries what the server sent, unanswered; what a person
/// cannot answer (a sampling request) is an error when read, not a panic or a wait.
#[tokio::test]
async fn paused_input_is_returned_unanswered_and_checked_when_read() {
    let (c, seen) = scripted(
        Client::builder().input_handler(|_r: InputRequest| async { panic!("must not be asked") }),
        |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            _ => Step::Reply(json!({"resultType": "input_required", "requestState": "s1",
                "inputRequests": {
                    "form": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object"}}},
                    "llm": {"method": "sampling/createMessage", "params": {}}}})),
        },
    );
    let outcome = c.call("t", json!({})).pause_on_input().await.unwrap();
    let pending = outcome.needs_input().unwrap();
    assert_eq!(pending.keys().collect::<Vec<_>>(), ["form", "llm"]);
    assert!(pending.task_id().is_none());
    let bad = pending.requests().unwrap_err();
    assert!(
        bad.is_invalid_response() && bad.to_string().contains("llm"),
        "{bad}"
    );
    // The request declared elicitation although pausing, and was sent once.
    let seen = lock(&seen);
    let calls: Vec<_> = seen.iter().filter(|r| r.method == "tools/call").collect();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].params["_meta"][meta::CLIENT_CAPABILITIES]["elicitation"]["form"].is_object());
}

/// The wire of a call, for each path that once listed the tools in the middle of a
/// call: a call sends exactly one `tools/call` and no `tools/list`; what it needs
/// comes from the tool index filled by the last list, or it fails saying to list.
///
/// 2026-07-28 over a transport that mirrors arguments into headers: a call on a fresh
/// session goes out at once, with no tool list first; the server, which wanted a
/// header mirror the session could not know of, answers `-32020` before running
/// anything, and the call fails saying to list the tools — it is not sent again.
/// After a list, the call mirrors the argument.
#[tokio::test]
async fn a_header_mismatch_fails_saying_to_list_the_tools_and_never_lists() {
    let (c, log, headers) = crate::testing::scripted_mirroring(Client::builder(), |r, n| {
        match (r.method.as_str(), n) {
            ("server/discover", _) => Step::Reply(discover_ok()),
            ("tools/call", 1) => Step::Fail(-32020, json!({"missing": ["Mcp-Param-Region"]})),
            ("tools/list", _) => Step::Reply(json!({"tools": [{
                "name": "query",
                "inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"}}}
            }]})),
            ("tools/call", _) => Step::Reply(json!({"content": [{"type": "text", "text": "ok"}]})),
            _ => Step::Fail(-32601, Value::Null),
        }
    });
    let e = c.call("query", json!({"region": "eu"})).await.unwrap_err();
    assert!(e.is_protocol() && e.code() == Some(-32020), "{e}");
    assert!(e.to_string().contains("list the tools"), "{e}");
    assert_eq!(logged(&log), ["server/discover", "tools/call"]);
    let region = ("Mcp-Param-Region".to_owned(), "eu".to_owned());
    assert!(
        !lock(&headers)[1].contains(&region),
        "the call knew nothing"
    );
    c.tools().await.unwrap();
    let r = c.call("query", json!({"region": "eu"})).await.unwrap();
    assert_eq!(r.text(), "ok");
    assert_eq!(
        logged(&log),
        ["server/discover", "tools/call", "tools/list", "tools/call"]
    );
    assert!(
        lock(&headers)[3].contains(&region),
        "the index knows the tool now"
    );
}

/// 2025-11-25, a server that runs tools as tasks: a tool the tool index does not
/// know goes out as one plain `tools/call` (no list first); the server refuses a
/// task-only tool (`-32601`), and the error says to list the tools. After a list,
/// the call starts it as a task.
#[tokio::test]
async fn a_task_only_tool_the_index_does_not_know_is_refused_saying_to_list() {
    let builder = Client::builder().protocol(ProtocolMode::Legacy);
    let (c, (seen, log)) = scripted_log(builder, |r, _| match r.method.as_str() {
        "initialize" => Step::Reply(json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "old", "version": "1"}})),
        "tools/list" => Step::Reply(json!({"tools": [{"name": "research",
            "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]})),
        "tools/call" if r.params.get("task").is_none() => Step::Fail(-32601, Value::Null),
        "tools/call" => Step::Reply(json!({"content": [{"type": "text", "text": "ran"}]})),
        _ => Step::Reply(json!({})),
    });
    let calls =
        |log: &Arc<Mutex<Vec<String>>>, m: &str| logged(log).iter().filter(|l| *l == m).count();
    let e = c.call("research", json!({})).await.unwrap_err();
    assert!(e.is_protocol() && e.code() == Some(-32601), "{e}");
    assert!(e.to_string().contains("list the tools"), "{e}");
    assert_eq!(
        (calls(&log, "tools/call"), calls(&log, "tools/list")),
        (1, 0)
    );
    c.tools().await.unwrap();
    let r = c.call("research", json!({})).await.unwrap();
    assert_eq!(r.text(), "ran");
    assert_eq!(
        (calls(&log, "tools/call"), calls(&log, "tools/list")),
        (2, 1)
    );
    let last = lock(&seen).last().map(|r| r.params.clone());
    assert!(
        last.is_some_and(|p| p.get("task").is_some()),
        "started as a task"
    );
}

/// MCP Apps declared, nothing known of the tools yet: the call sends one
/// `tools/call` and no `tools/list`, and its result names no UI resource; after a
/// list, it does.
#[tokio::test]
async fn an_apps_call_on_an_empty_index_never_lists() {
    let builder = Client::builder().extension(
        "io.modelcontextprotocol/ui",
        json!({"mimeTypes": [crate::model::MCP_APP_MIME_TYPE]}),
    );
    let (c, (_, log)) = scripted_log(builder, |r, _| match r.method.as_str() {
        "server/discover" => Step::Reply(discover_ok()),
        "tools/list" => Step::Reply(json!({"tools": [{"name": "chart",
            "inputSchema": {"type": "object"},
            "_meta": {"ui": {"resourceUri": "ui://charts/view.html"}}}]})),
        "tools/call" => Step::Reply(json!({"content": [{"type": "text", "text": "ok"}]})),
        _ => Step::Fail(-32601, Value::Null),
    });
    let r = c.call("chart", json!({})).await.unwrap();
    assert_eq!(
        r.ui_resource, None,
        "the index knew nothing, and nothing was listed"
    );
    assert_eq!(logged(&log), ["server/discover", "tools/call"]);
    c.tools().await.unwrap();
    let r = c.call("chart", json!({})).await.unwrap();
    assert_eq!(r.ui_resource.as_deref(), Some("ui://charts/view.html"));
    assert_eq!(
        logged(&log),
        ["server/discover", "tools/call", "tools/list", "tools/call"]
    );
}

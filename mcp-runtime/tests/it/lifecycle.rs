//! Process lifecycle: lazy start, close, drop, crash and restart, no leftovers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_runtime::{Client, StdioTransport};
use serde_json::json;

use crate::support;

async fn wait_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !support::process_exists(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn starts_lazily_and_close_stops_the_whole_process_group() {
    let transport = Arc::new(StdioTransport::new(support::everything()));
    let c = Client::builder().build(transport.clone()).unwrap();
    assert_eq!(
        transport.pid(),
        None,
        "nothing starts before the first request"
    );
    c.tools().await.unwrap();
    let pid = transport.pid().expect("running");
    assert!(support::process_exists(pid));
    c.close().await.unwrap();
    assert!(
        support::group_members(pid).is_empty(),
        "close leaves nothing behind"
    );
    assert!(
        !support::process_exists(pid),
        "and the process was reaped (no zombie)"
    );
    // The next request starts it again.
    c.tools().await.unwrap();
    let pid2 = transport.pid().expect("running again");
    assert_ne!(pid, pid2);
    c.close().await.unwrap();
}

#[tokio::test]
async fn dropping_the_client_without_close_kills_the_server() {
    let transport = Arc::new(StdioTransport::new(support::everything()));
    let c = Client::builder().build(transport.clone()).unwrap();
    c.connect().await.unwrap();
    let pid = transport.pid().unwrap();
    drop(c);
    drop(transport);
    assert!(wait_gone(pid).await, "server {pid} outlived its client");
    assert!(support::group_members(pid).is_empty());
}

#[tokio::test]
async fn two_hundred_connect_close_cycles_leave_no_process() {
    let before = support::my_children();
    // Ten clients at a time, twenty rounds: each connects (a real handshake), then closes.
    for _round in 0..20 {
        let mut pids = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let transport = Arc::new(StdioTransport::new(support::everything()));
            let c = Client::builder().build(transport.clone()).unwrap();
            tasks.push(tokio::spawn(async move {
                c.connect().await.unwrap();
                let pid = transport.pid().unwrap();
                c.close().await.unwrap();
                pid
            }));
        }
        for t in tasks {
            pids.push(t.await.unwrap());
        }
        for pid in pids {
            assert!(
                support::group_members(pid).is_empty(),
                "group {pid} left behind"
            );
        }
    }
    let after = support::my_children();
    assert!(
        after.len() <= before.len(),
        "child processes left: before {before:?}, after {after:?}"
    );
}

#[tokio::test]
async fn a_crash_fails_calls_in_flight_fast_and_the_next_request_restarts() {
    let transport = Arc::new(StdioTransport::new(support::pyserver()));
    let c = Client::builder().build(transport.clone()).unwrap();
    c.connect().await.unwrap();
    let pid = transport.pid().unwrap();

    let slow = {
        let c = c.clone();
        tokio::spawn(async move { c.call("slow", json!({"seconds": 20, "steps": 2})).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    let crash = c.call("crash", json!({})).await.unwrap_err();
    assert!(crash.is_closed(), "{crash}");
    let in_flight = slow.await.unwrap().unwrap_err();
    assert!(in_flight.is_closed(), "{in_flight}");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "in-flight calls took {:?} to fail",
        start.elapsed()
    );
    assert!(in_flight.to_string().contains("exited"), "{in_flight}");
    assert!(wait_gone(pid).await);

    // The next request starts a new process and a new session.
    let r = c.call("echo", json!({"message": "again"})).await.unwrap();
    assert_eq!(r.text(), "Echo: again");
    assert_ne!(transport.pid(), Some(pid));
    c.close().await.unwrap();
}

#[tokio::test]
async fn close_escalates_for_a_server_that_ignores_stdin_and_sigterm() {
    // A server that answers the handshake, then ignores end of input and SIGTERM.
    const STUBBORN: &str = r#"
import json, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": "2025-11-25",
              "capabilities": {}, "serverInfo": {"name": "stubborn", "version": "1"}}}), flush=True)
    elif "id" in msg:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
while True:
    time.sleep(1)
"#;
    let transport = Arc::new(StdioTransport::new(
        mcp_runtime::StdioConfig::new("python3")
            .args(["-c", STUBBORN])
            .close_grace(Duration::from_millis(300)),
    ));
    let c = Client::builder().build(transport.clone()).unwrap();
    c.connect().await.unwrap();
    let pid = transport.pid().unwrap();
    let start = Instant::now();
    c.close().await.unwrap();
    // stdin closed + 300 ms, SIGTERM ignored + 300 ms, then SIGKILL.
    assert!(
        start.elapsed() >= Duration::from_millis(550),
        "{:?}",
        start.elapsed()
    );
    assert!(
        !support::process_exists(pid),
        "SIGKILL ends it and it is reaped"
    );
}

/// A stdio server that ends by itself: the error carries the last lines it wrote to
/// stderr (`server_stderr`), escaped, and its `Display` — what applications log and
/// store — does not.
#[tokio::test]
async fn a_server_that_ends_by_itself_leaves_its_last_stderr_lines_on_the_error() {
    let script = "echo 'token=canary-not-for-logs' >&2; printf 'boom \\033[2J\\n' >&2; exit 3";
    let c = Client::builder()
        .stdio(mcp_runtime::StdioConfig::from_argv(["sh", "-c", script]).unwrap())
        .unwrap();
    let e = c.tools().await.unwrap_err();
    assert!(e.is_closed(), "{e}");
    let tail = e
        .server_stderr()
        .unwrap_or_else(|| panic!("no stderr on {e}"));
    assert_eq!(
        tail, "token=canary-not-for-logs\nboom \\u{1b}[2J",
        "{tail:?}"
    );
    assert!(e.to_string().contains("exit status: 3"), "{e}");
    assert!(!e.to_string().contains("canary"), "{e}");
}

//! What ends with a run or an agent, through the path a user takes: a function tool
//! still running when its run is dropped is aborted with it; `close()` stops every
//! attached server even after one fails to stop, and names each that failed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_agent::runtime::Mcp;
use mcp_agent::{Agent, ChatCompletions, FunctionTool, Outcome};
use mcp_runtime::jsonrpc::{ErrorObject, Notification, Request, Response};
use mcp_runtime::transport::RequestContext;
use mcp_runtime::{BoxFuture, StdioConfig, StdioTransport, Transport};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use super::{peers, scratch, ModelServer};

/// Generous: only a broken build waits this long.
const PATIENCE: Duration = Duration::from_secs(60);

/// Says when the future that holds it is dropped (finished or aborted).
struct DropSignal(mpsc::UnboundedSender<()>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// A function tool still running when the future driving `agent.run()` is dropped (a
/// timeout, a `select!`, an aborted task: how a run in progress is cancelled) is
/// aborted with it: a guard inside the tool's future reports it dropped, and the tool
/// never gets past what it waits on. With one call (awaited by the run itself) and two
/// (run together). The positive control: in a run that is not dropped, the same reader
/// sees the guard dropped once the tool is released and finishes; before the abort, it
/// sees nothing (the tool still waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_tool_stops_when_its_run_is_dropped() {
    for calls in [1usize, 2] {
        let dir = scratch(&format!("dropped-run-{calls}"));
        let turn = json!({"tool_calls": vec![json!({"name": "wait", "arguments": {}}); calls]});
        // The control's run, then the dropped one (which never asks again).
        let model = ModelServer::scripted(&dir, json!([turn, {"text": "done"}, turn]));
        let (started_tx, mut started) = mpsc::unbounded_channel::<()>();
        let (dropped_tx, mut dropped) = mpsc::unbounded_channel::<()>();
        let release = Arc::new(Notify::new());
        let finished = Arc::new(AtomicUsize::new(0));
        let tool = {
            let (release, finished) = (release.clone(), finished.clone());
            FunctionTool::with_schema(
                "wait",
                "Waits until released",
                json!({"type": "object"}),
                move |_: Value| {
                    let (started, dropped) = (started_tx.clone(), dropped_tx.clone());
                    let (release, finished) = (release.clone(), finished.clone());
                    async move {
                        let _guard = DropSignal(dropped);
                        // Registered before the start is announced: no release is lost.
                        let released = release.notified();
                        tokio::pin!(released);
                        released.as_mut().enable();
                        let _ = started.send(());
                        released.await;
                        finished.fetch_add(1, Ordering::SeqCst);
                        Ok(json!("released"))
                    }
                },
            )
        };
        let agent = Agent::builder()
            .model(ChatCompletions::new(model.url(), "m").unwrap())
            .tool(tool)
            .allow(["wait"])
            .build()
            .unwrap();

        // The control: released, the tools finish and the reader sees their guards go.
        let run = tokio::spawn({
            let agent = agent.clone();
            async move { agent.run("wait").await }
        });
        for _ in 0..calls {
            tokio::time::timeout(PATIENCE, started.recv())
                .await
                .unwrap();
        }
        release.notify_waiters();
        for _ in 0..calls {
            tokio::time::timeout(PATIENCE, dropped.recv())
                .await
                .expect("the reader sees a finished tool's guard dropped");
        }
        let outcome = run.await.unwrap().unwrap();
        assert!(
            matches!(&outcome, Outcome::Finished { text, .. } if text == "done"),
            "{outcome:?}"
        );
        assert_eq!(finished.load(Ordering::SeqCst), calls);

        // The run dropped while its tools wait: they are aborted.
        let run = tokio::spawn({
            let agent = agent.clone();
            async move { agent.run("wait again").await }
        });
        for _ in 0..calls {
            tokio::time::timeout(PATIENCE, started.recv())
                .await
                .unwrap();
        }
        assert!(dropped.try_recv().is_err(), "the tools still wait");
        run.abort();
        assert!(run.await.unwrap_err().is_cancelled());
        for n in 0..calls {
            tokio::time::timeout(PATIENCE, dropped.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!("{calls} calls: function tool {n} still runs after its run was dropped")
                });
        }
        // Released now, nothing is left to go on.
        release.notify_waiters();
        assert_eq!(finished.load(Ordering::SeqCst), calls, "only the control's");
        agent.close().await.unwrap();
    }
}

/// An in-process server (2026-07-28, no tools) whose connection fails to close.
struct Unclosable;

impl Transport for Unclosable {
    fn request(
        &self,
        request: Request,
        _cx: RequestContext,
    ) -> BoxFuture<'_, mcp_runtime::Result<Response>> {
        let outcome = match request.method.as_str() {
            "server/discover" => Ok(json!({
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "unclosable", "version": "1.0.0"}}
            })),
            "tools/list" => Ok(json!({"resultType": "complete", "tools": []})),
            _ => Err(ErrorObject::new(-32601, "method not found")),
        };
        Box::pin(async move {
            Ok(Response {
                outcome,
                id: request.id,
            })
        })
    }
    fn notify<'a>(
        &'a self,
        _n: Notification,
        _version: &'a str,
    ) -> BoxFuture<'a, mcp_runtime::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn cancel<'a>(
        &'a self,
        _n: Notification,
        _version: &'a str,
    ) -> BoxFuture<'a, mcp_runtime::Result<()>> {
        Box::pin(async { Ok(()) })
    }
    fn close(&self) -> BoxFuture<'_, mcp_runtime::Result<()>> {
        Box::pin(async { Err(mcp_runtime::Error::transport("the tunnel would not close")) })
    }
}

fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// `close()` stops every attached server: one that fails to stop (first) does not keep
/// the real filesystem server attached after it running — its process is gone (reaped)
/// when `close()` returns — and the error names each server that failed (two), not the
/// one that stopped. The positive control: before `close()` the reader sees the
/// server's process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_stops_every_server_and_names_each_that_failed() {
    let dir = scratch("close-every-server");
    let model = ModelServer::scripted(&dir, json!([{"text": "hello"}]));
    let bin = peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    let fs = Arc::new(StdioTransport::new(
        StdioConfig::new(bin.display().to_string()).arg(dir.display().to_string()),
    ));
    let unclosable = |name: &str| {
        Mcp::builder(name)
            .transport(|| Ok(Unclosable))
            .build()
            .unwrap()
    };
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .server(unclosable("tunnel"))
        .server(
            Mcp::builder("fs")
                .transport({
                    let fs = fs.clone();
                    move || Ok(fs.clone())
                })
                .build()
                .unwrap(),
        )
        .server(unclosable("relay"))
        .build()
        .unwrap();
    // A run lists every server's tools: all three are connected.
    let outcome = agent.run("hi").await.unwrap();
    assert!(matches!(outcome, Outcome::Finished { .. }), "{outcome:?}");
    let pid = fs.pid().expect("the filesystem server runs");
    assert!(process_exists(pid), "the reader sees the server's process");

    let e = agent.close().await.unwrap_err();
    let text = e.to_string();
    assert!(
        !process_exists(pid),
        "the filesystem server {pid} outlived close(): {text}"
    );
    assert!(e.is_mcp(), "{e}");
    for failed in ["`tunnel`", "`relay`"] {
        assert!(text.contains(failed), "{failed} is not named: {text}");
    }
    assert_eq!(
        text.matches("the tunnel would not close").count(),
        2,
        "{text}"
    );
    assert!(!text.contains("`fs`"), "{text}");
}

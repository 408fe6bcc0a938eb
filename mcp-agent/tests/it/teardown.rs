//! What ends with a run or an agent, through the path a user takes: a function tool
//! still running when its run is dropped is aborted with it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_agent::{Agent, ChatCompletions, FunctionTool, Outcome};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};

use super::{scratch, ModelServer};

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


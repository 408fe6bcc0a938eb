//! Runs you can watch: a started run's events in this process (stored ones numbered,
//! the model's streamed text live, the outcome), and a watcher in another process
//! that follows a run from its start, disconnects mid-run and reconnects with the
//! last number it saw — every event exactly once, in order — on SQLite and
//! PostgreSQL. A store whose event does not read is an error for the watcher.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use mcp_agent::{MemoryRunStore, RunEvent, RunOptions, RunRecord};
use tokio::io::AsyncBufReadExt as _;

use super::*;

/// Generous: a busy machine is slow, never wrong.
const DEADLINE: Duration = Duration::from_secs(180);

fn agent_with(dir: &Path, model: &ModelServer, store: Arc<dyn RunStore>) -> Agent {
    Agent::builder()
        .model(
            ChatCompletions::new(model.url(), "fake-model")
                .unwrap()
                .streaming(true),
        )
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .server(filesystem(dir))
        .store(store)
        .build()
        .unwrap()
}

/// Every item of `events` until it ends (within the deadline).
async fn all(mut events: mcp_agent::RunEvents) -> Vec<mcp_agent::Result<RunEvent>> {
    let mut out = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(item) = events.next().await {
            out.push(item);
        }
    })
    .await
    .expect("the stream ends");
    out
}

/// A started run returns at once with its id; its events come as they happen —
/// the stored ones numbered 1, 2, 3, … with the run's owner, the model's streamed
/// text live (never stored) — and end with the run; its outcome is the run's. A
/// watch of the finished run gives the same stored events, from any number on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_run_is_watched_as_it_goes() {
    let dir = scratch("watch-started");
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"text": "the file says alpha"}
        ]),
    );
    let agent = agent_with(&dir, &model, Arc::new(MemoryRunStore::default()));
    let options = RunOptions::new().tenant("acme").started_by("ann");
    let handle = agent.start("read a.txt", options).await.unwrap();
    let run_id = handle.run_id().to_owned();
    let items = all(handle.events()).await;
    let Outcome::Finished { text, .. } = handle.outcome().await.unwrap() else {
        panic!("the run finishes")
    };
    assert_eq!(text, "the file says alpha");
    let items: Vec<RunEvent> = items.into_iter().map(Result::unwrap).collect();
    assert!(items.iter().all(|e| e.run_id == run_id
        && e.tenant.as_deref() == Some("acme")
        && e.started_by.as_ref().map(|p| p.id.as_str()) == Some("ann")));
    // The stored events: numbered with no gap, as the log keeps them.
    let stored: Vec<&RunEvent> = items.iter().filter(|e| e.seq.is_some()).collect();
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq.unwrap()).collect();
    assert_eq!(seqs, (1..=stored.len() as u64).collect::<Vec<_>>());
    let log = agent.events(&run_id).await.unwrap();
    let got: Vec<Event> = stored.iter().map(|e| e.event.clone()).collect();
    assert_eq!(got, log);
    assert_eq!(got.first(), Some(&Event::RunStarted));
    assert_eq!(got.last(), Some(&Event::RunFinished));
    assert!(got
        .iter()
        .any(|e| matches!(e, Event::BeforeToolCall { tool, .. } if tool == "read_text_file")));
    assert!(got.iter().any(|e| matches!(
        e,
        Event::AfterToolResult {
            is_error: false,
            ..
        }
    )));
    assert!(got.iter().any(|e| matches!(
        e,
        Event::ModelAnswered {
            usage: Some(_),
            tool_calls: 0,
            ..
        }
    )));
    // The streamed text: live only, the whole answer, never in the log.
    let streamed: String = items
        .iter()
        .filter_map(|e| match &e.event {
            Event::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "the file says alpha");
    assert!(items
        .iter()
        .all(|e| e.seq.is_none() == matches!(e.event, Event::TextDelta { .. })));
    assert!(!log.iter().any(|e| matches!(e, Event::TextDelta { .. })));
    // A watch of the finished run: the same log, from the start or after a number.
    let watched: Vec<RunEvent> = all(agent.watch(&run_id, None))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let stored: Vec<RunEvent> = stored.into_iter().cloned().collect();
    assert_eq!(watched, stored);
    let rest: Vec<RunEvent> = all(agent.watch(&run_id, Some(2)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rest, stored[2..]);
    // A run that is not kept is an error, not a wait for ever.
    let unknown = all(agent.watch("no-such-run", None)).await;
    assert!(
        matches!(&unknown[..], [Err(e)] if e.is_store()),
        "{unknown:?}"
    );
    agent.close().await.unwrap();
}

/// The watcher process of [`a_watcher_in_another_process_sees_each_event_once`]:
/// follows `MCP_TEST_RUN` after `MCP_TEST_AFTER` (from the start when empty) in
/// `MCP_TEST_STORE`, prints `watching`, then one `event seq=… tenant=… json=…` line
/// per event, and stops after an event named `MCP_TEST_UNTIL` (or when the stream
/// ends), printing `end`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the watcher process of a_watcher_in_another_process_sees_each_event_once, which runs it"]
async fn watching_process() {
    use std::io::Write as _;
    let env = |k: &str| std::env::var(k).expect("set by the test that runs this");
    let dir = PathBuf::from(env("MCP_TEST_DIR"));
    let store = store_for(&dir, &env("MCP_TEST_STORE")).await;
    let after = env("MCP_TEST_AFTER");
    let after = (!after.is_empty()).then(|| after.parse::<u64>().unwrap());
    let until = env("MCP_TEST_UNTIL");
    // A watcher needs no model nor server: it only reads the store.
    let agent = Agent::builder()
        .model(ChatCompletions::new("http://127.0.0.1:9/v1", "unused").unwrap())
        .store(store)
        .build()
        .unwrap();
    let mut events = agent.watch(&env("MCP_TEST_RUN"), after);
    println!("watching");
    std::io::stdout().flush().unwrap();
    while let Some(item) = events.next().await {
        let e = item.unwrap();
        let json = serde_json::to_string(&e.event).unwrap();
        println!(
            "event seq={} tenant={} json={json}",
            e.seq.unwrap(),
            e.tenant.unwrap_or_default()
        );
        std::io::stdout().flush().unwrap();
        if serde_json::to_value(&e.event).unwrap()["event"] == until.as_str() {
            break;
        }
    }
    println!("end");
}

/// A watcher process started with `env`, and its stdout's lines as they come.
struct Watcher {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Watcher {
    fn start(env: &[(&str, String)]) -> Watcher {
        let mut cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "watch::watching_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .stdout(Stdio::piped())
        .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        Watcher {
            child,
            lines: tokio::io::BufReader::new(stdout).lines(),
        }
    }

    /// Lines until one equal to `last` (which ends them), within the deadline.
    async fn until(&mut self, last: &str) -> Vec<String> {
        let mut out = Vec::new();
        tokio::time::timeout(DEADLINE, async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if line == last {
                    return;
                }
                out.push(line);
            }
            panic!("the watcher ended before `{last}`: {out:?}");
        })
        .await
        .unwrap_or_else(|_| panic!("no `{last}` from the watcher in time: {out:?}"));
        out
    }

    /// The (number, tenant, event) of each `event` line, once it exited well.
    async fn events(mut self) -> Vec<(u64, String, Event)> {
        let lines = self.until("end").await;
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{lines:?}");
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("event seq="))
            .map(|l| {
                let (seq, rest) = l.split_once(" tenant=").unwrap();
                let (tenant, json) = rest.split_once(" json=").unwrap();
                (
                    seq.parse().unwrap(),
                    tenant.to_owned(),
                    serde_json::from_str(json).unwrap(),
                )
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_in_another_process_sees_each_event_once_sqlite() {
    watch_across_processes("sqlite", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_in_another_process_sees_each_event_once_postgres() {
    let pg = Postgres::start();
    watch_across_processes("postgres", &pg.url).await;
}

/// A run is started here; a watcher process follows it from its start and
/// disconnects when the run suspends (mid-run); a second watcher process reconnects
/// after the last number the first saw, the run is resumed, and it follows the run
/// to its end. Together they saw every event of the log exactly once, in order, each
/// with the run's tenant.
async fn watch_across_processes(tag: &str, store: &str) {
    let dir = scratch(&format!("watch-{tag}"));
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join("out.txt"), "content": "watched"}}]},
            {"text": "written"}
        ]),
    );
    let agent = agent_with(&dir, &model, store_for(&dir, store).await);
    let handle = agent
        .start("write a file", RunOptions::new().tenant("acme"))
        .await
        .unwrap();
    let run_id = handle.run_id().to_owned();
    let env = |after: &str, until: &str| {
        vec![
            ("MCP_TEST_DIR", dir.display().to_string()),
            ("MCP_TEST_STORE", store.to_owned()),
            ("MCP_TEST_RUN", run_id.clone()),
            ("MCP_TEST_AFTER", after.to_owned()),
            ("MCP_TEST_UNTIL", until.to_owned()),
        ]
    };
    let first = Watcher::start(&env("", "run_suspended")).events().await;
    let Outcome::ApprovalRequired { decision, .. } = handle.outcome().await.unwrap() else {
        panic!("the run waits for approval")
    };
    assert!(matches!(
        first.last(),
        Some((_, _, Event::RunSuspended { .. }))
    ));
    let last = first.last().unwrap().0;
    let mut second = Watcher::start(&env(&last.to_string(), "end"));
    // It follows the run before the run goes on.
    second.until("watching").await;
    let Outcome::Finished { text, .. } = agent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the resumed run finishes")
    };
    assert_eq!(text, "written");
    let second = second.events().await;
    let seen: Vec<(u64, String, Event)> = first.into_iter().chain(second).collect();
    let log = agent.events(&run_id).await.unwrap();
    let seqs: Vec<u64> = seen.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>(), "{seen:?}");
    let events: Vec<Event> = seen.iter().map(|(_, _, e)| e.clone()).collect();
    assert_eq!(events, log);
    assert!(seen.iter().all(|(_, tenant, _)| tenant == "acme"));
    assert_eq!(log.last(), Some(&Event::RunFinished));
    assert!(log
        .iter()
        .any(|e| matches!(e, Event::ApprovalDecided { approved: true, .. })));
    agent.close().await.unwrap();
}

/// An event the store gives that is not one this version reads is an error for the
/// watcher — the stream's last item — not a panic nor a hang; the events before it
/// come as kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_that_does_not_read_is_an_error_for_the_watcher() {
    let dir = scratch("watch-hostile");
    let model = ModelServer::scripted(&dir, json!([{"text": "done"}]));
    for store in ["memory", "sqlite"] {
        let kept: Arc<dyn RunStore> = match store {
            "memory" => Arc::new(MemoryRunStore::default()),
            _ => store_for(&dir, store).await,
        };
        let agent = agent_with(&dir, &model, kept.clone());
        let handle = agent.start("hello", RunOptions::new()).await.unwrap();
        let run_id = handle.run_id().to_owned();
        handle.outcome().await.unwrap();
        let n = agent.events(&run_id).await.unwrap().len() as u64;
        // Something else appends to the run's log what is not an event.
        let row = kept.load(&run_id).await.unwrap().unwrap();
        let appended = [
            serde_json::to_value(Event::RunRetried).unwrap(),
            json!({"event": "no_such_event"}),
            json!("text"),
            json!({"event": "run_finished"}),
        ];
        for event in appended {
            kept.save(&RunRecord {
                events: vec![event],
                ..row.clone()
            })
            .await
            .unwrap();
        }
        let items = all(agent.watch(&run_id, Some(n))).await;
        assert!(
            matches!(&items[..], [Ok(e), Err(err)] if e.seq == Some(n + 1) && e.event == Event::RunRetried && err.is_store()),
            "{store}: {items:?}"
        );
        // The watcher stopped at the bad one; one that starts after them reads on.
        let items = all(agent.watch(&run_id, Some(n + 3))).await;
        assert!(
            matches!(&items[..], [Ok(e)] if e.seq == Some(n + 4) && e.event == Event::RunFinished),
            "{store}: {items:?}"
        );
        agent.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_row_that_does_not_read_is_an_error_for_the_watcher_sqlite() {
    rows_that_do_not_read("sqlite", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_row_that_does_not_read_is_an_error_for_the_watcher_postgres() {
    let pg = Postgres::start();
    rows_that_do_not_read("postgres", &pg.url).await;
}

/// Rows put in the event table behind the agent's back — text that is not JSON, a
/// number skipped — are an error for the watcher that reaches them (its last item),
/// after the events before them.
async fn rows_that_do_not_read(tag: &str, store: &str) {
    let dir = scratch(&format!("watch-rows-{tag}"));
    let model = ModelServer::scripted(&dir, json!([{"text": "done"}]));
    let agent = agent_with(&dir, &model, store_for(&dir, store).await);
    let handle = agent.start("hello", RunOptions::new()).await.unwrap();
    let run_id = handle.run_id().to_owned();
    handle.outcome().await.unwrap();
    let n = agent.events(&run_id).await.unwrap().len() as i64;
    let retried = serde_json::to_string(&Event::RunRetried).unwrap();
    // n+1: not JSON; n+2: an event; n+4: an event after a gap.
    let rows = [
        (n + 1, "{not json".to_owned()),
        (n + 2, retried.clone()),
        (n + 4, retried),
    ];
    if store.starts_with("postgres://") {
        let pool = mcp_runtime_core::postgres::PgPool::new(store).unwrap();
        let client = pool.client().await.unwrap();
        for (seq, event) in &rows {
            client
                .execute(
                    "INSERT INTO mcp_agent_events (run_id, seq, event) VALUES ($1, $2, $3)",
                    &[&run_id, seq, event],
                )
                .await
                .unwrap();
        }
    } else {
        let c = rusqlite::Connection::open(dir.join("state/runs.sqlite3")).unwrap();
        for (seq, event) in &rows {
            c.execute(
                "INSERT INTO mcp_agent_events (run_id, seq, event) VALUES (?1, ?2, ?3)",
                rusqlite::params![run_id, seq, event],
            )
            .unwrap();
        }
    }
    let n = n as u64;
    let items = all(agent.watch(&run_id, Some(n))).await;
    assert!(
        matches!(&items[..], [Err(e)] if e.is_store()),
        "{tag}: {items:?}"
    );
    let items = all(agent.watch(&run_id, Some(n + 1))).await;
    assert!(
        matches!(&items[..], [Ok(e), Err(err)] if e.seq == Some(n + 2) && err.is_store() && err.to_string().contains("gap")),
        "{tag}: {items:?}"
    );
    agent.close().await.unwrap();
}

/// A model of the application's own streams through `stream_text`: the run's watchers
/// get each piece live, in order, before the stored answer — and none is stored. Called
/// outside a started run, it does nothing (the same model in `run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_own_stream_reaches_the_watchers() {
    use mcp_agent::model::{ChatRequest, ChatResponse, Message, Role, Stop};
    use mcp_agent::runtime::BoxFuture;
    use mcp_agent::{stream_text, Model, ModelError};

    struct Streams;
    impl Model for Streams {
        fn complete<'a>(
            &'a self,
            _: &'a ChatRequest,
        ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
            Box::pin(async move {
                for piece in ["hel", "lo ", "there"] {
                    stream_text(piece);
                    tokio::task::yield_now().await;
                }
                Ok(ChatResponse::new(
                    Message::text(Role::Assistant, "hello there"),
                    Stop::End,
                ))
            })
        }
    }
    let agent = Agent::builder().model(Streams).build().unwrap();
    let handle = agent.start("hi", RunOptions::new()).await.unwrap();
    let items: Vec<RunEvent> = all(handle.events())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    handle.outcome().await.unwrap();
    let pieces: Vec<&str> = items
        .iter()
        .filter_map(|e| match &e.event {
            Event::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(pieces.concat(), "hello there");
    let first_delta = items
        .iter()
        .position(|e| matches!(e.event, Event::TextDelta { .. }))
        .unwrap();
    let answered = items
        .iter()
        .position(|e| matches!(e.event, Event::ModelAnswered { .. }))
        .unwrap();
    assert!(first_delta < answered, "live, before the stored answer");
    assert!(items
        .iter()
        .all(|e| e.seq.is_some() != matches!(e.event, Event::TextDelta { .. })));
    // Outside a started run: nothing to hand it to, and nothing breaks.
    let Outcome::Finished { text, .. } = agent.run("hi").await.unwrap() else {
        panic!("the run finishes")
    };
    assert_eq!(text, "hello there");
    agent.close().await.unwrap();
}

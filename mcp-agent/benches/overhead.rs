//! What the agent adds per tool call (not a timed test): run with
//! `cargo bench -p mcp-agent --bench overhead` after `bash tests/peers/install.sh`.
//!
//! An in-process model asks for `echo` calls to server-everything over stdio, so the
//! model costs nothing and what remains is the MCP call plus the agent's gate, event
//! log and run-store writes. Compared with the same calls made directly through
//! `Mcp::call`:
//!
//! 1. the gate's decision alone;
//! 2. one run = prompt → one tool call → answer, in the memory store, in SQLite and in
//!    PostgreSQL (started from `tests/peers/postgres.sh`, as the tests do), and what
//!    that costs over the direct call: the agent's bookkeeping per call (gate, events,
//!    leases, the saves that make a decision durable and a call at most once);
//! 3. one run whose single turn asks for 16 calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_agent::gate::ToolFacts;
use mcp_agent::model::{Block, ChatRequest, ChatResponse, Message, Role, Stop};
use mcp_agent::runtime::{BoxFuture, Mcp};
use mcp_agent::{
    Agent, Gate, Mode, Model, ModelError, Outcome, PostgresRunStore, RunStore, SqliteRunStore,
};
use serde_json::{json, Value};

/// Answers a prompt with `calls` echo calls in one turn, then with a final text.
struct Scripted {
    calls: usize,
    ids: AtomicUsize,
}

impl Model for Scripted {
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ModelError>> {
        Box::pin(async move {
            let answered = request
                .messages
                .last()
                .is_some_and(|m| m.role == Role::Tool);
            if answered {
                return Ok(ChatResponse::new(
                    Message::text(Role::Assistant, "done"),
                    Stop::End,
                ));
            }
            let content = (0..self.calls)
                .map(|_| Block::ToolCall {
                    id: format!("c{}", self.ids.fetch_add(1, Ordering::Relaxed)),
                    name: "echo".into(),
                    arguments: json!({"message": "hi"}),
                })
                .collect();
            Ok(ChatResponse::new(
                Message {
                    role: Role::Assistant,
                    content,
                },
                Stop::ToolCalls,
            ))
        })
    }
}

fn everything() -> Mcp {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = root.join(".peers/npm/node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "run bash tests/peers/install.sh first");
    Mcp::builder("everything")
        .command([bin.display().to_string(), "stdio".into()])
        .build()
        .expect("server")
}

fn agent(calls: usize, store: Option<std::sync::Arc<dyn RunStore>>) -> Agent {
    let mut b = Agent::builder()
        .model(Scripted {
            calls,
            ids: AtomicUsize::new(0),
        })
        .mode(Mode::ReadOnly)
        .allow(["echo"])
        .server(everything());
    if let Some(store) = store {
        b = b.store(store);
    }
    b.build().expect("agent")
}

/// A PostgreSQL of the project's test peers, stopped when dropped.
struct Postgres(u16, String);

impl Postgres {
    fn start() -> Postgres {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = std::process::Command::new("bash")
            .arg(root.join("tests/peers/postgres.sh"))
            .args(["start", &port.to_string()])
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "PostgreSQL did not start (run bash tests/peers/install.sh first): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Postgres(port, String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let _ = std::process::Command::new("bash")
            .arg(root.join("tests/peers/postgres.sh"))
            .args(["stop", &self.0.to_string()])
            .output();
    }
}

fn per(total: Duration, n: usize) -> String {
    format!("{:.1} µs", total.as_secs_f64() * 1e6 / n as f64)
}

async fn runs(agent: &Agent, n: usize) -> Duration {
    // Warm up: connect, list tools.
    for _ in 0..20 {
        assert!(matches!(
            agent.run("go").await,
            Ok(Outcome::Finished { .. })
        ));
    }
    let start = Instant::now();
    for _ in 0..n {
        match agent.run("go").await {
            Ok(Outcome::Finished { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    start.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    const N: usize = 1000;

    // 1. The gate alone.
    let gate = Gate::new(Mode::ReadOnly, ["echo", "read_text_file", "list_directory"]);
    let facts = ToolFacts {
        name: "echo".into(),
        server: "everything".into(),
        app_only: false,
        requires_approval: false,
    };
    let args: Value = json!({"message": "hi"});
    let start = Instant::now();
    for _ in 0..100_000 {
        std::hint::black_box(gate.decide("echo", Some(&facts), &args).await);
    }
    println!(
        "gate decision: {:.0} ns",
        start.elapsed().as_secs_f64() * 1e9 / 100_000.0
    );

    // 2. Direct calls for comparison.
    let direct = everything();
    for _ in 0..20 {
        direct
            .call("echo", json!({"message": "hi"}))
            .await
            .expect("call");
    }
    let start = Instant::now();
    for _ in 0..N {
        direct
            .call("echo", json!({"message": "hi"}))
            .await
            .expect("call");
    }
    let d = start.elapsed();
    println!("direct Mcp::call: {}", per(d, N));
    direct.close().await.ok();

    let over = |t: Duration| {
        let extra = t.as_secs_f64() - d.as_secs_f64();
        format!("{:.1} µs", extra.max(0.0) * 1e6 / N as f64)
    };
    let memory = agent(1, None);
    let m = runs(&memory, N).await;
    println!(
        "agent run, 1 call, memory store: {} (bookkeeping over the direct call: {})",
        per(m, N),
        over(m)
    );
    memory.close().await.ok();

    let dir = std::env::temp_dir().join(format!("mcp-agent-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let store = SqliteRunStore::open(dir.join("runs.sqlite3")).expect("sqlite");
    let sqlite = agent(1, Some(std::sync::Arc::new(store)));
    let s = runs(&sqlite, N).await;
    println!(
        "agent run, 1 call, SQLite store: {} (bookkeeping over the direct call: {})",
        per(s, N),
        over(s)
    );
    sqlite.close().await.ok();

    let pg = Postgres::start();
    let store = PostgresRunStore::connect(&pg.1).await.expect("postgres");
    let postgres = agent(1, Some(std::sync::Arc::new(store)));
    let p = runs(&postgres, N).await;
    println!(
        "agent run, 1 call, PostgreSQL store: {} (bookkeeping over the direct call: {})",
        per(p, N),
        over(p)
    );
    postgres.close().await.ok();
    drop(pg);

    let wide = agent(16, None);
    let w = runs(&wide, N / 16).await;
    println!(
        "agent run, 16 calls in one turn, memory store: {} per call",
        per(w, N / 16 * 16)
    );
    wide.close().await.ok();
    std::fs::remove_dir_all(&dir).ok();
}

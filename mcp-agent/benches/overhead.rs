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
//! 3. the store calls (PostgreSQL round trips) of one single-call run, and the cost of a
//!    save (time, bytes written) at turns 10, 100 and 1000 of one long conversation;
//! 4. one run whose single turn asks for 16 calls.
//!
//! `-- --conversation-only` runs only the save cost by conversation length;
//! `-- --smoke` runs every part briefly (CI: the numbers mean nothing then);
//! `MCP_AGENT_BENCH_PROFILE=memory` runs only single-call runs in memory, for a
//! profiler (`perf record`, `valgrind --tool=callgrind`; `MCP_AGENT_BENCH_RUNS=N` runs
//! N of them: instructions per run are the difference of two counts over the
//! difference of their runs, which leaves out start-up).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_agent::gate::ToolFacts;
use mcp_agent::model::{Block, ChatRequest, ChatResponse, Message, Role, Stop};
use mcp_agent::runtime::{BoxFuture, Mcp};
use mcp_agent::{
    Agent, Claim, Gate, Lease, LedgerEntry, Mode, Model, ModelError, Outcome, PostgresRunStore,
    RunFilter, RunPage, RunRecord, RunStore, SqliteRunStore,
};
use serde_json::{json, Value};

/// Answers a prompt with `calls` echo calls in one turn, `turns` turns in a row (each
/// echoing `text`), then with a final text.
struct Scripted {
    calls: usize,
    turns: usize,
    text: String,
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
                .iter()
                .filter(|m| m.role == Role::Tool)
                .count();
            if answered >= self.turns {
                return Ok(ChatResponse::new(
                    Message::text(Role::Assistant, "done"),
                    Stop::End,
                ));
            }
            let content = (0..self.calls)
                .map(|_| Block::ToolCall {
                    id: format!("c{}", self.ids.fetch_add(1, Ordering::Relaxed)),
                    name: "echo".into(),
                    arguments: json!({"message": self.text}),
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
    conversation(calls, 1, "hi", store)
}

fn conversation(
    calls: usize,
    turns: usize,
    text: &str,
    store: Option<std::sync::Arc<dyn RunStore>>,
) -> Agent {
    let mut b = Agent::builder()
        .model(Scripted {
            calls,
            turns,
            text: text.to_owned(),
            ids: AtomicUsize::new(0),
        })
        .max_steps(u32::MAX)
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

/// A store that counts what is asked of the store it wraps (each call one round trip
/// to PostgreSQL) and measures each save: how long it took and how many bytes it
/// wrote (state, transcript entries, blobs, events).
struct Metered {
    inner: std::sync::Arc<dyn RunStore>,
    calls: AtomicUsize,
    saves: std::sync::Mutex<Vec<(Duration, usize)>>,
}

impl Metered {
    fn new(inner: std::sync::Arc<dyn RunStore>) -> std::sync::Arc<Metered> {
        std::sync::Arc::new(Metered {
            inner,
            calls: AtomicUsize::new(0),
            saves: std::sync::Mutex::new(Vec::new()),
        })
    }
    fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
    fn take(&self) -> (usize, Vec<(Duration, usize)>) {
        let saves = std::mem::take(&mut *self.saves.lock().expect("the saves"));
        (self.calls.swap(0, Ordering::Relaxed), saves)
    }
}

impl RunStore for Metered {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, mcp_agent::Result<()>> {
        self.count();
        Box::pin(async move {
            let bytes = run.state.to_string().len()
                + run
                    .transcript
                    .entries
                    .iter()
                    .map(|e| e.to_string().len())
                    .sum::<usize>()
                + run.blobs.iter().map(|b| b.data.len()).sum::<usize>()
                + run
                    .events
                    .iter()
                    .map(|e| e.to_string().len())
                    .sum::<usize>();
            let start = Instant::now();
            let out = self.inner.save(run).await;
            self.saves
                .lock()
                .expect("the saves")
                .push((start.elapsed(), bytes));
            out
        })
    }
    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Vec<Value>>> {
        self.count();
        self.inner.events(id)
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Option<RunRecord>>> {
        self.count();
        self.inner.load(id)
    }
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, mcp_agent::Result<Option<RunRecord>>> {
        self.count();
        self.inner.claim(id, claim, lease)
    }
    fn renew<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.count();
        self.inner.renew(id, lease)
    }
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, mcp_agent::Result<RunPage>> {
        self.count();
        self.inner.list(filter)
    }
    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Vec<LedgerEntry>>> {
        self.count();
        self.inner.ledger(id)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.count();
        self.inner.delete(id)
    }
    fn prune(&self, secs: u64) -> BoxFuture<'_, mcp_agent::Result<u64>> {
        self.count();
        self.inner.prune(secs)
    }
    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, mcp_agent::Result<()>> {
        self.count();
        self.inner.save_allowance(id, allowance)
    }
    fn allowances(&self) -> BoxFuture<'_, mcp_agent::Result<Vec<Value>>> {
        self.count();
        self.inner.allowances()
    }
    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.count();
        self.inner.delete_allowance(id)
    }
}

/// The store calls (round trips) of one single-call run.
async fn round_trips(name: &str, store: std::sync::Arc<dyn RunStore>) {
    let metered = Metered::new(store);
    let agent = agent(1, Some(metered.clone()));
    for _ in 0..3 {
        agent.run("go").await.expect("run");
    }
    metered.take();
    agent.run("go").await.expect("run");
    let (calls, saves) = metered.take();
    println!(
        "store calls (round trips) per single-call run, {name}: {calls} ({} saves)",
        saves.len()
    );
    agent.close().await.ok();
}

/// Save cost by conversation length: one run of `turns` turns (one echo call each,
/// `text` long), each save timed and weighed: the median time and the mean bytes of
/// the saves of the ten turns up to turns 10, 100 and 1000.
async fn conversation_cost(name: &str, store: std::sync::Arc<dyn RunStore>, turns: usize) {
    let metered = Metered::new(store);
    let text = "x".repeat(1000);
    let agent = conversation(1, turns, &text, Some(metered.clone()));
    agent.run("go").await.expect("run");
    let (_, saves) = metered.take();
    let per_turn = saves.len() / turns.max(1);
    let mut cells = Vec::new();
    for at in [10usize, 100, 1000].into_iter().filter(|t| *t <= turns) {
        // The saves of the ten turns up to turn `at`: their median time, mean bytes.
        let end = (at * per_turn).min(saves.len());
        let slice = &saves[end.saturating_sub(10 * per_turn)..end];
        let mut times: Vec<Duration> = slice.iter().map(|(d, _)| *d).collect();
        times.sort();
        let median = times.get(times.len() / 2).copied().unwrap_or_default();
        let bytes: usize = slice.iter().map(|(_, b)| *b).sum();
        cells.push(format!(
            "turn {at}: {:.1} µs, {} bytes",
            median.as_secs_f64() * 1e6,
            bytes / slice.len().max(1)
        ));
    }
    println!(
        "save cost by conversation length, {name} ({per_turn} saves a turn): {}",
        cells.join("; ")
    );
    agent.close().await.ok();
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
    // `-- --smoke`: every part runs, briefly (CI); the numbers mean nothing then.
    let smoke = std::env::args().any(|a| a == "--smoke");
    let n: usize = if smoke { 20 } else { 1000 };
    let turns: usize = if smoke { 12 } else { 1000 };

    if std::env::args().any(|a| a == "--conversation-only") {
        let pg = Postgres::start();
        let pg_store = PostgresRunStore::connect(&pg.1).await.expect("postgres");
        let dir = std::env::temp_dir().join(format!("mcp-agent-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let sqlite = SqliteRunStore::open(dir.join("runs.sqlite3")).expect("sqlite");
        conversation_cost(
            "memory",
            std::sync::Arc::new(mcp_agent::MemoryRunStore::default()),
            turns,
        )
        .await;
        conversation_cost("SQLite", std::sync::Arc::new(sqlite), turns).await;
        conversation_cost("PostgreSQL", std::sync::Arc::new(pg_store), turns).await;
        std::fs::remove_dir_all(&dir).ok();
        return;
    }

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
    for _ in 0..n {
        direct
            .call("echo", json!({"message": "hi"}))
            .await
            .expect("call");
    }
    let d = start.elapsed();
    println!("direct Mcp::call: {}", per(d, n));
    direct.close().await.ok();

    let over = |t: Duration| {
        let extra = t.as_secs_f64() - d.as_secs_f64();
        format!("{:.1} µs", extra.max(0.0) * 1e6 / n as f64)
    };
    let memory = agent(1, None);
    if std::env::var("MCP_AGENT_BENCH_PROFILE").as_deref() == Ok("memory") {
        // Only single-call runs in memory, many of them (`MCP_AGENT_BENCH_RUNS`, 20,000
        // by default): what a profiler looks at.
        let count = std::env::var("MCP_AGENT_BENCH_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20 * n);
        let m = runs(&memory, count).await;
        println!("memory store only: {}", per(m, count));
        return;
    }
    let m = runs(&memory, n).await;
    println!(
        "agent run, 1 call, memory store: {} (bookkeeping over the direct call: {})",
        per(m, n),
        over(m)
    );
    memory.close().await.ok();

    let dir = std::env::temp_dir().join(format!("mcp-agent-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let store = SqliteRunStore::open(dir.join("runs.sqlite3")).expect("sqlite");
    let sqlite = agent(1, Some(std::sync::Arc::new(store)));
    let s = runs(&sqlite, n).await;
    println!(
        "agent run, 1 call, SQLite store: {} (bookkeeping over the direct call: {})",
        per(s, n),
        over(s)
    );
    sqlite.close().await.ok();

    let pg = Postgres::start();
    let pg_store = PostgresRunStore::connect(&pg.1).await.expect("postgres");
    let postgres = agent(1, Some(std::sync::Arc::new(pg_store.clone())));
    let p = runs(&postgres, n).await;
    println!(
        "agent run, 1 call, PostgreSQL store: {} (bookkeeping over the direct call: {})",
        per(p, n),
        over(p)
    );
    postgres.close().await.ok();

    // 3. What a run asks of its store, and what a save costs as the conversation grows.
    round_trips(
        "memory",
        std::sync::Arc::new(mcp_agent::MemoryRunStore::default()),
    )
    .await;
    let sqlite_store = SqliteRunStore::open(dir.join("runs.sqlite3")).expect("sqlite");
    round_trips("SQLite", std::sync::Arc::new(sqlite_store.clone())).await;
    round_trips("PostgreSQL", std::sync::Arc::new(pg_store.clone())).await;
    conversation_cost(
        "memory",
        std::sync::Arc::new(mcp_agent::MemoryRunStore::default()),
        turns,
    )
    .await;
    conversation_cost("SQLite", std::sync::Arc::new(sqlite_store), turns).await;
    conversation_cost("PostgreSQL", std::sync::Arc::new(pg_store), turns).await;
    drop(pg);

    let wide = agent(16, None);
    let w = runs(&wide, n / 16).await;
    println!(
        "agent run, 16 calls in one turn, memory store: {} per call",
        per(w, n / 16 * 16)
    );
    wide.close().await.ok();
    std::fs::remove_dir_all(&dir).ok();
}

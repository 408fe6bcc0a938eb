#![allow(clippy::unwrap_used)]
//! The agent against real peers: npm server-filesystem (the pinned test peer) as the MCP
//! server, a scripted model behind the real Chat Completions wire over loopback HTTP
//! (tests/peers/fake_model.py), and real SQLite files.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mcp_agent::{
    Agent, ChatCompletions, Decision, Event, Mode, Outcome, PostgresRunStore, RunStore,
    SqliteRunStore,
};
use mcp_runtime::Mcp;
use serde_json::{json, Value};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pinned test peers (installed once; fails loudly when that is not possible).
fn peers() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/peers/install.sh"))
        .output()
        .expect("bash is required to install the test peers");
    assert!(
        out.status.success(),
        "installing the test peers failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    repo_root().join(".peers")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-agent-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A peer process, killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs one of this binary's `#[ignore]`d helper tests as a process of its own with
/// `env`, and returns its `suspended run=…` line.
fn suspended_line(helper: &str, env: &[(&str, String)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([helper, "--exact", "--ignored", "--nocapture"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find(|l| l.starts_with("suspended run="))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_owned()
}

/// The run id and decision id of a `suspended run=… tool=… decision=…` line.
fn parse_suspended(line: &str) -> (String, String) {
    let field = |name: &str| {
        line.split(' ')
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .to_owned()
    };
    (field("run="), field("decision="))
}

/// What a test process's subscriber writes.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything the test process logs (every level) and traces (an OpenTelemetry
/// pipeline into memory): one subscriber for the process, shared by the tests that
/// look at logs or spans (each finds its own by what it ran, so they may share a
/// process).
struct Observed {
    logs: Captured,
    spans: opentelemetry_sdk::trace::InMemorySpanExporter,
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

fn observed() -> &'static Observed {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    static OBSERVED: std::sync::OnceLock<Observed> = std::sync::OnceLock::new();
    OBSERVED.get_or_init(|| {
        let logs = Captured::default();
        let spans = opentelemetry_sdk::trace::InMemorySpanExporter::default();
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::TRACE)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(move || writer.clone())
                    .with_ansi(false),
            )
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("mcp-agent-tests")));
        tracing::subscriber::set_global_default(subscriber)
            .expect("the tests' process has no other subscriber");
        Observed {
            logs,
            spans,
            provider,
        }
    })
}

/// The scripted model, killed when dropped.
struct FakeModel {
    _child: Killed,
    port: u16,
}

impl FakeModel {
    fn start(dir: &Path, script: Value) -> FakeModel {
        let path = dir.join("script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        let port = free_port();
        let mut child = Command::new(peers().join("venv/bin/python"))
            .arg(repo_root().join("tests/peers/fake_model.py"))
            .args([port.to_string(), path.display().to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("READY"), "the fake model did not start");
        FakeModel {
            _child: Killed(child),
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn requests(&self) -> Vec<Value> {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /_requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        serde_json::from_str::<Vec<Value>>(body).unwrap()
    }
}

fn filesystem(dir: &Path) -> Mcp {
    let bin = peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    Mcp::builder("fs")
        .command([bin.display().to_string(), dir.display().to_string()])
        .env("FS_CANARY_SECRET", "ENV-CANARY-91c2")
        .build()
        .unwrap()
}

fn offered(request: &Value) -> Vec<String> {
    request["body"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_runs_listed_tools_and_denies_the_rest_without_raising() {
    let dir = scratch("read-only");
    std::fs::write(dir.join("notes.txt"), "hello notes").unwrap();
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "read_text_file", "arguments": {"path": dir.join("notes.txt")}},
                {"name": "write_file", "arguments": {"path": dir.join("evil.txt"), "content": "x"}},
                {"name": "made_up_tool", "arguments": {}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    let agent = Agent::builder()
        .model(
            ChatCompletions::new(model.url(), "fake-model")
                .unwrap()
                .api_key("MODEL-KEY-CANARY"),
        )
        .allow(["read_text_file", "list_directory"])
        .server(filesystem(&dir))
        .on_event(move |_, ev| e.lock().unwrap().push(ev.clone()))
        .build()
        .unwrap();
    let out = agent.run("read my notes").await.unwrap();
    let Outcome::Finished { text, run_id, .. } = out else {
        panic!("{out:?}")
    };
    assert!(text.contains("read_text_file: hello notes"), "{text}");
    assert!(text.contains("write_file: {\"error\""), "{text}");
    assert!(text.contains("made_up_tool: {\"error\""), "{text}");
    assert!(!dir.join("evil.txt").exists(), "a denied tool ran");
    // Only the tools the mode can allow were offered.
    let requests = model.requests();
    let mut names = offered(&requests[0]);
    names.sort();
    assert_eq!(names, ["list_directory", "read_text_file"]);
    assert_eq!(requests[0]["body"]["model"], "fake-model");
    assert_eq!(requests[0]["authorization"], "Bearer MODEL-KEY-CANARY");
    // Events, in order, also kept with the run.
    let seen = events.lock().unwrap().clone();
    assert_eq!(seen.first(), Some(&Event::RunStarted));
    assert_eq!(seen.last(), Some(&Event::RunFinished));
    assert_eq!(
        seen.iter()
            .filter(|e| matches!(e, Event::Denied { .. }))
            .count(),
        2
    );
    assert!(seen
        .iter()
        .any(|e| matches!(e, Event::BeforeToolCall { tool, .. } if tool == "read_text_file")));
    assert_eq!(agent.events(&run_id).await.unwrap(), seen);
    // Nothing secret in the events.
    let json = serde_json::to_string(&seen).unwrap();
    assert!(!json.contains("MODEL-KEY-CANARY") && !json.contains("ENV-CANARY-91c2"));
    agent.close().await.unwrap();
}

/// The client process of [`a_run_suspended_in_one_process_resumes_in_another`]: runs
/// the agent until it suspends, prints the run id, and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the first process of a_run_suspended_in_one_process_resumes_in_another, which runs it"]
async fn suspending_process() {
    let dir = PathBuf::from(std::env::var("MCP_TEST_DIR").expect("set by the test that runs this"));
    let url = std::env::var("MCP_TEST_MODEL").expect("set by the test that runs this");
    let store = std::env::var("MCP_TEST_STORE").expect("set by the test that runs this");
    let agent = agent_for(&dir, &url, &store).await;
    match agent.run("write a file").await.unwrap() {
        Outcome::ApprovalRequired {
            run_id,
            tool,
            decision,
            ..
        } => {
            println!("suspended run={run_id} tool={tool} decision={decision}");
        }
        other => panic!("{other:?}"),
    }
    agent.close().await.unwrap();
}

/// A real PostgreSQL (tests/peers/postgres.sh), stopped when dropped.
struct Postgres {
    url: String,
    port: u16,
}

impl Postgres {
    fn start() -> Postgres {
        peers();
        let port = free_port();
        let out = Command::new("bash")
            .arg(repo_root().join("tests/peers/postgres.sh"))
            .args(["start", &port.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Postgres {
            url: String::from_utf8(out.stdout).unwrap().trim().to_owned(),
            port,
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo_root().join("tests/peers/postgres.sh"))
            .args(["stop", &self.port.to_string()])
            .output();
    }
}

/// The run store a test names: a PostgreSQL URL, else the SQLite file in `dir`.
async fn store_for(dir: &Path, store: &str) -> std::sync::Arc<dyn RunStore> {
    if store.starts_with("postgres://") {
        std::sync::Arc::new(PostgresRunStore::connect(store).await.unwrap())
    } else {
        std::sync::Arc::new(SqliteRunStore::open(dir.join("state/runs.sqlite3")).unwrap())
    }
}

async fn agent_for(dir: &Path, model_url: &str, store: &str) -> Agent {
    Agent::builder()
        .model(
            ChatCompletions::new(model_url, "fake-model")
                .unwrap()
                .api_key("MODEL-KEY-CANARY"),
        )
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .server(filesystem(dir))
        .store(store_for(dir, store).await)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_suspended_in_one_process_resumes_in_another_sqlite() {
    suspend_and_resume_across_processes("sqlite", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_suspended_in_one_process_resumes_in_another_postgres() {
    let pg = Postgres::start();
    suspend_and_resume_across_processes("postgres", &pg.url).await;
}

async fn suspend_and_resume_across_processes(tag: &str, store: &str) {
    let dir = scratch(&format!("resume-{tag}"));
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join("out.txt"), "content": "approved write"}}]},
            {"echo_tools": true},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join("denied.txt"), "content": "x"}}]},
            {"echo_tools": true}
        ]),
    );
    let suspend = || {
        let line = suspended_line(
            "suspending_process",
            &[
                ("MCP_TEST_DIR", dir.display().to_string()),
                ("MCP_TEST_MODEL", model.url()),
                ("MCP_TEST_STORE", store.to_owned()),
            ],
        );
        let (run, decision) = parse_suspended(&line);
        assert!(line.contains(" tool=write_file "), "{line}");
        (run, decision)
    };
    let (run, decision) = suspend();
    assert!(
        !dir.join("out.txt").exists(),
        "nothing ran before the decision"
    );
    // This process is not the one that suspended it.
    let agent = agent_for(&dir, &model.url(), store).await;
    let (a, b) = tokio::join!(
        agent.resume(&run, &decision, Decision::approve("ann")),
        agent.resume(&run, &decision, Decision::approve("bob"))
    );
    let (won, lost) = match (a, b) {
        (Ok(o), Err(e)) | (Err(e), Ok(o)) => (o, e),
        other => panic!("exactly one resume must win: {other:?}"),
    };
    assert!(lost.is_stale_decision(), "{lost}");
    let Outcome::Finished { text, .. } = won else {
        panic!("{won:?}")
    };
    assert!(text.starts_with("write_file:"), "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "approved write"
    );
    let events = agent.events(&run).await.unwrap();
    assert!(events.iter().any(|e| matches!(e, Event::ApprovalDecided { approved: true, by, .. } if by == "ann" || by == "bob")));
    let late = agent
        .resume(&run, &decision, Decision::approve("late"))
        .await
        .unwrap_err();
    assert!(
        late.is_stale_decision() && late.is_not_suspended(),
        "{late}"
    );
    // Denied with a message: the model reads it with the error result; nothing is
    // written.
    let (run, decision) = suspend();
    let Outcome::Finished { text, .. } = agent
        .resume(
            &run,
            &decision,
            Decision::deny("ann").with_message("not in that folder"),
        )
        .await
        .unwrap()
    else {
        panic!()
    };
    assert!(
        text.contains("denied") && text.contains("not in that folder"),
        "{text}"
    );
    assert!(!dir.join("denied.txt").exists());
    // No secret in what the store keeps.
    let kept = if store.starts_with("postgres://") {
        let s = PostgresRunStore::connect(store).await.unwrap();
        s.load(&run).await.unwrap().unwrap().state.to_string()
    } else {
        String::from_utf8_lossy(&std::fs::read(dir.join("state/runs.sqlite3")).unwrap())
            .into_owned()
    };
    assert!(kept.contains("write_file"), "the run is kept");
    assert!(!kept.contains("MODEL-KEY-CANARY") && !kept.contains("ENV-CANARY-91c2"));
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_errors_are_clear() {
    let dir = scratch("errors");
    let model = FakeModel::start(&dir, json!([{"status": 429, "error": "slow down"}]));
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(e.is_model(), "{e}");
    assert!(
        matches!(
            e.model_error(),
            Some(mcp_agent::ModelError::RateLimited { .. })
        ),
        "{e}"
    );
    let model = FakeModel::start(
        &dir,
        json!([{"status": 400, "error": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(
            e.model_error(),
            Some(mcp_agent::ModelError::ContextTooLong { .. })
        ),
        "{e}"
    );
    // Anthropic: a prompt too long is ContextTooLong; another request error that
    // merely says "context" is not.
    let model = FakeModel::start(
        &dir,
        json!([
            {"status": 400, "error": "prompt is too long: 208310 tokens > 200000 maximum"},
            {"status": 400, "error": "tool_use ids were found without tool_result blocks (context: messages.2)"}
        ]),
    );
    let agent = Agent::builder()
        .model(mcp_agent::Messages::new(model.url(), "m").unwrap())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(
            e.model_error(),
            Some(mcp_agent::ModelError::ContextTooLong { .. })
        ),
        "{e}"
    );
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(e.model_error(), Some(mcp_agent::ModelError::Other { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("tool_use ids"), "{e}");
    // No model configured: a configuration error, never a vendor default.
    assert!(Agent::builder().build().unwrap_err().is_config());
}

/// The step limit ends a model that never stops calling tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_limit_ends_a_run() {
    let dir = scratch("steps");
    let model = FakeModel::start(
        &dir,
        json!([{"tool_calls": [{"name": "list_directory", "arguments": {"path": dir}}]}]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .allow(["list_directory"])
        .server(filesystem(&dir))
        .max_steps(3)
        .build()
        .unwrap();
    assert!(matches!(
        agent.run("loop").await.unwrap(),
        Outcome::StepLimit { .. }
    ));
    assert_eq!(model.requests().len(), 3);
    agent.close().await.unwrap();
}

/// `mcp!` lines are checked at compile time: every mistake at its token, at once.
#[test]
fn attach_lines_are_checked_at_compile_time() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/attach_ok.rs");
    t.compile_fail("tests/ui/attach_mistakes.rs");
}

/// An `mcp!` line attaches a working server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attach_line_attaches_a_real_server() {
    let dir = scratch("attach");
    std::fs::write(dir.join("a.txt"), "A").unwrap();
    let bin = peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    let fs = mcp_agent::mcp!(fs, command = bin.display(), args = [dir.display()]).unwrap();
    let names: Vec<String> = fs
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"read_text_file".to_owned()), "{names:?}");
    fs.close().await.unwrap();
}

/// A server attached with `mcp!` and called by the agent sees none of this process's
/// environment but the safe default set and what the line names: a canary secret in
/// the agent's environment reaches it only when `inherit_env` names it (the positive
/// control: the same reader sees it then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_server_gets_no_secret_it_was_not_given() {
    // nextest runs each test in a process of its own: this environment is the test's.
    std::env::set_var("AGENT_CANARY_API_KEY", "sk-canary-5e1f");
    let dir = scratch("clean-env");
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [{"name": "get-env", "arguments": {}}]},
            {"echo_tools": true},
            {"tool_calls": [{"name": "get-env", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let bin = peers().join("npm/node_modules/.bin/mcp-server-everything");
    let run = |server: Mcp| {
        let agent = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Auto)
            .server(server)
            .build()
            .unwrap();
        async move {
            let out = agent.run("what is in your environment?").await.unwrap();
            agent.close().await.unwrap();
            match out {
                Outcome::Finished { text, .. } => text,
                other => panic!("{other:?}"),
            }
        }
    };
    let plain = mcp_agent::mcp!(everything, command = bin.display(), args = ["stdio"]).unwrap();
    let seen = run(plain).await;
    assert!(
        seen.contains("PATH"),
        "the reader sees the environment: {seen}"
    );
    assert!(!seen.contains("sk-canary-5e1f"), "{seen}");
    let named = mcp_agent::mcp!(
        everything,
        command = bin.display(),
        args = ["stdio"],
        inherit_env = ["AGENT_CANARY_API_KEY"]
    )
    .unwrap();
    let seen = run(named).await;
    assert!(
        seen.contains("sk-canary-5e1f"),
        "named, it is passed: {seen}"
    );
}

/// Chat Completions has no tool search: deferred tools stay out of the model's context
/// until the emulated `tool_search` loads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_tools_are_loaded_by_an_emulated_tool_search() {
    let dir = scratch("defer-emulated");
    std::fs::write(dir.join("notes.txt"), "deferred notes").unwrap();
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [{"name": "tool_search", "arguments": {"query": "read text"}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("notes.txt")}}]},
            {"echo_tools": true}
        ]),
    );
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .allow(["read_text_file", "list_directory"])
        .defer("fs", ["read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read the notes").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: deferred notes");
    let requests = model.requests();
    let mut first = offered(&requests[0]);
    first.sort();
    assert_eq!(
        first,
        ["list_directory", "tool_search"],
        "deferred: not offered yet"
    );
    let search = &requests[0]["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .unwrap()["function"]["description"];
    assert!(
        search.as_str().unwrap().contains("read_text_file"),
        "{search}"
    );
    let mut second = offered(&requests[1]);
    second.sort();
    assert_eq!(
        second,
        ["list_directory", "read_text_file"],
        "loaded by the search"
    );
    agent.close().await.unwrap();
}

/// The Anthropic Messages wire with its native tool search: deferred tools are sent
/// flagged with the search tool, and the search's blocks come back in the next request
/// exactly as the provider sent them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_with_native_tool_search_round_trip() {
    anthropic_round_trip(false).await;
}

/// The same, streamed: `input_json_delta` pieces make the tool input, provider blocks
/// still round-trip untouched, text reaches `on_text` as it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_streamed_round_trip() {
    anthropic_round_trip(true).await;
}

async fn anthropic_round_trip(streamed: bool) {
    let dir = scratch(if streamed {
        "anthropic-stream"
    } else {
        "anthropic"
    });
    std::fs::write(dir.join("notes.txt"), "anthropic notes").unwrap();
    let search_use = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "read file"}});
    let search_result = json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": "read_text_file"}]}});
    let model = FakeModel::start(
        &dir,
        json!([
            {"raw": [search_use, search_result,
                     {"type": "tool_use", "id": "toolu_1", "name": "read_text_file", "input": {"path": dir.join("notes.txt")}}],
             "stop_reason": "tool_use"},
            {"echo_tools": true}
        ]),
    );
    let pieces = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let agent = Agent::builder()
        .model(
            mcp_agent::Messages::new(format!("http://127.0.0.1:{}", model.port), "claude-test")
                .unwrap()
                .api_key("ANTHROPIC-KEY-CANARY")
                .on_text({
                    let pieces = pieces.clone();
                    move |t| pieces.lock().unwrap().push(t.to_owned())
                })
                // on_text turns streaming on; the unstreamed run turns it off again.
                .streaming(streamed),
        )
        .system("be brief")
        .allow(["read_text_file", "list_directory"])
        .defer("fs", ["read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read the notes").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: anthropic notes");
    let pieces = pieces.lock().unwrap().clone();
    if streamed {
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(pieces.concat(), text);
    } else {
        assert!(pieces.is_empty());
    }
    let requests = model.requests();
    let first = &requests[0];
    assert_eq!(first["body"]["stream"].as_bool().unwrap_or(false), streamed);
    assert_eq!(first["x-api-key"], "ANTHROPIC-KEY-CANARY");
    assert_eq!(first["anthropic-version"], "2023-06-01");
    assert_eq!(first["body"]["system"], "be brief");
    let tools = first["body"]["tools"].as_array().unwrap();
    let read = tools
        .iter()
        .find(|t| t["name"] == "read_text_file")
        .unwrap();
    assert_eq!(read["defer_loading"], true);
    assert!(tools.iter().any(|t| t["name"] == "tool_search_tool_bm25"));
    let assistant = &requests[1]["body"]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0], search_use);
    assert_eq!(assistant["content"][1], search_result);
    agent.close().await.unwrap();
}

/// With every log at trace level captured, a whole run — a model key, a server's
/// environment value, an HTTP server's token — never shows a secret in the logs, the
/// events, the run store or an error.
#[test]
fn secrets_never_reach_logs_events_or_the_store() {
    let captured = &observed().logs;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = scratch("canary");
    let mut shown = String::new();
    let py = PyServer::start_with(&["headers"]);
    let kept = rt.block_on(async {
        let model = FakeModel::start(
            &dir,
            json!([
                {"tool_calls": [
                    {"name": "list_directory", "arguments": {"path": dir}},
                    {"name": "echo", "arguments": {"message": "sent with the token"}}
                ]},
                {"echo_tools": true}
            ]),
        );
        // A server that is reached: the token goes with every request to it.
        let py_url = py.url();
        let reached = mcp_agent::mcp!(py, url = py_url, token = "HTTP-TOKEN-CANARY").unwrap();
        let store = dir.join("runs.sqlite3");
        let http = mcp_agent::mcp!(
            web,
            url = "http://127.0.0.1:9/mcp",
            token = "HTTP-TOKEN-CANARY"
        )
        .unwrap();
        let agent = Agent::builder()
            .model(
                ChatCompletions::new(model.url(), "m")
                    .unwrap()
                    .api_key("MODEL-KEY-CANARY"),
            )
            .allow(["list_directory", "echo"])
            .server(filesystem(&dir))
            .server(reached)
            .store(SqliteRunStore::open(&store).unwrap())
            .build()
            .unwrap();
        let Outcome::Finished { run_id, text, .. } =
            agent.run("list-the-canary-folder").await.unwrap()
        else {
            panic!()
        };
        assert!(text.contains("sent with the token"), "{text}");
        shown.push_str(&format!(
            "{agent:?} {:?}",
            agent.events(&run_id).await.unwrap()
        ));
        // An HTTP server that cannot be reached: its error names no token.
        shown.push_str(&http.tools().await.unwrap_err().to_string());
        let bad = Agent::builder()
            .model(
                ChatCompletions::new(model.url(), "m")
                    .unwrap()
                    .api_key("MODEL-KEY-CANARY"),
            )
            .server(http)
            .build()
            .unwrap();
        // The unreachable server is left out of the turn; its error is an event.
        let Outcome::Finished { run_id, .. } = bad.run("x").await.unwrap() else {
            panic!()
        };
        let events = format!("{:?}", bad.events(&run_id).await.unwrap());
        assert!(events.contains("ServerUnavailable"), "{events}");
        shown.push_str(&events);
        // What the store holds, in the database file and its write-ahead log, while
        // the agent's connection is open (the rows are in the log) ...
        let files = |store: &std::path::Path| {
            let mut bytes = Vec::new();
            for suffix in ["", "-wal", "-shm"] {
                let mut name = store.as_os_str().to_owned();
                name.push(suffix);
                bytes.extend(std::fs::read(std::path::PathBuf::from(name)).unwrap_or_default());
            }
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let open = files(&store);
        agent.close().await.unwrap();
        // ... and after the last connection closed (SQLite moves the log into the file).
        drop(agent);
        (open, files(&store))
    });
    let logs = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(logs.len() > 500, "trace logging was captured");
    // The positive control for the token: the client does send it to that server (read
    // after the logs were taken: the server's answer quotes it).
    let sent = rt.block_on(async {
        let url = py.url();
        let probe = mcp_agent::mcp!(py, url = url, token = "HTTP-TOKEN-CANARY").unwrap();
        let seen = probe
            .call("request_headers", json!({}))
            .await
            .unwrap()
            .text();
        probe.close().await.unwrap();
        seen
    });
    assert!(sent.contains("Bearer HTTP-TOKEN-CANARY"), "{sent}");
    let (open, closed) = kept;
    // The positive control: the reader sees the stored run (its prompt) both times.
    assert!(
        open.contains("list-the-canary-folder"),
        "the reader sees stored rows"
    );
    assert!(
        closed.contains("list-the-canary-folder"),
        "the reader sees stored rows"
    );
    let kept = format!("{open}{closed}");
    for secret in ["MODEL-KEY-CANARY", "ENV-CANARY-91c2", "HTTP-TOKEN-CANARY"] {
        assert!(!logs.contains(secret), "{secret} reached the logs");
        assert!(
            !shown.contains(secret),
            "{secret} reached Debug, events or an error: {shown}"
        );
        assert!(!kept.contains(secret), "{secret} reached the run store");
    }
}

/// Calls the model asks for in one turn run concurrently: the rendezvous server answers
/// "met" only when all calls of a group are in flight at once (no timing involved).
/// Every call of the turn goes through the gate first (a denied one ends there); then
/// all the allowed ones run together. Events keep the model's order, and the results
/// answer the calls in the order the model asked for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turns_calls_run_concurrently_in_order() {
    let dir = scratch("parallel");
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "meet", "arguments": {"group": "a", "count": 3}},
                {"name": "meet", "arguments": {"group": "a", "count": 3}},
                {"name": "meet", "arguments": {"group": "a", "count": 3}},
                {"name": "not_allowed", "arguments": {}},
                {"name": "meet", "arguments": {"group": "b", "count": 1}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let server = Mcp::builder("rendezvous")
        .command([
            peers().join("venv/bin/python").display().to_string(),
            repo_root()
                .join("tests/peers/rendezvous.py")
                .display()
                .to_string(),
        ])
        .build()
        .unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let e = events.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .allow(["meet"])
        .server(server)
        .on_event(move |_, ev| e.lock().unwrap().push(ev.clone()))
        .build()
        .unwrap();
    let out = agent.run("meet").await.unwrap();
    let Outcome::Finished { text, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(text.matches("meet: met").count(), 4, "{text}");
    assert!(
        !text.contains("alone"),
        "calls ran one after another: {text}"
    );
    assert!(text.contains("not_allowed: {\"error\""), "{text}");
    let kinds: Vec<&str> = events
        .lock()
        .unwrap()
        .iter()
        .map(|e| match e {
            Event::BeforeToolCall { .. } => "before",
            Event::AfterToolResult { .. } => "after",
            Event::Denied { .. } => "denied",
            _ => "",
        })
        .filter(|k| !k.is_empty())
        .collect();
    assert_eq!(
        kinds,
        ["denied", "before", "before", "before", "before", "after", "after", "after", "after"]
    );
    // The transcript answers the calls in the model's order.
    let requests = model.requests();
    let last = &requests[1]["body"]["messages"];
    let ids: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    let asked: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, asked);
    agent.close().await.unwrap();
}

/// Progress a tool reports reaches the callbacks as it arrives and is kept with the run,
/// between the call's before and after events (the seed's `after_tool_progress`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_progress_is_an_event() {
    let dir = scratch("progress");
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [{"name": "slow", "arguments": {"seconds": 0.3, "steps": 3}}]},
            {"echo_tools": true}
        ]),
    );
    let server = Mcp::builder("py")
        .command([
            peers().join("venv/bin/python").display().to_string(),
            repo_root()
                .join("tests/peers/pyserver.py")
                .display()
                .to_string(),
            "stdio".into(),
        ])
        .build()
        .unwrap();
    let live = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = live.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .allow(["slow"])
        .server(server)
        .on_event(move |_, ev| {
            if let Event::ToolProgress { .. } = ev {
                l.lock().unwrap().push(ev.clone());
            }
        })
        .build()
        .unwrap();
    let out = agent.run("go slowly").await.unwrap();
    let Outcome::Finished { text, run_id, .. } = out else {
        panic!("{out:?}")
    };
    assert!(text.contains("slow: done"), "{text}");
    let kinds: Vec<String> = agent
        .events(&run_id)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::BeforeToolCall { .. } => Some("before".to_owned()),
            Event::AfterToolResult { .. } => Some("after".to_owned()),
            Event::ToolProgress {
                progress,
                total,
                message,
                tool,
                ..
            } => {
                assert_eq!(tool, "slow");
                assert_eq!(*total, Some(3.0));
                Some(format!(
                    "{progress} {}",
                    message.as_deref().unwrap_or_default()
                ))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        ["before", "1 step 1/3", "2 step 2/3", "3 step 3/3", "after"]
    );
    assert_eq!(live.lock().unwrap().len(), 3);
    agent.close().await.unwrap();
}

/// Chat Completions streamed: tool-call arguments arrive in fragments by index, text in
/// deltas (each reaching `on_text`), `[DONE]` ends it; the run is the same as unstreamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_streamed_round_trip() {
    let dir = scratch("openai-stream");
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    std::fs::write(dir.join("b.txt"), "beta").unwrap();
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}},
                {"name": "read_text_file", "arguments": {"path": dir.join("b.txt")}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let pieces = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let p = pieces.clone();
    let agent = Agent::builder()
        .model(
            ChatCompletions::new(model.url(), "fake-model")
                .unwrap()
                .on_text(move |t| p.lock().unwrap().push(t.to_owned())),
        )
        .allow(["read_text_file"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read both").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "read_text_file: alpha\nread_text_file: beta");
    let pieces = pieces.lock().unwrap().clone();
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), text);
    let requests = model.requests();
    assert_eq!(requests[0]["body"]["stream"], true);
    // The assembled calls went back to the model with their ids and whole arguments.
    let assistant = &requests[1]["body"]["messages"][1];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_0_0");
    assert_eq!(assistant["tool_calls"][1]["id"], "call_0_1");
    let args: Value = serde_json::from_str(
        assistant["tool_calls"][1]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args["path"], dir.join("b.txt").display().to_string());
    agent.close().await.unwrap();
}

/// The project's PyPI server over loopback HTTP (both eras), killed when dropped.
struct PyServer {
    _child: Killed,
    port: u16,
}

impl PyServer {
    fn start() -> PyServer {
        PyServer::start_with(&[])
    }

    /// With `pyserver.py`'s flags (`stateless`, `json`, `headers`).
    fn start_with(flags: &[&str]) -> PyServer {
        PyServer::start_env(flags, &[])
    }

    /// With flags and environment variables (`PYSERVER_SIGN_ONLY_STATE`, …).
    fn start_env(flags: &[&str], env: &[(&str, &str)]) -> PyServer {
        let port = free_port();
        let child = Command::new(peers().join("venv/bin/python"))
            .arg(repo_root().join("tests/peers/pyserver.py"))
            .args(["http", &port.to_string()])
            .args(flags)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = PyServer {
            _child: Killed(child),
            port,
        };
        // However slowly it starts: only a listening socket ends the wait.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "pyserver never listened on {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

fn python_server(url: &str) -> Mcp {
    Mcp::builder("py")
        .url(url)
        .extension("io.modelcontextprotocol/tasks", json!({}))
        .build()
        .unwrap()
}

async fn input_agent(dir: &Path, model_url: &str, server_url: &str, store: &str) -> Agent {
    Agent::builder()
        .model(ChatCompletions::new(model_url, "fake-model").unwrap())
        .mode(Mode::Auto)
        .server(python_server(server_url))
        .store(store_for(dir, store).await)
        .build()
        .unwrap()
}

/// The first process of [`input_requests_suspend_and_resume_across_processes`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the first process of input_requests_suspend_and_resume_across_processes, which runs it"]
async fn input_suspending_process() {
    let dir = PathBuf::from(std::env::var("MCP_TEST_DIR").expect("set by the test that runs this"));
    let model = std::env::var("MCP_TEST_MODEL").expect("set by the test that runs this");
    let server = std::env::var("MCP_TEST_SERVER").expect("set by the test that runs this");
    let store = std::env::var("MCP_TEST_STORE").expect("set by the test that runs this");
    let agent = input_agent(&dir, &model, &server, &store).await;
    match agent.run("greet me, then work").await.unwrap() {
        Outcome::InputRequired {
            run_id,
            tool,
            requests,
            decision,
            ..
        } => {
            assert_eq!(requests.len(), 1, "{requests:?}");
            println!(
                "suspended run={run_id} tool={tool} key={} decision={decision}",
                requests[0].0
            );
        }
        other => panic!("{other:?}"),
    }
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_requests_suspend_and_resume_across_processes_sqlite() {
    input_requests_suspend_and_resume_across_processes("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_requests_suspend_and_resume_across_processes_postgres() {
    let pg = Postgres::start();
    input_requests_suspend_and_resume_across_processes(&pg.url).await;
}

/// A model asks for two calls in one turn whose server (2026-07-28, over HTTP) asks
/// for input: `ask_name` directly, `long_task` from a background task. No callback
/// answers, so the run suspends — in one process — and is answered in another: the
/// first call's answer goes back with the server's sealed state, the second's to the
/// task, which kept running on the server meanwhile (the run's pending task).
async fn input_requests_suspend_and_resume_across_processes(store: &str) {
    use mcp_runtime::InputResponse;
    let tag = if store.starts_with("postgres://") {
        "input-pg"
    } else {
        "input-sqlite"
    };
    let dir = scratch(tag);
    let py = PyServer::start();
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "ask_name", "arguments": {}},
                {"name": "long_task", "arguments": {"seconds": 0.3, "ask": true}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let line = suspended_line(
        "input_suspending_process",
        &[
            ("MCP_TEST_DIR", dir.display().to_string()),
            ("MCP_TEST_MODEL", model.url()),
            ("MCP_TEST_SERVER", py.url()),
            ("MCP_TEST_STORE", store.to_owned()),
        ],
    );
    let fields: Vec<&str> = line.split(' ').collect();
    let run = fields[1].trim_start_matches("run=").to_owned();
    assert_eq!(fields[2], "tool=ask_name", "{line}");
    let key = fields[3].trim_start_matches("key=").to_owned();
    let (_, decision) = parse_suspended(&line);

    // Another process: the task the second call became waits on the server.
    let agent = input_agent(&dir, &model.url(), &py.url(), store).await;
    let tasks = agent.pending_tasks(&run).await.unwrap();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].0, "py");
    // An approval is not an answer: refused, the run waits on, untouched.
    let e = agent
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(
        e.is_stale_decision() && e.to_string().contains("Decision::answer"),
        "{e}"
    );
    // Two answers at once: one wins.
    let answer = || {
        Decision::answer(
            "ann",
            [(key.clone(), InputResponse::accept(json!({"name": "Ann"})))],
        )
    };
    let (a, b) = tokio::join!(
        agent.resume(&run, &decision, answer()),
        agent.resume(&run, &decision, answer())
    );
    let (next, lost) = match (a, b) {
        (Ok(o), Err(e)) | (Err(e), Ok(o)) => (o, e),
        other => panic!("exactly one resume must win: {other:?}"),
    };
    assert!(lost.is_stale_decision(), "{lost}");
    // The next call waits for its own input: the task's, in a new suspension.
    let Outcome::InputRequired {
        tool,
        requests,
        decision: next_decision,
        ..
    } = next
    else {
        panic!("{next:?}")
    };
    assert_ne!(next_decision, decision);
    assert_eq!(tool, "long_task");
    assert_eq!(requests.len(), 1);
    assert!(requests[0].1.message.contains("What is your name?"));
    let done = agent
        .resume(
            &run,
            &next_decision,
            Decision::answer(
                "bob",
                [(
                    requests[0].0.clone(),
                    InputResponse::accept(json!({"name": "Bob"})),
                )],
            ),
        )
        .await
        .unwrap();
    let Outcome::Finished { text, .. } = done else {
        panic!("{done:?}")
    };
    assert!(text.contains("ask_name: Hello, Ann"), "{text}");
    assert!(
        text.contains("long_task: done after 0.3s for Bob"),
        "{text}"
    );
    assert!(agent.pending_tasks(&run).await.unwrap().is_empty());
    let events = agent.events(&run).await.unwrap();
    let requested = events
        .iter()
        .filter(|e| matches!(e, Event::InputRequested { .. }))
        .count();
    assert_eq!(requested, 2, "{events:?}");
    assert!(events.iter().any(
        |e| matches!(e, Event::InputRequested { tool, task: Some(_), .. } if tool == "long_task")
    ));
    let answered: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::InputAnswered { by, actions, .. } if actions == &["accept"] => Some(by.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["ann", "bob"], "{events:?}");
    // The answers themselves are not in the events.
    assert!(!serde_json::to_string(&events).unwrap().contains("Bob"));
    agent.close().await.unwrap();
}

/// An `on_input` callback answers in place: nothing suspends; a denial of a run that
/// waits for input declines it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_callbacks_answer_and_a_denial_declines() {
    use mcp_runtime::InputResponse;
    let dir = scratch("input-callback");
    let py = PyServer::start();
    let model = FakeModel::start(
        &dir,
        json!([
            {"tool_calls": [{"name": "ask_name", "arguments": {}}]},
            {"echo_tools": true},
            {"tool_calls": [{"name": "ask_name", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::ReadOnly)
        .allow(["ask_name"])
        .server(python_server(&py.url()))
        .on_input(move |ask| {
            seen.lock()
                .unwrap()
                .push((ask.tool.clone(), ask.request.message.clone()));
            let answer = (seen.lock().unwrap().len() == 1)
                .then(|| InputResponse::accept(json!({"name": "Cy"})));
            async move { answer }
        })
        .build()
        .unwrap();
    let Outcome::Finished { text, run_id, .. } = agent.run("greet").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "ask_name: Hello, Cy");
    assert!(agent
        .events(&run_id)
        .await
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::InputAnswered { by, .. } if by == "on_input")));
    assert_eq!(asked.lock().unwrap()[0].0, "ask_name");
    // The callback answers no more: the run suspends; denying declines.
    let Outcome::InputRequired {
        run_id, decision, ..
    } = agent.run("greet again").await.unwrap()
    else {
        panic!()
    };
    let Outcome::Finished { text, .. } = agent
        .resume(&run_id, &decision, Decision::deny("dan"))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(text, "ask_name: declined");
    agent.close().await.unwrap();
}
mod applications;
mod batch;
mod decisions;
mod gate_props;
mod real_llm;
mod recovery;
mod seams;
mod security;
mod settings;
mod skills;
mod traces;

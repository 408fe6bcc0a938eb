#![allow(clippy::unwrap_used)]
//! The agent against real peers — npm server-filesystem and server-everything, the
//! project's PyPI server, a scripted model behind the real wires over loopback HTTP
//! (tests/peers/fake_model.py, replay_model.py), real SQLite files and a real
//! PostgreSQL — one module per concern: the gate, suspension across processes, the
//! model wires, batch decisions, decisions, recovery, security, the seams, settings,
//! applications, real servers' quirks, traces, skills. `support` has what they share;
//! here: `mcp!` attach lines and the secrets canary.

use std::path::{Path, PathBuf};

use mcp_agent::{
    Agent, ChatCompletions, Decision, Event, Mode, Outcome, PostgresRunStore, RunStore,
    SqliteRunStore,
};
use mcp_runtime::Mcp;
use serde_json::{json, Value};

mod support;
pub(crate) use support::*;

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
    let fs = mcp_agent::mcp!(fs, command(bin.display(), dir.display())).unwrap();
    let names: Vec<String> = fs
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"read_text_file".to_owned()), "{names:?}");
    fs.close().await.unwrap();

    // The shaping and policy keys of `#[mcp]` work on the line too.
    let shaped = mcp_agent::mcp!(
        files,
        command(bin.display(), dir.display()),
        prefix = "fs",
        only(read_text_file, "list_directory"),
        requires_approval(list_directory),
        timeout = 20,
    )
    .unwrap();
    let tools = shaped.tools().await.unwrap();
    let mut names: Vec<(&str, bool)> = tools
        .iter()
        .map(|t| (t.name.as_str(), t.requires_approval()))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [("fs_list_directory", true), ("fs_read_text_file", false)]
    );
    shaped.close().await.unwrap();
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
    let model = ModelServer::scripted(
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
    let plain = mcp_agent::mcp!(everything, command(bin.display(), "stdio")).unwrap();
    let seen = run(plain).await;
    assert!(
        seen.contains("PATH"),
        "the reader sees the environment: {seen}"
    );
    assert!(!seen.contains("sk-canary-5e1f"), "{seen}");
    let named = mcp_agent::mcp!(
        everything,
        command(bin.display(), "stdio"),
        inherit_env("AGENT_CANARY_API_KEY")
    )
    .unwrap();
    let seen = run(named).await;
    assert!(
        seen.contains("sk-canary-5e1f"),
        "named, it is passed: {seen}"
    );
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
        let model = ModelServer::scripted(
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
        let reached =
            mcp_agent::mcp!(py, url = py_url, bearer_token = "HTTP-TOKEN-CANARY").unwrap();
        let store = dir.join("runs.sqlite3");
        let http = mcp_agent::mcp!(
            web,
            url = "http://127.0.0.1:9/mcp",
            bearer_token = "HTTP-TOKEN-CANARY"
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
        let probe = mcp_agent::mcp!(py, url = url, bearer_token = "HTTP-TOKEN-CANARY").unwrap();
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

mod applications;
mod batch;
mod bindings;
mod browser;
mod compaction;
mod decisions;
mod gate;
mod gate_props;
mod hooks;
mod inbox;
mod models;
mod owners;
mod provider;
mod real_llm;
mod recovery;
mod responses;
mod retries;
mod rollback;
mod saves;
mod schemas;
mod seams;
mod security;
mod settings;
mod skills;
mod store_suite;
mod subagents;
mod suspension;
mod teardown;
mod traces;
mod typed;
mod watch;
mod web_api;
mod workers;

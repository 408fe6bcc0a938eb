//! The gate's seams through the agent loop, against real servers and the scripted
//! model over real HTTP: a `#[mcp]`-declared struct attached with its shaping and an
//! approval predicate evaluated for every call; app-only tools; `Ask` mode; collisions
//! the configuration makes certain; an `mcp!` HTTP line's rotating token against an
//! `Authorization` header; a per-server `defer` override.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mcp_agent::runtime::Mcp;
use mcp_agent::{Agent, ChatCompletions, Decision, Event, Mode, Outcome};
use mcp_runtime::{mcp, Tool};
use serde_json::{json, Value};

use super::{filesystem, offered, peers, python_server, scratch, ModelServer, PyServer};

fn fs_bin() -> String {
    peers()
        .join("npm/node_modules/.bin/mcp-server-filesystem")
        .display()
        .to_string()
}

/// The content of the tool results the model was sent in request `n`.
fn results(model: &ModelServer, n: usize) -> Vec<String> {
    model.requests()[n]["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn events_into(sink: &Arc<Mutex<Vec<Event>>>) -> impl Fn(&str, &Event) + Send + Sync + 'static {
    let sink = sink.clone();
    move |_, e| sink.lock().unwrap().push(e.clone())
}

/// The filesystem server, declared as an application would: a prefix, a renamed tool
/// whose `path` is fixed to the struct's root, and an approval predicate that reads
/// the application's state.
#[mcp(
    transport = Self::server,
    prefix = "files",
    only(list_directory, read_text_file, write_file),
    tool(list_directory, as = ls, fixed_arguments(path = Self::root)),
    requires_approval(if = Self::risky),
)]
pub struct Files {
    root: String,
    lockdown: Arc<AtomicBool>,
}

impl Files {
    fn server(&self) -> mcp_runtime::StdioTransport {
        mcp_runtime::StdioTransport::new(mcp_runtime::StdioConfig::new(fs_bin()).arg(&self.root))
    }
    fn root(&self) -> String {
        self.root.clone()
    }
    fn risky(&self, tool: &Tool) -> bool {
        self.lockdown.load(Ordering::SeqCst) && tool.name == "read_text_file"
    }
}

/// Attached to an agent in `Auto` mode, a declared struct keeps its shaping (the model
/// sees `ls` without `path`, and `files_*`), and its approval predicate is evaluated
/// for every call: the same tool runs while the application's flag is off, and the
/// next call suspends for a person once it is on — `Auto` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_struct_keeps_its_shaping_and_its_approvals_apply_per_call() {
    let dir = scratch("seams-declared");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "alpha").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "ls", "arguments": {}}]},
            {"tool_calls": [{"name": "files_read_text_file", "arguments": {"path": notes}}]},
            {"tool_calls": [{"name": "files_read_text_file", "arguments": {"path": notes}}]},
            {"echo_tools": true}
        ]),
    );
    let lockdown = Arc::new(AtomicBool::new(false));
    let files = Files::new(dir.display().to_string(), lockdown.clone());
    let flag = lockdown.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Auto)
        .server(&files)
        .on_event(move |_, e| {
            // The application locks down after the first read.
            if matches!(e, Event::AfterToolResult { tool, .. } if tool == "files_read_text_file") {
                flag.store(true, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    let outcome = agent.run("read the notes twice").await.unwrap();
    let Outcome::ApprovalRequired {
        run_id,
        decision,
        server,
        tool,
        ..
    } = outcome
    else {
        panic!("the second read must wait for a person: {outcome:?}")
    };
    assert_eq!(
        (server.as_str(), tool.as_str()),
        ("files", "files_read_text_file")
    );

    // The model saw the shaped names, and `ls` without the fixed argument.
    let first = &model.requests()[0];
    let mut names = offered(first);
    names.sort();
    assert_eq!(names, ["files_read_text_file", "files_write_file", "ls"]);
    let ls = first["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "ls")
        .unwrap();
    assert!(
        ls["function"]["parameters"]["properties"]
            .get("path")
            .is_none(),
        "{ls}"
    );
    // `ls` listed the struct's root (the fixed argument reached the server); the first
    // read ran without a person.
    assert!(
        results(&model, 1)[0].contains("notes.txt"),
        "{:?}",
        results(&model, 1)
    );
    assert!(results(&model, 2).iter().any(|r| r.contains("alpha")));

    let done = agent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    let Outcome::Finished { text, .. } = done else {
        panic!("{done:?}")
    };
    assert_eq!(text, "files_read_text_file: alpha");
    agent.close().await.unwrap();
}

/// A tool only an MCP App may call (`visibility: ["app"]`) is never offered, even in
/// `Auto` mode, and a model that names it anyway is denied; the app-and-model tool is
/// offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_only_tools_are_never_offered_nor_run() {
    let dir = scratch("seams-app-only");
    let py = PyServer::start();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "chart_data", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Auto)
        .server(python_server(&py.url()))
        .on_event(events_into(&events))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("chart").await.unwrap() else {
        panic!()
    };
    let names = offered(&model.requests()[0]);
    assert!(names.iter().any(|n| n == "show_chart"), "{names:?}");
    assert!(!names.iter().any(|n| n == "chart_data"), "{names:?}");
    assert!(text.starts_with("chart_data: {\"error\""), "{text}");
    let events = events.lock().unwrap().clone();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Denied { tool, .. } if tool == "chart_data")));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::BeforeToolCall { tool, .. } if tool == "chart_data")));
    agent.close().await.unwrap();
}

/// `Ask` mode end to end: an allow-listed tool runs without asking; every other call
/// goes to the callback with its server, name and arguments, and runs only if it says
/// yes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_mode_asks_the_callback_for_every_call_not_allowed() {
    let dir = scratch("seams-ask");
    let (yes, no) = (dir.join("yes.txt"), dir.join("no.txt"));
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "list_directory", "arguments": {"path": dir}},
                {"name": "write_file", "arguments": {"path": yes, "content": "y"}},
                {"name": "write_file", "arguments": {"path": no, "content": "n"}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let asked: Arc<Mutex<Vec<(String, String, Value)>>> = Arc::default();
    let seen = asked.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::ask(move |server, tool, args| {
            seen.lock()
                .unwrap()
                .push((server.to_owned(), tool.to_owned(), args.clone()));
            let ok = args["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("yes.txt"));
            async move { ok }
        }))
        .allow(["list_directory"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("write two files").await.unwrap() else {
        panic!()
    };
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    for (server, tool, _) in &asked {
        assert_eq!((server.as_str(), tool.as_str()), ("fs", "write_file"));
    }
    assert_eq!(std::fs::read_to_string(&yes).unwrap(), "y");
    assert!(!no.exists(), "the callback said no");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("list_directory: "), "{text}");
    assert!(!lines[1].contains("error"), "{text}");
    assert!(lines[2].starts_with("write_file: {\"error\""), "{text}");
    agent.close().await.unwrap();
}

/// Collisions the configuration makes certain are configuration errors when the agent
/// is built, naming what to fix: two servers of one name; two declarations that both
/// give the model one tool name. A prefix solves the second, and the prefixed tool
/// runs. (Collisions that appear only when the servers answer hide the later tool:
/// `security::one_server_cannot_stop_the_agent`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collisions_the_configuration_makes_certain_fail_the_build() {
    let dir = scratch("seams-collide");
    std::fs::write(dir.join("a.txt"), "A").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "b_read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"echo_tools": true}
        ]),
    );
    let server = |name: &str, prefix: Option<&str>| {
        let mut b = Mcp::builder(name)
            .command([fs_bin(), dir.display().to_string()])
            .only(["read_text_file"]);
        if let Some(p) = prefix {
            b = b.prefix(p);
        }
        b.build().unwrap()
    };
    let build = |servers: Vec<Mcp>| {
        let mut b = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Auto);
        for s in servers {
            b = b.server(s);
        }
        b.build()
    };
    let e = build(vec![server("a", None), server("a", Some("b"))]).unwrap_err();
    assert!(
        e.is_config() && e.to_string().contains("two servers are named `a`"),
        "{e}"
    );
    let e = build(vec![server("a", None), server("b", None)]).unwrap_err();
    let msg = e.to_string();
    assert!(
        e.is_config()
            && msg.contains("`b` and `a` both offer a tool named `read_text_file`")
            && msg.contains("prefix"),
        "{msg}"
    );
    let agent = build(vec![server("a", None), server("b", Some("b"))]).unwrap();
    let Outcome::Finished { text, .. } = agent.run("read a").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "b_read_text_file: A");
    agent.close().await.unwrap();
}

/// An `mcp!` HTTP line with a closure token and an `Authorization` header, against a
/// real server that reports the headers it received: the token is read again for
/// every request (it rotates with no reconnect) and wins over the header; the other
/// headers go as given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attach_lines_rotating_token_is_reread_and_wins() {
    let dir = scratch("seams-token");
    let py = PyServer::start_with(&["headers"]);
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "request_headers", "arguments": {}}]},
            {"tool_calls": [{"name": "request_headers", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let minted = Arc::new(AtomicUsize::new(0));
    let mint = minted.clone();
    let url = py.url();
    let server = mcp_agent::mcp!(
        py,
        url = url,
        header("Authorization", "Bearer static-header"),
        header("X-Team", "blue"),
        bearer_token = move || format!("rotating-{}", mint.fetch_add(1, Ordering::SeqCst)),
    )
    .unwrap();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Auto)
        .server(server)
        .build()
        .unwrap();
    let Outcome::Finished { .. } = agent.run("headers twice").await.unwrap() else {
        panic!()
    };
    let seen: Vec<Value> = [1, 2]
        .iter()
        .map(|&n| serde_json::from_str(&results(&model, n).last().unwrap().clone()).unwrap())
        .collect();
    let auth: Vec<&str> = seen
        .iter()
        .map(|h| h["authorization"].as_str().unwrap())
        .collect();
    for (a, h) in auth.iter().zip(&seen) {
        // One Authorization header (the server shows a repeated one as "a, b").
        assert!(
            a.starts_with("Bearer rotating-") && !a.contains(','),
            "the token wins: {h}"
        );
        assert_eq!(h["x-team"], "blue", "{h}");
    }
    assert_ne!(
        auth[0], auth[1],
        "the token is read again for every request"
    );
    assert!(minted.load(Ordering::SeqCst) >= 2);
    agent.close().await.unwrap();
}

/// `AgentBuilder::defer(server, names)` overrides one server's declaration (an empty
/// list: every tool of it, as in a declaration) and `defer_none(server)` undoes a
/// declaration's; other servers keep theirs. A server that is not attached is a
/// configuration error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_server_defer_overrides_only_that_server() {
    let dir = scratch("seams-defer");
    let py = PyServer::start();
    let model = ModelServer::scripted(&dir, json!([{"text": "ok"}, {"text": "ok"}]));
    let deferring_py = || {
        Mcp::builder("py")
            .url(py.url())
            .defer(Vec::<String>::new())
            .build()
            .unwrap()
    };
    let agent = |fs_all: bool, py_none: bool| {
        let mut b = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Auto)
            .server(filesystem(&dir))
            .server(deferring_py());
        if fs_all {
            b = b.defer("fs", Vec::<String>::new());
        }
        if py_none {
            b = b.defer_none("py");
        }
        b.build().unwrap()
    };
    // As declared: py's tools are deferred (behind the tool search), fs's offered.
    let declared = agent(false, false);
    declared.run("hi").await.unwrap();
    let names = offered(&model.requests()[0]);
    assert!(names.iter().any(|n| n == "tool_search"), "{names:?}");
    assert!(names.iter().any(|n| n == "read_text_file"), "{names:?}");
    assert!(!names.iter().any(|n| n == "echo"), "{names:?}");
    declared.close().await.unwrap();
    // Overridden per server: the other way round.
    let flipped = agent(true, true);
    flipped.run("hi").await.unwrap();
    let names = offered(&model.requests()[1]);
    assert!(names.iter().any(|n| n == "tool_search"), "{names:?}");
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    assert!(!names.iter().any(|n| n == "read_text_file"), "{names:?}");
    flipped.close().await.unwrap();

    let e = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .server(filesystem(&dir))
        .defer("nope", ["x"])
        .build()
        .unwrap_err();
    assert!(e.is_config() && e.to_string().contains("`nope`"), "{e}");
}

/// A server that is down keeps the tool names it declares (or offered when last
/// listed): another server attached after it does not take them meanwhile — an
/// allow-list entry meant for the first server's tool never runs the second's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_servers_tool_names_are_not_taken_by_another() {
    let dir = scratch("seams-reserved");
    std::fs::write(dir.join("a.txt"), "A").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"echo_tools": true}
        ]),
    );
    let down = Mcp::builder("vault")
        .command([dir.join("no-such-server").display().to_string()])
        .only(["read_text_file"])
        .build()
        .unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .allow(["read_text_file"])
        .server(down)
        .server(filesystem(&dir))
        .on_event(events_into(&events))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("read a").await.unwrap() else {
        panic!()
    };
    assert!(text.starts_with("read_text_file: {\"error\""), "{text}");
    assert!(!offered(&model.requests()[0])
        .iter()
        .any(|n| n == "read_text_file"));
    let events = events.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(e,
        Event::ToolHidden { server, tool, reason }
            if server == "fs" && tool == "read_text_file" && reason.contains("`vault`"))));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::BeforeToolCall { .. })));
    agent.close().await.unwrap();
}

/// The tools follow the servers: a tool a server adds during a run (it announces
/// `list_changed`) is offered from the model's next turn and runs; the change is an
/// event. (Over stdio in the 2025 era the announcement comes before the call's result,
/// on the same pipe: the next turn is sure to have heard it. Over HTTP it rides
/// another stream and may arrive a turn later.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_during_a_run_is_offered_at_the_next_turn() {
    let dir = scratch("seams-list-changed");
    let py = Mcp::builder("py")
        .command([
            peers().join("venv/bin/python").display().to_string(),
            super::repo_root()
                .join("tests/peers/pyserver.py")
                .display()
                .to_string(),
            "stdio".into(),
        ])
        .env("PYSERVER_ERA", "legacy")
        .build()
        .unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "add_tool", "arguments": {}}]},
            {"tool_calls": [{"name": "extra_tool", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Auto)
        .server(py)
        .on_event(events_into(&events))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("grow").await.unwrap() else {
        panic!()
    };
    assert_eq!(text, "extra_tool: extra");
    assert!(!offered(&model.requests()[0])
        .iter()
        .any(|n| n == "extra_tool"));
    assert!(offered(&model.requests()[1])
        .iter()
        .any(|n| n == "extra_tool"));
    let events = events.lock().unwrap().clone();
    assert!(
        events.iter().any(|e| matches!(e,
            Event::ToolsChanged { added, .. } if added == &["extra_tool".to_owned()])),
        "{events:?}"
    );
    agent.close().await.unwrap();
}

/// A real server that serves a tool named outside the spec's rule (a space and a
/// right-to-left override): the tool is hidden, never offered or run; the event names
/// it escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_named_outside_the_rule_is_hidden() {
    let dir = scratch("seams-bad-name");
    let py = PyServer::start_env(&[], &[("PYSERVER_BAD_TOOL_NAME", "1")]);
    let bad = "read\u{202e}file now";
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": bad, "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Auto)
        .server(python_server(&py.url()))
        .on_event(events_into(&events))
        .build()
        .unwrap();
    let Outcome::Finished { text, .. } = agent.run("call it").await.unwrap() else {
        panic!()
    };
    let names = offered(&model.requests()[0]);
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("file now")), "{names:?}");
    assert!(text.contains("{\"error\""), "{text}");
    let events = events.lock().unwrap().clone();
    let hidden: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolHidden { tool, reason, .. } if reason.contains("rule") => Some(tool),
            _ => None,
        })
        .collect();
    assert_eq!(hidden, [&"read\\u{202e}file now".to_owned()], "{events:?}");
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::BeforeToolCall { .. })));
    agent.close().await.unwrap();
}

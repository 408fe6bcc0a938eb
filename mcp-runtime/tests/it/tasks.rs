//! Tasks and MCP Apps against real servers: the project's PyPI server (its
//! `long_task` in both eras — the 2026-07-28 tasks extension and the 2025-11-25
//! experimental tasks — over stdio and HTTP; its `show_chart` app) and npm
//! server-everything's task-only `simulate-research-query` (2025-11-25).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_runtime::{
    client::Era, client::ProtocolMode, client::Started, client::Task, client::TaskState, Change,
    Client, ClientBuilder, HttpConfig, InputRequest, InputResponse, Mcp,
};
use serde_json::{json, Value};

use crate::support::{self, HttpServer};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Declares the tasks extension and answers every form with a name.
fn builder() -> ClientBuilder {
    Client::builder()
        .extension(TASKS, json!({}))
        .input_handler(|_req: InputRequest| async { InputResponse::accept(json!({"name": "Ann"})) })
}

fn task(started: Started) -> Task {
    match started {
        Started::Task(t) => t,
        Started::Done(r) => panic!("the server ran it at once: {}", r.text()),
    }
}

/// One era, one transport: start, status, input mid-way, result, failure, cancel, and
/// the transparent wait of `call`.
async fn the_whole_life_of_a_task(c: &Client, era: Era) {
    assert_eq!(c.connect().await.unwrap().era, era);
    // Started, then waited for.
    let t = task(c.start("long_task", json!({"seconds": 0.5})).await.unwrap());
    assert_eq!(t.last_status().unwrap().state, TaskState::Working);
    assert!(!t.id().is_empty());
    assert!(t.result().await.unwrap().is_none(), "still running");
    let r = t.wait().await.unwrap();
    assert_eq!(r.text(), "done after 0.5s");
    assert_eq!(t.status().await.unwrap().state, TaskState::Completed);
    assert_eq!(t.result().await.unwrap().unwrap().text(), "done after 0.5s");
    // Input asked half-way: answered by the input handler.
    let t = task(
        c.start("long_task", json!({"seconds": 0.4, "ask": true}))
            .await
            .unwrap(),
    );
    assert_eq!(t.wait().await.unwrap().text(), "done after 0.4s for Ann");
    // A failed task is a protocol error.
    let t = task(
        c.start("long_task", json!({"seconds": 0.2, "fail": true}))
            .await
            .unwrap(),
    );
    let e = t.wait().await.unwrap_err();
    assert!(e.is_protocol() && e.code() == Some(-32603), "{e}");
    // Cancelled.
    let t = task(c.start("long_task", json!({"seconds": 60})).await.unwrap());
    t.cancel().await.unwrap();
    let e = t.wait().await.unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    assert_eq!(t.status().await.unwrap().state, TaskState::Cancelled);
    // `call` waits for a task transparently (2026: the server answers with one;
    // 2025-11-25: a plain call, since the tool only optionally runs as a task).
    let r = c
        .call("long_task", json!({"seconds": 0.2, "ask": true}))
        .await
        .unwrap();
    assert_eq!(r.text(), "done after 0.2s for Ann");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_over_stdio_in_both_eras() {
    let modern = builder().stdio(support::pyserver()).unwrap();
    the_whole_life_of_a_task(&modern, Era::Modern).await;
    modern.close().await.unwrap();
    let legacy = builder()
        .protocol(ProtocolMode::Legacy)
        .stdio(support::pyserver())
        .unwrap();
    the_whole_life_of_a_task(&legacy, Era::Legacy).await;
    legacy.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_over_http_in_both_eras_and_picked_up_by_another_client() {
    let server = HttpServer::python(&[]);
    for era in [Era::Modern, Era::Legacy] {
        let mode = if era == Era::Modern {
            ProtocolMode::Modern
        } else {
            ProtocolMode::Legacy
        };
        let c = builder()
            .protocol(mode)
            .http(HttpConfig::new(server.url("/mcp")))
            .unwrap();
        the_whole_life_of_a_task(&c, era).await;
        // Started by one client, finished by another that only knows the id.
        let id = task(c.start("long_task", json!({"seconds": 0.5})).await.unwrap())
            .id()
            .to_owned();
        c.close().await.unwrap();
        let other = builder()
            .protocol(mode)
            .http(HttpConfig::new(server.url("/mcp")))
            .unwrap();
        let picked = other.task(&id);
        assert_eq!(picked.wait().await.unwrap().text(), "done after 0.5s");
        other.close().await.unwrap();
    }
}

/// The client process of [`a_task_outlives_its_client_process`]: starts a task, writes
/// its id, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the client process of a_task_outlives_its_client_process, which runs it"]
async fn task_starter_process() {
    let url = std::env::var("MCP_TEST_URL").expect("set by the test that runs this");
    let out = std::env::var("MCP_TEST_TASK_FILE").expect("set by the test that runs this");
    let c = builder().http(HttpConfig::new(url)).unwrap();
    let t = task(c.start("long_task", json!({"seconds": 3})).await.unwrap());
    std::fs::write(format!("{out}.tmp"), t.id()).unwrap();
    std::fs::rename(format!("{out}.tmp"), &out).unwrap();
    std::future::pending::<()>().await;
}

/// A client process is killed mid-task; a new one picks the task up by its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_its_client_process() {
    let server = HttpServer::python(&[]);
    let file = std::env::temp_dir().join(format!("mcp-task-id-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["tasks::task_starter_process", "--exact", "--ignored"])
        .env("MCP_TEST_URL", server.url("/mcp"))
        .env("MCP_TEST_TASK_FILE", &file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let id = loop {
        if let Ok(id) = std::fs::read_to_string(&file) {
            break id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the starter never wrote the id"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let c = builder().http(HttpConfig::new(server.url("/mcp"))).unwrap();
    let t = c.task(id.trim());
    assert_ne!(t.status().await.unwrap().state, TaskState::Failed);
    assert_eq!(t.wait().await.unwrap().text(), "done after 3s");
    let _ = std::fs::remove_file(&file);
}

/// Listening to a task: its status changes reach `on_change` (pushed on the listen
/// stream by a 2026-07-28 server, polled for a 2025-11-25 one), and a waiter wakes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listened_tasks_report_their_changes() {
    for mode in [ProtocolMode::Modern, ProtocolMode::Legacy] {
        let seen: Arc<Mutex<Vec<TaskState>>> = Arc::default();
        let s = seen.clone();
        let c = builder()
            .protocol(mode)
            .after_change(move |change| {
                if let Change::Task(status) = change {
                    s.lock().unwrap().push(status.state.clone());
                }
            })
            .stdio(support::pyserver())
            .unwrap();
        let t = task(
            c.start("long_task", json!({"seconds": 1, "ask": true}))
                .await
                .unwrap(),
        );
        c.listen_for(&[], &[t.id()]).await.unwrap();
        assert_eq!(t.wait().await.unwrap().text(), "done after 1s for Ann");
        // The end is reported too.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !seen.lock().unwrap().contains(&TaskState::Completed) {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode:?}: {:?}",
                seen.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let seen = seen.lock().unwrap().clone();
        assert!(seen.contains(&TaskState::Working), "{mode:?}: {seen:?}");
        c.close().await.unwrap();
    }
}

/// After the listen stream breaks and comes back, every listened task is reported
/// with its current status (whatever changed meanwhile was not heard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listened_tasks_are_reported_again_after_a_reconnect() {
    let server = HttpServer::python(&[]);
    let proxy = support::CutProxy::start(server.port).await;
    let reported = Arc::new(Mutex::new(0usize));
    let r = reported.clone();
    let c = builder()
        .protocol(ProtocolMode::Modern)
        .after_change(move |change| {
            if let Change::Task(s) = change {
                if s.state == TaskState::Completed {
                    *r.lock().unwrap() += 1;
                }
            }
        })
        .http(HttpConfig::new(proxy.url("/mcp")))
        .unwrap();
    let t = task(c.start("long_task", json!({"seconds": 0.3})).await.unwrap());
    t.wait().await.unwrap();
    c.listen_for(&[], &[t.id()]).await.unwrap();
    let wait_for = |n: usize| {
        let reported = reported.clone();
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while *reported.lock().unwrap() < n {
                assert!(
                    std::time::Instant::now() < deadline,
                    "reported {} times",
                    reported.lock().unwrap()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    // The server sends the current status when the listen starts.
    wait_for(1).await;
    proxy.cut();
    wait_for(2).await;
}

/// server-everything runs `simulate-research-query` only as a task (2025-11-25
/// `taskSupport: required`): once the tools are listed, `call` starts it and waits,
/// `start` returns it. Before, a call does not list them: it goes out plain, and the
/// server's refusal says to list the tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_only_tool_of_server_everything() {
    let asked = Arc::new(Mutex::new(0));
    let a = asked.clone();
    let c = Client::builder()
        .input_handler(move |req: InputRequest| {
            *a.lock().unwrap() += 1;
            // Choose the first interpretation offered.
            let choice = support::fill_form(&req.schema().unwrap_or_default());
            async move { InputResponse::accept(choice) }
        })
        .stdio(support::everything())
        .unwrap();
    match c
        .call("simulate-research-query", json!({"topic": "tides"}))
        .await
    {
        Err(e) => assert!(e.to_string().contains("list the tools"), "{e}"),
        Ok(r) => assert!(r.is_error(), "ran as a plain call: {}", r.text()),
    }
    c.tools().await.unwrap();
    let r = c
        .call("simulate-research-query", json!({"topic": "tides"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    assert!(r.text().to_lowercase().contains("tides"), "{}", r.text());
    let t = task(
        c.start(
            "simulate-research-query",
            json!({"topic": "moons", "ambiguous": true}),
        )
        .await
        .unwrap(),
    );
    let r = t.wait().await.unwrap();
    assert!(!r.is_error(), "{}", r.text());
    assert_eq!(*asked.lock().unwrap(), 1, "the ambiguous query asked once");
    c.close().await.unwrap();
}

/// MCP Apps: a result names its tool's UI resource (from the tool list: a call never
/// lists the tools itself), one call reads the app with how to frame it, and
/// app-only tools never reach a model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_results_carry_their_ui_and_app_only_tools_stay_hidden() {
    for mode in [ProtocolMode::Modern, ProtocolMode::Legacy] {
        let c = Client::builder()
            .protocol(mode)
            .extension(
                "io.modelcontextprotocol/ui",
                json!({"mimeTypes": [mcp_runtime::model::MCP_APP_MIME_TYPE]}),
            )
            .stdio(support::pyserver())
            .unwrap();
        let r = c
            .call("show_chart", json!({"title": "Tides"}))
            .await
            .unwrap();
        assert_eq!(r.ui_resource, None, "nothing listed yet");
        c.tools().await.unwrap();
        let r = c
            .call("show_chart", json!({"title": "Tides"}))
            .await
            .unwrap();
        let uri = r.ui_resource.clone().expect("the tool's UI resource");
        assert_eq!(uri, "ui://charts/view.html");
        let app = c.read_ui(&uri).await.unwrap();
        assert_eq!(app.mime_type, mcp_runtime::model::MCP_APP_MIME_TYPE);
        assert!(
            app.html.contains("<html") || app.html.contains("<!doctype"),
            "{}",
            app.html
        );
        assert_eq!(app.csp.as_ref().unwrap()["connectDomains"], json!([]));
        assert!(app.permissions.is_some());
        assert_eq!(app.prefers_border, Some(true));
        // A tool without a UI has none.
        let r = c.call("echo", json!({"message": "x"})).await.unwrap();
        assert_eq!(r.ui_resource, None);
        c.close().await.unwrap();
    }
    let argv = support::pyserver_argv();
    let py = Mcp::builder("py")
        .command(argv)
        .extension("apps", json!({}))
        .build()
        .unwrap();
    let all: Vec<String> = py
        .tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    let model: Vec<String> = py
        .model_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(all.contains(&"chart_data".to_owned()));
    assert!(!model.contains(&"chart_data".to_owned()), "{model:?}");
    assert!(model.contains(&"show_chart".to_owned()));
    let r = py.call("show_chart", json!({"title": "x"})).await.unwrap();
    let app = py.read_ui(r.ui_resource.as_deref().unwrap()).await.unwrap();
    assert!(!app.html.is_empty());
    py.close().await.unwrap();
}

/// Value helpers for the input handler above.
trait Schema {
    fn schema(&self) -> Option<Value>;
}

impl Schema for InputRequest {
    fn schema(&self) -> Option<Value> {
        match &self.kind {
            mcp_runtime::input::InputKind::Form { schema } => Some(schema.clone()),
            _ => None,
        }
    }
}

/// Input a 2026-07-28 server asks for, left to the caller (`pause_on_input`), kept as
/// JSON and answered by another client: for a plain call (the server's sealed
/// `requestState` goes back with the answer) and for a call the server runs as a task
/// (the answer goes to the task, which kept running meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_input_is_answered_later_by_another_client() {
    use mcp_runtime::{input::InputKind, CallOutcome, PendingInput, RequestOptions};
    let server = HttpServer::python(&[]);
    // No input handler at all: pausing declares the capability for the request.
    let client = || {
        Client::builder()
            .extension(TASKS, json!({}))
            .protocol(ProtocolMode::Modern)
            .http(HttpConfig::new(server.url("/mcp")))
            .unwrap()
    };
    let paused = |o: CallOutcome| -> String {
        let pending = o.needs_input().unwrap_or_else(|| panic!("{o:?}"));
        serde_json::to_string(pending).unwrap()
    };
    for (tool, args, expected) in [
        ("ask_name", json!({}), "Hello, Ann"),
        (
            "long_task",
            json!({"seconds": 0.4, "ask": true}),
            "done after 0.4s for Ann",
        ),
    ] {
        let a = client();
        let o = a.call(tool, args.clone()).pause_on_input().await.unwrap();
        let kept = paused(o);
        a.close().await.unwrap();

        let pending: PendingInput = serde_json::from_str(&kept).unwrap();
        assert_eq!(pending.task_id().is_some(), tool == "long_task", "{kept}");
        let requests = pending.requests().unwrap();
        assert_eq!(requests.len(), 1, "{kept}");
        let (key, request) = &requests[0];
        assert!(
            request.message.contains("What is your name?"),
            "{request:?}"
        );
        assert!(matches!(request.kind, InputKind::Form { .. }));
        let b = client();
        let r = b
            .call(tool, args)
            .options(RequestOptions::default().with_input_answers(
                pending,
                [(key.clone(), InputResponse::accept(json!({"name": "Ann"})))],
            ))
            .pause_on_input()
            .await
            .unwrap()
            .done()
            .unwrap();
        assert_eq!(r.text(), expected);
        b.close().await.unwrap();
    }
    // A declined answer reaches the tool as such.
    let a = client();
    let o = a
        .call("ask_name", json!({}))
        .pause_on_input()
        .await
        .unwrap();
    let pending = o.needs_input().unwrap().clone();
    let key = pending.keys().next().unwrap().to_owned();
    let r = a
        .call("ask_name", json!({}))
        .options(
            RequestOptions::default().with_input_answers(pending, [(key, InputResponse::Decline)]),
        )
        .await
        .unwrap();
    assert_eq!(r.text(), "declined");
    a.close().await.unwrap();
}

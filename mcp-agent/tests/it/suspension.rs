//! Suspension across processes: a run that waits for a person (approval or a server's
//! input request) in one process and is decided in another, on SQLite and PostgreSQL;
//! input callbacks.

use super::*;

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
    let model = ModelServer::scripted(
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
            "suspension::suspending_process",
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
    // No secret in what the store keeps (its state, transcript, large values, events).
    let kept = if store.starts_with("postgres://") {
        let s = PostgresRunStore::connect(store).await.unwrap();
        let r = s.load(&run).await.unwrap().unwrap();
        format!(
            "{} {} {:?} {:?}",
            r.state,
            Value::Array(r.transcript.entries),
            r.blobs,
            s.events(&run).await.unwrap()
        )
    } else {
        String::from_utf8_lossy(&std::fs::read(dir.join("state/runs.sqlite3")).unwrap())
            .into_owned()
    };
    assert!(kept.contains("write_file"), "the run is kept");
    assert!(!kept.contains("MODEL-KEY-CANARY") && !kept.contains("ENV-CANARY-91c2"));
    agent.close().await.unwrap();
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
    let model = ModelServer::scripted(
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
        "suspension::input_suspending_process",
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
    let model = ModelServer::scripted(
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

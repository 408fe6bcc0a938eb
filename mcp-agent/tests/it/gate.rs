//! The gate through the loop against the filesystem server: read-only denials that
//! never raise, a turn's calls gated first then run together, progress events, the
//! step limit.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_runs_listed_tools_and_denies_the_rest_without_raising() {
    let dir = scratch("read-only");
    std::fs::write(dir.join("notes.txt"), "hello notes").unwrap();
    let model = ModelServer::scripted(
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

/// The step limit ends a model that never stops calling tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_limit_ends_a_run() {
    let dir = scratch("steps");
    let model = ModelServer::scripted(
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

/// Calls the model asks for in one turn run concurrently: the rendezvous server answers
/// "met" only when all calls of a group are in flight at once (no timing involved).
/// Every call of the turn goes through the gate first (a denied one ends there); then
/// all the allowed ones run together. Events keep the model's order, and the results
/// answer the calls in the order the model asked for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turns_calls_run_concurrently_in_order() {
    let dir = scratch("parallel");
    let model = ModelServer::scripted(
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
    let model = ModelServer::scripted(
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

//! Sub-agents through the agent loop (`Agent::as_tool`): the child runs under the
//! intersection of its own policy and its parent's (a parent's denial wins, a
//! parent's need for a person suspends), its suspension surfaces in the parent's
//! pending and inbox (one decision, given to the parent), a suspended parent with a
//! suspended child resumes both from another process on SQLite and PostgreSQL, and
//! the parent's budget covers the child.

use mcp_agent::store::RunFilter;
use mcp_agent::{Agent, Budget, Decision, Event, Mode, Outcome, RunOptions};
use serde_json::json;

use crate::{filesystem, scratch, wire_model, ModelServer};

/// The parent's model: hands the writer its task, then answers `then`.
fn delegates(then: &str) -> serde_json::Value {
    json!([
        {"tool_calls": [{"name": "writer", "arguments": {"task": "write A into a.txt"}}]},
        {"text": then}
    ])
}

/// The child's model: writes A into `target`, then answers `then`.
fn writes(target: &std::path::Path, then: &str) -> serde_json::Value {
    json!([
        {"tool_calls": [{"name": "write_file", "arguments": {"path": target.display().to_string(), "content": "A"}}]},
        {"text": then}
    ])
}

/// The writer: a child agent whose own mode (`auto`) allows every call, on a real
/// filesystem server over `files`.
fn child_agent(model: &ModelServer, files: &std::path::Path) -> mcp_agent::AgentBuilder {
    Agent::builder()
        .model(wire_model("chat", model))
        .server(filesystem(files))
        .mode(Mode::Auto)
}

fn scripted(dir: &std::path::Path, name: &str, script: serde_json::Value) -> ModelServer {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    ModelServer::scripted(&dir, script)
}

/// The child's own mode (`Auto`) would run `write_file`; the parent's (`Approve`,
/// only the sub-agent tool allow-listed) wants a person for it: the child suspends,
/// and so does the parent — the call listed as the parent's, with the child's run
/// named. Both agents are then built anew on the same stores (as another process
/// would) and one decision, given to the parent, runs the child's call and both runs
/// to their answers.
async fn a_suspended_child_resumes_with_its_parent(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("subagent-{tag}"));
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let target = files.join("a.txt");
    let parent_model = scripted(&dir, "parent", delegates("The writer says: wrote a.txt"));
    let child_model = scripted(&dir, "child", writes(&target, "wrote a.txt"));
    let build = |parent_store, child_store| {
        let child = child_agent(&child_model, &files)
            .store(child_store)
            .build()
            .unwrap();
        let parent = Agent::builder()
            .model(wire_model("chat", &parent_model))
            .tool(child.as_tool("writer", "Writes files"))
            .mode(Mode::Approve)
            .allow(["writer"])
            .authorize(|ask| async move { ask.principal.id != "mallory" })
            .store(parent_store)
            .build()
            .unwrap();
        (parent, child)
    };
    let (parent, child) = build(
        crate::store_for(&dir, store_url).await,
        crate::store_for(&dir, store_url).await,
    );
    let outcome = parent
        .run_with_options(
            "have the writer write a.txt",
            RunOptions::new().tenant("t1"),
        )
        .await
        .unwrap();
    let Outcome::ApprovalRequired {
        run_id,
        decision,
        tool,
        calls,
        ..
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        tool, "write_file",
        "the child's call, listed as the parent's"
    );
    assert_eq!(calls.len(), 1);
    let sub_run = calls[0].sub_run.clone().expect("the child's run is named");
    assert_ne!(sub_run, run_id);
    assert_eq!(calls[0].run_id, run_id);
    assert_eq!(
        calls[0].tenant.as_deref(),
        Some("t1"),
        "the parent's tenant"
    );
    assert!(!target.exists(), "nothing ran before the decision");
    // One inbox: the parent's run lists the child's call; the child's run is not
    // listed on its own.
    let pending = parent.pending(&run_id).await.unwrap();
    assert_eq!(pending, calls);
    let inbox = parent.inbox(&RunFilter::new().tenant("t1")).await.unwrap();
    assert_eq!(inbox.pending.len(), 1, "{:?}", inbox.pending);
    assert_eq!(inbox.pending[0].decision, decision);
    assert_eq!(inbox.pending[0].run_id, run_id);
    // The child runs under its parent's tenant and what is left of its budget.
    let detail = child.run_detail(&sub_run).await.unwrap().unwrap();
    assert_eq!(detail.tenant.as_deref(), Some("t1"));
    assert_eq!(detail.parent, Some((run_id.clone(), "writer".to_owned())));
    parent.close().await.unwrap();
    child.close().await.unwrap();

    // Another process: both agents anew, on the same stores.
    let (parent, child) = build(
        crate::store_for(&dir, store_url).await,
        crate::store_for(&dir, store_url).await,
    );
    // A decision given to the child's run itself is refused: it is decided on
    // through its parent (its `authorize`, its inbox).
    let direct = child
        .resume(&sub_run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(direct.is_stale_decision(), "{direct}");
    assert!(direct.to_string().contains(&run_id), "{direct}");
    assert!(!target.exists());
    // The parent's `authorize` is asked about a decision on the child's call.
    let refused = parent
        .resume(&run_id, &decision, Decision::approve("mallory"))
        .await
        .unwrap_err();
    assert!(refused.is_unauthorized(), "{refused}");
    assert!(!target.exists());
    let done = parent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    let Outcome::Finished { text, .. } = &done else {
        panic!("{done:?}")
    };
    assert_eq!(text, "The writer says: wrote a.txt");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "A");
    // The parent's model read the child's answer as the call's result.
    let parent_requests = parent_model.requests();
    assert_eq!(parent_requests.len(), 2);
    let second = parent_requests[1]["body"].to_string();
    assert!(second.contains("wrote a.txt"), "{second}");
    // The child's model was asked twice: the task, then the tool's result.
    let child_requests = child_model.requests();
    assert_eq!(child_requests.len(), 2);
    assert!(child_requests[0]["body"]
        .to_string()
        .contains("write A into a.txt"));
    // Single use: the same decision again is refused, on the parent as on the child.
    let again = parent
        .resume(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(again.is_stale_decision(), "{again}");
    // The parent's run keeps where the child stood, and what it spent.
    let events = parent.events(&run_id).await.unwrap();
    let subs: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubAgent {
                run, status, usage, ..
            } => Some((run.clone(), status.clone(), *usage)),
            _ => None,
        })
        .collect();
    assert_eq!(subs.len(), 3, "{subs:?}");
    assert_eq!(subs[0].1, "suspended");
    assert!(subs[1].1.starts_with("decided"), "{subs:?}");
    assert_eq!(subs[2].1, "finished");
    assert!(subs.iter().all(|(run, ..)| *run == sub_run));
    assert!(subs[2].2.is_some(), "what the child spent");
    let child_events = child.events(&sub_run).await.unwrap();
    assert!(child_events
        .iter()
        .any(|e| matches!(e, Event::ApprovalDecided { approved: true, .. })));
    parent.close().await.unwrap();
    child.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_child_resumes_with_its_parent_sqlite() {
    a_suspended_child_resumes_with_its_parent("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_child_resumes_with_its_parent_postgres() {
    let pg = mcp_test_support::Postgres::start();
    a_suspended_child_resumes_with_its_parent(&pg.url).await;
}

/// A child whose own mode allows everything can never do what its parent may not:
/// under a read-only parent the child is not offered the filesystem's tools, and a
/// call of one is denied by the parent's policy — nothing is written. And the
/// parent's budget covers the child: with one tool call left after the sub-agent's
/// own, the child may send one, not two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parent_policy_and_budget_bind_the_child() {
    let dir = scratch("subagent-policy");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("b.txt"), "B").unwrap();
    let files = files.canonicalize().unwrap();
    let target = files.join("a.txt");
    let parent_model = scripted(&dir, "parent", delegates("done"));
    let child_model = scripted(&dir, "child", writes(&target, "I could not write it"));
    let child = child_agent(&child_model, &files).build().unwrap();
    let parent = Agent::builder()
        .model(wire_model("chat", &parent_model))
        .tool(child.as_tool("writer", "Writes files"))
        .mode(Mode::ReadOnly)
        .allow(["writer"])
        .build()
        .unwrap();
    let outcome = parent.run("have the writer write a.txt").await.unwrap();
    assert!(matches!(outcome, Outcome::Finished { .. }), "{outcome:?}");
    assert!(
        !target.exists(),
        "the parent's policy denied the child's write"
    );
    let child_requests = child_model.requests();
    let offered = child_requests[0]["body"]["tools"].to_string();
    assert!(
        !offered.contains("write_file"),
        "a tool the parent never allows is not offered: {offered}"
    );
    let denied = child_requests[1]["body"].to_string();
    assert!(denied.contains("parent run's policy"), "{denied}");
    // The same child under a parent that allows it: written (the positive control).
    let parent_model = scripted(&dir, "parent2", delegates("done"));
    let child_model = scripted(
        &dir,
        "child2",
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": target.display().to_string(), "content": "A"}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": files.join("b.txt").display().to_string()}}]},
            {"text": "wrote it"}
        ]),
    );
    let child = child_agent(&child_model, &files).build().unwrap();
    let parent = Agent::builder()
        .model(wire_model("chat", &parent_model))
        .tool(child.as_tool("writer", "Writes files"))
        .mode(Mode::Auto)
        .build()
        .unwrap();
    // Two tool calls for the run: the sub-agent's own, and one of the child's.
    let outcome = parent
        .run_with_options(
            "have the writer write a.txt",
            RunOptions::new().budget(Budget::new().max_tool_calls(2)),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, Outcome::Finished { .. }), "{outcome:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "A");
    // The child's second call found its budget spent: its run ended there, and the
    // parent's model read why.
    assert_eq!(child_model.requests().len(), 2, "no third model call");
    let read = parent_model.requests()[1]["body"].to_string();
    assert!(read.contains("budget"), "{read}");
    let events = parent.events(outcome.run_id()).await.unwrap();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::SubAgent { status, tool_calls: 1, .. } if status == "budget_exceeded"
        )),
        "{events:?}"
    );
}

/// Cancelling a parent that waits on its sub-agent cancels the sub-agent's run; a
/// decision recorded on the parent (`record_decision`) is recorded in the child, and a
/// worker of the parent takes both up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_workers_reach_the_child() {
    let dir = scratch("subagent-cancel");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let target = files.join("a.txt");
    let build = |n: &str| {
        let parent_model = scripted(
            &dir,
            &format!("parent-{n}"),
            json!([
                {"tool_calls": [{"name": "writer", "arguments": {"task": "write A into a.txt"}}]},
                {"text": "done"}
            ]),
        );
        let child_model = scripted(
            &dir,
            &format!("child-{n}"),
            json!([
                {"tool_calls": [{"name": "write_file", "arguments": {"path": target.display().to_string(), "content": "A"}}]},
                {"text": "wrote a.txt"}
            ]),
        );
        let child = child_agent(&child_model, &files).build().unwrap();
        let parent = Agent::builder()
            .model(wire_model("chat", &parent_model))
            .tool(child.as_tool("writer", "Writes files"))
            .mode(Mode::Approve)
            .allow(["writer"])
            .build()
            .unwrap();
        (parent, child, parent_model, child_model)
    };
    // Cancelled: the child's run ends cancelled, nothing written.
    let (parent, child, _pm, _cm) = build("cancel");
    let outcome = parent.run("write a.txt").await.unwrap();
    let Outcome::ApprovalRequired { run_id, calls, .. } = outcome else {
        panic!("{outcome:?}")
    };
    let sub_run = calls[0].sub_run.clone().unwrap();
    // The child's run is cancelled through its parent only.
    let direct = child.cancel(&sub_run, "ann").await.unwrap_err();
    assert!(direct.to_string().contains(&run_id), "{direct}");
    parent.cancel(&run_id, "ann").await.unwrap();
    let detail = child.run_detail(&sub_run).await.unwrap().unwrap();
    assert_eq!(detail.status, mcp_agent::store::RunStatus::Cancelled);
    assert!(!target.exists());

    // Recorded on the parent, continued by the parent's worker.
    let (parent, child, parent_model, child_model) = build("worker");
    let outcome = parent.run("write a.txt").await.unwrap();
    let Outcome::ApprovalRequired {
        run_id,
        decision,
        calls,
        ..
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    let sub_run = calls[0].sub_run.clone().unwrap();
    assert_eq!(child.pending(&sub_run).await.unwrap().len(), 1);
    parent
        .record_decision(&run_id, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    assert!(!target.exists(), "recording runs nothing");
    assert!(
        child.pending(&sub_run).await.unwrap().is_empty(),
        "recorded in the child's run"
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker =
        parent.worker(mcp_agent::WorkerOptions::new().poll(std::time::Duration::from_millis(50)));
    let task = tokio::spawn(async move {
        worker
            .run(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    let mut finished = false;
    for _ in 0..600 {
        let d = parent.run_detail(&run_id).await.unwrap().unwrap();
        if d.status == mcp_agent::store::RunStatus::Finished {
            finished = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    task.await.unwrap();
    assert!(finished, "the parent's worker finished the parent");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "A");
    assert_eq!(child_model.requests().len(), 2);
    assert_eq!(parent_model.requests().len(), 2);
}

/// A parent in `ask` mode: its callback is asked about the child's calls (server,
/// tool, arguments as the child's model gave them), and its denial, with its message,
/// is what the child's model reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_parent_decides_the_childs_calls() {
    let dir = scratch("subagent-ask");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let target = files.join("a.txt");
    let parent_model = scripted(&dir, "parent", delegates("done"));
    let child_model = scripted(&dir, "child", writes(&target, "I was not allowed"));
    let child = child_agent(&child_model, &files).build().unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let parent = Agent::builder()
        .model(wire_model("chat", &parent_model))
        .tool(child.as_tool("writer", "Writes files"))
        .mode(Mode::ask_decision(
            move |server: &str, tool: &str, _args: &serde_json::Value| {
                seen.lock().unwrap().push(format!("{server}/{tool}"));
                let allow = tool == "writer";
                async move {
                    if allow {
                        mcp_agent::Asked::Allow
                    } else {
                        mcp_agent::Asked::Deny(Some("no writing today".into()))
                    }
                }
            },
        ))
        .build()
        .unwrap();
    let outcome = parent.run("write a.txt").await.unwrap();
    assert!(matches!(outcome, Outcome::Finished { .. }), "{outcome:?}");
    assert!(!target.exists());
    assert_eq!(
        *asked.lock().unwrap(),
        vec!["functions/writer".to_owned(), "fs/write_file".to_owned()]
    );
    let read = child_model.requests()[1]["body"].to_string();
    assert!(read.contains("no writing today"), "{read}");
}

/// A parent stopped while its sub-agent works (its future dropped mid-call, as a
/// process that dies would leave it) is recovered: the sub-agent's run — whose id the
/// parent kept before it started — is taken up again, not left behind nor read as
/// "outcome unknown"; the write it had sent is not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_stopped_mid_child_takes_the_child_up_again() {
    let dir = scratch("subagent-stopped");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let files = files.canonicalize().unwrap();
    let target = files.join("a.txt");
    let parent_model = scripted(&dir, "parent", delegates("done"));
    let child_model = scripted(
        &dir,
        "child",
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": target.display().to_string(), "content": "A"}}]},
            {"trickle": true},
            {"text": "wrote a.txt"}
        ]),
    );
    let lease = std::time::Duration::from_millis(300);
    let child = child_agent(&child_model, &files)
        .lease(lease)
        .build()
        .unwrap();
    let parent = Agent::builder()
        .model(wire_model("chat", &parent_model))
        .tool(child.as_tool("writer", "Writes files"))
        .mode(Mode::Auto)
        .lease(lease)
        .build()
        .unwrap();
    let running = parent.clone();
    let task = tokio::spawn(async move { running.run("have the writer write a.txt").await });
    // The child wrote, and its model hangs: stop the parent there.
    let mut reached = false;
    for _ in 0..1200 {
        if child_model.requests().len() >= 2 {
            reached = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(reached, "the child reached its second model call");
    task.abort();
    let _ = task.await;
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "A");
    std::fs::remove_file(&target).unwrap();
    let runs = parent.runs(&RunFilter::new()).await.unwrap().runs;
    assert_eq!(runs.len(), 1);
    let run_id = runs[0].id.clone();
    // Recovered once its lease ended.
    let mut outcome = None;
    for _ in 0..200 {
        match parent.recover(&run_id).await {
            Ok(o) => {
                outcome = Some(o);
                break;
            }
            Err(e) if e.is_not_suspended() => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    let outcome = outcome.expect("the parent was recovered");
    let Outcome::Finished { text, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(text, "done");
    assert!(!target.exists(), "the child's write was not sent again");
    assert_eq!(child_model.requests().len(), 3, "the child's run went on");
    let read = parent_model.requests()[1]["body"].to_string();
    assert!(read.contains("wrote a.txt"), "{read}");
    let events = parent.events(&run_id).await.unwrap();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::OutcomeUnknown { .. })),
        "{events:?}"
    );
}

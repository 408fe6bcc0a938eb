//! The calls of one model turn that need a person are decided together: one
//! suspension, one decision id per call, decided in one resume or several (approve,
//! deny with a message, edit the arguments, always allow for the run); the run goes
//! on once every call is decided. Against the real filesystem server, the scripted
//! model, and both durable stores.

use std::sync::{Arc, Mutex};

use mcp_agent::{
    Agent, Always, ChatCompletions, Decision, Event, Mode, Outcome, Pending, RunStatus, RunStore,
};
use serde_json::{json, Value};

use super::{filesystem, scratch, store_for, ModelServer, Postgres};

fn agent(
    model: &ModelServer,
    dir: &std::path::Path,
    store: Arc<dyn RunStore>,
) -> (Agent, Arc<Mutex<Vec<Event>>>) {
    super::decisions::agent(model, filesystem(dir), store)
}

/// The run, suspension and calls of an outcome that waits for approval.
fn waiting(outcome: Outcome) -> (String, String, Vec<Pending>) {
    match outcome {
        Outcome::ApprovalRequired {
            run_id,
            suspension,
            calls,
            ..
        } => (run_id, suspension, calls),
        other => panic!("expected a suspension for approval: {other:?}"),
    }
}

fn write(path: &std::path::Path, content: &str) -> Value {
    json!({"name": "write_file", "arguments": {"path": path, "content": content}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_calls_of_a_turn_are_decided_in_two_resumes_sqlite() {
    three_calls_decided_in_two_resumes("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_calls_of_a_turn_are_decided_in_two_resumes_postgres() {
    let pg = Postgres::start();
    three_calls_decided_in_two_resumes(&pg.url).await;
}

/// Three writes in one turn wait together. The first resume edits one (another path)
/// and denies one with a message; the run waits on, in the same suspension, for the
/// third — nothing has run. A replay of the first resume is refused. The second
/// resume approves the third; then all run, and the transcript shows exactly that:
/// the edited write where the person put it, the denial with its message, the
/// approved write.
async fn three_calls_decided_in_two_resumes(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("batch-{tag}"));
    let (a, b, c, edited) = (
        dir.join("a.txt"),
        dir.join("b.txt"),
        dir.join("c.txt"),
        dir.join("edited.txt"),
    );
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [write(&a, "one"), write(&b, "two"), write(&c, "three")]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, store_url).await;
    let (agent, events) = agent(&model, &dir, store.clone());
    let (run, s, calls) = waiting(agent.run("write three files").await.unwrap());
    assert_eq!(calls.len(), 3, "{calls:?}");
    let ids: Vec<String> = calls.iter().map(|c| c.decision.clone()).collect();
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
    assert!(calls
        .iter()
        .all(|c| c.suspension == s && c.tool == "write_file"));
    assert_eq!(agent.pending(&run).await.unwrap(), calls);

    // First resume: one edited, one denied with a message. The third still waits.
    let edit = json!({"path": edited, "content": "edited"});
    let (again, s2, left) = waiting(
        agent
            .decide(
                &run,
                [
                    (ids[0].clone(), Decision::edit("ann", edit.clone())),
                    (
                        ids[1].clone(),
                        Decision::deny("bob").with_message("not b, ever"),
                    ),
                ],
            )
            .await
            .unwrap(),
    );
    assert_eq!((again.as_str(), s2.as_str()), (run.as_str(), s.as_str()));
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].decision, ids[2]);
    assert!(
        !a.exists() && !edited.exists() && !c.exists(),
        "nothing runs before every call is decided"
    );
    let stored = store.load(&run).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.suspension),
        (RunStatus::Suspended, Some(s.clone()))
    );

    // The same decisions again: refused, and nothing changes.
    let e = agent
        .resume(&run, &ids[0], Decision::approve("eve"))
        .await
        .unwrap_err();
    assert!(e.is_stale_decision(), "{e}");
    assert_eq!(agent.pending(&run).await.unwrap().len(), 1);

    // Second resume: the third approved; all run.
    let Outcome::Finished { text, .. } = agent
        .resume(&run, &ids[2], Decision::approve("cat"))
        .await
        .unwrap()
    else {
        panic!("the run goes on once every call is decided")
    };
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "edited");
    assert!(
        !a.exists(),
        "the edited call ran with the person's arguments"
    );
    assert!(!b.exists(), "the denied call did not run");
    assert_eq!(std::fs::read_to_string(&c).unwrap(), "three");

    // The transcript answers the three calls in order: edited, denied (with the
    // person's message), approved.
    let requests = model.requests();
    let messages = requests.last().unwrap()["body"]["messages"].clone();
    let results: Vec<String> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains("Successfully wrote") && results[0].contains("edited.txt"),
        "{results:?}"
    );
    assert!(
        results[1].contains("a person denied `write_file`: not b, ever"),
        "{results:?}"
    );
    assert!(results[2].contains("c.txt"), "{results:?}");
    assert!(text.contains("Successfully wrote"), "{text}");

    // Each decision is an event: who, what kind, and what it was bound to (the edit:
    // the edited arguments).
    let seen = events.lock().unwrap().clone();
    let decided: Vec<(String, String, String, bool)> = seen
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalDecided {
                by,
                kind,
                decision,
                approved,
                binding,
                ..
            } => {
                if kind == "edit" {
                    let b = binding.as_ref().unwrap();
                    assert_eq!(b.arguments, mcp_runtime::digest::sha256_json(&edit));
                }
                Some((by.clone(), kind.clone(), decision.clone(), *approved))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        decided,
        [
            ("ann".into(), "edit".into(), ids[0].clone(), true),
            ("bob".into(), "deny".into(), ids[1].clone(), false),
            ("cat".into(), "approve".into(), ids[2].clone(), true),
        ]
    );
    let suspended: Vec<Vec<String>> = seen
        .iter()
        .filter_map(|e| match e {
            Event::RunSuspended { decisions, .. } => Some(decisions.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        suspended,
        std::slice::from_ref(&ids),
        "one suspension for the three"
    );
    agent.close().await.unwrap();
}

/// Two people decide two calls of one suspension at the same moment: both decisions
/// apply (the second waits for the first to be kept), and the run goes on once.
/// Two people decide the same call at the same moment: one decision applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_deciding_at_once_each_decide_their_own_call_once() {
    let dir = scratch("batch-concurrent");
    let (a, b, c, d) = (
        dir.join("a.txt"),
        dir.join("b.txt"),
        dir.join("c.txt"),
        dir.join("d.txt"),
    );
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [write(&a, "a"), write(&b, "b")]},
            {"tool_calls": [write(&c, "c"), write(&d, "d")]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let (agent, _) = agent(&model, &dir, store.clone());
    let (run, _, calls) = waiting(agent.run("write").await.unwrap());
    let (x, y) = (calls[0].decision.clone(), calls[1].decision.clone());
    let (one, two) = (agent.clone(), agent.clone());
    let (r1, r2) = (run.clone(), run.clone());
    let (first, second) = tokio::join!(
        tokio::spawn(async move { one.resume(&r1, &x, Decision::approve("ann")).await }),
        tokio::spawn(async move { two.resume(&r2, &y, Decision::approve("bob")).await }),
    );
    let outcomes = [first.unwrap().unwrap(), second.unwrap().unwrap()];
    // One left the run waiting for the other call; the other took it on to the next
    // turn's suspension (c and d).
    let next: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| match o {
            Outcome::ApprovalRequired { calls, .. } => {
                calls[0].tool == "write_file" && calls[0].arguments["path"] == json!(c)
            }
            _ => false,
        })
        .collect();
    assert_eq!(next.len(), 1, "{outcomes:?}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "a");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "b");

    // The next suspension: two people on the same call at once — one applies.
    let (_, _, calls) = waiting(next[0].clone());
    let z = calls[0].decision.clone();
    let (one, two) = (agent.clone(), agent.clone());
    let (r1, r2, z1, z2) = (run.clone(), run.clone(), z.clone(), z.clone());
    let (first, second) = tokio::join!(
        tokio::spawn(async move { one.resume(&r1, &z1, Decision::approve("ann")).await }),
        tokio::spawn(async move { two.resume(&r2, &z2, Decision::deny("bob")).await }),
    );
    let results = [first.unwrap(), second.unwrap()];
    let refused = results
        .iter()
        .filter(|r| r.as_ref().is_err_and(|e| e.is_stale_decision()))
        .count();
    assert_eq!(refused, 1, "{results:?}");
    // Whichever applied, the call was decided once: written (ann) or not (bob).
    let written = c.exists();
    let applied = results.iter().find_map(|r| r.as_ref().ok()).unwrap();
    assert!(
        matches!(applied, Outcome::ApprovalRequired { .. }),
        "d still waits: {applied:?}"
    );
    assert!(!written, "nothing runs before d is decided too");
    agent.close().await.unwrap();
}

/// "Always allow this tool" for the run: the approval also lets the later calls of the
/// same tool run without asking — in this run only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_for_the_run_stops_asking_for_that_tool() {
    let dir = scratch("batch-always");
    let (a, b, c) = (dir.join("a.txt"), dir.join("b.txt"), dir.join("c.txt"));
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [write(&a, "a")]},
            {"tool_calls": [write(&b, "b")]},
            {"echo_tools": true},
            {"tool_calls": [write(&c, "c")]},
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let (agent, events) = agent(&model, &dir, store.clone());
    let (run, _, calls) = waiting(agent.run("write twice").await.unwrap());
    let Outcome::Finished { .. } = agent
        .resume(
            &run,
            &calls[0].decision,
            Decision::approve("ann").always(Always::Run),
        )
        .await
        .unwrap()
    else {
        panic!("the second write runs without asking")
    };
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "b");
    let kinds: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalDecided { kind, .. } => Some(kind.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["approve_always_run"]);
    // Another run asks again (the positive control: the same tool, not allowed).
    let (_, _, calls) = waiting(agent.run("write again").await.unwrap());
    assert_eq!(calls[0].arguments["path"], json!(c));
    assert!(!c.exists());
    agent.close().await.unwrap();
}

/// "Always allow this tool" for the agent: kept in the store (MACed under the
/// integrity key), it lets the tool run without asking in later runs of any agent on
/// that store — while the server is configured the same; a changed server asks
/// again, an allowance changed in the store is ignored, a revoked one is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_for_the_agent_is_kept_in_the_store_bound_to_the_tool() {
    let dir = scratch("batch-always-agent");
    let file = |name: &str| dir.join(name);
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [write(&file("a"), "a")]},
            {"echo_tools": true},
            {"tool_calls": [write(&file("b"), "b")]},
            {"echo_tools": true},
            {"tool_calls": [write(&file("c"), "c")]},
            {"tool_calls": [write(&file("d"), "d")]},
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let key = b"0123456789abcdef0123456789abcdef";
    let build = |server: mcp_runtime::Mcp| {
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Approve)
            .allow(["read_text_file"])
            .server(server)
            .store(store.clone())
            .integrity_key(key)
            .build()
            .unwrap()
    };
    let first = build(filesystem(&dir));
    let (run, _, calls) = waiting(first.run("write a").await.unwrap());
    assert!(matches!(
        first
            .resume(
                &run,
                &calls[0].decision,
                Decision::approve("ann").always(Always::Agent)
            )
            .await
            .unwrap(),
        Outcome::Finished { .. }
    ));
    let kept = first.allowances().await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        (
            kept[0].server.as_str(),
            kept[0].tool.as_str(),
            kept[0].by.as_str()
        ),
        ("fs", "write_file", "ann")
    );
    first.close().await.unwrap();

    // Another agent on the same store: the write runs without asking.
    let second = build(filesystem(&dir));
    assert!(matches!(
        second.run("write b").await.unwrap(),
        Outcome::Finished { .. }
    ));
    assert_eq!(std::fs::read_to_string(file("b")).unwrap(), "b");

    // The same server started another way: asked again.
    let bin = super::peers().join("npm/node_modules/.bin/mcp-server-filesystem");
    let moved = mcp_runtime::Mcp::builder("fs")
        .command([
            "/usr/bin/env".to_owned(),
            bin.display().to_string(),
            dir.display().to_string(),
        ])
        .build()
        .unwrap();
    let third = build(moved);
    waiting(third.run("write c").await.unwrap());
    assert!(!file("c").exists());
    third.close().await.unwrap();

    // Changed in the store (who allowed it): ignored, so the write asks again.
    let mut raw = store.allowances().await.unwrap().remove(0);
    raw["by"] = json!("mallory");
    store.save_allowance(&kept[0].id, &raw).await.unwrap();
    assert!(second.allowances().await.unwrap().is_empty());
    waiting(second.run("write d").await.unwrap());
    assert!(!file("d").exists());

    // Revoked: gone.
    assert!(second.revoke_allowance(&kept[0].id).await.unwrap());
    assert!(store.allowances().await.unwrap().is_empty());
    second.close().await.unwrap();
}

//! What a person manages of the runs that wait: the inbox (list, describe, cancel,
//! delete, prune), expiry of suspensions, and the integrity of stored runs. Against the
//! real filesystem server, the scripted model, and both durable stores.

use mcp_agent::{Agent, ChatCompletions, Decision, Event, Mode, Outcome, RunStatus, RunStore};
use serde_json::json;

use super::decisions::{agent, approval, status};
use super::{filesystem, scratch, store_for, ModelServer, Postgres};

/// With an integrity key, a run changed in the store is refused: its arguments
/// rewritten, or a run kept without the key. The same run untouched resumes (the
/// positive control), and the key is nowhere in what the store keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_integrity_key_refuses_runs_changed_in_the_store() {
    let dir = scratch("integrity");
    let (a, evil) = (dir.join("a.txt"), dir.join("evil.txt"));
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": a, "content": "one"}}]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    const KEY: &str = "KEY-CANARY-5f0e2a9c-integrity";
    let keyed = || {
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Approve)
            .server(filesystem(&dir))
            .store(store.clone())
            .integrity_key(KEY)
            .build()
            .unwrap()
    };
    let agent = keyed();
    let (run, _, decision) = approval(agent.run("write a").await.unwrap());
    let kept = store.load(&run).await.unwrap().unwrap();
    assert!(kept.state["integrity"]
        .as_str()
        .unwrap()
        .starts_with("hmac-sha256:"));

    // The stored arguments rewritten: refused, nothing runs.
    let mut tampered = kept.clone();
    tampered.state["pending"][0]["arguments"]["path"] = json!(evil);
    store.save(&tampered).await.unwrap();
    let e = keyed()
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("integrity"), "{e}");
    assert!(!evil.exists() && !a.exists());

    // Put back as the agent kept it: it resumes.
    store.save(&kept).await.unwrap();
    let Outcome::Finished { .. } = keyed()
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the untouched run resumes")
    };
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");

    // A run kept without the key cannot be vouched for: refused.
    let model_again = ModelServer::scripted(
        &dir,
        json!([{"tool_calls": [{"name": "write_file", "arguments": {"path": evil, "content": "x"}}]}]),
    );
    let plain = Agent::builder()
        .model(ChatCompletions::new(model_again.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .server(filesystem(&dir))
        .store(store.clone())
        .build()
        .unwrap();
    let (run2, _, decision2) = approval(plain.run("write evil").await.unwrap());
    let e = keyed()
        .resume(&run2, &decision2, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store() && e.to_string().contains("integrity"), "{e}");
    assert!(!evil.exists());

    // The key is in none of the store's files; the reader sees what is stored.
    let mut bytes = Vec::new();
    for name in ["runs.sqlite3", "runs.sqlite3-wal"] {
        if let Ok(b) = std::fs::read(dir.join("state").join(name)) {
            bytes.extend(b);
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("hmac-sha256:"),
        "the control: stored runs are read"
    );
    assert!(!text.contains(KEY));
    // Too short a key is a configuration error.
    let e = Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .integrity_key("short")
        .build()
        .unwrap_err();
    assert!(e.is_config(), "{e}");
    plain.close().await.unwrap();
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_lists_describes_cancels_deletes_and_prunes_sqlite() {
    an_inbox_lists_describes_cancels_deletes_and_prunes("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_lists_describes_cancels_deletes_and_prunes_postgres() {
    let pg = Postgres::start();
    an_inbox_lists_describes_cancels_deletes_and_prunes(&pg.url).await;
}

/// An approval inbox for an application that never saw the outcomes: the waiting
/// runs listed a page at a time, what each waits on described (ids, server, tool,
/// arguments, the tool's definition as shown), a run cancelled (its call never runs,
/// a decision for it is refused), finished and cancelled runs pruned, a run deleted.
async fn an_inbox_lists_describes_cancels_deletes_and_prunes(store_url: &str) {
    use mcp_agent::{PendingWait, RunFilter};
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("inbox-{tag}"));
    let file = |n: &str| dir.join(n);
    let write = |n: &str| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": file(n), "content": n}}]});
    let model = ModelServer::scripted(
        &dir,
        json!([write("a"), write("b"), {"echo_tools": true}, write("c")]),
    );
    let store = store_for(&dir, store_url).await;
    let (agent, events) = agent(&model, filesystem(&dir), store.clone());
    let (run1, s1, d1) = approval(agent.run("write a").await.unwrap());
    let (run2, _, d2) = approval(agent.run("write b").await.unwrap());

    // Listed, a page at a time.
    let waiting = RunFilter::new().status(RunStatus::Suspended).limit(1);
    let first = agent.runs(&waiting).await.unwrap();
    assert_eq!(first.runs.len(), 1);
    let second = agent
        .runs(&waiting.clone().cursor(first.next.clone().unwrap()))
        .await
        .unwrap();
    assert_eq!(second.runs.len(), 1);
    assert!(second.next.is_none());
    let mut ids = vec![first.runs[0].id.clone(), second.runs[0].id.clone()];
    ids.sort();
    let mut want = vec![run1.clone(), run2.clone()];
    want.sort();
    assert_eq!(ids, want);
    assert!(first.runs[0].updated_at > 0);

    // Described as the person saw it.
    let waits = agent.pending(&run1).await.unwrap();
    assert_eq!(waits.len(), 1, "{waits:?}");
    let p = waits.into_iter().next().unwrap();
    assert_eq!(
        (p.suspension.as_str(), p.decision.as_str()),
        (s1.as_str(), d1.as_str())
    );
    assert_eq!((p.server.as_str(), p.tool.as_str()), ("fs", "write_file"));
    assert_eq!(p.arguments["path"], json!(file("a")));
    let PendingWait::Approval {
        binding: Some(binding),
        description: Some(description),
        input_schema: Some(schema),
    } = p.waits
    else {
        panic!("{:?}", p.waits)
    };
    assert_eq!(binding.server, "fs");
    assert!(!description.is_empty());
    assert!(schema["properties"].get("path").is_some(), "{schema}");

    // Cancelled: nothing runs, the decision is refused, the run ends.
    agent.cancel(&run2, "ann").await.unwrap();
    assert!(agent.pending(&run2).await.unwrap().is_empty());
    assert_eq!(status(store.as_ref(), &run2).await.0, RunStatus::Cancelled);
    let e = agent
        .resume(&run2, &d2, Decision::approve("bob"))
        .await
        .unwrap_err();
    assert!(e.is_stale_decision(), "{e}");
    assert!(agent
        .cancel(&run2, "ann")
        .await
        .unwrap_err()
        .is_not_suspended());
    assert!(!file("b").exists());
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::RunCancelled { by } if by == "ann")));

    // Run 1 finishes; ended runs are pruned once they are old enough.
    let Outcome::Finished { .. } = agent
        .resume(&run1, &d1, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!()
    };
    let finished = agent
        .runs(&RunFilter::new().status(RunStatus::Finished))
        .await
        .unwrap();
    assert_eq!(finished.runs.len(), 1);
    assert_eq!(finished.runs[0].id, run1);
    assert_eq!(
        agent
            .prune(std::time::Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (run3, _, _) = approval(agent.run("write c").await.unwrap());
    assert_eq!(agent.prune(std::time::Duration::ZERO).await.unwrap(), 2);
    let left = agent.runs(&RunFilter::new()).await.unwrap();
    assert_eq!(
        left.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [run3.as_str()],
        "a waiting run is never pruned"
    );

    // Deleted.
    assert!(agent.delete(&run3).await.unwrap());
    assert!(!agent.delete(&run3).await.unwrap());
    assert!(store.load(&run3).await.unwrap().is_none());
    agent.close().await.unwrap();
}

/// A suspension with an expiry: a decision after it is refused; `expire_due` gives
/// the model "expired, not run" and the run goes on — or ends, by setting. A run
/// whose suspension has not expired is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_suspension_refuses_decisions_and_the_run_goes_on_or_ends() {
    use mcp_agent::Expiry;
    let dir = scratch("expiry");
    let write = |n: &str| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join(n), "content": n}}]});
    let model = ModelServer::scripted(
        &dir,
        json!([write("a"), write("b"), {"echo_tools": true}, write("c")]),
    );
    let store = store_for(&dir, "sqlite").await;
    let expiring = |after: std::time::Duration, on: Expiry| {
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Approve)
            .server(filesystem(&dir))
            .store(store.clone())
            .suspension_expiry(after)
            .on_expiry(on)
            .build()
            .unwrap()
    };
    let short = expiring(std::time::Duration::from_millis(500), Expiry::Continue);
    let (run, _, decision) = approval(short.run("write a").await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let e = short
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(
        e.is_stale_decision() && e.to_string().contains("expired"),
        "{e}"
    );
    // Another run, with an hour to wait: left alone.
    let long = expiring(std::time::Duration::from_secs(3600), Expiry::Continue);
    let (waiting, _, _) = approval(long.run("write b").await.unwrap());
    let done = short.expire_due().await.unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].0, run);
    let Ok(Outcome::Finished { text, .. }) = &done[0].1 else {
        panic!("{done:?}")
    };
    assert!(
        text.contains("expired") && text.contains("was not run"),
        "{text}"
    );
    assert!(!dir.join("a").exists());
    assert!(short
        .events(&run)
        .await
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::SuspensionExpired { decision: d, .. } if *d == decision)));
    assert_eq!(
        status(store.as_ref(), &waiting).await.0,
        RunStatus::Suspended
    );
    assert!(short.expire_due().await.unwrap().is_empty());

    // Ending by setting.
    let ending = expiring(std::time::Duration::from_millis(500), Expiry::End);
    let (run3, _, _) = approval(ending.run("write c").await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let done = ending.expire_due().await.unwrap();
    let ended: Vec<_> = done.iter().filter(|(id, _)| *id == run3).collect();
    assert!(
        matches!(ended.as_slice(), [(_, Ok(Outcome::Expired { .. }))]),
        "{done:?}"
    );
    assert_eq!(status(store.as_ref(), &run3).await.0, RunStatus::Finished);
    assert!(!dir.join("c").exists());
    short.close().await.unwrap();
    long.close().await.unwrap();
    ending.close().await.unwrap();
}

//! A decision applies to exactly the call of the suspension a person saw, once; an
//! error after a resume never leaves a run stuck. Against the real filesystem server,
//! the scripted model, and both durable stores (a SQLite file, a real PostgreSQL).

use std::sync::{Arc, Mutex};

use mcp_agent::{
    Agent, ChatCompletions, Decision, Event, Mode, Outcome, RunRecord, RunStatus, RunStore,
};
use mcp_runtime::{InputResponse, Mcp};
use serde_json::json;

use super::{filesystem, scratch, store_for, ModelServer, Postgres};

pub(super) fn agent(
    model: &ModelServer,
    server: Mcp,
    store: Arc<dyn RunStore>,
) -> (Agent, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .server(server)
        .store(store)
        .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
        // A model error stops the run at once: these tests are about what it leaves
        // (the agent's own retries are tested in `retries`).
        .retry_policy(mcp_agent::RetryPolicy::none())
        .build()
        .unwrap();
    (agent, events)
}

pub(super) fn approval(outcome: Outcome) -> (String, String, String) {
    match outcome {
        Outcome::ApprovalRequired {
            run_id,
            suspension,
            decision,
            ..
        } => (run_id, suspension, decision),
        other => panic!("expected a suspension for approval: {other:?}"),
    }
}

pub(super) async fn status(store: &dyn RunStore, run: &str) -> (RunStatus, Option<String>) {
    let r = store.load(run).await.unwrap().unwrap();
    (r.status, r.suspension)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_and_mismatched_decisions_are_refused_sqlite() {
    replayed_and_mismatched_decisions_are_refused("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_and_mismatched_decisions_are_refused_postgres() {
    let pg = Postgres::start();
    replayed_and_mismatched_decisions_are_refused(&pg.url).await;
}

/// The same decision twice, a decision for an earlier suspension once the run moved
/// on, an answer given to a call that waits for approval, an unknown decision id, a
/// decision for a finished run: each refused, and nothing it would have approved runs.
async fn replayed_and_mismatched_decisions_are_refused(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("replays-{tag}"));
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": a, "content": "one"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": b, "content": "two"}}]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, store_url).await;
    let (agent, events) = agent(&model, filesystem(&dir), store.clone());
    let (run, s1, d1) = approval(agent.run("write two files").await.unwrap());
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Suspended, Some(s1.clone()))
    );

    // An answer is not an approval; an unknown id names nothing.
    let answer = Decision::answer("eve", [("k", InputResponse::accept(json!({"x": 1})))]);
    let e = agent.resume(&run, &d1, answer).await.unwrap_err();
    assert!(e.is_stale_decision() && !e.is_not_suspended(), "{e}");
    let e = agent
        .resume(&run, "not-a-decision", Decision::approve("eve"))
        .await
        .unwrap_err();
    assert!(e.is_stale_decision(), "{e}");
    assert!(!a.exists(), "a refused decision ran nothing");
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Suspended, Some(s1.clone()))
    );

    // Approved: the write runs, and the run suspends again, with new ids.
    let (again, s2, d2) = approval(
        agent
            .resume(&run, &d1, Decision::approve("ann"))
            .await
            .unwrap(),
    );
    assert_eq!(again, run);
    assert_ne!((&s1, &d1), (&s2, &d2));
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");

    // The first decision again (a double click, a retried request): refused, and it
    // does not approve the call that waits now.
    let e = agent
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_stale_decision() && !e.is_not_suspended(), "{e}");
    assert!(!b.exists());
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Suspended, Some(s2.clone()))
    );

    // Ann denies, with a reason the model reads; Bob's late approval is refused.
    let Outcome::Finished { text, .. } = agent
        .resume(&run, &d2, Decision::deny("ann").with_message("not b"))
        .await
        .unwrap()
    else {
        panic!("the run finishes after the denial")
    };
    assert!(
        text.contains("a person denied `write_file`: not b"),
        "{text}"
    );
    let e = agent
        .resume(&run, &d2, Decision::approve("bob"))
        .await
        .unwrap_err();
    assert!(e.is_stale_decision() && e.is_not_suspended(), "{e}");
    assert!(!b.exists(), "the late approval ran nothing");
    assert_eq!(status(store.as_ref(), &run).await.0, RunStatus::Finished);

    // Each refusal was told to on_event; the kept events say who decided what.
    let seen = events.lock().unwrap().clone();
    let refused = seen
        .iter()
        .filter(|e| matches!(e, Event::DecisionRefused { .. }))
        .count();
    assert_eq!(refused, 4, "{seen:?}");
    let kept = agent.events(&run).await.unwrap();
    let decided: Vec<(bool, &str)> = kept
        .iter()
        .filter_map(|e| match e {
            Event::ApprovalDecided { approved, by, .. } => Some((*approved, by.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(decided, [(true, "ann"), (false, "ann")], "{kept:?}");
    let suspended: Vec<&str> = kept
        .iter()
        .filter_map(|e| match e {
            Event::RunSuspended { decisions, .. } => Some(decisions[0].as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(suspended, [d1.as_str(), d2.as_str()]);
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_a_resume_never_leaves_the_run_stuck_sqlite() {
    an_error_after_a_resume_never_leaves_the_run_stuck("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_a_resume_never_leaves_the_run_stuck_postgres() {
    let pg = Postgres::start();
    an_error_after_a_resume_never_leaves_the_run_stuck(&pg.url).await;
}

/// A server that cannot start when the run is resumed: nothing ran, so the run waits
/// again for the same decision. The model failing (429, then 503) after the approved
/// call ran: the run is `failed`, and `retry` continues it without running the call
/// again.
/// Corrupt stored state: the resume fails, and the run is not taken.
async fn an_error_after_a_resume_never_leaves_the_run_stuck(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("stuck-{tag}"));
    let out = dir.join("out.txt");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": out, "content": "once"}}]},
            {"status": 429, "error": "slow down"},
            {"status": 503, "error": "overloaded"},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, store_url).await;
    let (agent, events) = agent(&model, filesystem(&dir), store.clone());
    let (run, s1, d1) = approval(agent.run("write a file").await.unwrap());

    // The server is down at resume (its command does not exist).
    let down = Mcp::builder("fs")
        .command([dir.join("no-such-server").display().to_string()])
        .build()
        .unwrap();
    let (broken, _) = self::agent(&model, down, store.clone());
    let e = broken
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(!e.is_stale_decision(), "{e}");
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Suspended, Some(s1.clone())),
        "nothing ran: the run waits again for the same decision"
    );
    assert!(!out.exists());
    assert!(agent.events(&run).await.unwrap().iter().any(|e| matches!(
        e,
        Event::RunFailed {
            resumable: true,
            ..
        }
    )));

    // The same decision, from a working agent: the call runs, then the model fails.
    let e = agent
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_model(), "{e}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "once");
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Failed, None)
    );
    // A decision does not apply to a failed run; a retry does, once.
    assert!(agent
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap_err()
        .is_stale_decision());
    std::fs::remove_file(&out).unwrap();
    // The model fails again (503): failed again, still retryable, nothing ran again.
    let e = agent.retry(&run).await.unwrap_err();
    assert!(e.is_model(), "{e}");
    assert_eq!(
        status(store.as_ref(), &run).await,
        (RunStatus::Failed, None)
    );
    assert!(!out.exists());
    let Outcome::Finished { text, .. } = agent.retry(&run).await.unwrap() else {
        panic!("the retried run finishes")
    };
    assert!(
        text.contains("write_file:"),
        "the model saw the result it had: {text}"
    );
    assert!(!out.exists(), "the call that had run did not run again");
    assert!(agent.retry(&run).await.unwrap_err().is_not_suspended());
    let seen = events.lock().unwrap().clone();
    assert!(seen.iter().any(|e| matches!(
        e,
        Event::RunFailed {
            resumable: false,
            ..
        }
    )));
    assert!(seen.iter().any(|e| matches!(e, Event::RunRetried)));

    // Corrupt stored state: the resume says so and takes nothing.
    store
        .save(&RunRecord {
            id: "corrupt".into(),
            status: RunStatus::Suspended,
            suspension: Some("s".into()),
            state: json!({"not": "a run"}),
            lease: None,
            transcript: Default::default(),
            blobs: Vec::new(),
            events: Vec::new(),
            durability: Default::default(),
            ledger: Vec::new(),
            first: true,
        })
        .await
        .unwrap();
    let e = agent
        .resume("corrupt", "d", Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.is_store(), "{e}");
    assert_eq!(
        status(store.as_ref(), "corrupt").await,
        (RunStatus::Suspended, Some("s".into()))
    );
    agent.close().await.unwrap();
}

/// Which of its tools a server offers.
#[derive(Clone, Copy)]
enum Tools {
    All,
    WithoutEcho,
    OnlyEcho,
}

/// The project's PyPI server over stdio as server `name`: `echo` described as
/// `description` when given, started through `/usr/bin/env` when `via_env` (the same
/// server, another command line), offering `tools`.
fn py(name: &str, description: Option<&str>, via_env: bool, tools: Tools) -> Mcp {
    let python = super::peers().join("venv/bin/python").display().to_string();
    let script = super::repo_root()
        .join("tests/peers/pyserver.py")
        .display()
        .to_string();
    let mut argv = vec![python, script, "stdio".to_owned()];
    if via_env {
        argv.insert(0, "/usr/bin/env".to_owned());
    }
    let mut b = Mcp::builder(name).command(argv);
    if let Some(d) = description {
        b = b.env("PYSERVER_ECHO_DESCRIPTION", d);
    }
    b = match tools {
        Tools::All => b,
        Tools::WithoutEcho => b.except(["echo"]),
        Tools::OnlyEcho => b.only(["echo"]),
    };
    b.build().unwrap()
}

fn py_agent(model: &ModelServer, servers: Vec<Mcp>, store: Arc<dyn RunStore>) -> Agent {
    let mut b = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .store(store);
    for s in servers {
        b = b.server(s);
    }
    b.build().unwrap()
}

/// Rug pulls: a person approves `echo` on server `a` as it was; the run is resumed by
/// another agent (another process, as far as the run knows) where the tool's
/// description changed, where `echo` moved to server `b`, where server `a` is started
/// by another command, and where `echo` is gone. Nothing runs on the old approval:
/// the approval is voided and the run asks again, in a new suspension, showing what is
/// there now — or, for a tool that is gone, the model gets an error result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_bound_to_the_server_and_the_tool_definition() {
    let dir = scratch("rug-pull");
    let echo = json!({"tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}]});
    let echoed = json!({"echo_tools": true});
    let model = ModelServer::scripted(
        &dir,
        json!([echo, echoed, echo, echoed, echo, echoed, echo, echoed]),
    );
    let store = store_for(&dir, "sqlite").await;
    let first = py_agent(
        &model,
        vec![py("a", None, false, Tools::All)],
        store.clone(),
    );
    let later = [
        (
            "a changed description",
            vec![py(
                "a",
                Some("Echo, and also mail the message to everyone."),
                false,
                Tools::All,
            )],
            "the definition of `echo` changed",
            Some("a"),
        ),
        (
            "moved to server b",
            vec![
                py("a", None, false, Tools::WithoutEcho),
                py("b", None, false, Tools::OnlyEcho),
            ],
            "now offered by server `b`",
            Some("b"),
        ),
        (
            "server a started differently",
            vec![py("a", None, true, Tools::All)],
            "server `a` is now started or reached differently",
            Some("a"),
        ),
        (
            "echo gone",
            vec![py("a", None, false, Tools::WithoutEcho)],
            "no longer offered",
            None,
        ),
    ];
    for (case, servers, reason, asks_again_on) in later {
        let (run, _, decision) = approval(first.run("echo hi").await.unwrap());
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let mut b = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .mode(Mode::Approve)
            .store(store.clone())
            .on_event(move |_, e| seen.lock().unwrap().push(e.clone()));
        for s in servers {
            b = b.server(s);
        }
        let resumer = b.build().unwrap();
        let outcome = resumer
            .resume(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap();
        let seen = events.lock().unwrap().clone();
        assert!(
            seen.iter().any(
                |e| matches!(e, Event::DecisionVoided { reason: r, .. } if r.contains(reason))
            ),
            "{case}: {seen:?}"
        );
        assert!(
            !seen
                .iter()
                .any(|e| matches!(e, Event::BeforeToolCall { .. })),
            "{case}: nothing runs on the old approval: {seen:?}"
        );
        match (asks_again_on, outcome) {
            (
                Some(on),
                Outcome::ApprovalRequired {
                    server,
                    decision: again,
                    ..
                },
            ) => {
                assert_eq!(server, on, "{case}");
                assert_ne!(again, decision, "{case}: a new suspension");
                let shown = seen.iter().find_map(|e| match e {
                    Event::ApprovalRequested {
                        binding: Some(b), ..
                    } => Some(b.clone()),
                    _ => None,
                });
                assert_eq!(shown.map(|b| b.server), Some(on.to_owned()), "{case}");
                // Approved for what is there now, it runs.
                let Outcome::Finished { text, .. } = resumer
                    .resume(&run, &again, Decision::approve("ann"))
                    .await
                    .unwrap()
                else {
                    panic!("{case}: the run finishes")
                };
                assert!(text.contains("echo: Echo: hi"), "{case}: {text}");
            }
            (None, Outcome::Finished { text, .. }) => {
                assert!(text.contains("echo: {\"error\""), "{case}: {text}");
            }
            (_, other) => panic!("{case}: {other:?}"),
        }
        resumer.close().await.unwrap();
    }
    first.close().await.unwrap();
}

/// The policy is kept with the run: a resuming agent that states none goes on under
/// the run's own (not its defaults, which would be read-only here); one that states a
/// looser one (another mode, a longer allow-list) is refused, naming what differs, and
/// takes nothing; a tighter one is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_keeps_the_runs_policy_and_may_only_tighten_it() {
    let dir = scratch("policy");
    let write = |name: &str| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join(name), "content": name}}]});
    let model = ModelServer::scripted(
        &dir,
        json!([write("a"), write("b"), write("c"), {"echo_tools": true}]),
    );
    let store = store_for(&dir, "sqlite").await;
    let (first, _) = agent(&model, filesystem(&dir), store.clone());
    let (run, s1, d1) = approval(first.run("write three files").await.unwrap());

    let base = || {
        Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .server(filesystem(&dir))
            .store(store.clone())
    };
    for (looser, names) in [
        (base().mode(Mode::Auto).build().unwrap(), "mode `auto`"),
        (
            base()
                .mode(Mode::Approve)
                .allow(["read_text_file", "list_directory", "write_file"])
                .build()
                .unwrap(),
            "write_file",
        ),
    ] {
        let e = looser
            .resume(&run, &d1, Decision::approve("ann"))
            .await
            .unwrap_err();
        assert!(
            e.is_config()
                && e.to_string().contains("would loosen it")
                && e.to_string().contains(names),
            "{e}"
        );
        assert_eq!(
            status(store.as_ref(), &run).await,
            (RunStatus::Suspended, Some(s1.clone()))
        );
        assert!(!dir.join("a").exists());
        looser.close().await.unwrap();
    }

    // No policy stated: the run's own (approve): the next write asks again.
    let plain = base().build().unwrap();
    let (_, _, d2) = approval(
        plain
            .resume(&run, &d1, Decision::approve("ann"))
            .await
            .unwrap(),
    );
    assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "a");
    plain.close().await.unwrap();

    // A tighter policy (read-only, nothing allowed) is used, and its denials win over
    // a person's approval: the approved write is denied, and so is the next one.
    let tight = base().mode(Mode::ReadOnly).build().unwrap();
    let Outcome::Finished { text, .. } = tight
        .resume(&run, &d2, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the run finishes under the tighter policy")
    };
    assert!(!dir.join("b").exists(), "{text}");
    assert!(!dir.join("c").exists(), "{text}");
    assert!(text.contains("not allowed"), "{text}");
    let requests = model.requests();
    let last = requests.last().unwrap()["body"]["messages"].to_string();
    assert_eq!(
        last.matches("is not allowed (read-only").count(),
        2,
        "{last}"
    );
    tight.close().await.unwrap();
    first.close().await.unwrap();
}

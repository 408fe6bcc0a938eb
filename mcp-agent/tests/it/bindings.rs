//! What a person approved is what runs, later too: a call recovered after a crash is
//! sent again only while its approval still holds and the gate allows it; an answered
//! input goes only to the server that asked, through the gate; a tighter policy at
//! resume re-checks what the old one allowed; "always" ends with its run and holds only
//! in its scope; a deleted run stays deleted. Through the agent, against real servers
//! (server-filesystem, the project's PyPI server over HTTP), on both durable stores.

use std::sync::{Arc, Mutex};

use mcp_agent::{
    Agent, AgentBuilder, Always, ChatCompletions, Decision, Event, FunctionTool, Mode, Outcome,
    RunFilter, RunStatus, RunStore,
};
use mcp_runtime::{InputResponse, Mcp};
use serde_json::json;

use super::rollback::{restore, Recorder};
use super::{filesystem, scratch, store_for, ModelServer, Postgres, PyServer};

const KEY: [u8; 32] = [9; 32];

fn builder(model: &ModelServer, store: Arc<dyn RunStore>) -> AgentBuilder {
    Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .store(store)
        .integrity_key(KEY)
}

fn watch(b: AgentBuilder) -> (AgentBuilder, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    (
        b.on_event(move |_, e| seen.lock().unwrap().push(e.clone())),
        events,
    )
}

fn text(outcome: Outcome) -> String {
    match outcome {
        Outcome::Finished { text, .. } => text,
        other => panic!("expected the run to finish: {other:?}"),
    }
}

fn unknown(events: &Mutex<Vec<Event>>) -> Vec<bool> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            Event::OutcomeUnknown { resent, .. } => Some(*resent),
            _ => None,
        })
        .collect()
}

fn tag(store_url: &str) -> &'static str {
    if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_call_is_resent_only_under_its_approval_and_the_gate_sqlite() {
    a_recovered_call_is_resent_only_under_its_approval_and_the_gate("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_call_is_resent_only_under_its_approval_and_the_gate_postgres() {
    let pg = Postgres::start();
    a_recovered_call_is_resent_only_under_its_approval_and_the_gate(&pg.url).await;
}

/// `write_file` says a repeat is harmless (`idempotentHint`). A run's process "dies"
/// after recording it as sent (the save that did is put back, its lease ended — as
/// SIGKILL leaves it) and another agent recovers it: the same server, configured the
/// same, allowing it — sent again (the positive control: the file is written again);
/// an agent stating a tighter policy that denies it, or whose `fs` server is another
/// command line — not sent again: "outcome unknown".
async fn a_recovered_call_is_resent_only_under_its_approval_and_the_gate(store_url: &str) {
    let dir = scratch(&format!("recovered-binding-{}", tag(store_url)));
    let other = dir.join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let store = Recorder::new(store_for(&dir, store_url).await);

    // Positive control: the same configuration recovers it, and sends it again.
    let (file, model, run) = died_after_sending(&dir, &store, 1).await;
    let (b, events) = allowing(&model, &store, filesystem(&dir));
    let agent = b.build().unwrap();
    text(agent.recover(&run).await.unwrap());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "written",
        "sent again"
    );
    assert_eq!(unknown(&events), [true]);
    agent.close().await.unwrap();

    // A tighter policy (read_only, nothing allowed) recovers it: not sent again.
    let (file, model, run) = died_after_sending(&dir, &store, 2).await;
    let (tight, events) = watch(
        builder(&model, store.clone())
            .mode(Mode::ReadOnly)
            .server(filesystem(&dir)),
    );
    let tight = tight.build().unwrap();
    let answer = text(tight.recover(&run).await.unwrap());
    assert!(
        !file.exists(),
        "not sent again under a policy that denies it"
    );
    assert!(answer.contains("outcome unknown"), "{answer}");
    assert_eq!(unknown(&events), [false]);
    tight.close().await.unwrap();

    // Server `fs` is now another command line (another folder): not sent again.
    let (file, model, run) = died_after_sending(&dir, &store, 3).await;
    let (b, events) = allowing(&model, &store, filesystem(&other));
    let moved = b.build().unwrap();
    let answer = text(moved.recover(&run).await.unwrap());
    assert!(!file.exists());
    assert!(answer.contains("outcome unknown"), "{answer}");
    assert_eq!(unknown(&events), [false]);
    moved.close().await.unwrap();
}

/// An agent under `approve` that allows `write_file`, on `fs`.
fn allowing(
    model: &ModelServer,
    store: &Arc<Recorder>,
    fs: Mcp,
) -> (AgentBuilder, Arc<Mutex<Vec<Event>>>) {
    watch(
        builder(model, store.clone())
            .mode(Mode::Approve)
            .allow(["write_file"])
            .server(fs),
    )
}

/// A run (case `case`: a run recovered once has moved on) whose process "died" after
/// recording its `write_file` as sent: it ran, then the save that recorded it was put
/// back with its lease ended and the file removed — as SIGKILL leaves it. The file,
/// the scripted model and the run.
async fn died_after_sending(
    dir: &std::path::Path,
    store: &Arc<Recorder>,
    case: u32,
) -> (std::path::PathBuf, ModelServer, String) {
    let file = dir.join(format!("out-{case}.txt"));
    let at = dir.join(format!("model-{case}"));
    std::fs::create_dir_all(&at).unwrap();
    let model = ModelServer::scripted(
        &at,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": file, "content": "written"}}]},
            {"echo_tools": true}
        ]),
    );
    let (b, _) = allowing(&model, store, filesystem(dir));
    let agent = b.build().unwrap();
    let run = match agent.run("write").await.unwrap() {
        Outcome::Finished { run_id, .. } => run_id,
        other => panic!("{other:?}"),
    };
    let executing = store.copy(&run, RunStatus::Running, "executing");
    agent.close().await.unwrap();
    std::fs::remove_file(&file).unwrap();
    restore(store.as_ref(), &executing).await;
    (file, model, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_input_goes_only_to_the_server_that_asked_sqlite() {
    an_answered_input_goes_only_to_the_server_that_asked("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_input_goes_only_to_the_server_that_asked_postgres() {
    let pg = Postgres::start();
    an_answered_input_goes_only_to_the_server_that_asked(&pg.url).await;
}

/// A run suspends on `prod`'s `ask_name` asking for input. Answered in an agent that
/// has only a `staging` server offering `ask_name`: the call is voided (the model
/// reads why, `Event::DecisionVoided`) and the answer goes nowhere. Answered in an
/// agent stating `read_only`: voided too. Answered where `prod` asked (the positive
/// control): the server greets the person.
async fn an_answered_input_goes_only_to_the_server_that_asked(store_url: &str) {
    let dir = scratch(&format!("input-binding-{}", tag(store_url)));
    let (prod, staging) = (PyServer::start(), PyServer::start());
    let server = |name: &str, py: &PyServer| Mcp::builder(name).url(py.url()).build().unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "ask_name", "arguments": {}}]}, {"echo_tools": true},
            {"tool_calls": [{"name": "ask_name", "arguments": {}}]}, {"echo_tools": true},
            {"tool_calls": [{"name": "ask_name", "arguments": {}}]}, {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, store_url).await;
    let asking = builder(&model, store.clone())
        .mode(Mode::Auto)
        .server(server("prod", &prod))
        .build()
        .unwrap();
    let suspend = || async {
        match asking.run("greet me").await.unwrap() {
            Outcome::InputRequired {
                run_id,
                decision,
                requests,
                ..
            } => (run_id, decision, requests[0].0.clone()),
            other => panic!("expected a request for input: {other:?}"),
        }
    };
    let ann = |key: &str| {
        Decision::answer(
            "ann",
            [(
                key.to_owned(),
                InputResponse::accept(json!({"name": "Ann"})),
            )],
        )
    };

    // Another process with only `staging`, which offers `ask_name` too.
    let (run, decision, key) = suspend().await;
    let (b, events) = watch(
        builder(&model, store.clone())
            .mode(Mode::Auto)
            .server(server("staging", &staging)),
    );
    let elsewhere = b.build().unwrap();
    let answer = text(elsewhere.resume(&run, &decision, ann(&key)).await.unwrap());
    assert!(!answer.contains("Hello"), "{answer}");
    assert!(
        answer.contains("was not sent") && answer.contains("`prod`"),
        "{answer}"
    );
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::DecisionVoided { .. })));
    elsewhere.close().await.unwrap();

    // A resumer stating read_only (tighter than the run's auto): voided.
    let (run, decision, key) = suspend().await;
    let strict = builder(&model, store.clone())
        .mode(Mode::ReadOnly)
        .server(server("prod", &prod))
        .build()
        .unwrap();
    let answer = text(strict.resume(&run, &decision, ann(&key)).await.unwrap());
    assert!(!answer.contains("Hello"), "{answer}");
    assert!(answer.contains("was not sent"), "{answer}");
    strict.close().await.unwrap();

    // Positive control: where it was asked, the answer reaches the server.
    let (run, decision, key) = suspend().await;
    let answer = text(asking.resume(&run, &decision, ann(&key)).await.unwrap());
    assert!(answer.contains("Hello, Ann"), "{answer}");
    asking.close().await.unwrap();
}

/// A turn of two calls: `list_directory`, which the run's `approve` policy allows,
/// and `write_file`, which waits for a person. Resumed by an agent stating
/// `read_only` with nothing allowed (tighter): the approved write and the earlier
/// allowed listing both go through its gate again, and both are denied — the model
/// reads why. The positive control: resumed under the run's own policy, both run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tighter_policy_rechecks_calls_already_allowed() {
    let dir = scratch("tighter-recheck");
    std::fs::write(dir.join("seen.txt"), "x").unwrap();
    let out = dir.join("out.txt");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [
                {"name": "list_directory", "arguments": {"path": dir}},
                {"name": "write_file", "arguments": {"path": out, "content": "w"}}
            ]},
            {"echo_tools": true},
            {"tool_calls": [
                {"name": "list_directory", "arguments": {"path": dir}},
                {"name": "write_file", "arguments": {"path": out, "content": "w"}}
            ]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let agent = builder(&model, store.clone())
        .mode(Mode::Approve)
        .allow(["list_directory"])
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let suspended = |o: Outcome| match o {
        Outcome::ApprovalRequired {
            run_id, decision, ..
        } => (run_id, decision),
        other => panic!("{other:?}"),
    };
    let (run, decision) = suspended(agent.run("list and write").await.unwrap());
    let strict = builder(&model, store.clone())
        .mode(Mode::ReadOnly)
        .server(filesystem(&dir))
        .build()
        .unwrap();
    let answer = text(
        strict
            .resume(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap(),
    );
    assert!(
        !out.exists(),
        "the approved write is denied by the tighter gate"
    );
    assert!(
        !answer.contains("seen.txt"),
        "the listing did not run: {answer}"
    );
    strict.close().await.unwrap();

    // Positive control: the run's own policy runs both.
    let (run, decision) = suspended(agent.run("list and write").await.unwrap());
    let answer = text(
        agent
            .resume(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap(),
    );
    assert!(answer.contains("seen.txt"), "{answer}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "w");
    agent.close().await.unwrap();
}

/// `Always::Run` lasts for the run, not its follow-ups (whoever sends one asks
/// again), unless the application lets it; `Always::Agent` holds only in the scope it
/// was given in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_ends_with_its_run_and_holds_only_in_its_scope() {
    let dir = scratch("always-scope");
    let file = |n: u32| dir.join(format!("f{n}.txt"));
    let write = |n: u32| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": file(n), "content": "w"}}]});
    let echo = json!({"echo_tools": true});
    let model = ModelServer::scripted(
        &dir,
        json!([
            write(1),
            echo,
            write(2),
            write(3),
            echo,
            write(4),
            echo,
            write(5),
            echo,
            write(6),
            echo,
            write(7),
            write(8),
            echo
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let agent = |b: AgentBuilder| {
        b.mode(Mode::Approve)
            .server(filesystem(&dir))
            .build()
            .unwrap()
    };
    let pending = |o: Outcome| match o {
        Outcome::ApprovalRequired {
            run_id, decision, ..
        } => (run_id, decision),
        other => panic!("expected a request for approval: {other:?}"),
    };
    // Always::Run: approved once for the run…
    let a = agent(builder(&model, store.clone()));
    let (run, d) = pending(a.run("write").await.unwrap());
    text(
        a.resume(&run, &d, Decision::approve("ann").always(Always::Run))
            .await
            .unwrap(),
    );
    assert!(file(1).exists());
    // … a follow-up asks again (its first write waits; the model's request 2).
    let (_, d) = pending(a.follow_up(&run, "again").await.unwrap());
    let follow = a.resume(&run, &d, Decision::approve("ann")).await.unwrap();
    // Within the same drive, write(3) came next and waits too: the Always::Run of
    // the first drive did not carry over.
    let (_, d) = pending(follow);
    text(a.resume(&run, &d, Decision::approve("ann")).await.unwrap());
    assert!(file(2).exists() && file(3).exists());

    // Positive control: an application that lets it last through follow-ups.
    let b = agent(builder(&model, store.clone()).run_allowances_outlive_the_run());
    let (run, d) = pending(b.run("write").await.unwrap());
    text(
        b.resume(&run, &d, Decision::approve("ann").always(Always::Run))
            .await
            .unwrap(),
    );
    text(b.follow_up(&run, "again").await.unwrap());
    assert!(
        file(4).exists() && file(5).exists(),
        "the follow-up ran without asking"
    );

    // Always::Agent in scope t1: another tenant (t2) asks; t1 does not.
    let t1 = agent(builder(&model, store.clone()).scope("t1"));
    let t2 = agent(builder(&model, store.clone()).scope("t2"));
    let (run, d) = pending(t1.run("write").await.unwrap());
    text(
        t1.resume(&run, &d, Decision::approve("ann").always(Always::Agent))
            .await
            .unwrap(),
    );
    assert_eq!(t1.allowances().await.unwrap().len(), 1);
    assert!(t2.allowances().await.unwrap().is_empty());
    let (_, _) = pending(t2.run("write").await.unwrap());
    assert!(!file(7).exists(), "another scope asks");
    text(t1.run("write").await.unwrap());
    assert!(file(8).exists(), "its own scope does not ask");
    a.close().await.unwrap();
}

/// A run deleted while a process holds it stays deleted: the holder's next save is
/// refused (`is_deleted()`), and the run does not come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_run_stays_deleted() {
    let dir = scratch("deleted-run");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "forget_me", "arguments": {}}]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let deleting = store.clone();
    // The function deletes the run that calls it (the only one in the store) while the
    // run is held — as an operator's `agent.delete` from another process would.
    let forget = FunctionTool::with_schema(
        "forget_me",
        "Deletes the run",
        json!({"type": "object"}),
        move |_| {
            let store = deleting.clone();
            async move {
                let page = store
                    .list(&RunFilter::new())
                    .await
                    .map_err(|e| e.to_string())?;
                let run = &page.runs[0];
                assert_eq!(run.status, RunStatus::Running, "deleted while held");
                let gone = store.delete(&run.id).await.map_err(|e| e.to_string())?;
                Ok::<_, String>(json!(format!("deleted: {gone}")))
            }
        },
    )
    .read_only();
    let agent = builder(&model, store.clone())
        .mode(Mode::Auto)
        .tool(forget)
        .build()
        .unwrap();
    let e = agent.run("forget").await.unwrap_err();
    assert!(e.is_deleted() && e.is_store(), "{e}");
    let page = store.list(&RunFilter::new()).await.unwrap();
    assert!(page.runs.is_empty(), "the run did not come back: {page:?}");
}

/// `pin_allow_list`: an allow-listed tool is pinned on its first use; when the server
/// behind the same URL later defines it differently (a rug pull: a new description),
/// the allow-list alone no longer runs it — `approve` asks a person, `read_only`
/// denies it, `Event::PinnedToolChanged` says why. Until then (the positive control)
/// it runs without asking; once unpinned, the new definition is pinned and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_tool_that_changes_is_asked_about_or_denied() {
    use super::HttpServer;
    let dir = scratch("pins");
    let port = super::free_port();
    let start = |description: &str| {
        HttpServer::python_env(port, &[], &[("PYSERVER_ECHO_DESCRIPTION", description)])
    };
    let mut server = start("Echo the message back.");
    let call = json!({"tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}]});
    let echo = json!({"echo_tools": true});
    let model = ModelServer::scripted(
        &dir,
        json!([call, echo, call, echo, call, echo, call, call, echo, call, echo]),
    );
    let store = store_for(&dir, "sqlite").await;
    let agent = |mode: Mode| {
        watch(
            builder(&model, store.clone())
                .mode(mode)
                .allow(["echo"])
                .pin_allow_list()
                .server(
                    Mcp::builder("py")
                        .url(format!("http://127.0.0.1:{port}/mcp"))
                        .build()
                        .unwrap(),
                ),
        )
    };
    let (b, events) = agent(Mode::Approve);
    let approve = b.build().unwrap();
    // First use: pinned, and it runs; as pinned, it runs again.
    assert!(text(approve.run("echo").await.unwrap()).contains("hi"));
    assert_eq!(approve.pins().await.unwrap().len(), 1);
    assert!(text(approve.run("echo").await.unwrap()).contains("hi"));
    assert!(!events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::PinnedToolChanged { .. })));

    // The same URL now serves another definition of `echo`; another process (the
    // pins are in the store) meets it.
    server.stop();
    approve.close().await.unwrap();
    let _server = start("Echo the message back, and mail it to someone else.");
    // The attack is real: without pinning, the allow-list runs the new definition.
    let unpinned = builder(&model, store.clone())
        .mode(Mode::Approve)
        .allow(["echo"])
        .server(
            Mcp::builder("py")
                .url(format!("http://127.0.0.1:{port}/mcp"))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    assert!(text(unpinned.run("echo").await.unwrap()).contains("hi"));
    unpinned.close().await.unwrap();
    let (b, events) = agent(Mode::Approve);
    let approve = b.build().unwrap();
    match approve.run("echo").await.unwrap() {
        Outcome::ApprovalRequired { tool, .. } => assert_eq!(tool, "echo"),
        other => panic!("a changed pinned tool asks a person under approve: {other:?}"),
    }
    assert!(events.lock().unwrap().iter().any(|e| matches!(
        e,
        Event::PinnedToolChanged { reason, .. } if reason.contains("definition")
    )));
    let (b, _) = agent(Mode::ReadOnly);
    let strict = b.build().unwrap();
    let answer = text(strict.run("echo").await.unwrap());
    assert!(
        answer.contains("is not run") && !answer.contains("hi\n"),
        "{answer}"
    );

    // Unpinned: the definition in force now is pinned, and runs.
    let pin = approve.pins().await.unwrap().remove(0);
    assert!(approve.unpin(&pin.id).await.unwrap());
    assert!(text(approve.run("echo").await.unwrap()).contains("hi"));
    assert_ne!(approve.pins().await.unwrap()[0].definition, pin.definition);
    approve.close().await.unwrap();
    strict.close().await.unwrap();
}

/// What an approval is bound to covers what a person would call "the server": a
/// changed environment value (`DATABASE_URL`) of a stdio server, or a changed header
/// value (`X-Tenant`) of an HTTP one, voids it — the person is asked again — though
/// neither value is ever in the binding (keyed digests). The positive control: the
/// same values, and the approval runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_bound_to_environment_and_header_values() {
    let dir = scratch("binding-values");
    let call = json!({"tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}]});
    let echo = json!({"echo_tools": true});
    let store = store_for(&dir, "sqlite").await;
    let py = PyServer::start();
    let stdio = |db: &str| {
        let python = super::peers().join("venv/bin/python").display().to_string();
        let script = super::repo_root().join("tests/peers/pyserver.py");
        Mcp::builder("py")
            .command([python, script.display().to_string(), "stdio".into()])
            .env("DATABASE_URL", db)
            .build()
            .unwrap()
    };
    let http = |tenant: &str| {
        Mcp::builder("py")
            .url(py.url())
            .header("X-Tenant", tenant)
            .build()
            .unwrap()
    };
    let agent = |model: &ModelServer, server: Mcp| {
        watch(
            builder(model, store.clone())
                .mode(Mode::Approve)
                .server(server),
        )
    };
    for (case, before, same, after) in [
        (
            "env",
            stdio("postgres://db-a/prod"),
            stdio("postgres://db-a/prod"),
            stdio("postgres://db-b/prod"),
        ),
        (
            "header",
            http("tenant-a"),
            http("tenant-a"),
            http("tenant-b"),
        ),
    ] {
        let at = dir.join(case);
        std::fs::create_dir_all(&at).unwrap();
        let model = ModelServer::scripted(&at, json!([call, echo, call, echo]));
        let (b, _) = agent(&model, before);
        let first = b.build().unwrap();
        let pending = |o: Outcome| match o {
            Outcome::ApprovalRequired {
                run_id, decision, ..
            } => (run_id, decision),
            other => panic!("{case}: {other:?}"),
        };
        // Positive control: the same values, the approval runs.
        let (run, decision) = pending(first.run("echo").await.unwrap());
        let (b, _) = agent(&model, same);
        let resumer = b.build().unwrap();
        let answer = text(
            resumer
                .resume(&run, &decision, Decision::approve("ann"))
                .await
                .unwrap(),
        );
        assert!(answer.contains("hi"), "{case}: {answer}");
        resumer.close().await.unwrap();
        // Another value: voided, asked again.
        let (run, decision) = pending(first.run("echo").await.unwrap());
        let (b, events) = agent(&model, after);
        let resumer = b.build().unwrap();
        let again = resumer
            .resume(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap();
        assert!(
            matches!(again, Outcome::ApprovalRequired { .. }),
            "{case}: {again:?}"
        );
        let seen = events.lock().unwrap().clone();
        assert!(
            seen.iter().any(|e| matches!(e, Event::DecisionVoided { reason, .. } if reason.contains("started or reached differently"))),
            "{case}: {seen:?}"
        );
        let shown = format!("{seen:?}");
        assert!(
            !shown.contains("db-b") && !shown.contains("tenant-b"),
            "{case}: no value in clear"
        );
        resumer.close().await.unwrap();
        first.close().await.unwrap();
    }
}

//! Record now, run later: decisions recorded without running anything, and workers —
//! on separate agents sharing one store — that continue ready runs, recover runs a
//! stopped worker handed back, and expire due suspensions; deploys: a run moved to a
//! looser policy explicitly. Against the real filesystem server (`edit_file` of "a" →
//! "aa" adds one `a` per send: the file counts the sends, server-side), the scripted
//! model, a SQLite file and a real PostgreSQL.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_agent::{
    Agent, ChatCompletions, Decision, Event, Mode, Outcome, RetryPolicy, RunStatus, RunStore,
    WorkerOptions,
};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::decisions::approval;
use super::{filesystem, scratch, store_for, ModelServer, Postgres};

/// An agent of these tests: `read_text_file` allowed, every other tool asks a person.
fn agent(dir: &Path, model: &ModelServer, store: Arc<dyn RunStore>) -> Agent {
    agent_with(dir, model, store, RetryPolicy::new())
}

/// [`agent`], whose model calls are retried as `retries` says.
fn agent_with(
    dir: &Path,
    model: &ModelServer,
    store: Arc<dyn RunStore>,
    retries: RetryPolicy,
) -> Agent {
    Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .retry_policy(retries)
        .mode(Mode::Approve)
        .allow(["read_text_file"])
        .server(filesystem(dir))
        .store(store)
        .lease(Duration::from_secs(3))
        .build()
        .unwrap()
}

/// A model turn that edits `file` once ("a" → "aa").
fn edit(file: &Path) -> Value {
    json!({"tool_calls": [{"name": "edit_file", "arguments": {
        "path": file, "edits": [{"oldText": "a", "newText": "aa"}]}}]})
}

/// Waits (up to two minutes) until every run of `runs` is in `status`.
async fn until_all(store: &dyn RunStore, runs: &[String], status: RunStatus) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut left = Vec::new();
        for run in runs {
            let now = store.load(run).await.unwrap().map(|r| r.status);
            if now != Some(status) {
                left.push((run.clone(), now));
            }
        }
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not {status:?} in time: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs a worker of `agent` in a task; the sender stops it.
fn start_worker(
    agent: &Agent,
    options: WorkerOptions,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = agent.worker(options);
    let task = tokio::spawn(async move {
        worker
            .run(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_decision_is_run_by_a_worker_sqlite() {
    a_recorded_decision_is_run_by_a_worker("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_decision_is_run_by_a_worker_postgres() {
    let pg = Postgres::start();
    a_recorded_decision_is_run_by_a_worker(&pg.url).await;
}

/// `record_decision` keeps the decision and returns with nothing run; it is single
/// use; a worker of another agent continues the run, once.
async fn a_recorded_decision_is_run_by_a_worker(store_url: &str) {
    let dir = scratch("record");
    let file = dir.join("f.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(&dir, json!([edit(&file), {"text": "done"}]));
    let store = store_for(&dir, store_url).await;
    let app = agent(&dir, &model, store.clone());
    let (run, _, decision) = approval(app.run("edit f").await.unwrap());
    app.record_decision(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    // Kept, not run: the run waits, ready for a worker.
    let kept = store.load(&run).await.unwrap().unwrap();
    assert_eq!(kept.status, RunStatus::Suspended);
    assert!(kept.due_at().is_some(), "marked ready");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a");
    // Single use: recorded again, or resumed, it is refused.
    let again = app
        .record_decision(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(again.is_stale_decision(), "{again}");
    let resumed = app
        .resume(&run, &decision, Decision::deny("bob"))
        .await
        .unwrap_err();
    assert!(resumed.is_stale_decision(), "{resumed}");

    let worker_store = store_for(&dir, store_url).await;
    let worker_agent = agent(&dir, &model, worker_store);
    let (stop, task) = start_worker(
        &worker_agent,
        WorkerOptions::new().poll(Duration::from_millis(50)),
    );
    until_all(&*store, std::slice::from_ref(&run), RunStatus::Finished).await;
    stop.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa", "sent once");
    let events = app.events(&run).await.unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::ApprovalDecided { by, approved: true, .. } if by == "ann")));
    worker_agent.close().await.unwrap();
    app.close().await.unwrap();
}

/// Three workers — separate agents, each with its own connection pool and its own
/// filesystem server, on one PostgreSQL — over twelve ready runs: every run finishes,
/// and every approved call was sent exactly once (counted in the files the server
/// edited).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_one_postgres_run_each_run_once() {
    let pg = Postgres::start();
    let dir = scratch("fleet");
    const RUNS: usize = 12;
    let files: Vec<_> = (0..RUNS).map(|n| dir.join(format!("f{n}.txt"))).collect();
    let mut script: Vec<Value> = files.iter().map(|f| edit(f)).collect();
    script.push(json!({"text": "done"}));
    let model = ModelServer::scripted(&dir, Value::Array(script));
    let store = store_for(&dir, &pg.url).await;
    let app = agent(&dir, &model, store.clone());
    let mut runs = Vec::new();
    for file in &files {
        std::fs::write(file, "a").unwrap();
        let (run, _, decision) = approval(app.run("edit").await.unwrap());
        app.record_decision(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap();
        runs.push(run);
    }
    let mut workers = Vec::new();
    for _ in 0..3 {
        let a = agent(&dir, &model, store_for(&dir, &pg.url).await);
        let running = start_worker(
            &a,
            WorkerOptions::new()
                .concurrency(2)
                .poll(Duration::from_millis(50)),
        );
        workers.push((a, running));
    }
    until_all(&*store, &runs, RunStatus::Finished).await;
    for (a, (stop, task)) in workers {
        stop.send(()).unwrap();
        task.await.unwrap();
        a.close().await.unwrap();
    }
    for file in &files {
        assert_eq!(std::fs::read_to_string(file).unwrap(), "aa", "{file:?}");
    }
    for run in &runs {
        let events = app.events(run).await.unwrap();
        let sent = events
            .iter()
            .filter(|e| matches!(e, Event::AfterToolResult { .. }))
            .count();
        assert_eq!(sent, 1, "{run}: {events:?}");
    }
    app.close().await.unwrap();
}

/// A worker shut down while a run is in flight (the model stalls) hands it back: its
/// lease ends at once, and another worker recovers it without sending the call again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_shut_down_hands_its_runs_back() {
    let dir = scratch("hand-back");
    let file = dir.join("f.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([edit(&file), {"trickle": true}, {"text": "done"}]),
    );
    let store = store_for(&dir, "sqlite").await;
    let app = agent(&dir, &model, store.clone());
    let (run, _, decision) = approval(app.run("edit f").await.unwrap());
    app.record_decision(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    let first = agent(&dir, &model, store.clone());
    let (stop, task) = start_worker(
        &first,
        WorkerOptions::new()
            .poll(Duration::from_millis(50))
            .grace(Duration::from_millis(200)),
    );
    // In flight: the call was sent (the file edited) and the model stalls.
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(&file).unwrap() != "aa" {
        assert!(Instant::now() < deadline, "the worker did not take the run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(()).unwrap();
    task.await.unwrap();
    let kept = store.load(&run).await.unwrap().unwrap();
    assert_eq!(kept.status, RunStatus::Running);
    assert_eq!(kept.lease.map(|l| l.until), Some(0), "handed back");
    first.close().await.unwrap();

    let second = agent(&dir, &model, store.clone());
    let (stop, task) = start_worker(
        &second,
        WorkerOptions::new().poll(Duration::from_millis(50)),
    );
    until_all(&*store, std::slice::from_ref(&run), RunStatus::Finished).await;
    stop.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aa",
        "not sent again"
    );
    let events = app.events(&run).await.unwrap();
    assert!(events.iter().any(|e| matches!(e, Event::RunRecovered)));
    second.close().await.unwrap();
    app.close().await.unwrap();
}

/// A suspension carries when it expires (the outcome, `pending`, the event), and a
/// worker expires it when that time has come: no application timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_expires_due_suspensions() {
    let dir = scratch("worker-expiry");
    let file = dir.join("f.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(&dir, json!([edit(&file), {"echo_tools": true}]));
    let store = store_for(&dir, "sqlite").await;
    let app = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .server(filesystem(&dir))
        .store(store.clone())
        .suspension_expiry(Duration::from_secs(1))
        .build()
        .unwrap();
    let before = super::store_suite::now_ms();
    let out = app.run("edit f").await.unwrap();
    let Outcome::ApprovalRequired {
        run_id: run,
        expires_at,
        ..
    } = &out
    else {
        panic!("{out:?}")
    };
    let at = expires_at.expect("an expiry");
    assert!(at >= before + 1000 && at <= super::store_suite::now_ms() + 1000);
    let pending = app.pending(run).await.unwrap();
    assert_eq!(pending[0].expires_at, Some(at));
    let events = app.events(run).await.unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::RunSuspended { expires_at: Some(t), .. } if *t == at)));
    let (stop, task) = start_worker(&app, WorkerOptions::new().poll(Duration::from_millis(50)));
    until_all(&*store, std::slice::from_ref(run), RunStatus::Finished).await;
    stop.send(()).unwrap();
    task.await.unwrap();
    let events = app.events(run).await.unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::SuspensionExpired { .. })));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "a", "not run");
    app.close().await.unwrap();
}

/// A run keeps the policy it started with: a new release stating a looser one is
/// refused — until `adopt_policy` moves the run to it, naming who and what loosened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_policy_moves_a_run_to_a_looser_policy() {
    let dir = scratch("adopt");
    let file = dir.join("f.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(&dir, json!([edit(&file), {"text": "done"}]));
    let store = store_for(&dir, "sqlite").await;
    let old = agent(&dir, &model, store.clone());
    let (run, _, decision) = approval(old.run("edit f").await.unwrap());
    let release = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .max_steps(30)
        .server(filesystem(&dir))
        .store(store.clone())
        .build()
        .unwrap();
    let refused = release
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(refused.is_config(), "{refused}");
    assert_eq!(
        store.load(&run).await.unwrap().unwrap().status,
        RunStatus::Suspended
    );
    let loosened = release.adopt_policy(&run, "ops").await.unwrap();
    let said = loosened.join("; ");
    assert!(
        said.contains("list_directory") && said.contains("max_steps 30"),
        "{said}"
    );
    let events = release.events(&run).await.unwrap();
    assert!(events.iter().any(
        |e| matches!(e, Event::PolicyAdopted { by, loosened: l } if by == "ops" && *l == loosened)
    ));
    // The same decision still applies, under the new policy.
    let Outcome::Finished { .. } = release
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa");
    // A run that neither waits nor failed has no policy to move.
    let e = release.adopt_policy(&run, "ops").await.unwrap_err();
    assert!(e.is_not_suspended(), "{e}");
    old.close().await.unwrap();
    release.close().await.unwrap();
}

/// A run a transient error stopped (the model limited the rate) is retried by a
/// worker once its retry is due, without sending its calls again; one a permanent
/// error stopped (refused credentials) is never due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_retries_a_transient_failure_and_never_a_permanent_one() {
    for (error, transient) in [(429, true), (401, false)] {
        let dir = scratch(&format!("worker-retry-{error}"));
        let file = dir.join("f.txt");
        std::fs::write(&file, "a").unwrap();
        let model = ModelServer::scripted(
            &dir,
            json!([edit(&file), {"status": error, "error": "no"}, {"text": "done"}]),
        );
        let store = store_for(&dir, "sqlite").await;
        // The loop's own retries off: the error stops the run, and the worker's retry
        // (a run-level one, later) is what is tested.
        let app = agent_with(&dir, &model, store.clone(), RetryPolicy::none());
        let (run, _, decision) = approval(app.run("edit f").await.unwrap());
        app.record_decision(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap();
        let (stop, task) = start_worker(&app, WorkerOptions::new().poll(Duration::from_millis(50)));
        let runs = std::slice::from_ref(&run);
        if transient {
            until_all(&*store, runs, RunStatus::Finished).await;
            let events = app.events(&run).await.unwrap();
            assert!(events.iter().any(|e| matches!(e, Event::RunRetried)));
        } else {
            until_all(&*store, runs, RunStatus::Failed).await;
            let kept = store.load(&run).await.unwrap().unwrap();
            assert_eq!(kept.due_at(), None, "a permanent error is not retried");
        }
        stop.send(()).unwrap();
        task.await.unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa", "sent once");
        app.close().await.unwrap();
    }
}

/// A due run whose stored row does not read (its state is not JSON, written behind the
/// agent's back) does not stop the claims: the other due runs are taken, and it is
/// left as it was, not due again for a minute.
async fn an_unreadable_due_row_stops_no_claim(tag: &str, store: &str) {
    use super::store_suite::{lease, now_ms, run};
    let dir = scratch(&format!("worker-unreadable-{tag}"));
    let kept = store_for(&dir, store).await;
    let now = now_ms();
    for id in ["bad", "good"] {
        kept.save(&run(id, RunStatus::Failed, json!({"due_at": now - 1000})))
            .await
            .unwrap();
    }
    let sql = "UPDATE mcp_agent_runs SET state = '{not json' WHERE id = 'bad'";
    if store.starts_with("postgres://") {
        let pool = mcp_runtime_core::postgres::PgPool::new(store).unwrap();
        pool.client()
            .await
            .unwrap()
            .execute(sql, &[])
            .await
            .unwrap();
    } else {
        let c = rusqlite::Connection::open(dir.join("state/runs.sqlite3")).unwrap();
        c.execute(sql, []).unwrap();
    }
    // The bad row is due too: the claim reads it, and takes only the good one.
    let got = kept.claim_due(now, &lease("w1"), 10).await.unwrap();
    let ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["good"], "{tag}: the readable run is taken");
    assert!(
        kept.claim_due(now_ms(), &lease("w2"), 10)
            .await
            .unwrap()
            .is_empty(),
        "{tag}: the unreadable run is left for a minute"
    );
    let failed = kept
        .list(&mcp_agent::RunFilter::new().status(RunStatus::Failed))
        .await
        .unwrap()
        .runs;
    assert_eq!(failed.len(), 1, "{tag}: it is left as it was");
    assert_eq!(failed[0].id, "bad");
    assert_eq!(
        kept.claim_due(now + 61_000, &lease("w3"), 10)
            .await
            .map(|r| r.len())
            .ok(),
        Some(0),
        "{tag}: a minute later it is looked at again, and left again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_due_row_stops_no_claim_sqlite() {
    an_unreadable_due_row_stops_no_claim("sqlite", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_due_row_stops_no_claim_postgres() {
    let pg = Postgres::start();
    an_unreadable_due_row_stops_no_claim("postgres", &pg.url).await;
}

/// Claims every due run as a worker that dies at once would: moved to running under a
/// lease that has ended, nothing kept since.
async fn claimed_by_a_dead_worker(store: &dyn RunStore) -> usize {
    let dead = mcp_agent::Lease {
        owner: "dead-worker".into(),
        until: 1,
    };
    let now = super::store_suite::now_ms();
    store.claim_due(now, &dead, 10).await.unwrap().len()
}

/// A worker that died right after claiming a run kept nothing since: the run is still
/// what it was claimed as, and the next worker does what the claim was for — goes on
/// with the recorded decision (nobody is asked again), expires the expired
/// suspension, retries the failed run (counted as a retry) — instead of recovering it
/// as a run that was under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_claimed_by_a_worker_that_died_is_done_as_claimed() {
    for kind in ["decided", "expired", "failed"] {
        let dir = scratch(&format!("dead-claim-{kind}"));
        let file = dir.join("f.txt");
        std::fs::write(&file, "a").unwrap();
        let script = match kind {
            "decided" => json!([edit(&file), {"text": "done"}]),
            "expired" => json!([edit(&file), {"echo_tools": true}]),
            _ => json!([{"status": 429, "error": "slow down"}, {"text": "done"}]),
        };
        let model = ModelServer::scripted(&dir, script);
        let store = store_for(&dir, "sqlite").await;
        let app = Agent::builder()
            .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
            .retry_policy(RetryPolicy::none())
            .mode(Mode::Approve)
            .allow(["read_text_file"])
            .server(filesystem(&dir))
            .store(store.clone())
            .suspension_expiry(Duration::from_secs(1))
            .build()
            .unwrap();
        let handle = app.start("edit f", Default::default()).await.unwrap();
        let run = handle.run_id().to_owned();
        let outcome = handle.outcome().await;
        match kind {
            "decided" => {
                let (_, _, decision) = approval(outcome.unwrap());
                app.record_decision(&run, &decision, Decision::approve("ann"))
                    .await
                    .unwrap();
            }
            // Due once the suspension expired (one second) or the retry time came
            // (two seconds).
            "expired" => {
                approval(outcome.unwrap());
                tokio::time::sleep(Duration::from_millis(1300)).await;
            }
            _ => {
                assert!(outcome.unwrap_err().is_model());
                tokio::time::sleep(Duration::from_millis(2300)).await;
            }
        }
        assert_eq!(claimed_by_a_dead_worker(&*store).await, 1, "{kind}");
        let (stop, task) = start_worker(&app, WorkerOptions::new().poll(Duration::from_millis(50)));
        until_all(&*store, std::slice::from_ref(&run), RunStatus::Finished).await;
        stop.send(()).unwrap();
        task.await.unwrap();
        let events = app.events(&run).await.unwrap();
        assert!(
            !events.iter().any(|e| matches!(e, Event::RunRecovered)),
            "{kind}: not recovered as under way: {events:?}"
        );
        let edited = std::fs::read_to_string(&file).unwrap();
        match kind {
            "decided" => assert_eq!(edited, "aa", "the recorded approval applied, once"),
            "expired" => {
                assert_eq!(edited, "a", "not run");
                assert!(events
                    .iter()
                    .any(|e| matches!(e, Event::SuspensionExpired { .. })));
            }
            _ => assert!(events.iter().any(|e| matches!(e, Event::RunRetried))),
        }
        app.close().await.unwrap();
    }
}

/// A decision recorded before the suspension expired wins over its expiry, whoever
/// looks first: `expire_due` (with `Expiry::End`, which would end the run) leaves the
/// decided run to a worker, which runs the approved call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_recorded_in_time_outlives_the_expiry() {
    let dir = scratch("decided-in-time");
    let file = dir.join("f.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(&dir, json!([edit(&file), {"text": "done"}]));
    let store = store_for(&dir, "sqlite").await;
    let app = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .server(filesystem(&dir))
        .store(store.clone())
        .suspension_expiry(Duration::from_secs(1))
        .on_expiry(mcp_agent::Expiry::End)
        .build()
        .unwrap();
    let (run, _, decision) = approval(app.run("edit f").await.unwrap());
    app.record_decision(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let expired = app.expire_due().await.unwrap();
    assert!(expired.iter().all(|(id, _)| *id != run), "{expired:?}");
    assert_eq!(
        store.load(&run).await.unwrap().unwrap().status,
        RunStatus::Suspended
    );
    let (stop, task) = start_worker(&app, WorkerOptions::new().poll(Duration::from_millis(50)));
    until_all(&*store, std::slice::from_ref(&run), RunStatus::Finished).await;
    stop.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aa",
        "approved, run once"
    );
    let events = app.events(&run).await.unwrap();
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::SuspensionExpired { .. })));
    app.close().await.unwrap();
}

/// Waits (up to two minutes) until `run` is finished; how long it took.
async fn finished_within(store: &dyn RunStore, run: &str) -> Duration {
    let t0 = Instant::now();
    until_all(store, &[run.to_owned()], RunStatus::Finished).await;
    t0.elapsed()
}

/// Workers are told of a decision, not left to their poll: a worker whose poll is five
/// minutes continues a run within two once a decision is recorded — told by
/// PostgreSQL (`LISTEN/NOTIFY`, the decision recorded by another agent, as another
/// process would), and by its own agent on SQLite (the same process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_decision_wakes_an_idle_worker() {
    let pg = Postgres::start();
    for store_url in [pg.url.as_str(), "sqlite"] {
        let on_pg = store_url.starts_with("postgres://");
        let dir = scratch(if on_pg { "wake-pg" } else { "wake-sqlite" });
        let file = dir.join("f.txt");
        std::fs::write(&file, "a").unwrap();
        let model = ModelServer::scripted(&dir, json!([edit(&file), {"text": "done"}]));
        let store = store_for(&dir, store_url).await;
        let app = agent(&dir, &model, store.clone());
        let (run, _, decision) = approval(app.run("edit f").await.unwrap());
        // The worker: another agent (its own connections) on PostgreSQL, the same one
        // on SQLite.
        let worker_agent = if on_pg {
            agent(&dir, &model, store_for(&dir, store_url).await)
        } else {
            app.clone()
        };
        let (stop, task) = start_worker(
            &worker_agent,
            WorkerOptions::new().poll(Duration::from_secs(300)),
        );
        if on_pg {
            // Recorded once the worker listens (its first claim found nothing).
            let pool = mcp_runtime_core::postgres::PgPool::new(store_url).unwrap();
            let client = pool.client().await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let row = client
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN mcp_agent_events%'",
                        &[],
                    )
                    .await
                    .unwrap();
                if row.get::<_, i64>(0) > 0 {
                    break;
                }
                assert!(Instant::now() < deadline, "the worker never listened");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        app.record_decision(&run, &decision, Decision::approve("ann"))
            .await
            .unwrap();
        let took = finished_within(&*store, &run).await;
        assert!(took < Duration::from_secs(120), "{store_url}: {took:?}");
        stop.send(()).unwrap();
        task.await.unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa");
        if on_pg {
            worker_agent.close().await.unwrap();
        }
        app.close().await.unwrap();
    }
}

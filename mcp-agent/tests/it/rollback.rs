//! A person's decision holds when the store is rolled back: a copy of a run put back
//! in the store (a restored backup, a rolled-back database — whoever can write the
//! store, exactly who the integrity key is for) never re-runs an approved call and
//! never re-opens a spent decision; a row put together from two saves is refused; on
//! PostgreSQL the application's role can be kept from deleting the sent ledger. Against
//! the real filesystem server (`edit_file` of "a" → "aa" is not idempotent: the file
//! counts the sends), the scripted model, and both durable stores.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use mcp_agent::runtime::BoxFuture;
use mcp_agent::{
    Agent, Blob, ChatCompletions, Claim, Decision, Event, Lease, LedgerEntry, Mode, Outcome,
    PostgresRunStore, RunFilter, RunPage, RunRecord, RunStatus, RunStore, Transcript,
};
use serde_json::{json, Value};

use super::{filesystem, scratch, store_for, ModelServer, Postgres};

const KEY: [u8; 32] = [7; 32];

/// A store that keeps a copy of every save that was kept — what a backup holds: the
/// run as it stood after the save (its whole transcript, every blob).
pub(super) struct Recorder {
    pub(super) inner: Arc<dyn RunStore>,
    pub(super) saves: Mutex<Vec<RunRecord>>,
    /// Each run's transcript entries by number, and its blobs, as saved so far.
    logs: Mutex<HashMap<String, Log>>,
}

/// A run's transcript entries by number, and its blobs.
type Log = (BTreeMap<u64, Value>, Vec<Blob>);

impl Recorder {
    pub(super) fn new(inner: Arc<dyn RunStore>) -> Arc<Recorder> {
        Arc::new(Recorder {
            inner,
            saves: Mutex::new(Vec::new()),
            logs: Mutex::new(HashMap::new()),
        })
    }

    /// `run` as it stands after it was kept: its transcript whole, every blob.
    fn whole(&self, run: &RunRecord) -> RunRecord {
        let mut logs = self.logs.lock().unwrap();
        let (entries, blobs) = logs.entry(run.id.clone()).or_default();
        let first = run.transcript.first_entry();
        for (n, e) in (first..).zip(&run.transcript.entries) {
            entries.insert(n, e.clone());
        }
        for b in &run.blobs {
            if !blobs.iter().any(|k| k.digest == b.digest) {
                blobs.push(b.clone());
            }
        }
        let (from, to) = (run.transcript.from, run.transcript.to);
        RunRecord {
            transcript: Transcript::new(
                from,
                to,
                (from..to).map(|n| entries[&n].clone()).collect(),
            ),
            blobs: blobs.clone(),
            ..run.clone()
        }
    }
    /// The first kept save of `run` with `status` in which a call stands at `at`
    /// (`approved`, `executing`, …).
    pub(super) fn copy(&self, run: &str, status: RunStatus, at: &str) -> RunRecord {
        let at = format!("\"state\":\"{at}\"");
        self.saves
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.id == run && r.status == status && r.state.to_string().contains(&at))
            .cloned()
            .unwrap_or_else(|| panic!("no save of {run} with a call {at}"))
    }
}

impl RunStore for Recorder {
    fn save<'a>(&'a self, run: &'a RunRecord) -> BoxFuture<'a, mcp_agent::Result<()>> {
        Box::pin(async move {
            self.inner.save(run).await?;
            let whole = self.whole(run);
            self.saves.lock().unwrap().push(whole);
            Ok(())
        })
    }
    fn events<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Vec<Value>>> {
        self.inner.events(id)
    }
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Option<RunRecord>>> {
        self.inner.load(id)
    }
    fn claim<'a>(
        &'a self,
        id: &'a str,
        claim: Claim<'a>,
        lease: &'a Lease,
    ) -> BoxFuture<'a, mcp_agent::Result<Option<RunRecord>>> {
        self.inner.claim(id, claim, lease)
    }
    fn renew<'a>(
        &'a self,
        id: &'a str,
        lease: &'a Lease,
    ) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.inner.renew(id, lease)
    }
    fn list<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, mcp_agent::Result<RunPage>> {
        self.inner.list(filter)
    }
    fn ledger<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<Vec<LedgerEntry>>> {
        self.inner.ledger(id)
    }
    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.inner.delete(id)
    }
    fn prune(&self, secs: u64) -> BoxFuture<'_, mcp_agent::Result<u64>> {
        self.inner.prune(secs)
    }
    fn save_allowance<'a>(
        &'a self,
        id: &'a str,
        allowance: &'a Value,
    ) -> BoxFuture<'a, mcp_agent::Result<()>> {
        self.inner.save_allowance(id, allowance)
    }
    fn allowances(&self) -> BoxFuture<'_, mcp_agent::Result<Vec<Value>>> {
        self.inner.allowances()
    }
    fn delete_allowance<'a>(&'a self, id: &'a str) -> BoxFuture<'a, mcp_agent::Result<bool>> {
        self.inner.delete_allowance(id)
    }
}

/// Puts `copy` back as the run's row, as a restore from a backup does: the row is
/// replaced (its event log too); the lease it was saved with has ended.
pub(super) async fn restore(store: &dyn RunStore, copy: &RunRecord) {
    store.delete(&copy.id).await.unwrap();
    store
        .save(&RunRecord {
            lease: copy.lease.clone().map(|l| Lease { until: 0, ..l }),
            events: Vec::new(),
            ledger: Vec::new(),
            first: true,
            ..copy.clone()
        })
        .await
        .unwrap();
}

/// Runs `sql` on the store as its owner: the SQLite file's writer, or PostgreSQL's
/// superuser.
pub(super) async fn as_owner(dir: &Path, store_url: &str, sql: &str) {
    if store_url.starts_with("postgres://") {
        let pool = mcp_runtime_core::postgres::PgPool::new(store_url).unwrap();
        let client = pool.client().await.unwrap();
        client.batch_execute(sql).await.unwrap();
    } else {
        let c = rusqlite::Connection::open(dir.join("state/runs.sqlite3")).unwrap();
        c.execute_batch(sql).unwrap();
    }
}

fn agent(
    model: &ModelServer,
    dir: &Path,
    store: Arc<dyn RunStore>,
) -> (Agent, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .allow(["read_text_file", "list_directory"])
        .server(filesystem(dir))
        .store(store)
        .integrity_key(KEY)
        .on_event(move |_, e| seen.lock().unwrap().push(e.clone()))
        .build()
        .unwrap();
    (agent, events)
}

fn approval(outcome: Outcome) -> (String, String, String) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_copy_never_reruns_an_approved_call_sqlite() {
    a_restored_copy_never_reruns_an_approved_call("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_copy_never_reruns_an_approved_call_postgres() {
    let pg = Postgres::start();
    a_restored_copy_never_reruns_an_approved_call(&pg.url).await;
}

/// The attacks, through the agent: the validly MACed save in which the
/// approval was kept (`running`, lease ended) put back and `recover_stale()` called, as
/// the docs recommend at start-up; the `suspended` copy put back and the spent
/// decision given again; a row whose status is another save's. Each refused — the
/// file shows the one edit — and the ledger is what refuses them: with its rows
/// deleted (what the store's owner can do), the same restored copy edits the file
/// again (the positive control).
async fn a_restored_copy_never_reruns_an_approved_call(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("rollback-{tag}"));
    let file = dir.join("counter.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "edit_file", "arguments": {"path": file, "edits": [{"oldText": "a", "newText": "aa"}]}}]},
            {"echo_tools": true}
        ]),
    );
    let store = Recorder::new(store_for(&dir, store_url).await);
    let (agent, events) = agent(&model, &dir, store.clone());
    let (run, s1, d1) = approval(agent.run("edit the counter").await.unwrap());
    let suspended = store.inner.load(&run).await.unwrap().unwrap();
    let Outcome::Finished { .. } = agent
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap()
    else {
        panic!("the run finishes")
    };
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa", "one edit");
    // The save that kept the approval, before the call was sent.
    let decided = store.copy(&run, RunStatus::Running, "approved");

    // 1. That copy put back, recovered at start-up: refused as rolled back.
    restore(store.as_ref(), &decided).await;
    let recovered = agent.recover_stale().await.unwrap();
    let (_, outcome) = recovered
        .iter()
        .find(|(id, _)| *id == run)
        .expect("the run was tried");
    let e = outcome.as_ref().unwrap_err();
    assert!(e.is_rolled_back() && e.is_store(), "{e}");
    let e = agent.recover(&run).await.unwrap_err();
    assert!(e.is_rolled_back(), "{e}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aa",
        "not sent again"
    );
    assert!(events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::RunRolledBack { .. })));
    assert!(
        agent
            .events(&run)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(e, Event::RunRolledBack { .. })),
        "the run's log says so"
    );

    // 2. The suspended copy put back, the spent decision given again: refused.
    restore(store.as_ref(), &suspended).await;
    let e = agent
        .resume(&run, &d1, Decision::approve("mallory"))
        .await
        .unwrap_err();
    assert!(e.is_rolled_back(), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa");
    assert_eq!(
        store.inner.load(&run).await.unwrap().unwrap().status,
        RunStatus::Suspended,
        "left as it was"
    );

    // 3. A row mixed from two saves: the approved state under the suspended status.
    let mixed = RunRecord {
        status: RunStatus::Suspended,
        suspension: Some(s1.clone()),
        ..decided.clone()
    };
    restore(store.as_ref(), &mixed).await;
    let e = agent
        .resume(&run, &d1, Decision::approve("mallory"))
        .await
        .unwrap_err();
    assert!(
        e.is_store()
            && e.to_string()
                .contains("not the one its state was saved with"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa");

    // Positive control: without the ledger's rows, the same copy edits the file again.
    as_owner(&dir, store_url, "DELETE FROM mcp_agent_ledger").await;
    restore(store.as_ref(), &decided).await;
    agent.recover(&run).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aaa",
        "the attack is real"
    );
    agent.close().await.unwrap();
}

/// The sent ledger can be made insert-only for the application: its role is granted
/// `SELECT, INSERT` on `mcp_agent_ledger` (and the other tables as usual) after an
/// owner created the tables (`PostgresRunStore::SCHEMA`). The agent works under it, and
/// the role can neither delete nor change ledger rows — so the rollback attack has no
/// way around the ledger (positive control: the superuser can delete them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_is_insert_only_for_the_applications_role() {
    let pg = Postgres::start();
    let dir = scratch("ledger-grants");
    let file = dir.join("counter.txt");
    std::fs::write(&file, "a").unwrap();
    // The owner creates the tables and the application's role.
    PostgresRunStore::connect(&pg.url).await.unwrap();
    as_owner(
        &dir,
        &pg.url,
        "CREATE ROLE mcp_app LOGIN;
         GRANT SELECT, INSERT, UPDATE, DELETE ON mcp_agent_runs, mcp_agent_events, mcp_agent_allowances,
           mcp_agent_transcripts, mcp_agent_blobs TO mcp_app;
         GRANT SELECT, INSERT ON mcp_agent_ledger TO mcp_app;",
    )
    .await;
    let app_url = pg
        .url
        .replacen("postgres://postgres@", "postgres://mcp_app@", 1);
    assert_ne!(app_url, pg.url);
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "edit_file", "arguments": {"path": file, "edits": [{"oldText": "a", "newText": "aa"}]}}]},
            {"echo_tools": true}
        ]),
    );
    let store = Recorder::new(Arc::new(PostgresRunStore::connect(&app_url).await.unwrap()));
    let (agent, _) = agent(&model, &dir, store.clone());
    let (run, _, d1) = approval(agent.run("edit the counter").await.unwrap());
    agent
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa");
    assert!(
        !store.inner.ledger(&run).await.unwrap().is_empty(),
        "the role appended to the ledger"
    );

    // The role cannot take ledger rows away, nor change them.
    let pool = mcp_runtime_core::postgres::PgPool::new(&app_url).unwrap();
    let client = pool.client().await.unwrap();
    for sql in [
        "DELETE FROM mcp_agent_ledger",
        "UPDATE mcp_agent_ledger SET item = 'x'",
    ] {
        let e = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(
            e.code(),
            Some(&mcp_runtime_core::postgres::tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}: {e:?}"
        );
    }
    // So the restored copy stays refused.
    let decided = store.copy(&run, RunStatus::Running, "approved");
    restore(store.as_ref(), &decided).await;
    assert!(agent.recover(&run).await.unwrap_err().is_rolled_back());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa");
    // Positive control: the owner can.
    as_owner(&dir, &pg.url, "DELETE FROM mcp_agent_ledger").await;
    assert!(store.inner.ledger(&run).await.unwrap().is_empty());
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_failed_copy_is_not_retried_sqlite() {
    a_restored_failed_copy_is_not_retried("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_failed_copy_is_not_retried_postgres() {
    let pg = Postgres::start();
    a_restored_failed_copy_is_not_retried(&pg.url).await;
}

/// `retry` refuses a copy put back too: a run fails (the model answers 429 after an
/// edit ran), is retried and edits again; its failed copy put back and retried is
/// refused as rolled back. The positive control: with the ledger's rows deleted, the
/// same retry edits the file a third time.
async fn a_restored_failed_copy_is_not_retried(store_url: &str) {
    let tag = if store_url.starts_with("postgres://") {
        "pg"
    } else {
        "sqlite"
    };
    let dir = scratch(&format!("rollback-retry-{tag}"));
    let file = dir.join("counter.txt");
    std::fs::write(&file, "a").unwrap();
    let edit = json!({"tool_calls": [{"name": "edit_file", "arguments": {"path": file, "edits": [{"oldText": "a", "newText": "aa"}]}}]});
    let model = ModelServer::scripted(
        &dir,
        json!([edit, {"status": 429, "error": "slow down"}, edit, {"echo_tools": true}, edit, {"echo_tools": true}]),
    );
    let store = Recorder::new(store_for(&dir, store_url).await);
    let agent = Agent::builder()
        .model(ChatCompletions::new(model.url(), "fake-model").unwrap())
        .mode(Mode::Approve)
        .allow(["edit_file"])
        .server(filesystem(&dir))
        .store(store.clone())
        .integrity_key(KEY)
        // The 429 stops the run at once (the agent's own retries are tested in
        // `retries`).
        .retry_policy(mcp_agent::RetryPolicy::none())
        .build()
        .unwrap();
    assert!(agent.run("edit").await.unwrap_err().is_model());
    let run = store.saves.lock().unwrap()[0].id.clone();
    let failed = store.inner.load(&run).await.unwrap().unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    let Outcome::Finished { .. } = agent.retry(&run).await.unwrap() else {
        panic!("the retry finishes")
    };
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aaa", "two edits");

    restore(store.as_ref(), &failed).await;
    let e = agent.retry(&run).await.unwrap_err();
    assert!(e.is_rolled_back(), "{e}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aaa",
        "not edited again"
    );
    assert_eq!(
        store.inner.load(&run).await.unwrap().unwrap().status,
        RunStatus::Failed,
        "left as it was"
    );

    // Positive control: without the ledger's rows, the same retry edits again.
    as_owner(&dir, store_url, "DELETE FROM mcp_agent_ledger").await;
    agent.retry(&run).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aaaa",
        "the attack is real"
    );
    agent.close().await.unwrap();
}

/// A worker that finds a running copy put back from before its ledger refuses it
/// once and parks it: held by no live process, recovered by none, one
/// `RunRolledBack` in its log however long the workers poll (it used to be taken up
/// again after every back-off, each time with another event). The file is never
/// edited again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_parks_a_restored_running_copy() {
    let dir = scratch("rollback-worker");
    let file = dir.join("counter.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "edit_file", "arguments": {"path": file, "edits": [{"oldText": "a", "newText": "aa"}]}}]},
            {"echo_tools": true}
        ]),
    );
    let store = Recorder::new(store_for(&dir, "sqlite").await);
    let (agent, _) = agent(&model, &dir, store.clone());
    let (run, _, d1) = approval(agent.run("edit the counter").await.unwrap());
    agent
        .resume(&run, &d1, Decision::approve("ann"))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "aa", "one edit");
    let decided = store.copy(&run, RunStatus::Running, "approved");
    restore(store.as_ref(), &decided).await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = agent.worker(
        mcp_agent::WorkerOptions::new()
            .poll(std::time::Duration::from_millis(20))
            .back_off(std::time::Duration::from_millis(50)),
    );
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let rolled_back = |events: &[Event]| {
        events
            .iter()
            .filter(|e| matches!(e, Event::RunRolledBack { .. }))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while rolled_back(&agent.events(&run).await.unwrap()) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never refused the copy"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Twenty back-offs and fifty polls later: still the one event.
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert_eq!(rolled_back(&agent.events(&run).await.unwrap()), 1);
    let kept = store.inner.load(&run).await.unwrap().unwrap();
    assert_eq!(kept.status, RunStatus::Running, "left for a person");
    let e = agent.recover(&run).await.unwrap_err();
    assert!(!e.is_rolled_back(), "held, not tried again: {e}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "aa",
        "never sent again"
    );
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    assert!(agent.delete(&run).await.unwrap(), "a person can delete it");
    agent.close().await.unwrap();
}

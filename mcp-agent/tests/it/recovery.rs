//! Nothing lost, nothing run twice: a process killed with SIGKILL at each step boundary
//! of a resume, and the run recovered by another process once its lease ended. Against
//! the real filesystem server (`edit_file` is not idempotent: each send of "a" → "aa"
//! adds one `a`, so the file counts the sends; `write_file` says it is idempotent), the
//! scripted model, and both durable stores. Plus the store's leases themselves, on all
//! three stores.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcp_agent::{
    Agent, ChatCompletions, Claim, Decision, Durability, Event, Lease, MemoryRunStore, Mode,
    Outcome, RunRecord, RunStatus, RunStore, SqliteRunStore,
};
use serde_json::{json, Value};

use super::{filesystem, scratch, store_for, Killed, ModelServer, Postgres};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn held(owner: &str, until: u64) -> Lease {
    Lease {
        owner: owner.into(),
        until,
    }
}

fn running(state: Value, lease: Option<Lease>) -> RunRecord {
    let mut r = RunRecord {
        id: "leased".into(),
        status: RunStatus::Running,
        suspension: None,
        state,
        lease: None,
        events: Vec::new(),
        durability: Default::default(),
        ledger: Vec::new(),
        first: true,
    };
    r.lease = lease;
    r
}

/// A lease fences out every other owner, renews only for its owner, and once it has
/// ended a stale claim takes the run over — after which the old owner can neither
/// save nor renew. A run that waits is never stale.
async fn leases_fence_and_end(store: &dyn RunStore) {
    let now = now_ms();
    let hour = 3_600_000;
    let a = held("owner-a", now + hour);
    store
        .save(&running(json!({"n": 1}), Some(a.clone())))
        .await
        .unwrap();
    // The holder saves (appending to the run's event log) and renews.
    store
        .save(&RunRecord {
            events: vec![json!({"e": 1}), json!({"e": 2})],
            ..running(json!({"n": 2}), Some(a.clone()))
        })
        .await
        .unwrap();
    store
        .save(&RunRecord {
            events: vec![json!({"e": 3})],
            ..running(json!({"n": 2}), Some(a.clone()))
        })
        .await
        .unwrap();
    assert!(store
        .renew("leased", &held("owner-a", now + 2 * hour))
        .await
        .unwrap());
    // While the lease holds, the run is not stale, and nobody else saves or renews it.
    assert!(store
        .claim(
            "leased",
            Claim::Stale(now),
            &held("owner-b", now + 3 * hour)
        )
        .await
        .unwrap()
        .is_none());
    assert!(!store
        .renew("leased", &held("owner-b", now + 3 * hour))
        .await
        .unwrap());
    let e = store
        .save(&RunRecord {
            events: vec![json!({"e": "not kept"})],
            ..running(json!({"n": 99}), Some(held("owner-b", now + hour)))
        })
        .await
        .unwrap_err();
    assert!(e.is_lease_lost() && e.is_store(), "{e}");
    // A refused save appends nothing: the log is the holder's, in order.
    assert_eq!(
        store.events("leased").await.unwrap(),
        [json!({"e": 1}), json!({"e": 2}), json!({"e": 3})]
    );
    let e = store
        .save(&running(json!({"n": 99}), None))
        .await
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    assert_eq!(
        store.load("leased").await.unwrap().unwrap().state,
        json!({"n": 2})
    );
    // Nothing kept under an id: renewing it is not a loss.
    assert!(store
        .renew("nothing-here", &held("owner-a", now + hour))
        .await
        .unwrap());

    // Once the lease has ended (a clock past it), another process takes the run over.
    let later = now + 2 * hour + 1;
    let b = held("owner-b", later + hour);
    let taken = store
        .claim("leased", Claim::Stale(later), &b)
        .await
        .unwrap()
        .expect("a run on an ended lease is taken over");
    assert_eq!(taken.state, json!({"n": 2}));
    assert_eq!(
        taken.lease.as_ref().map(|l| l.owner.as_str()),
        Some("owner-b")
    );
    // The old holder is fenced out.
    assert!(!store
        .renew("leased", &held("owner-a", later + hour))
        .await
        .unwrap());
    let e = store
        .save(&running(json!({"n": 3}), Some(a)))
        .await
        .unwrap_err();
    assert!(e.is_lease_lost(), "{e}");
    // The new holder's lease holds against a third.
    assert!(store
        .claim(
            "leased",
            Claim::Stale(later),
            &held("owner-c", later + hour)
        )
        .await
        .unwrap()
        .is_none());
    store
        .save(&running(json!({"n": 4}), Some(b.clone())))
        .await
        .unwrap();
    assert_eq!(
        store.load("leased").await.unwrap().unwrap().state,
        json!({"n": 4})
    );
    // A run that waits is never stale, whatever its lease.
    store
        .save(&RunRecord {
            status: RunStatus::Suspended,
            suspension: Some("s".into()),
            ..running(json!({"n": 5}), Some(held("owner-b", 0)))
        })
        .await
        .unwrap();
    assert!(store
        .claim("leased", Claim::Stale(u64::MAX / 2), &held("owner-d", 1))
        .await
        .unwrap()
        .is_none());
    // A claim of its suspension takes it, under the claimer's lease.
    let d = store
        .claim("leased", Claim::Suspended("s"), &held("owner-d", 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.lease, Some(held("owner-d", 1)));
    assert!(store.delete("leased").await.unwrap());
    assert!(store.events("leased").await.unwrap().is_empty());
}

/// Standing allowances are kept, replaced, listed and forgotten by id.
async fn allowances_are_kept(store: &dyn RunStore) {
    assert!(store.allowances().await.unwrap().is_empty());
    store
        .save_allowance("x", &json!({"id": "x", "n": 1}))
        .await
        .unwrap();
    store
        .save_allowance("y", &json!({"id": "y"}))
        .await
        .unwrap();
    store
        .save_allowance("x", &json!({"id": "x", "n": 2}))
        .await
        .unwrap();
    let all = store.allowances().await.unwrap();
    assert_eq!(all, [json!({"id": "x", "n": 2}), json!({"id": "y"})]);
    assert!(store.delete_allowance("x").await.unwrap());
    assert!(!store.delete_allowance("x").await.unwrap());
    assert!(store.delete_allowance("y").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_and_allowances_in_every_store() {
    let memory = MemoryRunStore::default();
    leases_fence_and_end(&memory).await;
    allowances_are_kept(&memory).await;
    let dir = scratch("leases");
    let sqlite = SqliteRunStore::open(dir.join("runs.sqlite3")).unwrap();
    leases_fence_and_end(&sqlite).await;
    allowances_are_kept(&sqlite).await;
    let pg = Postgres::start();
    let store = store_for(&dir, &pg.url).await;
    leases_fence_and_end(store.as_ref()).await;
    allowances_are_kept(store.as_ref()).await;
}

/// The agent of the crash tests (the same in every process): `read_text_file` allowed,
/// every other tool asks a person; a 2-second lease.
fn crash_agent(
    dir: &Path,
    model_url: &str,
    store: Arc<dyn RunStore>,
    on_event: impl Fn(&str, &Event) + Send + Sync + 'static,
) -> Agent {
    Agent::builder()
        .model(ChatCompletions::new(model_url, "fake-model").unwrap())
        .mode(Mode::Approve)
        .allow(["read_text_file"])
        .server(filesystem(dir))
        .store(store)
        .lease(Duration::from_secs(2))
        .on_event(on_event)
        .build()
        .unwrap()
}

/// The process a crash test kills: resumes the run with an approval, and stops for
/// good at the first event named `MCP_TEST_KILL_AT` (saying so on stdout) until it is
/// killed with SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the process the crash-point tests kill; they run it"]
async fn crash_process() {
    let var = |k: &str| std::env::var(k).expect("set by the test that runs this");
    let dir = std::path::PathBuf::from(var("MCP_TEST_DIR"));
    let at = var("MCP_TEST_KILL_AT");
    let store = store_for(&dir, &var("MCP_TEST_STORE")).await;
    let agent = crash_agent(&dir, &var("MCP_TEST_MODEL"), store, move |_, e| {
        let name = serde_json::to_value(e).unwrap()["event"].clone();
        if name == at.as_str() {
            use std::io::Write as _;
            println!("killpoint {at}");
            std::io::stdout().flush().unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
    });
    let out = agent
        .resume(
            &var("MCP_TEST_RUN"),
            &var("MCP_TEST_DECISION"),
            Decision::approve("ann"),
        )
        .await;
    println!("returned without reaching the kill point: {out:?}");
}

/// Runs [`crash_process`] on the run until it reaches `at`, and kills it there.
fn kill_at(dir: &Path, model: &ModelServer, store: &str, run: &str, decision: &str, at: &str) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "recovery::crash_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("MCP_TEST_DIR", dir)
        .env("MCP_TEST_MODEL", model.url())
        .env("MCP_TEST_STORE", store)
        .env("MCP_TEST_RUN", run)
        .env("MCP_TEST_DECISION", decision)
        .env("MCP_TEST_KILL_AT", at)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut child = Killed(child);
    let mut seen = String::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line == format!("killpoint {at}") {
            // SIGKILL: nothing of the process runs after this.
            child.0.kill().unwrap();
            child.0.wait().unwrap();
            return;
        }
        seen.push_str(&line);
        seen.push('\n');
    }
    panic!("the process ended before {at}:\n{seen}");
}

/// Recovers `run` once its lease has ended (the killed process cannot renew it; how
/// long that takes does not matter).
async fn recover(agent: &Agent, run: &str) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        match agent.recover(run).await {
            Ok(outcome) => return outcome,
            Err(e) if e.is_not_suspended() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn unknown(events: &[Event]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::OutcomeUnknown { tool, resent, .. } => Some((tool.clone(), *resent)),
            _ => None,
        })
        .collect()
}

fn finished(outcome: Outcome) -> String {
    match outcome {
        Outcome::Finished { text, .. } => text,
        other => panic!("expected the run to finish: {other:?}"),
    }
}

/// One crash: a run that asks to edit `n.txt` ("a" → "aa") suspends; a process
/// resumes it with an approval and is killed at `at`; this process recovers it. What
/// became of it is returned: the file, the recovered outcome, the events here, and
/// everything the model was sent (as JSON text).
async fn crash_at(
    store_url: &str,
    tag: &str,
    at: &str,
) -> (String, Outcome, Vec<Event>, String, Agent) {
    let dir = scratch(&format!("crash-{tag}-{at}"));
    let file = dir.join("n.txt");
    std::fs::write(&file, "a").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "edit_file", "arguments": {"path": file, "edits": [{"oldText": "a", "newText": "aa"}]}}]},
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": file}}]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, store_url).await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = crash_agent(&dir, &model.url(), store.clone(), move |_, e| {
        seen.lock().unwrap().push(e.clone())
    });
    let (run, decision) = match agent.run("double the a").await.unwrap() {
        Outcome::ApprovalRequired {
            run_id, decision, ..
        } => (run_id, decision),
        other => panic!("{other:?}"),
    };
    kill_at(&dir, &model, store_url, &run, &decision, at);
    assert_eq!(
        store.load(&run).await.unwrap().unwrap().status,
        RunStatus::Running,
        "a killed process leaves its run running, on a lease that ends"
    );
    let outcome = recover(&agent, &run).await;
    let mut outcome = outcome;
    if at == "approval_decided" {
        // Killed before the decision was kept: nothing ran, and the person is asked
        // again — in a new suspension.
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "a");
        let (again, d2) = match outcome {
            Outcome::ApprovalRequired {
                run_id,
                decision,
                tool,
                ..
            } => {
                assert_eq!(tool, "edit_file");
                (run_id, decision)
            }
            other => panic!("expected to be asked again: {other:?}"),
        };
        assert_eq!(again, run);
        assert_ne!(d2, decision);
        let e = agent.recover(&run).await.unwrap_err();
        assert!(e.is_not_suspended(), "a waiting run is not recovered: {e}");
        outcome = agent
            .resume(&run, &d2, Decision::approve("ann"))
            .await
            .unwrap();
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let seen = events.lock().unwrap().clone();
    assert!(seen.iter().any(|e| matches!(e, Event::RunRecovered)));
    let sent = serde_json::to_string(&model.requests()).unwrap();
    (text, outcome, seen, sent, agent)
}

async fn every_crash_point(store_url: &str, tag: &str) {
    // After the claim, before the decision was kept: asked again, then run once.
    let (text, outcome, events, sent, agent) = crash_at(store_url, tag, "approval_decided").await;
    assert_eq!(text, "aa", "sent exactly once");
    assert!(finished(outcome).contains("read_text_file: aa"));
    assert!(unknown(&events).is_empty());
    assert!(!sent.contains("outcome unknown"));
    agent.close().await.unwrap();

    // After the call was recorded as sent (it was not, in fact): not sent again, and
    // the model reads that its outcome is unknown.
    let (text, outcome, events, sent, agent) = crash_at(store_url, tag, "before_tool_call").await;
    assert_eq!(text, "a", "not sent again");
    assert!(finished(outcome).contains("read_text_file: a"));
    assert!(
        sent.contains("outcome unknown: `edit_file` was sent"),
        "{sent}"
    );
    assert_eq!(unknown(&events), [("edit_file".to_owned(), false)]);
    agent.close().await.unwrap();

    // After the tool answered, before its result was kept: sent once, never twice.
    let (text, outcome, events, sent, agent) = crash_at(store_url, tag, "after_tool_result").await;
    assert_eq!(text, "aa", "sent once, not again");
    assert!(finished(outcome).contains("read_text_file: aa"));
    assert!(
        sent.contains("outcome unknown: `edit_file` was sent"),
        "{sent}"
    );
    assert_eq!(unknown(&events), [("edit_file".to_owned(), false)]);
    agent.close().await.unwrap();

    // After the model's next answer, before anything of it was kept: the model is
    // asked again (the scripted model gives its next turn, a final answer); the edit
    // is not repeated, and its result was kept.
    let (text, outcome, events, sent, agent) = crash_at(store_url, tag, "model_answered").await;
    assert_eq!(text, "aa");
    let answer = finished(outcome);
    assert!(answer.contains("edit_file: "), "{answer}");
    assert!(!sent.contains("outcome unknown"), "{sent}");
    assert!(unknown(&events).is_empty());
    agent.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_loses_no_decision_and_sends_no_call_twice_sqlite() {
    every_crash_point("sqlite", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_process_loses_no_decision_and_sends_no_call_twice_postgres() {
    let pg = Postgres::start();
    every_crash_point(&pg.url, "pg").await;
}

/// A call of a tool that says it is idempotent (`write_file`), recorded as sent when
/// the process died: the recovered run sends it again, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_call_is_sent_again_after_a_crash() {
    let dir = scratch("crash-idempotent");
    let file = dir.join("w.txt");
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "write_file", "arguments": {"path": file, "content": "written"}}]},
            {"echo_tools": true}
        ]),
    );
    let store = store_for(&dir, "sqlite").await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = crash_agent(&dir, &model.url(), store.clone(), move |_, e| {
        seen.lock().unwrap().push(e.clone())
    });
    let (run, decision) = match agent.run("write it").await.unwrap() {
        Outcome::ApprovalRequired {
            run_id, decision, ..
        } => (run_id, decision),
        other => panic!("{other:?}"),
    };
    kill_at(&dir, &model, "sqlite", &run, &decision, "before_tool_call");
    assert!(!file.exists(), "killed before the call was sent");
    let answer = finished(recover(&agent, &run).await);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "written");
    assert!(
        answer.contains("write_file: Successfully wrote"),
        "{answer}"
    );
    assert_eq!(
        unknown(&events.lock().unwrap()),
        [("write_file".to_owned(), true)]
    );
    agent.close().await.unwrap();
}

/// Only the save that keeps the results of calls just made may wait for the disk
/// (`Durability::Deferred`): the save before calls are sent, a suspension and the
/// run's end are flushed — through a run with a call that runs at once and one that
/// waits for a person, on SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_results_of_calls_are_saved_deferred() {
    let dir = scratch("durability");
    std::fs::write(dir.join("a.txt"), "hello").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": dir.join("b.txt"), "content": "b"}}]},
            {"echo_tools": true}
        ]),
    );
    let spy = super::rollback::Recorder::new(store_for(&dir, "sqlite").await);
    let agent = crash_agent(&dir, &model.url(), spy.clone(), |_, _| {});
    let (run, decision) = match agent.run("read, then write").await.unwrap() {
        Outcome::ApprovalRequired {
            run_id, decision, ..
        } => (run_id, decision),
        other => panic!("{other:?}"),
    };
    let outcome = agent
        .resume(&run, &decision, Decision::approve("ann"))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("b.txt")).unwrap(), "b");
    finished(outcome);
    use Durability::{Deferred, Flushed};
    use RunStatus::{Finished, Running, Suspended};
    let saves: Vec<(RunStatus, Durability)> = spy
        .saves
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.status, r.durability))
        .collect();
    assert_eq!(
        saves,
        [
            (Running, Flushed),   // read_text_file recorded as sent
            (Running, Deferred),  // its result kept
            (Suspended, Flushed), // write_file waits for a person
            (Running, Flushed),   // the decision kept
            (Running, Flushed),   // write_file recorded as sent
            (Running, Deferred),  // its result kept
            (Finished, Flushed),  // the run's end
        ]
    );
    agent.close().await.unwrap();
}

//! Nothing lost, nothing run twice: a process killed with SIGKILL at each step boundary
//! of a resume, and the run recovered by another process once its lease ended. Against
//! the real filesystem server (`edit_file` is not idempotent: each send of "a" → "aa"
//! adds one `a`, so the file counts the sends; `write_file` says it is idempotent), the
//! scripted model, and both durable stores. (The store's leases themselves are in the
//! store suite, `store_suite::*::leases_*`.)

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_agent::{
    Agent, ChatCompletions, Decision, Durability, Event, Mode, Outcome, RunStatus, RunStore,
};
use serde_json::json;

use super::{filesystem, scratch, store_for, Killed, ModelServer, Postgres};

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

//! Model retries and run budgets, through the loop against the scripted model over
//! loopback HTTP (tests/peers/fake_model.py) and the real filesystem server: a 429's
//! `Retry-After` is waited (the model server's own timestamps say so), server errors
//! are retried and refused credentials are not, exhausted attempts fail the run with
//! every retry evented, a hostile `Retry-After` is refused at once; each of a
//! budget's five limits ends the run, and no tool call is sent past it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_agent::{
    Agent, AgentBuilder, Budget, BudgetLimit, ChatCompletions, Event, MemoryRunStore, Mode,
    ModelError, Outcome, RetryPolicy, RunOptions, RunStatus, RunStore,
};
use serde_json::{json, Value};

use super::{filesystem, scratch, ModelServer};

/// Every event of every run, as the callbacks saw them.
type Seen = Arc<Mutex<Vec<(String, Event)>>>;

fn agent_on(model: &ModelServer, seen: &Seen) -> AgentBuilder {
    let seen = seen.clone();
    Agent::builder()
        .model(ChatCompletions::new(model.url(), "m").unwrap())
        .on_event(move |run, e| seen.lock().unwrap().push((run.to_owned(), e.clone())))
}

/// The retries the callbacks saw: (attempt, delay_ms).
fn retries(seen: &Seen) -> Vec<(u32, u64)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter_map(|(_, e)| match e {
            Event::ModelRetried {
                attempt, delay_ms, ..
            } => Some((*attempt, *delay_ms)),
            _ => None,
        })
        .collect()
}

/// A quick policy: backoff of at most 20 ms.
fn quick() -> RetryPolicy {
    RetryPolicy::new()
        .base_delay(Duration::from_millis(10))
        .max_delay(Duration::from_millis(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_waits_its_retry_after_then_the_call_is_tried_again() {
    let dir = scratch("retry-after");
    let model = ModelServer::scripted(
        &dir,
        json!([{"status": 429, "error": "slow down", "retry_after": "1"}, {"text": "done"}]),
    );
    let seen = Seen::default();
    let agent = agent_on(&model, &seen).build().unwrap();
    let out = agent.run("hi").await.unwrap();
    let Outcome::Finished { text, run_id, .. } = &out else {
        panic!("{out:?}")
    };
    assert_eq!(text, "done");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let at = |r: &Value| r["at"].as_f64().unwrap();
    // The model server's own clock: the retry came at least the second it asked for
    // after the first request (never an upper bound).
    assert!(
        at(&requests[1]) - at(&requests[0]) >= 1.0,
        "{} then {}",
        at(&requests[0]),
        at(&requests[1])
    );
    assert_eq!(retries(&seen), vec![(1, 1000)]);
    // The run keeps the retry among its events.
    let kept = agent.events(run_id).await.unwrap();
    assert!(kept.iter().any(|e| matches!(
        e,
        Event::ModelRetried { attempt: 1, delay_ms: 1000, error } if error.contains("slow down")
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_and_refused_credentials_are_not() {
    let dir = scratch("retry-5xx");
    let model = ModelServer::scripted(
        &dir,
        json!([{"status": 503, "error": "busy"}, {"status": 502, "error": "bad gateway"}, {"text": "ok"}]),
    );
    let seen = Seen::default();
    let agent = agent_on(&model, &seen)
        .retry_policy(quick())
        .build()
        .unwrap();
    let out = agent.run("hi").await.unwrap();
    assert!(
        matches!(&out, Outcome::Finished { text, .. } if text == "ok"),
        "{out:?}"
    );
    assert_eq!(model.requests().len(), 3);
    let tried: Vec<u32> = retries(&seen).into_iter().map(|(a, _)| a).collect();
    assert_eq!(tried, vec![1, 2]);

    // 401: the same request would be refused the same way.
    let model = ModelServer::scripted(
        &dir,
        json!([{"status": 401, "error": "bad key"}, {"text": "never"}]),
    );
    let seen = Seen::default();
    let agent = agent_on(&model, &seen)
        .retry_policy(quick())
        .build()
        .unwrap();
    let e = agent.run("hi").await.unwrap_err();
    assert!(
        matches!(e.model_error(), Some(ModelError::Unauthorized { .. })),
        "{e}"
    );
    assert_eq!(model.requests().len(), 1);
    assert!(retries(&seen).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_attempts_fail_the_run_with_every_retry_evented() {
    let dir = scratch("retry-exhausted");
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    let model = ModelServer::scripted(
        &dir,
        json!([
            {"tool_calls": [{"name": "read_text_file", "arguments": {"path": dir.join("a.txt")}}]},
            {"status": 503, "error": "still busy"}
        ]),
    );
    let seen = Seen::default();
    let store = Arc::new(MemoryRunStore::default());
    let agent = agent_on(&model, &seen)
        .server(filesystem(&dir))
        .mode(Mode::Approve)
        .allow(["read_text_file"])
        .store(store.clone())
        .retry_policy(quick().max_retries(2))
        .build()
        .unwrap();
    let e = agent.run("read it").await.unwrap_err();
    assert!(
        matches!(e.model_error(), Some(ModelError::Unavailable { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("still busy"), "{e}");
    // One answer, then the first attempt and its two retries.
    assert_eq!(model.requests().len(), 4);
    assert_eq!(
        retries(&seen)
            .into_iter()
            .map(|(a, _)| a)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    // Failed as before retries, with each retry kept among its events.
    let run = seen.lock().unwrap()[0].0.clone();
    let record = store.load(&run).await.unwrap();
    let record = record.unwrap_or_else(|| panic!("{:?}", seen.lock().unwrap()));
    assert_eq!(record.status, RunStatus::Failed);
    let kept = agent.events(&run).await.unwrap();
    let n = kept
        .iter()
        .filter(|e| matches!(e, Event::ModelRetried { .. }))
        .count();
    assert_eq!(n, 2);
    assert!(kept.iter().any(|e| matches!(e, Event::RunFailed { .. })));
    let _ = agent.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_retry_after_is_refused_at_once_naming_it() {
    let dir = scratch("retry-hostile");
    for asked in [
        "999999999",
        "Fri, 31 Dec 9999 23:59:59 GMT",
        &"9".repeat(300),
    ] {
        let model = ModelServer::scripted(
            &dir,
            json!([{"status": 429, "error": "wait", "retry_after": asked}, {"text": "never"}]),
        );
        let seen = Seen::default();
        let agent = agent_on(&model, &seen).build().unwrap();
        let e = agent.run("hi").await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains("max_retry_after of 60 s"), "{asked}: {text}");
        assert!(text.contains("wait"), "{asked}: {text}");
        assert_eq!(model.requests().len(), 1, "{asked}");
        assert!(retries(&seen).is_empty(), "{asked}");
    }
}

/// A write of `name` in `dir` (the proof a call was sent: the file).
fn write(dir: &std::path::Path, name: &str) -> Value {
    json!({"name": "write_file", "arguments": {"path": dir.join(name), "content": name}})
}

/// Runs `script` with `budget` on an agent that may write files; the outcome, the
/// events its callbacks saw, the store, and the model server.
async fn budgeted(
    tag: &str,
    script: impl FnOnce(&std::path::Path) -> Value,
    budget: Budget,
) -> (
    std::path::PathBuf,
    Outcome,
    Seen,
    Arc<MemoryRunStore>,
    ModelServer,
) {
    let dir = scratch(tag);
    let model = ModelServer::scripted(&dir, script(&dir));
    let seen = Seen::default();
    let store = Arc::new(MemoryRunStore::default());
    let agent = agent_on(&model, &seen)
        .server(filesystem(&dir))
        .mode(Mode::Approve)
        .allow(["write_file"])
        .store(store.clone())
        .build()
        .unwrap();
    let out = agent
        .run_with_options("write", RunOptions::new().budget(budget))
        .await
        .unwrap();
    let _ = agent.close().await;
    (dir, out, seen, store, model)
}

/// The outcome ended the run on `limit`, kept finished with [`Event::BudgetExceeded`]
/// (before [`Event::RunFinished`]); what was used of it.
async fn ended_on(out: &Outcome, limit: BudgetLimit, store: &MemoryRunStore, seen: &Seen) -> u64 {
    let Outcome::BudgetExceeded {
        run_id,
        limit: l,
        used,
        max,
        ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(*l, limit);
    let record = store.load(run_id).await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Finished);
    let events: Vec<Event> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, e)| e.clone())
        .collect();
    let at = events
        .iter()
        .position(|e| matches!(e, Event::BudgetExceeded { limit: l, used: u, max: m } if *l == limit && u == used && m == max))
        .unwrap_or_else(|| panic!("{events:?}"));
    assert!(matches!(events.get(at + 1), Some(Event::RunFinished)));
    // No tool call after it.
    assert!(!events[at..]
        .iter()
        .any(|e| matches!(e, Event::BeforeToolCall { .. })));
    *used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_call_limit_ends_the_run_before_the_next_call() {
    let (dir, out, seen, store, model) = budgeted(
        "budget-model-calls",
        |d| json!([{"tool_calls": [write(d, "a")]}, {"tool_calls": [write(d, "b")]}, {"tool_calls": [write(d, "c")]}, {"text": "done"}]),
        Budget::new().max_model_calls(2),
    )
    .await;
    assert_eq!(
        ended_on(&out, BudgetLimit::ModelCalls, &store, &seen).await,
        2
    );
    assert_eq!(model.requests().len(), 2);
    assert!(dir.join("a").exists() && dir.join("b").exists());
    assert!(!dir.join("c").exists());
    assert_eq!(out.usage().input_tokens, 100 + 101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_call_limit_sends_no_call_past_it() {
    let (dir, out, seen, store, model) = budgeted(
        "budget-tool-calls",
        |d| json!([{"tool_calls": [write(d, "a"), write(d, "b"), write(d, "c")]}, {"text": "done"}]),
        Budget::new().max_tool_calls(1),
    )
    .await;
    assert_eq!(
        ended_on(&out, BudgetLimit::ToolCalls, &store, &seen).await,
        1
    );
    assert_eq!(model.requests().len(), 1);
    assert!(dir.join("a").exists());
    assert!(!dir.join("b").exists() && !dir.join("c").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_limits_end_the_run_before_the_calls_of_the_answer_past_them() {
    // Every answer reads 100 + N tokens and writes 10: the second answer passes both
    // limits, and its call is not sent.
    for (tag, budget, limit, used) in [
        (
            "budget-input",
            Budget::new().max_input_tokens(150),
            BudgetLimit::InputTokens,
            201,
        ),
        (
            "budget-output",
            Budget::new().max_output_tokens(15),
            BudgetLimit::OutputTokens,
            20,
        ),
    ] {
        let (dir, out, seen, store, model) = budgeted(
            tag,
            |d| json!([{"tool_calls": [write(d, "a")]}, {"tool_calls": [write(d, "b")]}, {"text": "done"}]),
            budget,
        )
        .await;
        assert_eq!(ended_on(&out, limit, &store, &seen).await, used, "{tag}");
        assert_eq!(model.requests().len(), 2, "{tag}");
        assert!(dir.join("a").exists(), "{tag}");
        assert!(!dir.join("b").exists(), "{tag}");
    }
    // A run at its token limit makes no further model call.
    let (_, out, seen, store, model) = budgeted(
        "budget-input-at",
        |d| json!([{"tool_calls": [write(d, "a")]}, {"text": "done"}]),
        Budget::new().max_input_tokens(100),
    )
    .await;
    assert_eq!(
        ended_on(&out, BudgetLimit::InputTokens, &store, &seen).await,
        100
    );
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_ends_the_run_while_a_retry_waits() {
    // The provider asks for a second; the run has half of one: it waits until its
    // deadline, not past it, and ends there.
    let (dir, out, seen, store, model) = budgeted(
        "budget-deadline",
        |d| json!([{"status": 503, "error": "busy", "retry_after": "1"}, {"tool_calls": [write(d, "a")]}, {"text": "done"}]),
        Budget::new().deadline(Duration::from_millis(500)),
    )
    .await;
    let used = ended_on(&out, BudgetLimit::Deadline, &store, &seen).await;
    assert!(used >= 500, "{used}");
    // On a machine slow enough the deadline passes before the first call: then no
    // request at all.
    assert!(model.requests().len() <= 1);
    assert!(!dir.join("a").exists());
}

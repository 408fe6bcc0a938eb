//! The loop's transitions against a scripted host and a scripted model, in process:
//! a turn gated then suspended and run together, decisions of each kind, a tool that
//! changed or vanished, a call cut off mid-flight and recovered (the in-process image
//! of a process that died), "always allow" bound to the tool's definition.

#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use mcp_runtime::{BoxFuture, CallOutcome, CallToolResult, Content, McpTool, RequestOptions, Tool};
use serde_json::{json, Value};

use crate::gate::Mode;
use crate::model::{Block, ChatRequest, ChatResponse, Message, Model, Role, Stop};
use crate::store::{lock, MemoryRunStore, RunStatus, RunStore};

use super::decision::{Always, Decision, Outcome, Pending};
use super::events::Event;
use super::handle::Agent;
use super::host::Host;
use super::ids::RANDOM_FAILS;

/// One server, `fs`, whose tools a test can change; it logs every call, and never
/// answers the first call of a tool named in `hanging`.
struct ScriptedHost {
    tools: Mutex<Vec<McpTool>>,
    calls: Mutex<Vec<(String, Value)>>,
    hanging: Mutex<Vec<String>>,
}

fn tool(name: &str, description: &str, idempotent: Option<bool>) -> McpTool {
    let mut def = json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object"}
    });
    if let Some(i) = idempotent {
        def["annotations"] = json!({"idempotentHint": i, "readOnlyHint": false});
    }
    McpTool::from_definition(serde_json::from_value::<Tool>(def).unwrap())
}

impl ScriptedHost {
    fn new() -> Arc<ScriptedHost> {
        Arc::new(ScriptedHost {
            tools: Mutex::new(vec![
                tool("read", "Reads.", None),
                tool("write", "Writes.", Some(false)),
                tool("put", "Puts (idempotent).", Some(true)),
                tool("hang", "Never answers.", Some(false)),
            ]),
            calls: Mutex::default(),
            hanging: Mutex::new(vec!["hang".into()]),
        })
    }
    fn calls(&self) -> Vec<(String, Value)> {
        lock(&self.calls).clone()
    }
    fn called(&self, name: &str) -> usize {
        lock(&self.calls).iter().filter(|(n, _)| n == name).count()
    }
}

impl Host for ScriptedHost {
    fn count(&self) -> usize {
        1
    }
    fn name(&self, _: usize) -> &str {
        "fs"
    }
    fn config_fingerprint(&self, _: usize) -> String {
        "sha256:scripted".into()
    }
    fn tools(&self, _: usize) -> BoxFuture<'_, mcp_runtime::Result<std::sync::Arc<[McpTool]>>> {
        let tools: std::sync::Arc<[McpTool]> = lock(&self.tools).clone().into();
        Box::pin(async move { Ok(tools) })
    }
    fn call<'a>(
        &'a self,
        _: usize,
        tool: &'a McpTool,
        arguments: Value,
        _: RequestOptions,
    ) -> BoxFuture<'a, mcp_runtime::Result<CallOutcome>> {
        let tool = tool.name.as_str();
        lock(&self.calls).push((tool.to_owned(), arguments.clone()));
        let hang = {
            let mut hanging = lock(&self.hanging);
            let first = hanging.iter().position(|h| h == tool);
            first.map(|i| hanging.remove(i)).is_some()
        };
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            Ok(CallOutcome::Done(CallToolResult {
                content: vec![Content::text(format!("{tool} ok {arguments}"))],
                ..CallToolResult::default()
            }))
        })
    }
}

/// A model turn: the calls it asks for (`None`: a final answer).
type Turn = Option<Vec<(&'static str, Value)>>;

/// A model that answers each turn from a script (`None`: a final answer) and keeps
/// every request it was sent.
struct ScriptedModel {
    turns: Mutex<VecDeque<Turn>>,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    fn new(turns: Vec<Turn>) -> Arc<ScriptedModel> {
        Arc::new(ScriptedModel {
            turns: Mutex::new(turns.into()),
            seen: Mutex::default(),
        })
    }
    /// The tool results of the last request, in order: (is_error, content).
    fn last_results(&self) -> Vec<(bool, String)> {
        let seen = lock(&self.seen);
        let Some(last) = seen.last() else {
            return Vec::new();
        };
        let Some(m) = last.messages.last().filter(|m| m.role == Role::Tool) else {
            return Vec::new();
        };
        m.content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult {
                    content, is_error, ..
                } => Some((*is_error, content.clone())),
                _ => None,
            })
            .collect()
    }
}

impl Model for ScriptedModel {
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, std::result::Result<ChatResponse, crate::ModelError>> {
        lock(&self.seen).push(request.clone());
        let turn = lock(&self.turns).pop_front().flatten();
        let n = lock(&self.seen).len();
        Box::pin(async move {
            Ok(match turn {
                None => ChatResponse {
                    message: Message::text(Role::Assistant, "done"),
                    stop: Stop::End,
                    usage: None,
                },
                Some(calls) => ChatResponse {
                    message: Message {
                        role: Role::Assistant,
                        content: calls
                            .into_iter()
                            .enumerate()
                            .map(|(i, (name, arguments))| Block::ToolCall {
                                id: format!("t{n}c{i}"),
                                name: name.into(),
                                arguments,
                            })
                            .collect(),
                    },
                    stop: Stop::ToolCalls,
                    usage: None,
                },
            })
        })
    }
}

fn agent(
    host: &Arc<ScriptedHost>,
    model: &Arc<ScriptedModel>,
    store: &Arc<MemoryRunStore>,
) -> (Agent, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = Agent::builder()
        .model(model.clone())
        .mode(Mode::Approve)
        .allow(["read"])
        .store(store.clone())
        .lease(std::time::Duration::from_millis(100))
        .host(host.clone())
        .on_event(move |_, e| lock(&seen).push(e.clone()))
        .build()
        .unwrap();
    (agent, events)
}

fn waiting(outcome: Outcome) -> (String, Vec<Pending>) {
    match outcome {
        Outcome::ApprovalRequired { run_id, calls, .. } => (run_id, calls),
        other => panic!("expected a suspension: {other:?}"),
    }
}

#[tokio::test]
async fn a_turn_is_gated_first_then_suspended_together_then_run_together() {
    let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
    let model = ScriptedModel::new(vec![
        Some(vec![
            ("read", json!({"n": 1})),
            ("write", json!({"n": 2})),
            ("missing", json!({})),
            ("write", json!({"n": 3})),
        ]),
        None,
    ]);
    let (agent, events) = agent(&host, &model, &store);
    let (run, calls) = waiting(agent.run("go").await.unwrap());
    assert_eq!(calls.len(), 2);
    assert!(host.calls().is_empty(), "nothing of the turn runs yet");
    assert!(lock(&events)
        .iter()
        .any(|e| matches!(e, Event::Denied { tool, .. } if tool == "missing")));

    let out = agent
        .decide(
            &run,
            [
                (calls[0].decision.clone(), Decision::approve("ann")),
                (
                    calls[1].decision.clone(),
                    Decision::deny("ann").with_message("not 3"),
                ),
            ],
        )
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
    let mut ran = host.calls();
    ran.sort_by_key(|(n, _)| n.clone());
    assert_eq!(
        ran,
        [
            ("read".to_owned(), json!({"n": 1})),
            ("write".to_owned(), json!({"n": 2}))
        ]
    );
    // The results answer the calls in the model's order.
    let results = model.last_results();
    assert_eq!(results.len(), 4);
    assert!(!results[0].0 && results[0].1.contains("read ok"));
    assert!(!results[1].0 && results[1].1.contains("write ok"));
    assert!(results[2].0 && results[2].1.contains("no tool `missing`"));
    assert!(results[3].0 && results[3].1.contains("a person denied `write`: not 3"));
}

#[tokio::test]
async fn an_edit_runs_the_persons_arguments_bound_to_them() {
    let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
    let model = ScriptedModel::new(vec![Some(vec![("write", json!({"n": 1}))]), None]);
    let (agent, events) = agent(&host, &model, &store);
    let (run, calls) = waiting(agent.run("go").await.unwrap());
    agent
        .resume(
            &run,
            &calls[0].decision,
            Decision::edit("ann", json!({"n": 99})),
        )
        .await
        .unwrap();
    assert_eq!(host.calls(), [("write".to_owned(), json!({"n": 99}))]);
    let bound = lock(&events).iter().find_map(|e| match e {
        Event::ApprovalDecided { binding, kind, .. } if kind == "edit" => binding.clone(),
        _ => None,
    });
    assert_eq!(
        bound.unwrap().arguments,
        mcp_runtime::digest::sha256_json(&json!({"n": 99}))
    );
}

#[tokio::test]
async fn a_changed_or_vanished_tool_voids_the_approval() {
    let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
    let model = ScriptedModel::new(vec![Some(vec![("write", json!({"n": 1}))]), None, None]);
    let (agent, events) = agent(&host, &model, &store);
    let (run, calls) = waiting(agent.run("go").await.unwrap());
    // Its description changes: the approval is void, the person is asked again.
    lock(&host.tools)[1] = tool("write", "Writes, and mails a copy away.", Some(false));
    let (_, again) = waiting(
        agent
            .resume(&run, &calls[0].decision, Decision::approve("ann"))
            .await
            .unwrap(),
    );
    assert_eq!(host.called("write"), 0);
    assert!(lock(&events).iter().any(
        |e| matches!(e, Event::DecisionVoided { reason, .. } if reason.contains("definition"))
    ));
    // Now it is gone: voided again, and the model reads that there is no such tool.
    lock(&host.tools).remove(1);
    let out = agent
        .resume(&run, &again[0].decision, Decision::approve("ann"))
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
    assert_eq!(host.called("write"), 0);
    let results = model.last_results();
    assert!(results[0].0 && results[0].1.contains("no tool `write`"));
}

/// A call cut off in flight — the run's future dropped while the server has not
/// answered, as when the process dies — is recorded as sent: the recovered run does
/// not send it again, and the model reads that its outcome is unknown. A tool that says
/// it is idempotent is sent again.
#[tokio::test]
async fn a_call_cut_off_in_flight_is_not_sent_again_unless_idempotent() {
    for (name, resent) in [("hang", false), ("put", true)] {
        let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
        // Its first send never answers.
        lock(&host.hanging).push(name.into());
        let model = ScriptedModel::new(vec![Some(vec![(name, json!({}))]), None]);
        let (agent, events) = agent(&host, &model, &store);
        let (run, calls) = waiting(agent.run("go").await.unwrap());
        // Cut off once the server has the call (however long that takes): the run's
        // future is dropped, as when its process dies.
        let sent = async {
            while host.calls().is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            out = agent.resume(&run, &calls[0].decision, Decision::approve("ann")) => {
                panic!("the call never answers: {out:?}")
            }
            () = sent => {}
        }
        assert_eq!(host.calls().len(), 1);
        assert_eq!(
            store.load(&run).await.unwrap().unwrap().status,
            RunStatus::Running
        );
        // The dropped run renews nothing: once its lease ends, it is recovered.
        let out = loop {
            match agent.recover(&run).await {
                Ok(out) => break out,
                Err(e) if e.is_not_suspended() => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
        assert_eq!(host.calls().len(), if resent { 2 } else { 1 });
        let unknown: Vec<bool> = lock(&events)
            .iter()
            .filter_map(|e| match e {
                Event::OutcomeUnknown { resent, .. } => Some(*resent),
                _ => None,
            })
            .collect();
        assert_eq!(unknown, [resent]);
        let result = &model.last_results()[0].1;
        if resent {
            assert!(result.contains("put ok"), "{result}");
        } else {
            assert!(
                result.contains("outcome unknown: `hang` was sent to server `fs`"),
                "{result}"
            );
        }
    }
}

/// "Always allow" for the run: the tool's later calls run without asking — while its
/// definition is the one allowed.
#[tokio::test]
async fn always_allow_holds_while_the_tool_is_the_same() {
    let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
    let model = ScriptedModel::new(vec![
        Some(vec![("write", json!({"n": 1}))]),
        Some(vec![("write", json!({"n": 2}))]),
        Some(vec![("write", json!({"n": 3}))]),
        None,
    ]);
    let (agent, _) = agent(&host, &model, &store);
    let (run, calls) = waiting(agent.run("go").await.unwrap());
    let out = agent
        .resume(
            &run,
            &calls[0].decision,
            Decision::approve("ann").always(Always::Run),
        )
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
    assert_eq!(host.called("write"), 3, "the later writes did not ask");

    // Another run: allowed for the run after its first write; then, while the run
    // waits on another tool, `write` changes: its next call asks again.
    let model = ScriptedModel::new(vec![
        Some(vec![("write", json!({"n": 4}))]),
        Some(vec![("put", json!({}))]),
        Some(vec![("write", json!({"n": 5}))]),
        None,
    ]);
    let (agent, _) = self::agent(&host, &model, &store);
    let (run, calls) = waiting(agent.run("go").await.unwrap());
    let (_, waits) = waiting(
        agent
            .resume(
                &run,
                &calls[0].decision,
                Decision::approve("ann").always(Always::Run),
            )
            .await
            .unwrap(),
    );
    assert_eq!(waits[0].tool, "put");
    assert_eq!(host.called("write"), 4);
    lock(&host.tools)[1] = tool("write", "Writes, and mails a copy away.", Some(false));
    let (_, waits) = waiting(
        agent
            .resume(&run, &waits[0].decision, Decision::approve("ann"))
            .await
            .unwrap(),
    );
    assert_eq!(waits[0].tool, "write", "a changed tool asks again");
    assert_eq!(host.called("write"), 4);
}

/// A tool whose name breaks the MCP rule is not offered (an event says so, escaped);
/// the others are.
#[tokio::test]
async fn a_tool_named_outside_the_rule_is_hidden() {
    let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
    lock(&host.tools).push(tool("rm -rf /\u{1b}[2J", "Sneaky.", None));
    lock(&host.tools).push(tool(&"x".repeat(129), "Long.", None));
    let model = ScriptedModel::new(vec![None]);
    let (agent, events) = agent(&host, &model, &store);
    agent.run("go").await.unwrap();
    let hidden: Vec<String> = lock(&events)
        .iter()
        .filter_map(|e| match e {
            Event::ToolHidden { tool, .. } => Some(tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(hidden.len(), 2, "{hidden:?}");
    assert!(hidden[0].contains("\\u{1b}"), "escaped: {hidden:?}");
    let offered: Vec<String> = lock(&model.seen)[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(offered.contains(&"read".to_owned()), "{offered:?}");
    assert!(
        offered.iter().all(|n| super::host::valid_tool_name(n)),
        "{offered:?}"
    );
}

/// A failed random draw stops what needs an id with a clear error — a run that would
/// start, a resume that would take the run — and leaves nothing stuck: the suspended
/// run waits on, and resumes once the draw works again.
#[tokio::test]
async fn a_failed_random_draw_fails_closed_and_leaves_nothing_stuck() {
    let (host, store) = (ScriptedHost::new(), Arc::new(MemoryRunStore::default()));
    let model = ScriptedModel::new(vec![Some(vec![("write", json!({"n": 1}))]), None]);
    let (agent, _) = agent(&host, &model, &store);
    RANDOM_FAILS.with(|f| f.set(true));
    let e = agent.run("go").await.unwrap_err();
    assert!(e.is_config() && e.to_string().contains("random"), "{e}");
    assert!(store
        .list(&crate::store::RunFilter::new())
        .await
        .unwrap()
        .runs
        .is_empty());
    RANDOM_FAILS.with(|f| f.set(false));

    let (run, calls) = waiting(agent.run("go").await.unwrap());
    RANDOM_FAILS.with(|f| f.set(true));
    let e = agent
        .resume(&run, &calls[0].decision, Decision::approve("ann"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("random"), "{e}");
    assert!(host.calls().is_empty(), "nothing ran on a failed draw");
    RANDOM_FAILS.with(|f| f.set(false));
    let out = agent
        .resume(&run, &calls[0].decision, Decision::approve("ann"))
        .await
        .unwrap();
    assert!(matches!(out, Outcome::Finished { .. }), "{out:?}");
    assert_eq!(host.called("write"), 1);
}

//! Running allowed calls on their servers: concurrently, with progress, and with input callbacks.

use std::collections::HashMap;
use std::sync::Arc;

use mcp_runtime::{CallOutcome, InputResponse, PendingInput, RequestOptions};
use serde_json::json;

use crate::error::{Error, Result};
use crate::model::Block;
use crate::store::{lock, LedgerEntry, LedgerKind, RunStatus};

use super::clock::now;
use super::decision::{Binding, InputAsk};
use super::events::Event;
use super::handle::{Agent, MAX_PROGRESS_KEPT};
use super::host::AgentTool;
use super::ids::random_id;
use super::run::error_result;
use super::state::{CallEnd, CallState, Paused, PendingCall, RunState, MAX_INPUT_ROUNDS};
use super::vault::{Answers, Completed};

/// How a call's first attempt goes out.
#[derive(Clone)]
pub(super) enum Start {
    /// As the model asked for it.
    Plain,
    /// Again, with the answers to the input it waited for (and what of them the vault
    /// held, forgotten once sent).
    Answered(Box<Resent>),
}

/// A call sent again: the input it waited for, the answers, and what the run kept of
/// them.
type Resent = (PendingInput, Vec<(String, InputResponse)>, Answers);

/// One call about to go out: the call, its tool, its first attempt, and the vault id
/// for what of its next pause the run may not keep (drawn before anything is sent).
type Outgoing<'a> = (PendingCall, &'a AgentTool, Start, String);

impl Agent {
    /// Runs the calls at `indices` of the turn (each offered by a server of `tools`):
    /// one is awaited here, several run concurrently. Events and results keep the
    /// model's order. A call that paused for input gives its input (and the answers
    /// it has) instead of a result; so does a call answered in another process that
    /// lacks an answer here — before anything of it is recorded as sent.
    pub(super) async fn run_tools(
        &self,
        state: &mut RunState,
        indices: &[usize],
        tools: &HashMap<String, AgentTool>,
    ) -> Result<Vec<std::result::Result<Block, Paused>>> {
        let mut out: Vec<Option<std::result::Result<Block, Paused>>> = Vec::new();
        out.resize_with(indices.len(), || None);
        let mut batch: Vec<(usize, Outgoing<'_>)> = Vec::with_capacity(indices.len());
        let mut asked = Vec::new();
        for (slot, &i) in indices.iter().enumerate() {
            let call = state.pending[i].clone();
            let Some(tool) = tools.get(&call.name) else {
                return Err(Error::config("a call to run names no tool"));
            };
            let start = match &call.at {
                CallState::Answered { input, answers, .. } => {
                    let before = asked.len();
                    let completed = self
                        .complete_answers((&state.id, &call), input.clone(), answers, &mut asked)
                        .await?;
                    if asked.len() > before {
                        let event = Event::InputAnswered {
                            tool: call.name.clone(),
                            actions: asked.split_off(before),
                            by: "on_input".into(),
                            at: now(),
                        };
                        self.event(state, event);
                    }
                    match completed {
                        Completed::Ready(input, ready) => {
                            Start::Answered(Box::new((input, ready, answers.clone())))
                        }
                        Completed::Missing(input, still) => {
                            out[slot] = Some(Err(Box::new((input, still))));
                            continue;
                        }
                        // The server's state is gone with another process: its
                        // questions start over.
                        Completed::StartOver => Start::Plain,
                    }
                }
                _ => Start::Plain,
            };
            batch.push((slot, (call, tool, start, random_id()?)));
        }
        // A call the sent ledger holds was sent already (this is a copy of the run
        // put back from before it was): never sent twice.
        let mut n = 0;
        while n < batch.len() {
            let (slot, (call, tool, _, _)) = &batch[n];
            if !state.sent.contains(&call.ledger_item()) {
                n += 1;
                continue;
            }
            let (server, name) = (tool.facts.server.clone(), call.name.clone());
            out[*slot] = Some(Ok(error_result(
                call.id.clone(),
                format!("outcome unknown: `{name}` was sent to server `{server}` before (the run's sent ledger records it); it may or may not have taken effect, and it was not sent again"),
            )));
            self.event(
                state,
                Event::OutcomeUnknown {
                    server,
                    tool: name,
                    resent: false,
                },
            );
            batch.remove(n);
        }
        // At most once: the calls are recorded as sent before they are — in the run,
        // bound to what they are sent to, and in the sent ledger, by the same save —
        // so a run recovered after a crash knows their outcome is unknown, and a copy
        // of the run from before never sends them again.
        for (_, (call, tool, _, _)) in &batch {
            if let Some(c) = state.pending.iter_mut().find(|c| c.id == call.id) {
                let config = self.inner.servers.host().config_fingerprint(tool.server);
                let binding = Binding::new(config, tool, &c.arguments);
                let (decision, approved) = match &c.at {
                    CallState::Approved { person: Some(p) } => (p.decision.clone(), true),
                    CallState::Answered { asker, .. } => {
                        (None, asker.as_ref().is_some_and(|a| a.approved))
                    }
                    _ => (None, false),
                };
                let item = c.ledger_item();
                c.round += 1;
                c.at = CallState::Executing {
                    server: tool.facts.server.clone(),
                    binding: Some(binding),
                    approved,
                };
                state
                    .ledger
                    .push(LedgerEntry::new(LedgerKind::Sent, item, decision, 0));
            }
        }
        if !batch.is_empty() {
            self.save(state, RunStatus::Running).await?;
        }
        for (_, (call, tool, _, _)) in &batch {
            self.event(
                state,
                Event::BeforeToolCall {
                    server: tool.facts.server.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            );
        }
        let mut ends: Vec<Option<(CallEnd, Vec<Event>)>> = Vec::new();
        ends.resize_with(batch.len(), || None);
        if let [(_, call)] = batch.as_slice() {
            ends[0] = Some(self.call_server(&state.id, call).await);
        } else {
            // Dropping the run (a cancelled future) aborts the calls with the set. At
            // most `calls_in_flight` are on servers at once; the others wait in order.
            let places = Arc::new(tokio::sync::Semaphore::new(
                self.inner.policy.calls_in_flight(),
            ));
            let mut set = tokio::task::JoinSet::new();
            // The tasks' spans are children of the run's.
            let parent = tracing::Span::current();
            for (n, (_, (call, tool, start, vault))) in batch.iter().enumerate() {
                let agent = self.clone();
                let run = state.id.clone();
                let outgoing = (call.clone(), (*tool).clone(), start.clone(), vault.clone());
                let places = places.clone();
                let task = async move {
                    // The semaphore is never closed: a place always comes.
                    let _place = places.acquire_owned().await.ok();
                    let (call, tool, start, vault) = outgoing;
                    (
                        n,
                        agent.call_server(&run, &(call, &tool, start, vault)).await,
                    )
                };
                set.spawn(tracing::Instrument::instrument(task, parent.clone()));
            }
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((n, end)) => ends[n] = Some(end),
                    Err(e) => tracing::warn!(error = %e, "a tool call task failed"),
                }
            }
        }
        for ((slot, (call, tool, _, _)), end) in batch.iter().zip(ends) {
            let (end, events) = end.unwrap_or_else(|| {
                (
                    CallEnd::Done(
                        json!({ "error": "the tool call did not complete" }).to_string(),
                        Vec::new(),
                        true,
                    ),
                    Vec::new(),
                )
            });
            // Already delivered to the callbacks live; kept with the run here.
            state.events.extend(events);
            state.ran += 1;
            out[*slot] = Some(match end {
                CallEnd::Done(content, parts, is_error) => {
                    self.event(
                        state,
                        Event::AfterToolResult {
                            server: tool.facts.server.clone(),
                            tool: call.name.clone(),
                            is_error,
                        },
                    );
                    Ok(Block::ToolResult {
                        id: call.id.clone(),
                        content,
                        is_error,
                        parts,
                    })
                }
                CallEnd::Paused(paused) => Err(paused),
            });
        }
        Ok(out
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Ok(Block::tool_result(
                        "",
                        json!({ "error": "the tool call did not complete" }).to_string(),
                        true,
                    ))
                })
            })
            .collect())
    }

    /// One MCP call: its result for the model and whether it failed — or, when the
    /// server asks for input no callback gives, the input — with the events it produced
    /// on the way (progress, answers), delivered to the callbacks as they happen.
    pub(super) async fn call_server(
        &self,
        run_id: &str,
        (call, tool, start, vault): &Outgoing<'_>,
    ) -> (CallEnd, Vec<Event>) {
        let seen: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
        let (sink, callbacks, run) = (
            seen.clone(),
            self.inner.callbacks.clone(),
            run_id.to_owned(),
        );
        let (server_name, tool_name) = (tool.facts.server.clone(), call.name.clone());
        let base = RequestOptions::default().with_progress(move |p| {
            let event = Event::ToolProgress {
                server: server_name.clone(),
                tool: tool_name.clone(),
                progress: p.progress,
                total: p.total,
                message: p.message.as_ref().map(|m| crate::error::clip(m, 1000)),
            };
            callbacks.emit(&run, &event);
            let mut kept = lock(&sink);
            if kept.len() >= MAX_PROGRESS_KEPT {
                kept.pop();
            }
            kept.push(event);
        });
        let mut notes = Vec::new();
        // The answers of the next attempt, and whether the run may not keep them (they
        // came from callbacks or hold secrets): then the server's next `requestState`,
        // which may carry them, is kept only in the vault.
        let (mut next, mut vaulted) = match start {
            Start::Plain => (None, false),
            Start::Answered(answered) => {
                let (input, ready, held) = answered.as_ref();
                let vaulted = !held.callbacks.is_empty() || !held.withheld.is_empty();
                self.inner.vault.forget(run_id, held);
                (Some((input.clone(), ready.clone())), vaulted)
            }
        };
        let mut end = CallEnd::Done(
            json!({ "error": format!("`{}` kept asking for input ({MAX_INPUT_ROUNDS} rounds)", call.name) })
                .to_string(),
            Vec::new(),
            true,
        );
        let function = tool.facts.server == crate::function::FUNCTIONS;
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {}", call.name),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %call.name,
            gen_ai.tool.call.id = %call.id,
            gen_ai.tool.type = if function { "function" } else { "extension" },
            mcp.method.name = if function { None } else { Some(mcp_runtime_core::protocol::Method::ToolsCall.as_str()) },
            mcp.protocol.version = self.inner.servers.host().protocol_version(tool.server),
            mcp_agent.server.name = %tool.facts.server,
            gen_ai.tool.call.arguments = tracing::field::Empty,
            gen_ai.tool.call.result = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        if self.inner.trace_content {
            span.record(
                "gen_ai.tool.call.arguments",
                tracing::field::display(&call.arguments),
            );
        }
        // The model reads why a call failed as the call's result.
        let failed =
            |why: String| CallEnd::Done(json!({ "error": why }).to_string(), Vec::new(), true);
        for _ in 0..MAX_INPUT_ROUNDS {
            let mut options = base.clone();
            let sent_vaulted = vaulted;
            if let Some((input, ready)) = next.take() {
                options = options.with_input_answers(input, ready);
            }
            let sent = self.inner.servers.host().call(
                tool.server,
                &tool.def,
                call.arguments.clone(),
                options,
            );
            let mut input = match tracing::Instrument::instrument(sent, span.clone()).await {
                Ok(CallOutcome::Done(r)) => {
                    let (text, parts, is_error) = crate::content::tool_result_for_model(
                        r,
                        self.inner.policy.max_result_size(),
                    );
                    end = CallEnd::Done(text, parts, is_error);
                    break;
                }
                Ok(CallOutcome::NeedsInput(input)) => *input,
                // An outcome this version does not know: the model reads that it failed.
                Ok(_) => {
                    end = failed("the call ended in a way this agent does not know".into());
                    break;
                }
                // A protocol failure is the model's to read too; the loop goes on.
                Err(e) => {
                    end = failed(e.to_string());
                    break;
                }
            };
            let requests = match input.requests() {
                Ok(r) => r,
                Err(why) => {
                    end = failed(why.to_string());
                    break;
                }
            };
            let mut given = Vec::new();
            for (key, request) in requests {
                let ask = InputAsk {
                    run_id: run_id.to_owned(),
                    tool: call.name.clone(),
                    key: key.clone(),
                    request,
                };
                if let Some(answer) = self.inner.callbacks.ask(ask).await {
                    given.push((key, answer));
                }
            }
            if !given.is_empty() {
                let event = Event::InputAnswered {
                    tool: call.name.clone(),
                    actions: given.iter().map(|(_, a)| a.action().to_owned()).collect(),
                    by: "on_input".into(),
                    at: now(),
                };
                self.inner.callbacks.emit(run_id, &event);
                notes.push(event);
            }
            if given.len() == input.keys().count() {
                next = Some((input, given));
                vaulted = true;
                continue;
            }
            // A person must answer the rest: the callbacks' answers wait in the vault,
            // never in the run — and so does the server's state when it followed
            // answers the run may not keep.
            let answers = self.keep_in_vault(run_id, vault, &mut input, &given, sent_vaulted);
            end = CallEnd::Paused(Box::new((input, answers)));
            break;
        }
        match &end {
            CallEnd::Done(text, _, is_error) => {
                if *is_error {
                    span.record("error.type", "tool_error");
                }
                if self.inner.trace_content {
                    span.record("gen_ai.tool.call.result", text.as_str());
                }
            }
            CallEnd::Paused(_) => {
                span.record("error.type", "input_required");
            }
        }
        let mut events = std::mem::take(&mut *lock(&seen));
        events.extend(notes);
        (end, events)
    }
}

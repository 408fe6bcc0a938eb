//! Running allowed calls on their servers — concurrently, with progress, and with
//! input callbacks — and the answers to a server's input requests: what of them a
//! run may keep.
//!
//! A run keeps a person's answers without the fields the request marks secret
//! (`writeOnly`, `format: "password"`), and of the answers `on_input` callbacks gave
//! only which keys they answered. What it may not keep waits in this process's memory
//! (the vault) until the call is sent; a run that goes on in another process — or
//! after this one restarted — asks the callbacks again, and a person again for a
//! secret it lacks.

use std::collections::HashMap;
use std::sync::Arc;

use mcp_runtime::{CallOutcome, InputResponse, PendingInput, RequestOptions};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::model::Block;
use crate::store::{lock, LedgerEntry, LedgerKind, RunStatus};

use super::clock::now;
use super::decision::{Binding, InputAsk};
use super::delegate::{absorb, Delegation};
use super::events::Event;
use super::handle::{Agent, MAX_PROGRESS_KEPT};
use super::host::AgentTool;
use super::ids::random_id;
use super::run::error_result;
use super::state::{CallEnd, CallState, Halt, PendingCall, RunState, MAX_INPUT_ROUNDS};
use super::vault::{Answers, Completed, STATE};

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
    ) -> Result<Vec<std::result::Result<Block, Halt>>> {
        let mut out: Vec<Option<std::result::Result<Block, Halt>>> = Vec::new();
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
                            principal: None,
                        };
                        self.event(state, event);
                    }
                    match completed {
                        Completed::Ready(input, ready) => {
                            Start::Answered(Box::new((input, ready, answers.clone())))
                        }
                        Completed::Missing(input, still) => {
                            out[slot] = Some(Err(Halt::Input(Box::new((input, still)))));
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
        for (_, (call, tool, _, _)) in &mut batch {
            let sub_run = if self.delegates(tool) {
                Some(random_id()?)
            } else {
                None
            };
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
                state.tool_calls = state.tool_calls.saturating_add(1);
                c.at = CallState::Executing {
                    server: tool.facts.server.clone(),
                    binding: Some(binding),
                    approved,
                    sub_run,
                };
                // The call as sent (a sub-agent's run id with it).
                call.at = c.at.clone();
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
        // A sub-agent's run started by one of these calls gets the run's owner, what is
        // left of its budget and its policies.
        let delegation = batch
            .iter()
            .any(|(_, (_, tool, _, _))| self.delegates(tool))
            .then(|| Arc::new(self.delegation(state)));
        let mut ends: Vec<Option<(CallEnd, Vec<Event>)>> = Vec::new();
        ends.resize_with(batch.len(), || None);
        if let [(_, call)] = batch.as_slice() {
            ends[0] = Some(
                self.call_server(&state.id, call, delegation.as_deref())
                    .await,
            );
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
                let delegation = delegation.clone();
                let task = async move {
                    // The semaphore is never closed: a place always comes.
                    let _place = places.acquire_owned().await.ok();
                    let (call, tool, start, vault) = outgoing;
                    (
                        n,
                        agent
                            .call_server(&run, &(call, &tool, start, vault), delegation.as_deref())
                            .await,
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
            // Already delivered to the callbacks live; kept with the run here (what a
            // sub-agent's run that ended spent counts against this run's budget).
            for event in &events {
                absorb(state, event);
            }
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
                CallEnd::Paused(paused) => Err(Halt::Input(paused)),
                CallEnd::Delegated(run, decisions) => Err(Halt::Delegated(run, decisions)),
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
        delegation: Option<&Delegation>,
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
        // A sub-agent tool: its task becomes a run of the sub-agent.
        let child = delegation
            .filter(|_| self.delegates(tool))
            .and_then(|d| Some((d, self.sub_agent(&tool.def.name)?)));
        let rounds = if child.is_some() { 0 } else { MAX_INPUT_ROUNDS };
        if let Some((delegation, child)) = child {
            let sub_run = match &call.at {
                CallState::Executing { sub_run, .. } => sub_run.clone(),
                _ => None,
            };
            let sent = self.delegate(delegation, call, sub_run, &child);
            let (delegated, event) = tracing::Instrument::instrument(sent, span.clone()).await;
            self.inner.callbacks.emit(run_id, &event);
            notes.push(event);
            end = delegated;
        }
        for _ in 0..rounds {
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
                    // Only the paths and rules: the output itself reaches the record
                    // only through `after_call`.
                    let note = match &r.output_check {
                        mcp_runtime::model::OutputCheck::Mismatch { rules, .. } => {
                            Some(Event::OutputMismatch {
                                server: tool.facts.server.clone(),
                                tool: call.name.clone(),
                                reason: rules.clone(),
                            })
                        }
                        mcp_runtime::model::OutputCheck::Unusable(why) => {
                            Some(Event::SchemaUnchecked {
                                server: tool.facts.server.clone(),
                                tool: call.name.clone(),
                                reason: format!("outputSchema: {why}"),
                            })
                        }
                        _ => None,
                    };
                    if let Some(event) = note {
                        self.inner.callbacks.emit(run_id, &event);
                        notes.push(event);
                    }
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
                    principal: None,
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
        // The application's `after_call` hook on what the model will read (a result,
        // or why the call failed), before anything records it — the span included.
        let (hooked, event) = self.after_call(run_id, &tool.facts.server, call, end);
        end = hooked;
        if let Some(event) = event {
            self.inner.callbacks.emit(run_id, &event);
            notes.push(event);
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
            CallEnd::Paused(_) | CallEnd::Delegated(..) => {
                span.record("error.type", "input_required");
            }
        }
        let mut events = std::mem::take(&mut *lock(&seen));
        events.extend(notes);
        (end, events)
    }
}

impl Agent {
    /// The application's `after_call` hook on how `call` (to `server`) ended, when it
    /// ended with a result for the model: the result it leaves (its parts withheld
    /// when the hook panicked), and the event that says what the hook did.
    pub(super) fn after_call(
        &self,
        run_id: &str,
        server: &str,
        call: &PendingCall,
        end: CallEnd,
    ) -> (CallEnd, Option<Event>) {
        let CallEnd::Done(text, parts, is_error) = end else {
            return (end, None);
        };
        let info = super::hooks::CallInfo {
            run_id,
            server,
            tool: &call.name,
            arguments: &call.arguments,
        };
        let (result, hooked, withheld) = self
            .inner
            .callbacks
            .hooks
            .after(info, super::hooks::CallResult::new(text, is_error));
        let parts = if withheld { Vec::new() } else { parts };
        (CallEnd::Done(result.text, parts, result.is_error), hooked)
    }

    /// Whether calls of `tool` are handed to a sub-agent.
    fn delegates(&self, tool: &AgentTool) -> bool {
        tool.facts.server == crate::function::FUNCTIONS
            && self.inner.servers.sub_agent(&tool.def.name).is_some()
    }

    /// Keeps a person's `answer` to the request under `key`: what the run keeps goes
    /// into `answers`, the secret fields into the vault. A request this code cannot
    /// read has every field of its answer taken as secret.
    pub(super) fn keep_person_answer(
        &self,
        run: &str,
        input: &PendingInput,
        key: &str,
        answer: &InputResponse,
        answers: &mut Answers,
    ) -> Result<()> {
        let mut wire = answer.to_value();
        let secret: Option<Vec<String>> = input
            .requests()
            .ok()
            .and_then(|r| r.into_iter().find(|(k, _)| k == key))
            .map(|(_, r)| r.secret_fields());
        let mut taken = Map::new();
        if let Some(content) = wire.get_mut("content").and_then(Value::as_object_mut) {
            let names: Vec<String> = match secret {
                Some(names) => names,
                None => content.keys().cloned().collect(),
            };
            for name in names {
                if let Some(v) = content.remove(&name) {
                    taken.insert(name, v);
                }
            }
        }
        if !taken.is_empty() {
            let id = answers.vault_id()?;
            answers
                .withheld
                .push((key.to_owned(), taken.keys().cloned().collect()));
            self.inner.vault.put(run, &id, key, Value::Object(taken));
        }
        answers.answers.push((key.to_owned(), wire));
        Ok(())
    }

    /// Keeps `given` (the answers callbacks gave) and the input's `requestState` when
    /// `withhold_state` (it may carry answers the run may not keep) in the vault, under
    /// `vault` (drawn before the call was sent): the run keeps only that they were
    /// given.
    pub(super) fn keep_in_vault(
        &self,
        run: &str,
        vault: &str,
        input: &mut PendingInput,
        given: &[(String, InputResponse)],
        withhold_state: bool,
    ) -> Answers {
        let mut answers = Answers::default();
        for (key, answer) in given {
            self.inner.vault.put(run, vault, key, answer.to_value());
            answers.callbacks.push(key.clone());
        }
        if withhold_state {
            if let Some(state) = input.take_request_state() {
                self.inner.vault.put(run, vault, STATE, state);
                answers.state_withheld = true;
            }
        }
        if !answers.callbacks.is_empty() || answers.state_withheld {
            answers.vault = Some(vault.to_owned());
        }
        answers
    }

    /// The answers to send for `input`: what the run kept with what the vault holds,
    /// and the callbacks asked again for a key whose answer the vault lacks (their
    /// actions are pushed to `asked`). An answer whose secret the vault lacks is
    /// dropped: the person is asked again.
    pub(super) async fn complete_answers(
        &self,
        (run, call): (&str, &PendingCall),
        mut input: PendingInput,
        kept: &Answers,
        asked: &mut Vec<String>,
    ) -> Result<Completed> {
        let id = kept.vault.clone().unwrap_or_default();
        if kept.state_withheld {
            match self.inner.vault.get(run, &id, STATE) {
                Some(state) => input.set_request_state(Some(state)),
                None => return Ok(Completed::StartOver),
            }
        }
        let mut ready = Vec::new();
        // What the run keeps if the call waits again: under a new vault id.
        let mut still = Answers::default();
        let mut moved: Vec<(String, Value)> = Vec::new();
        let requests = input.requests().unwrap_or_default();
        for (key, request) in requests {
            if let Some((_, stored)) = kept.answers.iter().find(|(k, _)| *k == key) {
                let withheld = kept
                    .withheld
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, n)| n.as_slice())
                    .unwrap_or_default();
                let mut wire = stored.clone();
                if !withheld.is_empty() {
                    let Some(Value::Object(secret)) = self.inner.vault.get(run, &id, &key) else {
                        continue; // kept by another process: asked again
                    };
                    if !withheld.iter().all(|n| secret.contains_key(n)) {
                        continue;
                    }
                    moved.push((key.clone(), Value::Object(secret.clone())));
                    if let Some(content) = wire.get_mut("content").and_then(Value::as_object_mut) {
                        content.extend(secret);
                    }
                }
                if let Some(r) = InputResponse::from_value(&wire) {
                    ready.push((key.clone(), r));
                    still.answers.push((key.clone(), stored.clone()));
                    if !withheld.is_empty() {
                        still.withheld.push((key, withheld.to_vec()));
                    }
                }
                continue;
            }
            if !kept.callbacks.contains(&key) {
                continue;
            }
            let held = self
                .inner
                .vault
                .get(run, &id, &key)
                .and_then(|v| InputResponse::from_value(&v));
            let answer = match held {
                Some(a) => Some(a),
                None => {
                    let ask = InputAsk {
                        run_id: run.to_owned(),
                        tool: call.name.clone(),
                        key: key.clone(),
                        request,
                    };
                    let a = self.inner.callbacks.ask(ask).await;
                    if let Some(a) = &a {
                        asked.push(a.action().to_owned());
                    }
                    a
                }
            };
            if let Some(a) = answer {
                moved.push((key.clone(), a.to_value()));
                ready.push((key.clone(), a));
                still.callbacks.push(key);
            }
        }
        if ready.len() == input.keys().count() {
            return Ok(Completed::Ready(input, ready));
        }
        // Waits again: what the vault held moves to a new id (this round's).
        if !moved.is_empty() || kept.state_withheld {
            let new = still.vault_id()?;
            for (key, value) in moved {
                self.inner.vault.put(run, &new, &key, value);
            }
            if kept.state_withheld {
                if let Some(state) = input.take_request_state() {
                    self.inner.vault.put(run, &new, STATE, state);
                    still.state_withheld = true;
                }
            }
        }
        self.inner.vault.forget(run, kept);
        Ok(Completed::Missing(input, still))
    }
}

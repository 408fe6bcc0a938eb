//! The loop: a run's turns, its suspensions, and what an error leaves.

use std::collections::HashMap;

use mcp_runtime::PendingInput;
use serde_json::{json, Value};

use crate::content::Input;
use crate::error::{Error, Result};
use crate::model::{Block, ChatRequest, Message, Role, Stop, Usage};
use crate::store::{Claim, Durability, RunRecord, RunStatus};

use super::backoff::retry_at;
use super::decision::{Outcome, Pending, PendingWait};
use super::events::Event;
use super::handle::Agent;
use super::host::AgentTool;
use super::ids::random_id;
use super::options::RunOptions;
use super::retries::model_error_type;
use super::state::{Asker, CallState, Halt, PendingCall, RunState, Suspension, STATE_VERSION};
use super::vault::Answers;

impl Agent {
    /// Runs `input` — a prompt (`&str`), messages, an MCP prompt's or resource's
    /// contents ([`Input`]) — until the model answers, a call needs a person, or the
    /// step limit. The run is a conversation: [`follow_up`](Self::follow_up) goes on
    /// from its answer.
    pub async fn run(&self, input: impl Into<Input>) -> Result<Outcome> {
        self.run_with_options(input, RunOptions::default()).await
    }

    /// Runs `input` as [`run`](Self::run) does, started with `options`: the run's
    /// owner (tenant, who started it, labels) and its budget, kept with the run.
    pub async fn run_with_options(
        &self,
        input: impl Into<Input>,
        options: RunOptions,
    ) -> Result<Outcome> {
        let state = self.new_run(input.into(), options)?;
        self.drive(state, None).await
    }

    /// A new run of `input` started with `options`, its `RunStarted` event recorded:
    /// not kept yet, not driven.
    pub(super) fn new_run(&self, input: Input, options: RunOptions) -> Result<RunState> {
        if input.is_empty() {
            return Err(Error::config(
                "a run needs input: give it a prompt or messages",
            ));
        }
        if let Some(spec) = &options.output {
            spec.checked()?;
        }
        let mut messages = Vec::new();
        if let Some(s) = &self.inner.system {
            messages.push(Message::text(Role::System, s.clone()));
        }
        messages.extend(input.messages);
        let mut state = RunState {
            version: STATE_VERSION,
            id: random_id()?,
            messages,
            transcript: Default::default(),
            log: Default::default(),
            pending: Vec::new(),
            results: Vec::new(),
            events: Vec::new(),
            steps: 0,
            loaded: Vec::new(),
            held: Vec::new(),
            skill_approvals: Vec::new(),
            granted: Vec::new(),
            always: Vec::new(),
            suspension: None,
            ran: 0,
            failure: None,
            retry_at: None,
            retries: 0,
            persisted: false,
            options,
            policy: Some(self.inner.policy.own()),
            parent: None,
            outer: Vec::new(),
            gate: None,
            standing: Default::default(),
            lease: Some(self.inner.books.new_lease()?),
            usage: Usage::default(),
            started_at: super::clock::now_ms(),
            model_calls: 0,
            output_repairs: 0,
            answer_retries: 0,
            tool_calls: 0,
            seq: 0,
            saved_as: None,
            ledger: Vec::new(),
            sent: Default::default(),
            spent: Default::default(),
        };
        self.event(&mut state, Event::RunStarted);
        Ok(state)
    }

    /// Runs an application's own history (`messages`, the last one usually the
    /// person's new turn) as a new run: the same as [`run`](Self::run) with messages.
    pub async fn run_with(&self, messages: Vec<Message>) -> Result<Outcome> {
        self.run(messages).await
    }

    /// Goes on with a finished run: `input` joins its transcript (after the model's
    /// last answer) and the loop runs again — a follow-up question in the same
    /// conversation, from this process or another (the run is in the store). The run
    /// goes on under the policy kept with it (an agent that states a looser one is
    /// refused); it has a fresh step budget. Of two follow-ups one gets the run; a run
    /// that has not finished (it waits, runs, has failed, or is unknown) is refused with
    /// an error for which `is_not_suspended()` is true. An error before anything ran
    /// leaves the run finished as it was.
    pub async fn follow_up(&self, run_id: &str, input: impl Into<Input>) -> Result<Outcome> {
        self.follow_up_as(run_id, input.into(), None).await
    }

    /// [`follow_up`](Self::follow_up), its answer's shape set anew when `output` is
    /// `Some` (`Some(None)`: text).
    pub(super) async fn follow_up_as(
        &self,
        run_id: &str,
        input: Input,
        output: Option<Option<super::output::OutputSpec>>,
    ) -> Result<Outcome> {
        if let Some(Some(spec)) = &output {
            spec.checked()?;
        }
        if input.is_empty() {
            return Err(Error::config(
                "a follow-up needs input: give it a prompt or messages",
            ));
        }
        let Some((claimed, lease)) = self.inner.books.claim(run_id, Claim::Finished).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} has not finished (it waits, runs, has failed, or is unknown): only a finished run takes a follow-up"
            )));
        };
        let finished = |r| RunRecord {
            status: RunStatus::Finished,
            ..r
        };
        let mut state = self.take_up(run_id, claimed, lease, finished).await?;
        let kept = state.clone();
        state.messages.extend(input.messages);
        state.steps = 0;
        state.output_repairs = 0;
        state.answer_retries = 0;
        if let Some(output) = output {
            state.options.output = output;
        }
        // "Always" for the run ended with it: a follow-up asks again (unless the
        // application lets them last).
        if !self.inner.policy.always_outlives_run() {
            state.always.clear();
        }
        self.event(&mut state, Event::RunContinued);
        self.drive(state, Some(kept)).await
    }

    /// The loop ([`Self::steps`]), and what an error leaves: never a run stuck in
    /// `running`. With nothing run since a resume, the run waits again in the
    /// suspension it was resumed from (`claimed`, as it was kept); otherwise it is kept
    /// `failed` with what ran and the error, for [`Self::retry`]. A run never saved
    /// leaves nothing behind.
    pub(super) async fn drive(
        &self,
        mut state: RunState,
        claimed: Option<RunState>,
    ) -> Result<Outcome> {
        let (ran, sent) = (state.ran, state.sent.len());
        let before = state.usage;
        let (id, lease) = (state.id.clone(), state.lease.clone());
        // The lease is renewed while the loop works; when another process holds the
        // run now, the loop stops where it is (its calls are abandoned) and keeps
        // nothing: the holder goes on.
        // The run's span: the model calls and tool calls below are its children
        // (OpenTelemetry GenAI names; no prompt, argument or result unless
        // `trace_content`).
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = "invoke_agent",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.provider.name = self.inner.model.provider(),
            gen_ai.conversation.id = %id,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let outcome = tokio::select! {
            biased;
            outcome = tracing::Instrument::instrument(self.steps(&mut state), span.clone()) => outcome,
            lost = self.inner.books.hold(&id, lease) => Err(lost),
        };
        // What this drive's model calls took (a resume or follow-up is a span of its
        // own: earlier calls are counted in theirs).
        span.record(
            "gen_ai.usage.input_tokens",
            state.usage.input_tokens.saturating_sub(before.input_tokens),
        );
        span.record(
            "gen_ai.usage.output_tokens",
            state
                .usage
                .output_tokens
                .saturating_sub(before.output_tokens),
        );
        if let Err(e) = &outcome {
            span.record("error.type", error_type(e));
        }
        match outcome {
            Ok(outcome) => Ok(outcome),
            Err(e) if e.is_lease_lost() => Err(e),
            Err(e) => {
                // Put back only when nothing ran and nothing was sent.
                let claimed = claimed.filter(|_| state.ran == ran && state.sent.len() == sent);
                self.fail(state, claimed, e).await
            }
        }
    }

    /// Records the error `e` that stopped the run, then returns it (see [`Self::drive`]).
    pub(super) async fn fail(
        &self,
        mut state: RunState,
        claimed: Option<RunState>,
        e: Error,
    ) -> Result<Outcome> {
        let error = crate::error::clip(&e.to_string(), 1000);
        if let Some(mut kept) = claimed {
            // Nothing ran: the same suspension, the same decision to make — or, for a
            // follow-up, the run finished as it was. Its save counter goes on from
            // the latest save (it is never behind the ledger).
            kept.seq = kept.seq.max(state.seq);
            let status = if kept.suspension.is_some() {
                RunStatus::Suspended
            } else {
                RunStatus::Finished
            };
            self.event(
                &mut kept,
                Event::RunFailed {
                    error,
                    resumable: true,
                },
            );
            if let Err(store) = self.save(&mut kept, status).await {
                tracing::error!(run = %state.id, error = %store, "the run could not be put back as it was");
            }
            return Err(e);
        }
        if !state.persisted {
            return Err(e);
        }
        state.suspension = None;
        state.failure = Some(error.clone());
        // A transient error: a worker retries the run later (see `backoff`).
        // (Not a sub-agent's run: its parent's call took the error.)
        state.retry_at = retry_at(&e, state.retries).filter(|_| state.parent.is_none());
        self.event(
            &mut state,
            Event::RunFailed {
                error,
                resumable: false,
            },
        );
        if let Err(store) = self.save(&mut state, RunStatus::Failed).await {
            tracing::error!(run = %state.id, error = %store, "the failed run could not be kept");
        }
        Err(e)
    }

    /// The loop: the calls of the current turn — through the gate, suspended together
    /// while a person must decide on any of them, then run together — and then the
    /// model again.
    pub(super) async fn steps(&self, state: &mut RunState) -> Result<Outcome> {
        let mut announced = Vec::new();
        let (mut tools, mut down) = self.tools(state, &mut announced).await?;
        // A person's approval of a call on a server that is down now waits for it:
        // the error puts the run back in its suspension when nothing ran yet.
        for call in &state.pending {
            let CallState::Approved { person: Some(p) } = &call.at else {
                continue;
            };
            let Some(b) = &p.binding else { continue };
            if let Some(i) = down.iter().position(|(s, _)| *s == b.server) {
                let (_, e) = down.swap_remove(i);
                return Err(e.into());
            }
        }
        let mut skills = self.skills().await;
        // Read again when a call first needs them (see `always_allowed`).
        state.standing = Default::default();
        loop {
            // Calls handed to sub-agents whose decisions were all given go on there.
            self.follow_children(state).await?;
            self.settle_unknown(state, &tools).await;
            // Answered input goes only to the tool that asked, while the gate allows.
            self.check_answered(state, &tools).await;
            // Approvals whose binding no longer holds go back through the gate.
            self.void_changed(state, &tools);
            self.gate_turn(state, &tools, &mut skills).await?;
            if state.pending.iter().any(|c| c.at.awaits_person()) {
                return self.suspend(state).await;
            }
            // The application's `before_call` hook: a rewritten call goes through the
            // schema and the gate again.
            if self.hook_calls(state, &tools) {
                continue;
            }
            if state.pending.iter().any(|c| {
                matches!(
                    c.at,
                    CallState::Approved { .. } | CallState::Answered { .. }
                )
            }) {
                if let Some(spent) = self.budget_before_tool_calls(state) {
                    return self.budget_exceeded(state, spent).await;
                }
                self.run_turn(state, &tools).await?;
                continue;
            }
            if let Some(stuck) = state.pending.first() {
                return Err(Error::store(format!(
                    "run {}: call `{}` stands where the loop cannot move it on ({:?})",
                    state.id, stuck.name, stuck.at
                )));
            }
            close_results(state);
            if state.steps >= self.inner.policy.max_steps(state) {
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Outcome::StepLimit {
                    run_id: state.id.clone(),
                    usage: state.usage,
                });
            }
            // The tools follow the servers: listed again before every model turn
            // after the first (a server's `list_changed` empties its cache; a server
            // back up rejoins).
            if state.steps > 0 || state.ran > 0 {
                let (now, _) = self.tools(state, &mut announced).await?;
                self.tools_changed(state, &tools, &now);
                tools = now;
            }
            if let Some(spent) = self.budget_before_model_call(state) {
                return self.budget_exceeded(state, spent).await;
            }
            state.steps += 1;
            self.compact(state).await?;
            let mut offered = self.offered(&tools, state);
            offered.extend(self.skill_tools(&skills, &tools, state));
            let mut messages = state.messages.clone();
            self.inner.callbacks.context(&mut messages);
            let request = ChatRequest {
                messages,
                tools: offered,
                output: state.options.output.as_ref().map(|o| o.format()),
            };
            let Some(mut answer) = self.ask_model(state, &request).await? else {
                // The deadline came while a retry waited.
                let spent = self.deadline_reached(state);
                return self.budget_exceeded(state, spent).await;
            };
            // Empty text blocks are not kept: a wire refuses them in a later request.
            answer
                .message
                .content
                .retain(|b| !matches!(b, Block::Text { text } if text.is_empty()));
            state.ran += 1;
            state.model_calls = state.model_calls.saturating_add(1);
            if let Some(u) = &answer.usage {
                state.usage.add(u);
            }
            let stop = match &answer.stop {
                Stop::Length => Some("length".to_owned()),
                Stop::Other(why) => Some(crate::error::clip(why, 100)),
                _ => None,
            };
            if answer.stop == Stop::Length {
                // Cut at the output limit: not an answer, and no half-written call runs.
                answer
                    .message
                    .content
                    .retain(|b| !matches!(b, Block::ToolCall { .. }));
                let text = answer.message.joined_text();
                // An empty turn is not kept: a wire refuses it before a later one.
                if !answer.message.content.is_empty() {
                    state.messages.push(answer.message);
                }
                let step = state.steps;
                let usage = answer.usage;
                self.event(
                    state,
                    Event::ModelAnswered {
                        step,
                        tool_calls: 0,
                        usage,
                        stop,
                    },
                );
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Outcome::Truncated {
                    run_id: state.id.clone(),
                    text,
                    usage: state.usage,
                });
            }
            unique_call_ids(&mut answer.message)?;
            let mut calls = answer.message.tool_calls();
            let text = answer.message.joined_text();
            // A turn asks for at most `calls_per_turn` calls; the model reads why the
            // rest did not run.
            let past = calls.split_off(calls.len().min(self.inner.policy.calls_per_turn()));
            // An empty answer is not kept: a wire refuses an empty turn before a later
            // one (a follow-up).
            if !answer.message.content.is_empty() {
                state.messages.push(answer.message);
            }
            // Kept with the next save — the run finishing, the save that records its
            // calls as sent, or a suspension; a crash before that asks the model
            // again, and nothing of the answer has run.
            let tool_calls = calls.len().min(u32::MAX as usize) as u32;
            let step = state.steps;
            let usage = answer.usage;
            self.event(
                state,
                Event::ModelAnswered {
                    step,
                    tool_calls,
                    usage,
                    stop,
                },
            );
            for (id, name, _) in past {
                let reason = format!(
                    "`{name}` was not run: a turn may ask for at most {} tool calls",
                    self.inner.policy.calls_per_turn()
                );
                self.not_run(state, id, name, reason);
            }
            // Arguments that are not a JSON object (text that was not JSON) go
            // nowhere — not through the gate, not to a server: the model reads why.
            let mut sendable = Vec::with_capacity(calls.len());
            for (id, name, arguments) in calls {
                match unsendable(&name, &arguments) {
                    Some(reason) => self.not_run(state, id, name, reason),
                    None => sendable.push((id, name, arguments)),
                }
            }
            let calls = sendable;
            if calls.is_empty() && state.results.is_empty() {
                match self.final_answer(state, text).await? {
                    None => continue,
                    Some(outcome) => return Ok(outcome),
                }
            }
            state.pending = calls
                .into_iter()
                .map(|(id, name, arguments)| {
                    Ok(PendingCall {
                        id,
                        name,
                        arguments,
                        at: CallState::New,
                        key: random_id()?,
                        round: 0,
                        hooked: false,
                    })
                })
                .collect::<Result<_>>()?;
        }
    }

    /// Runs every call of the turn that may run, together; keeps their results. A
    /// call that paused for input no callback gave waits for a person.
    async fn run_turn(
        &self,
        state: &mut RunState,
        tools: &HashMap<String, AgentTool>,
    ) -> Result<()> {
        let mut batch = Vec::new();
        let mut i = 0;
        while i < state.pending.len() {
            let call = &state.pending[i];
            if !matches!(
                call.at,
                CallState::Approved { .. } | CallState::Answered { .. }
            ) {
                i += 1;
                continue;
            }
            if tools.contains_key(&call.name) {
                batch.push(i);
                i += 1;
                continue;
            }
            let call = state.pending.remove(i);
            let why = format!(
                "`{}` is no longer offered by any attached server; it was not run",
                call.name
            );
            state.results.push(error_result(call.id, why));
        }
        // No more calls are sent than the run's budget has left (the others wait; the
        // loop's check ends the run on them).
        batch.truncate(self.tool_calls_left(state));
        // The ids of the decisions calls that pause will wait for: drawn before any
        // call is sent, so a failed draw never loses a result.
        let mut decisions = batch
            .iter()
            .map(|_| random_id())
            .collect::<Result<Vec<_>>>()?;
        // Whether a person had approved each call (kept with a call that pauses for
        // input: its answers meet the need for approval again).
        let approved: Vec<bool> = batch
            .iter()
            .map(|&i| match &state.pending[i].at {
                CallState::Approved { person } => person.is_some(),
                CallState::Answered { asker, .. } => asker.as_ref().is_some_and(|a| a.approved),
                _ => false,
            })
            .collect();
        let ends = self.run_tools(state, &batch, tools).await?;
        // From the last: removing a call leaves the indices before it as they are.
        for ((&i, end), approved) in batch.iter().zip(ends).zip(approved).rev() {
            match end {
                Ok(block) => {
                    state.pending.remove(i);
                    state.results.push(block);
                }
                Err(Halt::Delegated(run, waits)) => {
                    state.pending[i].at = CallState::Delegated {
                        run,
                        decisions: waits,
                    };
                }
                Err(Halt::Input(paused)) => {
                    let (input, answers) = *paused;
                    let decision = decisions.pop().unwrap_or_default();
                    self.input_requested(state, i, &input, &answers, tools);
                    // Bound to what it was sent to: the answers go back only there.
                    let asker = match &state.pending[i].at {
                        CallState::Executing {
                            binding: Some(binding),
                            ..
                        } => Some(Box::new(Asker {
                            binding: binding.clone(),
                            approved,
                        })),
                        // Answered elsewhere, lacking an answer here: not sent.
                        CallState::Answered { asker, .. } => asker.clone(),
                        _ => None,
                    };
                    state.pending[i].at = CallState::AwaitingInput {
                        decision,
                        input,
                        answers,
                        asker,
                    };
                }
            }
        }
        // Their results are kept: none of them is sent again. A power cut may lose
        // this save (not a crash of this process): the run then finds these calls in
        // doubt — the flushed save before they were sent says so — never unsent.
        self.save_as(state, RunStatus::Running, Durability::Deferred)
            .await
    }

    /// A call of the model's answer that is not run (it never joins the turn): the
    /// model reads why, and [`Event::Denied`] says so.
    fn not_run(&self, state: &mut RunState, id: String, name: String, reason: String) {
        self.event(
            state,
            Event::Denied {
                tool: name,
                reason: reason.clone(),
            },
        );
        state.results.push(error_result(id, reason));
    }

    /// [`Event::InputRequested`] for call `i`, which paused for `input`.
    fn input_requested(
        &self,
        state: &mut RunState,
        i: usize,
        input: &PendingInput,
        answers: &Answers,
        tools: &HashMap<String, AgentTool>,
    ) {
        let call = &state.pending[i];
        let server = tools
            .get(&call.name)
            .map(|t| t.facts.server.clone())
            .unwrap_or_else(|| input.server().to_owned());
        // Parsed when the call paused; a request that does not parse never pauses.
        let messages = input
            .requests()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| !answers.has(k))
            // Server text: kept short in the run, like progress messages.
            .map(|(_, r)| crate::error::clip(&r.message, 1000))
            .collect();
        let event = Event::InputRequested {
            server,
            tool: call.name.clone(),
            messages,
            task: input.task_id().map(str::to_owned),
        };
        self.event(state, event);
    }

    /// Suspends the run on every call of the turn that waits for a person: a new
    /// suspension, with an id of its own, kept in the store.
    pub(super) async fn suspend(&self, state: &mut RunState) -> Result<Outcome> {
        let s = Suspension {
            id: random_id()?,
            // A sub-agent's run waits as long as its parent does: the parent's
            // expiry ends (and cancels) it.
            expires_at: if state.parent.is_some() {
                None
            } else {
                self.inner.books.suspension_expires_at()
            },
        };
        state.suspension = Some(s.clone());
        let decisions = state
            .pending
            .iter()
            .flat_map(|c| match &c.at {
                CallState::Delegated { decisions, .. } => decisions.clone(),
                other => other.decision().map(str::to_owned).into_iter().collect(),
            })
            .collect();
        self.event(
            state,
            Event::RunSuspended {
                suspension: s.id,
                decisions,
                expires_at: s.expires_at,
            },
        );
        self.save(state, RunStatus::Suspended).await?;
        // Kept: what the sub-agents' runs wait on is read for the outcome (an error
        // reading it leaves the run waiting, its pending readable later).
        let delegated = self.delegated_listing(state).await;
        suspended_outcome(state, delegated)
    }
}

/// What a suspended run waits on, as its [`Outcome`]: every call, the first named in
/// the outcome's own fields.
pub(super) fn suspended_outcome(state: &RunState, delegated: Vec<Pending>) -> Result<Outcome> {
    let Some(s) = &state.suspension else {
        return Err(Error::store(format!(
            "run {} waits in no suspension",
            state.id
        )));
    };
    let mut calls = Vec::new();
    for call in &state.pending {
        calls.extend(call.pending(&state.id, s, &state.options)?);
    }
    calls.extend(delegated);
    let Some(first) = calls.first().cloned() else {
        return Err(Error::store(format!("run {} waits for nothing", state.id)));
    };
    Ok(match first.waits {
        PendingWait::Approval { .. } => Outcome::ApprovalRequired {
            run_id: first.run_id,
            suspension: first.suspension,
            decision: first.decision,
            server: first.server,
            tool: first.tool,
            arguments: first.arguments,
            calls,
            expires_at: s.expires_at,
            usage: state.usage,
        },
        PendingWait::Input { requests } => Outcome::InputRequired {
            run_id: first.run_id,
            suspension: first.suspension,
            decision: first.decision,
            server: first.server,
            tool: first.tool,
            arguments: first.arguments,
            requests,
            calls,
            expires_at: s.expires_at,
            usage: state.usage,
        },
    })
}

/// An error result for the call `id`.
/// Why a call with these arguments cannot be sent, when it cannot: they are not a JSON
/// object (nor absent). A wire keeps arguments that were not JSON as their text.
pub(super) fn unsendable(name: &str, arguments: &Value) -> Option<String> {
    let why = match arguments {
        Value::Object(_) | Value::Null => return None,
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Err(e) => format!("the arguments were not valid JSON: {e}"),
            Ok(_) => "the arguments were a JSON string, not an object".to_owned(),
        },
        _ => "the arguments were not a JSON object".to_owned(),
    };
    Some(format!("`{name}` was not run: {why}"))
}

pub(super) fn error_result(id: String, error: String) -> Block {
    Block::ToolResult {
        id,
        content: json!({ "error": error }).to_string(),
        is_error: true,
        parts: Vec::new(),
    }
}

/// The turn's results join the transcript, in the order the model asked for the
/// calls.
pub(super) fn close_results(state: &mut RunState) {
    if state.results.is_empty() {
        return;
    }
    let mut results = std::mem::take(&mut state.results);
    let order: Vec<&str> = state
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolCall { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let place = |b: &Block| match b {
        Block::ToolResult { id, .. } => order.iter().position(|o| *o == id).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    results.sort_by_key(place);
    state.messages.push(Message {
        role: Role::Tool,
        content: results,
    });
}

/// Gives every tool call of a model's answer an id of its own: a call with no id, or
/// with an id another call of the answer has, gets a fresh one (results, decisions and
/// what the vault holds are matched to calls by id).
fn unique_call_ids(message: &mut Message) -> Result<()> {
    let mut seen: Vec<String> = Vec::new();
    for b in &mut message.content {
        if let Block::ToolCall { id, .. } = b {
            if id.is_empty() || seen.contains(id) {
                *id = format!("call_{}", random_id()?);
            }
            seen.push(id.clone());
        }
    }
    Ok(())
}

/// An error's kind, for a span's `error.type`.
fn error_type(e: &Error) -> &'static str {
    match e.model_error() {
        Some(m) => model_error_type(m),
        None if e.is_mcp() => "mcp",
        None if e.is_config() => "config",
        None if e.is_lease_lost() => "lease_lost",
        None => "store",
    }
}

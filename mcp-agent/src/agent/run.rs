//! The loop: a run's turns, its suspensions, and what an error leaves.

use super::*;

impl Agent {
    /// Runs `prompt` until the model answers, a call needs a person, or the step limit.
    pub async fn run(&self, prompt: &str) -> Result<Outcome> {
        let mut messages = Vec::new();
        if let Some(s) = &self.inner.system {
            messages.push(Message::text(Role::System, s.clone()));
        }
        messages.push(Message::text(Role::User, prompt));
        let mut state = RunState {
            id: random_id()?,
            messages,
            pending: Vec::new(),
            results: Vec::new(),
            events: Vec::new(),
            steps: 0,
            loaded: Vec::new(),
            held: Vec::new(),
            skill_approvals: Vec::new(),
            granted: Vec::new(),
            suspension: None,
            ran: 0,
            failure: None,
            persisted: false,
            policy: Some(self.own_policy()),
            gate: None,
            lease: Some(self.new_lease()?),
        };
        self.event(&mut state, Event::RunStarted);
        self.drive(state, None).await
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
        let ran = state.ran;
        let (id, lease) = (state.id.clone(), state.lease.clone());
        // The lease is renewed while the loop works; when another process holds the
        // run now, the loop stops where it is (its calls are abandoned) and keeps
        // nothing: the holder goes on.
        let outcome = tokio::select! {
            biased;
            outcome = self.steps(&mut state) => outcome,
            lost = self.hold(&id, lease) => Err(lost),
        };
        match outcome {
            Ok(outcome) => Ok(outcome),
            Err(e) if e.is_lease_lost() => Err(e),
            Err(e) => {
                let claimed = claimed.filter(|_| state.ran == ran);
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
        let error: String = e.to_string().chars().take(1000).collect();
        if let Some(mut kept) = claimed {
            // Nothing ran: the same suspension, the same decision to make.
            self.event(
                &mut kept,
                Event::RunFailed {
                    error,
                    resumable: true,
                },
            );
            if let Err(store) = self.save(&mut kept, RunStatus::Suspended).await {
                tracing::error!(run = %state.id, error = %store, "the run could not be put back in its suspension");
            }
            return Err(e);
        }
        if !state.persisted {
            return Err(e);
        }
        state.suspension = None;
        state.failure = Some(error.clone());
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

    /// The loop: run the pending calls of the current turn, then ask the model again.
    pub(super) async fn steps(&self, state: &mut RunState) -> Result<Outcome> {
        let tools = self.tools().await?;
        let mut skills = self.skills().await;
        loop {
            // A verdict already decided for the first pending call (while batching).
            let mut known: Option<Verdict> = None;
            while let Some(call) = state.pending.first().cloned() {
                // Sent by a process that stopped before its result was kept.
                if let Some(server) = &call.executing {
                    let tool = tools.get(&call.name);
                    let resend =
                        tool.is_some_and(|t| t.facts.server == *server && repeat_is_harmless(t));
                    self.event(
                        state,
                        Event::OutcomeUnknown {
                            server: server.clone(),
                            tool: call.name.clone(),
                            resent: resend,
                        },
                    );
                    if resend {
                        if let Some(c) = state.pending.first_mut() {
                            c.executing = None;
                        }
                        known = None;
                        continue;
                    }
                    state.results.push(Block::ToolResult {
                        id: call.id.clone(),
                        content: json!({
                            "error": format!("outcome unknown: `{}` was sent to server `{server}`, but the agent stopped before its result was kept; it may or may not have taken effect, and it was not sent again", call.name)
                        })
                        .to_string(),
                        is_error: true,
                    });
                    state.pending.remove(0);
                    continue;
                }
                // The emulated tool search runs here: it loads tools, it calls no server.
                if call.name == TOOL_SEARCH && !tools.contains_key(TOOL_SEARCH) {
                    let block = self.search_tools(state, &tools, &call);
                    state.results.push(block);
                    state.pending.remove(0);
                    continue;
                }
                if self.is_skill_call(&call.name, &tools) {
                    match self.skill_call(state, &mut skills, &tools).await? {
                        SkillStep::Done(block) => {
                            state.results.push(block);
                            state.pending.remove(0);
                            continue;
                        }
                        SkillStep::Suspend(outcome) => return Ok(outcome),
                    }
                }
                if call.waits_for_input() {
                    return self.suspend_for_input(state, call, &tools).await;
                }
                let tool = tools.get(&call.name);
                // An approval holds only for what the person saw: never a silent
                // retarget to another server, configuration, definition or arguments.
                if call.approved == Some(true) {
                    if let Some(why) = call.binding.as_ref().and_then(|b| {
                        let now = tool.map(|t| (&self.inner.servers[t.server], t));
                        b.changed(now, &call.arguments)
                    }) {
                        self.event(
                            state,
                            Event::DecisionVoided {
                                tool: call.name.clone(),
                                reason: why,
                            },
                        );
                        if let Some(c) = state.pending.first_mut() {
                            c.approved = None;
                            c.binding = None;
                            c.grant_tools = false;
                        }
                        known = None;
                        continue;
                    }
                }
                let verdict = match known.take() {
                    Some(v) => v,
                    None => {
                        let gate = self.gate(state);
                        self.verdict(&gate, &call, tool, &state.granted).await
                    }
                };
                let block = match verdict {
                    Verdict::Suspend => {
                        let Some(tool) = tool else {
                            return Err(Error::config("a suspended call names no tool"));
                        };
                        let server = tool.facts.server.clone();
                        let binding =
                            Binding::new(&self.inner.servers[tool.server], tool, &call.arguments);
                        if let Some(c) = state.pending.first_mut() {
                            c.binding = Some(binding.clone());
                            c.shown = Some((
                                tool.spec.description.clone(),
                                tool.spec.input_schema.clone(),
                            ));
                        }
                        self.event(
                            state,
                            Event::ApprovalRequested {
                                server: server.clone(),
                                tool: call.name.clone(),
                                arguments: call.arguments.clone(),
                                binding: Some(binding),
                            },
                        );
                        let s = self.suspend(state, Waits::Approval).await?;
                        return Ok(Outcome::ApprovalRequired {
                            run_id: state.id.clone(),
                            suspension: s.id,
                            decision: s.decision,
                            server,
                            tool: call.name,
                            arguments: call.arguments,
                        });
                    }
                    Verdict::Deny(reason) => {
                        self.event(
                            state,
                            Event::Denied {
                                tool: call.name.clone(),
                                reason: reason.clone(),
                            },
                        );
                        Block::ToolResult {
                            id: call.id.clone(),
                            content: json!({ "error": reason }).to_string(),
                            is_error: true,
                        }
                    }
                    Verdict::Allow => {
                        let Some(tool) = tool else {
                            return Err(Error::config("an allowed call names no tool"));
                        };
                        // The model may ask for several calls in one turn: the allowed
                        // ones that follow run together with this one, concurrently.
                        let mut batch = vec![(call, tool)];
                        while let Some(next) = state.pending.get(batch.len()) {
                            if (next.name == TOOL_SEARCH && !tools.contains_key(TOOL_SEARCH))
                                || next.waits_for_input()
                                || self.is_skill_call(&next.name, &tools)
                            {
                                break;
                            }
                            let t = tools.get(&next.name);
                            let gate = self.gate(state);
                            match (self.verdict(&gate, next, t, &state.granted).await, t) {
                                (Verdict::Allow, Some(t)) => batch.push((next.clone(), t)),
                                (v, _) => {
                                    known = Some(v);
                                    break;
                                }
                            }
                        }
                        let n = batch.len();
                        let ends = self.run_tools(state, batch).await?;
                        // A call that paused for input stays pending, ahead of the rest.
                        let mut paused = Vec::new();
                        for (i, end) in ends.into_iter().enumerate() {
                            match end {
                                Ok(block) => state.results.push(block),
                                Err((input, answers)) => {
                                    let mut c = state.pending[i].clone();
                                    c.approved = Some(true);
                                    c.input = Some(input);
                                    c.answers = answers;
                                    c.answered = false;
                                    c.executing = None;
                                    paused.push(c);
                                }
                            }
                        }
                        state.pending.splice(..n, paused);
                        // Their results are kept: none of them is sent again.
                        self.save(state, RunStatus::Running).await?;
                        continue;
                    }
                };
                state.results.push(block);
                state.pending.remove(0);
            }
            if !state.results.is_empty() {
                let results = std::mem::take(&mut state.results);
                state.messages.push(Message {
                    role: Role::Tool,
                    content: results,
                });
            }
            if state.steps >= self.max_steps(state) {
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Outcome::StepLimit {
                    run_id: state.id.clone(),
                });
            }
            state.steps += 1;
            let mut offered = self.offered(&tools, state);
            offered.extend(self.skill_tools(&skills, &tools, state));
            let request = ChatRequest {
                messages: state.messages.clone(),
                tools: offered,
            };
            let answer = self.inner.model.complete(&request).await?;
            state.ran += 1;
            let calls = answer.message.tool_calls();
            let text = answer.message.joined_text();
            state.messages.push(answer.message);
            if calls.is_empty() {
                self.event(
                    state,
                    Event::ModelAnswered {
                        step: state.steps,
                        tool_calls: 0,
                    },
                );
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Outcome::Finished {
                    run_id: state.id.clone(),
                    text,
                });
            }
            state.pending = calls
                .into_iter()
                .map(|(id, name, arguments)| PendingCall {
                    id,
                    name,
                    arguments,
                    approved: None,
                    input: None,
                    answers: Vec::new(),
                    answered: false,
                    bound: None,
                    grant_tools: false,
                    denial: None,
                    binding: None,
                    shown: None,
                    executing: None,
                })
                .collect();
            // The answer is kept before any of its calls runs.
            self.save(state, RunStatus::Running).await?;
            let tool_calls = state.pending.len().min(u32::MAX as usize) as u32;
            self.event(
                state,
                Event::ModelAnswered {
                    step: state.steps,
                    tool_calls,
                },
            );
        }
    }

    /// Suspends the run: a new suspension, with an id of its own and the id of the
    /// decision it waits for, kept in the store.
    pub(super) async fn suspend(&self, state: &mut RunState, waits: Waits) -> Result<Suspension> {
        let s = Suspension {
            id: random_id()?,
            decision: random_id()?,
            waits,
            expires_at: self
                .inner
                .expiry
                .map(|d| now_ms().saturating_add(d.as_millis().min(u64::MAX as u128) as u64)),
        };
        state.suspension = Some(s.clone());
        self.event(
            state,
            Event::RunSuspended {
                suspension: s.id.clone(),
                decision: s.decision.clone(),
            },
        );
        self.save(state, RunStatus::Suspended).await?;
        Ok(s)
    }

    /// Suspends the run on a call that waits for input.
    pub(super) async fn suspend_for_input(
        &self,
        state: &mut RunState,
        call: PendingCall,
        tools: &HashMap<String, AgentTool>,
    ) -> Result<Outcome> {
        let Some(input) = call.input else {
            return Err(Error::store("a call waits for input it does not have"));
        };
        // Parsed when the call paused; a request that does not parse never pauses.
        let requests = input
            .requests()
            .map_err(|e| Error::store(format!("run {}: {e}", state.id)))?;
        let server = tools
            .get(&call.name)
            .map(|t| t.facts.server.clone())
            .unwrap_or_else(|| input.server().to_owned());
        let given: Vec<&String> = call.answers.iter().map(|(k, _)| k).collect();
        let requests: Vec<(String, InputRequest)> = requests
            .into_iter()
            .filter(|(k, _)| !given.contains(&k))
            .collect();
        self.event(
            state,
            Event::InputRequested {
                server: server.clone(),
                tool: call.name.clone(),
                // Server text: kept short in the run, like progress messages.
                messages: requests
                    .iter()
                    .map(|(_, r)| r.message.chars().take(1000).collect())
                    .collect(),
                task: input.task_id().map(str::to_owned),
            },
        );
        let s = self.suspend(state, Waits::Input).await?;
        Ok(Outcome::InputRequired {
            run_id: state.id.clone(),
            suspension: s.id,
            decision: s.decision,
            server,
            tool: call.name,
            arguments: call.arguments,
            requests,
        })
    }
}

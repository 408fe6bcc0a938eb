//! Running allowed calls on their servers: concurrently, with progress, and with input callbacks.

use super::*;

impl Agent {
    /// Runs the calls at `indices` of the turn (each offered by a server of `tools`):
    /// one is awaited here, several run concurrently. Events and results keep the
    /// model's order. A call that paused for input gives its input (and the answers
    /// callbacks gave) instead of a result.
    pub(super) async fn run_tools(
        &self,
        state: &mut RunState,
        indices: &[usize],
        tools: &HashMap<String, AgentTool>,
    ) -> Result<Vec<std::result::Result<Block, Paused>>> {
        let mut batch: Vec<(PendingCall, &AgentTool)> = Vec::with_capacity(indices.len());
        for &i in indices {
            let call = &mut state.pending[i];
            let Some(tool) = tools.get(&call.name) else {
                return Err(Error::config("a call to run names no tool"));
            };
            // At most once: the call is recorded as sent before it is, so a run
            // recovered after a crash knows its outcome is unknown.
            let sent = CallState::Executing {
                server: tool.facts.server.clone(),
            };
            let ready = std::mem::replace(&mut call.at, sent);
            let mut call = call.clone();
            call.at = ready;
            batch.push((call, tool));
        }
        self.save(state, RunStatus::Running).await?;
        for (call, tool) in &batch {
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
        if let [(call, tool)] = batch.as_slice() {
            ends[0] = Some(self.call_server(&state.id, tool, call).await);
        } else {
            // Dropping the run (a cancelled future) aborts the calls with the set. At
            // most `calls_in_flight` are on servers at once; the others wait in order.
            let places = Arc::new(tokio::sync::Semaphore::new(self.inner.calls_in_flight));
            let mut set = tokio::task::JoinSet::new();
            for (i, (call, tool)) in batch.iter().enumerate() {
                let agent = self.clone();
                let (run, tool, call) = (state.id.clone(), (*tool).clone(), call.clone());
                let places = places.clone();
                set.spawn(async move {
                    // The semaphore is never closed: a place always comes.
                    let _place = places.acquire_owned().await.ok();
                    (i, agent.call_server(&run, &tool, &call).await)
                });
            }
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((i, end)) => ends[i] = Some(end),
                    Err(e) => tracing::warn!(error = %e, "a tool call task failed"),
                }
            }
        }
        let mut out = Vec::with_capacity(batch.len());
        for ((call, tool), end) in batch.iter().zip(ends) {
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
            match end {
                CallEnd::Done(content, parts, is_error) => {
                    self.event(
                        state,
                        Event::AfterToolResult {
                            server: tool.facts.server.clone(),
                            tool: call.name.clone(),
                            is_error,
                        },
                    );
                    out.push(Ok(Block::ToolResult {
                        id: call.id.clone(),
                        content,
                        is_error,
                        parts,
                    }));
                }
                CallEnd::Paused(paused) => out.push(Err(paused)),
            }
        }
        Ok(out)
    }

    /// Asks the `on_input` callbacks; the first answer wins.
    pub(super) async fn ask_callbacks(&self, ask: InputAsk) -> Option<InputResponse> {
        for f in &self.inner.on_input {
            if let Some(answer) = f(ask.clone()).await {
                return Some(answer);
            }
        }
        None
    }

    /// One MCP call: its text for the model and whether it failed — or, when the server
    /// asks for input no callback gives, the input — with the events it produced on the
    /// way (progress, answers), delivered to the callbacks as they happen.
    pub(super) async fn call_server(
        &self,
        run_id: &str,
        tool: &AgentTool,
        call: &PendingCall,
    ) -> (CallEnd, Vec<Event>) {
        let seen: Arc<std::sync::Mutex<Vec<Event>>> = Arc::default();
        let (sink, inner, run) = (seen.clone(), self.inner.clone(), run_id.to_owned());
        let (server_name, tool_name) = (tool.facts.server.clone(), call.name.clone());
        let base = RequestOptions::default()
            .pause_on_input()
            .with_progress(move |p| {
                let event = Event::ToolProgress {
                    server: server_name.clone(),
                    tool: tool_name.clone(),
                    progress: p.progress,
                    total: p.total,
                    message: p.message.as_ref().map(|m| crate::error::clip(m, 1000)),
                };
                for f in &inner.on_event {
                    f(&run, &event);
                }
                let mut kept = lock(&sink);
                if kept.len() >= MAX_PROGRESS_KEPT {
                    kept.pop();
                }
                kept.push(event);
            });
        let mut notes = Vec::new();
        let answered = |by: &str, actions: Vec<String>| Event::InputAnswered {
            tool: call.name.clone(),
            actions,
            by: by.to_owned(),
            at: now(),
        };
        // Answers given while the call waited (a person's on resume; callbacks'): they
        // go with the first attempt, completed from this process's vault.
        let mut kept = match &call.at {
            CallState::Answered { input, answers } => Some((input.clone(), answers.clone())),
            _ => None,
        };
        // Answers callbacks gave just now, for the next attempt.
        let mut fresh: Option<(PendingInput, Vec<(String, InputResponse)>)> = None;
        let mut end = CallEnd::Done(
            json!({ "error": format!("`{}` kept asking for input ({MAX_INPUT_ROUNDS} rounds)", call.name) })
                .to_string(),
            Vec::new(),
            true,
        );
        for _ in 0..MAX_INPUT_ROUNDS {
            let mut options = base.clone();
            if let Some((input, answers)) = kept.take() {
                let (ready, still, asked) = self
                    .complete_answers((run_id, call), &input, &answers)
                    .await;
                if !asked.is_empty() {
                    let event = answered("on_input", asked);
                    for f in &self.inner.on_event {
                        f(run_id, &event);
                    }
                    notes.push(event);
                }
                if ready.len() < input.keys().count() {
                    // Some answer was kept by another process: asked again.
                    end = CallEnd::Paused(Box::new((input, still)));
                    break;
                }
                self.inner.vault.forget_call(run_id, &call.id);
                options = options.with_input_answers(input, ready);
            } else if let Some((input, ready)) = fresh.take() {
                options = options.with_input_answers(input, ready);
            }
            let e = match self
                .inner
                .host
                .call(tool.server, &call.name, call.arguments.clone(), options)
                .await
            {
                Ok(r) => {
                    let (text, parts, is_error) =
                        crate::content::tool_result_for_model(r, self.inner.max_result_size);
                    end = CallEnd::Done(text, parts, is_error);
                    break;
                }
                Err(e) => e,
            };
            // A protocol failure is the model's to read too; the loop goes on.
            let Some(input) = e.pending_input() else {
                end = CallEnd::Done(
                    json!({ "error": e.to_string() }).to_string(),
                    Vec::new(),
                    true,
                );
                break;
            };
            let requests = match input.requests() {
                Ok(r) => r,
                Err(why) => {
                    end = CallEnd::Done(
                        json!({ "error": why.to_string() }).to_string(),
                        Vec::new(),
                        true,
                    );
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
                if let Some(answer) = self.ask_callbacks(ask).await {
                    given.push((key, answer));
                }
            }
            if !given.is_empty() {
                let event = answered(
                    "on_input",
                    given.iter().map(|(_, a)| a.action().to_owned()).collect(),
                );
                for f in &self.inner.on_event {
                    f(run_id, &event);
                }
                notes.push(event);
            }
            if given.len() == input.keys().count() {
                fresh = Some((input.clone(), given));
                continue;
            }
            // A person must answer the rest: the callbacks' answers wait in the vault,
            // never in the run.
            let mut answers = Answers::default();
            for (key, answer) in &given {
                self.keep_callback_answer((run_id, &call.id), key, answer, &mut answers);
            }
            end = CallEnd::Paused(Box::new((input.clone(), answers)));
            break;
        }
        let mut events = std::mem::take(&mut *lock(&seen));
        events.extend(notes);
        (end, events)
    }
}

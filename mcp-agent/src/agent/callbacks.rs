//! The application's callbacks: what it hears of every run (events), the input it
//! answers, and how it trims the model's context.

use std::sync::Arc;

use mcp_runtime::InputResponse;

use crate::model::Message;

use super::decision::{AuthorizeFn, DecisionAsk, InputAsk, InputFn};
use super::events::{Event, EventFn};
use super::state::RunState;

/// A hook that sees (and may trim) the messages before each model call.
pub(super) type ContextFn = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;

/// The callbacks an agent was built with.
#[derive(Default)]
pub(super) struct Callbacks {
    on_event: Vec<EventFn>,
    on_input: Vec<InputFn>,
    on_context: Option<ContextFn>,
    authorize: Option<AuthorizeFn>,
    /// The hooks on calls and answers.
    pub(super) hooks: super::hooks::Hooks,
}

impl Callbacks {
    /// The callbacks of a builder.
    pub(super) fn new(
        on_event: Vec<EventFn>,
        on_input: Vec<InputFn>,
        on_context: Option<ContextFn>,
        authorize: Option<AuthorizeFn>,
    ) -> Callbacks {
        Callbacks {
            on_event,
            on_input,
            on_context,
            authorize,
            hooks: Default::default(),
        }
    }

    /// Asks the `authorize` callback whether `ask.principal` may make this decision;
    /// without one, everyone may.
    pub(super) async fn authorized(&self, ask: DecisionAsk) -> bool {
        match &self.authorize {
            Some(f) => f(ask).await,
            None => true,
        }
    }

    /// Tells every `on_event` callback of `event` of run `run_id` (the run does not
    /// keep it: see [`Self::record`]).
    pub(super) fn emit(&self, run_id: &str, event: &Event) {
        for f in &self.on_event {
            f(run_id, event);
        }
    }

    /// Tells the callbacks of `event`, and keeps it in the run (its log gets it with
    /// the next save).
    pub(super) fn record(&self, state: &mut RunState, event: Event) {
        self.emit(&state.id, &event);
        state.events.push(event);
    }

    /// Asks the `on_input` callbacks; the first answer wins.
    pub(super) async fn ask(&self, ask: InputAsk) -> Option<InputResponse> {
        for f in &self.on_input {
            if let Some(answer) = f(ask.clone()).await {
                return Some(answer);
            }
        }
        None
    }

    /// The messages as the model is sent them: trimmed by `on_context`, when set.
    pub(super) fn context(&self, messages: &mut Vec<Message>) {
        if let Some(f) = &self.on_context {
            f(messages);
        }
    }
}

//! A run's [`Budget`](super::options::Budget), enforced: checked before every model
//! call (model calls, tokens, the deadline) and before every tool call is sent (tool
//! calls, and the tokens and deadline already past); reaching a limit ends the run,
//! finished, with [`Outcome::BudgetExceeded`].

use crate::error::Result;
use crate::store::RunStatus;

use super::clock::now_ms;
use super::decision::Outcome;
use super::events::Event;
use super::handle::Agent;
use super::options::BudgetLimit;
use super::run::{close_results, error_result};
use super::state::RunState;

/// A limit reached: which, what was used of it, and the limit.
pub(super) type Spent = (BudgetLimit, u64, u64);

/// What is about to happen, for the budget's check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    /// A model call: the limits must leave room for one more (a call at the token
    /// limit would pass it).
    ModelCall,
    /// Tool calls: the tool call limit must leave room; the tokens and the deadline
    /// must not be past.
    ToolCall,
}

impl Agent {
    /// The first limit of the run's budget that stops its next model call, if one
    /// does.
    pub(super) fn budget_before_model_call(&self, state: &RunState) -> Option<Spent> {
        self.budget_spent(state, Next::ModelCall)
    }

    /// The first limit of the run's budget that stops its next tool calls, if one
    /// does.
    pub(super) fn budget_before_tool_calls(&self, state: &RunState) -> Option<Spent> {
        self.budget_spent(state, Next::ToolCall)
    }

    /// The first limit of the run's budget that stops `next`, if one does.
    fn budget_spent(&self, state: &RunState, next: Next) -> Option<Spent> {
        let budget = &state.options.budget;
        let model = next == Next::ModelCall;
        let reached = |used: u64, max: u64, at_limit_stops: bool| {
            if at_limit_stops {
                used >= max
            } else {
                used > max
            }
        };
        let checks = [
            (
                BudgetLimit::ModelCalls,
                model.then_some(state.model_calls),
                budget.max_model_calls.map(u64::from),
                true,
            ),
            (
                BudgetLimit::InputTokens,
                Some(state.usage.input_tokens),
                budget.max_input_tokens,
                model,
            ),
            (
                BudgetLimit::OutputTokens,
                Some(state.usage.output_tokens),
                budget.max_output_tokens,
                model,
            ),
            (
                BudgetLimit::ToolCalls,
                (!model).then_some(state.tool_calls),
                budget.max_tool_calls.map(u64::from),
                true,
            ),
            (
                BudgetLimit::Deadline,
                Some(elapsed_ms(state)),
                budget.max_duration_ms,
                true,
            ),
        ];
        checks
            .into_iter()
            .find_map(|(limit, used, max, at_limit_stops)| {
                let (used, max) = (used?, max?);
                reached(used, max, at_limit_stops).then_some((limit, used, max))
            })
    }

    /// What is left of the run's budget (a sub-agent's run started by one of its
    /// calls gets it: the parent's budget covers the child).
    pub(super) fn budget_left(&self, state: &RunState) -> super::options::Budget {
        let b = &state.options.budget;
        let left32 = |max: Option<u32>, used: u64| {
            max.map(|m| u32::try_from(u64::from(m).saturating_sub(used)).unwrap_or(0))
        };
        let mut left = super::options::Budget::new();
        left.max_model_calls = left32(b.max_model_calls, state.model_calls);
        left.max_tool_calls = left32(b.max_tool_calls, state.tool_calls);
        left.max_input_tokens = b
            .max_input_tokens
            .map(|m| m.saturating_sub(state.usage.input_tokens));
        left.max_output_tokens = b
            .max_output_tokens
            .map(|m| m.saturating_sub(state.usage.output_tokens));
        left.max_duration_ms = b
            .max_duration_ms
            .map(|m| m.saturating_sub(elapsed_ms(state)));
        left
    }

    /// How many more tool calls the run's budget lets it send.
    pub(super) fn tool_calls_left(&self, state: &RunState) -> usize {
        match state.options.budget.max_tool_calls {
            Some(max) => usize::try_from(u64::from(max).saturating_sub(state.tool_calls))
                .unwrap_or(usize::MAX),
            None => usize::MAX,
        }
    }

    /// The deadline, reached: a retry's wait ran until it (what was used is at least
    /// the limit, whatever the clock says).
    pub(super) fn deadline_reached(&self, state: &RunState) -> Spent {
        let max = state.options.budget.max_duration_ms.unwrap_or(0);
        (BudgetLimit::Deadline, elapsed_ms(state).max(max), max)
    }

    /// How long until the run's deadline (milliseconds), when it has one.
    pub(super) fn until_deadline_ms(&self, state: &RunState) -> Option<u64> {
        let max = state.options.budget.max_duration_ms?;
        Some(max.saturating_sub(elapsed_ms(state)))
    }

    /// Ends the run on the limit `spent`: the calls of its turn not sent are not sent
    /// (the model reads why, should a follow-up go on), [`Event::BudgetExceeded`],
    /// and the run is kept finished.
    pub(super) async fn budget_exceeded(
        &self,
        state: &mut RunState,
        (limit, used, max): Spent,
    ) -> Result<Outcome> {
        for call in std::mem::take(&mut state.pending) {
            let why = format!(
                "`{}` was not run: the run's budget of {limit} ({max}) was reached",
                call.name
            );
            state.results.push(error_result(call.id, why));
        }
        close_results(state);
        self.event(state, Event::BudgetExceeded { limit, used, max });
        self.event(state, Event::RunFinished);
        self.save(state, RunStatus::Finished).await?;
        Ok(Outcome::BudgetExceeded {
            run_id: state.id.clone(),
            limit,
            used,
            max,
            usage: state.usage,
        })
    }
}

/// Milliseconds since the run started (0 for a run kept before its start was).
fn elapsed_ms(state: &RunState) -> u64 {
    if state.started_at == 0 {
        return 0;
    }
    now_ms().saturating_sub(state.started_at)
}

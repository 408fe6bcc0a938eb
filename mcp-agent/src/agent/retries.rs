//! A model call, tried again while it fails for a while: each attempt its own `chat`
//! span, each retry an [`Event::ModelRetried`], waiting what the agent's
//! [`RetryPolicy`](super::retry_policy::RetryPolicy) says — and never past the run's
//! deadline.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::{ChatRequest, ChatResponse, ModelError, Stop};

use super::events::Event;
use super::handle::Agent;
use super::retry_policy::Next;
use super::state::RunState;

impl Agent {
    /// Asks the model, trying again as the retry policy says. `None`: the run's
    /// deadline came while it waited to try again (the budget's check ends the run).
    pub(super) async fn ask_model(
        &self,
        state: &mut RunState,
        request: &ChatRequest,
    ) -> Result<Option<ChatResponse>> {
        let mut attempt = 1u32;
        loop {
            let e = match self.chat(request).await {
                Ok(answer) => return Ok(Some(answer)),
                Err(e) => e,
            };
            let delay = match self.inner.retry.next(attempt, &e) {
                Next::Retry(delay) => delay,
                Next::GiveUp => return Err(e.into()),
                Next::TooLong(wait) => {
                    return Err(Error::from(self.inner.retry.too_long(e, wait)));
                }
            };
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            let event = Event::ModelRetried {
                attempt,
                delay_ms,
                error: crate::error::clip(&e.to_string(), 1000),
            };
            self.event(state, event);
            tracing::info!(run = %state.id, attempt, delay_ms, error = %e, "the model call failed for a while; trying again");
            match self.until_deadline_ms(state) {
                Some(left) if left < delay_ms => {
                    tokio::time::sleep(Duration::from_millis(left)).await;
                    return Ok(None);
                }
                _ => tokio::time::sleep(delay).await,
            }
            attempt = attempt.saturating_add(1);
        }
    }

    /// One attempt, in a `chat` span (OpenTelemetry GenAI names).
    async fn chat(&self, request: &ChatRequest) -> std::result::Result<ChatResponse, ModelError> {
        let model = &self.inner.model;
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {}", model.model_id()),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = model.provider(),
            gen_ai.request.model = model.model_id(),
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let answered = tracing::Instrument::instrument(model.complete(request), span.clone()).await;
        let answer = match answered {
            Ok(a) => a,
            Err(e) => {
                span.record("error.type", model_error_type(&e));
                return Err(e);
            }
        };
        if let Some(u) = &answer.usage {
            span.record("gen_ai.usage.input_tokens", u.input_tokens);
            span.record("gen_ai.usage.output_tokens", u.output_tokens);
        }
        span.record(
            "gen_ai.response.finish_reasons",
            match &answer.stop {
                Stop::End => "stop",
                Stop::ToolCalls => "tool_calls",
                Stop::Length => "length",
                Stop::Other(_) => "other",
            },
        );
        Ok(answer)
    }
}

/// A model error's kind, for a span's `error.type`.
pub(super) fn model_error_type(e: &ModelError) -> &'static str {
    match e {
        ModelError::RateLimited { .. } => "rate_limited",
        ModelError::ContextTooLong { .. } => "context_too_long",
        ModelError::Unauthorized { .. } => "unauthorized",
        ModelError::Unsupported { .. } => "unsupported",
        ModelError::Unavailable { .. } => "unavailable",
        _ => "model",
    }
}

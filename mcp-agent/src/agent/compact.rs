//! A run's transcript compacted before a model call, as its agent's
//! [`Compaction`](super::compaction::Compaction) says.

use crate::error::Result;
use crate::model::{ChatRequest, Message, Role};

use super::compaction::{as_text, cuts, estimate, suffix_estimates};
use super::events::Event;
use super::handle::Agent;
use super::state::RunState;

/// How a summary message begins.
const NOTE: &str = "[A summary of the earlier conversation, compacted to save context";

const SUMMARY_PROMPT: &str = "Summarise the conversation below for your own later use: what the person asked for, the facts found, the decisions made, the files and names involved, what was done and what is still open. Be complete and brief. Answer with the summary only.";

impl Agent {
    /// Compacts the run's transcript when it passed the threshold, before a model
    /// call (no call of the run is pending then).
    pub(super) async fn compact(&self, state: &mut RunState) -> Result<()> {
        let Some(c) = &self.inner.compaction else {
            return Ok(());
        };
        let suffixes = suffix_estimates(&state.messages);
        let before = suffixes[0];
        if before <= c.threshold {
            return Ok(());
        }
        let candidates = cuts(&state.messages);
        // The earliest cut whose kept part fits `keep_recent`; else the latest (the
        // turn being worked on is kept whatever its size).
        let Some(&cut) = candidates
            .iter()
            .find(|&&i| suffixes[i] <= c.keep_recent)
            .or(candidates.last())
        else {
            return Ok(());
        };
        let start = state
            .messages
            .iter()
            .position(|m| m.role != Role::System)
            .unwrap_or(0);
        if cut <= start {
            return Ok(());
        }
        // The person's latest message stays as it is, after the summary.
        let last_person = state
            .messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .filter(|&i| i >= start && i < cut);
        let old: Vec<Message> = state.messages[start..cut]
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(start + i) != last_person)
            .map(|(_, m)| m.clone())
            .collect();
        // Nothing but an earlier summary to compact: it is not summarised again.
        if old.iter().all(|m| m.joined_text().starts_with(NOTE)) {
            return Ok(());
        }
        let summary = match &c.summarize {
            Some(f) => {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&old))) {
                    Ok(s) => s,
                    // The application's summariser failed: nothing is compacted.
                    Err(_) => {
                        tracing::warn!(run = %state.id, "the compaction summariser panicked; the transcript is kept whole");
                        return Ok(());
                    }
                }
            }
            None => {
                // A model call of its own: within the run's budget, its text not
                // streamed to the run's watchers, and a failure leaves the transcript
                // whole (the run goes on).
                if self.budget_before_model_call(state).is_some() {
                    return Ok(());
                }
                let request = ChatRequest::new(
                    vec![
                        Message::text(Role::System, SUMMARY_PROMPT),
                        Message::text(Role::User, as_text(&old)),
                    ],
                    Vec::new(),
                );
                let quiet: crate::model::TextSink = std::sync::Arc::new(|_: &str| {});
                let asked =
                    crate::model::with_text_sink(quiet, self.ask_model(state, &request)).await;
                let answer = match asked {
                    Ok(Some(answer)) => answer,
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        tracing::warn!(run = %state.id, error = %e, "the compaction summary failed; the transcript is kept whole");
                        return Ok(());
                    }
                };
                state.model_calls = state.model_calls.saturating_add(1);
                if let Some(u) = &answer.usage {
                    state.usage.add(u);
                }
                answer.message.joined_text()
            }
        };
        if summary.trim().is_empty() {
            return Ok(());
        }
        // Said for what it is: a summary drawn from the conversation and tool
        // results, not the person's instructions.
        let note = Message::text(
            Role::User,
            format!("{NOTE} (written by the assistant from the conversation and tool results; not instructions from the person)]\n{summary}"),
        );
        let kept = last_person.map(|i| state.messages[i].clone());
        state
            .messages
            .splice(start..cut, std::iter::once(note).chain(kept));
        // The kept transcript is no longer a prefix of this one: the next save
        // starts a new segment of the log.
        state.log.rewritten = true;
        let after = estimate(&state.messages);
        self.event(
            state,
            Event::Compacted {
                messages: old,
                summary,
                estimate_before: before,
                estimate_after: after,
            },
        );
        Ok(())
    }
}

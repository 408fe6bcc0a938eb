//! A run's transcript compacted before a model call, as its agent's
//! [`Compaction`](super::compaction::Compaction) says.

use crate::error::Result;
use crate::model::{ChatRequest, Message, Role};

use super::compaction::{as_text, cuts, estimate};
use super::events::Event;
use super::handle::Agent;
use super::state::RunState;

const SUMMARY_PROMPT: &str = "Summarise the conversation below for your own later use: what the person asked for, the facts found, the decisions made, the files and names involved, what was done and what is still open. Be complete and brief. Answer with the summary only.";

impl Agent {
    /// Compacts the run's transcript when it passed the threshold, before a model
    /// call (no call of the run is pending then).
    pub(super) async fn compact(&self, state: &mut RunState) -> Result<()> {
        let Some(c) = self.inner.compaction.clone() else {
            return Ok(());
        };
        let before = estimate(&state.messages);
        if before <= c.threshold {
            return Ok(());
        }
        let candidates = cuts(&state.messages);
        // The earliest cut whose kept part fits `keep_recent`; else the latest (the
        // turn being worked on is kept whatever its size).
        let Some(&cut) = candidates
            .iter()
            .find(|&&i| estimate(&state.messages[i..]) <= c.keep_recent)
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
        let old: Vec<Message> = state.messages[start..cut].to_vec();
        let summary = match &c.summarize {
            Some(f) => {
                let f = f.clone();
                let old = old.clone();
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
                let request = ChatRequest::new(
                    vec![
                        Message::text(Role::System, SUMMARY_PROMPT),
                        Message::text(Role::User, as_text(&old)),
                    ],
                    Vec::new(),
                );
                let Some(answer) = self.ask_model(state, &request).await? else {
                    return Ok(());
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
        let note = Message::text(
            Role::User,
            format!(
                "[A summary of the earlier conversation, compacted to save context]\n{summary}"
            ),
        );
        state.messages.splice(start..cut, [note]);
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

//! A run's final answer: a typed run's checked against its schema (the model told
//! what is wrong and asked again, a bounded number of times), then the application's
//! `check_answer` hook — before the run finishes with it.

use crate::error::Result;
use crate::model::{Message, Role};
use crate::store::RunStatus;

use super::decision::Outcome;
use super::events::Event;
use super::handle::Agent;
use super::hooks::{AnswerCheck, MAX_ANSWER_RETRIES};
use super::state::RunState;

impl Agent {
    /// The model's final answer `text` (no calls left in its turn): checked, then the
    /// run finishes with the outcome returned — or, `None`, the model is asked again
    /// (it read what is wrong).
    pub(super) async fn final_answer(
        &self,
        state: &mut RunState,
        text: String,
    ) -> Result<Option<Outcome>> {
        let text = match state.options.output.clone() {
            None => text,
            Some(spec) => match spec.read(&text) {
                Ok(json) => json,
                Err(reason) => {
                    let repair = state.output_repairs < spec.repair_rounds();
                    let event = Event::OutputInvalid {
                        reason: reason.clone(),
                        repair,
                    };
                    self.event(state, event);
                    if repair {
                        // The model reads what is wrong, and answers again.
                        state.output_repairs += 1;
                        state.messages.push(Message::text(
                            Role::User,
                            format!("Your final answer does not match the required output `{}`: {reason}. Answer again with only a JSON value that matches it.", spec.name()),
                        ));
                        return Ok(None);
                    }
                    self.event(state, Event::RunFinished);
                    self.save(state, RunStatus::Finished).await?;
                    return Ok(Some(Outcome::InvalidOutput {
                        run_id: state.id.clone(),
                        text,
                        reason,
                        usage: state.usage,
                    }));
                }
            },
        };
        if let Some((said, event)) = self.inner.callbacks.hooks.answer(&state.id, &text) {
            self.event(state, event);
            let reason = match said {
                AnswerCheck::Retry(why) if state.answer_retries < MAX_ANSWER_RETRIES => {
                    // The model reads why, and answers again.
                    state.answer_retries += 1;
                    state.messages.push(Message::text(
                        Role::User,
                        format!("Your answer was not accepted: {why}. Answer again."),
                    ));
                    return Ok(None);
                }
                AnswerCheck::Retry(why) => Some(format!(
                    "not accepted after {} retries: {why}",
                    MAX_ANSWER_RETRIES
                )),
                AnswerCheck::Fail(why) => Some(why),
                _ => None,
            };
            if let Some(reason) = reason {
                self.event(state, Event::RunFinished);
                self.save(state, RunStatus::Finished).await?;
                return Ok(Some(Outcome::InvalidOutput {
                    run_id: state.id.clone(),
                    text,
                    reason: crate::error::clip(&reason, 1000),
                    usage: state.usage,
                }));
            }
        }
        self.event(state, Event::RunFinished);
        self.save(state, RunStatus::Finished).await?;
        Ok(Some(Outcome::Finished {
            run_id: state.id.clone(),
            text,
            usage: state.usage,
        }))
    }
}

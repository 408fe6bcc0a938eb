//! Conversations: runs that go on from one another's answers.

use crate::content::Input;
use crate::error::Result;
use crate::model::{Message, Role};

use super::decision::Outcome;
use super::handle::Agent;

/// A conversation with an agent: the first [`send`](Self::send) starts a run, each
/// next one is a [`follow_up`](Agent::follow_up) of it, so the model sees everything
/// said so far. The transcript lives in the run store (another process can take the
/// conversation up with [`Agent::conversation_of`]); suspension, decisions and events
/// work as in any run — resume a suspended run with [`Agent::resume`], then send on.
#[derive(Clone, Debug)]
pub struct Conversation {
    agent: Agent,
    run: Option<String>,
}

impl Agent {
    /// A new conversation.
    pub fn conversation(&self) -> Conversation {
        Conversation {
            agent: self.clone(),
            run: None,
        }
    }

    /// The conversation a run holds: the next [`Conversation::send`] follows it up.
    pub fn conversation_of(&self, run_id: impl Into<String>) -> Conversation {
        Conversation {
            agent: self.clone(),
            run: Some(run_id.into()),
        }
    }

    /// A run's transcript as the model sees it: the system prompt, every message
    /// given, every answer and tool call, every tool result.
    pub async fn transcript(&self, run_id: &str) -> Result<Vec<Message>> {
        let state = self.inner.books.load(run_id).await?;
        let mut messages = state.messages;
        // The results of a turn still open (a suspended one) are not joined yet.
        if !state.results.is_empty() {
            messages.push(Message {
                role: Role::Tool,
                content: state.results,
            });
        }
        Ok(messages)
    }
}

impl Conversation {
    /// Sends `input` (a prompt, messages, an MCP prompt's or resource's contents):
    /// the first starts the conversation's run, the next follow it up.
    pub async fn send(&mut self, input: impl Into<Input>) -> Result<Outcome> {
        self.send_as(input.into(), None).await
    }

    /// Sends `input`, its answer held to `output` (text when `None`).
    pub(super) async fn send_as(
        &mut self,
        input: Input,
        output: Option<super::output::OutputSpec>,
    ) -> Result<Outcome> {
        let outcome = match &self.run {
            None => {
                let mut options = super::options::RunOptions::new();
                options.output = output;
                self.agent.run_with_options(input, options).await?
            }
            Some(run) => self.agent.follow_up_as(run, input, Some(output)).await?,
        };
        self.run = Some(outcome.run_id().to_owned());
        Ok(outcome)
    }

    /// The run that holds the conversation, once it started.
    pub fn run_id(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// Everything said so far (see [`Agent::transcript`]); empty before the first
    /// send.
    pub async fn transcript(&self) -> Result<Vec<Message>> {
        match &self.run {
            None => Ok(Vec::new()),
            Some(run) => self.agent.transcript(run).await,
        }
    }
}

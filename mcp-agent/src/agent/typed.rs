//! Typed answers: a run whose final answer must be JSON matching a schema — asked of
//! the model the way its wire supports natively, checked when it answers, repaired by
//! telling the model what is wrong (a bounded number of times), and read as a Rust
//! type.

use serde::de::DeserializeOwned;

use crate::content::Input;
use crate::error::Result;

use super::conversation::Conversation;
use super::decision::Outcome;
use super::handle::Agent;
use super::options::RunOptions;
use super::output::OutputSpec;

/// A run's outcome with its typed answer: `value` is the final answer read as `T`
/// when the run finished ([`Outcome::Finished`], whose text is the answer's JSON).
#[derive(Clone, Debug)]
pub struct TypedOutcome<T> {
    /// How the run ended (or waits).
    pub outcome: Outcome,
    /// The answer, when it finished.
    pub value: Option<T>,
}

impl<T: DeserializeOwned> TypedOutcome<T> {
    /// Reads the answer of `outcome` (of a run started with an [`OutputSpec`] of
    /// `T`'s schema — a resume's or a follow-up's outcome too). An answer that matched
    /// the schema but does not read as `T` comes back as [`Outcome::InvalidOutput`].
    pub fn read(outcome: Outcome) -> TypedOutcome<T> {
        let Outcome::Finished {
            run_id,
            text,
            usage,
        } = outcome
        else {
            return TypedOutcome {
                outcome,
                value: None,
            };
        };
        match serde_json::from_str::<T>(&text) {
            Ok(value) => TypedOutcome {
                outcome: Outcome::Finished {
                    run_id,
                    text,
                    usage,
                },
                value: Some(value),
            },
            Err(e) => TypedOutcome {
                outcome: Outcome::InvalidOutput {
                    run_id,
                    reason: format!(
                        "the answer does not read as {}: {e}",
                        std::any::type_name::<T>()
                    ),
                    text,
                    usage,
                },
                value: None,
            },
        }
    }
}

impl Agent {
    /// Runs `input` as [`run`](Self::run) does, its final answer held to `T`'s JSON
    /// Schema: asked of the model natively by each wire (Chat Completions
    /// `response_format`, Anthropic Messages a tool it must call to answer), checked,
    /// and on a mismatch the model is told what is wrong and asked again
    /// ([`DEFAULT_REPAIRS`] times) before the run ends with
    /// [`Outcome::InvalidOutput`]. Tools work as in any run; a suspension resumes as
    /// usual (read its final outcome with [`TypedOutcome::read`]).
    pub async fn run_typed<T: schemars::JsonSchema + DeserializeOwned>(
        &self,
        input: impl Into<Input>,
    ) -> Result<TypedOutcome<T>> {
        self.run_typed_with::<T>(input, RunOptions::new()).await
    }

    /// [`run_typed`](Self::run_typed) started with `options` (its `output` is `T`'s).
    pub async fn run_typed_with<T: schemars::JsonSchema + DeserializeOwned>(
        &self,
        input: impl Into<Input>,
        options: RunOptions,
    ) -> Result<TypedOutcome<T>> {
        let options = options.output(OutputSpec::of::<T>()?);
        let outcome = self.run_with_options(input, options).await?;
        Ok(TypedOutcome::read(outcome))
    }

    /// [`follow_up`](Self::follow_up) whose answer is held to `T`'s schema (from then
    /// on in this run, until a follow-up says otherwise).
    pub async fn follow_up_typed<T: schemars::JsonSchema + DeserializeOwned>(
        &self,
        run_id: &str,
        input: impl Into<Input>,
    ) -> Result<TypedOutcome<T>> {
        let spec = OutputSpec::of::<T>()?;
        let outcome = self
            .follow_up_as(run_id, input.into(), Some(Some(spec)))
            .await?;
        Ok(TypedOutcome::read(outcome))
    }
}

impl Agent {
    /// [`follow_up`](Self::follow_up) whose answer is held to `spec` (from then on in
    /// this run, until a follow-up says otherwise): for a schema that is data (a
    /// file, a request), not a Rust type.
    pub async fn follow_up_shaped(
        &self,
        run_id: &str,
        input: impl Into<Input>,
        spec: OutputSpec,
    ) -> Result<Outcome> {
        self.follow_up_as(run_id, input.into(), Some(Some(spec)))
            .await
    }
}

impl Conversation {
    /// Sends `input` as [`send`](Self::send) does, this answer held to `T`'s schema
    /// (each send says its own: a plain `send` after it answers in text).
    pub async fn send_typed<T: schemars::JsonSchema + DeserializeOwned>(
        &mut self,
        input: impl Into<Input>,
    ) -> Result<TypedOutcome<T>> {
        let spec = OutputSpec::of::<T>()?;
        let outcome = self.send_as(input.into(), Some(spec)).await?;
        Ok(TypedOutcome::read(outcome))
    }
}

//! Entry points for the fuzz targets (`fuzz/`, its README): the agent's own parsers of
//! what a model provider or a store sends, reached from outside the crate. Each calls
//! the code the agent uses — none is a copy. Not an API: hidden, and it may change.

use crate::model::ChatResponse;
use crate::wire::anthropic::Messages;
use crate::wire::openai::ChatCompletions;
use crate::wire::responses::Responses;
use crate::wire::skeleton::{fuzz_stream, Wire};
use crate::ModelError;

/// A Chat Completions answer (`chat.completion` JSON).
pub fn openai_answer(body: &[u8]) -> Result<ChatResponse, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    ChatCompletions::answer(&v).map_err(|e| e.to_string())
}

/// A streamed Chat Completions answer (an event stream of `chat.completion.chunk`s).
pub fn openai_stream(body: &[u8]) -> Result<ChatResponse, ModelError> {
    fuzz_stream::<ChatCompletions>(body)
}

/// A Responses answer (a `response` object).
pub fn responses_answer(body: &[u8]) -> Result<ChatResponse, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Responses::answer(&v).map_err(|e| e.to_string())
}

/// A streamed Responses answer (its semantic events).
pub fn responses_stream(body: &[u8]) -> Result<ChatResponse, ModelError> {
    fuzz_stream::<Responses>(body)
}

/// An Anthropic Messages answer (JSON).
pub fn anthropic_answer(body: &[u8]) -> Result<ChatResponse, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Messages::answer(&v).map_err(|e| e.to_string())
}

/// A streamed Anthropic Messages answer (its event stream).
pub fn anthropic_stream(body: &[u8]) -> Result<ChatResponse, ModelError> {
    fuzz_stream::<Messages>(body)
}

/// A stored run's state: read, written back, read again — the same run (`Err` says
/// how it was not).
pub fn stored_run(state: serde_json::Value) -> Result<(), String> {
    crate::agent::fuzz_stored_run(state)
}

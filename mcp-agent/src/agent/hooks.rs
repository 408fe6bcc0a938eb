//! The application's hooks on a run's calls and answer: `before_call` (after the gate,
//! before a call is sent: go on, rewrite its arguments — gated and bound again — or
//! refuse it with a reason), `after_call` (before the model reads a result: redact,
//! cut, transform) and `check_answer` (the final answer: accept, ask again with a
//! reason, or fail the run). Each outcome is an [`Event::Hook`]; a hook that panics
//! fails only what it was called for.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use serde_json::Value;

use super::events::Event;

/// A call about to be sent, as a hook sees it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CallInfo<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The server it goes to.
    pub server: &'a str,
    /// The tool's model-facing name.
    pub tool: &'a str,
    /// The arguments.
    pub arguments: &'a Value,
}

/// What `before_call` says of a call.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BeforeCall {
    /// Send it as it is.
    Continue,
    /// Send it with these arguments instead: they are checked against the tool's
    /// schema and go through the gate again (a person who must approve sees these).
    Rewrite(Value),
    /// Do not send it: the model reads the reason as the call's error result.
    Refuse(String),
}

/// A tool's result as the model is about to read it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallResult {
    /// Its text (what is not text noted in it).
    pub text: String,
    /// The tool failed.
    pub is_error: bool,
}

impl CallResult {
    /// A result of `text`.
    pub fn new(text: impl Into<String>, is_error: bool) -> CallResult {
        CallResult {
            text: text.into(),
            is_error,
        }
    }
}

/// What `check_answer` says of a final answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerCheck {
    /// The run finishes with it.
    Accept,
    /// The model reads the reason and answers again (at most
    /// [`MAX_ANSWER_RETRIES`] times in a row, then the run fails as with `Fail`).
    Retry(String),
    /// The run finishes with [`Outcome::InvalidOutput`](crate::Outcome::InvalidOutput)
    /// and this reason.
    Fail(String),
}

/// How many times in a row `check_answer` may send the model back.
pub const MAX_ANSWER_RETRIES: u64 = 3;

type BeforeFn = Arc<dyn Fn(CallInfo<'_>) -> BeforeCall + Send + Sync>;
type AfterFn = Arc<dyn Fn(CallInfo<'_>, CallResult) -> CallResult + Send + Sync>;
type AnswerFn = Arc<dyn Fn(&str, &str) -> AnswerCheck + Send + Sync>;

/// The hooks an agent was built with.
#[derive(Clone, Default)]
pub(super) struct Hooks {
    pub(super) before: Option<BeforeFn>,
    pub(super) after: Option<AfterFn>,
    pub(super) answer: Option<AnswerFn>,
}

fn hook_event(hook: &str, tool: Option<&str>, outcome: &str, reason: Option<String>) -> Event {
    Event::Hook {
        hook: hook.to_owned(),
        tool: tool.map(str::to_owned),
        outcome: outcome.to_owned(),
        reason: reason.map(|r| crate::error::clip(&r, 1000)),
    }
}

impl Hooks {
    /// `before_call`'s word on `call` (`Continue` without one), and its event. A hook
    /// that panics refuses the call.
    pub(super) fn before(&self, call: CallInfo<'_>) -> Option<(BeforeCall, Event)> {
        let f = self.before.as_ref()?;
        let said = catch_unwind(AssertUnwindSafe(|| f(call))).unwrap_or_else(|_| {
            BeforeCall::Refuse(format!(
                "the application's before_call hook failed on `{}`; the call was not sent",
                call.tool
            ))
        });
        let event = match &said {
            BeforeCall::Continue => hook_event("before_call", Some(call.tool), "continue", None),
            BeforeCall::Rewrite(_) => hook_event("before_call", Some(call.tool), "rewrite", None),
            BeforeCall::Refuse(why) => {
                hook_event("before_call", Some(call.tool), "refuse", Some(why.clone()))
            }
        };
        Some((said, event))
    }

    /// The result the model reads after `after_call` (as it was without one), its
    /// event, and whether the result is withheld: a hook that panics withholds it (the
    /// model reads that it failed; its images go too).
    pub(super) fn after(
        &self,
        call: CallInfo<'_>,
        result: CallResult,
    ) -> (CallResult, Option<Event>, bool) {
        let Some(f) = self.after.as_ref() else {
            return (result, None, false);
        };
        let before = result.clone();
        match catch_unwind(AssertUnwindSafe(|| f(call, result))) {
            Ok(out) => {
                let outcome = if out == before { "unchanged" } else { "changed" };
                let event = hook_event("after_call", Some(call.tool), outcome, None);
                (out, Some(event), false)
            }
            Err(_) => (
                CallResult::new(
                    serde_json::json!({"error": format!("the application's after_call hook failed on `{}`; its result is withheld", call.tool)}).to_string(),
                    true,
                ),
                Some(hook_event("after_call", Some(call.tool), "panicked", None)),
                true,
            ),
        }
    }

    /// `check_answer`'s word on the final `text` of run `run_id` (`Accept` without
    /// one), and its event. A hook that panics fails the run's answer.
    pub(super) fn answer(&self, run_id: &str, text: &str) -> Option<(AnswerCheck, Event)> {
        let f = self.answer.as_ref()?;
        let said = catch_unwind(AssertUnwindSafe(|| f(run_id, text))).unwrap_or_else(|_| {
            AnswerCheck::Fail("the application's check_answer hook failed".into())
        });
        let event = match &said {
            AnswerCheck::Accept => hook_event("check_answer", None, "accept", None),
            AnswerCheck::Retry(why) => hook_event("check_answer", None, "retry", Some(why.clone())),
            AnswerCheck::Fail(why) => hook_event("check_answer", None, "fail", Some(why.clone())),
        };
        Some((said, event))
    }
}

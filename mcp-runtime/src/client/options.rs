//! Per-request options: timeouts, progress, cancellation, log level, and input left
//! to the caller.

use super::change::ProgressCallback;
use crate::input::{InputAnswers, InputResponse, PendingInput};
use crate::model::{LogLevel, Progress};
use serde_json::Map;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Per-request options. Build them with the `with_*` methods or through
/// [`CallTool`](crate::CallTool)'s builder methods.
#[derive(Clone, Default)]
pub struct RequestOptions {
    pub(super) timeout: Option<Duration>,
    /// The setting a timeout error names when `timeout` is the client's own
    /// (`ClientBuilder::connect_timeout` for the connect's requests).
    pub(super) timeout_setting: Option<&'static str>,
    pub(super) max_timeout: Option<Duration>,
    pub(super) on_progress: Option<ProgressCallback>,
    pub(super) cancel: Option<CancellationToken>,
    pub(super) log_level: Option<LogLevel>,
    /// `Mcp-Param-*` headers, computed by the session for `tools/call`.
    pub(super) headers: Vec<(String, String)>,
    /// A `tools/call` answered with a task returns the task instead of waiting for it.
    pub(super) keep_task: bool,
    /// Input a 2026-07-28 server asks for is returned to the caller, not answered.
    pub(crate) pause_input: bool,
    /// Answers to input asked for earlier, sent with the first attempt.
    pub(super) answers: Option<Arc<InputAnswers>>,
}

impl fmt::Debug for RequestOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestOptions")
            .field("timeout", &self.timeout)
            .field("max_timeout", &self.max_timeout)
            .field("on_progress", &self.on_progress.is_some())
            .field("cancel", &self.cancel.is_some())
            .field("log_level", &self.log_level)
            .field("pause_on_input", &self.pause_input)
            .field(
                "input_answers",
                &self.answers.as_ref().map(|a| a.responses.len()),
            )
            .finish()
    }
}

impl RequestOptions {
    /// How long to wait without an answer or progress (overrides the client's default).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// The hard limit, whatever progress the server reports.
    pub fn with_max_timeout(mut self, max: Duration) -> Self {
        self.max_timeout = Some(max);
        self
    }
    /// Called with each progress report for this request.
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(f));
        self
    }
    /// Cancels the request when the token is cancelled.
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
    /// Asks the server for log messages at this level and above for this request
    /// (2026-07-28; older servers take the client's session-wide level).
    pub fn with_log_level(mut self, level: LogLevel) -> Self {
        self.log_level = Some(level);
        self
    }
    /// Answers input asked for earlier (the [`PendingInput`] of a
    /// [`CallOutcome::NeedsInput`](crate::CallOutcome::NeedsInput)), by request key. Make the same call with these
    /// options: the answers go with the server's state on the first attempt — or, when
    /// the input was for a task, to the task, and the call waits for the task. Keys the
    /// request did not ask for are ignored.
    pub fn with_input_answers<I, K>(mut self, pending: PendingInput, answers: I) -> Self
    where
        I: IntoIterator<Item = (K, InputResponse)>,
        K: Into<String>,
    {
        let mut responses = Map::new();
        for (k, r) in answers {
            let k = k.into();
            if pending.keys().any(|asked| asked == k) {
                responses.insert(k, r.to_value());
            }
        }
        self.answers = Some(Arc::new(InputAnswers { pending, responses }));
        self
    }
    /// The background task the answers of [`with_input_answers`](Self::with_input_answers)
    /// are for, if any.
    pub(crate) fn answered_task(&self) -> Option<&str> {
        self.answers.as_ref().and_then(|a| a.pending.task_id())
    }
}

//! `tools/call` in the making ([`CallTool`]): options first, then await it.

use super::handle::{Client, Inner};
use super::index::{Guess, ToolEntry};
use super::options::RequestOptions;
use super::tasks::Started;
use crate::error::{Error, Result};
use crate::input::{ended, CallOutcome, PendingInput};
use crate::model::{CallToolResult, LogLevel, Progress};
use crate::protocol::Era;
use crate::protocol::{code, Method, TaskSupport};
use crate::transport::BoxFuture;
use serde_json::{Map, Value};
use std::fmt;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A `tools/call` in the making: await it, or set options first.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run(client: mcp_runtime::Client) -> mcp_runtime::Result<()> {
/// use std::time::Duration;
/// let result = client
///     .call("trigger-long-running-operation", serde_json::json!({"duration": 5, "steps": 5}))
///     .timeout(Duration::from_secs(10))
///     .on_progress(|p| println!("{} of {:?}", p.progress, p.total))
///     .await?;
/// println!("{}", result.text());
/// # Ok(()) }
/// ```
#[must_use = "a call does nothing until awaited"]
pub struct CallTool<'a> {
    pub(super) client: &'a Client,
    pub(super) name: String,
    pub(super) arguments: Value,
    pub(super) options: RequestOptions,
    /// What the call needs besides its name and arguments, resolved by the caller (a
    /// declared server's tool); `None`: the tool index says.
    pub(super) known: Option<Arc<ToolEntry>>,
}

impl fmt::Debug for CallTool<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallTool")
            .field("name", &self.name)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl CallTool<'_> {
    /// How long to wait without an answer or progress.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = Some(timeout);
        self
    }
    /// The hard limit, whatever progress the server reports.
    pub fn max_timeout(mut self, max: Duration) -> Self {
        self.options.max_timeout = Some(max);
        self
    }
    /// Called with each progress report of this call.
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.options.on_progress = Some(Arc::new(f));
        self
    }
    /// Cancels the call (and tells the server) when the token is cancelled. Dropping
    /// the future cancels it too.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.options.cancel = Some(token);
        self
    }
    /// Log level for this call.
    pub fn log_level(mut self, level: LogLevel) -> Self {
        self.options.log_level = Some(level);
        self
    }
    /// All options at once.
    pub fn options(mut self, options: RequestOptions) -> Self {
        self.options = options;
        self
    }
    /// Sends the call as `entry` says (its headers, task support, UI resource)
    /// instead of looking the tool up in the tool index: for a tool resolved once.
    pub(crate) fn known(mut self, entry: Option<Arc<ToolEntry>>) -> Self {
        self.known = entry;
        self
    }

    /// Makes the call, leaving the input a 2026-07-28 server asks for to the caller
    /// instead of answering it with the client's input handler: the outcome is the
    /// tool's result, or [`CallOutcome::NeedsInput`] with the requests and the
    /// server's state. Answer them — later, in another process if need be — by making
    /// the same call again
    /// [`with_input_answers`](RequestOptions::with_input_answers). Input a tool
    /// running as a task asks for pauses the same way (the task is left running).
    ///
    /// The request declares form and URL elicitation whether or not the client has an
    /// input handler (2026-07-28 capabilities are per request). Servers before
    /// 2026-07-28 ask over the live connection (`elicitation/create`), which cannot
    /// wait for another process: their requests still go to the input handler.
    pub async fn pause_on_input(mut self) -> Result<CallOutcome> {
        self.options.pause_input = true;
        self.outcome().await
    }

    /// The call's outcome as its options have it.
    pub(crate) async fn outcome(self) -> Result<CallOutcome> {
        self.run::<Pausing>().await
    }

    /// Sends the call and reads the result as `F` takes it: one state machine per
    /// way of ending, so a plain call moves nothing but its result. It sends one
    /// `tools/call` and never lists the tools: what it needs besides the name and the
    /// arguments comes from the caller's resolved entry or the tool index.
    async fn run<F: Finish>(self) -> Result<F::Out> {
        let inner = &self.client.inner;
        if !matches!(self.arguments, Value::Null | Value::Object(_)) {
            return Err(Error::config(
                "tool arguments must be a JSON object (or null for none)",
            ));
        }
        let mut options = self.options;
        let (name, arguments, known) = (self.name, self.arguments, self.known);
        // What the session knows of the tool goes on its result: its UI resource, and
        // whether its structured output matched its `outputSchema`.
        let finish = |inner: &Inner, mut r: CallToolResult| {
            match &known {
                Some(e) => {
                    r.ui_resource = e.ui_resource.clone();
                    if let Some(o) = &e.output {
                        r.output_check = o.check(&r);
                    }
                }
                None => {
                    r.ui_resource = inner.ui_resource_of(&name);
                    if let Some(o) = inner.tool_index.output(&name) {
                        r.output_check = o.check(&r);
                    }
                }
            }
            r
        };
        // Answers for a task that paused for input: they go to the task, and the
        // call waits for it.
        if let Some(id) = options.answered_task() {
            return match self.client.task(id).outcome(&options).await? {
                CallOutcome::Done(r) => Ok(F::done(finish(inner, r))),
                CallOutcome::NeedsInput(p) => F::input(&inner.settings.name, p),
            };
        }
        // 2025-11-25: a tool the server runs only as a task is started as one and
        // waited for. Whether it does is what the entry or the tool index says (a
        // list or a declaration's snapshot); a tool neither knows goes out as a plain
        // call, and the server's refusal says to list the tools.
        let details = inner.ensure().await?;
        // (`get` by `get`: `Value::pointer` allocates per token, on every call.)
        let runs_tasks = details.era == Era::Legacy
            && details
                .capabilities
                .0
                .get("tasks")
                .and_then(|t| t.get("requests"))
                .and_then(|r| r.get("tools"))
                .and_then(|t| t.get("call"))
                .is_some();
        let support = match &known {
            Some(e) => Some(e.task_support),
            None if runs_tasks => inner.tool_index.task_support(&name),
            None => None,
        };
        if runs_tasks && support == Some(TaskSupport::Required) {
            return match self
                .client
                .start_known(&name, arguments, known.as_deref())
                .await?
            {
                Started::Task(task) => match task.outcome(&options).await? {
                    CallOutcome::Done(r) => Ok(F::done(finish(inner, r))),
                    CallOutcome::NeedsInput(p) => F::input(&inner.settings.name, p),
                },
                Started::Done(result) => Ok(F::done(finish(inner, *result))),
            };
        }
        options.headers = match &known {
            Some(e) if inner.transport.mirrors_param_headers() => e.header_values(&arguments),
            Some(_) => Vec::new(),
            None => inner.param_headers(&name, &arguments),
        };
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.clone()));
        if let Value::Object(_) = arguments {
            params.insert("arguments".into(), arguments);
        }
        let v = match inner
            .call_pausing(Method::ToolsCall.as_str(), params, &options)
            .await
        {
            Ok(v) => v,
            Err(e) => {
                let guess = if runs_tasks && support.is_none() {
                    Guess::Plain
                } else {
                    Guess::Known
                };
                return Err(inner.refused(e, &name, guess));
            }
        };
        let v = match v {
            CallOutcome::Done(v) => v,
            CallOutcome::NeedsInput(p) => return F::input(&inner.settings.name, p),
        };
        let r = CallToolResult::from_value(v)?;
        Ok(F::done(finish(inner, r)))
    }
}

impl Inner {
    /// A `tools/call` of `tool` failed with `e`: with what to do when the server
    /// refused it for what the session did not know — the `Mcp-Param-*` headers its
    /// arguments are mirrored into (`-32020`, refused before running anything; what
    /// the session knows of the tools becomes a guess, and the next list replaces
    /// it), or (`-32601`, a 2025-11-25 server that runs tools as tasks, a tool the
    /// session does not know: `guess`) that it runs only as a task, or not as one.
    /// The call is not sent again and the tools are not listed here: a call never
    /// lists them.
    pub(super) fn refused(&self, e: Error, tool: &str, guess: Guess) -> Error {
        match e.code() {
            Some(code::HEADER_MISMATCH | code::HEADER_MISMATCH_DRAFT) => {
                self.invalidate("tools/");
                self.tool_index.stale();
                e.with_hint(format!(
                    "the server wanted `Mcp-Param-*` headers this session did not know for `{tool}` (or they changed): list the tools (`tools()`) and call again"
                ))
            }
            Some(code::METHOD_NOT_FOUND) if guess == Guess::Plain => e.with_hint(format!(
                "`{tool}` may run only as a task, which this session does not know: list the tools (`tools()`) and call again, or start it (`start`)"
            )),
            Some(code::METHOD_NOT_FOUND) if guess == Guess::AsTask => e.with_hint(format!(
                "`{tool}` may not run as a task, which this session does not know: list the tools (`tools()`) and start it again, or call it (`call`)"
            )),
            _ => e,
        }
    }
}

/// How a call ends for its caller: a plain call takes the result (input left to the
/// caller cannot reach it: only pausing calls leave input to the caller), a pausing
/// call the outcome.
trait Finish {
    type Out: Send;
    fn done(r: CallToolResult) -> Self::Out;
    fn input(server: &str, p: Box<PendingInput>) -> Result<Self::Out>;
}

struct Plain;

impl Finish for Plain {
    type Out = CallToolResult;
    fn done(r: CallToolResult) -> CallToolResult {
        r
    }
    fn input(server: &str, p: Box<PendingInput>) -> Result<CallToolResult> {
        ended(
            server,
            Method::ToolsCall.as_str(),
            CallOutcome::NeedsInput(p),
        )
    }
}

struct Pausing;

impl Finish for Pausing {
    type Out = CallOutcome;
    fn done(r: CallToolResult) -> CallOutcome {
        CallOutcome::Done(r)
    }
    fn input(_: &str, p: Box<PendingInput>) -> Result<CallOutcome> {
        Ok(CallOutcome::NeedsInput(p))
    }
}

impl<'a> IntoFuture for CallTool<'a> {
    type Output = Result<CallToolResult>;
    type IntoFuture = BoxFuture<'a, Result<CallToolResult>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run::<Plain>())
    }
}

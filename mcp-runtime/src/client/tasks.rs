//! Tool calls a server runs in the background: the tasks extension of 2026-07-28
//! (`io.modelcontextprotocol/tasks`: the server answers `tools/call` with a task) and
//! the experimental core tasks of 2025-11-25 (the client asks with `params.task`).
//!
//! A [`Task`] is a handle anyone holding its id can rebuild ([`Client::task`]), in
//! another process or after a restart: its id is all the state there is.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::change::Change;
use super::handle::{Client, Inner};
use super::index::{Guess, ToolEntry};
use super::options::RequestOptions;
use super::task_status::{TaskState, TaskStatus};
use crate::error::{Error, Result};
use crate::input::{ended, CallOutcome, PendingInput};
use crate::model::CallToolResult;
use crate::protocol::Era;
use crate::protocol::{code, Method, TaskSupport, TASKS_EXTENSION};
use mcp_runtime_core::lock;

impl TaskState {
    fn parse(s: &str) -> TaskState {
        match s {
            "working" => TaskState::Working,
            "input_required" => TaskState::InputRequired,
            "completed" => TaskState::Completed,
            "failed" => TaskState::Failed,
            "cancelled" => TaskState::Cancelled,
            other => TaskState::Other(other.to_owned()),
        }
    }

    /// True once the task will not change any more.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

impl TaskStatus {
    /// Reads a task object of either era (`{task: {...}}` or the flat object).
    pub(super) fn from_value(v: &Value) -> Option<TaskStatus> {
        let t = v.get("task").filter(|t| t.is_object()).unwrap_or(v);
        let id = t.get("taskId")?.as_str()?.to_owned();
        let ms = |keys: &[&str]| {
            keys.iter()
                .find_map(|k| t.get(*k).and_then(Value::as_u64))
                .map(Duration::from_millis)
        };
        let text = |k: &str| t.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(TaskStatus {
            id,
            state: TaskState::parse(t.get("status").and_then(Value::as_str).unwrap_or("working")),
            message: text("statusMessage"),
            poll_interval: ms(&["pollIntervalMs", "pollInterval"]),
            created_at: text("createdAt"),
            last_updated_at: text("lastUpdatedAt"),
            ttl: ms(&["ttlMs", "ttl"]),
        })
    }
}

/// A tool call a server runs in the background. Cheap to clone; rebuild it from its id
/// with [`Client::task`] (in another process, after a restart).
#[derive(Clone)]
pub struct Task {
    client: Client,
    id: String,
    last: Arc<Mutex<Option<TaskStatus>>>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("last", &*lock(&self.last))
            .finish()
    }
}

/// What [`Client::start`] started.
#[derive(Debug)]
pub enum Started {
    /// The server runs the call in the background.
    Task(Task),
    /// The server ran the call at once (it decides, or does not run tasks).
    Done(Box<CallToolResult>),
}

impl Task {
    /// The task's id: keep it to pick the task up later with [`Client::task`].
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The last status seen (when it was created, polled, or pushed), without asking.
    pub fn last_status(&self) -> Option<TaskStatus> {
        lock(&self.last).clone()
    }

    /// Asks the server where the task stands (`tasks/get`).
    pub async fn status(&self) -> Result<TaskStatus> {
        let (status, _) = self.client.inner.get_task(&self.id).await?;
        *lock(&self.last) = Some(status.clone());
        Ok(status)
    }

    /// Waits for the task to end and returns the tool's result, answering its input
    /// requests with the client's input handler on the way. It asks at the server's
    /// poll interval, or sooner when the status is pushed (see
    /// [`Client::listen_for`]). A failed task is an error (a protocol error); a
    /// cancelled one is an error for which `is_cancelled()` is true. Dropping the future
    /// stops waiting but leaves the task running (cancel it with [`cancel`](Self::cancel)).
    pub async fn wait(&self) -> Result<CallToolResult> {
        self.wait_with(&RequestOptions::default()).await
    }

    /// [`wait`](Self::wait), bounded by the options' `max_timeout` and cancel token.
    pub async fn wait_with(&self, options: &RequestOptions) -> Result<CallToolResult> {
        let outcome = self.outcome(options).await?;
        ended(
            &self.client.inner.settings.name,
            Method::ToolsCall.as_str(),
            outcome,
        )
    }

    /// [`wait_with`](Self::wait_with), leaving the input the task asks for to the
    /// caller instead of answering it with the client's input handler: the task keeps
    /// running, and [`CallOutcome::NeedsInput`] names it
    /// ([`PendingInput::task_id`](crate::PendingInput::task_id)). Make the call again
    /// [`with_input_answers`](RequestOptions::with_input_answers) to answer it.
    pub async fn wait_pausing(&self, options: &RequestOptions) -> Result<CallOutcome> {
        let mut options = options.clone();
        options.pause_input = true;
        self.outcome(&options).await
    }

    /// The task's end as the options have it: a result, or input left to the caller.
    pub(crate) async fn outcome(&self, options: &RequestOptions) -> Result<CallOutcome> {
        match self
            .client
            .inner
            .wait_task(&self.id, options, &self.last)
            .await?
        {
            CallOutcome::Done(v) => CallToolResult::from_value(v).map(CallOutcome::Done),
            CallOutcome::NeedsInput(p) => Ok(CallOutcome::NeedsInput(p)),
        }
    }

    /// The tool's result if the task has completed, without waiting: `None` while it
    /// runs; an error when it failed or was cancelled.
    pub async fn result(&self) -> Result<Option<CallToolResult>> {
        let (status, mut v) = self.client.inner.get_task(&self.id).await?;
        let state = status.state.clone();
        *lock(&self.last) = Some(status);
        match state {
            TaskState::Completed => {}
            TaskState::Failed => return Err(task_error(&v)),
            TaskState::Cancelled => return Err(Error::cancelled(Method::ToolsCall.as_str())),
            _ => return Ok(None),
        }
        let result = match v.get_mut("result").map(Value::take) {
            // 2026-07-28: the result comes with the status.
            Some(r) => r,
            // 2025-11-25: `tasks/result` answers at once for a finished task.
            None => ended(
                &self.client.inner.settings.name,
                Method::ToolsCall.as_str(),
                self.client
                    .inner
                    .wait_task(&self.id, &RequestOptions::default(), &self.last)
                    .await?,
            )?,
        };
        CallToolResult::from_value(result).map(Some)
    }

    /// Asks the server to cancel the task (`tasks/cancel`). Cancellation is
    /// cooperative: the task may still finish.
    pub async fn cancel(&self) -> Result<()> {
        self.client.inner.cancel_task(&self.id).await
    }
}

impl Client {
    /// Starts the tool `name` in the background and returns at once with the task
    /// (or, when the server runs the call at once, its result). With 2026-07-28
    /// servers this needs the tasks extension declared
    /// (`.extension("io.modelcontextprotocol/tasks", json!({}))`); servers of
    /// 2025-11-25 that run tools as tasks need nothing. Keep the task's id to pick it
    /// up later with [`Client::task`].
    ///
    /// The tools are never listed here: with a 2025-11-25 server, a tool is started as
    /// a task when the tool index (the last `tools()`, or a declaration's snapshot)
    /// says it may run as one, or does not know it (a server whose tool forbids it
    /// refuses, and the error says to list the tools).
    pub async fn start(&self, name: &str, arguments: Value) -> Result<Started> {
        self.start_known(name, arguments, None).await
    }

    /// [`start`](Self::start), sent as `known` says (its headers, task support, UI
    /// resource) when the caller resolved the tool; `None`: as the tool index says.
    pub(crate) async fn start_known(
        &self,
        name: &str,
        arguments: Value,
        known: Option<&ToolEntry>,
    ) -> Result<Started> {
        let inner = &self.inner;
        let details = inner.ensure().await?;
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.to_owned()));
        if arguments.is_object() {
            params.insert("arguments".into(), arguments.clone());
        }
        let mut opts = RequestOptions {
            keep_task: true,
            ..Default::default()
        };
        opts.headers = match known {
            Some(e) if inner.transport.mirrors_param_headers() => e.header_values(&arguments),
            Some(_) => Vec::new(),
            None => inner.param_headers(name, &arguments),
        };
        let mut guess = Guess::Known;
        match details.era {
            Era::Modern => {
                if !inner.declares(TASKS_EXTENSION) {
                    return Err(Error::config(format!(
                        "starting a task needs the tasks extension: build the client with .extension(\"{TASKS_EXTENSION}\", json!({{}}))"
                    )));
                }
            }
            Era::Legacy => {
                let support = match known {
                    Some(e) => Some(e.task_support),
                    None => inner.tool_index.task_support(name),
                };
                let server_runs = details
                    .capabilities
                    .0
                    .pointer("/tasks/requests/tools/call")
                    .is_some();
                // A tool the index does not know is asked for as a task (the caller
                // asked to start it); a server whose tool forbids it refuses, and the
                // error says to list the tools.
                if server_runs && support.is_none() {
                    guess = Guess::AsTask;
                }
                if server_runs
                    && support
                        .is_none_or(|s| matches!(s, TaskSupport::Optional | TaskSupport::Required))
                {
                    params.insert("task".into(), json!({}));
                }
            }
        }
        let v = inner
            .call(Method::ToolsCall.as_str(), params, &opts)
            .await
            .map_err(|e| inner.refused(e, name, guess))?;
        let is_task = v.get("resultType").and_then(Value::as_str) == Some("task")
            || v.get("task").is_some_and(Value::is_object);
        if is_task {
            let status = TaskStatus::from_value(&v)
                .ok_or_else(|| Error::invalid_response("a task without `taskId`"))?;
            return Ok(Started::Task(Task {
                client: self.clone(),
                id: status.id.clone(),
                last: Arc::new(Mutex::new(Some(status))),
            }));
        }
        let mut r = CallToolResult::from_value(v)?;
        r.ui_resource = match known {
            Some(e) => e.ui_resource.clone(),
            None => inner.ui_resource_of(name),
        };
        Ok(Started::Done(Box::new(r)))
    }

    /// The task with this id on this server (one this or another client started), to
    /// ask about, wait for or cancel.
    pub fn task(&self, id: impl Into<String>) -> Task {
        Task {
            client: self.clone(),
            id: id.into(),
            last: Arc::new(Mutex::new(None)),
        }
    }
}

impl Inner {
    fn task_params(id: &str) -> Map<String, Value> {
        let mut params = Map::new();
        params.insert("taskId".into(), Value::String(id.to_owned()));
        params
    }

    /// `tasks/get`: the status, and the raw answer (which carries the result or the
    /// input requests with 2026-07-28 servers).
    pub(super) async fn get_task(self: &Arc<Self>, id: &str) -> Result<(TaskStatus, Value)> {
        let v = self
            .call(
                Method::TasksGet.as_str(),
                Self::task_params(id),
                &RequestOptions::default(),
            )
            .await?;
        let status = TaskStatus::from_value(&v)
            .ok_or_else(|| Error::invalid_response("a task status without `taskId`"))?;
        self.task_seen(&status);
        Ok((status, v))
    }

    /// A task's status arrived (polled or pushed): wake whoever waits for it.
    pub(super) fn task_seen(&self, status: &TaskStatus) {
        self.tasks.wake(&status.id);
    }

    /// A pushed task status (`notifications/tasks`, `notifications/tasks/status`).
    pub(super) fn task_notified(&self, params: &Value) {
        if let Some(status) = TaskStatus::from_value(params) {
            self.task_seen(&status);
            self.report_task(status, false);
        }
    }

    /// Reports a task's status to the `after_change` callbacks when its state or message changed since
    /// the last report (or always, with `again`: after a reconnect).
    pub(super) fn report_task(&self, status: TaskStatus, again: bool) {
        let news = self.tasks.is_news(
            &status.id,
            status.state.clone(),
            status.message.clone(),
            again,
        );
        if news {
            self.changed(Change::Task(status));
        }
    }

    pub(super) async fn cancel_task(self: &Arc<Self>, id: &str) -> Result<()> {
        self.call(
            Method::TasksCancel.as_str(),
            Self::task_params(id),
            &RequestOptions::default(),
        )
        .await
        .map(|_| ())
    }

    /// Waits for a task to end; its result (the tool's result object).
    pub(super) async fn wait_task(
        self: &Arc<Self>,
        id: &str,
        opts: &RequestOptions,
        last: &Mutex<Option<TaskStatus>>,
    ) -> Result<CallOutcome<Value>> {
        let details = self.ensure().await?;
        if details.era == Era::Legacy {
            return self
                .wait_legacy_task(id, opts, last)
                .await
                .map(CallOutcome::Done);
        }
        let notify = self.tasks.waiter(id);
        let _waiting = WaiterGuard {
            inner: self,
            notify: notify.clone(),
            id: id.to_owned(),
        };
        let deadline = Instant::now() + opts.max_timeout.unwrap_or(self.settings.max_timeout);
        let never = CancellationToken::new();
        let cancel = opts.cancel.as_ref().unwrap_or(&never);
        let mut wait = lock(last)
            .as_ref()
            .and_then(|s| s.poll_interval)
            .unwrap_or(Duration::from_secs(1));
        let mut answered: Vec<String> = Vec::new();
        // Answers given to this task by the caller (it paused for them earlier).
        if let Some(a) = opts
            .answers
            .as_ref()
            .filter(|a| a.pending.task_id() == Some(id))
        {
            if !a.responses.is_empty() {
                let mut params = Self::task_params(id);
                params.insert("inputResponses".into(), Value::Object(a.responses.clone()));
                self.call(
                    Method::TasksUpdate.as_str(),
                    params,
                    &RequestOptions::default(),
                )
                .await?;
            }
            answered.extend(a.responses.keys().cloned());
        }
        let mut first = true;
        loop {
            if !first {
                if Instant::now() + wait > deadline {
                    return Err(Error::timeout_of(
                        Method::ToolsCall.as_str(),
                        deadline.saturating_duration_since(Instant::now()) + wait,
                        "max_timeout (ClientBuilder::max_timeout, or the call's)",
                    ));
                }
                let pushed = notify.notified();
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = pushed => {}
                    () = cancel.cancelled() => return Err(Error::cancelled(Method::ToolsCall.as_str())),
                }
            }
            first = false;
            let (status, mut task) = self.get_task(id).await?;
            wait = status.poll_interval.unwrap_or(wait);
            *lock(last) = Some(status.clone());
            match status.state {
                TaskState::Completed => {
                    return task
                        .get_mut("result")
                        .map(|v| CallOutcome::Done(v.take()))
                        .ok_or_else(|| {
                            Error::invalid_response("a completed task without `result`")
                        });
                }
                TaskState::Failed => return Err(task_error(&task)),
                TaskState::Cancelled => return Err(Error::cancelled(Method::ToolsCall.as_str())),
                TaskState::InputRequired => {
                    let requests = task
                        .get_mut("inputRequests")
                        .map(Value::take)
                        .unwrap_or(Value::Null);
                    if opts.pause_input {
                        // Only what is still unanswered pauses (the server may not have
                        // taken the answers in yet).
                        let mut left = match requests {
                            Value::Object(m) => m,
                            _ => Map::new(),
                        };
                        left.retain(|k, _| !answered.contains(k));
                        if !left.is_empty() {
                            return Ok(CallOutcome::NeedsInput(Box::new(PendingInput::new(
                                &self.settings.name,
                                Value::Object(left),
                                None,
                                Some(id.to_owned()),
                            ))));
                        }
                        continue;
                    }
                    let responses = self.answer_all(requests, &answered).await?;
                    if !responses.is_empty() {
                        answered.extend(responses.keys().cloned());
                        let mut params = Self::task_params(id);
                        params.insert("inputResponses".into(), Value::Object(responses));
                        self.call(
                            Method::TasksUpdate.as_str(),
                            params,
                            &RequestOptions::default(),
                        )
                        .await?;
                        // Ask again at once: the answers may have unblocked it.
                        wait = Duration::from_millis(10).max(wait / 10);
                    }
                }
                TaskState::Working | TaskState::Other(_) => {}
            }
        }
    }

    /// 2025-11-25: `tasks/result` blocks until the task ends; the server's input
    /// requests for it arrive meanwhile and go to the input handler.
    async fn wait_legacy_task(
        self: &Arc<Self>,
        id: &str,
        opts: &RequestOptions,
        last: &Mutex<Option<TaskStatus>>,
    ) -> Result<Value> {
        let max = opts.max_timeout.unwrap_or(self.settings.max_timeout);
        let waiting = RequestOptions {
            timeout: Some(max),
            max_timeout: Some(max),
            cancel: opts.cancel.clone(),
            ..Default::default()
        };
        match self
            .call(
                Method::TasksResult.as_str(),
                Self::task_params(id),
                &waiting,
            )
            .await
        {
            Ok(v) => {
                if let Some(s) = lock(last).as_mut() {
                    s.state = TaskState::Completed;
                }
                Ok(v)
            }
            Err(e) if e.is_protocol() => {
                // Cancelled or failed: say which.
                match self.get_task(id).await {
                    Ok((status, _)) => {
                        let cancelled = status.state == TaskState::Cancelled;
                        *lock(last) = Some(status);
                        Err(if cancelled {
                            Error::cancelled(Method::ToolsCall.as_str())
                        } else {
                            e
                        })
                    }
                    Err(_) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// The error of a failed task.
fn task_error(task: &Value) -> Error {
    let e = task.get("error").cloned().unwrap_or(Value::Null);
    Error::protocol(
        e.get("code")
            .and_then(Value::as_i64)
            .unwrap_or(code::INTERNAL_ERROR),
        e.get("message")
            .and_then(Value::as_str)
            .unwrap_or("the task failed"),
        e.get("data").cloned(),
    )
}

/// Forgets a waiter's wake-up handle when it stops waiting.
struct WaiterGuard<'a> {
    inner: &'a Inner,
    notify: Arc<tokio::sync::Notify>,
    id: String,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.inner.tasks.forget_waiter(&self.id, &self.notify);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_of_both_eras() {
        let modern = json!({"resultType": "task", "taskId": "t1", "status": "input_required",
            "statusMessage": "waiting", "pollIntervalMs": 250, "ttlMs": 60000,
            "createdAt": "2026-11-30T10:00:00Z"});
        let s = TaskStatus::from_value(&modern).unwrap();
        assert_eq!(s.id, "t1");
        assert_eq!(s.state, TaskState::InputRequired);
        assert_eq!(s.poll_interval, Some(Duration::from_millis(250)));
        assert_eq!(s.ttl, Some(Duration::from_secs(60)));
        let legacy = json!({"task": {"taskId": "t2", "status": "completed", "pollInterval": 500, "ttl": 1000}});
        let s = TaskStatus::from_value(&legacy).unwrap();
        assert_eq!((s.id.as_str(), s.state.is_terminal()), ("t2", true));
        assert_eq!(s.poll_interval, Some(Duration::from_millis(500)));
        assert!(TaskStatus::from_value(&json!({"status": "working"})).is_none());
        assert_eq!(
            TaskStatus::from_value(&json!({"taskId": "x", "status": "paused"}))
                .unwrap()
                .state,
            TaskState::Other("paused".into())
        );
    }
}

//! One request on the wire: `_meta`, progress, timeouts and cancellation, input
//! rounds (`input_required` and legacy `elicitation/create`), and tasks answered in
//! place of a result.

use super::handle::Inner;
use super::options::RequestOptions;
use super::parts::CallProgress;
use super::task_status::TaskStatus;
use crate::error::{Error, Result};
use crate::input::{ended, CallOutcome, InputRequest, InputResponse, PendingInput};
use crate::jsonrpc::{ErrorObject, Id, Notification, Request, Response};
use crate::protocol::Era;
use crate::protocol::{code, meta, Method, TASKS_EXTENSION};
use crate::transport::RequestContext;
use mcp_runtime_core::lock;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex, Weak};
use tokio::time::Instant;

pub(super) struct CancelGuard {
    inner: Weak<Inner>,
    id: Id,
    version: String,
    armed: bool,
    reason: &'static str,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let n = Notification {
            method: Method::Cancelled.as_str().to_owned(),
            params: Some(json!({"requestId": self.id, "reason": self.reason})),
        };
        let version = std::mem::take(&mut self.version);
        handle.spawn(async move {
            if let Err(e) = inner.transport.cancel(n, &version).await {
                tracing::debug!(error = %e, "could not send notifications/cancelled");
            }
        });
    }
}

/// Adds form and URL elicitation to a 2026-07-28 request's client capabilities (the
/// caller takes the input requests itself).
pub(super) fn declare_elicitation(meta: &mut Map<String, Value>) {
    if let Some(Value::Object(caps)) = meta.get_mut(meta::CLIENT_CAPABILITIES) {
        let e = caps
            .entry("elicitation")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(e) = e {
            e.entry("form").or_insert_with(|| json!({}));
            e.entry("url").or_insert_with(|| json!({}));
        }
    }
}

/// Cancels a task whose caller stopped waiting for it.
pub(super) struct TaskGuard {
    inner: Weak<Inner>,
    task_id: String,
    armed: bool,
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (Some(inner), Ok(handle)) =
            (self.inner.upgrade(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let task_id = std::mem::take(&mut self.task_id);
        handle.spawn(async move {
            let mut params = Map::new();
            params.insert("taskId".into(), Value::String(task_id));
            if let Err(e) = inner
                .call(
                    Method::TasksCancel.as_str(),
                    params,
                    &RequestOptions::default(),
                )
                .await
            {
                tracing::debug!(error = %e, "could not cancel a task");
            }
        });
    }
}

pub(super) struct ProgressGuard<'a> {
    inner: &'a Inner,
    token: Option<Id>,
}

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            self.inner.progress.forget(&t);
        }
    }
}

impl Inner {
    /// One request, one response: timeouts (reset by progress, up to a hard limit),
    /// cancellation (explicit, by timeout, or by dropping the future).
    pub(super) async fn exchange(
        self: &Arc<Self>,
        version: &str,
        request: Request,
        opts: &RequestOptions,
        progress: Option<&CallProgress>,
        cancellable: bool,
    ) -> Result<Value> {
        // The method's name for errors: static when it is one we know (no copy per call).
        let facts = Method::of(&request.method);
        let method: std::borrow::Cow<'static, str> = match facts {
            Some(m) => m.as_str().into(),
            None => request.method.clone().into(),
        };
        let timeout = opts.timeout.unwrap_or(self.settings.timeout);
        let max = opts
            .max_timeout
            .unwrap_or(self.settings.max_timeout)
            .max(timeout);
        let hold = crate::transport::Hold::default();
        let cx = RequestContext {
            version: version.to_owned(),
            timeout: Some(timeout),
            headers: opts.headers.clone(),
            idempotent: facts.is_some_and(safe_to_repeat),
            incoming: self.incoming.clone(),
            hold: hold.clone(),
        };
        let mut guard = CancelGuard {
            inner: Arc::downgrade(self),
            id: request.id.clone(),
            version: version.to_owned(),
            armed: cancellable,
            reason: "the client dropped the request",
        };
        let fut = self.transport.request(request, cx);
        tokio::pin!(fut);
        let start = Instant::now();
        let mut hard = start + max;
        let mut deadline = (start + timeout).min(hard);
        // No token made per call when the caller gave none.
        let cancel = opts.cancel.as_ref();
        loop {
            let progressed = async {
                match progress {
                    Some(p) => p.notify.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                out = &mut fut => {
                    guard.armed = false;
                    return match out {
                        Ok(Response { outcome: Ok(v), .. }) => Ok(v),
                        Ok(Response { outcome: Err(e), .. }) => Err(Error::protocol(e.code, e.message, e.data)),
                        Err(e) => {
                            if e.is_closed() {
                                self.reset();
                            }
                            Err(e)
                        }
                    };
                }
                () = tokio::time::sleep_until(deadline) => {
                    if hold.is_held() {
                        // A person is authorizing: the transport's own deadline applies.
                        deadline = Instant::now() + timeout;
                        hard = hard.max(deadline);
                        continue;
                    }
                    guard.reason = "timeout";
                    let waited = Instant::now() - start;
                    let setting = match (deadline >= hard, opts.timeout.is_some(), opts.max_timeout.is_some()) {
                        (true, _, true) => "the request's max_timeout",
                        (true, _, false) => "ClientBuilder::max_timeout",
                        (false, true, _) => opts.timeout_setting.unwrap_or("the request's timeout"),
                        (false, false, _) => "ClientBuilder::timeout",
                    };
                    return Err(Error::timeout_of(method, waited, setting));
                }
                () = progressed => {
                    deadline = (Instant::now() + timeout).min(hard);
                }
                () = async {
                    match cancel {
                        Some(c) => c.cancelled().await,
                        None => std::future::pending().await,
                    }
                } => {
                    guard.reason = "cancelled by the client";
                    return Err(Error::cancelled(method));
                }
            }
        }
    }

    /// A request of the session: `_meta`, progress, and multi-round input, answered
    /// by the client's input handler.
    pub(super) async fn call(
        self: &Arc<Self>,
        method: &str,
        params: Map<String, Value>,
        opts: &RequestOptions,
    ) -> Result<Value> {
        ended(
            &self.settings.name,
            method,
            self.call_pausing(method, params, opts).await?,
        )
    }

    /// [`call`](Self::call), or — when the options leave input to the caller — the
    /// input a 2026-07-28 server asked for.
    pub(super) async fn call_pausing(
        self: &Arc<Self>,
        method: &str,
        mut params: Map<String, Value>,
        opts: &RequestOptions,
    ) -> Result<CallOutcome<Value>> {
        let facts = Method::of(method);
        let mrtr = facts.is_some_and(Method::input_rounds);
        let always_progress = facts.is_some_and(Method::progress);
        let mut rounds = 0u32;
        let mut answers: Option<(Map<String, Value>, Option<Value>)> = match &opts.answers {
            Some(a) if mrtr && a.pending.task_id().is_none() => {
                Some((a.responses.clone(), a.pending.state().cloned()))
            }
            _ => None,
        };
        let wants_progress =
            always_progress || opts.on_progress.is_some() || self.progress.wants_every();
        let token = wants_progress.then(|| Id::Number(self.next_id()));
        let progress = token
            .as_ref()
            .map(|t| self.progress.register(t.clone(), opts.on_progress.clone()));
        let _progress_guard = ProgressGuard {
            inner: self,
            token: token.clone(),
        };
        loop {
            let details = self.ensure().await?;
            // Only a request that may ask for input is ever sent twice, and only a
            // 2026-07-28 server asks for input in a result (`input_required`).
            let rounds_possible = mrtr && details.era == Era::Modern;
            let mut p = if rounds_possible {
                params.clone()
            } else {
                std::mem::take(&mut params)
            };
            let mut meta = match details.era {
                Era::Modern => {
                    let mut m = self.modern_meta(
                        &details.protocol_version,
                        opts.log_level.or(self.settings.log_level),
                    );
                    if opts.pause_input || opts.answers.is_some() {
                        declare_elicitation(&mut m);
                    }
                    m
                }
                Era::Legacy => Map::new(),
            };
            if let Some(t) = &token {
                meta.insert(
                    "progressToken".into(),
                    serde_json::to_value(t).unwrap_or(Value::Null),
                );
            }
            if !meta.is_empty() {
                p.insert("_meta".into(), Value::Object(meta));
            }
            if let Some((responses, state)) = answers.take() {
                if !responses.is_empty() {
                    p.insert("inputResponses".into(), Value::Object(responses));
                }
                if let Some(s) = state {
                    p.insert("requestState".into(), s);
                }
            }
            let request = Request {
                id: Id::Number(self.next_id()),
                method: method.to_owned(),
                params: Value::Object(p),
            };
            let mut v = self
                .exchange(
                    &details.protocol_version,
                    request,
                    opts,
                    progress.as_deref(),
                    true,
                )
                .await?;
            match v.get("resultType").and_then(Value::as_str) {
                None | Some("complete") => return Ok(CallOutcome::Done(v)),
                Some("input_required") if rounds_possible => {
                    rounds += 1;
                    if rounds > self.input_routing.max_rounds {
                        return Err(Error::invalid_response(format!(
                            "`{method}` still asked for input after {} rounds; giving up",
                            self.input_routing.max_rounds
                        )));
                    }
                    let requests = v
                        .get_mut("inputRequests")
                        .map(Value::take)
                        .unwrap_or(Value::Null);
                    let state = v.get_mut("requestState").map(Value::take);
                    if opts.pause_input {
                        return Ok(CallOutcome::NeedsInput(Box::new(PendingInput::new(
                            &self.settings.name,
                            requests,
                            state,
                            None,
                        ))));
                    }
                    let responses = self.answer_all(requests, &[]).await?;
                    answers = Some((responses, state));
                }
                // Some servers mark `tasks/*` answers with it; they are complete.
                Some("task") if method.starts_with("tasks/") => return Ok(CallOutcome::Done(v)),
                Some("task")
                    if method == Method::ToolsCall.as_str() && self.declares(TASKS_EXTENSION) =>
                {
                    if opts.keep_task {
                        return Ok(CallOutcome::Done(v));
                    }
                    return Box::pin(self.await_task(v, opts)).await;
                }
                Some(other) => {
                    return Err(Error::invalid_response(format!(
                        "`{method}` returned unknown resultType `{other}`"
                    )))
                }
            }
        }
    }

    /// Answers every input request of an `inputRequests` object (skipping keys already
    /// answered).
    pub(super) async fn answer_all(
        &self,
        requests: Value,
        skip: &[String],
    ) -> Result<Map<String, Value>> {
        let mut responses = Map::new();
        if let Value::Object(reqs) = requests {
            for (key, req) in reqs {
                if skip.contains(&key) {
                    continue;
                }
                let m = req
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let params = req.get("params").cloned().unwrap_or(Value::Null);
                let answer = self.answer_input(&m, params).await.map_err(|e| {
                    Error::unsupported(format!(
                        "{} asked for `{m}` input: {}",
                        self.settings.name, e.message
                    ))
                })?;
                responses.insert(key, answer);
            }
        }
        Ok(responses)
    }

    pub(super) fn declares(&self, extension: &str) -> bool {
        self.settings
            .capabilities
            .get("extensions")
            .and_then(|e| e.get(extension))
            .is_some()
    }

    /// A `tools/call` the server answered with a task (tasks extension), waited for
    /// as if the call had answered: see [`Task::wait`]. Cancelling the call (token,
    /// timeout, drop) cancels the task.
    pub(super) async fn await_task(
        self: &Arc<Self>,
        created: Value,
        opts: &RequestOptions,
    ) -> Result<CallOutcome<Value>> {
        let status = TaskStatus::from_value(&created)
            .ok_or_else(|| Error::invalid_response("a task result without `taskId`"))?;
        let mut guard = TaskGuard {
            inner: Arc::downgrade(self),
            task_id: status.id.clone(),
            armed: true,
        };
        let last = Mutex::new(Some(status.clone()));
        let out = self.wait_task(&status.id, opts, &last).await;
        // Ended on its own: nothing to cancel. Paused for input its caller answers
        // later: it must live on.
        if lock(&last).as_ref().is_some_and(|s| s.state.is_terminal())
            || matches!(out, Ok(CallOutcome::NeedsInput(_)))
        {
            guard.armed = false;
        }
        out
    }

    /// Answers one input request (an MRTR `inputRequests` entry, or a legacy server
    /// request).
    pub(super) async fn answer_input(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, ErrorObject> {
        match Method::of(method) {
            Some(Method::ElicitationCreate) => {
                let Some(handler) = &self.input_routing.input else {
                    return Err(ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        "this client takes no input requests (no input handler is set)",
                    ));
                };
                let request = InputRequest::from_params(&self.settings.name, &params)
                    .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, e))?;
                let accepted = if request.is_form() {
                    self.input_routing.kinds.form
                } else {
                    self.input_routing.kinds.url
                };
                if !accepted {
                    return Ok(InputResponse::Decline.to_value());
                }
                Ok(handler.handle(request).await.to_value())
            }
            Some(Method::SamplingCreateMessage) => {
                let Some(handler) = &self.input_routing.sampling else {
                    return Err(ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        "this client does not do sampling (no sampling handler is set)",
                    ));
                };
                if (params.get("tools").is_some() || params.get("toolChoice").is_some())
                    && params.get("tools").is_some_and(|t| !t.is_null())
                {
                    return Err(ErrorObject::new(
                        code::INVALID_PARAMS,
                        "this client did not declare sampling with tools",
                    ));
                }
                handler.create_message(params).await
            }
            Some(Method::RootsList) => {
                let Some(handler) = &self.input_routing.roots else {
                    return Err(ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        "this client exposes no roots (no roots handler is set)",
                    ));
                };
                let roots = handler.roots().await;
                Ok(json!({ "roots": roots }))
            }
            Some(Method::Ping) => Ok(json!({})),
            _ => Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("method `{method}` is not supported by this client"),
            )),
        }
    }
}

/// Whether sending `method` twice does no harm: the methods that read, list or set a
/// state rather than act (docs/http.md, "Which requests are sent again"). Everything
/// else — `tools/call`, `subscriptions/listen`, `tasks/update`, and any method the
/// protocol does not name — is sent at most once by a transport.
pub(crate) fn safe_to_repeat(method: Method) -> bool {
    matches!(
        method,
        Method::Initialize
            | Method::ServerDiscover
            | Method::Ping
            | Method::ToolsList
            | Method::PromptsList
            | Method::PromptsGet
            | Method::ResourcesList
            | Method::ResourceTemplatesList
            | Method::ResourcesRead
            | Method::ResourcesDirectoryRead
            | Method::ResourcesSubscribe
            | Method::ResourcesUnsubscribe
            | Method::CompletionComplete
            | Method::LoggingSetLevel
            | Method::TasksGet
            | Method::TasksResult
            | Method::TasksList
            | Method::TasksCancel
    )
}

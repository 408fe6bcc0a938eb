//! The session: one client talking to one server, in whichever protocol era it speaks.

use std::collections::HashMap;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::input::{
    InputAnswers, InputHandler, InputKinds, InputRequest, InputResponse, PendingInput,
    RootsHandler, SamplingHandler,
};
use crate::jsonrpc::{ErrorObject, Id, Notification, Request, Response};
use crate::model::{
    self, CallToolResult, Completion, CompletionRef, GetPromptResult, Implementation, LogLevel,
    Progress, Prompt, ReadResourceResult, Resource, ResourceTemplate, ServerCapabilities, Tool,
};
use crate::negotiate::{self, Handshake, Probe};
use crate::transport::headers::{self, ParamHeader};
use crate::transport::{BoxFuture, Incoming, IncomingHandler, RequestContext, Transport};

mod tasks;
use crate::protocol::{code, meta, Method, APPS_EXTENSION, TASKS_EXTENSION};
pub use crate::protocol::{Era, LATEST_PROTOCOL_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS};

/// The MCP Apps extension.
pub use tasks::{Started, Task, TaskState, TaskStatus};

/// Which era to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProtocolMode {
    /// Probe with `server/discover`, fall back to `initialize` (the default). The era is
    /// decided by what the server answers, never by how long it takes.
    #[default]
    Auto,
    /// Only the modern protocol: fail if the server does not speak it. The probe waits
    /// as long as any request would.
    Modern,
    /// Only the legacy handshake: go straight to `initialize`.
    Legacy,
}

/// Something the server announced as changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// The tool list changed (the client has already forgotten the old one).
    Tools,
    /// The prompt list changed.
    Prompts,
    /// The resource list changed.
    Resources,
    /// The contents of this resource changed.
    Resource(String),
    /// A task's status changed (pushed by the server, or seen after a reconnect).
    Task(TaskStatus),
}

/// What the client learned about the server when the session started.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerDetails {
    /// The era the server speaks.
    pub era: Era,
    /// The protocol version in use.
    pub protocol_version: String,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's name and version.
    pub info: Implementation,
    /// How to use the server, for a model.
    pub instructions: Option<String>,
}

type ChangeCallback = Arc<dyn Fn(&Change) + Send + Sync>;
type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Per-request options. Build them with the `with_*` methods or through
/// [`CallTool`]'s builder methods.
#[derive(Clone, Default)]
pub struct RequestOptions {
    timeout: Option<Duration>,
    max_timeout: Option<Duration>,
    on_progress: Option<ProgressCallback>,
    cancel: Option<CancellationToken>,
    log_level: Option<LogLevel>,
    /// `Mcp-Param-*` headers, computed by the session for `tools/call`.
    headers: Vec<(String, String)>,
    /// A `tools/call` answered with a task returns the task instead of waiting for it.
    keep_task: bool,
    /// Input a 2026-07-28 server asks for is returned to the caller, not answered.
    pause_input: bool,
    /// Answers to input asked for earlier, sent with the first attempt.
    answers: Option<Arc<InputAnswers>>,
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
    /// Leaves a 2026-07-28 server's requests for input to the caller instead of
    /// answering them with the client's input handler: the call ends with an error for
    /// which [`is_input_required`](Error::is_input_required) is true, whose
    /// [`pending_input`](Error::pending_input) carries the requests and the server's
    /// state. Answer them — later, in another process if need be — by making the same
    /// call again [`with_input_answers`](Self::with_input_answers). Requests of a tool
    /// running as a task pause the same way (the task is left running).
    ///
    /// The request declares form and URL elicitation whether or not the client has an
    /// input handler (2026-07-28 capabilities are per request). Servers before
    /// 2026-07-28 ask over the live connection (`elicitation/create`), which cannot
    /// wait for another process: their requests still go to the input handler.
    pub fn pause_on_input(mut self) -> Self {
        self.pause_input = true;
        self
    }
    /// Answers input asked for earlier (the [`PendingInput`] of an error for which
    /// `is_input_required()` is true), by request key. Make the same call with these
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

/// Builds a [`Client`].
pub struct ClientBuilder {
    name: String,
    client_info: Implementation,
    timeout: Duration,
    max_timeout: Duration,
    probe_timeout: Duration,
    log_level: Option<LogLevel>,
    input_handler: Option<Arc<dyn InputHandler>>,
    input_kinds: Option<InputKinds>,
    sampling: Option<Arc<dyn SamplingHandler>>,
    roots: Option<Arc<dyn RootsHandler>>,
    extensions: Map<String, Value>,
    max_input_rounds: u32,
    on_change: Vec<ChangeCallback>,
    on_progress: Vec<ProgressCallback>,
    protocol: ProtocolMode,
    errors: Vec<String>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            name: "mcp".to_owned(),
            client_info: Implementation {
                name: "mcp-runtime".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                ..Default::default()
            },
            timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(30 * 60),
            probe_timeout: Duration::from_secs(5),
            log_level: None,
            input_handler: None,
            input_kinds: None,
            sampling: None,
            roots: None,
            extensions: Map::new(),
            max_input_rounds: 8,
            on_change: Vec::new(),
            on_progress: Vec::new(),
            protocol: ProtocolMode::Auto,
            errors: Vec::new(),
        }
    }
}

impl ClientBuilder {
    /// The server's name, used in logs and shown with input requests.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// How this client introduces itself (`clientInfo`).
    pub fn client_info(mut self, info: Implementation) -> Self {
        self.client_info = info;
        self
    }
    /// How long a request may go without an answer or progress (default 60s). Progress
    /// reports reset it, up to [`max_timeout`](Self::max_timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// The hard limit for any request, progress or not (default 30 minutes).
    pub fn max_timeout(mut self, max: Duration) -> Self {
        self.max_timeout = max;
        self
    }
    /// How long a `server/discover` probe may go unanswered over a message stream
    /// (stdio, custom transports) before the client sends `initialize` as well, for
    /// older servers that ignore requests before the handshake (default 5s). It never
    /// decides the era: the client keeps waiting for both answers, with the ordinary
    /// [`timeout`](Self::timeout), and a slow server is detected whatever its era.
    /// The clock starts once the transport is ready (the server process started).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }
    /// Asks the server for log messages at this level and above; they are written
    /// through `tracing` (target `mcp_runtime::server_log`). Without a level servers
    /// send none.
    pub fn log_level(mut self, level: LogLevel) -> Self {
        self.log_level = Some(level);
        self
    }
    /// Answers the server's requests for input from a person (elicitation), in both eras.
    pub fn input_handler(mut self, handler: impl InputHandler) -> Self {
        self.input_handler = Some(Arc::new(handler));
        self
    }
    /// Which kinds of input requests to accept (default: all, once a handler is set).
    /// [`InputKinds::NONE`] declares none and declines anything asked at once.
    pub fn input_kinds(mut self, kinds: InputKinds) -> Self {
        self.input_kinds = Some(kinds);
        self
    }
    /// Answers `sampling/createMessage`.
    pub fn sampling_handler(mut self, handler: impl SamplingHandler) -> Self {
        self.sampling = Some(Arc::new(handler));
        self
    }
    /// Answers `roots/list`.
    pub fn roots(mut self, handler: impl RootsHandler) -> Self {
        self.roots = Some(Arc::new(handler));
        self
    }
    /// Declares a protocol extension the application supports, such as
    /// `io.modelcontextprotocol/ui`; `settings` go to the server as written. Names need
    /// a vendor prefix (`com.example/name`).
    pub fn extension(mut self, name: impl Into<String>, settings: Value) -> Self {
        let name = name.into();
        match name.split_once('/') {
            Some((prefix, rest))
                if !prefix.is_empty() && !rest.is_empty() && prefix.contains('.') =>
            {
                self.extensions.insert(name, settings);
            }
            _ => self.errors.push(format!(
                "extension `{name}` needs a vendor prefix, like `com.example/{name}`"
            )),
        }
        self
    }
    /// The most rounds of input a request may ask for before it fails (default 8).
    pub fn max_input_rounds(mut self, rounds: u32) -> Self {
        self.max_input_rounds = rounds;
        self
    }
    /// Called when the server announces a change. It runs on the connection's reading
    /// task: keep it short, spawn for long work.
    pub fn on_change(mut self, f: impl Fn(&Change) + Send + Sync + 'static) -> Self {
        self.on_change.push(Arc::new(f));
        self
    }
    /// Called with every progress report, of any request.
    pub fn on_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.on_progress.push(Arc::new(f));
        self
    }
    /// Which protocol era to speak (default: detect).
    pub fn protocol(mut self, mode: ProtocolMode) -> Self {
        self.protocol = mode;
        self
    }

    /// Starts a local server over stdio (lazily, on the first request).
    #[cfg(feature = "stdio")]
    pub fn stdio(self, config: crate::transport::stdio::StdioConfig) -> Result<Client> {
        let name = if self.name == "mcp" {
            Some(config.program().to_owned())
        } else {
            None
        };
        let builder = match name {
            Some(n) => self.name(n),
            None => self,
        };
        builder.build(crate::transport::stdio::StdioTransport::new(config))
    }

    /// Talks to a server over Streamable HTTP (or HTTP+SSE for 2024-11-05 servers).
    /// Fails on a URL that cannot work (plain `http://` to a non-loopback host, say).
    #[cfg(feature = "http")]
    pub fn http(self, config: crate::transport::http::HttpConfig) -> Result<Client> {
        let builder = if self.name == "mcp" {
            let host = config
                .url()
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.host().map(str::to_owned));
            match host {
                Some(h) => self.name(h),
                None => self,
            }
        } else {
            self
        };
        let transport = crate::transport::http::HttpTransport::new(config)?;
        builder.build(transport)
    }

    /// Builds the client over any transport. Nothing is sent until the first request.
    pub fn build(self, transport: impl Transport) -> Result<Client> {
        if !self.errors.is_empty() {
            return Err(Error::config(self.errors.join("; ")));
        }
        if self.timeout.is_zero() {
            return Err(Error::config("the timeout must be more than zero"));
        }
        let kinds = match (&self.input_handler, self.input_kinds) {
            (None, _) => InputKinds::NONE,
            (Some(_), Some(k)) => k,
            (Some(_), None) => InputKinds::ALL,
        };
        let mut caps = Map::new();
        if let Some(e) = kinds.capability() {
            caps.insert("elicitation".into(), e);
        }
        if self.sampling.is_some() {
            caps.insert("sampling".into(), json!({}));
        }
        if self.roots.is_some() {
            caps.insert("roots".into(), json!({}));
        }
        if !self.extensions.is_empty() {
            caps.insert("extensions".into(), Value::Object(self.extensions.clone()));
        }
        let client_info = serde_json::to_value(&self.client_info).unwrap_or(Value::Null);
        let inner = Arc::new_cyclic(|weak| Inner {
            incoming: Incoming(Arc::new(Inbox {
                inner: weak.clone(),
            })),
            transport: Box::new(transport),
            name: self.name,
            client_info,
            capabilities: Value::Object(caps),
            timeout: self.timeout,
            max_timeout: self.max_timeout.max(self.timeout),
            probe_timeout: self.probe_timeout,
            log_level: self.log_level,
            input: self.input_handler,
            input_kinds: kinds,
            sampling: self.sampling,
            roots: self.roots,
            max_input_rounds: self.max_input_rounds,
            on_change: self.on_change,
            on_progress: self.on_progress,
            protocol: self.protocol,
            next_id: AtomicI64::new(1),
            connect_lock: tokio::sync::Mutex::new(()),
            state: Mutex::new(None),
            progress: Mutex::new(HashMap::new()),
            cache: Mutex::new(HashMap::new()),
            cache_generation: AtomicU64::new(0),
            listens: Mutex::new(HashMap::new()),
            session_reset: Notify::new(),
            tool_headers: Mutex::new(None),
            task_waiters: Mutex::new(HashMap::new()),
            tool_info: Mutex::new(HashMap::new()),
            task_reported: Mutex::new(HashMap::new()),
        });
        Ok(Client {
            inner,
            life: Arc::new(Life::default()),
        })
    }
}

/// A client for one MCP server.
///
/// Cheap to clone (clones share the connection). Requests may run concurrently: they
/// are pipelined on the one connection. The session starts on the first request:
/// the client probes with `server/discover` and falls back to the `initialize`
/// handshake for servers before 2026-07-28.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run() -> mcp_runtime::Result<()> {
/// use mcp_runtime::{Client, StdioConfig};
/// let client = Client::builder().stdio(
///     StdioConfig::new("npx").args(["-y", "@modelcontextprotocol/server-everything"]),
/// )?;
/// for tool in client.list_tools().await? {
///     println!("{}: {}", tool.name, tool.description.unwrap_or_default());
/// }
/// let result = client.call_tool("echo", serde_json::json!({"message": "hi"})).await?;
/// println!("{}", result.text());
/// client.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    life: Arc<Life>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// The session's inbox, handed to the transport with each request.
    incoming: Incoming,
    transport: Box<dyn Transport>,
    name: String,
    client_info: Value,
    capabilities: Value,
    timeout: Duration,
    max_timeout: Duration,
    probe_timeout: Duration,
    log_level: Option<LogLevel>,
    input: Option<Arc<dyn InputHandler>>,
    input_kinds: InputKinds,
    sampling: Option<Arc<dyn SamplingHandler>>,
    roots: Option<Arc<dyn RootsHandler>>,
    max_input_rounds: u32,
    on_change: Vec<ChangeCallback>,
    on_progress: Vec<ProgressCallback>,
    protocol: ProtocolMode,
    next_id: AtomicI64,
    connect_lock: tokio::sync::Mutex<()>,
    state: Mutex<Option<Arc<ServerDetails>>>,
    progress: Mutex<HashMap<Id, Arc<CallProgress>>>,
    cache: Mutex<HashMap<String, CacheEntry>>,
    cache_generation: AtomicU64,
    listens: Mutex<HashMap<Id, ListenSlot>>,
    session_reset: Notify,
    /// For transports that mirror arguments into headers: each listed tool's
    /// `x-mcp-header` annotations. `None` until the tools are listed.
    tool_headers: Mutex<Option<HashMap<String, Vec<ParamHeader>>>>,
    /// Woken when a task's status arrives, for those waiting on it.
    task_waiters: Mutex<HashMap<String, Arc<Notify>>>,
    /// What the last tool list said of each tool beyond its definition.
    tool_info: Mutex<HashMap<String, ToolInfo>>,
    /// The last task status reported to `on_change`, per task (state and message), so
    /// a status pushed and also polled is reported once.
    task_reported: Mutex<HashMap<String, (TaskState, Option<String>)>>,
}

/// What the session keeps of a listed tool.
#[derive(Clone, Default)]
struct ToolInfo {
    /// Its MCP Apps UI resource.
    ui_resource: Option<String>,
    /// Its `execution.taskSupport` (2025-11-25).
    task_support: Option<String>,
}

/// An open `subscriptions/listen` request: told when the server acknowledges it, and
/// when the server ends it with `notifications/cancelled`.
struct ListenSlot {
    ack: Option<tokio::sync::oneshot::Sender<Value>>,
    ended: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Owned by every clone of a [`Client`]: when the last one goes, the listener stops.
#[derive(Default)]
struct Life {
    listener: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Life {
    fn stop_listener(&self) {
        if let Some(h) = lock(&self.listener).take() {
            h.abort();
        }
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        self.stop_listener();
    }
}

struct CallProgress {
    callback: Option<ProgressCallback>,
    notify: Notify,
}

struct CacheEntry {
    expires: Instant,
    value: Arc<Vec<Value>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `tools/call` in the making: await it, or set options first.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run(client: mcp_runtime::Client) -> mcp_runtime::Result<()> {
/// use std::time::Duration;
/// let result = client
///     .call_tool("trigger-long-running-operation", serde_json::json!({"duration": 5, "steps": 5}))
///     .timeout(Duration::from_secs(10))
///     .on_progress(|p| println!("{} of {:?}", p.progress, p.total))
///     .await?;
/// println!("{}", result.text());
/// # Ok(()) }
/// ```
#[must_use = "a call does nothing until awaited"]
pub struct CallTool<'a> {
    client: &'a Client,
    name: String,
    arguments: Value,
    options: RequestOptions,
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
}

impl<'a> IntoFuture for CallTool<'a> {
    type Output = Result<CallToolResult>;
    type IntoFuture = BoxFuture<'a, Result<CallToolResult>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let inner = &self.client.inner;
            if !matches!(self.arguments, Value::Null | Value::Object(_)) {
                return Err(Error::config(
                    "tool arguments must be a JSON object (or null for none)",
                ));
            }
            let mut options = self.options;
            options.headers = inner.param_headers(&self.name, &self.arguments).await?;
            let mut params = Map::new();
            params.insert("name".into(), Value::String(self.name.clone()));
            if let Value::Object(_) = self.arguments {
                params.insert("arguments".into(), self.arguments.clone());
            }
            // Answers for a task that paused for input: they go to the task, and the
            // call waits for it.
            if let Some(id) = options.answered_task() {
                let mut r = self.client.task(id).wait_with(&options).await?;
                r.ui_resource = inner.ui_resource_for(&self.name).await;
                return Ok(r);
            }
            // 2025-11-25: a tool the server runs only as a task is started as one and
            // waited for.
            let details = inner.ensure().await?;
            let runs_tasks = details
                .capabilities
                .0
                .pointer("/tasks/requests/tools/call")
                .is_some();
            if details.era == Era::Legacy
                && runs_tasks
                && inner.task_support(&self.name).await?.as_deref() == Some("required")
            {
                return match self
                    .client
                    .start_tool(&self.name, self.arguments.clone())
                    .await?
                {
                    Started::Task(task) => task.wait_with(&options).await,
                    Started::Done(result) => Ok(*result),
                };
            }
            let v = match inner.call("tools/call", params.clone(), &options).await {
                // The server says the headers do not match the arguments: its tool
                // list changed. List again and retry once.
                Err(e)
                    if matches!(
                        e.code(),
                        Some(code::HEADER_MISMATCH | code::HEADER_MISMATCH_DRAFT)
                    ) && inner.transport.mirrors_param_headers() =>
                {
                    inner.invalidate("tools/");
                    *lock(&inner.tool_headers) = None;
                    options.headers = inner.param_headers(&self.name, &self.arguments).await?;
                    inner.call("tools/call", params, &options).await?
                }
                other => other?,
            };
            let mut r = CallToolResult::from_value(v)?;
            r.ui_resource = inner.ui_resource_for(&self.name).await;
            Ok(r)
        })
    }
}

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The name of the server, as configured.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Starts the session now (it otherwise starts on the first request) and returns
    /// what the server said about itself.
    pub async fn connect(&self) -> Result<Arc<ServerDetails>> {
        self.inner.ensure().await
    }

    /// What the server said about itself, if the session has started.
    pub fn server(&self) -> Option<Arc<ServerDetails>> {
        lock(&self.inner.state).clone()
    }

    /// The server's instructions for using it (starts the session if needed).
    pub async fn instructions(&self) -> Result<Option<String>> {
        Ok(self.connect().await?.instructions.clone())
    }

    /// The version the server reports for itself (starts the session if needed).
    pub async fn server_version(&self) -> Result<Option<String>> {
        let d = self.connect().await?;
        Ok(Some(d.info.version.clone()).filter(|v| !v.is_empty()))
    }

    /// Every tool the server offers (all pages). Cached while the server's `ttlMs`
    /// allows, until the server says the list changed.
    ///
    /// Over HTTP, a tool whose `x-mcp-header` annotations are invalid is left out, with
    /// a warning: the server could not be called correctly with it.
    pub async fn list_tools(&self) -> Result<Vec<Tool>> {
        self.inner.list_tools().await
    }

    /// Calls a tool. `arguments` is a JSON object (or `Value::Null` for none). Await the
    /// result, or set options on it first (timeout, progress, cancellation).
    pub fn call_tool(&self, name: impl Into<String>, arguments: Value) -> CallTool<'_> {
        CallTool {
            client: self,
            name: name.into(),
            arguments,
            options: RequestOptions::default(),
        }
    }

    /// Every prompt the server offers (all pages).
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>> {
        let items = self.inner.list("prompts/list", "prompts").await?;
        Ok(typed_items(&self.inner.name, "prompt", &items))
    }

    /// Fills in a prompt with arguments and returns its messages.
    pub async fn get_prompt<I, K, V>(&self, name: &str, arguments: I) -> Result<GetPromptResult>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let args: Map<String, Value> = arguments
            .into_iter()
            .map(|(k, v)| (k.into(), Value::String(v.into())))
            .collect();
        let mut params = Map::new();
        params.insert("name".into(), name.into());
        if !args.is_empty() {
            params.insert("arguments".into(), Value::Object(args));
        }
        let v = self
            .inner
            .call("prompts/get", params, &RequestOptions::default())
            .await?;
        model::from_value("prompts/get", v)
    }

    /// Every resource the server lists (all pages).
    pub async fn list_resources(&self) -> Result<Vec<Resource>> {
        let items = self.inner.list("resources/list", "resources").await?;
        Ok(typed_items(&self.inner.name, "resource", &items))
    }

    /// Every resource template the server offers (all pages).
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        let items = self
            .inner
            .list("resources/templates/list", "resourceTemplates")
            .await?;
        Ok(typed_items(&self.inner.name, "resource template", &items))
    }

    /// Reads a resource. Cached while the server's `ttlMs` allows, until the server
    /// says it changed.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let key = format!("resources/read {uri}");
        if let Some(hit) = self.inner.cached(&key) {
            if let Some(v) = hit.first() {
                return model::from_value("resources/read", v.clone());
            }
        }
        let generation = self.inner.cache_generation.load(Ordering::Acquire);
        let mut params = Map::new();
        params.insert("uri".into(), uri.into());
        let v = self
            .inner
            .call("resources/read", params, &RequestOptions::default())
            .await?;
        let ttl = ttl_of(&v);
        if ttl > 0 {
            self.inner
                .store(key, generation, ttl, Arc::new(vec![v.clone()]));
        }
        model::from_value("resources/read", v)
    }

    /// Reads an MCP App (the UI resource a tool's results are shown with, see
    /// [`CallToolResult::ui_resource`]) in one call: its HTML and how to frame it.
    /// Fails when the resource holds no HTML.
    pub async fn read_ui(&self, uri: &str) -> Result<crate::model::UiResource> {
        let read = self.read_resource(uri).await?;
        crate::model::UiResource::from_read(uri, &read).ok_or_else(|| {
            Error::invalid_response(format!(
                "{uri} holds no HTML ({} expected)",
                crate::model::MCP_APP_MIME_TYPE
            ))
        })
    }

    /// Suggests values for an argument of a prompt or resource template.
    /// `context` holds the values of arguments already chosen.
    pub async fn complete(
        &self,
        reference: CompletionRef,
        argument: &str,
        value: &str,
        context: &[(&str, &str)],
    ) -> Result<Completion> {
        let mut params = Map::new();
        params.insert("ref".into(), reference.to_value());
        params.insert("argument".into(), json!({"name": argument, "value": value}));
        if !context.is_empty() {
            let args: Map<String, Value> = context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
                .collect();
            params.insert("context".into(), json!({ "arguments": args }));
        }
        let mut v = self
            .inner
            .call("completion/complete", params, &RequestOptions::default())
            .await?;
        let c = v.get_mut("completion").map(Value::take).ok_or_else(|| {
            Error::invalid_response("completion/complete result has no `completion`")
        })?;
        model::from_value("completion/complete", c)
    }

    /// Sends any request and returns its raw result, with the session's `_meta`,
    /// timeouts, progress and multi-round input handled. For methods this crate has no
    /// typed call for.
    pub async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<Value> {
        self.inner.call(method, params, &options).await
    }

    /// Pings the server (servers before 2026-07-28; newer ones have no `ping`, and get a
    /// `server/discover` instead).
    pub async fn ping(&self) -> Result<()> {
        let d = self.inner.ensure().await?;
        let method = match d.era {
            Era::Legacy => "ping",
            Era::Modern => "server/discover",
        };
        self.inner
            .call(method, Map::new(), &RequestOptions::default())
            .await
            .map(|_| ())
    }

    /// Listens for the server's changes until [`close`](Self::close) (or until the last
    /// clone of the client is dropped), so `on_change` callbacks run as changes happen
    /// and cached lists follow the server. `resources` are URIs whose content changes
    /// to hear about; a later call replaces them. Returns once the server confirmed.
    ///
    /// 2026-07-28 servers announce changes only on a `subscriptions/listen` stream,
    /// which this keeps open and reopens when it breaks (after a restart too); once it
    /// is back, `on_change` runs for everything listened to, since changes made
    /// meanwhile are lost. Older servers announce list changes on their own; for them
    /// this subscribes to the resources (`resources/subscribe`), again after a restart.
    ///
    /// Without resources, does nothing for a server that announces no changes. Fails
    /// when the server cannot be reached, does not send updates for a resource, or has
    /// no way to send anything between requests (an older HTTP server without a
    /// standalone event stream): an error for which `is_unsupported()` is true, never
    /// a silent success.
    pub async fn listen(&self, resources: &[&str]) -> Result<()> {
        self.listen_for(resources, &[]).await
    }

    /// [`listen`](Self::listen) to resources and to tasks (by id, see [`Task::id`]):
    /// each status change of a task reaches `on_change` as [`Change::Task`], and wakes
    /// whoever [`wait`](Task::wait)s for it. After a reconnect, every listened task is
    /// reported with its current status. 2026-07-28 servers push task statuses on the
    /// listen stream (with the tasks extension declared); for older servers the
    /// listener asks at each task's poll interval (and takes the statuses they push).
    pub async fn listen_for(&self, resources: &[&str], tasks: &[&str]) -> Result<()> {
        self.life.stop_listener();
        let details = self.inner.ensure().await?;
        let uris: Vec<String> = resources.iter().map(|s| (*s).to_owned()).collect();
        let task_ids: Vec<String> = tasks.iter().map(|s| (*s).to_owned()).collect();
        let caps = &details.capabilities;
        let announces = caps.tools_list_changed()
            || caps.prompts_list_changed()
            || caps.resources_list_changed();
        if uris.is_empty() && task_ids.is_empty() && !announces {
            return Ok(());
        }
        if !task_ids.is_empty() {
            let speaks_tasks = match details.era {
                Era::Modern => self.inner.declares(TASKS_EXTENSION),
                Era::Legacy => caps.0.get("tasks").is_some_and(Value::is_object),
            };
            if !speaks_tasks {
                return Err(Error::unsupported(format!(
                    "{} sends no task updates{}",
                    self.inner.name,
                    if details.era == Era::Modern {
                        " (declare the tasks extension, io.modelcontextprotocol/tasks)"
                    } else {
                        ""
                    }
                )));
            }
        }
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let inner = self.inner.clone();
        let task = match details.era {
            Era::Modern => tokio::spawn(listen_modern(
                inner,
                uris.clone(),
                task_ids.clone(),
                ready_tx,
            )),
            Era::Legacy => {
                if !uris.is_empty() && !caps.resources_subscribe() {
                    return Err(Error::unsupported(format!(
                        "{} does not send updates for {}",
                        self.inner.name,
                        uris.join(", ")
                    )));
                }
                // Changes reach older servers' clients only on a channel open between
                // requests (an HTTP server's standalone event stream): make sure there is one.
                if !uris.is_empty() || announces {
                    self.inner.transport.listen_ready().await?;
                }
                tokio::spawn(listen_legacy(
                    inner,
                    uris.clone(),
                    task_ids.clone(),
                    ready_tx,
                ))
            }
        };
        *lock(&self.life.listener) = Some(task.abort_handle());
        let agreed = match ready_rx.await {
            Ok(Ok(agreed)) => agreed,
            Ok(Err(e)) => {
                self.life.stop_listener();
                return Err(e);
            }
            Err(_) => {
                self.life.stop_listener();
                return Err(Error::closed(
                    "the listener stopped before the server confirmed",
                ));
            }
        };
        let confirmed: Vec<&str> = agreed
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let confirmed_tasks: Vec<&str> = agreed
            .get("taskIds")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let missing: Vec<&str> = uris
            .iter()
            .map(String::as_str)
            .filter(|u| !confirmed.contains(u))
            .chain(
                task_ids
                    .iter()
                    .map(String::as_str)
                    .filter(|t| !confirmed_tasks.contains(t)),
            )
            .collect();
        if !missing.is_empty() {
            self.life.stop_listener();
            return Err(Error::unsupported(format!(
                "{} does not send updates for {}",
                self.inner.name,
                missing.join(", ")
            )));
        }
        Ok(())
    }

    /// Stops listening (see [`listen`](Self::listen)).
    pub fn stop_listening(&self) {
        self.life.stop_listener();
    }

    /// The OAuth authorization of this server (HTTP servers configured with
    /// [`HttpConfig::oauth`](crate::HttpConfig::oauth)): for web applications that send
    /// the user to the authorization server themselves.
    #[cfg(feature = "http")]
    pub fn authorization(&self) -> Result<crate::auth::Authorization<'_>> {
        self.inner.transport.authorization().ok_or_else(|| {
            Error::config(format!("{} is not configured for OAuth", self.inner.name))
        })
    }

    /// Closes the connection: stops a stdio server's process. The next request
    /// connects again.
    pub async fn close(&self) -> Result<()> {
        self.life.stop_listener();
        let _connecting = self.inner.connect_lock.lock().await;
        self.inner.reset();
        self.inner.transport.close().await
    }
}

fn typed_items<T: serde::de::DeserializeOwned>(
    server: &str,
    what: &str,
    items: &[Value],
) -> Vec<T> {
    items
        .iter()
        .filter_map(|v| match serde_json::from_value::<T>(v.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(server, error = %e, "skipped a malformed {what} in the server's list");
                None
            }
        })
        .collect()
}

fn ttl_of(v: &Value) -> u64 {
    v.get("ttlMs").and_then(Value::as_u64).unwrap_or(0)
}

struct CancelGuard {
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
            method: "notifications/cancelled".to_owned(),
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
fn declare_elicitation(meta: &mut Map<String, Value>) {
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
struct TaskGuard {
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
                .call("tasks/cancel", params, &RequestOptions::default())
                .await
            {
                tracing::debug!(error = %e, "could not cancel a task");
            }
        });
    }
}

struct ProgressGuard<'a> {
    inner: &'a Inner,
    token: Option<Id>,
}

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            lock(&self.inner.progress).remove(&t);
        }
    }
}

impl Inner {
    async fn list_tools(self: &Arc<Self>) -> Result<Vec<Tool>> {
        let items = self.list("tools/list", "tools").await?;
        let tools: Vec<Tool> = typed_items(&self.name, "tool", &items);
        *lock(&self.tool_info) = tools
            .iter()
            .map(|t| {
                let info = ToolInfo {
                    ui_resource: t.ui_resource_uri(),
                    task_support: t
                        .extra
                        .get("execution")
                        .and_then(|e| e.get("taskSupport"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                };
                (t.name.clone(), info)
            })
            .collect();
        if !self.transport.mirrors_param_headers() {
            return Ok(tools);
        }
        let mut map = HashMap::new();
        let mut kept = Vec::with_capacity(tools.len());
        for tool in tools {
            match headers::param_headers(&tool.input_schema) {
                Ok(h) => {
                    map.insert(tool.name.clone(), h);
                    kept.push(tool);
                }
                Err(why) => {
                    tracing::warn!(server = %self.name, tool = %tool.name, "left out a tool with an invalid x-mcp-header: {why}")
                }
            }
        }
        *lock(&self.tool_headers) = Some(map);
        Ok(kept)
    }

    /// The `Mcp-Param-*` headers for a call, listing the tools first if needed.
    async fn param_headers(
        self: &Arc<Self>,
        tool: &str,
        arguments: &Value,
    ) -> Result<Vec<(String, String)>> {
        if !self.transport.mirrors_param_headers() {
            return Ok(Vec::new());
        }
        if lock(&self.tool_headers).is_none() {
            match self.list_tools().await {
                Ok(_) => {}
                // The server answered, but not with a tool list: call without headers.
                Err(e) if e.is_protocol() || e.is_invalid_response() => {
                    tracing::debug!(server = %self.name, error = %e, "could not list tools to find their header arguments")
                }
                // No session (unreachable, not authorized): the call would fail the
                // same way, after asking again.
                Err(e) => return Err(e),
            }
        }
        let map = lock(&self.tool_headers);
        Ok(map
            .as_ref()
            .and_then(|m| m.get(tool))
            .map(|hs| {
                hs.iter()
                    .filter_map(|h| {
                        headers::header_value(arguments, &h.path)
                            .map(|v| (format!("Mcp-Param-{}", h.name), v))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn reset(&self) {
        *lock(&self.state) = None;
        self.invalidate_all();
        self.session_reset.notify_waiters();
    }

    fn invalidate_all(&self) {
        self.cache_generation.fetch_add(1, Ordering::AcqRel);
        lock(&self.cache).clear();
        *lock(&self.tool_headers) = None;
    }

    fn invalidate(&self, prefix: &str) {
        self.cache_generation.fetch_add(1, Ordering::AcqRel);
        lock(&self.cache).retain(|k, _| !k.starts_with(prefix));
    }

    fn cached(&self, key: &str) -> Option<Arc<Vec<Value>>> {
        let cache = lock(&self.cache);
        cache
            .get(key)
            .filter(|e| e.expires > Instant::now())
            .map(|e| e.value.clone())
    }

    fn store(&self, key: String, generation: u64, ttl_ms: u64, value: Arc<Vec<Value>>) {
        let mut cache = lock(&self.cache);
        // A change announced while the request ran makes its answer stale already.
        if self.cache_generation.load(Ordering::Acquire) != generation {
            return;
        }
        cache.insert(
            key,
            CacheEntry {
                expires: Instant::now() + Duration::from_millis(ttl_ms),
                value,
            },
        );
    }

    async fn ensure(self: &Arc<Self>) -> Result<Arc<ServerDetails>> {
        if let Some(d) = lock(&self.state).clone() {
            return Ok(d);
        }
        let _connecting = self.connect_lock.lock().await;
        if let Some(d) = lock(&self.state).clone() {
            return Ok(d);
        }
        let d = Arc::new(self.negotiate().await?);
        tracing::debug!(server = %self.name, era = ?d.era, version = %d.protocol_version, "session started");
        *lock(&self.state) = Some(d.clone());
        Ok(d)
    }

    fn modern_meta(&self, version: &str, log_level: Option<LogLevel>) -> Map<String, Value> {
        let mut meta = Map::new();
        meta.insert(meta::VERSION.into(), version.into());
        meta.insert(meta::CLIENT_CAPABILITIES.into(), self.capabilities.clone());
        meta.insert(meta::CLIENT_INFO.into(), self.client_info.clone());
        if let Some(l) = log_level {
            meta.insert(meta::LOG_LEVEL.into(), l.as_str().into());
        }
        meta
    }

    /// Decides the era from what the server answers (see [`crate::negotiate`]).
    async fn negotiate(self: &Arc<Self>) -> Result<ServerDetails> {
        // Start the server (a stdio process) before any clock of the probe runs.
        self.transport.connect(&self.incoming).await?;
        match self.protocol {
            ProtocolMode::Legacy => return self.handshake(false).await,
            ProtocolMode::Modern => return self.probe(false).await,
            ProtocolMode::Auto => {}
        }
        if self.transport.era_hint() == Some(Era::Legacy) {
            // Known to be an older server: skip the probe, unless that is no longer so.
            match negotiate::handshake(
                &self.name,
                self.initialize_request(LEGACY_VERSIONS[0]).await,
                LEGACY_VERSIONS[0],
            ) {
                Handshake::Legacy(v, version) => return self.finish_handshake(v, version).await,
                Handshake::Modern(version, _) => return self.discover_at(version).await,
                other => {
                    tracing::debug!(server = %self.name, outcome = ?other, "initialize failed where it worked before; probing again")
                }
            }
        }
        self.probe(true).await
    }

    /// `server/discover`, at the newest version first. With `fallback`, an answer that
    /// does not make the server modern leads to the handshake, and a probe left
    /// unanswered for `probe_timeout` sends `initialize` too (see [`Self::race`]).
    async fn probe(self: &Arc<Self>, fallback: bool) -> Result<ServerDetails> {
        let version = MODERN_VERSIONS[0];
        // Over transports where a request may go unanswered (a stdio server that
        // ignores requests before `initialize`), silence must not hang the session.
        let outcome = if fallback && !self.transport.answers_every_request() {
            let discover = self.discover(version);
            tokio::pin!(discover);
            tokio::select! {
                biased;
                answer = &mut discover => negotiate::probe(&self.name, answer, version),
                () = tokio::time::sleep(self.probe_timeout) => {
                    return self.race(discover, version).await;
                }
            }
        } else {
            negotiate::probe(&self.name, self.discover(version).await, version)
        };
        self.after_probe(outcome, fallback).await
    }

    async fn after_probe(
        self: &Arc<Self>,
        outcome: Probe,
        fallback: bool,
    ) -> Result<ServerDetails> {
        match outcome {
            Probe::Modern(v, version) => Ok(discovered(v, version)),
            Probe::Retry(version, _) => self.discover_at(version).await,
            Probe::NotModern(e) if fallback => {
                tracing::debug!(server = %self.name, error = %e, "server/discover did not find a 2026-07-28 server; trying the initialize handshake");
                self.handshake(false).await
            }
            // No answer, or no connection: say that, not that the server is old.
            Probe::NotModern(e) if e.is_timeout() || e.is_transport() => Err(e),
            Probe::NotModern(e) => Err(Error::unsupported(format!(
                "{} does not speak the 2026-07-28 protocol (ProtocolMode::Modern): {e}",
                self.name
            ))
            .with_source(e)),
            Probe::Fail(e) => Err(e),
        }
    }

    /// `server/discover` at a version the server listed, asked again while it lists
    /// another one (a bounded number of times).
    async fn discover_at(self: &Arc<Self>, mut version: String) -> Result<ServerDetails> {
        let mut last = None;
        for _ in 0..3 {
            match negotiate::probe(&self.name, self.discover(&version).await, &version) {
                Probe::Modern(v, version) => return Ok(discovered(v, version)),
                Probe::Retry(next, e) => {
                    version = next;
                    last = Some(e);
                }
                Probe::NotModern(e) | Probe::Fail(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::unsupported(format!("{} keeps refusing server/discover", self.name))
        }))
    }

    /// `server/discover` has gone unanswered for `probe_timeout`: the server is slow,
    /// or ignores requests before the handshake. Send `initialize` too and decide by
    /// whichever answer settles the era; the probe keeps its own, ordinary timeouts.
    async fn race(
        self: &Arc<Self>,
        mut discover: std::pin::Pin<&mut impl Future<Output = Result<Value>>>,
        version: &str,
    ) -> Result<ServerDetails> {
        tracing::debug!(server = %self.name, waited = ?self.probe_timeout, "server/discover not answered yet; sending initialize as well");
        let offered = LEGACY_VERSIONS[0];
        let init = self.initialize_request(offered);
        tokio::pin!(init);
        let mut probe: Option<Probe> = None;
        let mut shake: Option<Handshake> = None;
        while probe.is_none() || shake.is_none() {
            tokio::select! {
                biased;
                answer = &mut discover, if probe.is_none() => {
                    match negotiate::probe(&self.name, answer, version) {
                        Probe::Modern(v, version) => return Ok(discovered(v, version)),
                        Probe::Retry(version, _) => return Box::pin(self.discover_at(version)).await,
                        Probe::Fail(e) => return Err(e),
                        not_modern => probe = Some(not_modern),
                    }
                }
                answer = &mut init, if shake.is_none() => {
                    match negotiate::handshake(&self.name, answer, offered) {
                        Handshake::Legacy(v, version) => return self.finish_handshake(v, version).await,
                        // The server serves the modern era. Ask again at the version it
                        // named rather than wait on a probe it may have dropped while
                        // starting; a late answer to the first one is ignored.
                        Handshake::Modern(version, _) => return Box::pin(self.discover_at(version)).await,
                        other => shake = Some(other),
                    }
                }
            }
        }
        // Neither answer settled the era (a modern answer returned above).
        match (probe, shake) {
            (_, Some(Handshake::Retry(version))) => self.handshake_at(version, false).await,
            (_, Some(Handshake::Fail(e))) => Err(e),
            (Some(Probe::NotModern(e) | Probe::Fail(e) | Probe::Retry(_, e)), _) => Err(e),
            _ => Err(Error::unsupported(format!(
                "{} settled no protocol era",
                self.name
            ))),
        }
    }

    /// One `server/discover` request at `version`, with the session's ordinary timeouts.
    async fn discover(self: &Arc<Self>, version: &str) -> Result<Value> {
        let mut params = Map::new();
        params.insert(
            "_meta".into(),
            Value::Object(self.modern_meta(version, None)),
        );
        let request = Request {
            id: Id::Number(self.next_id()),
            method: "server/discover".into(),
            params: Value::Object(params),
        };
        self.exchange(version, request, &RequestOptions::default(), None, false)
            .await
    }

    /// The legacy handshake. With `modern_ok`, a server that refuses it listing a
    /// 2026-07-28 version is spoken to in that era.
    async fn handshake(self: &Arc<Self>, modern_ok: bool) -> Result<ServerDetails> {
        self.handshake_at(LEGACY_VERSIONS[0].to_owned(), modern_ok)
            .await
    }

    async fn handshake_at(
        self: &Arc<Self>,
        mut offered: String,
        modern_ok: bool,
    ) -> Result<ServerDetails> {
        for _ in 0..2 {
            let answer = self.initialize_request(&offered).await;
            match negotiate::handshake(&self.name, answer, &offered) {
                Handshake::Legacy(v, version) => return self.finish_handshake(v, version).await,
                Handshake::Retry(version) => offered = version,
                Handshake::Modern(version, _) if modern_ok => {
                    return Box::pin(self.discover_at(version)).await
                }
                Handshake::Modern(version, e) => {
                    let _ = self.transport.close().await;
                    let why = if self.protocol == ProtocolMode::Legacy {
                        "use ProtocolMode::Auto or ProtocolMode::Modern for it"
                    } else {
                        "but its server/discover failed"
                    };
                    return Err(Error::unsupported(format!(
                        "{} refused the initialize handshake: it speaks {version}; {why}",
                        self.name
                    ))
                    .with_source(e));
                }
                Handshake::Fail(e) => {
                    if e.is_unsupported() {
                        let _ = self.transport.close().await;
                    }
                    return Err(e);
                }
            }
        }
        Err(Error::unsupported(format!(
            "{} keeps refusing the initialize handshake",
            self.name
        )))
    }

    /// One `initialize` request offering `version`.
    async fn initialize_request(self: &Arc<Self>, version: &str) -> Result<Value> {
        let request = Request {
            id: Id::Number(self.next_id()),
            method: "initialize".into(),
            params: json!({
                "protocolVersion": version,
                "capabilities": self.capabilities,
                "clientInfo": self.client_info,
            }),
        };
        self.exchange(version, request, &RequestOptions::default(), None, false)
            .await
    }

    /// Completes the handshake after a successful `initialize`.
    async fn finish_handshake(
        self: &Arc<Self>,
        v: Value,
        version: String,
    ) -> Result<ServerDetails> {
        let details = ServerDetails {
            era: Era::Legacy,
            protocol_version: version.clone(),
            capabilities: ServerCapabilities(v.get("capabilities").cloned().unwrap_or(Value::Null)),
            info: v
                .get("serverInfo")
                .cloned()
                .and_then(|i| serde_json::from_value(i).ok())
                .unwrap_or_default(),
            instructions: v
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        self.transport
            .notify(
                Notification {
                    method: "notifications/initialized".into(),
                    params: None,
                },
                &version,
            )
            .await?;
        if let Some(level) = self.log_level {
            if details.capabilities.logging() {
                let request = Request {
                    id: Id::Number(self.next_id()),
                    method: "logging/setLevel".into(),
                    params: json!({"level": level.as_str()}),
                };
                if let Err(e) = self
                    .exchange(&version, request, &RequestOptions::default(), None, true)
                    .await
                {
                    tracing::warn!(server = %self.name, error = %e, "logging/setLevel failed");
                }
            }
        }
        Ok(details)
    }

    /// One request, one response: timeouts (reset by progress, up to a hard limit),
    /// cancellation (explicit, by timeout, or by dropping the future).
    async fn exchange(
        self: &Arc<Self>,
        version: &str,
        request: Request,
        opts: &RequestOptions,
        progress: Option<&CallProgress>,
        cancellable: bool,
    ) -> Result<Value> {
        let method = request.method.clone();
        let timeout = opts.timeout.unwrap_or(self.timeout);
        let max = opts.max_timeout.unwrap_or(self.max_timeout).max(timeout);
        let hold = crate::transport::Hold::default();
        let cx = RequestContext {
            version: version.to_owned(),
            timeout: Some(timeout),
            headers: opts.headers.clone(),
            idempotent: !matches!(method.as_str(), "tools/call" | "subscriptions/listen"),
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
        let never = CancellationToken::new();
        let cancel = opts.cancel.as_ref().unwrap_or(&never);
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
                        (false, true, _) => "the request's timeout",
                        (false, false, _) => "ClientBuilder::timeout",
                    };
                    return Err(Error::timeout_of(method, waited, setting));
                }
                () = progressed => {
                    deadline = (Instant::now() + timeout).min(hard);
                }
                () = cancel.cancelled() => {
                    guard.reason = "cancelled by the client";
                    return Err(Error::cancelled(method));
                }
            }
        }
    }

    /// A request of the session: `_meta`, progress, and multi-round input.
    async fn call(
        self: &Arc<Self>,
        method: &str,
        mut params: Map<String, Value>,
        opts: &RequestOptions,
    ) -> Result<Value> {
        let Method {
            input_rounds: mrtr,
            progress: always_progress,
        } = Method::of(method);
        let mut rounds = 0u32;
        let mut answers: Option<(Map<String, Value>, Option<Value>)> = match &opts.answers {
            Some(a) if mrtr && a.pending.task_id().is_none() => {
                Some((a.responses.clone(), a.pending.state().cloned()))
            }
            _ => None,
        };
        let wants_progress =
            always_progress || opts.on_progress.is_some() || !self.on_progress.is_empty();
        let token = wants_progress.then(|| Id::Number(self.next_id()));
        let progress = token.as_ref().map(|t| {
            let p = Arc::new(CallProgress {
                callback: opts.on_progress.clone(),
                notify: Notify::new(),
            });
            lock(&self.progress).insert(t.clone(), p.clone());
            p
        });
        let _progress_guard = ProgressGuard {
            inner: self,
            token: token.clone(),
        };
        loop {
            let details = self.ensure().await?;
            // Only a request that may ask for input is ever sent twice.
            let mut p = if mrtr {
                params.clone()
            } else {
                std::mem::take(&mut params)
            };
            let mut meta = match details.era {
                Era::Modern => {
                    let mut m = self
                        .modern_meta(&details.protocol_version, opts.log_level.or(self.log_level));
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
                None | Some("complete") => return Ok(v),
                Some("input_required") if mrtr => {
                    rounds += 1;
                    if rounds > self.max_input_rounds {
                        return Err(Error::invalid_response(format!(
                            "`{method}` still asked for input after {} rounds; giving up",
                            self.max_input_rounds
                        )));
                    }
                    let requests = v
                        .get_mut("inputRequests")
                        .map(Value::take)
                        .unwrap_or(Value::Null);
                    let state = v.get_mut("requestState").map(Value::take);
                    if opts.pause_input {
                        return Err(Error::input_required(PendingInput::new(
                            &self.name, requests, state, None,
                        )));
                    }
                    let responses = self.answer_all(requests, &[]).await?;
                    answers = Some((responses, state));
                }
                // Some servers mark `tasks/*` answers with it; they are complete.
                Some("task") if method.starts_with("tasks/") => return Ok(v),
                Some("task") if method == "tools/call" && self.declares(TASKS_EXTENSION) => {
                    if opts.keep_task {
                        return Ok(v);
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
    async fn answer_all(&self, requests: Value, skip: &[String]) -> Result<Map<String, Value>> {
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
                        self.name, e.message
                    ))
                })?;
                responses.insert(key, answer);
            }
        }
        Ok(responses)
    }

    fn declares(&self, extension: &str) -> bool {
        self.capabilities
            .get("extensions")
            .and_then(|e| e.get(extension))
            .is_some()
    }

    /// A `tools/call` the server answered with a task (tasks extension), waited for
    /// as if the call had answered: see [`Task::wait`]. Cancelling the call (token,
    /// timeout, drop) cancels the task.
    async fn await_task(self: &Arc<Self>, created: Value, opts: &RequestOptions) -> Result<Value> {
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
            || out.as_ref().is_err_and(Error::is_input_required)
        {
            guard.armed = false;
        }
        out
    }

    /// The UI resource (MCP Apps) of a tool, from the last tool list.
    fn ui_resource_of(&self, tool: &str) -> Option<String> {
        lock(&self.tool_info).get(tool)?.ui_resource.clone()
    }

    /// The UI resource of a tool for its result: with the MCP Apps extension declared,
    /// the tools are listed first when they were not yet.
    async fn ui_resource_for(self: &Arc<Self>, tool: &str) -> Option<String> {
        if self.declares(APPS_EXTENSION) && lock(&self.tool_info).is_empty() {
            if let Err(e) = self.list_tools().await {
                tracing::debug!(server = %self.name, error = %e, "could not list tools for their UI resources");
            }
        }
        self.ui_resource_of(tool)
    }

    async fn list(self: &Arc<Self>, method: &str, key: &str) -> Result<Arc<Vec<Value>>> {
        if let Some(hit) = self.cached(method) {
            return Ok(hit);
        }
        let generation = self.cache_generation.load(Ordering::Acquire);
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut ttl: Option<u64> = None;
        let mut pages = 0usize;
        loop {
            let mut params = Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), Value::String(c.clone()));
            }
            let mut v = self
                .call(method, params, &RequestOptions::default())
                .await?;
            let page_ttl = ttl_of(&v);
            ttl = Some(ttl.map_or(page_ttl, |t| t.min(page_ttl)));
            match v.get_mut(key).map(Value::take) {
                Some(Value::Array(page)) => items.extend(page),
                None | Some(Value::Null) => {}
                Some(_) => {
                    return Err(Error::invalid_response(format!(
                        "`{method}` result `{key}` is not an array"
                    )))
                }
            }
            pages += 1;
            match v.get("nextCursor") {
                // An empty string is a valid cursor: only its absence ends the list.
                Some(Value::String(next)) => {
                    if cursor.as_deref() == Some(next.as_str()) || pages >= 10_000 {
                        return Err(Error::invalid_response(format!(
                            "`{method}` pagination does not end (cursor {next:?} repeats)"
                        )));
                    }
                    cursor = Some(next.clone());
                }
                _ => break,
            }
        }
        let items = Arc::new(items);
        if let Some(ttl) = ttl.filter(|t| *t > 0) {
            self.store(method.to_owned(), generation, ttl, items.clone());
        }
        Ok(items)
    }

    /// Answers one input request (an MRTR `inputRequests` entry, or a legacy server
    /// request).
    async fn answer_input(
        &self,
        method: &str,
        params: Value,
    ) -> std::result::Result<Value, ErrorObject> {
        match method {
            "elicitation/create" => {
                let Some(handler) = &self.input else {
                    return Err(ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        "this client takes no input requests (no input handler is set)",
                    ));
                };
                let request = InputRequest::from_params(&self.name, &params)
                    .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, e))?;
                let accepted = if request.is_form() {
                    self.input_kinds.form
                } else {
                    self.input_kinds.url
                };
                if !accepted {
                    return Ok(InputResponse::Decline.to_value());
                }
                Ok(handler.handle(request).await.to_value())
            }
            "sampling/createMessage" => {
                let Some(handler) = &self.sampling else {
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
            "roots/list" => {
                let Some(handler) = &self.roots else {
                    return Err(ErrorObject::new(
                        code::METHOD_NOT_FOUND,
                        "this client exposes no roots (no roots handler is set)",
                    ));
                };
                let roots = handler.roots().await;
                Ok(json!({ "roots": roots }))
            }
            "ping" => Ok(json!({})),
            other => Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!("method `{other}` is not supported by this client"),
            )),
        }
    }

    fn changed(&self, change: Change) {
        for cb in &self.on_change {
            cb(&change);
        }
    }
}

type Ready = tokio::sync::oneshot::Sender<Result<Value>>;

const LISTEN_BACKOFF: Duration = Duration::from_secs(1);
/// A listen stream has no timeout of its own: it stays open until it ends.
const LISTEN_FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

struct ListenGuard<'a> {
    inner: &'a Inner,
    id: Id,
}

impl Drop for ListenGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.listens).remove(&self.id);
    }
}

async fn listen_modern(inner: Arc<Inner>, uris: Vec<String>, tasks: Vec<String>, ready: Ready) {
    let mut ready = Some(ready);
    loop {
        let outcome = listen_once(&inner, &uris, &tasks, &mut ready).await;
        if let Err(e) = outcome {
            match ready.take() {
                Some(r) => {
                    let _ = r.send(Err(e));
                    return;
                }
                None => {
                    tracing::debug!(server = %inner.name, error = %e, "listen stream ended; reopening")
                }
            }
        }
        tokio::time::sleep(LISTEN_BACKOFF).await;
    }
}

/// One `subscriptions/listen` request, from acknowledgement to its end.
async fn listen_once(
    inner: &Arc<Inner>,
    uris: &[String],
    tasks: &[String],
    ready: &mut Option<Ready>,
) -> Result<()> {
    let details = inner.ensure().await?;
    if details.era != Era::Modern {
        return Err(Error::unsupported(
            "the server no longer speaks the 2026-07-28 protocol",
        ));
    }
    let id = Id::Number(inner.next_id());
    let (ack_tx, ack_rx) = tokio::sync::oneshot::channel();
    let (end_tx, end_rx) = tokio::sync::oneshot::channel();
    lock(&inner.listens).insert(
        id.clone(),
        ListenSlot {
            ack: Some(ack_tx),
            ended: Some(end_tx),
        },
    );
    let _guard = ListenGuard {
        inner,
        id: id.clone(),
    };
    let mut filter = Map::new();
    for key in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        filter.insert(key.into(), Value::Bool(true));
    }
    if !uris.is_empty() {
        filter.insert("resourceSubscriptions".into(), json!(uris));
    }
    if !tasks.is_empty() {
        filter.insert("taskIds".into(), json!(tasks));
    }
    let mut params = Map::new();
    params.insert(
        "_meta".into(),
        Value::Object(inner.modern_meta(&details.protocol_version, None)),
    );
    params.insert("notifications".into(), Value::Object(filter));
    let request = Request {
        id,
        method: "subscriptions/listen".into(),
        params: Value::Object(params),
    };
    let opts = RequestOptions {
        timeout: Some(LISTEN_FOREVER),
        max_timeout: Some(LISTEN_FOREVER),
        ..Default::default()
    };
    let stream = inner.exchange(&details.protocol_version, request, &opts, None, true);
    tokio::pin!(stream);
    tokio::select! {
        agreed = ack_rx => {
            let agreed = agreed.unwrap_or(Value::Null);
            match ready.take() {
                Some(r) => {
                    let _ = r.send(Ok(agreed));
                }
                None => {
                    // Back after a break: whatever changed meanwhile was not heard.
                    inner.invalidate_all();
                    inner.changed(Change::Tools);
                    inner.changed(Change::Prompts);
                    inner.changed(Change::Resources);
                    for uri in uris {
                        inner.changed(Change::Resource(uri.clone()));
                    }
                    report_tasks(inner, tasks);
                }
            }
        }
        out = &mut stream => {
            out?;
            return Err(Error::invalid_response("the listen request ended before it was acknowledged"));
        }
    }
    tokio::select! {
        out = &mut stream => out.map(|_| ()),
        _ = end_rx => Ok(()),
    }
}

/// Reports the current status of each task (after a reconnect: changes made while
/// disconnected were not heard).
fn report_tasks(inner: &Arc<Inner>, tasks: &[String]) {
    if tasks.is_empty() {
        return;
    }
    let (inner, tasks) = (inner.clone(), tasks.to_vec());
    tokio::spawn(async move {
        for id in tasks {
            match inner.get_task(&id).await {
                Ok((status, _)) => inner.report_task(status, true),
                Err(e) => {
                    tracing::debug!(server = %inner.name, task = %id, error = %e, "could not read a listened task")
                }
            }
        }
    });
}

/// For servers that push no task statuses: asks at each task's poll interval, and
/// reports each change (of state or message) until the task ends.
async fn poll_tasks(inner: &Arc<Inner>, tasks: &[String]) {
    let mut ended: Vec<&String> = Vec::new();
    let mut wait = Duration::from_secs(1);
    loop {
        let mut open = false;
        for id in tasks {
            if ended.contains(&id) {
                continue;
            }
            open = true;
            match inner.get_task(id).await {
                Ok((status, _)) => {
                    if let Some(p) = status.poll_interval {
                        wait = p.max(Duration::from_millis(100));
                    }
                    if status.state.is_terminal() {
                        ended.push(id);
                    }
                    inner.report_task(status, false);
                }
                Err(e) => {
                    tracing::debug!(server = %inner.name, task = %id, error = %e, "could not read a listened task")
                }
            }
        }
        if !open {
            return std::future::pending().await;
        }
        tokio::time::sleep(wait).await;
    }
}

async fn listen_legacy(inner: Arc<Inner>, uris: Vec<String>, tasks: Vec<String>, ready: Ready) {
    let mut ready = Some(ready);
    loop {
        // Register for the next reset before subscribing, so none is missed.
        let reset = inner.session_reset.notified();
        tokio::pin!(reset);
        reset.as_mut().enable();
        let mut outcome = Ok(());
        for uri in &uris {
            let mut params = Map::new();
            params.insert("uri".into(), Value::String(uri.clone()));
            if let Err(e) = inner
                .call("resources/subscribe", params, &RequestOptions::default())
                .await
            {
                outcome = Err(e);
                break;
            }
        }
        match (outcome, ready.take()) {
            (Ok(()), Some(r)) => {
                let _ = r.send(Ok(
                    json!({ "resourceSubscriptions": uris, "taskIds": tasks }),
                ));
            }
            (Err(e), Some(r)) => {
                let _ = r.send(Err(e));
                return;
            }
            (Ok(()), None) => {
                for uri in &uris {
                    inner.changed(Change::Resource(uri.clone()));
                }
                report_tasks(&inner, &tasks);
            }
            (Err(e), None) => {
                tracing::debug!(server = %inner.name, error = %e, "resubscribing failed; retrying");
                tokio::time::sleep(LISTEN_BACKOFF).await;
                continue;
            }
        }
        // Wait for the session to break (a restart), then subscribe again once the
        // next session is up. Meanwhile, ask about the tasks.
        tokio::select! {
            () = reset => {}
            () = poll_tasks(&inner, &tasks) => {}
        }
        loop {
            tokio::time::sleep(LISTEN_BACKOFF).await;
            if inner.ensure().await.is_ok() {
                break;
            }
        }
    }
}

fn discovered(mut v: Value, version: String) -> ServerDetails {
    let info = v
        .get_mut("_meta")
        .and_then(|m| m.get_mut(meta::SERVER_INFO))
        .map(Value::take)
        .and_then(|i| serde_json::from_value(i).ok())
        .unwrap_or_default();
    ServerDetails {
        era: Era::Modern,
        protocol_version: version,
        capabilities: ServerCapabilities(
            v.get_mut("capabilities")
                .map(Value::take)
                .unwrap_or(Value::Null),
        ),
        info,
        instructions: v
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

struct Inbox {
    inner: Weak<Inner>,
}

impl IncomingHandler for Inbox {
    fn notification(&self, n: Notification) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let params = n.params.unwrap_or(Value::Null);
        match n.method.as_str() {
            "notifications/progress" => {
                let token: Option<Id> = params
                    .get("progressToken")
                    .cloned()
                    .and_then(|t| serde_json::from_value(t).ok());
                let progress = Progress {
                    progress: params
                        .get("progress")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0),
                    total: params.get("total").and_then(Value::as_f64),
                    message: params
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                };
                let call = token.and_then(|t| lock(&inner.progress).get(&t).cloned());
                match call {
                    Some(call) => {
                        call.notify.notify_one();
                        if let Some(cb) = &call.callback {
                            cb(&progress);
                        }
                        for cb in &inner.on_progress {
                            cb(&progress);
                        }
                    }
                    None => {
                        tracing::debug!(server = %inner.name, "progress for no active request ignored")
                    }
                }
            }
            "notifications/message" => log_message(&inner.name, &params),
            "notifications/tools/list_changed" => {
                inner.invalidate("tools/");
                *lock(&inner.tool_headers) = None;
                inner.changed(Change::Tools);
            }
            "notifications/prompts/list_changed" => {
                inner.invalidate("prompts/");
                inner.changed(Change::Prompts);
            }
            "notifications/resources/list_changed" => {
                inner.invalidate("resources/list");
                inner.invalidate("resources/templates/");
                inner.changed(Change::Resources);
            }
            "notifications/resources/updated" => {
                if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                    inner.invalidate(&format!("resources/read {uri}"));
                    inner.changed(Change::Resource(uri.to_owned()));
                }
            }
            "notifications/subscriptions/acknowledged" => {
                let id = subscription_id(&params);
                let mut listens = lock(&inner.listens);
                match id
                    .and_then(|id| listens.get_mut(&id))
                    .and_then(|s| s.ack.take())
                {
                    Some(ack) => {
                        let _ =
                            ack.send(params.get("notifications").cloned().unwrap_or(Value::Null));
                    }
                    None => {
                        tracing::debug!(server = %inner.name, "acknowledgement for no listen request ignored")
                    }
                }
            }
            "notifications/tasks" | "notifications/tasks/status" => {
                inner.task_notified(&params);
            }
            "notifications/cancelled" => {
                // A server ends a listen stream on stdio this way.
                let id: Option<Id> = params
                    .get("requestId")
                    .cloned()
                    .and_then(|i| serde_json::from_value(i).ok());
                let ended = id.and_then(|id| {
                    lock(&inner.listens)
                        .get_mut(&id)
                        .and_then(|s| s.ended.take())
                });
                if let Some(ended) = ended {
                    let _ = ended.send(());
                }
            }
            other => tracing::debug!(server = %inner.name, method = other, "notification ignored"),
        }
    }

    fn request(&self, request: Request) -> BoxFuture<'static, Response> {
        let inner = self.inner.upgrade();
        Box::pin(async move {
            let outcome = match inner {
                Some(inner) => inner.answer_input(&request.method, request.params).await,
                None => Err(ErrorObject::new(code::INTERNAL_ERROR, "the client is gone")),
            };
            Response {
                id: request.id,
                outcome,
            }
        })
    }

    fn disconnected(&self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.reset();
        }
    }
}

fn subscription_id(params: &Value) -> Option<Id> {
    params
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/subscriptionId"))
        .cloned()
        .and_then(|i| serde_json::from_value(i).ok())
}

fn log_message(server: &str, params: &Value) {
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .unwrap_or("info");
    let logger = params.get("logger").and_then(Value::as_str).unwrap_or("");
    let data = params.get("data").cloned().unwrap_or(Value::Null);
    let text = match &data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    const T: &str = "mcp_runtime::server_log";
    match level {
        "debug" => tracing::debug!(target: T, server, logger, "{text}"),
        "info" | "notice" => tracing::info!(target: T, server, logger, level, "{text}"),
        "warning" => tracing::warn!(target: T, server, logger, "{text}"),
        _ => tracing::error!(target: T, server, logger, level, "{text}"),
    }
}

#[allow(dead_code)]
fn _assert_send(c: &Client) -> impl Future<Output = Result<Vec<Tool>>> + Send + '_ {
    c.list_tools()
}

#[cfg(test)]
mod tests {
    //! Protocol paths no real peer shows on demand (version retries, silent probes,
    //! endless input rounds, unknown result types), driven through a scripted
    //! transport. Everything else is tested against real servers in `tests/it`.
    use super::*;
    use crate::jsonrpc::Notification;

    type Script = dyn Fn(&Request, usize) -> Step + Send + Sync;

    enum Step {
        Reply(Value),
        Fail(i64, Value),
        Hang,
        /// Answers after a while (a slow server).
        Late(Duration, Box<Step>),
    }

    struct Scripted {
        script: Box<Script>,
        seen: Arc<Mutex<Vec<Request>>>,
    }

    impl Transport for Scripted {
        fn request(
            &self,
            request: Request,
            _cx: RequestContext,
        ) -> BoxFuture<'_, Result<Response>> {
            let n = {
                let mut seen = lock(&self.seen);
                seen.push(request.clone());
                seen.len() - 1
            };
            let mut step = (self.script)(&request, n);
            Box::pin(async move {
                while let Step::Late(after, next) = step {
                    tokio::time::sleep(after).await;
                    step = *next;
                }
                match step {
                    Step::Reply(v) => Ok(Response {
                        id: request.id,
                        outcome: Ok(v),
                    }),
                    Step::Fail(code, data) => Ok(Response {
                        id: request.id,
                        outcome: Err(ErrorObject {
                            code,
                            message: "scripted".into(),
                            data: Some(data),
                        }),
                    }),
                    Step::Hang | Step::Late(..) => std::future::pending().await,
                }
            })
        }
        fn notify<'a>(&'a self, _n: Notification, _v: &'a str) -> BoxFuture<'a, Result<()>> {
            Box::pin(async { Ok(()) })
        }
        fn cancel<'a>(&'a self, _n: Notification, _v: &'a str) -> BoxFuture<'a, Result<()>> {
            Box::pin(async { Ok(()) })
        }
        fn close(&self) -> BoxFuture<'_, Result<()>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn scripted(
        builder: ClientBuilder,
        script: impl Fn(&Request, usize) -> Step + Send + Sync + 'static,
    ) -> (Client, Arc<Mutex<Vec<Request>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let t = Scripted {
            script: Box::new(script),
            seen: seen.clone(),
        };
        (builder.build(t).unwrap(), seen)
    }

    fn discover_ok() -> Value {
        json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
               "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "9"}}})
    }

    #[tokio::test]
    async fn unsupported_version_is_retried_with_a_listed_version() {
        let (c, seen) = scripted(Client::builder(), |r, n| match (r.method.as_str(), n) {
            ("server/discover", 0) => Step::Fail(
                -32022,
                json!({"supported": ["2026-07-28"], "requested": "x"}),
            ),
            ("server/discover", _) => Step::Reply(discover_ok()),
            _ => Step::Reply(json!({"tools": []})),
        });
        let d = c.connect().await.unwrap();
        assert_eq!(d.era, Era::Modern);
        assert_eq!(d.info.version, "9");
        let seen = lock(&seen);
        assert_eq!(seen.len(), 2);
        assert_ne!(seen[0].id, seen[1].id);
        assert_eq!(seen[1].params["_meta"][meta::VERSION], "2026-07-28");
    }

    #[tokio::test]
    async fn a_version_error_never_falls_back_to_initialize() {
        let (c, seen) = scripted(Client::builder(), |_, _| {
            Step::Fail(-32022, json!({"supported": ["2099-01-01"]}))
        });
        let e = c.connect().await.unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert!(lock(&seen).iter().all(|r| r.method == "server/discover"));
    }

    #[tokio::test]
    async fn a_silent_probe_falls_back_to_initialize() {
        let (c, seen) = scripted(
            Client::builder().probe_timeout(Duration::from_millis(50)),
            |r, _| match r.method.as_str() {
                "server/discover" => Step::Hang,
                "initialize" => {
                    Step::Reply(json!({"protocolVersion": "2024-11-05", "capabilities": {},
                                                   "serverInfo": {"name": "old", "version": "1"}}))
                }
                _ => Step::Reply(json!({})),
            },
        );
        let d = c.connect().await.unwrap();
        assert_eq!(
            (d.era, d.protocol_version.as_str()),
            (Era::Legacy, "2024-11-05")
        );
        assert_eq!(lock(&seen)[1].method, "initialize");
    }

    fn legacy_ok() -> Value {
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "old", "version": "1"}})
    }

    fn late(ms: u64, step: Step) -> Step {
        Step::Late(Duration::from_millis(ms), Box::new(step))
    }

    /// A dual-era server that is slow to start and serves the era of the first request
    /// it reads (the PyPI SDK's rule): its discover answer comes after the probe time,
    /// and the initialize sent meanwhile is refused. The session is modern.
    #[tokio::test(start_paused = true)]
    async fn a_slow_modern_server_is_not_taken_for_an_old_one() {
        let (c, seen) = scripted(Client::builder(), |r, _| match r.method.as_str() {
            "server/discover" => late(30_000, Step::Reply(discover_ok())),
            "initialize" => late(
                30_001,
                Step::Fail(-32022, json!({"supported": ["2026-07-28"]})),
            ),
            _ => Step::Reply(json!({})),
        });
        let d = c.connect().await.unwrap();
        assert_eq!(d.era, Era::Modern);
        let methods: Vec<String> = lock(&seen).iter().map(|r| r.method.clone()).collect();
        assert_eq!(methods, ["server/discover", "initialize"]);
    }

    /// The same, when the refusal of initialize arrives first: it names a modern
    /// version, so the session waits for (or asks again with) server/discover.
    #[tokio::test(start_paused = true)]
    async fn initialize_refused_for_a_modern_version_means_modern() {
        let (c, seen) = scripted(Client::builder(), |r, n| match (r.method.as_str(), n) {
            ("server/discover", 0) => Step::Hang,
            ("server/discover", _) => Step::Reply(discover_ok()),
            ("initialize", _) => Step::Fail(-32022, json!({"supported": ["2026-07-28"]})),
            _ => Step::Reply(json!({})),
        });
        // The first probe never answers; the refusal lists a modern version, so the
        // session asks again at once.
        assert_eq!(c.connect().await.unwrap().era, Era::Modern);
        let methods: Vec<String> = lock(&seen).iter().map(|r| r.method.clone()).collect();
        assert_eq!(
            methods,
            ["server/discover", "initialize", "server/discover"]
        );
        let (c, _) = scripted(Client::builder(), |r, n| match (r.method.as_str(), n) {
            ("server/discover", 0) => late(20_000, Step::Fail(-32601, json!(null))),
            ("server/discover", _) => Step::Reply(discover_ok()),
            ("initialize", _) => Step::Fail(-32022, json!({"supported": ["2026-07-28"]})),
            _ => Step::Reply(json!({})),
        });
        assert_eq!(c.connect().await.unwrap().era, Era::Modern);
    }

    /// A slow server of the handshake era: discover is refused late, initialize works.
    #[tokio::test(start_paused = true)]
    async fn a_slow_old_server_is_old() {
        let (c, _) = scripted(Client::builder(), |r, _| match r.method.as_str() {
            "server/discover" => late(30_000, Step::Fail(-32601, json!(null))),
            "initialize" => late(30_001, Step::Reply(legacy_ok())),
            _ => Step::Reply(json!({})),
        });
        let d = c.connect().await.unwrap();
        assert_eq!(
            (d.era, d.protocol_version.as_str()),
            (Era::Legacy, "2025-11-25")
        );
    }

    /// Forced modern waits like any request: no probe clock.
    #[tokio::test(start_paused = true)]
    async fn forced_modern_waits_for_a_slow_server() {
        let (c, seen) = scripted(
            Client::builder().protocol(ProtocolMode::Modern),
            |r, _| match r.method.as_str() {
                "server/discover" => late(40_000, Step::Reply(discover_ok())),
                _ => Step::Reply(json!({})),
            },
        );
        assert_eq!(c.connect().await.unwrap().era, Era::Modern);
        assert_eq!(lock(&seen).len(), 1);
        // Past the ordinary timeout it is a timeout that names the setting to raise.
        let (c, _) = scripted(
            Client::builder()
                .protocol(ProtocolMode::Modern)
                .timeout(Duration::from_secs(10)),
            |_, _| Step::Hang,
        );
        let e = c.connect().await.unwrap_err();
        assert!(
            e.is_timeout() && e.to_string().contains("ClientBuilder::timeout"),
            "{e}"
        );
    }

    /// Where the transport answers every request (HTTP), there is no probe clock at all.
    #[tokio::test(start_paused = true)]
    async fn no_probe_clock_where_every_request_is_answered() {
        struct Answering(Scripted);
        impl Transport for Answering {
            fn request(&self, r: Request, cx: RequestContext) -> BoxFuture<'_, Result<Response>> {
                self.0.request(r, cx)
            }
            fn notify<'a>(&'a self, n: Notification, v: &'a str) -> BoxFuture<'a, Result<()>> {
                self.0.notify(n, v)
            }
            fn cancel<'a>(&'a self, n: Notification, v: &'a str) -> BoxFuture<'a, Result<()>> {
                self.0.cancel(n, v)
            }
            fn close(&self) -> BoxFuture<'_, Result<()>> {
                self.0.close()
            }
            fn answers_every_request(&self) -> bool {
                true
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let t = Answering(Scripted {
            script: Box::new(|r: &Request, _| match r.method.as_str() {
                "server/discover" => late(45_000, Step::Reply(discover_ok())),
                _ => Step::Reply(legacy_ok()),
            }),
            seen: seen.clone(),
        });
        let c = Client::builder().build(t).unwrap();
        assert_eq!(c.connect().await.unwrap().era, Era::Modern);
        assert_eq!(lock(&seen).len(), 1, "no initialize was sent");
    }

    /// Forced legacy against a server that only speaks 2026-07-28: an error that says
    /// which setting to change.
    #[tokio::test]
    async fn forced_legacy_against_a_modern_only_server_says_what_to_do() {
        let (c, _) = scripted(Client::builder().protocol(ProtocolMode::Legacy), |_, _| {
            Step::Fail(-32022, json!({"supported": ["2026-07-28"]}))
        });
        let e = c.connect().await.unwrap_err();
        assert!(
            e.is_unsupported() && e.to_string().contains("ProtocolMode::Auto"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn an_unknown_handshake_version_is_refused() {
        let (c, _) = scripted(Client::builder().protocol(ProtocolMode::Legacy), |_, _| {
            Step::Reply(json!({"protocolVersion": "1999-01-01", "capabilities": {}}))
        });
        let e = c.connect().await.unwrap_err();
        assert!(
            e.is_unsupported() && e.to_string().contains("1999-01-01"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn result_types() {
        let (c, _) = scripted(Client::builder(), |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            "tools/call" if r.params["name"] == "weird" => {
                Step::Reply(json!({"resultType": "task", "content": []}))
            }
            "tools/call" => {
                Step::Reply(json!({"content": [{"type": "text", "text": "no resultType"}]}))
            }
            _ => Step::Reply(json!({})),
        });
        let e = c.call_tool("weird", json!({})).await.unwrap_err();
        assert!(
            e.is_invalid_response() && e.to_string().contains("task"),
            "{e}"
        );
        assert_eq!(
            c.call_tool("plain", json!({})).await.unwrap().text(),
            "no resultType"
        );
    }

    #[tokio::test]
    async fn input_rounds_are_bounded_and_state_only_retries_at_once() {
        let (c, seen) = scripted(
            Client::builder()
                .max_input_rounds(3)
                .input_handler(|_r: InputRequest| async { InputResponse::Cancel }),
            |r, _| match r.method.as_str() {
                "server/discover" => Step::Reply(discover_ok()),
                "tools/call" if r.params["name"] == "shed" => match r.params.get("requestState") {
                    None => Step::Reply(
                        json!({"resultType": "input_required", "requestState": "s\u{e9}1"}),
                    ),
                    Some(_) => Step::Reply(json!({"resultType": "complete", "content": []})),
                },
                _ => Step::Reply(json!({"resultType": "input_required",
                    "inputRequests": {"a": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object"}}}},
                    "requestState": "again"})),
            },
        );
        let e = c.call_tool("loop", json!({})).await.unwrap_err();
        assert!(
            e.is_invalid_response() && e.to_string().contains("3 rounds"),
            "{e}"
        );
        let calls = lock(&seen)
            .iter()
            .filter(|r| r.method == "tools/call")
            .count();
        assert_eq!(calls, 4, "the first request and 3 retries");
        lock(&seen).clear();
        c.call_tool("shed", json!({})).await.unwrap();
        let seen = lock(&seen);
        assert_eq!(seen[1].params["requestState"], "s\u{e9}1");
        assert!(seen[1].params.get("inputResponses").is_none());
    }

    #[tokio::test]
    async fn tasks_are_polled_answered_and_finished() {
        let polls = Arc::new(Mutex::new(0));
        let p = polls.clone();
        let (c, seen) = scripted(
            Client::builder()
                .extension("io.modelcontextprotocol/tasks", json!({}))
                .input_handler(|_r: InputRequest| async {
                    InputResponse::accept(json!({"ok": true}))
                }),
            move |r, _| match r.method.as_str() {
                "server/discover" => Step::Reply(discover_ok()),
                "tools/call" => Step::Reply(
                    json!({"resultType": "task", "taskId": "t1", "status": "working", "pollIntervalMs": 5}),
                ),
                "tasks/get" => {
                    let mut n = lock(&p);
                    *n += 1;
                    Step::Reply(match *n {
                        1 => json!({"resultType": "complete", "taskId": "t1", "status": "working"}),
                        2 | 3 => {
                            json!({"resultType": "complete", "taskId": "t1", "status": "input_required",
                            "inputRequests": {"confirm": {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {"type": "object"}}}}})
                        }
                        _ => {
                            json!({"resultType": "complete", "taskId": "t1", "status": "completed",
                            "result": {"content": [{"type": "text", "text": "done"}]}})
                        }
                    })
                }
                _ => Step::Reply(json!({"resultType": "complete"})),
            },
        );
        let r = c.call_tool("long", json!({})).await.unwrap();
        assert_eq!(r.text(), "done");
        let seen = lock(&seen);
        let updates: Vec<&Request> = seen.iter().filter(|r| r.method == "tasks/update").collect();
        assert_eq!(updates.len(), 1, "each input request is answered once");
        assert_eq!(
            updates[0].params["inputResponses"]["confirm"]["action"],
            "accept"
        );
        assert_eq!(updates[0].params["taskId"], "t1");
    }

    #[tokio::test]
    async fn a_failed_task_is_an_error_and_a_cancelled_wait_cancels_the_task() {
        let (c, _) = scripted(
            Client::builder().extension("io.modelcontextprotocol/tasks", json!({})),
            |r, _| match r.method.as_str() {
                "server/discover" => Step::Reply(discover_ok()),
                "tools/call" => Step::Reply(
                    json!({"resultType": "task", "taskId": "t2", "status": "working", "pollIntervalMs": 5}),
                ),
                "tasks/get" => Step::Reply(
                    json!({"taskId": "t2", "status": "failed", "error": {"code": -32000, "message": "disk full"}}),
                ),
                _ => Step::Reply(json!({})),
            },
        );
        let e = c.call_tool("x", json!({})).await.unwrap_err();
        assert!(e.is_protocol() && e.message() == Some("disk full"), "{e}");

        let (c, seen) = scripted(
            Client::builder().extension("io.modelcontextprotocol/tasks", json!({})),
            |r, _| match r.method.as_str() {
                "server/discover" => Step::Reply(discover_ok()),
                "tools/call" => Step::Reply(
                    json!({"resultType": "task", "taskId": "t3", "status": "working", "pollIntervalMs": 5}),
                ),
                "tasks/get" => Step::Reply(json!({"taskId": "t3", "status": "working"})),
                _ => Step::Reply(json!({})),
            },
        );
        let token = CancellationToken::new();
        let t = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            t.cancel();
        });
        let e = c
            .call_tool("x", json!({}))
            .cancel_on(token)
            .await
            .unwrap_err();
        assert!(e.is_cancelled(), "{e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(lock(&seen)
            .iter()
            .any(|r| r.method == "tasks/cancel" && r.params["taskId"] == "t3"));

        // Without the extension declared, a task answer is invalid.
        let (c, _) = scripted(Client::builder(), |r, _| match r.method.as_str() {
            "server/discover" => Step::Reply(discover_ok()),
            _ => Step::Reply(json!({"resultType": "task", "taskId": "t4"})),
        });
        assert!(c
            .call_tool("x", json!({}))
            .await
            .unwrap_err()
            .is_invalid_response());
    }

    #[tokio::test]
    async fn server_requests_without_handlers_get_errors() {
        let (c, _) = scripted(
            Client::builder().roots(vec![crate::input::Root {
                uri: "file:///p".into(),
                name: None,
            }]),
            |_, _| Step::Reply(json!({})),
        );
        let inbox = c.inner.incoming.clone();
        let ask = |method: &str| {
            inbox.request(Request {
                id: Id::Number(1),
                method: method.into(),
                params: json!({}),
            })
        };
        assert_eq!(ask("ping").await.outcome, Ok(json!({})));
        assert_eq!(
            ask("roots/list").await.outcome,
            Ok(json!({"roots": [{"uri": "file:///p"}]}))
        );
        assert_eq!(
            ask("sampling/createMessage")
                .await
                .outcome
                .unwrap_err()
                .code,
            -32601
        );
        assert_eq!(
            ask("elicitation/create").await.outcome.unwrap_err().code,
            -32601
        );
        assert_eq!(ask("nope/nope").await.outcome.unwrap_err().code, -32601);
    }
}

//! A declared server used as an object: the runtime model behind `#[mcp(...)]` and
//! the inline [`Mcp::builder`].
//!
//! An [`Mcp`] knows how to reach its server and how to shape what a model sees of it:
//! which tools (`only`, `except`), under which names (`prefix`, renames), with which
//! arguments fixed, with which results wrapped, which need approval and which are
//! deferred, plus tools of your own. It connects on first use.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::client::{Change, Client, ClientBuilder, RequestOptions};
use crate::error::{Error, Result};
use crate::input::{InputKinds, InputRequest, InputResponse};
use crate::model::{
    CallToolResult, Completion, CompletionRef, GetPromptResult, LogLevel, Progress, Prompt,
    ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use crate::transport::{BoxFuture, Transport};

type Shared<T> = Arc<dyn Fn() -> T + Send + Sync>;
type WrapFn =
    Arc<dyn Fn(CallToolResult, Value) -> BoxFuture<'static, Result<CallToolResult>> + Send + Sync>;
type InputFn = Arc<dyn Fn(InputRequest) -> BoxFuture<'static, Option<InputResponse>> + Send + Sync>;
type Predicate = Arc<dyn Fn(&Tool) -> bool + Send + Sync>;
type ChangeFn = Arc<dyn Fn(&Change) + Send + Sync>;
type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;
type TransportFactory = Arc<dyn Fn() -> Result<Box<dyn Transport>> + Send + Sync>;
type OAuthFactory = Arc<dyn Fn() -> Option<crate::auth::OAuth> + Send + Sync>;

/// Per-connection configuration shared by many servers (the seed's `context:`): an HTTP
/// proxy and a request timeout.
#[derive(Clone, Debug, Default)]
pub struct Context {
    http_proxy: Option<String>,
    request_timeout: Option<Duration>,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Context::default()
    }
    /// An HTTP proxy (`http://host:port`) for `https://` servers.
    pub fn http_proxy(mut self, proxy: impl Into<String>) -> Self {
        self.http_proxy = Some(proxy.into());
        self
    }
    /// How long a request may take, for servers that set no `timeout` of their own.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }
}

/// A value sent for a fixed argument: the same every time, or computed per call.
#[derive(Clone)]
pub enum ArgValue {
    /// The same value every call.
    Fixed(Value),
    /// Computed for every call.
    Computed(Shared<Value>),
}

impl fmt::Debug for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Fixed(v) => write!(f, "Fixed({v})"),
            ArgValue::Computed(_) => f.write_str("Computed"),
        }
    }
}

impl ArgValue {
    fn get(&self) -> Value {
        match self {
            ArgValue::Fixed(v) => v.clone(),
            ArgValue::Computed(f) => f(),
        }
    }
}

/// How to present one server tool: another name, another description, arguments the
/// model does not see (always sent), and a wrapper for its results.
#[derive(Clone)]
pub struct ToolShape {
    name: String,
    rename: Option<String>,
    description: Option<String>,
    fixed: Vec<(String, ArgValue)>,
    wrap: Option<WrapFn>,
}

impl fmt::Debug for ToolShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolShape")
            .field("name", &self.name)
            .field("rename", &self.rename)
            .field("description", &self.description)
            .field(
                "fixed",
                &self.fixed.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("wrap", &self.wrap.is_some())
            .finish()
    }
}

impl ToolShape {
    /// Shapes the server tool `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ToolShape {
            name: name.into(),
            rename: None,
            description: None,
            fixed: Vec::new(),
            wrap: None,
        }
    }
    /// The name the model sees (it calls the server's name). A renamed tool is not
    /// prefixed.
    pub fn rename(mut self, name: impl Into<String>) -> Self {
        self.rename = Some(name.into());
        self
    }
    /// What the model reads about the tool.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
    /// An argument removed from the model's view and always sent with this value.
    pub fn fixed_argument(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fixed
            .push((name.into(), ArgValue::Fixed(value.into())));
        self
    }
    /// An argument removed from the model's view, its value computed for every call.
    pub fn fixed_argument_with(
        mut self,
        name: impl Into<String>,
        value: impl Fn() -> Value + Send + Sync + 'static,
    ) -> Self {
        self.fixed
            .push((name.into(), ArgValue::Computed(Arc::new(value))));
        self
    }
    /// Receives the server's result and the call's arguments; returns what the model
    /// sees.
    pub fn wrap<F, Fut>(mut self, wrap: F) -> Self
    where
        F: Fn(CallToolResult, Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<CallToolResult>> + Send + 'static,
    {
        self.wrap = Some(Arc::new(move |r, a| Box::pin(wrap(r, a))));
        self
    }
}

/// A tool of your own, offered next to the server's. It gets the server handle on
/// every call, so it can call the server.
pub trait LocalTool: Send + Sync + 'static {
    /// Its definition (name, description, input schema) as the model sees it.
    fn definition(&self) -> Tool;
    /// Runs it.
    fn call<'a>(
        &'a self,
        server: &'a Mcp,
        arguments: Value,
    ) -> BoxFuture<'a, Result<CallToolResult>>;
}

/// What to do when the live tool list differs from the committed snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DriftPolicy {
    /// Log a warning (the default).
    #[default]
    Warn,
    /// Fail with a configuration error.
    Error,
    /// Say nothing.
    Ignore,
}

#[derive(Clone)]
struct Approval {
    /// `None`: every tool.
    names: Option<Vec<String>>,
    predicate: Option<Predicate>,
}

/// A tool as a model sees it: shaped, with its policy.
#[derive(Clone)]
pub struct McpTool {
    /// The name the model calls it by.
    pub name: String,
    /// The server's name for it (`None` for a tool of your own).
    pub server_name: Option<String>,
    /// What the model reads about it.
    pub description: Option<String>,
    /// Its arguments as the model sees them (fixed arguments removed).
    pub input_schema: Value,
    /// The server's definition (annotations, `_meta`), for server tools.
    pub definition: Option<Tool>,
    /// Kept out of the model's context until a tool search loads it.
    pub deferred: bool,
    /// Only an MCP App's UI may call it: never offer it to a model.
    pub app_only: bool,
    approvals: Arc<Vec<Approval>>,
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server_name", &self.server_name)
            .field("deferred", &self.deferred)
            .field("app_only", &self.app_only)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// Whether a call needs a person's approval first. Predicates are evaluated now,
    /// for this call. The application's own direct calls are not gated: this is policy
    /// for whatever hands tools to a model.
    pub fn requires_approval(&self) -> bool {
        let server_name = self.server_name.as_deref().unwrap_or(&self.name);
        let fallback;
        let def = match &self.definition {
            Some(d) => d,
            None => {
                fallback = Tool {
                    name: self.name.clone(),
                    title: None,
                    description: self.description.clone(),
                    input_schema: self.input_schema.clone(),
                    output_schema: None,
                    annotations: None,
                    icons: None,
                    meta: None,
                    extra: Map::new(),
                };
                &fallback
            }
        };
        self.approvals.iter().any(|a| {
            let named = match &a.names {
                None => true,
                Some(names) => names.iter().any(|n| n == server_name || n == &self.name),
            };
            named && a.predicate.as_ref().is_none_or(|p| p(def))
        })
    }
}

struct Spec {
    name: String,
    connect: Connect,
    client: Mutex<Option<ClientBuilder>>,
    only: Option<Vec<String>>,
    except: Vec<String>,
    prefix: Option<String>,
    shapes: Vec<ToolShape>,
    local: Vec<Arc<dyn LocalTool>>,
    approvals: Arc<Vec<Approval>>,
    defer: Option<Vec<String>>,
    snapshot: Option<Vec<Tool>>,
    drift: DriftPolicy,
    oauth_with: Option<OAuthFactory>,
}

enum Connect {
    Stdio(Box<crate::transport::stdio::StdioConfig>),
    Http(Box<crate::transport::http::HttpConfig>),
    Custom(TransportFactory),
    Missing,
}

/// Builds an [`Mcp`]: the inline form of a declared server.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run() -> mcp_runtime::Result<()> {
/// use mcp_runtime::{Mcp, ToolShape};
/// let files = Mcp::builder("files")
///     .command(["npx", "-y", "@modelcontextprotocol/server-filesystem", "."])
///     .prefix("fs")
///     .only(["read_text_file", "list_directory"])
///     .tool(ToolShape::new("list_directory").rename("ls").fixed_argument("path", "."))
///     .build()?;
/// for tool in files.tools().await? {
///     println!("{}", tool.name); // fs_read_text_file, ls
/// }
/// # Ok(()) }
/// ```
pub struct McpBuilder {
    name: String,
    connect: Connect,
    directory: Option<String>,
    env: Vec<(String, ArgEnv)>,
    headers: Vec<(String, Shared<Option<String>>)>,
    bearer: Option<Shared<Option<String>>>,
    timeout: Option<Duration>,
    log_level: Option<LogLevel>,
    input_kinds: Option<InputKinds>,
    extensions: Vec<(String, Value)>,
    only: Option<Vec<String>>,
    except: Vec<String>,
    prefix: Option<String>,
    shapes: Vec<ToolShape>,
    local: Vec<Arc<dyn LocalTool>>,
    approvals: Vec<Approval>,
    defer: Option<Vec<String>>,
    after_change: Vec<ChangeFn>,
    after_progress: Vec<ProgressFn>,
    before_input: Vec<InputFn>,
    context: Context,
    snapshot: Option<String>,
    drift: DriftPolicy,
    oauth: Option<crate::auth::OAuth>,
    oauth_with: Option<OAuthFactory>,
    max_message_size: Option<usize>,
    clean_env: Option<Vec<String>>,
    errors: Vec<String>,
}

enum ArgEnv {
    Fixed(String),
    Computed(Shared<String>),
}

impl fmt::Debug for McpBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpBuilder")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl McpBuilder {
    /// The server's Streamable HTTP endpoint.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.connect = Connect::Http(Box::new(crate::transport::http::HttpConfig::new(url)));
        self
    }
    /// The command that starts a local server speaking over stdio (program, then its
    /// arguments). It starts on the first request.
    pub fn command<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        match crate::transport::stdio::StdioConfig::from_argv(argv) {
            Ok(c) => self.connect = Connect::Stdio(Box::new(c)),
            Err(e) => self.errors.push(e.to_string()),
        }
        self
    }
    /// A transport of your own, made when the server is first used.
    pub fn transport<T: Transport>(
        mut self,
        make: impl Fn() -> Result<T> + Send + Sync + 'static,
    ) -> Self {
        self.connect = Connect::Custom(Arc::new(move || {
            make().map(|t| Box::new(t) as Box<dyn Transport>)
        }));
        self
    }
    /// The working directory of a stdio server.
    pub fn directory(mut self, dir: impl Into<String>) -> Self {
        self.directory = Some(dir.into());
        self
    }
    /// An environment variable for a stdio server, over the parent's environment.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), ArgEnv::Fixed(value.into())));
        self
    }
    /// Starts a stdio server with a clean environment: of this process's variables only
    /// the safe default set ([`SAFE_ENV_VARS`](crate::transport::stdio::SAFE_ENV_VARS))
    /// and those named in `inherit`, plus the declared [`env`](Self::env). Without it
    /// the server inherits the whole environment.
    pub fn clean_env<I, S>(mut self, inherit: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.clean_env = Some(inherit.into_iter().map(Into::into).collect());
        self
    }
    /// The largest message the server may send, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::DEFAULT_MAX_MESSAGE_SIZE), 64 MiB).
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = Some(bytes);
        self
    }
    /// An environment variable computed each time the server starts.
    pub fn env_with(
        mut self,
        key: impl Into<String>,
        value: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        self.env
            .push((key.into(), ArgEnv::Computed(Arc::new(value))));
        self
    }
    /// An HTTP header sent with every request.
    pub fn header(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let v = value.into();
        self.header_with(name, move || Some(v.clone()))
    }
    /// An HTTP header computed for every request.
    pub fn header_with(
        mut self,
        name: impl Into<String>,
        value: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.headers.push((name.into(), Arc::new(value)));
        self
    }
    /// The bearer token.
    pub fn bearer_token(self, token: impl Into<String>) -> Self {
        let t = token.into();
        self.bearer_token_with(move || Some(t.clone()))
    }
    /// The bearer token, read for every request (so a rotated token needs no
    /// reconnect).
    pub fn bearer_token_with(
        mut self,
        token: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.bearer = Some(Arc::new(token));
        self
    }
    /// How long a request may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Asks the server for log messages at this level and above.
    pub fn log_level(mut self, level: LogLevel) -> Self {
        self.log_level = Some(level);
        self
    }
    /// The kinds of input requests the server may send (default: both, when a
    /// `before_input_request` callback is set; none otherwise).
    pub fn input_requests(mut self, kinds: InputKinds) -> Self {
        self.input_kinds = Some(kinds);
        self
    }
    /// Declares a protocol extension your application supports. `"apps"` and
    /// `"tasks"` name the MCP Apps and Tasks extensions; others need a vendor prefix.
    pub fn extension(mut self, name: &str, settings: Value) -> Self {
        let (full, defaults) = match name {
            "apps" => (
                "io.modelcontextprotocol/ui".to_owned(),
                serde_json::json!({"mimeTypes": ["text/html;profile=mcp-app"]}),
            ),
            "tasks" => (
                "io.modelcontextprotocol/tasks".to_owned(),
                serde_json::json!({}),
            ),
            other => (other.to_owned(), serde_json::json!({})),
        };
        let mut merged = defaults;
        if let (Some(m), Value::Object(s)) = (merged.as_object_mut(), settings) {
            m.extend(s);
        }
        self.extensions.push((full, merged));
        self
    }
    /// Only these server tools reach the model.
    pub fn only<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.only = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// These server tools are hidden from the model.
    pub fn except<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.except.extend(names.into_iter().map(Into::into));
        self
    }
    /// Prefixes the server's tool names (`search` → `github_search`), except tools
    /// renamed with [`ToolShape::rename`].
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Shapes a server tool.
    pub fn tool(mut self, shape: ToolShape) -> Self {
        self.shapes.push(shape);
        self
    }
    /// Adds a tool of your own next to the server's.
    pub fn local_tool(mut self, tool: impl LocalTool) -> Self {
        self.local.push(Arc::new(tool));
        self
    }
    /// These tools need approval before they run (an empty list: every tool).
    pub fn requires_approval<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        names: I,
    ) -> Self {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        self.approvals.push(Approval {
            names: (!names.is_empty()).then_some(names),
            predicate: None,
        });
        self
    }
    /// These tools (an empty list: every tool) need approval when `predicate` says so,
    /// evaluated for every call.
    pub fn requires_approval_if<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        names: I,
        predicate: impl Fn(&Tool) -> bool + Send + Sync + 'static,
    ) -> Self {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        self.approvals.push(Approval {
            names: (!names.is_empty()).then_some(names),
            predicate: Some(Arc::new(predicate)),
        });
        self
    }
    /// Keeps these tools (an empty list: every tool) out of the model's context until
    /// a tool search loads them.
    pub fn defer<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        match (&mut self.defer, names.is_empty()) {
            (_, true) => self.defer = Some(Vec::new()),
            (Some(existing), false) if !existing.is_empty() => existing.extend(names),
            (Some(_), false) => {}
            (None, false) => self.defer = Some(names),
        }
        self
    }
    /// Runs when the server announces a change (its cached tools are already gone).
    pub fn after_change(mut self, f: impl Fn(&Change) + Send + Sync + 'static) -> Self {
        self.after_change.push(Arc::new(f));
        self
    }
    /// Runs with every progress report.
    pub fn after_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.after_progress.push(Arc::new(f));
        self
    }
    /// Answers the server's requests for input; several may be set, and the first that
    /// returns an answer wins. A request none answers is declined.
    pub fn before_input_request<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Option<InputResponse>> + Send + 'static,
    {
        self.before_input.push(Arc::new(move |r| Box::pin(f(r))));
        self
    }
    /// Authorizes with OAuth when an HTTP server asks for it (see [`crate::auth`]).
    pub fn oauth(mut self, oauth: crate::auth::OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// OAuth settings made when the server is first used (so they can read the
    /// declaring struct's inputs and methods).
    pub fn oauth_with(
        mut self,
        make: impl Fn() -> Option<crate::auth::OAuth> + Send + Sync + 'static,
    ) -> Self {
        self.oauth_with = Some(Arc::new(make));
        self
    }

    /// Per-connection configuration (HTTP proxy, request timeout).
    pub fn context(mut self, context: Context) -> Self {
        self.context = context;
        self
    }
    /// The committed snapshot of the server's lists (`.mcp/<name>.json`), to report
    /// drift when the live tool list differs.
    pub fn snapshot(mut self, json: &str) -> Self {
        self.snapshot = Some(json.to_owned());
        self
    }
    /// What to do about drift from the snapshot (default: warn).
    pub fn drift(mut self, policy: DriftPolicy) -> Self {
        self.drift = policy;
        self
    }

    /// Checks the declaration. Nothing connects until the server is first used.
    pub fn build(self) -> Result<Mcp> {
        let mut errors = self.errors;
        let mut client = Client::builder().name(self.name.clone());
        if let Some(t) = self.timeout.or(self.context.request_timeout) {
            client = client.timeout(t);
        }
        if let Some(l) = self.log_level {
            client = client.log_level(l);
        }
        for (name, settings) in self.extensions {
            if !name.contains('/') {
                errors.push(format!(
                    "extension `{name}` needs a vendor prefix, like `com.example/{name}` (or use \"apps\" or \"tasks\")"
                ));
                continue;
            }
            client = client.extension(name, settings);
        }
        let chain = Arc::new(self.before_input);
        if !chain.is_empty() {
            let chain = chain.clone();
            client = client.input_handler(move |req: InputRequest| {
                let chain = chain.clone();
                async move {
                    for f in chain.iter() {
                        if let Some(answer) = f(req.clone()).await {
                            return answer;
                        }
                    }
                    InputResponse::Decline
                }
            });
        }
        if let Some(k) = self.input_kinds {
            client = client.input_kinds(k);
        }
        let tools_cache: Arc<Mutex<Option<Arc<Vec<McpTool>>>>> = Arc::new(Mutex::new(None));
        {
            let cache = tools_cache.clone();
            let callbacks = self.after_change;
            client = client.on_change(move |change| {
                if *change == Change::Tools {
                    *lock(&cache) = None;
                }
                for cb in &callbacks {
                    cb(change);
                }
            });
        }
        for cb in self.after_progress {
            client = client.on_progress(move |p| cb(p));
        }
        let connect = match self.connect {
            Connect::Stdio(c) => {
                let mut c = *c;
                if let Some(d) = self.directory {
                    c = c.directory(d);
                }
                if let Some(inherit) = self.clean_env {
                    c = c.clean_env();
                    for name in inherit {
                        c = c.inherit_env(name);
                    }
                }
                if let Some(n) = self.max_message_size {
                    c = c.max_message_size(n);
                }
                let mut fixed = Vec::new();
                let mut computed = Vec::new();
                for (k, v) in self.env {
                    match v {
                        ArgEnv::Fixed(v) => fixed.push((k, v)),
                        ArgEnv::Computed(f) => computed.push((k, f)),
                    }
                }
                for (k, v) in fixed {
                    c = c.env(k, v);
                }
                if !computed.is_empty() {
                    c = c
                        .env_with(move || computed.iter().map(|(k, f)| (k.clone(), f())).collect());
                }
                Connect::Stdio(Box::new(c))
            }
            Connect::Http(c) => {
                let mut c = *c;
                if let Some(n) = self.max_message_size {
                    c = c.max_message_size(n);
                }
                for (name, f) in self.headers {
                    c = c.header_with(name, move || f());
                }
                if let Some(b) = self.bearer {
                    c = c.bearer_token_with(move || {
                        let t = b().map(crate::Secret::new);
                        async move { Ok(t) }
                    });
                }
                if let Some(p) = self.context.http_proxy {
                    c = c.proxy(p);
                }
                if let Some(t) = self.context.request_timeout {
                    c = c.request_timeout(t);
                }
                if let Some(o) = self.oauth {
                    c = c.oauth(o);
                }
                // Check the URL now: a bad one is a configuration error, not a
                // surprise on first use.
                if let Err(e) = crate::transport::http::HttpTransport::new(c.clone()) {
                    errors.push(e.to_string());
                }
                Connect::Http(Box::new(c))
            }
            other => other,
        };
        if matches!(connect, Connect::Missing) {
            errors.push(format!(
                "server `{}` has no `url`, `command` or `transport`",
                self.name
            ));
        }
        let snapshot = match self.snapshot.as_deref().map(parse_snapshot) {
            None => None,
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                errors.push(e);
                None
            }
        };
        if !errors.is_empty() {
            return Err(Error::config(errors.join("; ")));
        }
        Ok(Mcp {
            spec: Arc::new(Spec {
                name: self.name,
                connect,
                client: Mutex::new(Some(client)),
                only: self.only,
                except: self.except,
                prefix: self.prefix,
                shapes: self.shapes,
                local: self.local,
                approvals: Arc::new(self.approvals),
                defer: self.defer,
                snapshot,
                drift: self.drift,
                oauth_with: self.oauth_with,
            }),
            client: Arc::new(OnceLock::new()),
            tools: tools_cache,
        })
    }
}

/// Two tools a model would see under one name (a local tool and a server tool, or a
/// rename that lands on another tool's name) are a configuration error naming both:
/// a call could only ever reach one of them.
fn check_unique(server: &str, tools: &[McpTool]) -> Result<()> {
    let what = |t: &McpTool| match &t.server_name {
        Some(n) if *n == t.name => format!("{server}'s tool `{n}`"),
        Some(n) => format!("{server}'s tool `{n}` (shown as `{}`)", t.name),
        None => format!("the local tool `{}`", t.name),
    };
    let mut problems = Vec::new();
    for (i, a) in tools.iter().enumerate() {
        if let Some(b) = tools[..i].iter().find(|b| b.name == a.name) {
            problems.push(format!(
                "two tools would reach the model as `{}`: {} and {}; rename one (`tool(\"…\", as = …)`) or set a `prefix`",
                a.name,
                what(b),
                what(a)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::config(problems.join("; ")))
    }
}

fn parse_snapshot(json: &str) -> std::result::Result<Vec<Tool>, String> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| format!("the snapshot is not valid JSON: {e}"))?;
    let tools = v.get("tools").cloned().unwrap_or(Value::Array(Vec::new()));
    serde_json::from_value(tools).map_err(|e| format!("the snapshot's tools are malformed: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The closest of `candidates` to `name`, when close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    /// Edit distance counting a swap of neighbours as one edit (optimal string
    /// alignment), so `ulr` is one edit from `url`.
    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[a.len()][b.len()]
    }
    candidates
        .into_iter()
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1) && *d < name.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A declared server, used as an object: tools shaped for a model, prompts,
/// resources, and the session underneath. Cheap to clone.
#[derive(Clone)]
pub struct Mcp {
    spec: Arc<Spec>,
    client: Arc<OnceLock<std::result::Result<Client, String>>>,
    tools: Arc<Mutex<Option<Arc<Vec<McpTool>>>>>,
}

impl fmt::Debug for Mcp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mcp")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl Mcp {
    /// Declares a server inline (without writing a struct).
    pub fn builder(name: impl Into<String>) -> McpBuilder {
        McpBuilder {
            name: name.into(),
            connect: Connect::Missing,
            directory: None,
            env: Vec::new(),
            headers: Vec::new(),
            bearer: None,
            timeout: None,
            log_level: None,
            input_kinds: None,
            extensions: Vec::new(),
            only: None,
            except: Vec::new(),
            prefix: None,
            shapes: Vec::new(),
            local: Vec::new(),
            approvals: Vec::new(),
            defer: None,
            after_change: Vec::new(),
            after_progress: Vec::new(),
            before_input: Vec::new(),
            context: Context::default(),
            snapshot: None,
            drift: DriftPolicy::Warn,
            oauth: None,
            oauth_with: None,
            max_message_size: None,
            clean_env: None,
            errors: Vec::new(),
        }
    }

    /// The name that identifies this server (the snake_case of a declared struct).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The session underneath (connecting happens on its first request).
    pub fn client(&self) -> Result<&Client> {
        let made = self.client.get_or_init(|| {
            let builder = lock(&self.spec.client)
                .take()
                .ok_or("the client was already built")?;
            let built = match &self.spec.connect {
                Connect::Stdio(c) => builder.stdio((**c).clone()),
                Connect::Http(c) => {
                    let mut c = c.as_ref().clone();
                    if let Some(make) = &self.spec.oauth_with {
                        if let Some(o) = make() {
                            c = c.oauth(o);
                        }
                    }
                    builder.http(c)
                }
                Connect::Custom(make) => make().and_then(|t| builder.build(BoxedTransport(t))),
                Connect::Missing => Err(Error::config("no url, command or transport")),
            };
            built.map_err(|e| e.to_string())
        });
        made.as_ref().map_err(|e| Error::config(e.clone()))
    }

    /// The tools a model sees, shaped by `only`, `except`, `prefix` and the tool
    /// declarations, followed by your own tools. Fetched once; fetched again after the
    /// server says its list changed, or after a call fails because a tool is gone. Tools
    /// only an MCP App's UI may call are in the list, flagged
    /// [`app_only`](McpTool::app_only).
    ///
    /// Fails with a configuration error when a declaration names a tool the server does
    /// not offer.
    pub async fn tools(&self) -> Result<Vec<McpTool>> {
        if let Some(t) = lock(&self.tools).clone() {
            return Ok(t.as_ref().clone());
        }
        let server_tools = self.client()?.list_tools().await?;
        self.check_declarations(&server_tools)?;
        self.check_drift(&server_tools)?;
        let shaped = Arc::new(self.shape(server_tools)?);
        *lock(&self.tools) = Some(shaped.clone());
        Ok(shaped.as_ref().clone())
    }

    fn check_declarations(&self, tools: &[Tool]) -> Result<()> {
        let spec = &self.spec;
        let offered: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let mut named: Vec<(&str, &str)> = Vec::new();
        for n in spec.only.iter().flatten() {
            named.push(("only", n));
        }
        for n in &spec.except {
            named.push(("except", n));
        }
        for s in &spec.shapes {
            named.push(("tool", &s.name));
        }
        for a in spec.approvals.iter() {
            for n in a.names.iter().flatten() {
                named.push(("requires_approval", n));
            }
        }
        for n in spec.defer.iter().flatten() {
            named.push(("defer", n));
        }
        let locals: Vec<String> = spec.local.iter().map(|l| l.definition().name).collect();
        let mut problems = Vec::new();
        for (setting, name) in named {
            if offered.contains(&name) || locals.iter().any(|l| l == name) {
                continue;
            }
            let hint = did_you_mean(name, offered.iter().copied())
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default();
            problems.push(format!(
                "`{setting}` names `{name}`, which {} does not offer{hint}",
                spec.name
            ));
        }
        for s in &spec.shapes {
            if let Some(tool) = tools.iter().find(|t| t.name == s.name) {
                for (k, _) in &s.fixed {
                    let known = tool
                        .input_schema
                        .get("properties")
                        .and_then(|p| p.get(k))
                        .is_some();
                    if !known {
                        problems.push(format!(
                            "fixed argument `{k}` is not an argument of `{}`",
                            s.name
                        ));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::config(problems.join("; ")))
        }
    }

    fn check_drift(&self, live: &[Tool]) -> Result<()> {
        let Some(snapshot) = &self.spec.snapshot else {
            return Ok(());
        };
        if self.spec.drift == DriftPolicy::Ignore {
            return Ok(());
        }
        let mut drift = Vec::new();
        for old in snapshot {
            match live.iter().find(|t| t.name == old.name) {
                None => drift.push(format!("tool `{}` was removed", old.name)),
                Some(new) if new.input_schema != old.input_schema => {
                    drift.push(format!("the arguments of `{}` changed", old.name))
                }
                Some(new) if new.output_schema != old.output_schema => {
                    drift.push(format!("the output of `{}` changed", old.name))
                }
                Some(_) => {}
            }
        }
        if drift.is_empty() {
            return Ok(());
        }
        let msg = format!(
            "{} differs from its snapshot: {}; refresh it with `mcp snapshot`",
            self.spec.name,
            drift.join(", ")
        );
        match self.spec.drift {
            DriftPolicy::Error => Err(Error::config(msg)),
            _ => {
                tracing::warn!(server = %self.spec.name, "{msg}");
                Ok(())
            }
        }
    }

    fn shape(&self, tools: Vec<Tool>) -> Result<Vec<McpTool>> {
        let spec = &self.spec;
        let mut out = Vec::new();
        for tool in tools {
            if spec.only.as_ref().is_some_and(|o| !o.contains(&tool.name))
                || spec.except.contains(&tool.name)
            {
                continue;
            }
            let shape = spec.shapes.iter().find(|s| s.name == tool.name);
            let name = match (shape.and_then(|s| s.rename.clone()), &spec.prefix) {
                (Some(r), _) => r,
                (None, Some(p)) => format!("{p}_{}", tool.name),
                (None, None) => tool.name.clone(),
            };
            let mut input_schema = tool.input_schema.clone();
            if let Some(shape) = shape {
                for (k, _) in &shape.fixed {
                    if let Some(props) = input_schema
                        .get_mut("properties")
                        .and_then(Value::as_object_mut)
                    {
                        props.shift_remove(k);
                    }
                    if let Some(req) = input_schema
                        .get_mut("required")
                        .and_then(Value::as_array_mut)
                    {
                        req.retain(|r| r.as_str() != Some(k));
                    }
                }
            }
            let deferred = spec
                .defer
                .as_ref()
                .is_some_and(|d| d.is_empty() || d.contains(&tool.name));
            out.push(McpTool {
                name,
                description: shape
                    .and_then(|s| s.description.clone())
                    .or_else(|| tool.description.clone()),
                input_schema,
                deferred,
                app_only: tool.is_app_only(),
                server_name: Some(tool.name.clone()),
                definition: Some(tool),
                approvals: spec.approvals.clone(),
            });
        }
        for local in &spec.local {
            let def = local.definition();
            let deferred = spec
                .defer
                .as_ref()
                .is_some_and(|d| d.is_empty() || d.contains(&def.name));
            out.push(McpTool {
                name: def.name.clone(),
                server_name: None,
                description: def.description.clone(),
                input_schema: def.input_schema.clone(),
                deferred,
                app_only: false,
                definition: Some(def),
                approvals: spec.approvals.clone(),
            });
        }
        check_unique(&spec.name, &out)?;
        Ok(out)
    }

    /// Calls a tool by the name the model sees (or the server's name), with fixed
    /// arguments added and the result wrapped as declared. A tool that fails returns a
    /// result whose `is_error()` is true; a protocol error is an `Err`.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<CallToolResult> {
        self.call_with(name, arguments, RequestOptions::default())
            .await
    }

    /// [`Mcp::call`] with per-call options: a timeout, a progress callback, a
    /// cancellation token.
    pub async fn call_with(
        &self,
        name: &str,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallToolResult> {
        let tools = self.tools().await?;
        let tool = tools.iter().find(|t| t.name == name).or_else(|| {
            tools
                .iter()
                .find(|t| t.server_name.as_deref() == Some(name))
        });
        let Some(tool) = tool else {
            let hint = did_you_mean(name, tools.iter().map(|t| t.name.as_str()))
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default();
            return Err(Error::config(format!(
                "{} has no tool `{name}`{hint}",
                self.spec.name
            )));
        };
        let Some(server_name) = tool.server_name.clone() else {
            let local = self
                .spec
                .local
                .iter()
                .find(|l| l.definition().name == tool.name)
                .cloned()
                .ok_or_else(|| Error::config(format!("tool `{name}` is gone")))?;
            return local.call(self, arguments).await;
        };
        let mut args = match arguments {
            Value::Null => Map::new(),
            Value::Object(m) => m,
            _ => return Err(Error::config("tool arguments must be a JSON object")),
        };
        let shape = self.spec.shapes.iter().find(|s| s.name == server_name);
        if let Some(shape) = shape {
            for (k, v) in &shape.fixed {
                args.insert(k.clone(), v.get());
            }
        }
        let args = Value::Object(args);
        let result = match self
            .client()?
            .call_tool(&server_name, args.clone())
            .options(options)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                if e.is_not_found() {
                    // The tool may be gone: fetch the list again next time.
                    *lock(&self.tools) = None;
                }
                return Err(e);
            }
        };
        match shape.and_then(|s| s.wrap.clone()) {
            Some(wrap) => wrap(result, args).await,
            None => Ok(result),
        }
    }

    /// The prompts the server offers.
    pub async fn prompts(&self) -> Result<Vec<Prompt>> {
        self.client()?.list_prompts().await
    }

    /// Fills in a prompt; its messages are ready for a chat.
    pub async fn prompt<I, K, V>(&self, name: &str, arguments: I) -> Result<GetPromptResult>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.client()?.get_prompt(name, arguments).await
    }

    /// The resources the server lists.
    pub async fn resources(&self) -> Result<Vec<Resource>> {
        self.client()?.list_resources().await
    }

    /// Reads a resource.
    pub async fn resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let read = self.client()?.read_resource(uri).await?;
        if read.contents.is_empty() {
            return Err(Error::invalid_response(format!(
                "{} returned no content for {uri}",
                self.spec.name
            )));
        }
        Ok(read)
    }

    /// Reads a resource from a template (RFC 6570), filling in its variables.
    pub async fn resource_from_template(
        &self,
        template: &str,
        variables: &[(&str, &str)],
    ) -> Result<ReadResourceResult> {
        let uri = expand_template(template, variables)?;
        self.resource(&uri).await
    }

    /// The server's resource templates.
    pub async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        self.client()?.list_resource_templates().await
    }

    /// Suggests values for an argument of a prompt or resource template.
    pub async fn complete(
        &self,
        reference: CompletionRef,
        argument: &str,
        value: &str,
        context: &[(&str, &str)],
    ) -> Result<Completion> {
        self.client()?
            .complete(reference, argument, value, context)
            .await
    }

    /// The server's instructions for using it, if any.
    pub async fn instructions(&self) -> Result<Option<String>> {
        self.client()?.instructions().await
    }

    /// The version the server reports for itself, if any.
    pub async fn version(&self) -> Result<Option<String>> {
        self.client()?.server_version().await
    }

    /// Listens for the server's changes (see [`Client::listen`]).
    pub async fn listen(&self, resources: &[&str]) -> Result<()> {
        self.client()?.listen(resources).await
    }

    /// Listens for changes of resources and of tasks' statuses (see
    /// [`Client::listen_for`]); task changes reach `after_change` as
    /// [`Change::Task`](crate::Change::Task).
    pub async fn listen_for(&self, resources: &[&str], tasks: &[&str]) -> Result<()> {
        self.client()?.listen_for(resources, tasks).await
    }

    /// Starts a server tool in the background (see [`Client::start_tool`]), with the
    /// declaration's fixed arguments; `name` is the model-facing name or the server's.
    pub async fn start(&self, name: &str, arguments: Value) -> Result<crate::Started> {
        let tools = self.tools().await?;
        let tool = tools
            .iter()
            .find(|t| t.name == name)
            .or_else(|| {
                tools
                    .iter()
                    .find(|t| t.server_name.as_deref() == Some(name))
            })
            .ok_or_else(|| Error::config(format!("{} has no tool `{name}`", self.spec.name)))?;
        let server_name = tool.server_name.clone().ok_or_else(|| {
            Error::config(format!("`{name}` is a local tool: it runs in this process"))
        })?;
        let mut args = match arguments {
            Value::Null => Map::new(),
            Value::Object(m) => m,
            _ => return Err(Error::config("tool arguments must be a JSON object")),
        };
        if let Some(shape) = self.spec.shapes.iter().find(|s| s.name == server_name) {
            for (k, v) in &shape.fixed {
                args.insert(k.clone(), v.get());
            }
        }
        self.client()?
            .start_tool(&server_name, Value::Object(args))
            .await
    }

    /// The task with this id (see [`Client::task`]).
    pub fn task(&self, id: impl Into<String>) -> Result<crate::Task> {
        Ok(self.client()?.task(id))
    }

    /// The tools a model may be offered: [`tools`](Self::tools) without those only an
    /// MCP App's UI may call.
    pub async fn model_tools(&self) -> Result<Vec<McpTool>> {
        Ok(self
            .tools()
            .await?
            .into_iter()
            .filter(|t| !t.app_only)
            .collect())
    }

    /// Reads an MCP App's UI resource (see [`Client::read_ui`]).
    pub async fn read_ui(&self, uri: &str) -> Result<crate::UiResource> {
        self.client()?.read_ui(uri).await
    }

    /// The URL to send the user to so they can authorize this server (OAuth servers).
    /// The authorization server redirects back to `redirect_uri`; pass the callback's
    /// parameters to [`authorize`](Self::authorize).
    pub async fn authorization_url(&self, redirect_uri: &str) -> Result<String> {
        self.client()?.authorization()?.url(redirect_uri).await
    }

    /// Completes an authorization with the callback's parameters (a redirect URL or
    /// its query). Fails when they do not match what `authorization_url` started.
    pub async fn authorize(&self, callback: &str) -> Result<()> {
        self.client()?
            .authorization()?
            .complete(crate::auth::Callback::from_url(callback))
            .await
    }

    /// Whether the owner has authorized this server.
    pub fn is_authorized(&self) -> bool {
        self.client()
            .ok()
            .and_then(|c| c.authorization().ok())
            .is_some_and(|a| a.is_authorized())
    }

    /// Forgets the owner's credentials for this server.
    pub async fn deauthorize(&self) -> Result<()> {
        self.client()?.authorization()?.forget().await
    }

    /// Closes the connection (stops a stdio server); the next request reconnects.
    pub async fn close(&self) -> Result<()> {
        *lock(&self.tools) = None;
        match self.client.get() {
            Some(Ok(c)) => c.close().await,
            _ => Ok(()),
        }
    }
}

/// Expands an RFC 6570 URI template.
pub fn expand_template(template: &str, variables: &[(&str, &str)]) -> Result<String> {
    use iri_string::spec::UriSpec;
    use iri_string::template::simple_context::SimpleContext;
    use iri_string::template::UriTemplateStr;
    let t = UriTemplateStr::new(template)
        .map_err(|e| Error::config(format!("`{template}` is not a URI template: {e}")))?;
    let mut ctx = SimpleContext::new();
    for (k, v) in variables {
        ctx.insert(*k, *v);
    }
    let expanded = t
        .expand::<UriSpec, _>(&ctx)
        .map_err(|e| Error::config(format!("cannot expand `{template}`: {e}")))?;
    Ok(expanded.to_string())
}

struct BoxedTransport(Box<dyn Transport>);

impl Transport for BoxedTransport {
    fn request(
        &self,
        r: crate::jsonrpc::Request,
        cx: crate::RequestContext,
    ) -> BoxFuture<'_, Result<crate::jsonrpc::Response>> {
        self.0.request(r, cx)
    }
    fn notify<'a>(
        &'a self,
        n: crate::jsonrpc::Notification,
        v: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        self.0.notify(n, v)
    }
    fn cancel<'a>(
        &'a self,
        n: crate::jsonrpc::Notification,
        v: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        self.0.cancel(n, v)
    }
    fn close(&self) -> BoxFuture<'_, Result<()>> {
        self.0.close()
    }
    fn era_hint(&self) -> Option<crate::Era> {
        self.0.era_hint()
    }
    fn mirrors_param_headers(&self) -> bool {
        self.0.mirrors_param_headers()
    }
    fn authorization(&self) -> Option<crate::auth::Authorization<'_>> {
        self.0.authorization()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand() {
        assert_eq!(
            expand_template("file:///{path}", &[("path", "Gemfile")]).unwrap(),
            "file:///Gemfile"
        );
        assert_eq!(
            expand_template("demo://r/{id}{?q}", &[("id", "7"), ("q", "a b")]).unwrap(),
            "demo://r/7?q=a%20b"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            did_you_mean("list_isues", ["list_issues", "get_issue"]),
            Some("list_issues")
        );
        assert_eq!(did_you_mean("zzz", ["list_issues"]), None);
    }

    #[test]
    fn bad_declarations_fail_to_build() {
        let e = Mcp::builder("x").build().unwrap_err();
        assert!(e.to_string().contains("no `url`"), "{e}");
        let e = Mcp::builder("x")
            .url("http://example.com/mcp")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("https://"), "{e}");
        let e = Mcp::builder("x")
            .command(["echo"])
            .extension("audit", Value::Null)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("vendor prefix"), "{e}");
    }
}

/// A tool result with its structured output read as `T` (generated typed methods
/// return it).
#[derive(Clone, Debug)]
pub struct Typed<T> {
    /// The whole result.
    pub result: CallToolResult,
    /// `structuredContent` as `T`, when the tool returned it and it matched.
    pub output: Option<T>,
}

impl<T> Typed<T> {
    /// True when the tool ran and failed.
    pub fn is_error(&self) -> bool {
        self.result.is_error()
    }
    /// The text blocks, joined by newlines.
    pub fn text(&self) -> String {
        self.result.text()
    }
}

impl McpBuilder {
    /// Builds, deferring any configuration error to first use (for generated code,
    /// whose constructors cannot fail).
    #[doc(hidden)]
    pub fn build_or_defer(self) -> Mcp {
        let name = self.name.clone();
        match self.build() {
            Ok(m) => m,
            Err(e) => {
                let client = OnceLock::new();
                let _ = client.set(Err(e.to_string()));
                Mcp {
                    spec: Arc::new(Spec {
                        name,
                        connect: Connect::Missing,
                        client: Mutex::new(None),
                        only: None,
                        except: Vec::new(),
                        prefix: None,
                        shapes: Vec::new(),
                        local: Vec::new(),
                        approvals: Arc::new(Vec::new()),
                        defer: None,
                        snapshot: None,
                        drift: DriftPolicy::Ignore,
                        oauth_with: None,
                    }),
                    client: Arc::new(client),
                    tools: Arc::new(Mutex::new(None)),
                }
            }
        }
    }
}

impl Mcp {
    /// Calls a tool with typed arguments and reads its structured output as `T`.
    pub async fn call_typed<A, T>(&self, name: &str, arguments: &A) -> Result<Typed<T>>
    where
        A: serde::Serialize,
        T: serde::de::DeserializeOwned,
    {
        let args = serde_json::to_value(arguments).map_err(|e| {
            Error::config(format!(
                "the arguments of `{name}` cannot be serialized: {e}"
            ))
        })?;
        let result = self.call(name, args).await?;
        let output = match &result.structured_content {
            Some(v) if !result.is_error() => match serde_json::from_value(v.clone()) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(server = %self.spec.name, tool = name, error = %e, "structured output does not match the snapshot's outputSchema");
                    None
                }
            },
            _ => None,
        };
        Ok(Typed { result, output })
    }
}

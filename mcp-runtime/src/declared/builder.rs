//! Declaring a server: [`McpBuilder`] (how to reach it, how to shape it), checked all
//! at once when built.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use super::callbacks::{ChangeFn, InputFn, OAuthConfig, OAuthFactory, ProgressFn, Shared};
use super::connect::{Connect, Context};
use super::mcp::{LocalTool, Mcp, Spec, ToolMap};
use super::shape::{Approval, DriftPolicy, ToolShape};
use super::tool::{McpTool, ServerCall};
use crate::client::ToolEntry;
use crate::client::{Change, Client};
use crate::error::{Error, Result};
use crate::input::{InputKinds, InputRequest, InputResponse};
use crate::model::{LogLevel, Progress, Tool};
use crate::transport::Transport;
use mcp_runtime_core::lock;

/// Builds an [`Mcp`]: the inline form of a declared server.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn run() -> mcp_runtime::Result<()> {
/// use mcp_runtime::{Mcp, declared::ToolShape};
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
    pub(super) name: String,
    pub(super) connect: Connect,
    pub(super) directory: Option<String>,
    pub(super) env: Vec<(String, ArgEnv)>,
    pub(super) headers: Vec<(String, ArgHeader)>,
    pub(super) bearer: Option<Shared<Option<String>>>,
    pub(super) timeout: Option<Duration>,
    pub(super) log_level: Option<LogLevel>,
    pub(super) input_kinds: Option<InputKinds>,
    pub(super) extensions: Vec<(String, Value)>,
    pub(super) only: Option<Vec<String>>,
    pub(super) except: Vec<String>,
    pub(super) prefix: Option<String>,
    pub(super) shapes: Vec<ToolShape>,
    pub(super) local: Vec<Arc<dyn LocalTool>>,
    pub(super) approvals: Vec<Approval>,
    pub(super) defer: Option<Vec<String>>,
    pub(super) after_change: Vec<ChangeFn>,
    pub(super) after_progress: Vec<ProgressFn>,
    pub(super) before_input: Vec<InputFn>,
    pub(super) context: Context,
    pub(super) snapshot: Option<String>,
    pub(super) drift: DriftPolicy,
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(super) oauth: Option<OAuthConfig>,
    pub(super) oauth_with: Option<OAuthFactory>,
    pub(super) max_message_size: Option<usize>,
    pub(super) inherit_env: Vec<String>,
    pub(super) inherit_all_env: bool,
    pub(super) errors: Vec<String>,
}

#[cfg_attr(not(feature = "stdio"), allow(dead_code))]
pub(super) enum ArgEnv {
    Fixed(String),
    Computed(Shared<String>),
}

/// A header's value: the same for every request (part of the configuration
/// fingerprint, keyed), or computed for every request.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(super) enum ArgHeader {
    Fixed(String),
    Computed(Shared<Option<String>>),
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
        #[cfg(feature = "http")]
        {
            self.connect = Connect::Http(Box::new(crate::transport::http::HttpConfig::new(url)));
        }
        #[cfg(not(feature = "http"))]
        self.errors.push(format!(
            "`url = {:?}` needs mcp-runtime's `http` feature (this build has only stdio)",
            url.into()
        ));
        self
    }
    /// The command that starts a local server speaking over stdio (program, then its
    /// arguments). It starts on the first request.
    pub fn command<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        #[cfg(feature = "stdio")]
        match crate::transport::stdio::StdioConfig::from_argv(argv) {
            Ok(c) => self.connect = Connect::Stdio(Box::new(c)),
            Err(e) => self.errors.push(e.config_detail()),
        }
        #[cfg(not(feature = "stdio"))]
        {
            let program = argv.into_iter().next().map(Into::into).unwrap_or_default();
            self.errors.push(format!(
                "`command = {program:?}` needs mcp-runtime's `stdio` feature (this build has only HTTP)"
            ));
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
    /// An environment variable for a stdio server.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), ArgEnv::Fixed(value.into())));
        self
    }
    /// Also passes these variables of this process's environment to a stdio server.
    /// By default a spawned server gets only the safe default set
    /// ([`SAFE_ENV_VARS`](crate::transport::stdio::SAFE_ENV_VARS): `HOME`, `LOGNAME`,
    /// `PATH`, `SHELL`, `TERM`, `USER`), these, and the declared [`env`](Self::env).
    pub fn inherit_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.inherit_env.extend(names.into_iter().map(Into::into));
        self
    }
    /// Passes this process's whole environment to a stdio server — API keys, database
    /// URLs and tokens included. Opt in knowingly; [`inherit_env`](Self::inherit_env)
    /// names just what the server needs.
    pub fn inherit_all_env(mut self) -> Self {
        self.inherit_all_env = true;
        self
    }
    /// The largest message the server may send, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`](crate::transport::DEFAULT_MAX_MESSAGE_SIZE), 64 MiB).
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
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .push((name.into(), ArgHeader::Fixed(value.into())));
        self
    }
    /// An HTTP header computed for every request.
    pub fn header_with(
        mut self,
        name: impl Into<String>,
        value: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.headers
            .push((name.into(), ArgHeader::Computed(Arc::new(value))));
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
    /// Declares a protocol extension your application supports. `"apps"`, `"tasks"`
    /// and `"skills"` name the MCP Apps, Tasks and Skills extensions; others need a
    /// vendor prefix.
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
            "skills" => (
                crate::skills::SKILLS_EXTENSION.to_owned(),
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
    #[cfg(feature = "oauth")]
    pub fn oauth(mut self, oauth: crate::auth::OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// OAuth settings made when the server is first used (so they can read the
    /// declaring struct's inputs and methods).
    #[cfg(feature = "oauth")]
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
        match (self.timeout, self.context.request_timeout) {
            (Some(t), _) => client = client.timeout(t),
            // Over HTTP the context's timeout is the transport's request timeout (it
            // names its setting when it fires); the session's own limit stays just
            // above it, so which one fires is never a race.
            (None, Some(t)) if self.connect.is_http() => {
                client = client.timeout(t + Duration::from_secs(1));
            }
            (None, Some(t)) => client = client.timeout(t),
            (None, None) => {}
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
            client = client.input_requests(k);
        }
        let tools_cache: Arc<Mutex<Option<Arc<ToolMap>>>> = Arc::new(Mutex::new(None));
        {
            let cache = tools_cache.clone();
            let callbacks = self.after_change;
            client = client.after_change(move |change| {
                if *change == Change::Tools {
                    *lock(&cache) = None;
                }
                for cb in &callbacks {
                    cb(change);
                }
            });
        }
        for cb in self.after_progress {
            client = client.after_progress(move |p| cb(p));
        }
        // Settings of one kind of connection on another are mistakes, not no-ops.
        let is_stdio = self.connect.is_stdio();
        let is_http = self.connect.is_http();
        if !is_stdio && !matches!(self.connect, Connect::Missing) {
            let what = if is_http {
                "a `url` server"
            } else {
                "a custom transport"
            };
            for (set, name) in [
                (self.directory.is_some(), "directory"),
                (!self.env.is_empty(), "env"),
                (!self.inherit_env.is_empty(), "inherit_env"),
                (self.inherit_all_env, "inherit_all_env"),
            ] {
                if set {
                    errors.push(format!(
                        "server `{}`: `{name}` applies to a `command` server only, not {what}",
                        self.name
                    ));
                }
            }
        }
        if !is_http && !matches!(self.connect, Connect::Missing) {
            let what = if is_stdio {
                "a `command` server"
            } else {
                "a custom transport"
            };
            for (set, name) in [
                (!self.headers.is_empty(), "header"),
                (self.bearer.is_some(), "bearer_token"),
                (self.oauth.is_some() || self.oauth_with.is_some(), "oauth"),
            ] {
                if set {
                    errors.push(format!(
                        "server `{}`: `{name}` applies to a `url` server only, not {what}",
                        self.name
                    ));
                }
            }
        }
        let connect = match self.connect {
            #[cfg(feature = "stdio")]
            Connect::Stdio(c) => {
                let mut c = *c;
                if let Some(d) = self.directory {
                    c = c.directory(d);
                }
                for name in self.inherit_env {
                    c = c.inherit_env(name);
                }
                if self.inherit_all_env {
                    c = c.inherit_all_env();
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
                    let names = computed.iter().map(|(k, _)| k.clone()).collect();
                    c = c.env_with_named(names, move || {
                        computed.iter().map(|(k, f)| (k.clone(), f())).collect()
                    });
                }
                Connect::Stdio(Box::new(c))
            }
            #[cfg(feature = "http")]
            Connect::Http(c) => {
                let mut c = *c;
                if let Some(n) = self.max_message_size {
                    c = c.max_message_size(n);
                }
                for (name, v) in self.headers {
                    c = match v {
                        ArgHeader::Fixed(v) => c.header(name, v),
                        ArgHeader::Computed(f) => c.header_with(name, move || f()),
                    };
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
                #[cfg(feature = "oauth")]
                if let Some(o) = self.oauth {
                    c = c.oauth(o);
                }
                // Check the URL now: a bad one is a configuration error, not a
                // surprise on first use.
                if let Err(e) = crate::transport::http::HttpTransport::new(c.clone()) {
                    errors.push(e.config_detail());
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
        // The snapshot's tools, resolved once, in its order (the typed methods call
        // them by position).
        let declared = snapshot
            .iter()
            .flatten()
            .map(|t| {
                let shape = self.shapes.iter().find(|s| s.name == t.name);
                let entry = ToolEntry::of_definition(t);
                Mutex::new(Arc::new(ServerCall::new(
                    t.name.clone(),
                    shape,
                    Some(entry),
                )))
            })
            .collect();
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
                declared,
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
pub(super) fn check_unique(server: &str, tools: &[McpTool]) -> Result<()> {
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

pub(super) fn parse_snapshot(json: &str) -> std::result::Result<Vec<Tool>, String> {
    let snapshot = crate::snapshot::Snapshot::parse(json).map_err(|e| e.to_string())?;
    serde_json::from_value(Value::Array(snapshot.tools))
        .map_err(|e| format!("the snapshot's tools are malformed: {e}"))
}

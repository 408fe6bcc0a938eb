//! Building a [`Client`]: its settings, handlers and extensions.

use super::change::{Change, ChangeCallback, LogCallback, ProgressCallback};
use super::details::ProtocolMode;
use super::handle::{Client, Inner, Life};
use super::inbox::Inbox;
use super::index::ToolIndex;
use super::parts::{
    InputRouting, ListCache, Listeners, ProgressRegistry, Session, Settings, TaskWatch,
};
use crate::error::{Error, Result};
use crate::input::{InputHandler, InputKinds, RootsHandler, SamplingHandler};
use crate::model::{Implementation, LogLevel, LogMessage, Progress};
use crate::transport::{Incoming, Transport};
use serde_json::{json, Map, Value};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Builds a [`Client`].
pub struct ClientBuilder {
    name: String,
    client_info: Implementation,
    timeout: Duration,
    max_timeout: Duration,
    connect_timeout: Option<Duration>,
    log_level: Option<LogLevel>,
    input_handler: Option<Arc<dyn InputHandler>>,
    input_kinds: Option<InputKinds>,
    sampling: Option<Arc<dyn SamplingHandler>>,
    roots: Option<Arc<dyn RootsHandler>>,
    extensions: Map<String, Value>,
    max_input_rounds: u32,
    on_change: Vec<ChangeCallback>,
    on_progress: Vec<ProgressCallback>,
    on_log: Vec<LogCallback>,
    protocol: ProtocolMode,
    errors: Vec<String>,
    /// The HTTP transport [`http`](Self::http) made: the client reaches its OAuth
    /// authorization through it.
    #[cfg(feature = "oauth")]
    oauth: Option<crate::transport::http::HttpTransport>,
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
            connect_timeout: None,
            log_level: None,
            input_handler: None,
            input_kinds: None,
            sampling: None,
            roots: None,
            extensions: Map::new(),
            max_input_rounds: 8,
            on_change: Vec::new(),
            on_progress: Vec::new(),
            on_log: Vec::new(),
            protocol: ProtocolMode::Auto,
            errors: Vec::new(),
            #[cfg(feature = "oauth")]
            oauth: None,
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
    /// How long each request of the connect (`server/discover`, `initialize`) may wait
    /// for its answer (default: the [`timeout`](Self::timeout)). The clock starts once
    /// the transport is ready (a stdio server's process started). The era is never
    /// decided by it: the client waits for the server's answer to `server/discover`
    /// and sends `initialize` only after an answer that is not modern. Over a message
    /// stream (stdio, custom transports), a server that leaves `server/discover`
    /// unanswered this long is restarted and asked `initialize` alone, so no server
    /// ever reads both (docs/runtime.md, "How the era is decided").
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
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
    pub fn input_requests(mut self, kinds: InputKinds) -> Self {
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
    /// Declares that the application loads skills itself (the skills extension,
    /// `io.modelcontextprotocol/skills`, with no settings), so a server may leave out a
    /// fallback "load skill" tool. Listing and loading skills work without it: they
    /// depend on the server's declaration.
    pub fn skills(self) -> Self {
        self.extension(crate::skills::SKILLS_EXTENSION, json!({}))
    }
    /// The most rounds of input a request may ask for before it fails (default 8).
    pub fn max_input_rounds(mut self, rounds: u32) -> Self {
        self.max_input_rounds = rounds;
        self
    }
    /// Called when the server announces a change. It runs on the connection's reading
    /// task: keep it short, spawn for long work.
    pub fn after_change(mut self, f: impl Fn(&Change) + Send + Sync + 'static) -> Self {
        self.on_change.push(Arc::new(f));
        self
    }
    /// Called with every progress report, of any request.
    pub fn after_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.on_progress.push(Arc::new(f));
        self
    }
    /// Called with every log message the server sends (`notifications/message`), as
    /// well as the `tracing` event (target `mcp_runtime::server_log`) every message
    /// becomes. Which levels the server sends: [`log_level`](Self::log_level). It
    /// runs on the connection's reading task: keep it short.
    pub fn after_log(mut self, f: impl Fn(&LogMessage) + Send + Sync + 'static) -> Self {
        self.on_log.push(Arc::new(f));
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
        #[cfg(feature = "oauth")]
        let builder = ClientBuilder {
            oauth: Some(transport.clone()),
            ..builder
        };
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
        if self.connect_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::config("the connect timeout must be more than zero"));
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
            #[cfg(feature = "oauth")]
            oauth: self.oauth,
            settings: Settings {
                name: self.name,
                client_info,
                capabilities: Value::Object(caps),
                timeout: self.timeout,
                max_timeout: self.max_timeout.max(self.timeout),
                connect_timeout: self.connect_timeout.unwrap_or(self.timeout),
                log_level: self.log_level,
                protocol: self.protocol,
                on_log: self.on_log,
            },
            session: Session::new(),
            input_routing: InputRouting {
                input: self.input_handler,
                kinds,
                sampling: self.sampling,
                roots: self.roots,
                max_rounds: self.max_input_rounds,
            },
            lists: ListCache::default(),
            progress: ProgressRegistry::new(self.on_progress),
            listeners: Listeners::new(self.on_change),
            tool_index: ToolIndex::default(),
            tasks: TaskWatch::default(),
            #[cfg(feature = "skills")]
            skill_files: std::sync::Mutex::new(crate::skills::FileCache::default()),
        });
        Ok(Client {
            inner,
            life: Arc::new(Life::default()),
        })
    }
}

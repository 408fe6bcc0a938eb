//! The types of a declared server that its modules share: the handle ([`Mcp`]) and
//! what it is made of (its spec, how it connects, its shaped tools, the settings and
//! callbacks of a declaration). Definitions only, at the bottom of `declared/`: the
//! behaviour is in the modules above it (`mod`, `builder`, `shape`, `calls`, `typed`).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::client::{Change, Client, ClientBuilder};
use crate::error::Result;
use crate::input::{InputRequest, InputResponse};
use crate::model::{CallToolResult, Progress, Tool};
use crate::transport::{BoxFuture, Transport};

pub(super) type Shared<T> = Arc<dyn Fn() -> T + Send + Sync>;
pub(super) type WrapFn =
    Arc<dyn Fn(CallToolResult, Value) -> BoxFuture<'static, Result<CallToolResult>> + Send + Sync>;
pub(super) type InputFn =
    Arc<dyn Fn(InputRequest) -> BoxFuture<'static, Option<InputResponse>> + Send + Sync>;
pub(super) type Predicate = Arc<dyn Fn(&Tool) -> bool + Send + Sync>;
pub(super) type ChangeFn = Arc<dyn Fn(&Change) + Send + Sync>;
pub(super) type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;
pub(super) type TransportFactory = Arc<dyn Fn() -> Result<Box<dyn Transport>> + Send + Sync>;
pub(super) type OAuthFactory = Arc<dyn Fn() -> Option<OAuthConfig> + Send + Sync>;
/// OAuth settings (HTTP only: without the `http` feature there are none to give).
#[cfg(feature = "oauth")]
pub(super) type OAuthConfig = crate::auth::OAuth;
#[cfg(not(feature = "oauth"))]
pub(super) type OAuthConfig = std::convert::Infallible;

/// A declared server, used as an object: tools shaped for a model, prompts,
/// resources, and the session underneath. Cheap to clone.
#[derive(Clone)]
pub struct Mcp {
    pub(super) spec: Arc<Spec>,
    pub(super) client: Arc<OnceLock<std::result::Result<Client, String>>>,
    pub(super) tools: Arc<Mutex<Option<Arc<ToolMap>>>>,
}

/// An [`Mcp`] held weakly (by the tools it shaped).
#[derive(Clone)]
pub(super) struct WeakMcp {
    pub(super) spec: std::sync::Weak<Spec>,
    pub(super) client: std::sync::Weak<OnceLock<std::result::Result<Client, String>>>,
    pub(super) tools: std::sync::Weak<Mutex<Option<Arc<ToolMap>>>>,
}

impl WeakMcp {
    pub(super) fn upgrade(&self) -> Option<Mcp> {
        Some(Mcp {
            spec: self.spec.upgrade()?,
            client: self.client.upgrade()?,
            tools: self.tools.upgrade()?,
        })
    }
}

/// The shaped tools of a server, found by the name a model sees or the server's.
pub(super) struct ToolMap {
    pub(super) list: Vec<McpTool>,
    pub(super) by_name: std::collections::HashMap<String, usize>,
    pub(super) by_server_name: std::collections::HashMap<String, usize>,
}

impl fmt::Debug for Mcp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mcp")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

pub(super) struct Spec {
    pub(super) name: String,
    pub(super) connect: Connect,
    pub(super) client: Mutex<Option<ClientBuilder>>,
    pub(super) only: Option<Vec<String>>,
    pub(super) except: Vec<String>,
    pub(super) prefix: Option<String>,
    pub(super) shapes: Vec<ToolShape>,
    pub(super) local: Vec<Arc<dyn LocalTool>>,
    pub(super) approvals: Arc<Vec<Approval>>,
    pub(super) defer: Option<Vec<String>>,
    pub(super) snapshot: Option<Vec<Tool>>,
    pub(super) drift: DriftPolicy,
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(super) oauth_with: Option<OAuthFactory>,
}

pub(super) enum Connect {
    #[cfg(feature = "stdio")]
    Stdio(Box<crate::transport::stdio::StdioConfig>),
    #[cfg(feature = "http")]
    Http(Box<crate::transport::http::HttpConfig>),
    Custom(TransportFactory),
    Missing,
}

impl Connect {
    pub(super) fn is_stdio(&self) -> bool {
        #[cfg(feature = "stdio")]
        if let Connect::Stdio(_) = self {
            return true;
        }
        false
    }
    pub(super) fn is_http(&self) -> bool {
        #[cfg(feature = "http")]
        if let Connect::Http(_) = self {
            return true;
        }
        false
    }
}

/// Per-connection configuration shared by many servers (the seed's `context:`): an HTTP
/// proxy and a request timeout.
#[derive(Clone, Debug, Default)]
pub struct Context {
    pub(super) http_proxy: Option<String>,
    pub(super) request_timeout: Option<Duration>,
}

/// A value sent for a fixed argument: the same every time, or computed per call.
#[derive(Clone)]
pub enum ArgValue {
    /// The same value every call.
    Fixed(Value),
    /// Computed for every call.
    Computed(Shared<Value>),
}

/// How to present one server tool: another name, another description, arguments the
/// model does not see (always sent), and a wrapper for its results.
#[derive(Clone)]
pub struct ToolShape {
    pub(super) name: String,
    pub(super) rename: Option<String>,
    pub(super) description: Option<String>,
    pub(super) fixed: Vec<(String, ArgValue)>,
    pub(super) wrap: Option<WrapFn>,
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
pub(super) struct Approval {
    /// `None`: every tool.
    pub(super) names: Option<Vec<String>>,
    pub(super) predicate: Option<Predicate>,
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
    pub(super) approvals: Arc<Vec<Approval>>,
    /// Its declaration's fixed arguments as its definition digest covers them (see
    /// [`ToolShape::fixed_description`]); `None` when it has none.
    pub(super) fixed: Option<Arc<Value>>,
    /// The handle it came from, held weakly: [`call`](McpTool::call) goes through it.
    pub(super) owner: Option<super::WeakMcp>,
}

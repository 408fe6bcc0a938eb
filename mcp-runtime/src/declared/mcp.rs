//! The handle of a declared server ([`Mcp`]) and what it is made of: its spec (how to
//! reach the server, how to shape it), its shaped tools, and the tools of your own
//! ([`LocalTool`]) that get the handle on every call. Definitions only: the behaviour
//! is in the modules above (`declared`, `builder`, `calls`, `typed`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde_json::Value;

use super::callbacks::OAuthFactory;
use super::connect::Connect;
use super::shape::{Approval, DriftPolicy, ToolShape};
use super::tool::{McpTool, ServerCall};
use crate::client::{Client, ClientBuilder};
use crate::error::Result;
use crate::model::{CallToolResult, Tool};
use crate::transport::BoxFuture;

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
    pub(super) spec: Weak<Spec>,
    pub(super) client: Weak<OnceLock<std::result::Result<Client, String>>>,
    pub(super) tools: Weak<Mutex<Option<Arc<ToolMap>>>>,
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

/// The shaped tools of a server, each resolved once, found by the name a model sees
/// (or, when no model-facing name is the same, the server's): one map.
pub(super) struct ToolMap {
    pub(super) list: Arc<[McpTool]>,
    pub(super) by_name: HashMap<String, usize>,
}

impl fmt::Debug for Mcp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mcp")
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

/// What a declaration says, checked: how to reach the server and how to shape it.
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
    /// The snapshot's tools resolved, in the snapshot's order: the typed methods
    /// `#[mcp]` generates call them by position. Resolved from the snapshot when
    /// built, again from the server's list each time the handle lists its tools.
    pub(super) declared: Vec<Mutex<Arc<ServerCall>>>,
    pub(super) drift: DriftPolicy,
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(super) oauth_with: Option<OAuthFactory>,
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

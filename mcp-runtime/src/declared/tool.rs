//! A tool as a model sees it ([`McpTool`]): shaped, with its policy, and resolved once
//! — it holds everything a call of it needs (the server's name for it, the
//! declaration's fixed arguments and wrap, the headers its arguments are mirrored into,
//! its task support and UI resource), so calling it looks nothing up.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::callbacks::WrapFn;
use super::shape::{Approval, ArgValue, ToolShape};
use crate::client::{RequestOptions, ToolEntry};
use crate::error::{Error, Result};
use crate::input::{ended, CallOutcome};
use crate::model::{CallToolResult, Tool};
use crate::transport::BoxFuture;

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
    /// What a call needs, resolved when the tool was shaped; `None` for a tool that
    /// did not come from a handle ([`McpTool::from_definition`]).
    pub(super) target: Option<Arc<Target>>,
}

/// A shaped tool, resolved: where a call goes and with what.
pub(super) struct Target {
    /// The name of the server it came from (for errors).
    pub(super) server: String,
    /// The handle that shaped it, held weakly: a call goes through it.
    pub(super) owner: Arc<dyn Owner>,
    /// The tool itself.
    pub(super) run: Run,
}

/// What a resolved tool runs.
pub(super) enum Run {
    /// A server tool.
    Server(Arc<ServerCall>),
    /// A tool of your own: its position among the declaration's local tools.
    Local(usize),
}

/// A server tool, resolved: its name on the server, the declaration's fixed arguments
/// and wrap, and what the session needs to send it (`None`: the session's tool index
/// decides, as for any call by name).
pub(super) struct ServerCall {
    pub(super) name: String,
    pub(super) fixed: Vec<(String, ArgValue)>,
    pub(super) wrap: Option<WrapFn>,
    pub(super) entry: Option<Arc<ToolEntry>>,
}

impl ServerCall {
    /// The server tool `name`, shaped by `shape`, sent as `entry` says.
    pub(super) fn new(name: String, shape: Option<&ToolShape>, entry: Option<ToolEntry>) -> Self {
        ServerCall {
            name,
            fixed: shape.map(|s| s.fixed.clone()).unwrap_or_default(),
            wrap: shape.and_then(|s| s.wrap.clone()),
            entry: entry.map(Arc::new),
        }
    }

    /// `arguments` as an object, with the declaration's fixed arguments added.
    pub(super) fn arguments(&self, arguments: Value) -> Result<Value> {
        let mut args = match arguments {
            Value::Null => Map::new(),
            Value::Object(m) => m,
            _ => return Err(Error::config("tool arguments must be a JSON object")),
        };
        for (k, v) in &self.fixed {
            args.insert(k.clone(), v.get());
        }
        Ok(Value::Object(args))
    }
}

/// The handle a resolved tool calls through (implemented by the handle, held weakly,
/// so a tool does not keep its server open).
pub(super) trait Owner: Send + Sync {
    /// Runs `run` (the tool `tool`) with `arguments`.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        run: &'a Run,
        arguments: Value,
        options: RequestOptions,
    ) -> BoxFuture<'a, Result<CallOutcome>>;
}

impl McpTool {
    /// Calls this tool on the server it came from (fixed arguments added, the result
    /// wrapped as declared), without looking anything up: the tool was resolved when
    /// its handle listed it. Fails for a tool that did not come from a handle's
    /// [`Mcp::tools`](crate::Mcp::tools), or whose handle is gone.
    pub async fn call(&self, arguments: Value, options: RequestOptions) -> Result<CallToolResult> {
        let (target, outcome) = self.outcome(arguments, options).await?;
        ended(&target.server, &self.name, outcome)
    }

    /// [`McpTool::call`], leaving the input a 2026-07-28 server asks for to the
    /// caller (see [`CallTool::pause_on_input`](crate::CallTool::pause_on_input)).
    pub async fn call_pausing(
        &self,
        arguments: Value,
        mut options: RequestOptions,
    ) -> Result<CallOutcome> {
        options.pause_input = true;
        Ok(self.outcome(arguments, options).await?.1)
    }

    /// The call's outcome as its options have it, with the target it went to.
    async fn outcome(
        &self,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<(&Target, CallOutcome)> {
        let Some(target) = self.target.as_deref() else {
            return Err(Error::config(format!(
                "tool `{}` does not belong to a server handle that is still open",
                self.name
            )));
        };
        let outcome = target
            .owner
            .call(&self.name, &target.run, arguments, options)
            .await?;
        Ok((target, outcome))
    }
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
    /// A server's tool exactly as its server defines it: not shaped (its own name,
    /// description and schema), no approval policy. For code that hands tools to an
    /// agent itself (a host of its own, a test); a declared server's handle gives its
    /// tools shaped ([`Mcp::tools`](crate::Mcp::tools)).
    pub fn from_definition(tool: Tool) -> McpTool {
        McpTool {
            name: tool.name.clone(),
            server_name: Some(tool.name.clone()),
            description: tool.description.clone(),
            input_schema: tool.input_schema.clone(),
            deferred: false,
            app_only: tool.is_app_only(),
            definition: Some(tool),
            approvals: Arc::default(),
            fixed: None,
            target: None,
        }
    }

    /// The same tool, needing a person's approval before every call
    /// ([`requires_approval`](Self::requires_approval) is true).
    pub fn requiring_approval(mut self) -> McpTool {
        let mut approvals = self.approvals.as_ref().clone();
        approvals.push(Approval {
            names: None,
            predicate: None,
        });
        self.approvals = Arc::new(approvals);
        self
    }

    /// A digest of what the model and a person are shown of this tool, and what it
    /// calls (see [`crate::digest`]): its model-facing name, the server's name for it,
    /// its title, description, input and output schemas and annotations, whether only
    /// an app may call it, and the arguments its declaration fixes (each one's name and
    /// value; a value computed per call counts by its name only). Any change to one of
    /// them changes the digest; an agent binds a person's approval to it. A fixed value
    /// is hashed, never in clear.
    pub fn definition_digest(&self) -> String {
        let definition = self.definition.as_ref();
        let annotations = definition
            .and_then(|d| d.annotations.as_ref())
            .and_then(|a| serde_json::to_value(a).ok());
        crate::digest::sha256_json(&serde_json::json!({
            "name": self.name,
            "server_name": self.server_name,
            "title": definition.and_then(|d| d.title.as_ref()),
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": definition.and_then(|d| d.output_schema.as_ref()),
            "annotations": annotations,
            "app_only": self.app_only,
            "fixed_arguments": self.fixed.as_deref().unwrap_or(&Value::Array(Vec::new())),
        }))
    }

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

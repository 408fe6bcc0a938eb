//! How a model sees a declared server's tools: shapes (rename, fixed arguments, wrap),
//! local tools, approvals, and the resulting [`McpTool`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::shared::*;
use crate::error::Result;
use crate::model::{CallToolResult, Tool};

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

impl fmt::Debug for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Fixed(v) => write!(f, "Fixed({v})"),
            ArgValue::Computed(_) => f.write_str("Computed"),
        }
    }
}

impl ArgValue {
    pub(super) fn get(&self) -> Value {
        match self {
            ArgValue::Fixed(v) => v.clone(),
            ArgValue::Computed(f) => f(),
        }
    }
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
    /// The fixed arguments as a tool's definition digest covers them, in declaration
    /// order: `{"name", "value"}` for a fixed value, `{"name", "computed": true}` for
    /// one computed per call (its value changes from call to call). `None` when there
    /// are none.
    pub(super) fn fixed_description(&self) -> Option<Arc<Value>> {
        if self.fixed.is_empty() {
            return None;
        }
        let described = self
            .fixed
            .iter()
            .map(|(name, v)| match v {
                ArgValue::Fixed(v) => serde_json::json!({"name": name, "value": v}),
                ArgValue::Computed(_) => serde_json::json!({"name": name, "computed": true}),
            })
            .collect();
        Some(Arc::new(Value::Array(described)))
    }

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
            owner: None,
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

//! Tools the application implements in Rust ([`FunctionTool`]), offered to the model
//! beside the servers' tools and gated exactly like them.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use mcp_runtime::{BoxFuture, CallToolResult, Content, McpTool, Tool};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// The name of the pseudo-server function tools belong to: events, approvals and
/// allowances name it as they name a server.
pub const FUNCTIONS: &str = "functions";

type Call = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// A tool the application implements in Rust, given to an agent with
/// [`AgentBuilder::tool`](crate::AgentBuilder::tool). The model sees it like a
/// server's tool; the gate treats it like one — the mode, the exact allow-list, an
/// approval ([`requires_approval`](Self::requires_approval)), events — under the
/// server name [`FUNCTIONS`].
///
/// ```
/// use mcp_agent::FunctionTool;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: f64, b: f64 }
/// let add = FunctionTool::new("add", "Adds two numbers", |args: Add| async move {
///     Ok::<_, std::convert::Infallible>(args.a + args.b)
/// })
/// .read_only();
/// ```
#[derive(Clone)]
pub struct FunctionTool {
    pub(crate) name: String,
    description: String,
    schema: Value,
    read_only: bool,
    idempotent: bool,
    approval: bool,
    call: Call,
    /// The agent a sub-agent tool hands its calls to ([`Agent::as_tool`](crate::Agent::as_tool)).
    pub(crate) delegate: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for FunctionTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FunctionTool")
            .field("name", &self.name)
            .field("requires_approval", &self.approval)
            .finish_non_exhaustive()
    }
}

impl FunctionTool {
    /// A tool whose arguments are `A`: its input schema is `A`'s JSON Schema
    /// (`#[derive(Deserialize, JsonSchema)]`), and the model's arguments are checked
    /// against `A` before `f` runs (arguments that do not fit give the model an error
    /// result saying why). What `f` returns goes to the model as text (a string) or
    /// JSON; its error as an error result.
    pub fn new<A, R, E, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> FunctionTool
    where
        A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        R: Serialize + Send + 'static,
        E: fmt::Display + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
    {
        let mut schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
        if let Some(m) = schema.as_object_mut() {
            // Providers want the object schema itself.
            m.remove("$schema");
            m.remove("title");
        }
        let f = Arc::new(f);
        let call: Call = Arc::new(move |args: Value| {
            let f = f.clone();
            Box::pin(async move {
                let args = serde_json::from_value::<A>(args)
                    .map_err(|e| format!("the arguments do not fit the tool: {e}"))?;
                let out = f(args).await.map_err(|e| e.to_string())?;
                serde_json::to_value(out).map_err(|e| format!("the result cannot be encoded: {e}"))
            })
        });
        FunctionTool::make(name.into(), description.into(), schema, call)
    }

    /// A tool with the input schema given as JSON Schema, called with the model's
    /// arguments as JSON.
    pub fn with_schema<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        f: F,
    ) -> FunctionTool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let call: Call = Arc::new(move |args| Box::pin(f(args)));
        FunctionTool::make(name.into(), description.into(), input_schema, call)
    }

    fn make(name: String, description: String, schema: Value, call: Call) -> FunctionTool {
        let schema = if schema.is_object() {
            schema
        } else {
            json!({"type": "object"})
        };
        FunctionTool {
            name,
            description,
            schema,
            read_only: false,
            idempotent: false,
            approval: false,
            call,
            delegate: None,
        }
    }

    /// A tool whose calls the agent loop hands to `agent` (a sub-agent): never called
    /// as a function.
    pub(crate) fn delegating(
        name: String,
        description: String,
        input_schema: Value,
        agent: Arc<dyn std::any::Any + Send + Sync>,
    ) -> FunctionTool {
        let call: Call = Arc::new(|_| {
            Box::pin(async { Err("a sub-agent runs only inside an agent's loop".to_owned()) })
        });
        let mut tool = FunctionTool::make(name, description, input_schema, call);
        tool.delegate = Some(agent);
        tool
    }

    /// Every call needs a person's approval first, in every mode (like a
    /// declaration's `requires_approval`).
    pub fn requires_approval(mut self) -> Self {
        self.approval = true;
        self
    }

    /// It changes nothing (`readOnlyHint`): a recovered run may call it again.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Calling it twice does no more than once (`idempotentHint`): a recovered run
    /// may call it again.
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// The tool as a server would define it.
    pub(crate) fn tool(&self) -> McpTool {
        let mut def = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.schema,
        });
        if self.read_only || self.idempotent {
            def["annotations"] =
                json!({"readOnlyHint": self.read_only, "idempotentHint": self.idempotent});
        }
        let tool = serde_json::from_value::<Tool>(def).map(McpTool::from_definition);
        match tool {
            Ok(t) if self.approval => t.requiring_approval(),
            Ok(t) => t,
            // A definition that does not read back: offered as a bare object tool,
            // needing approval (fail closed).
            Err(_) => McpTool::from_definition(Tool {
                name: self.name.clone(),
                title: None,
                description: Some(self.description.clone()),
                input_schema: json!({"type": "object"}),
                output_schema: None,
                annotations: None,
                icons: None,
                meta: None,
                extra: Default::default(),
            })
            .requiring_approval(),
        }
    }

    /// Runs it: its result for the model.
    pub(crate) async fn run(&self, arguments: Value) -> CallToolResult {
        let (text, is_error) = match (self.call)(arguments).await {
            Ok(Value::String(s)) => (s, false),
            Ok(v) => (v.to_string(), false),
            Err(e) => (e, true),
        };
        CallToolResult {
            content: vec![Content::text(text)],
            is_error,
            ..CallToolResult::default()
        }
    }
}

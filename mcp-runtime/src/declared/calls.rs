//! Calling a declared server's tools: resolved once, called many times.
//!
//! * By name ([`Mcp::call`], [`Mcp::start`]): the name is looked up once in the handle's
//!   map of shaped tools (listed once, kept until the server's tools change).
//! * By handle ([`McpTool::call`]): a tool from [`Mcp::tools`] is already resolved; an
//!   agent calls the tool it offered, without looking it up again.
//! * Typed methods `#[mcp]` generates call the server's tool by the server's name
//!   directly: no tool list is fetched first (unless the declaration's drift policy is
//!   `error`, which needs the server's list once to compare).
//!
//! Each path adds the declaration's fixed arguments and applies its wrap; the
//! arguments are moved to the session, and copied only when a wrap needs them after
//! the call.

use serde_json::{Map, Value};

use super::shared::{DriftPolicy, Mcp, McpTool, ToolMap};
use super::typed::Typed;
use crate::client::RequestOptions;
use crate::error::{Error, Result};
use crate::input::{ended, CallOutcome};
use crate::model::CallToolResult;
use crate::snapshot::did_you_mean;
use mcp_runtime_core::lock;

impl Mcp {
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
        let outcome = self.call_named(name, arguments, options).await?;
        ended(&self.spec.name, name, outcome)
    }

    /// [`Mcp::call_with`], leaving the input a 2026-07-28 server asks for to the
    /// caller (see [`CallTool::pause_on_input`](crate::CallTool::pause_on_input)).
    pub async fn call_pausing(
        &self,
        name: &str,
        arguments: Value,
        mut options: RequestOptions,
    ) -> Result<CallOutcome> {
        options.pause_input = true;
        self.call_named(name, arguments, options).await
    }

    /// Calls the tool `name` stands for (see [`find`](Self::find)).
    async fn call_named(
        &self,
        name: &str,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallOutcome> {
        let map = self.tool_map().await?;
        let tool = self.find(&map, name)?;
        self.call_resolved(tool, arguments, options).await
    }

    /// Starts a server tool in the background (see [`Client::start`]), with the
    /// declaration's fixed arguments; `name` is the model-facing name or the server's.
    ///
    /// [`Client::start`]: crate::Client::start
    pub async fn start(&self, name: &str, arguments: Value) -> Result<crate::client::Started> {
        let map = self.tool_map().await?;
        let tool = self.find(&map, name)?;
        let server_name = tool.server_name.as_deref().ok_or_else(|| {
            Error::config(format!("`{name}` is a local tool: it runs in this process"))
        })?;
        let args = self.with_fixed(server_name, arguments)?;
        self.client()?.start(server_name, args).await
    }

    /// Calls the server's tool `server_name` (its own name, not a model-facing one)
    /// with the declaration's fixed arguments and wrap. For the typed methods `#[mcp]`
    /// generates: no tool list is fetched first, unless the drift policy is `error`.
    #[doc(hidden)]
    pub async fn call_declared(
        &self,
        server_name: &str,
        arguments: Result<Value>,
    ) -> Result<CallToolResult> {
        let arguments = arguments?;
        if self.spec.drift == DriftPolicy::Error {
            self.tool_map().await?;
        }
        let outcome = self
            .call_server(server_name, arguments, RequestOptions::default())
            .await?;
        ended(&self.spec.name, server_name, outcome)
    }

    /// [`call_declared`](Self::call_declared), the output read as `T`. Generic over the
    /// output only (the arguments come serialized, by [`typed_arguments`]), so a
    /// crate declaring many tools compiles one call path, not one per tool.
    #[doc(hidden)]
    pub async fn call_declared_typed<T>(
        &self,
        server_name: &str,
        arguments: Result<Value>,
    ) -> Result<Typed<T>>
    where
        T: serde::de::DeserializeOwned,
    {
        let result = self.call_declared(server_name, arguments).await?;
        Ok(self.typed(server_name, result))
    }

    /// Calls a tool by name with typed arguments and reads its structured output as `T`.
    pub async fn call_typed<A, T>(&self, name: &str, arguments: &A) -> Result<Typed<T>>
    where
        A: serde::Serialize,
        T: serde::de::DeserializeOwned,
    {
        let args = typed_arguments(name, arguments)?;
        let result = self.call(name, args).await?;
        Ok(self.typed(name, result))
    }

    fn typed<T: serde::de::DeserializeOwned>(
        &self,
        tool: &str,
        result: CallToolResult,
    ) -> Typed<T> {
        let output = match &result.structured_content {
            Some(v) if !result.is_error() => match T::deserialize(v) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(server = %self.spec.name, tool, error = %e, "structured output does not match the snapshot's outputSchema");
                    None
                }
            },
            _ => None,
        };
        Typed { result, output }
    }

    /// The tool a name stands for: the model-facing name first, then the server's.
    fn find<'m>(&self, map: &'m ToolMap, name: &str) -> Result<&'m McpTool> {
        map.by_name
            .get(name)
            .or_else(|| map.by_server_name.get(name))
            .and_then(|&i| map.list.get(i))
            .ok_or_else(|| {
                let hint = did_you_mean(name, map.list.iter().map(|t| t.name.as_str()))
                    .map(|m| format!(" (did you mean `{m}`?)"))
                    .unwrap_or_default();
                Error::config(format!("{} has no tool `{name}`{hint}", self.spec.name))
            })
    }

    /// Calls a tool this handle shaped: a local tool in this process, a server tool on
    /// the server.
    pub(super) async fn call_resolved(
        &self,
        tool: &McpTool,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallOutcome> {
        match &tool.server_name {
            Some(server_name) => self.call_server(server_name, arguments, options).await,
            None => {
                let local = self
                    .spec
                    .local
                    .iter()
                    .find(|l| l.definition().name == tool.name)
                    .cloned()
                    .ok_or_else(|| Error::config(format!("tool `{}` is gone", tool.name)))?;
                local.call(self, arguments).await.map(CallOutcome::Done)
            }
        }
    }

    /// `arguments` as an object, with the declaration's fixed arguments of
    /// `server_name` added.
    fn with_fixed(&self, server_name: &str, arguments: Value) -> Result<Value> {
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
        Ok(Value::Object(args))
    }

    async fn call_server(
        &self,
        server_name: &str,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallOutcome> {
        let args = self.with_fixed(server_name, arguments)?;
        let wrap = self
            .spec
            .shapes
            .iter()
            .find(|s| s.name == server_name)
            .and_then(|s| s.wrap.clone());
        // The arguments go to the session; a copy stays only for a wrap.
        let kept = wrap.as_ref().map(|_| args.clone());
        let result = match self
            .client()?
            .call(server_name, args)
            .options(options)
            .outcome()
            .await
        {
            Ok(CallOutcome::Done(r)) => r,
            Ok(CallOutcome::NeedsInput(p)) => return Ok(CallOutcome::NeedsInput(p)),
            Err(e) => {
                if e.is_not_found() {
                    // The tool may be gone: fetch the list again next time.
                    *lock(&self.tools) = None;
                }
                return Err(e);
            }
        };
        match (wrap, kept) {
            (Some(wrap), Some(args)) => wrap(result, args).await.map(CallOutcome::Done),
            _ => Ok(CallOutcome::Done(result)),
        }
    }
}

/// Typed arguments as the JSON object a call sends.
/// Typed arguments, serialized (also for generated methods, through `__private`).
#[doc(hidden)]
pub fn typed_arguments<A: serde::Serialize>(tool: &str, arguments: &A) -> Result<Value> {
    serde_json::to_value(arguments).map_err(|e| {
        Error::config(format!(
            "the arguments of `{tool}` cannot be serialized: {e}"
        ))
    })
}

impl McpTool {
    /// Calls this tool on the server it came from (fixed arguments added, the result
    /// wrapped as declared), without looking its name up again. Fails for a tool that
    /// did not come from a handle's [`Mcp::tools`], or whose handle is gone.
    pub async fn call(&self, arguments: Value, options: RequestOptions) -> Result<CallToolResult> {
        let (owner, outcome) = self.outcome(arguments, options).await?;
        ended(&owner.spec.name, &self.name, outcome)
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

    /// The call's outcome as its options have it, with the handle it was made on.
    async fn outcome(
        &self,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<(Mcp, CallOutcome)> {
        let Some(owner) = self.owner.as_ref().and_then(|o| o.upgrade()) else {
            return Err(Error::config(format!(
                "tool `{}` does not belong to a server handle that is still open",
                self.name
            )));
        };
        let outcome = owner.call_resolved(self, arguments, options).await?;
        Ok((owner, outcome))
    }
}

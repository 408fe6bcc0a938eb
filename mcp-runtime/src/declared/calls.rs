//! Calling a declared server's tools: resolved once, called many times.
//!
//! * By name ([`Mcp::call`], [`Mcp::start`]): one lookup of the name in the handle's
//!   map of shaped tools (listed once, kept until the server's tools change), each
//!   already resolved.
//! * By handle ([`McpTool::call`](crate::McpTool::call)): a tool from [`Mcp::tools`] holds its resolution;
//!   an agent calls the tool it offered, looking nothing up.
//! * Typed methods `#[mcp]` generates call the snapshot's tool at their position in
//!   the snapshot, resolved when the handle was built (again each time it lists its
//!   tools): no lookup, and no tool list fetched first (unless the declaration's drift
//!   policy is `error`, which needs the server's list once to compare).
//!
//! A resolved server tool carries the declaration's fixed arguments and wrap and what
//! the session needs to send it (headers to mirror, task support, UI resource): the
//! session does not look the tool up either. The arguments are moved to the session,
//! and copied only when a wrap needs them after the call.

use std::sync::Arc;

use serde_json::Value;

use super::mcp::{Mcp, Spec, ToolMap, WeakMcp};
use super::shape::DriftPolicy;
use super::tool::{Owner, Run, ServerCall};
use super::typed::Typed;
use crate::client::RequestOptions;
use crate::error::{Error, Result};
use crate::input::{ended, CallOutcome};
use crate::model::CallToolResult;
use crate::protocol::code;
use crate::snapshot::did_you_mean;
use crate::transport::BoxFuture;
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
        let run = self.find(&map, name)?;
        self.run(run, arguments, options).await
    }

    /// Starts a server tool in the background (see [`Client::start`]), with the
    /// declaration's fixed arguments; `name` is the model-facing name or the server's.
    ///
    /// [`Client::start`]: crate::Client::start
    pub async fn start(&self, name: &str, arguments: Value) -> Result<crate::client::Started> {
        let map = self.tool_map().await?;
        let Run::Server(call) = self.find(&map, name)? else {
            return Err(Error::config(format!(
                "`{name}` is a local tool: it runs in this process"
            )));
        };
        let args = call.arguments(arguments)?;
        self.client()?
            .start_known(&call.name, args, call.entry.as_deref())
            .await
    }

    /// Calls the server's tool `server_name` (its own name, not a model-facing one),
    /// the snapshot's tool at position `at`, with the declaration's fixed arguments and
    /// wrap. For the typed methods `#[mcp]` generates: the tool was resolved when the
    /// handle was built, and no tool list is fetched first, unless the drift policy is
    /// `error`.
    #[doc(hidden)]
    pub async fn call_declared(
        &self,
        at: usize,
        server_name: &str,
        arguments: Result<Value>,
    ) -> Result<CallToolResult> {
        let arguments = arguments?;
        if self.spec.drift == DriftPolicy::Error {
            self.tool_map().await?;
        }
        let call = self.declared(at, server_name);
        let outcome = self
            .call_server(&call, arguments, RequestOptions::default())
            .await?;
        ended(&self.spec.name, server_name, outcome)
    }

    /// The snapshot's tool at `at`, resolved; resolved here from the declaration alone
    /// when the snapshot has no `server_name` there (a handle built without it).
    fn declared(&self, at: usize, server_name: &str) -> Arc<ServerCall> {
        match self.spec.declared.get(at).map(|slot| lock(slot).clone()) {
            Some(call) if call.name == server_name => call,
            _ => Arc::new(resolve(&self.spec, server_name)),
        }
    }

    /// [`call_declared`](Self::call_declared), the output read as `T`. Generic over the
    /// output only (the arguments come serialized, by [`typed_arguments`]), so a
    /// crate declaring many tools compiles one call path, not one per tool.
    #[doc(hidden)]
    pub async fn call_declared_typed<T>(
        &self,
        at: usize,
        server_name: &str,
        arguments: Result<Value>,
    ) -> Result<Typed<T>>
    where
        T: serde::de::DeserializeOwned,
    {
        let result = self.call_declared(at, server_name, arguments).await?;
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
        if let crate::model::OutputCheck::Mismatch { rules, .. } = &result.output_check {
            tracing::warn!(server = %self.spec.name, tool, rules = %rules, "structured output does not match the tool's outputSchema: not read");
            return Typed {
                result,
                output: None,
            };
        }
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

    /// What a name stands for (the model-facing name first, then the server's),
    /// resolved: one map lookup.
    fn find<'m>(&self, map: &'m ToolMap, name: &str) -> Result<&'m Run> {
        map.by_name
            .get(name)
            .and_then(|&i| map.list.get(i))
            .and_then(|t| t.target.as_deref())
            .map(|t| &t.run)
            .ok_or_else(|| {
                let hint = did_you_mean(name, map.list.iter().map(|t| t.name.as_str()))
                    .map(|m| format!(" (did you mean `{m}`?)"))
                    .unwrap_or_default();
                Error::config(format!("{} has no tool `{name}`{hint}", self.spec.name))
            })
    }

    /// Runs a tool this handle resolved: a local tool in this process, a server tool
    /// on the server.
    pub(super) async fn run(
        &self,
        run: &Run,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallOutcome> {
        match run {
            Run::Server(call) => self.call_server(call, arguments, options).await,
            Run::Local(i) => {
                let local =
                    self.spec.local.get(*i).cloned().ok_or_else(|| {
                        Error::config("a local tool is gone from its declaration")
                    })?;
                local.call(self, arguments).await.map(CallOutcome::Done)
            }
        }
    }

    async fn call_server(
        &self,
        call: &ServerCall,
        arguments: Value,
        options: RequestOptions,
    ) -> Result<CallOutcome> {
        let args = call.arguments(arguments)?;
        // The arguments go to the session; a copy stays only for a wrap.
        let kept = call.wrap.as_ref().map(|_| args.clone());
        let result = match self
            .client()?
            .call(&call.name, args)
            .options(options)
            .known(call.entry.clone())
            .outcome()
            .await
        {
            Ok(CallOutcome::Done(r)) => r,
            Ok(CallOutcome::NeedsInput(p)) => return Ok(CallOutcome::NeedsInput(p)),
            Err(e) => {
                let stale = e.is_not_found()
                    || matches!(
                        e.code(),
                        Some(code::HEADER_MISMATCH | code::HEADER_MISMATCH_DRAFT)
                    );
                if stale {
                    // The tool may be gone or changed: list again next time.
                    *lock(&self.tools) = None;
                }
                return Err(e);
            }
        };
        match (&call.wrap, kept) {
            (Some(wrap), Some(args)) => wrap(result, args).await.map(CallOutcome::Done),
            _ => Ok(CallOutcome::Done(result)),
        }
    }
}

/// The server tool `name` resolved from the declaration alone: its shape's fixed
/// arguments and wrap; the session's tool index says how to send it.
fn resolve(spec: &Spec, name: &str) -> ServerCall {
    ServerCall::new(
        name.to_owned(),
        spec.shapes.iter().find(|s| s.name == name),
        None,
    )
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

impl Owner for WeakMcp {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        run: &'a Run,
        arguments: Value,
        options: RequestOptions,
    ) -> BoxFuture<'a, Result<CallOutcome>> {
        Box::pin(async move {
            let Some(owner) = self.upgrade() else {
                return Err(Error::config(format!(
                    "tool `{tool}` does not belong to a server handle that is still open"
                )));
            };
            owner.run(run, arguments, options).await
        })
    }
}

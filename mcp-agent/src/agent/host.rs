//! What the loop needs of the servers it calls — their tools, how each is configured,
//! and calls — behind a small trait: the attached `Mcp`s in an agent, a scripted host
//! in the loop's unit tests.

use std::sync::Arc;

use mcp_runtime::{BoxFuture, CallOutcome, CallToolResult, Mcp, McpTool, RequestOptions};
use serde_json::{json, Value};

use crate::function::{FunctionTool, FUNCTIONS};
use crate::gate::ToolFacts;
use crate::model::ToolSpec;

/// The servers a run calls, by index.
pub(super) trait Host: Send + Sync + 'static {
    /// How many servers.
    fn count(&self) -> usize;
    /// Server `i`'s name (the host's label for it).
    fn name(&self, i: usize) -> &str;
    /// How server `i` is started or reached ([`Mcp::config_fingerprint_keyed`]).
    fn config_fingerprint(&self, i: usize) -> String;
    /// Server `i`'s tools.
    /// Server `i`'s tools, shared: the same `Arc` while its list is unchanged (the
    /// loop reuses what it built from it).
    fn tools(&self, i: usize) -> BoxFuture<'_, mcp_runtime::Result<Arc<[McpTool]>>>;
    /// The tool names server `i`'s declaration gives the model, as far as it tells
    /// ([`Mcp::declared_tool_names`]).
    fn declared_tool_names(&self, _i: usize) -> Vec<String> {
        Vec::new()
    }
    /// The MCP protocol version server `i` speaks, once connected (for traces).
    fn protocol_version(&self, _i: usize) -> Option<String> {
        None
    }
    /// Makes sure server `i`'s changes are heard (2026-07-28 servers announce them
    /// only to a listener); leaves a listener the application started as it is.
    fn follow_changes(&self, _i: usize) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// Calls `tool` (as server `i` listed it) on server `i`, leaving the input a
    /// server asks for to the loop (see [`McpTool::call_pausing`]).
    fn call<'a>(
        &'a self,
        i: usize,
        tool: &'a McpTool,
        arguments: Value,
        options: RequestOptions,
    ) -> BoxFuture<'a, mcp_runtime::Result<CallOutcome>>;
}

/// The attached servers, and after them — as one more server, [`FUNCTIONS`] — the
/// application's function tools, when it has any; and the key their configuration
/// fingerprints' value digests are keyed with (derived from the integrity key; empty
/// without one).
pub(super) struct Servers(
    pub(super) Vec<Mcp>,
    pub(super) Vec<FunctionTool>,
    pub(super) Vec<u8>,
    /// The function tools as one list, made once (they never change).
    pub(super) std::sync::OnceLock<Arc<[McpTool]>>,
    /// Each server's configuration fingerprint, made once (a handle's configuration
    /// does not change).
    pub(super) Vec<std::sync::OnceLock<String>>,
);

impl Servers {
    /// Index `i` is the function tools.
    fn functions(&self, i: usize) -> bool {
        i == self.0.len() && !self.1.is_empty()
    }
}

impl Host for Servers {
    fn count(&self) -> usize {
        self.0.len() + usize::from(!self.1.is_empty())
    }
    fn name(&self, i: usize) -> &str {
        if self.functions(i) {
            return FUNCTIONS;
        }
        self.0.get(i).map_or("", Mcp::name)
    }
    fn config_fingerprint(&self, i: usize) -> String {
        if self.functions(i) {
            return mcp_runtime::digest::sha256_json(&json!({ "functions": FUNCTIONS }));
        }
        match (self.0.get(i), self.4.get(i)) {
            (Some(m), Some(kept)) => kept
                .get_or_init(|| m.config_fingerprint_keyed(&self.2))
                .clone(),
            (Some(m), None) => m.config_fingerprint_keyed(&self.2),
            _ => String::new(),
        }
    }
    fn declared_tool_names(&self, i: usize) -> Vec<String> {
        if self.functions(i) {
            return self.1.iter().map(|f| f.name.clone()).collect();
        }
        self.0
            .get(i)
            .and_then(Mcp::declared_tool_names)
            .unwrap_or_default()
    }
    fn protocol_version(&self, i: usize) -> Option<String> {
        let server = self.0.get(i)?;
        let details = server.client().ok()?.server()?;
        Some(details.protocol_version.clone())
    }
    fn follow_changes(&self, i: usize) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(server) = self.0.get(i) else { return };
            if server.client().is_ok_and(|c| c.is_listening()) {
                return;
            }
            // Bounded: a server that never confirms does not hold the run.
            let listen = server.listen(&[]);
            match tokio::time::timeout(std::time::Duration::from_secs(5), listen).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(server = %server.name(), error = %e, "not listening for changes")
                }
                Err(_) => {
                    tracing::debug!(server = %server.name(), "the server did not confirm listening in 5 s")
                }
            }
        })
    }
    fn tools(&self, i: usize) -> BoxFuture<'_, mcp_runtime::Result<Arc<[McpTool]>>> {
        Box::pin(async move {
            if self.functions(i) {
                return Ok(self
                    .3
                    .get_or_init(|| self.1.iter().map(FunctionTool::tool).collect())
                    .clone());
            }
            match self.0.get(i) {
                Some(server) => server.tool_list().await,
                None => Ok(Arc::from(Vec::new())),
            }
        })
    }
    fn call<'a>(
        &'a self,
        i: usize,
        tool: &'a McpTool,
        arguments: Value,
        options: RequestOptions,
    ) -> BoxFuture<'a, mcp_runtime::Result<CallOutcome>> {
        Box::pin(async move {
            if self.functions(i) {
                let tool = tool.name.as_str();
                return Ok(CallOutcome::Done(
                    match self.1.iter().find(|f| f.name == tool) {
                        // On a task of its own: a function that panics fails its call, not
                        // the run. The task is aborted when the call is abandoned (its
                        // run dropped mid-call): the function does not go on unseen.
                        Some(f) => {
                            let f = f.clone();
                            let mut task =
                                AbortOnDrop(tokio::spawn(async move { f.run(arguments).await }));
                            match (&mut task.0).await {
                                Ok(result) => result,
                                Err(e) => CallToolResult {
                                    content: vec![mcp_runtime::Content::text(format!(
                                        "the function tool `{tool}` failed: {}",
                                        if e.is_panic() {
                                            "it panicked"
                                        } else {
                                            "it was cancelled"
                                        }
                                    ))],
                                    is_error: true,
                                    ..CallToolResult::default()
                                },
                            }
                        }
                        None => CallToolResult {
                            content: vec![mcp_runtime::Content::text(format!(
                                "there is no function tool `{tool}`"
                            ))],
                            is_error: true,
                            ..CallToolResult::default()
                        },
                    },
                ));
            }
            if self.0.get(i).is_none() {
                // Indices come from this host's own listing: never here.
                return Ok(CallOutcome::Done(CallToolResult {
                    content: vec![mcp_runtime::Content::text(format!(
                        "`{}` names a server this agent does not have",
                        tool.name
                    ))],
                    is_error: true,
                    ..CallToolResult::default()
                }));
            };
            // The handle the server listed: no lookup by name again.
            tool.call_pausing(arguments, options).await
        })
    }
}

/// A spawned task, aborted when this is dropped (a finished task is not affected).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A tool of an attached server, as the loop sees it.
#[derive(Clone)]
pub(super) struct ToolEntry {
    pub(super) server: usize,
    pub(super) facts: ToolFacts,
    pub(super) spec: ToolSpec,
    /// The tool as its server's handle shapes it (digested only when an approval is
    /// bound or checked).
    pub(super) def: Arc<mcp_runtime::McpTool>,
    /// Its definition digest, made when first needed (the entry lives as long as its
    /// server's list is unchanged).
    pub(super) digest: std::sync::OnceLock<String>,
}

/// A tool of this turn: built once per server list and shared by the turns that see
/// the same list.
pub(super) type AgentTool = Arc<ToolEntry>;

impl ToolEntry {
    /// The entry of `tool`, listed by server `server` (index `i`), deferred or not.
    pub(super) fn new(i: usize, server: &str, tool: &McpTool, defer: bool) -> AgentTool {
        Arc::new(ToolEntry {
            server: i,
            facts: ToolFacts {
                name: tool.name.clone(),
                server: server.to_owned(),
                app_only: tool.app_only,
                requires_approval: tool.requires_approval(),
            },
            spec: ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone().unwrap_or_default(),
                input_schema: tool.input_schema.clone(),
                defer,
            },
            def: Arc::new(tool.clone()),
            digest: Default::default(),
        })
    }

    /// [`McpTool::definition_digest`], made once.
    pub(super) fn definition_digest(&self) -> &str {
        self.digest.get_or_init(|| self.def.definition_digest())
    }
}

/// The spec's rule for tool names: 1 to 128 characters of `A-Za-z0-9_.-`.
pub(super) fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The tool's annotations say sending it twice does no more than once: it is
/// idempotent, or read-only.
pub(super) fn repeat_is_harmless(tool: &AgentTool) -> bool {
    let hints = tool
        .def
        .definition
        .as_ref()
        .and_then(|d| d.annotations.as_ref());
    hints.is_some_and(|a| a.idempotent_hint == Some(true) || a.read_only_hint == Some(true))
}

//! The attached servers: the `Mcp`s, what the loop lists tools from and calls them on
//! (the host), which servers a run needs, what each defers, and what the agent
//! remembers of each (the names it offered, whether its changes are heard).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use mcp_runtime::Mcp;

use crate::error::{Error, Result};
use crate::store::lock;

use super::host::{AgentTool, Host};

/// What an agent defers of one server's tools, instead of the server's declaration.
#[derive(Clone, Debug)]
pub(super) enum Deferral {
    /// Every tool.
    All,
    /// These tools (model-facing names).
    Only(Vec<String>),
    /// No tool.
    None,
}

/// The servers of an agent.
pub(super) struct Attached {
    servers: Vec<Mcp>,
    /// What the loop lists tools from and calls them on: the servers (a scripted
    /// host in the loop's unit tests).
    host: Arc<dyn Host>,
    /// Servers whose failure to list tools stops a run (the others are left out of
    /// the turn).
    required: Vec<String>,
    /// Per server, what it defers instead of its declaration.
    defer: Vec<(String, Deferral)>,
    /// The tool names each server offered when last listed (a server that is down
    /// keeps them reserved).
    known_names: Mutex<HashMap<String, Vec<String>>>,
    /// The servers whose changes this agent made sure it hears.
    following: Mutex<HashSet<String>>,
    /// The sub-agents its function tools hand calls to, by tool name.
    sub_agents: Vec<(String, Arc<dyn std::any::Any + Send + Sync>)>,
    /// Per server (by index), the list last listed and the tools the loop built from
    /// it: a turn that lists the same list (the same `Arc`) takes them as they are.
    built: Mutex<HashMap<usize, Built>>,
}

/// A server's list, and the loop's tools built from it.
type Built = (Arc<[mcp_runtime::McpTool]>, Vec<AgentTool>);

impl Attached {
    /// `servers`, called through `host`; `required` stop a run when down, `defer`
    /// overrides what servers' declarations defer.
    pub(super) fn new(
        servers: Vec<Mcp>,
        host: Arc<dyn Host>,
        required: Vec<String>,
        defer: Vec<(String, Deferral)>,
        sub_agents: Vec<(String, Arc<dyn std::any::Any + Send + Sync>)>,
    ) -> Attached {
        Attached {
            servers,
            host,
            required,
            defer,
            known_names: Mutex::default(),
            following: Mutex::default(),
            sub_agents,
            built: Mutex::default(),
        }
    }

    /// The tools built from server `i`'s list, when `list` is the list they were
    /// built from.
    pub(super) fn built(
        &self,
        i: usize,
        list: &Arc<[mcp_runtime::McpTool]>,
    ) -> Option<Vec<AgentTool>> {
        lock(&self.built)
            .get(&i)
            .filter(|(l, _)| Arc::ptr_eq(l, list))
            .map(|(_, tools)| tools.clone())
    }

    /// Keeps the tools built from server `i`'s `list`.
    pub(super) fn keep_built(
        &self,
        i: usize,
        list: Arc<[mcp_runtime::McpTool]>,
        tools: Vec<AgentTool>,
    ) {
        lock(&self.built).insert(i, (list, tools));
    }

    /// The sub-agent the function tool `name` hands its calls to, if it does.
    pub(super) fn sub_agent(&self, name: &str) -> Option<&Arc<dyn std::any::Any + Send + Sync>> {
        self.sub_agents
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a)
    }

    /// What the loop lists tools from and calls them on.
    pub(super) fn host(&self) -> &Arc<dyn Host> {
        &self.host
    }

    /// How many servers are attached.
    pub(super) fn count(&self) -> usize {
        self.servers.len()
    }

    /// The attached servers, in the order they were attached.
    pub(super) fn mcps(&self) -> &[Mcp] {
        &self.servers
    }

    /// The attached server named `name`.
    pub(super) fn named(&self, name: &str) -> Option<&Mcp> {
        self.servers.iter().find(|s| s.name() == name)
    }

    /// Whether a run stops when server `name` cannot list its tools.
    pub(super) fn is_required(&self, name: &str) -> bool {
        self.required.iter().any(|r| r == name)
    }

    /// Whether tool `tool` of server `server` is deferred: as the agent's `defer`
    /// says for the server, else as its declaration does (`declared`).
    pub(super) fn deferred(&self, server: &str, tool: &str, declared: bool) -> bool {
        match self.defer.iter().find(|(s, _)| s == server) {
            Some((_, Deferral::All)) => true,
            Some((_, Deferral::Only(names))) => names.iter().any(|n| n == tool),
            Some((_, Deferral::None)) => false,
            None => declared,
        }
    }

    /// Remembers the tool names server `server` offered now.
    pub(super) fn listed(&self, server: &str, names: Vec<String>) {
        lock(&self.known_names).insert(server.to_owned(), names);
    }

    /// The tool names server `server` offered when last listed.
    pub(super) fn known_names(&self, server: &str) -> Vec<String> {
        lock(&self.known_names)
            .get(server)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether this is the first time server `server` listed its tools (its changes
    /// are to be followed from now on).
    pub(super) fn first_listing(&self, server: &str) -> bool {
        lock(&self.following).insert(server.to_owned())
    }

    /// Stops every attached server: each one, even after another failed to stop. The
    /// error names every server that failed ([`Error::is_mcp`]).
    pub(super) async fn close(&self) -> Result<()> {
        let mut failed = Vec::new();
        for s in &self.servers {
            if let Err(e) = s.close().await {
                failed.push((s.name().to_owned(), e));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::closing(failed))
        }
    }
}

//! The agent: a model, attached MCP servers, the gate, and a tool loop that suspends
//! durably when a person must decide.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use mcp_runtime::{BoxFuture, InputRequest, InputResponse, Mcp, PendingInput, RequestOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::content::Input;
use crate::error::{Error, Result};
use crate::gate::{Gate, Mode, ToolFacts, Verdict};
use crate::model::{Block, ChatRequest, Message, Model, Role, Stop, ToolSpec, Usage};
use crate::store::{lock, Claim, Lease, MemoryRunStore, RunRecord, RunStatus, RunStore};

mod allowances;
mod answers;
mod builder;
mod call;
mod conversation;
mod decision;
mod events;
mod gating;
mod host;
mod inbox;
mod integrity;
mod resume;
mod run;
mod skills;
mod state;
mod toolbox;

#[cfg(test)]
mod tests;

pub use allowances::Allowance;
use answers::{Answers, Completed, Vault};
pub use builder::AgentBuilder;
pub use conversation::Conversation;
use decision::*;
pub use decision::{
    Always, Binding, Decision, DecisionKind, Expiry, InputAsk, Outcome, Pending, PendingWait,
};
pub use events::Event;
use events::*;
use host::{Host, Servers};
use integrity::*;
use run::{error_result, suspended_outcome};
pub use skills::SkillApproval;
use skills::{AgentSkill, HeldSkill, SkillStep, READ_SKILL, READ_SKILL_FILE};
use state::*;

/// A tool an approved skill's `allowed-tools` granted (same server, exact name).
fn granted(grants: &[(String, String, String)], tool: &ToolFacts) -> bool {
    grants
        .iter()
        .any(|(server, name, _)| *server == tool.server && *name == tool.name)
}

/// A hook that sees (and may trim) the messages before each model call.
type ContextFn = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;

/// The name of the emulated tool search (for models without a native one).
const TOOL_SEARCH: &str = "tool_search";

/// How many progress events a run keeps per tool call.
pub const MAX_PROGRESS_KEPT: usize = 100;

/// An agent. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

struct AgentInner {
    model: Arc<dyn Model>,
    gate: Arc<Gate>,
    /// The builder set the mode, allow-list or step limit: a resumed run may go on
    /// under this policy only where it is tighter than the run's own.
    policy_stated: bool,
    /// MACs stored runs, when set.
    integrity: Option<IntegrityKey>,
    /// How long a suspension waits for a decision.
    expiry: Option<std::time::Duration>,
    /// What an expired suspension does.
    on_expiry: Expiry,
    /// How long a hold on a run lasts unless renewed.
    lease: std::time::Duration,
    servers: Vec<Mcp>,
    /// What the loop lists tools from and calls them on: the servers (a scripted
    /// host in the loop's unit tests).
    host: Arc<dyn Host>,
    store: Arc<dyn RunStore>,
    max_steps: u32,
    /// Servers whose failure to list tools stops a run (the others are left out of
    /// the turn).
    required: Vec<String>,
    /// The most calls of one run on servers at once.
    calls_in_flight: usize,
    /// The most tool calls of one model turn that run.
    calls_per_turn: usize,
    /// The most bytes of a tool result's text the model is sent.
    max_result_size: usize,
    system: Option<String>,
    on_event: Vec<EventFn>,
    on_input: Vec<InputFn>,
    on_context: Option<ContextFn>,
    /// Tool spans carry the arguments and results.
    trace_content: bool,
    /// Per server, what it defers instead of its declaration.
    defer: Vec<(String, builder::Deferral)>,
    skills: bool,
    skill_approvals: Vec<SkillApproval>,
    /// Skills loaded in this process, by (server, uri): a file read reuses the load
    /// (its `SKILL.md` checked once) while the run holds the same entry.
    loaded_skills: std::sync::Mutex<HashMap<(String, String), mcp_runtime::LoadedSkill>>,
    /// Answers to input requests a run may not keep, until their calls are sent.
    vault: Vault,
    /// The tool names each server offered when last listed (a server that is down
    /// keeps them reserved).
    known_names: std::sync::Mutex<HashMap<String, Vec<String>>>,
    /// The servers whose changes this agent made sure it hears.
    following: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("mode", self.inner.gate.mode())
            .field("servers", &self.inner.servers.len())
            .finish_non_exhaustive()
    }
}

/// A tool of an attached server, as the loop sees it.
#[derive(Clone)]
struct AgentTool {
    server: usize,
    facts: ToolFacts,
    spec: ToolSpec,
    /// The tool as its server's handle shapes it (digested only when an approval is
    /// bound or checked).
    def: Arc<mcp_runtime::McpTool>,
}

/// The tool's annotations say sending it twice does no more than once: it is
/// idempotent, or read-only.
fn repeat_is_harmless(tool: &AgentTool) -> bool {
    let hints = tool
        .def
        .definition
        .as_ref()
        .and_then(|d| d.annotations.as_ref());
    hints.is_some_and(|a| a.idempotent_hint == Some(true) || a.read_only_hint == Some(true))
}

/// Ends the current turn of a run that will not go on: every call still pending gets
/// an error result saying `why`, and the turn's results join the transcript.
fn close_turn(state: &mut RunState, why: &str) {
    let mut results = std::mem::take(&mut state.results);
    for call in std::mem::take(&mut state.pending) {
        results.push(Block::ToolResult {
            id: call.id,
            content: json!({ "error": why }).to_string(),
            is_error: true,
            parts: Vec::new(),
        });
    }
    if !results.is_empty() {
        state.messages.push(Message {
            role: Role::Tool,
            content: results,
        });
    }
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's random draws fail (the OS has no entropy source).
    static RANDOM_FAILS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A fresh random id (96 bits, hex). A failed draw is an error, never a weak id.
fn random_id() -> Result<String> {
    #[cfg(test)]
    if RANDOM_FAILS.with(std::cell::Cell::get) {
        return Err(Error::config(
            "the system's random number generator failed (test); no id can be made",
        ));
    }
    let mut b = [0u8; 12];
    getrandom::getrandom(&mut b).map_err(|e| {
        Error::config(format!(
            "the system's random number generator failed ({e}); no id can be made"
        ))
    })?;
    Ok(mcp_runtime::digest::hex(&b))
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Agent {
    /// Stops every attached server.
    pub async fn close(&self) -> Result<()> {
        for s in &self.inner.servers {
            s.close().await?;
        }
        Ok(())
    }

    fn event(&self, state: &mut RunState, event: Event) {
        for f in &self.inner.on_event {
            f(&state.id, &event);
        }
        state.events.push(event);
    }

    async fn save(&self, state: &mut RunState, status: RunStatus) -> Result<()> {
        let mut state_json = serde_json::to_value(&*state)
            .map_err(|e| Error::store(format!("cannot encode the run: {e}")))?;
        if let Some(key) = &self.inner.integrity {
            key.seal(Sealed::Run, &state.id, &mut state_json)?;
        }
        if let Some(lease) = &mut state.lease {
            lease.until = self.lease_end();
        }
        let suspension = match status {
            RunStatus::Suspended => state.suspension.as_ref().map(|s| s.id.clone()),
            _ => None,
        };
        let mut events = Vec::with_capacity(state.events.len());
        for e in &state.events {
            events.push(
                serde_json::to_value(e)
                    .map_err(|e| Error::store(format!("cannot encode an event: {e}")))?,
            );
        }
        self.inner
            .store
            .save(&RunRecord {
                id: state.id.clone(),
                status,
                suspension,
                state: state_json,
                lease: state.lease.clone(),
                events,
            })
            .await?;
        state.events.clear();
        state.persisted = true;
        if matches!(
            status,
            RunStatus::Finished | RunStatus::Cancelled | RunStatus::Failed
        ) {
            self.inner.vault.forget_run(&state.id);
        }
        Ok(())
    }

    /// A new hold on a run, for this process: a fresh owner token, ending one lease
    /// period from now.
    fn new_lease(&self) -> Result<Lease> {
        Ok(Lease {
            owner: random_id()?,
            until: self.lease_end(),
        })
    }

    /// When a lease taken or renewed now ends (milliseconds since the epoch).
    fn lease_end(&self) -> u64 {
        now_ms().saturating_add(self.inner.lease.as_millis().min(u64::MAX as u128) as u64)
    }

    /// Claims `run_id` as `claim` says, under a new lease of this process.
    async fn claim(&self, run_id: &str, claim: Claim<'_>) -> Result<Option<(RunRecord, Lease)>> {
        let lease = self.new_lease()?;
        Ok(self
            .inner
            .store
            .claim(run_id, claim, &lease)
            .await?
            .map(|r| (r, lease)))
    }

    /// Renews this process's lease on the run while the run is worked on; returns
    /// (with the error to stop with) only when another process holds the run now.
    async fn hold(&self, run_id: &str, lease: Option<Lease>) -> Error {
        let Some(mut lease) = lease else {
            return std::future::pending().await;
        };
        let every = (self.inner.lease / 3).max(std::time::Duration::from_millis(10));
        loop {
            tokio::time::sleep(every).await;
            lease.until = self.lease_end();
            match self.inner.store.renew(run_id, &lease).await {
                Ok(true) => {}
                Ok(false) => return crate::store::lease_lost(run_id),
                // A store that is down a moment: the next renewal tries again, and a
                // save that cannot be made stops the run.
                Err(e) => {
                    tracing::warn!(run = %run_id, error = %e, "the run's lease could not be renewed")
                }
            }
        }
    }

    /// The events of a run, from its log in the store, in the order they happened
    /// (every save appends the events since the last; none is ever rewritten).
    pub async fn events(&self, run_id: &str) -> Result<Vec<Event>> {
        let kept = self.inner.store.events(run_id).await?;
        kept.into_iter()
            .map(|e| {
                serde_json::from_value(e).map_err(|e| {
                    Error::store(format!("an event of run {run_id} cannot be read: {e}"))
                })
            })
            .collect()
    }

    async fn load(&self, run_id: &str) -> Result<RunState> {
        let record = self
            .inner
            .store
            .load(run_id)
            .await?
            .ok_or_else(|| Error::not_suspended(format!("no run {run_id}")))?;
        self.read(run_id, record.state)
    }

    /// A stored run's state, checked (its integrity, with a key) and parsed.
    fn read(&self, run_id: &str, mut state: Value) -> Result<RunState> {
        if let Some(key) = &self.inner.integrity {
            key.open(Sealed::Run, run_id, &mut state)?;
        } else if let Value::Object(m) = &mut state {
            m.remove(INTEGRITY_FIELD);
        }
        let version = state.get("version").and_then(Value::as_u64).unwrap_or(1);
        if version != u64::from(STATE_VERSION) {
            return Err(Error::store(format!(
                "run {run_id} is kept in format {version}, and this version of mcp-agent reads format {STATE_VERSION}: finish or cancel it with the version that kept it"
            )));
        }
        let mut state: RunState = serde_json::from_value(state)
            .map_err(|e| Error::store(format!("run {run_id} cannot be read: {e}")))?;
        if state.id != run_id {
            return Err(Error::store(format!(
                "the run kept under {run_id} says it is run {}: it is not used",
                state.id
            )));
        }
        state.persisted = true;
        Ok(state)
    }
}

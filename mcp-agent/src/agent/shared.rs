//! The agent itself — what it holds, and the helpers its modules share.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use mcp_runtime::Mcp;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::gate::{Gate, ToolFacts};
use crate::model::{Block, Message, Model, Role};
use crate::store::{Claim, Durability, Lease, LedgerKind, RunRecord, RunStatus, RunStore};

use super::decision::{Expiry, InputFn};
use super::events::{Event, EventFn};
use super::host::Host;
use super::integrity::{IntegrityKey, Sealed, INTEGRITY_FIELD};
use super::skill_types::SkillApproval;
use super::state::{RunState, STATE_VERSION};
use super::util::{now_ms, random_id};
use super::vault::Vault;

/// A tool an approved skill's `allowed-tools` granted (same server, exact name).
pub(super) fn granted(grants: &[(String, String, String)], tool: &ToolFacts) -> bool {
    grants
        .iter()
        .any(|(server, name, _)| *server == tool.server && *name == tool.name)
}

/// A hook that sees (and may trim) the messages before each model call.
pub(super) type ContextFn = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;

/// The name of the emulated tool search (for models without a native one).
pub(super) const TOOL_SEARCH: &str = "tool_search";

/// How many progress events a run keeps per tool call.
pub const MAX_PROGRESS_KEPT: usize = 100;

/// An agent. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub(super) inner: Arc<AgentInner>,
}

pub(super) struct AgentInner {
    pub(super) model: Arc<dyn Model>,
    pub(super) gate: Arc<Gate>,
    /// The builder set the mode, allow-list or step limit: a resumed run may go on
    /// under this policy only where it is tighter than the run's own.
    pub(super) policy_stated: bool,
    /// MACs stored runs, when set.
    pub(super) integrity: Option<IntegrityKey>,
    /// How long a suspension waits for a decision.
    pub(super) expiry: Option<std::time::Duration>,
    /// What an expired suspension does.
    pub(super) on_expiry: Expiry,
    /// How long a hold on a run lasts unless renewed.
    pub(super) lease: std::time::Duration,
    /// The scope of the standing allowances this agent keeps and uses.
    pub(super) scope: Option<String>,
    /// A run's `Always::Run` decisions last through its follow-ups.
    pub(super) always_outlives_run: bool,
    /// Allow-listed tools are pinned on first use.
    pub(super) pin_allow_list: bool,
    pub(super) servers: Vec<Mcp>,
    /// What the loop lists tools from and calls them on: the servers (a scripted
    /// host in the loop's unit tests).
    pub(super) host: Arc<dyn Host>,
    pub(super) store: Arc<dyn RunStore>,
    pub(super) max_steps: u32,
    /// Servers whose failure to list tools stops a run (the others are left out of
    /// the turn).
    pub(super) required: Vec<String>,
    /// The most calls of one run on servers at once.
    pub(super) calls_in_flight: usize,
    /// The most tool calls of one model turn that run.
    pub(super) calls_per_turn: usize,
    /// The most bytes of a tool result's text the model is sent.
    pub(super) max_result_size: usize,
    pub(super) system: Option<String>,
    pub(super) on_event: Vec<EventFn>,
    pub(super) on_input: Vec<InputFn>,
    pub(super) on_context: Option<ContextFn>,
    /// Tool spans carry the arguments and results.
    pub(super) trace_content: bool,
    /// Per server, what it defers instead of its declaration.
    pub(super) defer: Vec<(String, Deferral)>,
    pub(super) skills: bool,
    pub(super) skill_approvals: Vec<SkillApproval>,
    /// Skills loaded in this process, by (server, uri): a file read reuses the load
    /// (its `SKILL.md` checked once) while the run holds the same entry.
    pub(super) loaded_skills:
        std::sync::Mutex<HashMap<(String, String), mcp_runtime::skills::LoadedSkill>>,
    /// Answers to input requests a run may not keep, until their calls are sent.
    pub(super) vault: Vault,
    /// The tool names each server offered when last listed (a server that is down
    /// keeps them reserved).
    pub(super) known_names: std::sync::Mutex<HashMap<String, Vec<String>>>,
    /// The servers whose changes this agent made sure it hears.
    pub(super) following: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("mode", self.inner.gate.mode())
            .field("servers", &self.inner.servers.len())
            .finish_non_exhaustive()
    }
}

/// Ends the current turn of a run that will not go on: every call still pending gets
/// an error result saying `why`, and the turn's results join the transcript.
pub(super) fn close_turn(state: &mut RunState, why: &str) {
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

impl Agent {
    /// Stops every attached server: each one, even after another failed to stop. The
    /// error names every server that failed ([`Error::is_mcp`]).
    pub async fn close(&self) -> Result<()> {
        let mut failed = Vec::new();
        for s in &self.inner.servers {
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

    pub(super) fn event(&self, state: &mut RunState, event: Event) {
        for f in &self.inner.on_event {
            f(&state.id, &event);
        }
        state.events.push(event);
    }

    /// Keeps the run, on disk before this returns ([`Durability::Flushed`]).
    pub(super) async fn save(&self, state: &mut RunState, status: RunStatus) -> Result<()> {
        self.save_as(state, status, Durability::Flushed).await
    }

    /// Keeps the run, as durably as `durability` says.
    pub(super) async fn save_as(
        &self,
        state: &mut RunState,
        status: RunStatus,
        durability: Durability,
    ) -> Result<()> {
        // The MAC covers the save counter and the status saved with: an older copy
        // put back is found by the ledger, a row mixed from two saves by its parts.
        state.seq += 1;
        state.saved_as = Some(status);
        let mut state_json = serde_json::to_value(&*state)
            .map_err(|e| Error::store(format!("cannot encode the run: {e}")))?;
        if let Some(key) = &self.inner.integrity {
            key.seal(Sealed::Run, &state.id, &mut state_json)?;
        }
        let mut ledger = std::mem::take(&mut state.ledger);
        for entry in &mut ledger {
            entry.seq = state.seq;
            entry.mac = None;
            if let Some(key) = &self.inner.integrity {
                let value = serde_json::to_value(&*entry)
                    .map_err(|e| Error::store(format!("cannot encode a ledger entry: {e}")))?;
                entry.mac = Some(key.tag(Sealed::Ledger, &state.id, &value)?);
            }
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
        let record = RunRecord {
            id: state.id.clone(),
            status,
            suspension,
            state: state_json,
            lease: state.lease.clone(),
            events,
            durability,
            ledger,
            first: !state.persisted,
        };
        self.inner.store.save(&record).await?;
        for entry in record.ledger {
            if entry.kind == LedgerKind::Sent {
                state.sent.insert(entry.item);
                state.spent.extend(entry.decision);
            }
        }
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
    pub(super) fn new_lease(&self) -> Result<Lease> {
        Ok(Lease {
            owner: random_id()?,
            until: self.lease_end(),
        })
    }

    /// When a lease taken or renewed now ends (milliseconds since the epoch).
    pub(super) fn lease_end(&self) -> u64 {
        now_ms().saturating_add(self.inner.lease.as_millis().min(u64::MAX as u128) as u64)
    }

    /// Claims `run_id` as `claim` says, under a new lease of this process.
    pub(super) async fn claim(
        &self,
        run_id: &str,
        claim: Claim<'_>,
    ) -> Result<Option<(RunRecord, Lease)>> {
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
    pub(super) async fn hold(&self, run_id: &str, lease: Option<Lease>) -> Error {
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

    pub(super) async fn load(&self, run_id: &str) -> Result<RunState> {
        let record = self
            .inner
            .store
            .load(run_id)
            .await?
            .ok_or_else(|| Error::not_suspended(format!("no run {run_id}")))?;
        self.read(&record)
    }

    /// A stored run's state, checked (its integrity, with a key; that its row's
    /// status and suspension are those it was saved with) and parsed.
    pub(super) fn read(&self, record: &RunRecord) -> Result<RunState> {
        let run_id = record.id.as_str();
        let mut state = record.state.clone();
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
        // The row's parts come from one save: its status is the one saved (or
        // `running`, which a claim makes it), a waiting row's suspension the state's.
        let mixed = match state.saved_as {
            None => true,
            Some(saved) => {
                (record.status != saved && record.status != RunStatus::Running)
                    || (record.status == RunStatus::Suspended
                        && record.suspension.as_deref()
                            != state.suspension.as_ref().map(|s| s.id.as_str()))
            }
        };
        if mixed {
            return Err(Error::store(format!(
                "run {run_id}: its row's status or suspension is not the one its state was saved with (the row was put together from different saves, or changed outside the agent); it is not used"
            )));
        }
        state.persisted = true;
        Ok(state)
    }

    /// Reads the run's sent ledger into `state` (what was sent, which decisions are
    /// spent) and refuses a run whose save counter is behind it: a copy put back
    /// from before what the ledger records.
    pub(super) async fn check_ledger(&self, state: &mut RunState) -> Result<()> {
        let entries = self.inner.store.ledger(&state.id).await?;
        let mut newest = 0;
        for mut entry in entries {
            if let Some(key) = &self.inner.integrity {
                let tag = entry.mac.take().unwrap_or_default();
                let value = serde_json::to_value(&entry)
                    .map_err(|e| Error::store(format!("cannot encode a ledger entry: {e}")))?;
                if !key.verify(Sealed::Ledger, &state.id, &value, &tag)? {
                    return Err(Error::store(format!(
                        "a ledger entry of run {} failed its integrity check: it was changed outside the agent, or kept without (or with another) integrity key; the run is not used",
                        state.id
                    )));
                }
            }
            newest = newest.max(entry.seq);
            if entry.kind == LedgerKind::Sent {
                state.spent.extend(entry.decision);
                state.sent.insert(entry.item);
            }
        }
        if state.seq < newest {
            let event = Event::RunRolledBack {
                kept: state.seq,
                ledger: newest,
            };
            self.event(state, event);
            return Err(Error::rolled_back(format!(
                "run {} was put back from an older copy: it is at save {}, and its sent ledger records save {newest}; it is refused so that nothing it sent runs again and no decision it spent applies again (cancel or delete it)",
                state.id, state.seq
            )));
        }
        Ok(())
    }
}

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

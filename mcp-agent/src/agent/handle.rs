//! The agent itself: a cheap handle on its components — the model, the policy, the
//! run bookkeeping, the attached servers, the callbacks, the skills and the vault —
//! and what needs more than one of them (an event, a save).

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::{Model, Usage};
use crate::store::{Durability, RunStatus};

use super::attached::Attached;
use super::bookkeeping::Bookkeeping;
use super::callbacks::Callbacks;
use super::events::Event;
use super::policy::AgentPolicy;
use super::retry_policy::RetryPolicy;
use super::skill_registry::SkillRegistry;
use super::state::RunState;
use super::vault::Vault;

/// How many progress events a run keeps per tool call.
pub const MAX_PROGRESS_KEPT: usize = 100;

/// An agent. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub(super) inner: Arc<AgentInner>,
}

/// What an agent is made of: each part owns its state.
pub(super) struct AgentInner {
    pub(super) model: Arc<dyn Model>,
    /// Instructions for the model, first in every new run.
    pub(super) system: Option<String>,
    /// Tool spans carry the arguments and results.
    pub(super) trace_content: bool,
    /// The gate, its limits, and how far approvals reach.
    pub(super) policy: AgentPolicy,
    /// Where runs are kept, sealed and held.
    pub(super) books: Bookkeeping,
    /// The servers, and what the loop lists tools from and calls them on.
    pub(super) servers: Attached,
    /// The application's callbacks (shared with the progress handlers of calls).
    pub(super) callbacks: Arc<Callbacks>,
    /// Skills: whether they are offered, the approvals given, the loads reused.
    pub(super) skills: SkillRegistry,
    /// Answers to input requests a run may not keep, until their calls are sent.
    pub(super) vault: Vault,
    /// How model calls that failed for a while are tried again.
    pub(super) retry: RetryPolicy,
    /// The tools' input schemas, compiled.
    pub(super) schemas: super::schema_cache::Schemas,
    /// When and how long transcripts are compacted.
    pub(super) compaction: Option<super::compaction::Compaction>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("mode", self.inner.policy.own_gate().mode())
            .field("servers", &self.inner.servers.count())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Stops every attached server: each one, even after another failed to stop. The
    /// error names every server that failed ([`Error::is_mcp`]).
    pub async fn close(&self) -> Result<()> {
        self.inner.servers.close().await
    }

    /// The events of a run, from its log in the store, in the order they happened
    /// (every save appends the events since the last; none is ever rewritten).
    pub async fn events(&self, run_id: &str) -> Result<Vec<Event>> {
        self.inner.books.events(run_id).await
    }

    /// The tokens run `run_id` took so far, as its provider reported them (every model
    /// call of it, follow-ups included), as the store keeps it. An unknown run is an
    /// error for which `is_not_suspended()` is true.
    pub async fn usage(&self, run_id: &str) -> Result<Usage> {
        Ok(self.inner.books.load(run_id).await?.usage)
    }

    /// Tells the callbacks of `event`, and keeps it in the run.
    pub(super) fn event(&self, state: &mut RunState, event: Event) {
        self.inner.callbacks.record(state, event);
    }

    /// Keeps the run, on disk before this returns ([`Durability::Flushed`]).
    pub(super) async fn save(&self, state: &mut RunState, status: RunStatus) -> Result<()> {
        self.save_as(state, status, Durability::Flushed).await
    }

    /// Keeps the run, as durably as `durability` says; a run that ended takes what
    /// the vault held for it along.
    pub(super) async fn save_as(
        &self,
        state: &mut RunState,
        status: RunStatus,
        durability: Durability,
    ) -> Result<()> {
        self.inner.books.save(state, status, durability).await?;
        if matches!(
            status,
            RunStatus::Finished | RunStatus::Cancelled | RunStatus::Failed
        ) {
            self.inner.vault.forget_run(&state.id);
        }
        Ok(())
    }

    /// Reads the run's sent ledger into `state` and refuses a run whose save counter
    /// is behind it: a copy put back from before what the ledger records.
    pub(super) async fn check_ledger(&self, state: &mut RunState) -> Result<()> {
        let newest = self.inner.books.read_ledger(state).await?;
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

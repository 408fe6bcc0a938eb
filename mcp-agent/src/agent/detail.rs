//! One run as a person looks at it ([`Agent::run_detail`]): where it stands, who owns
//! it, its transcript, and what it waits on.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::model::{Message, Usage};
use crate::store::RunStatus;

use super::decision::Pending;
use super::handle::Agent;
use super::options::Principal;

/// One run as kept, read and checked against its integrity MAC
/// ([`Agent::run_detail`]): for a page that shows a run to a person.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunDetail {
    /// The run.
    pub run_id: String,
    /// Where it stands.
    pub status: RunStatus,
    /// The tenant it belongs to (from its sealed state).
    pub tenant: Option<String>,
    /// Who started it (from its sealed state).
    pub started_by: Option<Principal>,
    /// Its labels (from its sealed state).
    pub labels: BTreeMap<String, String>,
    /// When it started (milliseconds since the epoch; 0 for runs kept before this was
    /// recorded).
    pub started_at: u64,
    /// The transcript: the conversation so far, tool calls and results included (the
    /// results of a turn that has not ended yet are not in it).
    pub messages: Vec<Message>,
    /// What it waits on, when it waits (as [`Agent::pending`] gives it).
    pub pending: Vec<Pending>,
    /// The tokens its model calls took.
    pub usage: Usage,
    /// The error that stopped it, when it failed.
    pub failure: Option<String>,
    /// The run it works for and that run's call, when a sub-agent tool
    /// ([`Agent::as_tool`]) started it: `(run id, tool)` (from its sealed state).
    pub parent: Option<(String, String)>,
}

impl Agent {
    /// The run `run_id` as kept — status, owner, transcript, what it waits on — read
    /// and checked against its integrity MAC (a run whose state does not check is an
    /// error, never shown); `None` when the store keeps no such run. Its events are
    /// [`events`](Agent::events) (or followed live with [`watch`](Agent::watch)).
    pub async fn run_detail(&self, run_id: &str) -> Result<Option<RunDetail>> {
        let Some(record) = self.inner.books.store().load(run_id).await? else {
            return Ok(None);
        };
        let state = self.inner.books.read(&record)?;
        let pending = if record.status == RunStatus::Suspended {
            self.waiting(&state).await?
        } else {
            Vec::new()
        };
        // The state was read for this answer alone: its parts move into it.
        let o = state.options;
        Ok(Some(RunDetail {
            run_id: state.id,
            status: record.status,
            tenant: o.tenant,
            started_by: o.started_by,
            labels: o.labels,
            started_at: state.started_at,
            messages: state.messages,
            pending,
            usage: state.usage,
            failure: state.failure,
            parent: state.parent.map(|p| (p.run, p.tool)),
        }))
    }
}

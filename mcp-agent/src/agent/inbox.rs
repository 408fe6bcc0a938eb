//! The approval inbox: what a run waits on, expiry, cancel, delete, prune, listing.

use serde_json::json;

use crate::error::{Error, Result};
use crate::model::{Block, Message, Role};
use crate::store::{Claim, Lease, RunFilter, RunRecord, RunStatus};

use super::clock::now_ms;
use super::decision::{Expiry, InboxPage, Outcome, Pending};
use super::events::Event;
use super::handle::Agent;
use super::run::error_result;
use super::state::{CallState, RunState};

impl Agent {
    /// What the suspended run `run_id` waits on, one entry per call — the ids a
    /// decision names, the server, tool and arguments, and the tool's definition as
    /// shown (or the input requests with their schemas) — for an application that
    /// never saw the [`Outcome`]. Empty when the run does not wait.
    pub async fn pending(&self, run_id: &str) -> Result<Vec<Pending>> {
        let Some(record) = self.inner.books.store().load(run_id).await? else {
            return Ok(Vec::new());
        };
        if record.status != RunStatus::Suspended {
            return Ok(Vec::new());
        }
        let state = self.inner.books.read(&record)?;
        self.waiting(&state).await
    }

    /// What `state` waits on: its own calls, and those of the sub-agents' runs its
    /// calls wait on.
    pub(super) async fn waiting(&self, state: &RunState) -> Result<Vec<Pending>> {
        let mut calls = waiting_on(state)?;
        calls.extend(self.delegated_pending(state).await?);
        Ok(calls)
    }

    /// An approval inbox: what the suspended runs `filter` names wait on — "this
    /// team's pending approvals" is `inbox(&RunFilter::new().tenant("team"))`; by who
    /// started them ([`RunFilter::started_by`]) or by label too — one page of runs at
    /// a time (the filter's `limit` and `cursor`; its status is taken as suspended).
    ///
    /// The store finds the runs by the owner columns it keeps; each run found is then
    /// read and checked against its integrity MAC, and one whose sealed owner is not
    /// what the filter asks for (its columns were changed in the store), or that
    /// cannot be read, is left out (and logged). Each [`Pending`] carries the run's
    /// tenant and who started it, from the sealed state.
    ///
    /// [`RunFilter::started_by`]: crate::store::RunFilter::started_by
    pub async fn inbox(&self, filter: &RunFilter) -> Result<InboxPage> {
        let mut suspended = filter.clone();
        suspended.status = Some(RunStatus::Suspended);
        let page = self.inner.books.store().list(&suspended).await?;
        let mut pending = Vec::new();
        for run in page.runs {
            let Some(record) = self.inner.books.store().load(&run.id).await? else {
                continue; // decided or deleted meanwhile
            };
            if record.status != RunStatus::Suspended {
                continue;
            }
            let state = match self.inner.books.read(&record) {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "a waiting run cannot be read; the inbox leaves it out");
                    continue;
                }
            };
            let o = &state.options;
            let started_by = o.started_by.as_ref().map(|p| p.id.as_str());
            if !filter.owns(o.tenant.as_deref(), started_by, &o.labels) {
                tracing::warn!(run = %run.id, "a run's owner columns disagree with its sealed state; the inbox leaves it out");
                continue;
            }
            // A sub-agent's run is listed with the run it works for.
            if state.parent.is_some() {
                continue;
            }
            match self.waiting(&state).await {
                Ok(calls) => pending.extend(calls),
                Err(e) => {
                    tracing::warn!(run = %run.id, error = %e, "what a waiting run waits on cannot be read; the inbox leaves it out")
                }
            }
        }
        Ok(InboxPage {
            pending,
            next: page.next,
        })
    }

    /// Expires the suspensions whose time has passed (see
    /// [`AgentBuilder::suspension_expiry`](crate::AgentBuilder::suspension_expiry)): for each, the call it waited on does not
    /// run — the model reads "expired, not run" — and the run goes on, or ends
    /// ([`Expiry::End`]); `Event::SuspensionExpired`. Returns what became of each run
    /// expired now (a run decided meanwhile is left to its decision). Call it from a
    /// timer; any process with the store may.
    pub async fn expire_due(&self) -> Result<Vec<(String, Result<Outcome>)>> {
        let mut out = Vec::new();
        let mut filter = crate::store::RunFilter::new()
            .status(RunStatus::Suspended)
            .limit(1000);
        // A page at a time (id order): runs expired on one page leave the listing,
        // and the cursor goes on past the last id seen.
        loop {
            let page = self.inner.books.store().list(&filter).await?;
            for run in page.runs {
                if let Some(done) = self.expire(&run.id).await.transpose() {
                    out.push((run.id, done));
                }
            }
            match page.next {
                Some(next) => filter = filter.cursor(next),
                None => return Ok(out),
            }
        }
    }

    /// Expires `run_id`'s suspension if its time has passed; `None` when it has not
    /// (or the run was decided meanwhile).
    pub(super) async fn expire(&self, run_id: &str) -> Result<Option<Outcome>> {
        let Some(record) = self.inner.books.store().load(run_id).await? else {
            return Ok(None);
        };
        let state = self.inner.books.read(&record)?;
        // Every decision recorded in time: the run is left to them (a worker goes on
        // with it), as a worker leaves it.
        if !state.pending.iter().any(|c| c.at.awaits_person()) {
            return Ok(None);
        }
        let Some(s) = state
            .suspension
            .clone()
            .filter(|s| s.expires_at.is_some_and(|at| now_ms() >= at))
        else {
            return Ok(None);
        };
        drop(state);
        let Some((claimed, lease)) = self
            .inner
            .books
            .claim(run_id, Claim::Suspended(&s.id))
            .await?
        else {
            return Ok(None);
        };
        self.expire_claimed(run_id, claimed, lease).await.map(Some)
    }

    /// Expires the suspension of a run this process claimed (under `lease`) from it:
    /// the calls nobody decided end unrun, the decided ones go on.
    pub(super) async fn expire_claimed(
        &self,
        run_id: &str,
        claimed: RunRecord,
        lease: Lease,
    ) -> Result<Outcome> {
        // A policy this agent may not apply (or a run it cannot read) leaves the run
        // waiting as it was.
        let waiting = |r| RunRecord {
            status: RunStatus::Suspended,
            ..r
        };
        let mut state = self.take_up(run_id, claimed, lease, waiting).await?;
        let Some(s) = state.suspension.take() else {
            return Err(Error::store(format!("run {run_id} waits in no suspension")));
        };
        // Calls handed to sub-agents that still wait end with it: their runs are
        // cancelled.
        let mut waiting_children = state.clone();
        waiting_children
            .pending
            .retain(|c| matches!(c.at, CallState::Delegated { .. }) && c.at.awaits_person());
        self.cancel_children(&waiting_children, "expiry").await;
        // Every call nobody decided ends unrun; the decided ones go on.
        let (mut i, mut expired) = (0, false);
        while i < state.pending.len() {
            let decision = match &state.pending[i].at {
                CallState::Delegated { decisions, .. } => decisions.first().cloned(),
                other => other.decision().map(str::to_owned),
            };
            let Some(decision) = decision else {
                i += 1;
                continue;
            };
            let call = state.pending.remove(i);
            expired = true;
            self.event(
                &mut state,
                Event::SuspensionExpired {
                    suspension: s.id.clone(),
                    decision,
                    tool: call.name.clone(),
                },
            );
            let why = format!(
                "expired: nobody decided in time; `{}` was not run",
                call.name
            );
            state.results.push(error_result(call.id, why));
        }
        // (Nothing expired — every decision was recorded in time: the run goes on.)
        if expired && self.inner.books.on_expiry() == Expiry::End {
            // The calls handed to sub-agents that were decided end with the run too.
            self.cancel_children(&state, "expiry").await;
            close_turn(
                &mut state,
                "not run: the run ended when a suspension expired",
            );
            self.event(&mut state, Event::RunFinished);
            self.save(&mut state, RunStatus::Finished).await?;
            return Ok(Outcome::Expired {
                run_id: run_id.to_owned(),
                usage: state.usage,
            });
        }
        self.drive(state, None).await
    }

    /// Cancels a run that waits (or failed): the calls it waited on do not run, the
    /// transcript records them as cancelled (so the model would read it), and the run
    /// ends `cancelled` (`Event::RunCancelled`). Of a cancel and a decision at once, one
    /// wins. A run that does not wait or fail is refused with `is_not_suspended()`.
    pub async fn cancel(&self, run_id: &str, by: &str) -> Result<()> {
        self.cancel_as(run_id, by, false).await
    }

    /// [`cancel`](Self::cancel); a sub-agent's run only `via_parent` (its parent's
    /// cancel or expiry).
    pub(super) async fn cancel_as(&self, run_id: &str, by: &str, via_parent: bool) -> Result<()> {
        let record = self.inner.books.record(run_id).await?;
        let status = record.status;
        let mut state = self.inner.books.read(&record)?;
        if let (Some(parent), false) = (&state.parent, via_parent) {
            return Err(Error::not_suspended(format!(
                "run {run_id} is a sub-agent's run: cancel the run it works for, {}",
                parent.run
            )));
        }
        let claim = match (status, state.suspension.as_ref()) {
            (RunStatus::Suspended, Some(s)) => Claim::Suspended(&s.id),
            (RunStatus::Failed, _) => Claim::Failed,
            _ => {
                return Err(Error::not_suspended(format!(
                    "run {run_id} neither waits nor has failed: there is nothing to cancel"
                )))
            }
        };
        let Some((_, lease)) = self.inner.books.claim(run_id, claim).await? else {
            return Err(Error::not_suspended(format!(
                "run {run_id} was decided or cancelled meanwhile"
            )));
        };
        state.lease = Some(lease);
        self.cancel_children(&state, by).await;
        close_turn(
            &mut state,
            &format!("the run was cancelled by {by}; this call did not run"),
        );
        state.suspension = None;
        self.event(&mut state, Event::RunCancelled { by: by.to_owned() });
        self.save(&mut state, RunStatus::Cancelled).await
    }

    /// Forgets the run `run_id` (whatever it stands at); `false` when there was none.
    pub async fn delete(&self, run_id: &str) -> Result<bool> {
        self.inner.vault.forget_run(run_id);
        self.inner.books.store().delete(run_id).await
    }

    /// Forgets the runs that ended (finished or cancelled) more than `age` ago; how
    /// many.
    pub async fn prune(&self, age: std::time::Duration) -> Result<u64> {
        let cutoff = crate::store::unix_now().saturating_sub(age.as_secs());
        self.inner.books.store().prune(cutoff).await
    }

    /// The runs of this agent's store that `filter` names, a page at a time.
    pub async fn runs(&self, filter: &crate::store::RunFilter) -> Result<crate::store::RunPage> {
        self.inner.books.store().list(filter).await
    }

    /// The background tasks a suspended run waits on (server, task id): calls a server
    /// runs as tasks that paused for input. They keep running on the server; resuming
    /// the run answers them and waits for their results. Listen to them with
    /// `Mcp::listen_for` to hear how they stand (the seed's `pending_tasks`).
    pub async fn pending_tasks(&self, run_id: &str) -> Result<Vec<(String, String)>> {
        let state = self.inner.books.load(run_id).await?;
        Ok(state
            .pending
            .iter()
            .filter_map(|c| {
                let input = match &c.at {
                    CallState::AwaitingInput { input, .. } | CallState::Answered { input, .. } => {
                        input
                    }
                    _ => return None,
                };
                Some((input.server().to_owned(), input.task_id()?.to_owned()))
            })
            .collect())
    }
}

/// What a run waits on in its suspension, call by call (none when it waits in none).
pub(super) fn waiting_on(state: &RunState) -> Result<Vec<Pending>> {
    let Some(s) = &state.suspension else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for call in &state.pending {
        out.extend(call.pending(&state.id, s, &state.options)?);
    }
    Ok(out)
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

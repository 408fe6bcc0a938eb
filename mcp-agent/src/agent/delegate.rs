//! Sub-agents: an agent offered to another as a tool ([`Agent::as_tool`]).
//!
//! A call of the tool starts a run of the sub-agent with the task the model gave,
//! linked to the calling run: it goes on under its own policy **and** every policy
//! above it (a call runs only when each lets it), with what is left of the parent's
//! budget, for the parent's tenant and principal. When it waits for a person, the
//! parent's call waits on it (`Delegated`): the sub-agent's pending calls are listed
//! with the parent's, and a decision given to the parent is recorded in the
//! sub-agent's run (checked, bound and single use there, as for any run). Once none
//! is left, the parent's loop continues the sub-agent's run — in whichever process
//! takes the parent up — and its answer becomes the call's result.

use std::sync::Arc;

use mcp_runtime::BoxFuture;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::function::FunctionTool;
use crate::gate::Gate;
use crate::model::{Block, Role};
use crate::store::{Claim, RunRecord, RunStatus};

use super::decision::{Decision, Outcome, Pending};
use super::events::Event;
use super::handle::Agent;
use super::options::RunOptions;
use super::policy::outer_gates;
use super::state::{CallEnd, CallState, Parent, PendingCall, Policy, RunState};

/// How long the parent waits between looks at a sub-agent's run another process holds.
const HELD_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// How many looks (ten minutes) before the parent gives up on a held sub-agent's run.
const MAX_HELD_POLLS: u32 = 3_000;

/// What a sub-agent's run is started with by a call of the run `run`: the run's owner
/// and labels, what is left of its budget, and the policies it goes on under beside
/// its own (kept with it) with their gates, live.
#[derive(Clone)]
pub(super) struct Delegation {
    run: String,
    options: RunOptions,
    policies: Vec<Policy>,
    gates: Vec<Arc<Gate>>,
}

impl Agent {
    /// This agent as a tool of another agent (give it to
    /// [`AgentBuilder::tool`](crate::AgentBuilder::tool)): the model calls `name` with a
    /// `task`, and this agent runs it — its own model, servers, mode and allow-list —
    /// as a run of its own, linked to the calling run:
    ///
    /// - it runs under the **intersection** of the policies: a call of the sub-agent
    ///   runs only when its own gate and every gate above it (its parent's, and
    ///   theirs) let it — a denial of either wins, a need for a person of either asks
    ///   one; a tool either never allows is not offered to it;
    /// - its budget is what is left of the parent's, and what it spent counts against
    ///   the parent's when it ends;
    /// - when a call of it waits for a person, the parent run suspends on it: the
    ///   sub-agent's pending calls are listed in the parent's
    ///   [`pending`](Agent::pending), [`Outcome`] and [`inbox`](Agent::inbox) (with
    ///   [`Pending::sub_run`] set), and a decision given to the parent — by
    ///   [`resume`](Agent::resume), [`decide`](Agent::decide) or
    ///   [`record_decision`](Agent::record_decision) — is recorded in the sub-agent's
    ///   run, checked there as for any run; once every one is decided, the parent goes
    ///   on by continuing the sub-agent's run, in this process or another with the
    ///   same stores;
    /// - the parent's run keeps [`Event::SubAgent`] (the sub-agent's run id, where it
    ///   stands); the sub-agent's run keeps its own events, and its parent's id.
    ///
    /// The sub-agent's answer is the call's result (the `after_call` hook sees it).
    /// Give both agents durable stores for runs that suspend across processes.
    pub fn as_tool(&self, name: impl Into<String>, description: impl Into<String>) -> FunctionTool {
        let schema = json!({
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "The task, in full: the sub-agent sees nothing else of this conversation."
                }
            },
            "required": ["task"],
            "additionalProperties": false
        });
        FunctionTool::delegating(
            name.into(),
            description.into(),
            schema,
            Arc::new(self.clone()),
        )
    }

    /// The sub-agent the function tool `tool` hands its calls to, if it does.
    pub(super) fn sub_agent(&self, tool: &str) -> Option<Agent> {
        self.inner
            .servers
            .sub_agent(tool)?
            .downcast_ref::<Agent>()
            .cloned()
    }

    /// What a sub-agent's run started by a call of `state` is started with.
    pub(super) fn delegation(&self, state: &RunState) -> Delegation {
        let mut policies = vec![state
            .policy
            .clone()
            .unwrap_or_else(|| self.inner.policy.own())];
        let mut gates = vec![self.inner.policy.gate(state)];
        if let Some(p) = &state.parent {
            policies.extend(p.policies.iter().cloned());
        }
        gates.extend(outer_gates(state));
        let mut options = RunOptions::new();
        options.tenant = state.options.tenant.clone();
        options.started_by = state.options.started_by.clone();
        options.labels = state.options.labels.clone();
        options.budget = self.budget_left(state);
        Delegation {
            run: state.id.clone(),
            options,
            policies,
            gates,
        }
    }

    /// Hands a call of the sub-agent tool `tool` (of `child`) to a new run of it; how
    /// the call ends, and the event that says so.
    pub(super) async fn delegate(
        &self,
        delegation: &Delegation,
        call: &PendingCall,
        sub_run: Option<String>,
        child: &Agent,
    ) -> (CallEnd, Event) {
        let tool = call.name.as_str();
        let task = call
            .arguments
            .get("task")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty());
        let (Some(task), Some(sub_run)) = (task, sub_run) else {
            let end = failed(format!(
                "`{tool}` was not run: give the sub-agent its task as `task`, a non-empty string"
            ));
            return (end, sub_event(tool, "", "not started".into(), None));
        };
        let started = child.start_child(task, delegation, tool, &sub_run).await;
        self.child_end(tool, child, started, Some(&sub_run)).await
    }

    /// A run of this agent for the call `tool` of the run `delegation` names. (The
    /// parent's loop runs this one: boxed, as its future holds this one's.)
    fn start_child<'a>(
        &'a self,
        task: &'a str,
        delegation: &'a Delegation,
        tool: &'a str,
        run: &'a str,
    ) -> BoxFuture<'a, Result<Outcome>> {
        Box::pin(async move {
            let mut state = self.new_run(task.into(), delegation.options.clone())?;
            // The id the parent kept before it started this run.
            state.id = run.to_owned();
            state.parent = Some(Parent {
                run: delegation.run.clone(),
                tool: tool.to_owned(),
                policies: delegation.policies.clone(),
            });
            state.outer = delegation.gates.clone();
            self.drive(state, None).await
        })
    }

    /// How a call of `tool` ends given where `child`'s run (`run`, when known) stands
    /// (`ended`).
    async fn child_end(
        &self,
        tool: &str,
        child: &Agent,
        ended: Result<Outcome>,
        run: Option<&str>,
    ) -> (CallEnd, Event) {
        let outcome = match ended {
            Ok(o) => o,
            Err(e) => {
                let end = failed(format!("the sub-agent `{tool}` failed: {e}"));
                // What it spent before it failed counts too.
                let spent = match run {
                    Some(run) => child.spent(run).await,
                    None => None,
                };
                let run = run.unwrap_or_default();
                return (end, sub_event(tool, run, "failed".into(), spent));
            }
        };
        let run = outcome.run_id().to_owned();
        let (text, is_error, status) = match outcome {
            Outcome::ApprovalRequired { calls, .. } | Outcome::InputRequired { calls, .. } => {
                let decisions = calls.into_iter().map(|p| p.decision).collect();
                let event = sub_event(tool, &run, "suspended".into(), None);
                return (CallEnd::Delegated(run, decisions), event);
            }
            Outcome::Finished { text, .. } => (text, false, "finished"),
            Outcome::Truncated { text, .. } => (
                format!("(the sub-agent's answer was cut at its output limit)\n{text}"),
                false,
                "truncated",
            ),
            Outcome::InvalidOutput { reason, .. } => (
                format!("the sub-agent's answer did not fit its schema: {reason}"),
                true,
                "invalid_output",
            ),
            Outcome::StepLimit { .. } => (
                "the sub-agent reached its step limit without an answer".to_owned(),
                true,
                "step_limit",
            ),
            Outcome::Expired { .. } => (
                "the sub-agent's run ended: a suspension of it expired".to_owned(),
                true,
                "expired",
            ),
            Outcome::BudgetExceeded { limit, .. } => (
                format!("the sub-agent's run ended: the budget's {limit:?} limit was reached"),
                true,
                "budget_exceeded",
            ),
        };
        let spent = child.spent(&run).await;
        let end = if is_error {
            failed(text)
        } else {
            CallEnd::Done(text, Vec::new(), false)
        };
        (end, sub_event(tool, &run, status.into(), spent))
    }

    /// What this agent's run `run` spent: its tokens, model calls and tool calls.
    async fn spent(&self, run: &str) -> Option<(crate::model::Usage, u64, u64)> {
        let record = self.inner.books.record(run).await.ok()?;
        let state = self.inner.books.read(&record).ok()?;
        Some((state.usage, state.model_calls, state.tool_calls))
    }

    /// Follows the calls of the turn handed to sub-agents, by their runs (the truth):
    /// a run whose decisions were all given goes on (or is read where it ended) and
    /// its answer becomes the call's result; one that waits on other decisions than the
    /// call keeps (it was recovered, or a decision was kept in it but not here) has
    /// them kept; a call a stopped process left sent takes its run up again.
    pub(super) async fn follow_children(&self, state: &mut RunState) -> Result<()> {
        let mut i = 0;
        while i < state.pending.len() {
            let (run, waits) = match &state.pending[i].at {
                CallState::Delegated { run, decisions } => (run.clone(), decisions.clone()),
                CallState::Executing {
                    sub_run: Some(run), ..
                } => (run.clone(), Vec::new()),
                _ => {
                    i += 1;
                    continue;
                }
            };
            let name = state.pending[i].name.clone();
            let (end, event) = match self.sub_agent(&name) {
                Some(child) => {
                    let delegation = self.delegation(state);
                    let went = match child.continue_child(&run, &delegation).await? {
                        Ok(outcome) => Ok(outcome),
                        Err(why) => Err(Error::store(why)),
                    };
                    // Still waiting on what the call keeps: nothing to say.
                    if let Ok(
                        Outcome::ApprovalRequired { calls, .. }
                        | Outcome::InputRequired { calls, .. },
                    ) = &went
                    {
                        let live: Vec<&String> = calls.iter().map(|p| &p.decision).collect();
                        if !waits.is_empty() && live == waits.iter().collect::<Vec<_>>() {
                            i += 1;
                            continue;
                        }
                    }
                    self.child_end(&name, &child, went, Some(&run)).await
                }
                None => (
                    failed(format!(
                        "the sub-agent `{name}` is not a tool of this agent: its run {run} was left as it is"
                    )),
                    sub_event(&name, &run, "not attached".into(), None),
                ),
            };
            absorb(state, &event);
            self.event(state, event);
            match end {
                CallEnd::Delegated(run, decisions) => {
                    state.pending[i].at = CallState::Delegated { run, decisions };
                    i += 1;
                }
                done @ CallEnd::Done(..) => {
                    let call = state.pending.remove(i);
                    let server = crate::function::FUNCTIONS;
                    let (done, hooked) = self.after_call(&state.id, server, &call, done);
                    if let Some(event) = hooked {
                        self.event(state, event);
                    }
                    if let CallEnd::Done(content, parts, is_error) = done {
                        state.ran += 1;
                        state.results.push(Block::ToolResult {
                            id: call.id,
                            content,
                            is_error,
                            parts,
                        });
                    }
                }
                CallEnd::Paused(_) => {
                    // A sub-agent's call never pauses here; the model reads so.
                    let call = state.pending.remove(i);
                    state.results.push(super::run::error_result(
                        call.id,
                        "the sub-agent's run did not end".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Takes this agent's run `run` (a sub-agent's) up for its parent, under the
    /// parent's policies as they are now (`delegation`): continued when every decision
    /// it waits for was recorded; as it stands when it still waits or ended; waited for
    /// while another process holds it (recovered once that process's lease ends). A
    /// run that failed or was cancelled is `Ok(Err(why))`, for the parent's model; an
    /// error of the stores is the parent's.
    fn continue_child<'a>(
        &'a self,
        run: &'a str,
        delegation: &'a Delegation,
    ) -> BoxFuture<'a, Result<std::result::Result<Outcome, String>>> {
        Box::pin(self.continue_child_inner(run, delegation))
    }

    async fn continue_child_inner(
        &self,
        run: &str,
        delegation: &Delegation,
    ) -> Result<std::result::Result<Outcome, String>> {
        let mut polls = 0u32;
        loop {
            let record = match self.inner.books.store().load(run).await? {
                Some(record) => record,
                None => {
                    // Its id was kept before it started; it was never kept itself.
                    return Ok(Err(format!(
                        "its run {run} was lost before it was first kept (the agent stopped); nothing of it was sent to a server"
                    )));
                }
            };
            let state = match self.inner.books.read(&record) {
                Ok(state) => state,
                Err(e) => return Ok(Err(format!("its run {run} cannot be read: {e}"))),
            };
            match record.status {
                RunStatus::Suspended => {
                    let ready = !state.pending.iter().any(|c| c.at.awaits_person());
                    if !ready {
                        let extra = self.delegated_listing(&state).await;
                        return match super::run::suspended_outcome(&state, extra) {
                            Ok(outcome) => Ok(Ok(outcome)),
                            Err(e) => Ok(Err(e.to_string())),
                        };
                    }
                    let Some(sid) = state.suspension.as_ref().map(|s| s.id.clone()) else {
                        return Err(Error::store(format!("run {run} waits in no suspension")));
                    };
                    let Some((claimed, lease)) =
                        self.inner.books.claim(run, Claim::Suspended(&sid)).await?
                    else {
                        continue; // another process took it up meanwhile
                    };
                    let waiting = |r| RunRecord {
                        status: RunStatus::Suspended,
                        ..r
                    };
                    let mut state = match self.take_up(run, claimed, lease, waiting).await {
                        Ok(state) => state,
                        // Unreadable, rolled back, or under a policy this agent may
                        // not apply (put back as it was).
                        Err(e) => return Ok(Err(e.to_string())),
                    };
                    state.suspension = None;
                    // The parent's policies as they are now, its `ask` callback live.
                    state.outer = delegation.gates.clone();
                    if let Some(p) = &mut state.parent {
                        p.policies = delegation.policies.clone();
                    }
                    return Ok(self.go_on(state).await.map_err(|e| e.to_string()));
                }
                RunStatus::Finished => {
                    let text = state
                        .messages
                        .iter()
                        .rev()
                        .find(|m| m.role == Role::Assistant)
                        .map(|m| m.joined_text())
                        .unwrap_or_default();
                    return Ok(Ok(Outcome::Finished {
                        run_id: run.to_owned(),
                        text,
                        usage: state.usage,
                    }));
                }
                RunStatus::Running => match self.recover_as(run, true).await {
                    Ok(outcome) => return Ok(Ok(outcome)),
                    // Held by a live process: waited for, a while (then the parent
                    // fails, to be retried, and the sub-agent's run is left as it is).
                    Err(e) if e.is_not_suspended() && polls < MAX_HELD_POLLS => {
                        polls += 1;
                        tokio::time::sleep(HELD_POLL).await
                    }
                    Err(e) if e.is_not_suspended() => {
                        return Err(Error::store(format!(
                            "the sub-agent's run {run} is held by another process"
                        )))
                    }
                    Err(e) => return Ok(Err(e.to_string())),
                },
                RunStatus::Failed => {
                    return Ok(Err(format!(
                        "its run {run} failed: {}",
                        state.failure.unwrap_or_default()
                    )))
                }
                _ => {
                    return Ok(Err(format!(
                        "its run {run} was cancelled or ended without an answer"
                    )))
                }
            }
        }
    }

    /// Brings the decisions the suspended run `record` (read as `state`) waits on
    /// through its sub-agents up to what their runs wait on now (their runs are the
    /// truth: one may have moved on, or wait under new decision ids after a recovery);
    /// `true` when the run changed in the store meanwhile (read it again).
    pub(super) async fn resync(&self, record: &RunRecord, state: &RunState) -> Result<bool> {
        if self.live_decisions(state).await?.is_empty() {
            return Ok(false);
        }
        let Some(sid) = state.suspension.as_ref().map(|s| s.id.clone()) else {
            return Ok(false);
        };
        let Some((claimed, lease)) = self
            .inner
            .books
            .claim(&record.id, Claim::Suspended(&sid))
            .await?
        else {
            return Ok(true);
        };
        let waiting = |r| RunRecord {
            status: RunStatus::Suspended,
            ..r
        };
        let back = waiting(claimed.clone());
        let mut state = self.take_up(&record.id, claimed, lease, waiting).await?;
        let live = match self.live_decisions(&state).await {
            Ok(live) => live,
            Err(e) => {
                self.inner.books.put_back(&record.id, back).await;
                return Err(e);
            }
        };
        for (i, ids) in live {
            if let Some(CallState::Delegated { decisions, .. }) =
                state.pending.get_mut(i).map(|c| &mut c.at)
            {
                *decisions = ids;
            }
        }
        if let Err(e) = self.save(&mut state, RunStatus::Suspended).await {
            self.inner.books.put_back(&record.id, back).await;
            return Err(e);
        }
        Ok(true)
    }

    /// The delegated calls of `state` whose sub-agents' runs wait on other decisions
    /// than `state` keeps: each call's index, with what its sub-agent's run waits on.
    async fn live_decisions(&self, state: &RunState) -> Result<Vec<(usize, Vec<String>)>> {
        let mut out = Vec::new();
        for (i, call) in state.pending.iter().enumerate() {
            let CallState::Delegated { run, decisions } = &call.at else {
                continue;
            };
            if decisions.is_empty() {
                continue; // the parent's loop takes the sub-agent's run up
            }
            let Some(child) = self.sub_agent(&call.name) else {
                return Err(Error::config(format!(
                    "run {}: the sub-agent `{}` is not a tool of this agent",
                    state.id, call.name
                )));
            };
            let live: Vec<String> = Box::pin(child.pending(run))
                .await?
                .into_iter()
                .map(|p| p.decision)
                .collect();
            if live != *decisions {
                out.push((i, live));
            }
        }
        Ok(out)
    }

    /// The calls the sub-agents of `state`'s delegated calls wait on, as `state`'s
    /// own: named by its run and suspension, with the sub-agent's run in `sub_run`.
    pub(super) async fn delegated_pending(&self, state: &RunState) -> Result<Vec<Pending>> {
        let mut out = Vec::new();
        for call in &state.pending {
            let CallState::Delegated { run, decisions } = &call.at else {
                continue;
            };
            if decisions.is_empty() {
                continue;
            }
            let Some(child) = self.sub_agent(&call.name) else {
                return Err(Error::config(format!(
                    "run {}: the sub-agent `{}` is not a tool of this agent",
                    state.id, call.name
                )));
            };
            for mut p in Box::pin(child.pending(run)).await? {
                if p.sub_run.is_none() {
                    p.sub_run = Some(p.run_id.clone());
                }
                p.run_id = state.id.clone();
                if let Some(s) = &state.suspension {
                    p.suspension = s.id.clone();
                    p.expires_at = match (p.expires_at, s.expires_at) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                p.tenant = state.options.tenant.clone();
                p.started_by = state.options.started_by.clone();
                out.push(p);
            }
        }
        Ok(out)
    }

    /// [`delegated_pending`](Self::delegated_pending) — or, when a sub-agent's run
    /// cannot be read, the calls named by their decisions only (logged).
    pub(super) async fn delegated_listing(&self, state: &RunState) -> Vec<Pending> {
        match self.delegated_pending(state).await {
            Ok(calls) => calls,
            Err(e) => {
                tracing::warn!(run = %state.id, error = %e, "what a sub-agent's run waits on could not be read: named by its decisions only");
                delegated_ids(state)
            }
        }
    }

    /// Records `decisions` on calls `state`'s sub-agents wait on in their runs (each
    /// sub-agent's at once: all of them, or none), and takes them off the calls that
    /// waited on them. `Ok` with nothing done when none names a delegated call.
    pub(super) async fn forward_decisions(
        &self,
        state: &mut RunState,
        decisions: &mut Vec<(String, Decision)>,
    ) -> Result<()> {
        for i in 0..state.pending.len() {
            let CallState::Delegated {
                run,
                decisions: waits,
            } = &state.pending[i].at
            else {
                continue;
            };
            let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(decisions)
                .into_iter()
                .partition(|(id, _)| waits.contains(id));
            *decisions = rest;
            if mine.is_empty() {
                continue;
            }
            let (run, name) = (run.clone(), state.pending[i].name.clone());
            let Some(child) = self.sub_agent(&name) else {
                return Err(Error::config(format!(
                    "run {}: the sub-agent `{name}` is not a tool of this agent",
                    state.id
                )));
            };
            let ids: Vec<String> = mine.iter().map(|(id, _)| id.clone()).collect();
            Box::pin(child.decide_as(&run, mine, true, true)).await?;
            if let CallState::Delegated {
                decisions: waits, ..
            } = &mut state.pending[i].at
            {
                waits.retain(|d| !ids.contains(d));
            }
            let event = sub_event(&name, &run, format!("decided {}", ids.join(", ")), None);
            self.event(state, event);
        }
        Ok(())
    }

    /// Cancels the sub-agents' runs `state`'s calls wait on (the run ends without
    /// them): best effort, logged when one cannot be.
    pub(super) async fn cancel_children(&self, state: &RunState, by: &str) {
        for call in &state.pending {
            let CallState::Delegated { run, .. } = &call.at else {
                continue;
            };
            let Some(child) = self.sub_agent(&call.name) else {
                continue;
            };
            if let Err(e) = Box::pin(child.cancel_as(run, by, true)).await {
                tracing::warn!(run = %state.id, sub_run = %run, error = %e, "a sub-agent's run was not cancelled with its parent");
            }
        }
    }
}

/// The calls `state`'s sub-agents wait on, named by their decisions only (when their
/// runs cannot be read).
fn delegated_ids(state: &RunState) -> Vec<Pending> {
    let Some(s) = &state.suspension else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for call in &state.pending {
        let CallState::Delegated { run, decisions } = &call.at else {
            continue;
        };
        for decision in decisions {
            out.push(Pending {
                run_id: state.id.clone(),
                suspension: s.id.clone(),
                decision: decision.clone(),
                server: crate::function::FUNCTIONS.to_owned(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
                waits: super::decision::PendingWait::Approval {
                    binding: None,
                    description: None,
                    input_schema: None,
                },
                tenant: state.options.tenant.clone(),
                started_by: state.options.started_by.clone(),
                expires_at: s.expires_at,
                sub_run: Some(run.clone()),
            });
        }
    }
    out
}

/// What a sub-agent's run that ended spent counts against its parent's budget.
pub(super) fn absorb(state: &mut RunState, event: &Event) {
    if let Event::SubAgent {
        usage: Some(usage),
        model_calls,
        tool_calls,
        ..
    } = event
    {
        state.usage.add(usage);
        state.model_calls = state.model_calls.saturating_add(*model_calls);
        state.tool_calls = state.tool_calls.saturating_add(*tool_calls);
    }
}

fn sub_event(
    tool: &str,
    run: &str,
    status: String,
    spent: Option<(crate::model::Usage, u64, u64)>,
) -> Event {
    let (usage, model_calls, tool_calls) = match spent {
        Some((u, m, t)) => (Some(u), m, t),
        None => (None, 0, 0),
    };
    Event::SubAgent {
        tool: tool.to_owned(),
        run: run.to_owned(),
        status,
        usage,
        model_calls,
        tool_calls,
    }
}

/// A call that failed: the model reads why.
fn failed(why: String) -> CallEnd {
    CallEnd::Done(json!({ "error": why }).to_string(), Vec::new(), true)
}
